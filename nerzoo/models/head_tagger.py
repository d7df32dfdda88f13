from typing import Any, Dict, List, Optional, Tuple

import torch
from allennlp.data import Vocabulary
from allennlp.models.model import Model
from allennlp.nn.util import get_text_field_mask

from nerzoo.modules.auxiliary_loss import AuxiliaryLossCollector
from nerzoo.modules.crf.tag_head import TagHead


class HeadTagger(Model):
    """
    The tail of every tagger whose last layer is a `TagHead`: a subclass encodes its input to
    `(batch_size, num_tokens, encoded_dim)`, builds `self.head` with that `input_dim`, and hands the
    encoding to `tag`, which adds the auxiliary losses, runs the head and copies the words.  Output,
    metrics and labels are the head's.  A `TagProbabilityModel`, an `AttentionModel` and, through
    `export_encoding`, an `Exportable`; its head is its `CalibrationSource` (`model.head`).

    # Parameters

    vocab : `Vocabulary`, required
    **kwargs : passed to `Model` (e.g. `regularizer`, `serialization_dir`)
    """

    head: TagHead
    default_predictor = "sequence_tagger"
    # The parse tensors `export_encoding` reads (`tagger.json`'s `dependency_parse` indexer).
    PARSE_KEYS: Tuple[str, ...] = ()

    def __init__(self, vocab: Vocabulary, **kwargs) -> None:
        super().__init__(vocab, **kwargs)
        self._auxiliary_losses = AuxiliaryLossCollector()

    def tag(
        self,
        encoded: torch.Tensor,
        mask: torch.BoolTensor,
        tags: Optional[torch.LongTensor] = None,
        metadata: Optional[List[Dict[str, Any]]] = None,
    ) -> Dict[str, Any]:
        """
        # Parameters

        encoded : `torch.Tensor`, `(batch_size, num_tokens, encoded_dim)`
        mask : `torch.BoolTensor`, `(batch_size, num_tokens)`
        tags : `torch.LongTensor`, optional, `(batch_size, num_tokens)` gold tag ids
        metadata : `List[Dict]`, optional; `words` is copied to the output, `sentence_spans` used
            by the head

        # Returns

        What `TagHead.forward` returns (its `loss` including the auxiliary losses), plus `words`
        when metadata is given.
        """
        return _with_words(self.head(encoded, mask, tags, metadata, self._auxiliary_losses.pop(self)), metadata)

    def graph_output(self, batch: Dict[str, Any], loss: torch.Tensor, logits: torch.Tensor) -> Dict[str, Any]:
        """
        `tag`'s training output for `batch` from the loss and padded logits of a subclass's
        `graph_loss` (`nerzoo.contracts.GraphedModel`), with the same metrics.
        """
        mask = get_text_field_mask(batch["tokens"])
        metadata = batch.get("metadata")
        # A graph's buffers are overwritten by its next replay: the metrics keep a copy.
        logits = logits[:, : mask.size(1)].clone()
        return _with_words(self.head.finish(logits, mask, batch["tags"], metadata, loss=loss), metadata)

    def graphable(self, batch: Dict[str, Any]) -> bool:
        """Whether `graph_loss` gives `batch`'s training loss: it has tags, and the head scores
        one CRF chain per row, every token annotated (`TagHead.graphable`)."""
        if batch.get("tags") is None:
            return False
        mask, metadata = get_text_field_mask(batch["tokens"]), batch.get("metadata")
        return self.head.graphable(self.head.sentence_spans(metadata, mask), metadata)

    @property
    def label_namespace(self) -> str:
        return self.head.label_namespace

    def tag_labels(self) -> List[str]:
        return self.head.tag_labels()

    def attention_keys(self) -> Tuple[str, ...]:
        """None by default; models with attention outputs list them."""
        return ()

    def export_refusal(self) -> Optional[str]:
        """`Exportable`: none by default; models with parts the export cannot trace name them."""
        return None

    def export_scores(self) -> torch.nn.Module:
        """`Exportable`: the head's logits of `export_encoding` (`TagScores`)."""
        return TagScores(self)

    def export_decoding(self) -> Dict[str, Any]:
        """`Exportable`: the head's tag scheme, CRF and temperatures (`TagHead.export_decoding`)."""
        return self.head.export_decoding()

    def export_encoding(
        self, tokens: Dict[str, Dict[str, torch.Tensor]], mask: torch.BoolTensor, parse: Dict[str, torch.Tensor]
    ) -> torch.Tensor:
        """The encoding `(batch_size, num_tokens, input_dim)` the head reads at prediction, from the
        text field's tensors, the mask and the parse tensors `PARSE_KEYS` names."""
        raise NotImplementedError(f"{type(self).__name__} has no export_encoding")

    def make_output_human_readable(self, output_dict: Dict[str, Any]) -> Dict[str, Any]:
        return self.head.make_output_human_readable(output_dict)

    def get_metrics(self, reset: bool = False) -> Dict[str, float]:
        return self.head.get_metrics(reset)


def _with_words(output: Dict[str, Any], metadata: Optional[List[Dict[str, Any]]]) -> Dict[str, Any]:
    """`output` with each instance's `words` from `metadata`, when given."""
    if metadata is not None:
        output["words"] = [instance_metadata["words"] for instance_metadata in metadata]
    return output


class TagScores(torch.nn.Module):
    """
    A `HeadTagger`'s (held, not copied) tag logits `(batch_size, num_tokens, num_tags)` as `allennlp
    export` traces them: its `export_encoding`, then its head's projection.
    """

    def __init__(self, model: HeadTagger) -> None:
        super().__init__()
        self.model = model
        self.parse_keys = model.PARSE_KEYS

    def forward(
        self, tokens: Dict[str, Dict[str, torch.Tensor]], mask: torch.BoolTensor, parse: Dict[str, torch.Tensor]
    ) -> torch.Tensor:
        return self.model.head.logits(self.model.export_encoding(tokens, mask, parse))
