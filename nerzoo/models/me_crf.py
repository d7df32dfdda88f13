from typing import Any, Dict, List, Optional, Tuple

import torch
from allennlp.common import Lazy
from allennlp.data import TextFieldTensors, Vocabulary
from allennlp.models.model import Model
from allennlp.modules import TextFieldEmbedder
from allennlp.nn import InitializerApplicator
from allennlp.nn.util import get_text_field_mask

from nerzoo.models.head_tagger import HeadTagger
from nerzoo.modules.crf.tag_head import TagHead
from nerzoo.modules.seq2seq_encoders.memory_hop import MemoryHopEncoder


@Model.register("me_crf")
class MeCrf(HeadTagger):
    """
    ME-CRF for named-entity recognition over whole documents: Liu, Baldwin and Cohn, "Capturing
    Long-range Contextual Dependencies with Memory-enhanced Conditional Random Fields", IJCNLP 2017,
    https://aclanthology.org/I17-1056, sections 3 and 5.2.

    Each instance is a document (read with `conll_columns` and `document_level: true`).  Every word
    is embedded (`x_t = Φ(x_t)`, GloVe in place of SENNA, concatenated with the six word-shape
    features `Φ_l(x_t)` of the `lexical_features` embedder), written to the document memories and
    read by the memory hops of `MemoryHopEncoder` (eq. 1-6), whose output `u^{K+1}` feeds a
    linear-chain CRF (eq. 7-10, `TagHead`).  Attention reaches every earlier word of the document,
    across sentence boundaries.  With the head's `crf_per_sentence: true` (the shipped config) the
    CRF runs over each sentence on its own, as in the paper, where `x_t` is "a word in a sentence"
    (§3); with `false` one chain runs over the whole document.  Spans are counted per sentence
    either way (the reader's `sentence_spans`).

    `forward` also returns the attention of every hop, for `allennlp draw-memory`.  Span
    confidence: `TagHead`'s, the CRF posterior of the span's exact tags.

    Registered as a `Model` with name "me_crf".

    # Parameters

    vocab : `Vocabulary`, required
    text_field_embedder : `TextFieldEmbedder`, required
        Embeds `tokens` to `(batch_size, num_tokens, embedding_dim)`.
    memory : `Lazy[MemoryHopEncoder]`, required
        Built with `input_dim = embedding_dim`; configure `hidden_dim`, `num_hops`, `window`,
        `dropout` here (no `type`).
    head : `Lazy[TagHead]`, optional (default = `TagHead` with its defaults)
        Built with `input_dim = memory_dim`; `use_crf: false` gives the MEMNET baseline (eq. 13).
    initializer : `InitializerApplicator`, optional
    """

    def __init__(
        self,
        vocab: Vocabulary,
        text_field_embedder: TextFieldEmbedder,
        memory: Lazy[MemoryHopEncoder],
        head: Lazy[TagHead] = Lazy(TagHead),
        initializer: InitializerApplicator = InitializerApplicator(),
        **kwargs,
    ) -> None:
        super().__init__(vocab, **kwargs)
        self.text_field_embedder = text_field_embedder
        self.memory = memory.construct(input_dim=text_field_embedder.get_output_dim())
        self.head = head.construct(vocab=vocab, input_dim=self.memory.get_output_dim())
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

        tokens : `TextFieldTensors`, the words of whole documents
        tags : `torch.LongTensor`, optional, `(batch_size, num_tokens)`
        metadata : `List[Dict]`, optional; `words` and `sentence_spans` are used
        **kwargs : other fields of the reader, unused here

        # Returns

        What `TagHead.forward` returns, plus `memory_attention` `(batch_size, num_hops,
        num_tokens, num_keys)` (every hop's weights, band form) and `memory_key_positions`
        `(batch_size, num_tokens, num_keys)` (the document position of each column, see
        `MemoryHopOutput`), and `words` when metadata is given.
        """
        mask = get_text_field_mask(tokens)
        embedded = self.text_field_embedder(tokens)
        memory = self.memory.attend(embedded, mask)
        output = self.tag(memory.output, mask, tags, metadata)
        output["memory_attention"] = memory.weights
        output["memory_key_positions"] = memory.key_positions().expand(mask.size(0), -1, -1)
        return output

    def attention_keys(self) -> Tuple[str, ...]:
        return ("memory_attention",)

    def export_refusal(self) -> Optional[str]:
        """`Exportable`: the memory's band attention (`window`) has no exported form."""
        if self.memory.window is not None:
            return "its memory's window (band attention) has no exported form"
        return None

    def export_encoding(self, tokens: TextFieldTensors, mask: torch.BoolTensor, parse: Dict[str, Any]) -> torch.Tensor:
        """`Exportable` (through `HeadTagger.export_scores`): the memory's output `u^{K+1}`."""
        return self.memory(self.text_field_embedder(tokens), mask)
