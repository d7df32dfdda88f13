"""
A model's training loss as CUDA graphs, one per padded input shape.
"""

import logging
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch
from allennlp.common.checks import ConfigurationError
from torch.utils._pytree import TreeSpec, tree_flatten, tree_unflatten

from nerzoo.contracts import GraphedModel
from nerzoo.modules.auxiliary_loss import auxiliary_loss_sources

logger = logging.getLogger(__name__)

# (the padded inputs' shapes and dtypes, the autocast dtype or None)
_Key = Tuple[Tuple[Tuple[torch.Size, torch.dtype], ...], Optional[torch.dtype]]


class StepGraphs:
    """
    Runs a model's `graph_loss` (`nerzoo.contracts.GraphedModel`: its training forward as tensors
    in, tensors out) as CUDA graphs (`torch.cuda.make_graphed_callables`): forward and backward are
    one replay each, where eager code launches a kernel per operator (docs/gpu.md).

    A graph replays fixed shapes, so the inputs are zero-padded: dimension 1 (tokens) to a multiple
    of `length_multiple`, an integer input's further dimensions (characters) to a multiple of
    `character_multiple`; zero is the padding id, so loss and gradients are those of the unpadded
    batch.  One graph per padded shape and autocast state, captured when first met; past
    `max_graphs` a new shape takes the model's plain step.  Off CUDA, or with `capture = False`,
    `graph_loss` runs eagerly on the padded inputs.  Not for gradient accumulation: a replay's
    parameter gradients are the graph's own buffers, which the next replay overwrites.

    # Parameters

    length_multiple : `int`, optional (default = `8`)
    character_multiple : `int`, optional (default = `8`)
    max_graphs : `int`, optional (default = `64`)
    capture : `bool`, optional (default = `True`)
    """

    def __init__(
        self, length_multiple: int = 8, character_multiple: int = 8, max_graphs: int = 64, capture: bool = True
    ) -> None:
        if length_multiple < 1 or character_multiple < 1 or max_graphs < 0:
            raise ConfigurationError(
                "StepGraphs: length_multiple and character_multiple must be >= 1 and max_graphs >= 0, got "
                f"{length_multiple}, {character_multiple}, {max_graphs}"
            )
        self.length_multiple = length_multiple
        self.character_multiple = character_multiple
        self.max_graphs = max_graphs
        self.capture = capture
        self._graphs: Dict[_Key, Callable[..., Any]] = {}
        self.replays = 0
        self.eager_runs = 0  # padded, off CUDA or without capture
        self.plain_steps = 0  # new shapes past max_graphs

    @property
    def num_graphs(self) -> int:
        return len(self._graphs)

    def clear(self) -> None:
        """Drops the graphs (and so their memory)."""
        self._graphs.clear()

    def __call__(self, model: torch.nn.Module, inputs: Dict[str, Any]) -> Optional[Tuple[torch.Tensor, ...]]:
        """
        `model.graph_loss(inputs)` on the padded `inputs` (tensors, in dicts at any
        depth), as a graph replay; `None` for a new shape past `max_graphs` (the model's plain
        step is then the faster).  Its outputs keep the padded shapes; on CUDA they are the
        graph's buffers, which the next replay overwrites.
        """
        # A step starts from no gradients: a `grad` zeroed in place (as allennlp's `MultiOptimizer`
        # does) would be the graph's own buffer, added to itself by the next replay.
        for parameter in model.parameters():
            parameter.grad = None
        leaves, spec = tree_flatten(inputs)
        padded = [self.pad(leaf) for leaf in leaves]
        if not (self.capture and padded and padded[0].is_cuda):
            self.eager_runs += 1
            return model.graph_loss(tree_unflatten(padded, spec))
        dtype = torch.get_autocast_dtype("cuda") if torch.is_autocast_enabled("cuda") else None
        key: _Key = (tuple((leaf.shape, leaf.dtype) for leaf in padded), dtype)
        graphed = self._graphs.get(key)
        if graphed is None:
            if len(self._graphs) >= self.max_graphs:
                self.plain_steps += 1
                return None
            graphed = self._capture(model, spec, padded, dtype)
            self._graphs[key] = graphed
        self.replays += 1
        return graphed(*padded)

    def pad(self, tensor: torch.Tensor) -> torch.Tensor:
        """`tensor` with zeros after its dimension 1 (and, for integers, the later ones) to the multiples."""
        if tensor.dim() < 2:
            return tensor
        multiples = [self.length_multiple] + [
            self.character_multiple if not tensor.is_floating_point() else 1 for _ in range(tensor.dim() - 2)
        ]
        padding: List[int] = []
        for size, multiple in zip(reversed(tensor.shape[1:]), reversed(multiples)):
            padding += [0, -size % multiple]
        if not any(padding):
            return tensor
        return torch.nn.functional.pad(tensor, padding)

    def _capture(
        self,
        model: torch.nn.Module,
        spec: TreeSpec,
        padded: List[torch.Tensor],
        dtype: Optional[torch.dtype],
    ) -> Callable[..., Any]:
        body = _GraphBody(model, spec, dtype)
        logger.info(
            "StepGraphs: capturing %s's training loss for inputs %s (graph %d)",
            type(model).__name__,
            [tuple(leaf.shape) for leaf in padded],
            len(self._graphs) + 1,
        )
        # Autocast off around the capture (the body's forward sets it), as allennlp's `backward` runs
        # outside autocast; the sample inputs become the graph's buffers, so copies, not the batch's.
        try:
            with torch.autocast("cuda", enabled=False, cache_enabled=False):
                return torch.cuda.make_graphed_callables(
                    body, tuple(leaf.clone() for leaf in padded), allow_unused_input=True
                )
        except RuntimeError as error:  # e.g. an operation that reads the device from the host
            raise ConfigurationError(
                f"StepGraphs: {type(model).__name__}'s training loss could not be captured as a CUDA graph "
                f"for inputs {[tuple(leaf.shape) for leaf in padded]}: {error}. Train without `cuda_graphs`."
            ) from error


