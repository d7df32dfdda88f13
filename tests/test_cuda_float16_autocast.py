"""
Every shipped config and tiny experiment under CUDA's float16 autocast (the trainer's `use_amp` on a
GPU), emulated on the CPU by tests/cuda_autocast.py: cuDNN's LSTM and the matrix products in
float16, softmax and the sums in float32. A training step gives a finite loss, close to the float32
one, and finite gradients for exactly the parameters that get one in float32.
"""

import pathlib

import pytest
import torch

from tests import FIXTURES_ROOT
from tests.cuda_autocast import cuda_float16_autocast
from tests.test_mixed_precision import _model_and_batch
from tests.test_training_configs import CONFIGS

EXPERIMENTS = sorted((FIXTURES_ROOT / "experiments").glob("*.jsonnet"))


def _training_step(model, batch, float16: bool):
    model.train()
    model.zero_grad(set_to_none=True)
    torch.manual_seed(1)  # the same dropout masks in both precisions
    with cuda_float16_autocast() if float16 else torch.autocast("cpu", enabled=False) as mode:
        loss = model(**batch)["loss"]
    loss.backward()
    gradients = {name: parameter.grad for name, parameter in model.named_parameters() if parameter.grad is not None}
    return loss, gradients, getattr(mode, "first_non_finite", None)


@pytest.mark.parametrize("config", CONFIGS + EXPERIMENTS, ids=lambda path: path.name)
def test_training_step_under_cuda_float16_autocast(config: pathlib.Path):
    model, batch = _model_and_batch(config)
    float32_loss, float32_gradients, _ = _training_step(model, batch, float16=False)
    loss, gradients, first_non_finite = _training_step(model, batch, float16=True)
    assert first_non_finite is None, f"float16 gave a non-finite value first in {first_non_finite}"
    assert loss.dtype == torch.float32 and torch.isfinite(loss)
    # Float16 rounds each value to 3 digits; a float16 overflow kept finite (say a -65504 feature) is
    # far off.
    assert float(loss.detach()) == pytest.approx(float(float32_loss.detach()), rel=1e-3)
    assert gradients.keys() == float32_gradients.keys() and gradients
    for name, gradient in gradients.items():
        assert gradient.dtype == torch.float32 and torch.isfinite(gradient).all(), name


def test_the_emulation_casts_as_cuda_autocast_does():
    lstm = torch.nn.LSTM(4, 3, batch_first=True)
    linear = torch.nn.Linear(4, 4)
    inputs = torch.randn(2, 5, 4)
    with cuda_float16_autocast():
        hidden = linear(inputs)
        assert hidden.dtype == torch.float16 and (inputs @ inputs.transpose(1, 2)).dtype == torch.float16
        assert lstm(inputs)[0].dtype == torch.float16  # cuDNN's LSTM
        assert hidden.relu().dtype == hidden.mean().dtype == hidden.max(dim=-1)[0].dtype == torch.float16
        float32 = [hidden.softmax(-1), hidden.log_softmax(-1), hidden.sum(), hidden.logsumexp(-1), hidden.exp()]
        float32 += [torch.nn.functional.layer_norm(hidden, (4,)), hidden.cumsum(1), hidden.norm()]
        assert all(value.dtype == torch.float32 for value in float32)
        assert hidden.softmax(-1, dtype=torch.float16).dtype == torch.float16
        with torch.autocast("cpu", enabled=False):  # a float32 island (nerzoo.modules.full_precision)
            assert linear(inputs).dtype == lstm(inputs)[0].dtype == torch.float32
        assert linear(inputs).dtype == torch.float16
    assert linear(inputs).dtype == torch.float32 and not torch.is_autocast_enabled("cpu")


def test_the_emulation_names_the_first_overflow():
    with cuda_float16_autocast() as mode:
        torch.nn.functional.linear(torch.full((2, 3), 300.0), torch.full((1, 3), 100.0))
    assert mode.first_non_finite.startswith("linear, largest input 300")
