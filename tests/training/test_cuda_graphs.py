"""
`StepGraphs` and the `cuda_graphs` callback on the CPU, where `graph_loss` runs eagerly on the
padded inputs: a training step through it gives the loss, gradients, outputs and metrics of the
plain step, the padding reaches what a graph would replay, and it reads nothing back from the
device (the `meta` device); models without a graphed loss are refused before training.  The
graphs themselves run in tests/gpu.
"""

import copy
from types import SimpleNamespace

import pytest
import torch
from allennlp.common.checks import ConfigurationError
from allennlp.data.batch import Batch
from allennlp.nn import util

from nerzoo.contracts import GraphedModel
from nerzoo.training.callbacks.cuda_graphs import CudaGraphs
from nerzoo.training.step_graphs import StepGraphs, use_step_graphs
from tests import PROJECT_ROOT
from tests.test_training_configs import build_on_fixtures


def _without_dropout(model):
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    return model.train()


def _batches(instances, vocab, size):
    instances = sorted(instances, key=lambda instance: len(instance["tokens"]))
    for start in range(0, len(instances), size):
        batch = Batch(instances[start : start + size])
        batch.index_instances(vocab)
        yield batch.as_tensor_dict()


def test_pad_rounds_tokens_and_characters_up_with_zeros():
    graphs = StepGraphs(length_multiple=8, character_multiple=4)
    ids = torch.arange(1, 31).reshape(3, 10)
    assert graphs.pad(ids).shape == (3, 16)
    assert torch.equal(graphs.pad(ids)[:, :10], ids) and not graphs.pad(ids)[:, 10:].any()
    assert graphs.pad(torch.ones(3, 10, 5, dtype=torch.long)).shape == (3, 16, 8)
    assert graphs.pad(torch.ones(3, 10, 5)).shape == (3, 16, 5)  # features are not padded
    assert graphs.pad(torch.ones(3, 16, 8, dtype=torch.long)).shape == (3, 16, 8)
    assert graphs.pad(torch.ones(3)).shape == (3,)
    with pytest.raises(ConfigurationError, match="length_multiple"):
        StepGraphs(length_multiple=0)


@pytest.mark.parametrize("config", ["bilstm_crf.jsonnet", "bilstm_crf_gpu.jsonnet"])
def test_a_step_through_the_padded_loss_is_the_plain_step(config):
    model, instances, vocab = build_on_fixtures(PROJECT_ROOT / "training_config" / config)
    assert isinstance(model, GraphedModel)
    plain = _without_dropout(model)
    graphed = copy.deepcopy(plain)
    graphs = StepGraphs(length_multiple=8, character_multiple=8, capture=False)
    use_step_graphs(graphed, graphs)
    lengths = []
    for tensors in _batches(instances, vocab, 3):
        lengths.append(tensors["tokens"]["tokens"]["tokens"].size(1))
        outputs = []
        for model in (plain, graphed):
            model.zero_grad(set_to_none=True)
            output = model(**tensors)
            output["loss"].backward()
            outputs.append((output, {name: parameter.grad for name, parameter in model.named_parameters()}))
        (output, gradients), (graphed_output, graphed_gradients) = outputs
        torch.testing.assert_close(graphed_output["loss"], output["loss"])
        torch.testing.assert_close(graphed_output["logits"], output["logits"])
        # A graphed training step returns no attention weights (nothing reads them in training).
        assert graphed_output.keys() == output.keys() - set(plain.attention_keys())
        assert graphed_gradients.keys() == gradients.keys()
        for name, gradient in gradients.items():
            if gradient is None:
                assert graphed_gradients[name] is None, name
            else:
                torch.testing.assert_close(graphed_gradients[name], gradient, msg=name)
    assert any(length % 8 for length in lengths), "no batch was padded"
    assert graphs.eager_runs == len(lengths) and graphs.replays == 0
    assert graphed.get_metrics(reset=True) == pytest.approx(plain.get_metrics(reset=True))
    # Evaluation runs as before.
    graphed.eval()
    graphed(**next(_batches(instances, vocab, 3)))
    assert graphs.eager_runs == len(lengths)


def test_the_padded_loss_reads_nothing_back_from_the_device():
    model, instances, vocab = build_on_fixtures(PROJECT_ROOT / "training_config" / "bilstm_crf.jsonnet")
    meta = torch.device("meta")
    model.to(meta).train()
    use_step_graphs(model, StepGraphs(capture=False))
    tensors = next(_batches(instances, vocab, 8))
    output = model(**util.move_to_device(tensors, meta))
    output["loss"].backward()
    assert output["loss"].device.type == "meta" and output["logits"].size(1) == tensors["tags"].size(1)


