"""
What the consumers of a nerzoo model ask of it, as typed Protocols: the predictors, `allennlp
serve`, `allennlp calibrate` and the draw commands depend on these, not on a model's class or on
attribute names.  A model (or module) supports a feature by having the Protocol's members; the
`runtime_checkable` ones are tested with `isinstance`.

- `LabelledModel`: its labels are those of one vocabulary namespace.
- `TagProbabilityModel`: `make_output_human_readable` gives every tag's probability at every token.
- `AttentionModel`: `forward` returns attention weights a predictor can show.
- `MemoryAttentionModel`: it reads a document memory whose attention `allennlp draw-memory` draws.
- `CalibrationSource`: a model or module whose confidences `allennlp calibrate` can fit (defined
  beside the calibration it serves, `nerzoo.modules.crf.calibration`).
- `GraphedLossModel`: its training loss can run as CUDA graphs (defined beside the graphs,
  `nerzoo.training.step_graphs`).
- `AuxiliaryLossSource`: a module that adds terms to its model's loss (defined beside its
  collector, `nerzoo.modules.auxiliary_loss`).
"""

from typing import TYPE_CHECKING, List, Protocol, Tuple, runtime_checkable

from nerzoo.modules.auxiliary_loss import AuxiliaryLossSource
from nerzoo.modules.crf.calibration import CalibrationSource
from nerzoo.training.step_graphs import GraphedLossModel

if TYPE_CHECKING:
    from nerzoo.modules.seq2seq_encoders.memory_hop import MemoryHopEncoder

__all__ = [
    "ATTENTION_KEYS",
    "AttentionModel",
    "AuxiliaryLossSource",
    "CalibrationSource",
    "GraphedLossModel",
    "LabelledModel",
    "MemoryAttentionModel",
    "TagProbabilityModel",
]

ATTENTION_KEYS = ("relative_attention", "global_attention", "memory_attention")


@runtime_checkable
class LabelledModel(Protocol):
    """A model whose labels (tags, or a span classifier's entity types) are one vocabulary namespace."""

    @property
    def label_namespace(self) -> str: ...


@runtime_checkable
class TagProbabilityModel(LabelledModel, Protocol):
    """
    A tagger whose `make_output_human_readable` adds `tag_probabilities` `(batch_size, num_tokens,
    num_tags)` (every tag's posterior at every token) and `tag_probability_labels`, besides `tags`
    and `tag_confidences`.  Span classifiers (`fofe_ner`) have no tag probabilities.
    """

    def tag_labels(self) -> List[str]:
        """The labels of the last dimension of `tag_probabilities`, by tag id."""
        ...


@runtime_checkable
class AttentionModel(Protocol):
    """
    A model whose `forward` returns attention weights: `relative_attention` `(batch_size,
    num_tokens, num_tokens)`, `global_attention` `(batch_size, num_tokens)`, `memory_attention`
    `(batch_size, num_hops, num_tokens, num_keys)` with `memory_key_positions` `(batch_size,
    num_tokens, num_keys)`.
    """

    def attention_keys(self) -> Tuple[str, ...]:
        """Which of `ATTENTION_KEYS` every output of `forward` has, in that order."""
        ...


@runtime_checkable
class MemoryAttentionModel(AttentionModel, Protocol):
    """
    A model that reads a document memory (ME-CRF): `forward` returns `memory_attention` and
    `memory_key_positions`, and `memory.null_memory` says whether the dummy head `m_0` is a column.
    """

    memory: "MemoryHopEncoder"
