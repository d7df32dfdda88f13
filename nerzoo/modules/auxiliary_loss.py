"""
A way for any embedder or encoder inside a nerzoo model to add a term to the model's loss.

A module calls `add_auxiliary_loss(self, "name", loss)` during its forward pass; the model, after
its forward pass, calls `pop_auxiliary_losses(self)`, which collects every reported term from all
submodules (and clears them, so a loss is never counted twice).  An `AuxiliaryLosses` (held by
`TagHead` and by models with their own loss) adds them to the loss and reports each one's running
mean as the metric `<name>_loss`.  Modules need no base class for this, so
it works for any TokenEmbedder or Seq2SeqEncoder used inside any nerzoo model.
"""

import weakref
from typing import Dict, Optional

import torch
from allennlp.training.metrics import Average

_ATTRIBUTE = "_nerzoo_auxiliary_losses"
# Modules holding reported terms, so that a model with none skips walking its modules.
_PENDING: "weakref.WeakSet[torch.nn.Module]" = weakref.WeakSet()


def add_auxiliary_loss(module: torch.nn.Module, name: str, loss: torch.Tensor) -> None:
    """Reports a scalar loss term (already weighted); repeated reports under one name are summed."""
    if loss.dim() != 0:
        raise ValueError(f"auxiliary loss {name!r} must be a scalar, got shape {tuple(loss.shape)}")
    pending: Dict[str, torch.Tensor] = module.__dict__.setdefault(_ATTRIBUTE, {})
    pending[name] = pending[name] + loss if name in pending else loss
    _PENDING.add(module)


def pop_auxiliary_losses(root: torch.nn.Module) -> Dict[str, torch.Tensor]:
    """Collects and clears the terms reported by `root` and all its submodules."""
    collected: Dict[str, torch.Tensor] = {}
    if not _PENDING:
        return collected
    for module in root.modules():
        pending = module.__dict__.pop(_ATTRIBUTE, None)
        _PENDING.discard(module)
        for name, loss in (pending or {}).items():
            collected[name] = collected[name] + loss if name in collected else loss
    return collected


class AuxiliaryLosses:
    """Adds the collected terms to a loss and keeps each one's running mean for `get_metrics`."""

    def __init__(self) -> None:
        self._means: Dict[str, Average] = {}

    def add_to(self, loss: torch.Tensor, auxiliary_losses: Optional[Dict[str, torch.Tensor]]) -> torch.Tensor:
        for name, value in (auxiliary_losses or {}).items():
            loss = loss + value
            self._means.setdefault(name, Average())(value.detach())
        return loss

    def get_metrics(self, reset: bool = False) -> Dict[str, float]:
        return {f"{name}_loss": mean.get_metric(reset) for name, mean in self._means.items()}
