"""
The device that the GPU suite compares with the CPU: `NERZOO_TEST_DEVICE` (default `cuda`).

`make test-gpu` runs the suite on CUDA (and skips it where there is none).
`NERZOO_TEST_DEVICE=cpu` runs it on the CPU against the CPU: the comparisons are trivial, but every
line of the suite runs, which checks the suite itself on a machine without a GPU.
"""

import os

import pytest
import torch

DEVICE = torch.device(os.environ.get("NERZOO_TEST_DEVICE", "cuda"))
if DEVICE.type not in ("cuda", "cpu"):
    raise ValueError(f"NERZOO_TEST_DEVICE={DEVICE}: the GPU suite runs on cuda or cpu")
# The same device as allennlp's `--cuda-device` and `trainer.cuda_device` take it.
CUDA_DEVICE = (DEVICE.index or 0) if DEVICE.type == "cuda" else -1


def skip_unless_the_device_is_available() -> None:
    """Skips the calling test module, at collection, when DEVICE is a GPU that this process cannot see."""
    if DEVICE.type != "cuda":
        return
    if not torch.cuda.is_available():
        pytest.skip(
            "CUDA is not available: `make test-gpu` runs tests/gpu on a machine with a GPU (the CPU suite "
            "hides GPUs unless NERZOO_TEST_GPU=1); NERZOO_TEST_DEVICE=cpu runs it on the CPU",
            allow_module_level=True,
        )
    if CUDA_DEVICE >= torch.cuda.device_count():
        pytest.skip(f"{DEVICE} does not exist: {torch.cuda.device_count()} GPU(s)", allow_module_level=True)
