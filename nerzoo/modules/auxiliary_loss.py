"""
A way for any embedder or encoder inside a nerzoo model to add a term to the model's loss.

A module calls `add_auxiliary_loss(self, "name", loss)` during its forward pass; the model, after
its forward pass, calls `pop_auxiliary_losses(self)`, which collects every reported term from all
submodules (and clears them, so a loss is never counted twice).  `CrfTagHead` adds them to its
loss and reports each one's running mean as a metric.  Modules need no base class for this, so
it works for any TokenEmbedder or Seq2SeqEncoder used inside any nerzoo model.
"""
from typing import Dict

import torch

_ATTRIBUTE = "_nerzoo_auxiliary_losses"


def add_auxiliary_loss(module: torch.nn.Module, name: str, loss: torch.Tensor) -> None:
    """Reports a scalar loss term (already weighted); repeated reports under one name are summed."""
    if loss.dim() != 0:
        raise ValueError(f"auxiliary loss {name!r} must be a scalar, got shape {tuple(loss.shape)}")
    pending: Dict[str, torch.Tensor] = module.__dict__.setdefault(_ATTRIBUTE, {})
    pending[name] = pending[name] + loss if name in pending else loss


def pop_auxiliary_losses(root: torch.nn.Module) -> Dict[str, torch.Tensor]:
    """Collects and clears the terms reported by `root` and all its submodules."""
    collected: Dict[str, torch.Tensor] = {}
    for module in root.modules():
        pending = module.__dict__.pop(_ATTRIBUTE, None)
        for name, loss in (pending or {}).items():
            collected[name] = collected[name] + loss if name in collected else loss
    return collected