def test_the_callback_leaves_a_cpu_model_eager_and_refuses_what_it_cannot_graph():
    model, _, _ = build_on_fixtures(PROJECT_ROOT / "training_config" / "bilstm_crf.jsonnet")
    callback = CudaGraphs("unused")
    callback.on_start(SimpleNamespace(model=model, _num_gradient_accumulation_steps=1, _distributed=False))
    assert "forward" not in vars(model)  # its own forward: the CPU trains eagerly
    with pytest.raises(ConfigurationError, match="gradient accumulation"):
        callback.on_start(SimpleNamespace(model=model, _num_gradient_accumulation_steps=2, _distributed=False))
    for config in ("fofe_ner.jsonnet", "deptree_ner_gpu.jsonnet"):
        other, _, _ = build_on_fixtures(PROJECT_ROOT / "training_config" / config)
        with pytest.raises(ConfigurationError, match="no graph_loss to capture; train it without `cuda_graphs`"):
            callback.on_start(SimpleNamespace(model=other, _num_gradient_accumulation_steps=1, _distributed=False))


def test_the_module_a_graph_captures_runs_graph_loss_on_flat_tensors():
    from torch.utils._pytree import tree_flatten

    from nerzoo.training.step_graphs import _GraphBody

    model, instances, vocab = build_on_fixtures(PROJECT_ROOT / "training_config" / "bilstm_crf.jsonnet")
    _without_dropout(model)
    tensors = next(_batches(instances, vocab, 4))
    inputs = {name: value for name, value in tensors.items() if name != "metadata"}
    leaves, spec = tree_flatten(inputs)
    body = _GraphBody(model, spec)
    assert all(isinstance(leaf, torch.Tensor) for leaf in leaves)
    assert dict(body.named_parameters()).keys() == {f"model.{name}" for name, _ in model.named_parameters()}
    loss, logits = body(*leaves)
    expected_loss, expected_logits = model.graph_loss(inputs)
    torch.testing.assert_close(loss, expected_loss)
    torch.testing.assert_close(logits, expected_logits)


class _RecordingLoss(torch.nn.Module):
    """A `graph_loss` that records CUDA's autocast state where it runs."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(8))
        self.autocast: list = []

    def graph_loss(self, inputs):
        self.autocast.append((torch.is_autocast_enabled("cuda"), torch.get_autocast_dtype("cuda")))
        loss = (inputs["tags"].float() * self.weight).sum()
        return loss, loss.detach()


def test_a_capture_autocasts_the_forward_alone_on_copies_of_the_batch(monkeypatch):
    from torch.utils._pytree import tree_flatten

    captured = {}

    def make_graphed_callables(body, sample_args, allow_unused_input):
        # The real one runs its warm-up and captured backward passes here, where it is called.
        captured["autocast where the backward runs"] = torch.is_autocast_enabled("cuda")
        captured["sample_args"] = sample_args
        body(*sample_args)
        return body

    monkeypatch.setattr(torch.cuda, "make_graphed_callables", make_graphed_callables)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # autocast("cuda") turns on without a GPU
    model, graphs = _RecordingLoss(), StepGraphs()
    tags = torch.arange(16).view(2, 8)  # 8 tokens: no padding, so the batch's own tensor
    (padded,), spec = tree_flatten({"tags": graphs.pad(tags)})
    assert padded is tags
    with torch.autocast("cuda", dtype=torch.float16, cache_enabled=False):  # as `use_amp` trains
        graphs._capture(model, spec, [padded], torch.float16)
    assert captured["autocast where the backward runs"] is False
    assert model.autocast == [(True, torch.float16)]
    (sample,) = captured["sample_args"]
    assert sample is not tags and sample.data_ptr() != tags.data_ptr() and torch.equal(sample, tags)


def test_a_step_through_the_graphs_starts_from_no_gradients():
    model, graphs = _RecordingLoss(), StepGraphs(capture=False)
    model.weight.grad = torch.zeros(8)  # zeroed in place, as allennlp's MultiOptimizer does
    loss, _ = graphs(model, {"tags": torch.ones(2, 8, dtype=torch.long)})
    assert model.weight.grad is None
    loss.backward()
    torch.testing.assert_close(model.weight.grad, torch.full((8,), 2.0))
