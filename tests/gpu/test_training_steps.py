"""
Every shipped config (the list of tests/test_training_configs.py) on DEVICE, on a batch of its
fixture instances.

- A training step in float32 and one under `torch.autocast(DEVICE.type, dtype=torch.float16)`
  (the casting of the trainer's `use_amp`; on the CPU, CUDA's casting as tests/cuda_autocast.py
  emulates it): a finite loss, and a finite gradient for exactly the parameters that get one in a
  float32 step on the CPU; the training metrics read back finite.
- In evaluation mode (no dropout) in float32, the loss and the predicted tags equal the CPU's.
"""

import contextlib
import copy
import math
import pathlib

import pytest
import torch
from allennlp.data.batch import Batch
from allennlp.nn.util import move_to_device

from tests.cuda_autocast import cuda_float16_autocast
from tests.gpu.device_under_test import DEVICE, skip_unless_the_device_is_available
from tests.test_training_configs import CONFIGS, build_on_fixtures

skip_unless_the_device_is_available()


def _model_and_batch(config: pathlib.Path):
    """The config's model on the CPU, and a function giving a fresh tensor dict of its batch on a device."""
    torch.manual_seed(0)
    model, instances, vocab = build_on_fixtures(config)
    batch = Batch(instances)
    batch.index_instances(vocab)
    # `move_to_device` moves a dict's tensors in place: every call gets its own dict.
    return model, lambda device: move_to_device(batch.as_tensor_dict(), device)


def _training_step(model, batch, autocast: bool):
    model.train()
    model.zero_grad(set_to_none=True)
    model.get_metrics(reset=True)
    torch.manual_seed(1)
    with _float16_autocast() if autocast else contextlib.nullcontext():
        loss = model(**batch)["loss"]
    loss.backward()
    gradients = {name: parameter.grad for name, parameter in model.named_parameters() if parameter.grad is not None}
    return loss, gradients, model.get_metrics(reset=True)


def _float16_autocast():
    # CPU autocast casts other operators than CUDA's (no float16 LSTM, float16 softmax and sums).
    return cuda_float16_autocast() if DEVICE.type == "cpu" else torch.autocast(DEVICE.type, dtype=torch.float16)


@pytest.mark.parametrize("config", CONFIGS, ids=lambda path: path.name)
def test_training_step_on_the_device_in_float32_and_under_autocast(config):
    model, batch = _model_and_batch(config)
    device_model = copy.deepcopy(model).to(DEVICE)
    _, cpu_gradients, _ = _training_step(model, batch(torch.device("cpu")), autocast=False)
    trainable = {name for name, parameter in model.named_parameters() if parameter.requires_grad}
    assert cpu_gradients and set(cpu_gradients) <= trainable

    for autocast in (False, True):
        precision = "float16 autocast" if autocast else "float32"
        loss, gradients, metrics = _training_step(device_model, batch(DEVICE), autocast)
        assert loss.device.type == DEVICE.type and torch.isfinite(loss), (precision, float(loss))
        assert set(gradients) == set(cpu_gradients), (precision, set(gradients) ^ set(cpu_gradients))
        for name, gradient in gradients.items():
            assert gradient.device.type == DEVICE.type and gradient.dtype == torch.float32, (precision, name)
            assert torch.isfinite(gradient).all(), (precision, name)
        assert metrics and all(math.isfinite(value) for value in metrics.values()), (precision, metrics)


@pytest.mark.parametrize("config", CONFIGS, ids=lambda path: path.name)
def test_evaluation_on_the_device_equals_the_cpu(config, ieee_float32):
    model, batch = _model_and_batch(config)
    device_model = copy.deepcopy(model).to(DEVICE)
    outputs = []
    for each, device in ((model, torch.device("cpu")), (device_model, DEVICE)):
        each.eval()
        with torch.no_grad():
            output = each(**batch(device))
            loss = float(output["loss"])
            outputs.append((loss, each.make_output_human_readable(output)["tags"]))
    (cpu_loss, cpu_tags), (device_loss, device_tags) = outputs
    # The loss sums over the batch's hundreds of tokens, in a different order on each device.
    assert device_loss == pytest.approx(cpu_loss, rel=1e-4, abs=1e-4)
    assert device_tags == cpu_tags
