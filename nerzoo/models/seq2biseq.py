from typing import Any, Dict, List, Optional, Tuple

import torch
from allennlp.common.checks import ConfigurationError, check_dimensions_match
from allennlp.data import TextFieldTensors, Vocabulary
from allennlp.models.model import Model
from allennlp.modules import Seq2SeqEncoder, TextFieldEmbedder
from allennlp.nn import InitializerApplicator, RegularizerApplicator
from allennlp.nn.util import get_text_field_mask, sequence_cross_entropy_with_logits
from allennlp.training.metrics import CategoricalAccuracy
from nerzoo_runtime.tag_scheme import check_tag_scheme

from nerzoo.data.partial_tags import OPEN, is_partial
from nerzoo.modules.auxiliary_loss import AuxiliaryLossCollector, AuxiliaryLosses
from nerzoo.modules.crf.calibration import CalibrationBatch
from nerzoo.modules.crf.tag_decoder import DecodedTagger, TagDecoder
from nerzoo.modules.crf.tag_scorers import SoftmaxScorer
from nerzoo.modules.row_reversal import gather_steps, reversal_index


@Model.register("seq2biseq")
class Seq2Biseq(DecodedTagger, Model):
    """
    Seq2Biseq: Marco Dinarelli and Loïc Grobol, "Seq2Biseq: Bidirectional Output-wise Recurrent
    Neural Networks for Sequence Modelling", CICLing 2019, https://arxiv.org/abs/1904.04733, §3.

    - Words and characters (eq. 1-2): `text_field_embedder` gives `[E_w(w_i); h_c(w_i)]` (in the
      shipped config a word embedding and a `character_encoding` with the `summed_gru` encoder of
      eq. 1), and `encoder` (a bidirectional GRU) gives `h_w_i`, `(batch_size, num_tokens, H)`.
    - Backward label decoder (eq. 5-6, Fig. 2): a GRU run from the last word to the first,
      `<-h_e_i = GRU([h_w_i; E_l(e_{i+1})], <-h_e_{i+1})`, started from the `<EOS>` label, with
      `o_bw_i = W_bw [h_w_i; <-h_e_i] + b_bw`.
    - Forward label decoder (eq. 4 with the lexical input, and eq. 7): a GRU from the first word,
      `->h_e_i = GRU([h_w_i; E_l(e_{i-1})], ->h_e_{i-1})` started from a `<BOS>` label, whose output
      layer sees both decoders and the words: `o_i = W_o [->h_e_i; h_w_i; <-h_e_i] + b_o`.  Its
      argmax is the model's prediction.
    - While training (and for the loss whenever gold tags are given) both decoders read the gold
      labels (teacher forcing); otherwise they read their own argmax predictions, the backward pass
      first, then the forward pass over its states (§4.3).  Rows are reversed within their lengths
      for the backward decoder, so padding never reaches the words' states.
    - Dropout (§4.2: "on the embeddings and the output of the hidden layers"): on `[E_w; h_c]`, on
      `h_w`, on the label embeddings `E_l(e)` the decoders read and on both decoders' states.
    - Loss (eq. 8): `-1/2 (log p(->e_i) + log p(<-e_i))`, averaged over the tokens of the batch, plus
      the L2 term (the model's `regularizer`) and the auxiliary losses (reported as `<name>_loss`).
      With `backward_loss_weight = w` the backward decoder gets `w * -log p(<-e_i)` on top: with
      `backward_loss_scope: "backward_decoder"`, `sgd` and no `grad_norm`, `w = 1` moves the
      parameters exactly as the paper's two optimisers (Seq2Biseq_2-opt, end of §4.3,
      docs/seq2biseq.md); `"all"` sends that gradient to every parameter.
    - Confidences: a token's is the forward decoder's softmax probability of its label (given the
      labels decoded before it), a span's the product of its tokens'.

    Registered as a `Model` with name "seq2biseq".

    # Parameters

    vocab : `Vocabulary`, required
    text_field_embedder : `TextFieldEmbedder`, required
        `(batch_size, num_tokens, embedding_dim)`, the `S^lex` of eq. 2.
    encoder : `Seq2SeqEncoder`, required
        `GRU_w` of eq. 2, `(batch_size, num_tokens, H)`.
    label_embedding_dim : `int`, optional (default = `150`)
        `D_l`, size of `E_l` (§4.2); the table has the labels plus `<EOS>` and `<BOS>`.
    decoder_hidden_dim : `int`, optional (default = `150`)
        Hidden size of each label decoder.
    label_namespace : `str`, optional (default = `"labels"`)
    tag_scheme : `str`, optional (default = `"BIOUL"`)
        Scheme of the labels, for span F1 and the concept error rate; `None` for plain labels
        (POS tags), which get accuracy only.
    lexical_decoders : `bool`, optional (default = `True`)
        Feed `h_w_i` to the decoders (Seq2Biseq_le, eq. 5); `False` gives eq. 3-4 (labels only).
    backward_loss_weight : `float`, optional (default = `0.0`)
        Weight of the extra backward-decoder loss (see above).
    backward_loss_scope : `str`, optional (default = `"backward_decoder"`)
        Parameters the extra backward-decoder loss trains: `"backward_decoder"` or `"all"`.
    dropout : `float`, optional (default = `0.0`)
        On the embeddings, `h_w`, the label embeddings and the decoder states (§4.2 uses 0.5).
    temperature : `float`, optional (default = `1.0`)
        Divides the forward decoder's scores in the confidences (`allennlp calibrate` fits it).
    initializer : `InitializerApplicator`, optional
    regularizer : `RegularizerApplicator`, optional
        The L2 term of eq. 8.
    """

    default_predictor = "sequence_tagger"

    def __init__(
        self,
        vocab: Vocabulary,
        text_field_embedder: TextFieldEmbedder,
        encoder: Seq2SeqEncoder,
        label_embedding_dim: int = 150,
        decoder_hidden_dim: int = 150,
        label_namespace: str = "labels",
        tag_scheme: Optional[str] = "BIOUL",
        lexical_decoders: bool = True,
        backward_loss_weight: float = 0.0,
        backward_loss_scope: str = "backward_decoder",
        dropout: float = 0.0,
        temperature: float = 1.0,
        initializer: InitializerApplicator = InitializerApplicator(),
        regularizer: Optional[RegularizerApplicator] = None,
        **kwargs,
    ) -> None:
        super().__init__(vocab, regularizer=regularizer, **kwargs)
        check_dimensions_match(
            text_field_embedder.get_output_dim(),
            encoder.get_input_dim(),
            "text field embedding dim",
            "encoder input dim",
        )
        if backward_loss_weight < 0:
            raise ConfigurationError(f"backward_loss_weight must be >= 0, got {backward_loss_weight}")
        if backward_loss_scope not in ("backward_decoder", "all"):
            raise ConfigurationError(
                f'backward_loss_scope must be "backward_decoder" or "all", got {backward_loss_scope!r}'
            )
        self.label_namespace = label_namespace
        self.num_tags = vocab.get_vocab_size(label_namespace)
        if self.num_tags == 0:
            raise ConfigurationError(f"the vocabulary has no labels in namespace {label_namespace!r}")
        self.tag_scheme = None if tag_scheme is None else check_tag_scheme(tag_scheme)
        self.text_field_embedder = text_field_embedder
        self.encoder = encoder
        self.dropout = torch.nn.Dropout(dropout)
        self.lexical_decoders = lexical_decoders
        self.backward_loss_weight = backward_loss_weight
        self.backward_loss_scope = backward_loss_scope

        # Label ids 0 .. num_tags - 1, then <EOS> (starts the backward pass) and <BOS> (the forward).
        self.end_label = self.num_tags
        self.start_label = self.num_tags + 1
        self.label_embedding = torch.nn.Embedding(self.num_tags + 2, label_embedding_dim)
        lexical_dim = encoder.get_output_dim()
        decoder_input_dim = label_embedding_dim + (lexical_dim if lexical_decoders else 0)
        self.backward_decoder = torch.nn.GRU(decoder_input_dim, decoder_hidden_dim, batch_first=True)
        self.forward_decoder = torch.nn.GRU(decoder_input_dim, decoder_hidden_dim, batch_first=True)
        self.backward_output = torch.nn.Linear(lexical_dim + decoder_hidden_dim, self.num_tags)  # eq. 6
        self.forward_output = torch.nn.Linear(2 * decoder_hidden_dim + lexical_dim, self.num_tags)  # eq. 7

        if temperature <= 0:
            raise ConfigurationError(f"temperature must be > 0, got {temperature}")
        self.scorer = SoftmaxScorer(temperature)
        self.decoder = TagDecoder(vocab, label_namespace, self.tag_scheme, concept_error_rate=True)
        self.backward_accuracy = CategoricalAccuracy()
        self.auxiliary_losses = AuxiliaryLosses()
        self._auxiliary_loss_sources = AuxiliaryLossCollector()
        initializer(self)

    def _decoder_inputs(self, lexical: torch.Tensor, previous_labels: torch.LongTensor) -> torch.Tensor:
        """`[h_w_i; E_l(e)]` (or `E_l(e)` alone), `(batch_size, steps, decoder_input_dim)`."""
        embedded = self.dropout(self.label_embedding(previous_labels))
        return torch.cat([lexical, embedded], dim=-1) if self.lexical_decoders else embedded

    def teacher_forced(
        self, lexical: torch.Tensor, mask: torch.BoolTensor, tags: torch.LongTensor
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        """
        Both decoders over the gold labels, each GRU run once over the whole sequence.
        `lexical` `(batch_size, num_tokens, H)`, `tags` `(batch_size, num_tokens)`; returns the
        forward and backward logits, each `(batch_size, num_tokens, num_tags)`.
        """
        batch_size = mask.size(0)
        reverse = reversal_index(mask)
        lexical_reversed = gather_steps(lexical, reverse)
        tags_reversed = tags.gather(1, reverse)
        # In reversed order the label read at step s is the one of the step before: e_{i+1}.
        ends = tags.new_full((batch_size, 1), self.end_label)
        right_labels = torch.cat([ends, tags_reversed[:, :-1]], dim=1)
        backward_reversed, _ = self.backward_decoder(self._decoder_inputs(lexical_reversed, right_labels))
        backward_states = self.dropout(gather_steps(backward_reversed, reverse))
        starts = tags.new_full((batch_size, 1), self.start_label)
        left_labels = torch.cat([starts, tags[:, :-1]], dim=1)
        forward_states, _ = self.forward_decoder(self._decoder_inputs(lexical, left_labels))
        forward_states = self.dropout(forward_states)
        backward_logits = self.backward_output(torch.cat([lexical, backward_states], dim=-1))
        forward_logits = self.forward_output(torch.cat([forward_states, lexical, backward_states], dim=-1))
        return forward_logits, backward_logits

    def decode(
        self, lexical: torch.Tensor, mask: torch.BoolTensor, forced_tags: Optional[torch.LongTensor] = None
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        """
        Step-by-step decoding (`greedy_pass`), batched over sentences: the backward decoder from the
        last word to the first, each step reading its own previous argmax, then the forward decoder
        over its states.  With `forced_tags` each step reads those instead (a slow reference of
        `teacher_forced`).  Returns the forward and backward logits, each `(batch_size, num_tokens, num_tags)`.
        """
        reverse = reversal_index(mask)
        forced = torch.full_like(mask, -1, dtype=torch.long) if forced_tags is None else forced_tags
        words, nothing = gather_steps(lexical, reverse), lexical[:, :, :0]
        # The output layers read [h_w_i ; <-h_e_i] (eq. 6) and [->h_e_i ; h_w_i ; <-h_e_i] (eq. 7).
        backward = self._greedy_pass(True, words, forced.gather(1, reverse), words, nothing)
        both = torch.cat([lexical, gather_steps(backward[0], reverse)], dim=-1)
        _, forward_logits = self._greedy_pass(False, lexical, forced, nothing, both)
        return forward_logits, gather_steps(backward[1], reverse)

    def _greedy_pass(self, backward: bool, *tensors: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """`greedy_pass` of the backward or the forward decoder, over `words`, `forced_labels`,
        `read_before` and `read_after`."""
        gru, output = (
            (self.backward_decoder, self.backward_output) if backward else (self.forward_decoder, self.forward_output)
        )
        weights = [self.label_embedding.weight, output.weight, output.bias] + [w for ws in gru.all_weights for w in ws]
        first_label = self.end_label if backward else self.start_label
        words = tensors[0] if self.lexical_decoders else tensors[0][:, :, :0]
        return greedy_pass(first_label, weights, gru.num_layers, self.dropout.p, self.training, words, *tensors[1:])

    def _extra_backward_loss(self, backward_nll: torch.Tensor) -> torch.Tensor:
        """
        `w * backward_nll`, whose gradient (`"backward_decoder"` scope) reaches the backward decoder
        only: carried by `sum(p * g) - sum(p * g).detach()`, which is 0 with gradient `g` in `p`.
        """
        extra = self.backward_loss_weight * backward_nll
        if self.backward_loss_weight == 0 or self.backward_loss_scope == "all" or not extra.requires_grad:
            return extra
        backward_decoder = [*self.backward_decoder.parameters(), *self.backward_output.parameters()]  # eq. 5-6
        parameters = [p for p in backward_decoder if p.requires_grad]
        # Outside training the value is all that counts (cuDNN's RNNs have no backward pass in eval mode).
        if not self.training or not parameters:
            return extra.detach()
        gradients = torch.autograd.grad(extra, parameters, retain_graph=True)
        carrier = sum((p * g).sum() for p, g in zip(parameters, gradients))
        return extra.detach() + carrier - carrier.detach()

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
        tags : `torch.LongTensor`, optional, `(batch_size, num_tokens)` gold label ids
        metadata : `List[Dict]`, optional; `words` is passed through
        **kwargs : other fields of the reader (e.g. `pos_tags`), unused

        # Returns

        `logits` (forward decoder) and `backward_logits`, `(batch_size, num_tokens, num_tags)`,
        `mask`, `tags` (predicted label ids, one list per instance) and `loss` when `tags` are given.
        In training the logits and predictions are the teacher-forced ones; otherwise decoded.
        """
        mask = get_text_field_mask(tokens)
        embedded = self.dropout(self.text_field_embedder(tokens))
        lexical = self.dropout(self.encoder(embedded, mask))
        output: Dict[str, Any] = {"mask": mask}
        auxiliary_losses = self._auxiliary_loss_sources.pop(self)

        partial = is_partial(metadata)
        if tags is not None:
            # A token left open (docs/partial.md) is out of the loss; the decoders read their own choice there.
            marked, gold = (mask & (tags != OPEN), tags.clamp_min(0)) if partial else (mask, tags)
            forced = self.decode(lexical, mask, tags) if partial else self.teacher_forced(lexical, mask, tags)
            forward_logits, backward_logits = forced
            forward_nll = sequence_cross_entropy_with_logits(forward_logits, gold, marked, average="token")
            backward_nll = sequence_cross_entropy_with_logits(backward_logits, gold, marked, average="token")
            loss = 0.5 * (forward_nll + backward_nll) + self._extra_backward_loss(backward_nll)
            output["loss"] = self.auxiliary_losses.add_to(loss, auxiliary_losses)
        if tags is None or not self.training:
            forward_logits, backward_logits = self.decode(lexical, mask)
        paths = self.scorer.decode(forward_logits, mask)
        output.update(logits=forward_logits, backward_logits=backward_logits, paths=paths)
        output["tags"] = [row[:length] for row, length in zip(paths.tolist(), mask.sum(dim=1).tolist())]
        if tags is not None:
            posteriors = None
            if not self.training and self.decoder.span_calibration is not None:
                posteriors = self.scorer.posteriors(forward_logits, mask.bool(), paths)
            self.decoder.update_metrics(paths, tags, mask, posteriors=posteriors, partial=partial)
            self.backward_accuracy(backward_logits, gold, marked)
        if metadata is not None:
            output["words"] = [instance_metadata["words"] for instance_metadata in metadata]
        return output

    def make_output_human_readable(self, output_dict: Dict[str, Any]) -> Dict[str, Any]:
        """`TagDecoder.make_output_human_readable` with the forward decoder's softmax posteriors."""
        paths = output_dict.pop("paths")
        posteriors = self.scorer.posteriors(output_dict["logits"], output_dict["mask"].bool(), paths)
        return self.decoder.make_output_human_readable(output_dict, paths, posteriors)

    def calibration_batch(self, output_dict: Dict[str, Any], batch: Dict[str, Any]) -> Optional[CalibrationBatch]:
        tags = batch.get("tags")
        if tags is None:
            return None
        return self.decoder.calibration_batch(
            output_dict["logits"], tags, output_dict["mask"].bool(), output_dict["paths"]
        )

    def get_metrics(self, reset: bool = False) -> Dict[str, float]:
        metrics = self.decoder.get_metrics(reset)
        metrics["backward_accuracy"] = self.backward_accuracy.get_metric(reset)
        metrics.update(self.auxiliary_losses.get_metrics(reset))
        return metrics

    def export_refusal(self) -> Optional[str]:
        """`Exportable`: none (a trace runs each `greedy_pass` as a loop)."""
        return None

    def export_scores(self) -> torch.nn.Module:
        """`Exportable`: `GreedyScores`."""
        return GreedyScores(self)

    def export_decoding(self) -> Dict[str, Any]:
        """`Exportable`: the tag scheme and the scorer's temperature; no CRF."""
        temperature = self.scorer.temperature
        return {
            "tag_scheme": self.tag_scheme,
            "crf": None,
            "crf_per_sentence": False,
            "temperature": temperature,
            "transition_temperature": temperature,
        }


class GreedyScores(torch.nn.Module):
    """
    `Seq2Biseq`'s greedily decoded forward logits, `(batch_size, num_tokens, num_tags)`, from the text
    field's tensors and the mask: what `allennlp export` traces (the model shared, not copied).
    """

    def __init__(self, model: Seq2Biseq) -> None:
        super().__init__()
        self.model = model

    def forward(self, tokens: TextFieldTensors, mask: torch.BoolTensor, parse: Dict[str, torch.Tensor]) -> torch.Tensor:
        model = self.model
        return model.decode(model.encoder(model.text_field_embedder(tokens), mask), mask)[0]


@torch.jit.script_if_tracing
def greedy_pass(
    first_label: int,
    parameters: List[torch.Tensor],
    num_layers: int,
    dropout: float,
    training: bool,
    words: torch.Tensor,
    forced_labels: torch.Tensor,
    read_before: torch.Tensor,
    read_after: torch.Tensor,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """
    One label decoder a step at a time, from `first_label`: step `i`'s GRU reads `[words_i ; E_l(e)]`,
    `e` the label of the step before (its argmax, or where `forced_labels` `(batch_size, num_steps)`
    is not -1, that label), and the output layer `[read_before_i ; h_e_i ; read_after_i]`, all
    `(batch_size, num_steps, .)`.  `parameters`: `E_l`, the output layer's weight and bias, then a
    `torch.nn.GRU`'s weights in its order.  Returns the states (after dropout) and logits; a trace
    runs the steps as a loop over any length.
    """
    label_embedding, output_weight, output_bias, gru = parameters[0], parameters[1], parameters[2], parameters[3:]
    previous = torch.full_like(forced_labels[:, 0], first_label)
    hidden = words.new_zeros(num_layers, words.size(0), gru[1].size(1))
    states: List[torch.Tensor] = []
    logits: List[torch.Tensor] = []
    for step in range(words.size(1)):
        labels = torch.nn.functional.dropout(
            torch.nn.functional.embedding(previous, label_embedding), dropout, training
        )
        inputs = torch.cat([words[:, step], labels], dim=1).unsqueeze(1)
        state, hidden = torch.gru(
            inputs, hidden, gru, len(gru) == 4 * num_layers, num_layers, 0.0, training, False, True
        )
        state = torch.nn.functional.dropout(state[:, 0], dropout, training)
        step_logits = torch.nn.functional.linear(
            torch.cat([read_before[:, step], state, read_after[:, step]], dim=1), output_weight, output_bias
        )
        states.append(state)
        logits.append(step_logits)
        forced = forced_labels[:, step]
        previous = torch.where(forced < 0, step_logits.argmax(dim=1), forced)
    return torch.stack(states, dim=1), torch.stack(logits, dim=1)
