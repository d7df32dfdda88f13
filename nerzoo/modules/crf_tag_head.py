import math
from typing import Any, Dict, List, Optional

import torch
from allennlp.common import FromParams
from allennlp.common.checks import ConfigurationError
from allennlp.data import Vocabulary
from allennlp.modules import ConditionalRandomField, FeedForward, TimeDistributed
from allennlp.modules.conditional_random_field import allowed_transitions
from allennlp.nn import Activation
from allennlp.training.metrics import CategoricalAccuracy

from nerzoo.data.tag_schemes import check_tag_scheme, tags_to_spans
from nerzoo.modules.auxiliary_loss import AuxiliaryLosses
from nerzoo.modules.crf_marginals import PathPosteriors, forward_backward, tag_marginals
from nerzoo.training.metrics.conll_span_f1 import ConllSpanF1


class CrfTagHead(torch.nn.Module, FromParams):
    """
    The tagging head every nerzoo tagger composes: optional hidden layer, linear projection to tag
    scores, a linear-chain CRF (allennlp's `ConditionalRandomField`, Lafferty et al., 2001) with
    `allowed_transitions` constraints for the tag scheme, Viterbi decoding, exact posterior
    marginals (forward-backward), entity spans with confidences, and the metrics.

    Models take it as `Lazy[CrfTagHead]` and construct it with their encoder's output size, so a
    config only names the options that differ from the defaults (`"head": {"hidden_dim": 50}`).

    Confidence of a predicted entity = the exact posterior probability that its tokens carry exactly
    its tags (see `crf_marginals.PathPosteriors`); each token also gets the marginal of its
    predicted tag, and `tag_probabilities` holds all marginals.

    Auxiliary losses reported by any submodule of the model (`nerzoo.modules.auxiliary_loss`) are
    passed in by the model and added to the CRF's negative log-likelihood.

    With `use_crf=False` the head drops the CRF and becomes the MEMNET baseline of Liu, Baldwin &
    Cohn (2017), "Capturing Long-range Contextual Dependencies with Memory-enhanced Conditional
    Random Fields", IJCNLP, https://aclanthology.org/I17-1056, §4.3, eq. 13:
    `y_t = softmax(W u_t)` at each position on its own, "without taking transitions between ...
    labels into account".  Then the loss is the masked cross-entropy summed over the tokens of the
    batch (the CRF loss is likewise a sum over the batch, so learning rates carry over), the
    prediction is the per-position argmax, `tag_probabilities` is the softmax, a token's confidence
    is the probability of its predicted tag, and an entity's confidence is the product of those
    probabilities over its tokens (the exact probability of its tags, the positions being
    independent).  Nothing stops the argmax from producing sequences the tag scheme forbids
    (`O L-PER`, `B-PER O`); spans are read from them with conlleval's lenient rules
    (`tags_to_spans`), as for gold data.

    # Parameters

    vocab : `Vocabulary`, required
    input_dim : `int`, required
        Size of the encoded token vectors, `(batch_size, num_tokens, input_dim)`.
    label_namespace : `str`, optional (default = `"labels"`)
    tag_scheme : `str`, optional (default = `"BIOUL"`)
        Scheme of the labels ("IOB1", "BIO", "BIOUL"), used for the transition constraints and to
        decode spans.  `None` for plain labels (POS tags): no constraints, no spans, no span F1.
    constrain_crf_decoding : `bool`, optional (default = `True`)
        Forbid transitions the scheme does not allow (e.g. `O -> L-PER`) in decoding and marginals.
    include_start_end_transitions : `bool`, optional (default = `True`)
    hidden_dim : `int`, optional (default = `None`)
        Size of a hidden layer between the encoder and the tag projection.
    activation : `str`, optional (default = `"tanh"`)
        Activation of the hidden layer.
    dropout : `float`, optional (default = `0.0`)
        Dropout on the input of the projection.
    verbose_metrics : `bool`, optional (default = `False`)
        Report per-type precision, recall and F1 as well as the overall ones.
    use_crf : `bool`, optional (default = `True`)
        `False` gives the per-position softmax of MEMNET (eq. 13) instead of the CRF; `crf` is then
        `None`, and `constrain_crf_decoding` and `include_start_end_transitions` have no effect.
    """

    def __init__(
        self,
        vocab: Vocabulary,
        input_dim: int,
        label_namespace: str = "labels",
        tag_scheme: Optional[str] = "BIOUL",
        constrain_crf_decoding: bool = True,
        include_start_end_transitions: bool = True,
        hidden_dim: Optional[int] = None,
        activation: str = "tanh",
        dropout: float = 0.0,
        verbose_metrics: bool = False,
        use_crf: bool = True,
    ) -> None:
        super().__init__()
        self.vocab = vocab
        self.label_namespace = label_namespace
        self.tag_scheme = None if tag_scheme is None else check_tag_scheme(tag_scheme)
        self.num_tags = vocab.get_vocab_size(label_namespace)
        if self.num_tags == 0:
            raise ConfigurationError(f"the vocabulary has no labels in namespace {label_namespace!r}")
        self.verbose_metrics = verbose_metrics
        self.dropout = torch.nn.Dropout(dropout)

        self.hidden: Optional[torch.nn.Module] = None
        projection_input_dim = input_dim
        if hidden_dim is not None:
            self.hidden = TimeDistributed(
                FeedForward(input_dim, 1, hidden_dim, Activation.by_name(activation)())
            )
            projection_input_dim = hidden_dim
        self.tag_projection = TimeDistributed(torch.nn.Linear(projection_input_dim, self.num_tags))

        self.crf: Optional[ConditionalRandomField] = None
        if use_crf:
            labels = vocab.get_index_to_token_vocabulary(label_namespace)
            constraints = None
            if constrain_crf_decoding and self.tag_scheme is not None:
                constraints = allowed_transitions(self.tag_scheme, labels)
            self.crf = ConditionalRandomField(
                self.num_tags, constraints, include_start_end_transitions=include_start_end_transitions
            )

        self.accuracy = CategoricalAccuracy()
        self.span_f1 = (
            ConllSpanF1.from_vocab(vocab, label_namespace) if self.tag_scheme is not None else None
        )
        self.auxiliary_losses = AuxiliaryLosses()

    def forward(
        self,
        encoded: torch.Tensor,
        mask: torch.BoolTensor,
        tags: Optional[torch.LongTensor] = None,
        metadata: Optional[List[Dict[str, Any]]] = None,
        auxiliary_losses: Optional[Dict[str, torch.Tensor]] = None,
    ) -> Dict[str, Any]:
        """
        # Parameters

        encoded : `torch.Tensor`, `(batch_size, num_tokens, input_dim)`
        mask : `torch.BoolTensor`, `(batch_size, num_tokens)`
        tags : `torch.LongTensor`, optional, `(batch_size, num_tokens)` gold tag ids
        metadata : `List[Dict]`, optional; `sentence_spans` in it delimit sentences inside an
            instance, so document-level instances are scored sentence by sentence
        auxiliary_losses : `Dict[str, torch.Tensor]`, optional; scalar terms added to the loss

        # Returns

        `logits` `(batch_size, num_tokens, num_tags)`, `mask`, `tags` (Viterbi tag ids, or the
        per-position argmax without the CRF; one list per instance), `sentence_spans` (per instance,
        `(start, end)` of its sentences) and `loss` when `tags` are given.
        `make_output_human_readable` then adds `tag_probabilities` `(batch_size, num_tokens,
        num_tags)`, `tag_confidences` (marginal, or softmax probability, of each predicted tag) and
        `spans` (per instance: `label`, `start`, `end` exclusive, `confidence`).
        """
        hidden = self.dropout(encoded)
        if self.hidden is not None:
            hidden = self.hidden(hidden)
        logits = self.tag_projection(hidden)
        if self.crf is not None:
            best_paths = self.crf.viterbi_tags(logits, mask)
            predicted = [path for path, _ in best_paths]
        else:
            # Eq. 13: every position decided on its own; the masked positions of each row, in order,
            # as `viterbi_tags` returns them.
            best_tags = logits.argmax(dim=-1)
            predicted = [row_tags[row_mask].tolist() for row_tags, row_mask in zip(best_tags, mask.bool())]
        # Sentences inside each instance: one, unless the reader made document instances.
        sentence_spans = [
            (metadata[row] if metadata else {}).get("sentence_spans") or [(0, len(path))]
            for row, path in enumerate(predicted)
        ]
        output: Dict[str, Any] = {"logits": logits, "mask": mask, "tags": predicted, "sentence_spans": sentence_spans}

        if tags is not None:
            if self.crf is not None:
                loss = -self.crf(logits, tags, mask)
            else:
                token_mask = mask.bool()
                loss = torch.nn.functional.cross_entropy(logits[token_mask], tags[token_mask], reduction="sum")
            loss = self.auxiliary_losses.add_to(loss, auxiliary_losses)
            output["loss"] = loss
            self._update_metrics(predicted, tags, mask, sentence_spans)
        return output

    @torch.no_grad()
    def _posteriors(self, logits, mask, predicted: List[List[int]], sentence_spans) -> Dict[str, Any]:
        logits = logits.float()
        paths = torch.zeros(mask.shape, dtype=torch.long, device=logits.device)
        for row, path in enumerate(predicted):
            paths[row, : len(path)] = torch.as_tensor(path, device=logits.device)
        if self.crf is not None:
            result = forward_backward(self.crf, logits, mask)
            on_paths = PathPosteriors(result, logits, paths)
            probabilities = tag_marginals(result, mask)
            tag_log_probabilities = on_paths.tag_log_marginals
            segment_log_probability = on_paths.segment_log_probability
        else:
            # Independent positions: a segment's probability is the product of its tokens' ones.
            log_softmax = torch.log_softmax(logits, dim=-1)
            probabilities = log_softmax.exp() * mask.unsqueeze(-1)
            tag_log_probabilities = log_softmax.gather(2, paths.unsqueeze(-1)).squeeze(-1).tolist()

            def segment_log_probability(row: int, start: int, end: int) -> float:
                return math.fsum(tag_log_probabilities[row][start:end])

        confidences, spans = [], []
        for row, path in enumerate(predicted):
            confidences.append([math.exp(value) for value in tag_log_probabilities[row][: len(path)]])
            row_spans = []
            labels = self._labels(path) if self.tag_scheme is not None else []
            for offset, sentence_end in sentence_spans[row] if labels else []:
                for label, start, end in tags_to_spans(labels[offset:sentence_end]):
                    start, end = start + offset, end + offset
                    log_probability = segment_log_probability(row, start, end)
                    confidence = math.exp(min(log_probability, 0.0))
                    row_spans.append({"label": label, "start": start, "end": end, "confidence": confidence})
            spans.append(row_spans)
        return {"tag_probabilities": probabilities, "tag_confidences": confidences, "spans": spans}

    def _labels(self, tag_ids: List[int]) -> List[str]:
        return [self.vocab.get_token_from_index(tag, namespace=self.label_namespace) for tag in tag_ids]

    def _update_metrics(self, predicted, tags, mask, sentence_spans) -> None:
        one_hot = torch.zeros(*tags.shape, self.num_tags, device=tags.device)
        for row, path in enumerate(predicted):
            steps = torch.arange(len(path), device=tags.device)
            one_hot[row, steps, torch.as_tensor(path, device=tags.device)] = 1
        self.accuracy(one_hot, tags, mask)
        if self.span_f1 is None:
            return
        predicted_sentences, gold_sentences = [], []
        lengths = mask.sum(dim=1).tolist()
        gold_rows = tags.tolist()
        for row, path in enumerate(predicted):
            predicted_labels = self._labels(path)
            gold_labels = self._labels(gold_rows[row][: lengths[row]])
            for start, end in sentence_spans[row]:
                predicted_sentences.append(predicted_labels[start:end])
                gold_sentences.append(gold_labels[start:end])
        self.span_f1(predicted_sentences, gold_sentences)

    def make_output_human_readable(self, output_dict: Dict[str, Any]) -> Dict[str, Any]:
        """
        Adds the posteriors (`tag_probabilities`, `tag_confidences`, `spans`) and turns tag ids into
        tag strings.  Done here rather than in `forward` so that training and validation, which
        never call this, do not pay for forward-backward (or, without the CRF, the softmax).
        """
        output_dict.update(
            self._posteriors(
                output_dict["logits"], output_dict["mask"], output_dict["tags"], output_dict["sentence_spans"]
            )
        )
        output_dict["tags"] = [self._labels(path) for path in output_dict["tags"]]
        return output_dict

    def get_metrics(self, reset: bool = False) -> Dict[str, float]:
        metrics = {"accuracy": self.accuracy.get_metric(reset)}
        if self.span_f1 is not None:
            span_metrics = self.span_f1.get_metric(reset)
            if not self.verbose_metrics:
                span_metrics = {key: value for key, value in span_metrics.items() if key.endswith("-overall")}
            metrics.update(span_metrics)
        metrics.update(self.auxiliary_losses.get_metrics(reset))
        return metrics
