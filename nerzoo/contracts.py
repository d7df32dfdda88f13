"""
What the predictors, `allennlp serve`, `export`, `calibrate` and the draw commands ask of a nerzoo
model, as typed Protocols, tested with `isinstance`.  Two more are beside what they serve:
`CalibrationSource` (`nerzoo.modules.crf.calibration`) and `AuxiliaryLossSource`
(`nerzoo.modules.auxiliary_loss`).  This module imports no other part of nerzoo.
"""

from typing import Any, Dict, List, Optional, Protocol, Tuple, runtime_checkable

import torch

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
    `memory_key_positions`, and `memory.null_memory` says whether the dummy head `m_0` is a column
    (`memory` is a `nerzoo.modules.seq2seq_encoders.memory_hop.MemoryHopEncoder`).
    """

    memory: torch.nn.Module


@runtime_checkable
class GraphedModel(Protocol):
    """
    A model whose training loss the `cuda_graphs` trainer callback runs as CUDA graphs: the callback
    asks which tensors a batch's loss needs, replays `graph_loss` on them padded, and hands the loss
    and logits back for the output and metrics.
    """

    def graph_inputs(self, batch: Dict[str, Any]) -> Optional[Dict[str, Any]]:
        """The tensors of `batch` (`forward`'s keyword arguments) that its training loss reads
        (padded with zeros before they reach `graph_loss`); `None` where that loss cannot be a graph (then `forward` runs)."""
        ...

    def graph_loss(self, inputs: Dict[str, Any]) -> Tuple[torch.Tensor, torch.Tensor]:
        """The training loss and the logits (detached) of `inputs` padded with zeros, reading
        nothing on the host."""
        ...

    def graph_output(self, batch: Dict[str, Any], loss: torch.Tensor, logits: torch.Tensor) -> Dict[str, Any]:
        """`forward`'s training output for `batch` given `graph_loss`'s results (logits cut back to
        the batch's length), updating the metrics as `forward` does."""
        ...


@runtime_checkable
class Exportable(Protocol):
    """
    A model `allennlp export` writes as an ONNX graph of its scores, with what `nerzoo_runtime`
    needs to decode them.  The export command knows models only through these members.
    """

    def export_refusal(self) -> Optional[str]:
        """Why this model has no exported form (naming the part that lacks one), or `None`."""
        ...

    def export_scores(self) -> torch.nn.Module:
        """
        A traceable module (parameters shared, not copied) whose `forward(tokens, mask, parse)` maps
        the text field's tensors, the mask `(batch_size, num_tokens)` and a dict of parse tensors
        (empty for models without a parse) to the scores the runtime decodes: tag logits `(batch_size,
        num_tokens, num_tags)`, or a span classifier's span logits.  A module that reads a parse names
        its tensors in a `parse_keys` attribute (the export then parses as the reader does).  The
        export puts each part in its traced form (`HasExportForm`, allennlp's encoders' forms).
        """
        ...

    def export_decoding(self) -> Dict[str, Any]:
        """What the runtime decodes the scores with: `tagger.json`'s `tag_scheme`, `crf`
        (`LinearChainCrf.runtime_settings`), `crf_per_sentence`, `spans`, `temperature` and
        `transition_temperature`."""
        ...


@runtime_checkable
class HasExportForm(Protocol):
    """
    A module whose forward a trace cannot follow over every batch (packed sequences, data-dependent
    loops): `export_form()` is a module with the same `forward` and the same parameters (shared,
    not copied) that a trace follows over any batch size and length.
    """

    def export_form(self) -> torch.nn.Module: ...
