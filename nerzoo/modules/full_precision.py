"""
Float32 islands under autocast (mixed precision) for the computations that float16 breaks: CRF
chain scores summed over hundreds of steps (and products of probabilities, which underflow), and
attention over unbounded dot products, whose close, large scores float16 cannot tell apart.
"""

import contextlib
from typing import ContextManager

import torch


def without_autocast(tensor: torch.Tensor) -> ContextManager:
    """Turns autocast off for the device of `tensor` (a no-op on devices autocast does not cover)."""
    if tensor.device.type in ("cpu", "cuda"):
        return torch.autocast(tensor.device.type, enabled=False)
    return contextlib.nullcontext()


def full_precision(tensor: torch.Tensor) -> torch.Tensor:
    """`tensor` in float32 when it is float16 or bfloat16 (as under autocast), else unchanged."""
    return tensor.float() if tensor.dtype in (torch.float16, torch.bfloat16) else tensor
