from typing import Any, Dict, List, Optional, Tuple

import torch
from allennlp.common import Lazy
from allennlp.common.checks import check_dimensions_match
from allennlp.data import TextFieldTensors, Vocabulary
from allennlp.models.model import Model
from allennlp.modules import Seq2SeqEncoder, TextFieldEmbedder
from allennlp.nn import InitializerApplicator
from allennlp.nn.util import get_text_field_mask

from nerzoo.models.head_tagger import HeadTagger
from nerzoo.modules.crf.tag_head import TagHead
from nerzoo.modules.variational_dropout import VariationalDropout


@Model.register("bilstm_crf")
class BiLstmCrf(HeadTagger):
    """
    The baseline tagger: word (and character) embeddings, a Seq2SeqEncoder (a BiLSTM in the shipped
    config), and `TagHead`.  This is the BiLSTM-CNN-CRF of Ma & Hovy (2016), "End-to-end Sequence
    Labeling via Bi-directional LSTM-CNNs-CRF", https://aclanthology.org/P16-1101, and the yardstick
    every paper model in nerzoo is compared against.  The tail (`tag`, metrics, output, span
    confidences) is `HeadTagger`'s.

    Registered as a `Model` with name "bilstm_crf".

    # Parameters

    vocab : `Vocabulary`, required
    text_field_embedder : `TextFieldEmbedder`, required
        Embeds `tokens` to `(batch_size, num_tokens, embedding_dim)`.
    encoder : `Seq2SeqEncoder`, required
        Maps that to `(batch_size, num_tokens, encoder_dim)`.
    head : `Lazy[TagHead]`, optional (default = `TagHead` with its defaults)
        Built with `input_dim = encoder_dim`; configure its tag scheme, hidden layer and dropout here.
    dropout : `float`, optional (default = `0.0`)
        Variational (per-sequence) dropout on the embeddings and on the encoder output.
    initializer : `InitializerApplicator`, optional
    """

    def __init__(
        self,
        vocab: Vocabulary,
        text_field_embedder: TextFieldEmbedder,
        encoder: Seq2SeqEncoder,
        head: Lazy[TagHead] = Lazy(TagHead),
        dropout: float = 0.0,
        initializer: InitializerApplicator = InitializerApplicator(),
        **kwargs,
    ) -> None:
        super().__init__(vocab, **kwargs)
        check_dimensions_match(
            text_field_embedder.get_output_dim(),
            encoder.get_input_dim(),
            "text field embedding dim",
            "encoder input dim",
        )
        self.text_field_embedder = text_field_embedder
        self.encoder = encoder
        self.dropout = VariationalDropout(dropout)
        self.head = head.construct(vocab=vocab, input_dim=encoder.get_output_dim())
        initializer(self)

    def forward(  # type: ignore
        self,
        tokens: TextFieldTensors,
        tags: Optional[torch.LongTensor] = None,
        metadata: Optional[List[Dict[str, Any]]] = None,
        **kwargs,
    ) -> Dict[str, Any]:
        """
        # Parameters

        tokens : `TextFieldTensors`, from a `TextField`
        tags : `torch.LongTensor`, optional, `(batch_size, num_tokens)`
        metadata : `List[Dict]`, optional; `words` and `sentence_spans` are used
        **kwargs : other fields of the reader (e.g. `pos_tags`), unused here

        # Returns

        What `TagHead.forward` returns, plus `words` when metadata is given.
        """
        mask = get_text_field_mask(tokens)
        return self.tag(self._encode(tokens, mask), mask, tags, metadata)

    def _encode(self, tokens: TextFieldTensors, mask: torch.BoolTensor) -> torch.Tensor:
        embedded = self.dropout(self.text_field_embedder(tokens))
        return self.dropout(self.encoder(embedded, mask))

    def export_encoding(self, tokens: TextFieldTensors, mask: torch.BoolTensor, parse: Dict[str, Any]) -> torch.Tensor:
        """`Exportable` (through `HeadTagger.export_scores`): the encoding the head reads."""
        return self._encode(tokens, mask)

    def graph_inputs(self, batch: Dict[str, Any]) -> Optional[Dict[str, Any]]:
        """For the `cuda_graphs` callback (`nerzoo.contracts.GraphedModel`): `tokens` and `tags`."""
        return {"tokens": batch["tokens"], "tags": batch["tags"]} if self.graphable(batch) else None

    def graph_loss(self, inputs: Dict[str, Any]) -> Tuple[torch.Tensor, torch.Tensor]:
        """
        The training loss and logits (detached, `(batch_size, num_tokens, num_tags)`) of `inputs`
        (`tokens`, `tags`) as tensors only: what `StepGraphs` captures.  `forward` gives the same
        loss for a batch of one CRF chain per row (`TagHead.graphable`).
        """
        tokens = inputs["tokens"]
        mask = get_text_field_mask(tokens)
        return self.head.graph_loss(self._encode(tokens, mask), mask, inputs["tags"])
