"""
How a module inside a nerzoo model adds a term to the model's loss: it is an `AuxiliaryLossSource`
(the `char_gated` token embedder; any `TokenEmbedder` or `Seq2SeqEncoder` can be) that keeps its
terms in an `AuxiliaryLossTerms` until `pop_auxiliary_losses()` hands them over and clears them.  A
model finds its sources once (`AuxiliaryLossCollector`), and an `AuxiliaryLosses` (held by `TagHead`
and by models with their own loss) adds their terms to the loss and reports each one's running mean
as the metric `<name>_loss`.
"""

from typing import Dict, Iterable, List, Optional, Protocol, runtime_checkable

import torch
from allennlp.training.metrics import Average


@runtime_checkable
class AuxiliaryLossSource(Protocol):
    """
    A module that adds terms to the loss of the model it is in: it keeps the scalar terms of its
    forward passes since they were last handed over, and hands them over, clearing them, by name.
    """

    def pop_auxiliary_losses(self) -> Dict[str, torch.Tensor]: ...


class AuxiliaryLossTerms:
    """The terms an `AuxiliaryLossSource` keeps until they are popped; one name's terms are summed."""

    def __init__(self) -> None:
        self._terms: Dict[str, torch.Tensor] = {}

    def add(self, name: str, loss: torch.Tensor) -> None:
        """Keeps a scalar loss term (already weighted)."""
        if loss.dim() != 0:
            raise ValueError(f"auxiliary loss {name!r} must be a scalar, got shape {tuple(loss.shape)}")
        self._terms[name] = self._terms[name] + loss if name in self._terms else loss

    def pop(self) -> Dict[str, torch.Tensor]:
        """The kept terms, which are cleared."""
        terms, self._terms = self._terms, {}
        return terms


def auxiliary_loss_sources(root: torch.nn.Module) -> List[AuxiliaryLossSource]:
    """`root` and its submodules that are `AuxiliaryLossSource`s, in `root.modules()` order."""
    return [module for module in root.modules() if isinstance(module, AuxiliaryLossSource)]


def collect_auxiliary_losses(sources: Iterable[AuxiliaryLossSource]) -> Dict[str, torch.Tensor]:
    """Pops the terms of every source; terms of one name from several sources are summed."""
    collected: Dict[str, torch.Tensor] = {}
    for source in sources:
        for name, loss in source.pop_auxiliary_losses().items():
            collected[name] = collected[name] + loss if name in collected else loss
    return collected


def pop_auxiliary_losses(root: torch.nn.Module) -> Dict[str, torch.Tensor]:
    """Collects and clears the terms kept by `root` and its submodules (e.g. a module used on its own)."""
    return collect_auxiliary_losses(auxiliary_loss_sources(root))


class AuxiliaryLossCollector:
    """
    A model's view of its sources: found among its modules at the first `pop`, then popped at each
    one.  Held by the model as a plain attribute (not a submodule: the state dict is unchanged).
    """

    def __init__(self) -> None:
        self._sources: Optional[List[AuxiliaryLossSource]] = None

    def pop(self, model: torch.nn.Module) -> Dict[str, torch.Tensor]:
        if self._sources is None:
            self._sources = auxiliary_loss_sources(model)
        return collect_auxiliary_losses(self._sources)


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

    @property
    def recorded(self) -> bool:
        """Whether any term has been added (and so has a running mean among the metrics)."""
        return bool(self._means)
