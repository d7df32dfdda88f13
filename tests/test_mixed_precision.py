"""
Every shipped config under float16 autocast, the casting policy of the trainer's `use_amp`, checked
with CPU autocast (the same policy, no GPU needed): a training step gives a finite loss and a
gradient to every parameter that gets one in float32, and predictions equal float32 ones.
"""

import pathlib

import pytest
import torch
from allennlp.data.batch import Batch

from tests.test_training_configs import CONFIGS, build_on_fixtures


def _model_and_batch(config: pathlib.Path):
    torch.manual_seed(0)
    model, instances, vocab = build_on_fixtures(config)
    batch = Batch(instances)
    batch.index_instances(vocab)
    return model, batch.as_tensor_dict()


def _fit(model, batch, steps: int = 60) -> None:
    """
    A few float32 Adam steps on the batch, so that its tags are decided by clear margins, as in a
    trained model: a freshly initialised model's scores are near ties, which float16 rounding may
    break either way.
    """
    model.train()
    optimizer = torch.optim.Adam([parameter for parameter in model.parameters() if parameter.requires_grad], lr=0.01)
    torch.manual_seed(2)
    for _ in range(steps):
        optimizer.zero_grad()
        model(**batch)["loss"].backward()
        optimizer.step()


def _gradients(model, batch, autocast: bool):
    model.train()
    model.zero_grad()
    torch.manual_seed(1)  # the same dropout masks
    with torch.autocast("cpu", dtype=torch.float16, enabled=autocast):
        loss = model(**batch)["loss"]
    loss.backward()
    return loss, {name: parameter.grad for name, parameter in model.named_parameters() if parameter.grad is not None}


@pytest.mark.parametrize("config", CONFIGS, ids=lambda path: path.name)
def test_training_step_under_float16_autocast(config):
    model, batch = _model_and_batch(config)
    loss, gradients = _gradients(model, batch, autocast=True)
    assert torch.isfinite(loss), float(loss)
    _, float32_gradients = _gradients(model, batch, autocast=False)
    assert set(gradients) == set(float32_gradients)
    trainable = {name for name, parameter in model.named_parameters() if parameter.requires_grad}
    assert set(gradients) <= trainable and gradients
    for name, gradient in gradients.items():
        assert gradient.dtype == torch.float32 and torch.isfinite(gradient).all(), name


@pytest.mark.parametrize("config", CONFIGS, ids=lambda path: path.name)
def test_predictions_under_float16_autocast_equal_float32_ones(config):
    model, batch = _model_and_batch(config)
    _fit(model, batch)
    model.eval()
    with torch.no_grad():
        expected = model.make_output_human_readable(model(**batch))
        with torch.autocast("cpu", dtype=torch.float16):
            output = model(**batch)
        output = model.make_output_human_readable(output)
    assert output["tags"] == expected["tags"]
    assert len(output.get("spans", [])) == len(expected.get("spans", []))
    for spans, wanted in zip(output.get("spans", []), expected.get("spans", [])):
        assert [(span["label"], span["start"], span["end"]) for span in spans] == [
            (span["label"], span["start"], span["end"]) for span in wanted
        ]
        # CRF taggers give each span a confidence, span classifiers (fofe_ner) a score.
        assert [_confidence(span) for span in spans] == pytest.approx([_confidence(span) for span in wanted], abs=0.02)


def _confidence(span) -> float:
    return span["confidence"] if "confidence" in span else span["score"]
