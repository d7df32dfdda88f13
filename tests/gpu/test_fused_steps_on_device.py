"""
The `fused_optimizer` callback and `use_fused_steps` on DEVICE.

- Switched to fused steps, from the start or from existing state (step counters on the host),
  Adam, AdamW and SGD give the parameters that PyTorch's default steps (`foreach` on CUDA) give.
- A short allennlp training with the callback, in float32 and under `use_amp`, and one resumed from
  a checkpoint written without it: every step fused, Adam's counters on the device as float32,
  finite losses.
On the CPU (`NERZOO_TEST_DEVICE=cpu`) the callback leaves the optimizer as configured: the same
trainings, nothing fused.
"""

import math

import pytest
import torch

from tests.gpu.device_under_test import CUDA_DEVICE, DEVICE, skip_unless_the_device_is_available
from tests.training.fused_optimizer_runs import RecordSteps, check_switched_steps_equal_the_unswitched, tiny_trainer

skip_unless_the_device_is_available()

CALLBACKS = ["fused_optimizer", "test_record_optimizer_steps"]


@pytest.mark.parametrize("switch_at", [0, 2], ids=["from_the_start", "from_existing_state"])
@pytest.mark.parametrize("name", ["adam", "adamw", "sgd_momentum"])
def test_switched_steps_equal_the_default_ones(name, switch_at):
    check_switched_steps_equal_the_unswitched(name, switch_at, DEVICE)


def _check_record(record: RecordSteps, batches: int, adam: bool) -> None:
    assert len(record.groups) == batches
    fused = DEVICE.type == "cuda"
    assert all(groups == [(True, False) if fused else (None, None)] for groups in record.groups), record.groups[0]
    if adam:
        assert record.counters == {(DEVICE.type if fused else "cpu", torch.float32)}
    assert all(math.isfinite(loss) for loss in record.losses), record.losses


@pytest.mark.parametrize("use_amp", [False, True], ids=["float32", "use_amp"])
@pytest.mark.parametrize("optimizer", ["adam", "sgd_momentum"])
def test_a_training_with_it(tmp_path, optimizer, use_amp):
    if use_amp and DEVICE.type != "cuda":
        pytest.skip("allennlp's use_amp needs CUDA")
    trainer = tiny_trainer(tmp_path, CALLBACKS, optimizer, num_epochs=3, cuda_device=CUDA_DEVICE, use_amp=use_amp)
    trainer.train()
    record = RecordSteps.runs[-1]
    _check_record(record, batches=12, adam=optimizer == "adam")
    if optimizer == "adam" and use_amp:
        # The gradient scaler skips the steps whose gradients overflow float16 (the first few, at
        # its initial scale), and the optimizer counts those it takes.
        assert 1 <= record.steps <= 12
    elif optimizer == "adam":
        assert record.steps == 12
    assert all(torch.isfinite(parameter).all() for parameter in trainer.model.parameters())


def test_a_training_resumed_from_a_checkpoint_without_it(tmp_path):
    tiny_trainer(tmp_path, [], num_epochs=1, cuda_device=CUDA_DEVICE).train()
    # The checkpoint's counters were kept on the host (PyTorch's default); they move to the device.
    trainer = tiny_trainer(tmp_path, CALLBACKS, num_epochs=2, cuda_device=CUDA_DEVICE)
    trainer.train()
    record = RecordSteps.runs[-1]
    _check_record(record, batches=4, adam=True)
    assert record.steps == 8