class _GraphBody(torch.nn.Module):
    """
    The callable a graph captures: flat tensors in, `model.graph_loss`'s tensors out, under CUDA's
    autocast to `dtype` (`None`: off) without its cast cache, which `make_graphed_callables` refuses.
    """

    def __init__(self, model: torch.nn.Module, spec: TreeSpec, dtype: Optional[torch.dtype] = None) -> None:
        super().__init__()
        self.model = model
        self.spec = spec
        self.dtype = dtype

    def forward(self, *leaves: torch.Tensor) -> Tuple[torch.Tensor, ...]:  # type: ignore
        enabled = self.dtype is not None
        with torch.autocast("cuda", dtype=self.dtype or torch.float16, enabled=enabled, cache_enabled=False):
            return self.model.graph_loss(tree_unflatten(list(leaves), self.spec))


def use_step_graphs(model: torch.nn.Module, graphs: Optional[StepGraphs]) -> None:
    """
    Runs a `GraphedModel`'s training batches through `graphs` from now on (`None`: its own `forward`
    again), by `GraphedForward` in place of `forward` on this instance.
    """
    model.__dict__.pop("forward", None)
    if graphs is None:
        return
    if auxiliary_loss_sources(model):
        raise ConfigurationError(
            f"{type(model).__name__}: its modules add auxiliary losses, which a CUDA graph of the loss would not see"
        )
    model.forward = GraphedForward(model, graphs)


class GraphedForward:
    """
    A `GraphedModel`'s `forward` with its training loss run by `StepGraphs`: for a training batch
    that `graph_inputs` accepts, `graph_loss` on the padded tensors (a graph replay) and
    `graph_output` for the output and metrics; otherwise the model's own `forward`.
    """

    def __init__(self, model: GraphedModel, graphs: StepGraphs) -> None:
        self.model = model
        self.graphs = graphs

    def __call__(self, **batch: Any) -> Dict[str, Any]:
        model = self.model
        plain = type(model).forward
        if not model.training:  # type: ignore[attr-defined]
            return plain(model, **batch)
        inputs = model.graph_inputs(batch)
        graphed = None if inputs is None else self.graphs(model, inputs)  # type: ignore
        if graphed is None:
            return plain(model, **batch)
        loss, logits = graphed
        return model.graph_output(batch, loss, logits)
