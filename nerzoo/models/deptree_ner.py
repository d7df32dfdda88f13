from typing import Any, Dict, List, Optional, Tuple

import torch
from allennlp.common import Lazy
from allennlp.common.checks import ConfigurationError, check_dimensions_match
from allennlp.data import TextFieldTensors, Vocabulary
from allennlp.models.model import Model
from allennlp.modules import Embedding, Seq2SeqEncoder, TextFieldEmbedder
from allennlp.nn import InitializerApplicator
from allennlp.nn.util import get_text_field_mask

from nerzoo.data.dependency_trees import DEPENDENCY_NAMESPACE, POS_NAMESPACE
from nerzoo.models.head_tagger import HeadTagger
from nerzoo.modules.crf.tag_head import TagHead
from nerzoo.modules.seq2seq_encoders.child_sum_tree_lstm import ChildSumTreeLstm
from nerzoo.modules.seq2seq_encoders.global_attention import GlobalAttention
from nerzoo.modules.seq2seq_encoders.relative_attention import RelativeAttention
from nerzoo.modules.variational_dropout import VariationalDropout


@Model.register("deptree_ner")
class DeptreeNer(HeadTagger):
    """
    Dependency-aware NER of Aguilar & Solorio (2019), "Dependency-Aware Named Entity Recognition with
    Relative and Global Attentions", https://arxiv.org/abs/1909.05166, §3.2.6 and Figure 2:

        x_i = [word_i ; pos_i ; dep_i]                                 (§3.1)
        s = BiLSTM stack(x)          t, h_root = Tree-LSTM stack(x, heads)   (§3.2.1, in parallel;
                                     bottom-up, or [up ; down] with the encoder's `top_down`)
        h = [s ; t]
        M = RelativeAttention(h)                                      (eq. 1-2)
        z = GlobalAttention(M, q = [h_root ; s_n])                    (eq. 3)
        tags = CRF(W z + b)                                           (eq. 5)

    `s_n` is the BiLSTM's final state (forward half at the last word, backward half at the first).
    Residual connections with LayerNorm (eq. 4) are options of each component (through a learned
    projection where the size changes).  The global attention's default `mode` adds the attended
    sentence vector to every word; eq. 3 as written is `mode: "scale"` (see `GlobalAttention`).
    The paper's loss is averaged over the sentences (footnote 4): `head.loss_reduction: "mean"`.
    Leaving out a component or embedding gives the ablations of Table 2.  The l2 term of eq. 6 is
    the trainer's `regularizer`.  Span confidence: `TagHead`'s.

    Registered as a `Model` with name "deptree_ner".

    # Parameters

    vocab : `Vocabulary`, required
    text_field_embedder : `TextFieldEmbedder`, required
        Embeds `tokens` to `(batch_size, num_tokens, word_dim)` (words, GloVe, characters ...).
    semantic_encoder : `Seq2SeqEncoder`, optional (default = `None`)
        The BiLSTM stack (e.g. a `residual_stack` of `lstm`s); input dim must be
        `word_dim + pos_tag_dim + dependency_label_dim`.
    syntactic_encoder : `Lazy[ChildSumTreeLstm]`, optional (default = `None`)
        The Tree-LSTM stack, built with that input dim; give `hidden_dim`, `num_layers`, `residual`,
        and `top_down` for a pass from the roots down beside the paper's bottom-up one.
    pos_tag_dim : `int`, optional (default = `0`)
        Size of the POS tag embedding (vocabulary namespace `pos`); 0 leaves POS out.  The paper uses a
        quarter of the word dimension (appendix A).
    dependency_label_dim : `int`, optional (default = `0`)
        Size of the dependency relation embedding (namespace `dependency_relations`); 0 leaves it
        out.
    relative_attention : `Lazy[RelativeAttention]`, optional (default = `None`)
        Built with `input_dim` = the concatenated encoder size.
    global_attention : `Lazy[GlobalAttention]`, optional (default = `None`)
        Built with that `input_dim` and `query_dim` = Tree-LSTM root size + BiLSTM final-state size
        (the query is `[h_root ; s_n]`).
    head : `Lazy[TagHead]`, optional (default = `TagHead` with its defaults)
        Linear projection to tag scores and the CRF.
    dropout : `float`, optional (default = `0.3`)
        Input variational dropout on the input of every component (embeddings, attention, head).
    initializer : `InitializerApplicator`, optional
    """

    PARSE_KEYS = ("pos_tags", "dependency_labels", "head_indices")

    def __init__(
        self,
        vocab: Vocabulary,
        text_field_embedder: TextFieldEmbedder,
        semantic_encoder: Optional[Seq2SeqEncoder] = None,
        syntactic_encoder: Optional[Lazy[ChildSumTreeLstm]] = None,
        pos_tag_dim: int = 0,
        dependency_label_dim: int = 0,
        relative_attention: Optional[Lazy[RelativeAttention]] = None,
        global_attention: Optional[Lazy[GlobalAttention]] = None,
        head: Lazy[TagHead] = Lazy(TagHead),
        dropout: float = 0.3,
        initializer: InitializerApplicator = InitializerApplicator(),
        **kwargs,
    ) -> None:
        super().__init__(vocab, **kwargs)
        if semantic_encoder is None and syntactic_encoder is None:
            raise ConfigurationError("deptree_ner needs a semantic_encoder, a syntactic_encoder or both")
        self.text_field_embedder = text_field_embedder
        self.pos_tag_embedding = self._label_embedding(POS_NAMESPACE, pos_tag_dim)
        self.dependency_label_embedding = self._label_embedding(DEPENDENCY_NAMESPACE, dependency_label_dim)
        input_dim = text_field_embedder.get_output_dim() + pos_tag_dim + dependency_label_dim

        self.semantic_encoder = semantic_encoder
        encoded_dim = 0  # of h = [s ; t], and so of the query q = [h_root ; s_n]
        if semantic_encoder is not None:
            check_dimensions_match(
                input_dim,
                semantic_encoder.get_input_dim(),
                "word + POS + dependency embedding dim",
                "semantic_encoder input dim",
            )
            dim = semantic_encoder.get_output_dim()
            encoded_dim += dim
            # For s_n in q, the step each feature is read at: 1 (the last token) for a forward
            # feature, 0 (the first) for a backward one, as `get_final_encoder_states`.
            forward_dim = dim // 2 if semantic_encoder.is_bidirectional() else dim
            final_step = (torch.arange(dim) < forward_dim).long().view(1, 1, dim)
            self.register_buffer("_final_step", final_step, persistent=False)
        self.syntactic_encoder = None
        if syntactic_encoder is not None:
            self.syntactic_encoder = syntactic_encoder.construct(input_dim=input_dim)
            encoded_dim += self.syntactic_encoder.get_output_dim()

        self.relative_attention = (
            relative_attention.construct(input_dim=encoded_dim) if relative_attention is not None else None
        )
        self.global_attention = (
            global_attention.construct(input_dim=encoded_dim, query_dim=encoded_dim)
            if global_attention is not None
            else None
        )
        self.dropout = VariationalDropout(dropout)
        self.head = head.construct(vocab=vocab, input_dim=encoded_dim)
        initializer(self)

    def _label_embedding(self, namespace: str, dim: int) -> Optional[Embedding]:
        if dim <= 0:
            return None
        if self.vocab.get_vocab_size(namespace) <= 1:
            raise ConfigurationError(
                f"a {namespace} embedding was asked for but the vocabulary has no {namespace}: "
                "use a dependency reader (conllu_ner, spacy_parsed_conll) or set its dim to 0"
            )
        return Embedding(embedding_dim=dim, num_embeddings=self.vocab.get_vocab_size(namespace))

    def forward(  # type: ignore
        self,
        tokens: TextFieldTensors,
        pos_tags: Optional[torch.LongTensor] = None,
        dependency_labels: Optional[torch.LongTensor] = None,
        head_indices: Optional[torch.LongTensor] = None,
        tags: Optional[torch.LongTensor] = None,
        metadata: Optional[List[Dict[str, Any]]] = None,
        **kwargs,
    ) -> Dict[str, Any]:
        """
        # Parameters

        tokens : `TextFieldTensors`
        pos_tags, dependency_labels : `torch.LongTensor`, `(batch_size, num_tokens)` label ids
        head_indices : `torch.LongTensor`, `(batch_size, num_tokens)`, 1-based head, 0 = root
        tags : `torch.LongTensor`, optional, `(batch_size, num_tokens)`
        metadata : `List[Dict]`, optional; `words` is copied to the output

        # Returns

        What `TagHead.forward` returns, plus `relative_attention` `(batch_size, num_tokens,
        num_tokens)` and `global_attention` `(batch_size, num_tokens)` when those layers exist.
        """
        mask = get_text_field_mask(tokens)
        hidden, output = self._encode(tokens, mask, pos_tags, dependency_labels, head_indices)
        output.update(self.tag(hidden, mask, tags, metadata))
        return output

    def _encode(
        self,
        tokens: TextFieldTensors,
        mask: torch.BoolTensor,
        pos_tags: Optional[torch.LongTensor],
        dependency_labels: Optional[torch.LongTensor],
        head_indices: Optional[torch.LongTensor],
    ) -> Tuple[torch.Tensor, Dict[str, Any]]:
        """The encoding `(batch_size, num_tokens, encoded_dim)` the head reads, and the attention outputs."""
        parts = [self.text_field_embedder(tokens)]
        for embedding, labels, name in (
            (self.pos_tag_embedding, pos_tags, "pos_tags"),
            (self.dependency_label_embedding, dependency_labels, "dependency_labels"),
        ):
            if embedding is not None:
                if labels is None:
                    raise ConfigurationError(f"this model embeds {name}, but the input has none")
                parts.append(embedding(labels))
        embedded = self.dropout(torch.cat(parts, dim=-1))

        # h = [s ; t], q = [h_root ; s_n].
        encoded, queries = [], []
        if self.semantic_encoder is not None:
            semantic = self.semantic_encoder(embedded, mask)
            encoded.append(semantic)
            queries.append(self._final_states(semantic, mask))
        if self.syntactic_encoder is not None:
            if head_indices is None:
                raise ConfigurationError("the Tree-LSTM needs head_indices: read the data with a dependency reader")
            syntactic = self.syntactic_encoder.encode(embedded, mask, head_indices)
            encoded.append(syntactic.states)
            queries.insert(0, syntactic.root)
        hidden = self.dropout(torch.cat(encoded, dim=-1))

        output: Dict[str, Any] = {}
        if self.relative_attention is not None:
            hidden, output["relative_attention"] = self.relative_attention.attend(hidden, mask)
            hidden = self.dropout(hidden)
        if self.global_attention is not None:
            hidden, output["global_attention"] = self.global_attention.attend(hidden, mask, torch.cat(queries, dim=-1))
            hidden = self.dropout(hidden)
        return hidden, output

    def export_encoding(self, tokens: TextFieldTensors, mask: torch.BoolTensor, parse: Dict[str, Any]) -> torch.Tensor:
        """`Exportable` (through `HeadTagger.export_scores`): `h` (or the attention's `z`) of the
        parse's `PARSE_KEYS`; the export traces the Tree-LSTM in its `export_form()`."""
        return self._encode(tokens, mask, *(parse.get(key) for key in self.PARSE_KEYS))[0]

    def attention_keys(self) -> Tuple[str, ...]:
        layers = (("relative_attention", self.relative_attention), ("global_attention", self.global_attention))
        return tuple(key for key, layer in layers if layer is not None)

    def _final_states(self, semantic: torch.Tensor, mask: torch.BoolTensor) -> torch.Tensor:
        """`get_final_encoder_states` of the semantic encoder's `(batch_size, num_tokens, dim)`
        output in one gather: `(batch_size, dim)`."""
        steps = (mask.sum(dim=1) - 1).view(-1, 1, 1) * self._final_step
        return semantic.gather(1, steps).squeeze(1)
