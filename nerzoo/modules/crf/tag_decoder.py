"""
From tag ids to labels, entity spans with confidences, accuracy, span F1 and the concept error rate,
for every tagger (`TagHead`, Seq2Biseq).  Spans follow conlleval's chunk rules
(`nerzoo_runtime.tag_scheme.tags_to_spans`, invalid sequences included): a chunk starts at a token
by its tag and the previous one, ends after it by its tag and the next one.  Both rules are tabulated
once per label vocabulary, so a batch is decoded with a few gathers and no loop over tokens.
"""

from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

import torch
from allennlp.common.checks import ConfigurationError
from allennlp.data import Vocabulary
from allennlp.nn.util import dist_reduce_sum
from nerzoo_runtime.tag_scheme import check_tag_scheme, chunk_ends, chunk_starts, split_tag

from nerzoo.data.partial_tags import OPEN
from nerzoo.metrics.concept_error_rate import ConceptErrorRate
from nerzoo.metrics.conll_span_f1 import ConllSpanF1
from nerzoo.metrics.span_calibration import SpanCalibration
from nerzoo.modules.crf.calibration import CalibrationBatch, CalibrationSite, SpanOutcomes, scorer_site
from nerzoo.modules.crf.tag_scorers import TagPosteriors


class TensorSpans(NamedTuple):
    """Spans of a batch, sorted by row then start; each field `(num_spans,)`, `ends` exclusive."""

    rows: torch.LongTensor
    starts: torch.LongTensor
    ends: torch.LongTensor
    types: torch.LongTensor  # index into `TagDecoder.entity_types`


class DecodedTagger:
    """What a tagger with a `scorer` and a `TagDecoder` `decoder` tells the predictors and `allennlp calibrate`."""

    scorer: Any
    decoder: "TagDecoder"

    def tag_labels(self) -> List[str]:
        """The labels by tag id: the last dimension of `logits` and `tag_probabilities`."""
        return list(self.decoder.labels)

    @property
    def span_calibration(self) -> Optional[SpanCalibration]:
        """The metric that scores span confidences in evaluation mode (`None` without a tag scheme)."""
        return self.decoder.span_calibration

    def calibration_site(self, config_prefix: str) -> CalibrationSite:
        """The scorer's temperatures, at `<config_prefix>.temperature` (and `.transition_temperature`)."""
        return scorer_site(self.scorer, config_prefix)


class TagDecoder(torch.nn.Module):
    """
    # Parameters

    vocab : `Vocabulary`, required
    label_namespace : `str`, optional (default = `"labels"`)
    tag_scheme : `str`, optional (default = `"BIOUL"`)
        Scheme of the labels ("IOB1", "BIO", "BIOUL"); `None` for plain labels (POS tags): no
        spans, accuracy only.
    verbose_metrics : `bool`, optional (default = `False`)
        Report per-type precision, recall and F1 as well as the overall ones.
    concept_error_rate : `bool`, optional (default = `False`)
        Also report the concept error rate (`ConceptErrorRate`, needs a tag scheme).
    """

    def __init__(
        self,
        vocab: Vocabulary,
        label_namespace: str = "labels",
        tag_scheme: Optional[str] = "BIOUL",
        verbose_metrics: bool = False,
        concept_error_rate: bool = False,
    ) -> None:
        super().__init__()
        self.label_namespace = label_namespace
        self.tag_scheme = None if tag_scheme is None else check_tag_scheme(tag_scheme)
        self.labels: List[str] = [
            label for _, label in sorted(vocab.get_index_to_token_vocabulary(label_namespace).items())
        ]
        self.num_tags = len(self.labels)
        self.verbose_metrics = verbose_metrics
        # Correct and counted tokens, kept on the device of the predictions until the metric is read.
        self._token_counts: Optional[torch.Tensor] = None
        self.span_f1: Optional[ConllSpanF1] = None
        self.span_calibration: Optional[SpanCalibration] = None
        self.concept_error_rate: Optional[ConceptErrorRate] = None
        if self.tag_scheme is not None:
            self.span_f1 = ConllSpanF1.from_vocab(vocab, label_namespace)
            self.span_calibration = SpanCalibration()
            if concept_error_rate:
                self.concept_error_rate = ConceptErrorRate(self.tag_scheme)
        self.entity_types: List[str] = self.span_f1.entity_types if self.span_f1 is not None else []
        self._build_tables()

    def _build_tables(self) -> None:
        # Tag ids 0 .. num_tags - 1, and num_tags = the boundary of a sentence (read as "O").
        parts = [split_tag(label) for label in self.labels]
        parts = [(prefix, label) if prefix else ("O", None) for prefix, label in parts] + [("O", None)]
        type_index = {label: index for index, label in enumerate(self.entity_types)}
        size = len(parts)
        starts = torch.zeros(size, size, dtype=torch.bool)
        ends = torch.zeros(size, size, dtype=torch.bool)
        for previous, (previous_prefix, previous_label) in enumerate(parts):
            for current, (prefix, label) in enumerate(parts):
                # starts[previous, current]: a chunk opens at the current tag;
                # ends[current, next]: the chunk holding the current tag closes after it.
                starts[previous, current] = prefix != "O" and chunk_starts(
                    previous_prefix, previous_label, prefix, label
                )
                ends[previous, current] = previous_prefix != "O" and chunk_ends(
                    previous_prefix, previous_label, prefix, label
                )
        types = torch.tensor([type_index.get(label, -1) if label else -1 for _, label in parts])
        self.register_buffer("_starts", starts, persistent=False)
        self.register_buffer("_ends", ends, persistent=False)
        self.register_buffer("_types", types, persistent=False)
        # What a metric needs of a token, as one code: bit 0, the chunk holding it closes after it
        # (`_close_codes[current, next]`); bit 1, a chunk opens at it, and the bits above, its chunk's
        # type + 1, 0 for none (`_open_codes[previous, current]`; a chunk's tokens share its type,
        # since a change of type opens a new chunk).
        open_codes = 2 * starts.long() + 4 * (types + 1).view(1, size)
        self.register_buffer("_open_codes", open_codes, persistent=False)
        self.register_buffer("_close_codes", ends.long(), persistent=False)
        # Where each of the three counts (correct, predicted, gold) starts in one flat tensor.
        offsets = torch.arange(3).view(3, 1, 1) * (len(self.entity_types) + 1)
        self.register_buffer("_count_offsets", offsets, persistent=False)

    # ----------------------------------------------------------------------------------------------
    # Sentences and spans

    @staticmethod
    def sentence_starts(
        sentence_spans: Optional[Sequence[Sequence[Tuple[int, int]]]], mask: torch.BoolTensor
    ) -> Optional[torch.BoolTensor]:
        """`(batch_size, num_steps)`, true where a sentence starts inside an instance; `None` when each is one."""
        if not sentence_spans or all(len(spans) <= 1 for spans in sentence_spans):
            return None
        positions = [
            row * mask.size(1) + start
            for row, spans in enumerate(sentence_spans)
            for start, _ in spans
            if start < mask.size(1)
        ]
        starts = torch.zeros(mask.numel(), dtype=torch.bool, device=mask.device)
        starts[torch.tensor(positions, dtype=torch.long).to(mask.device, non_blocking=True)] = True
        return starts.view(mask.shape)

    def spans(
        self, tags: torch.LongTensor, mask: torch.BoolTensor, sentence_starts: Optional[torch.BoolTensor] = None
    ) -> TensorSpans:
        """The chunks of `tags` `(batch_size, num_steps)` within each row's valid steps and sentences."""
        tags, previous, following = self._neighbours(tags, mask, sentence_starts)
        rows, starts = self._starts[previous, tags].nonzero(as_tuple=True)
        _, last = self._ends[tags, following].nonzero(as_tuple=True)
        # Chunks never nest: within a row the k-th opening belongs with the k-th closing.
        return TensorSpans(rows, starts, last + 1, self._types[tags[rows, starts]])

    def _neighbours(
        self, tags: torch.LongTensor, mask: torch.BoolTensor, sentence_starts: Optional[torch.BoolTensor]
    ) -> Tuple[torch.LongTensor, torch.LongTensor, torch.LongTensor]:
        """`tags` `(..., batch_size, num_steps)` with padding as the boundary tag, and each one's previous and next
        tag, the boundary across the ends of rows and sentences."""
        boundary = self.num_tags
        tags = tags.masked_fill(~mask.bool(), boundary)
        edged = torch.nn.functional.pad(tags, (1, 1), value=boundary)
        previous, following = edged[..., :-2], edged[..., 2:]
        if sentence_starts is not None:
            previous = previous.masked_fill(sentence_starts, boundary)
            following = following.masked_fill(torch.nn.functional.pad(sentence_starts[:, 1:], (0, 1)), boundary)
        return tags, previous, following

    def dense_span_counts(
        self,
        predicted: torch.LongTensor,
        tags: torch.LongTensor,
        mask: torch.BoolTensor,
        sentence_starts: Optional[torch.BoolTensor] = None,
    ) -> torch.Tensor:
        """
        `span_counts` of the predicted against the gold tag ids, `(num_types, 3)`, read nowhere but
        on their device: a predicted chunk is right when each of its tokens has the same code
        (opens, closes, type) in the gold tags.
        """
        both, previous, following = self._neighbours(torch.stack([predicted, tags]), mask, sentence_starts)
        codes = self._open_codes[previous, both] + self._close_codes[both, following]
        predicted_codes, gold_codes = codes.unbind()
        steps = torch.arange(1, both.size(-1) + 1, device=both.device)
        # The last predicted opening (2 * step) and the last token whose codes differ (step), up to each token.
        last_open = ((predicted_codes & 2) * steps).cummax(dim=-1).values
        last_difference = ((predicted_codes != gold_codes) * steps).cummax(dim=-1).values
        # (2, batch, steps): type + 1 where a predicted (gold) chunk closes, else 0.
        closing_types = (codes >> 2) * (codes & 1)
        correct_types = closing_types[0] * (2 * last_difference < last_open)
        counted = torch.cat([correct_types.unsqueeze(0), closing_types]) + self._count_offsets
        found = counted.new_zeros(self._count_offsets.numel() * (len(self.entity_types) + 1))
        found.index_add_(0, counted.view(-1), counted.new_ones(counted.numel()))
        true_positives, predicted_total, gold_total = found.view(3, -1)[:, 1:].unbind()
        return torch.stack([true_positives, predicted_total - true_positives, gold_total - true_positives], dim=1)

    def match(
        self,
        predicted: torch.LongTensor,
        tags: torch.LongTensor,
        mask: torch.BoolTensor,
        sentence_starts: Optional[torch.BoolTensor] = None,
    ) -> Tuple[TensorSpans, TensorSpans, torch.BoolTensor]:
        """
        The spans of the `predicted` and the gold tag ids, and which predicted spans a gold span has
        exactly.  Gold tags `OPEN` (partial annotation) end gold spans, and a predicted span over
        one is left out: it is neither right nor wrong.
        """
        open_tokens = torch.nn.functional.pad((mask.bool() & (tags == OPEN)).long().cumsum(dim=1), (1, 0))
        predicted_spans = self.spans(predicted, mask, sentence_starts)
        rows = predicted_spans.rows
        keep = open_tokens[rows, predicted_spans.ends] == open_tokens[rows, predicted_spans.starts]
        predicted_spans = TensorSpans(*(values[keep] for values in predicted_spans))
        gold_spans = self.spans(tags, mask.bool() & (tags != OPEN), sentence_starts)
        num_steps = mask.size(1)
        correct = torch.isin(self.span_keys(predicted_spans, num_steps), self.span_keys(gold_spans, num_steps))
        return predicted_spans, gold_spans, correct

    def span_counts(self, predicted: TensorSpans, gold: TensorSpans, correct: torch.BoolTensor) -> torch.Tensor:
        """`(num_types, 3)` true positives, false positives, false negatives of `predicted`."""
        num_types = len(self.entity_types)
        true_positives = torch.bincount(predicted.types[correct], minlength=num_types)
        false_positives = torch.bincount(predicted.types, minlength=num_types) - true_positives
        false_negatives = torch.bincount(gold.types, minlength=num_types) - true_positives
        return torch.stack([true_positives, false_positives, false_negatives], dim=1)

    def span_keys(self, spans: TensorSpans, num_steps: int) -> torch.Tensor:
        """One integer per span, equal for two spans exactly when row, start, end and type are."""
        return ((spans.rows * (num_steps + 1) + spans.starts) * (num_steps + 1) + spans.ends) * len(
            self.entity_types
        ) + spans.types

    def concepts(self, spans: TensorSpans, mask: torch.BoolTensor, sentence_starts) -> List[List[str]]:
        """The chunk labels of every sentence of the batch, in order (one list per sentence)."""
        starts = sentence_starts.clone() if sentence_starts is not None else torch.zeros_like(mask, dtype=torch.bool)
        starts[:, 0] = True
        sentence_of_step = starts.flatten().cumsum(0).view_as(starts) - 1
        sentences: List[List[str]] = [[] for _ in range(int(starts.sum()))]
        for sentence, label in zip(sentence_of_step[spans.rows, spans.starts].tolist(), spans.types.tolist()):
            sentences[sentence].append(self.entity_types[label])
        return sentences

    # ----------------------------------------------------------------------------------------------
    # Metrics

    def update_metrics(
        self,
        predicted: torch.LongTensor,
        tags: torch.LongTensor,
        mask: torch.BoolTensor,
        sentence_starts: Optional[torch.BoolTensor] = None,
        posteriors: Optional[TagPosteriors] = None,
        partial: bool = False,
    ) -> None:
        """
        Counts predicted tag ids `(batch_size, num_steps)` against gold ones; with their `posteriors`,
        also each predicted span's confidence against whether it is right (`span_ece`, `span_brier`).
        With `partial` (gold `OPEN` where a token is open) only the marked tokens and spans count
        (`match`), and `marked_token_share` says how many tokens were.
        """
        mask = mask.bool()
        marked = mask & (tags != OPEN) if partial else mask
        counts = torch.stack([((predicted == tags) & marked).sum(), marked.sum(), mask.sum()])
        self._token_counts = counts if self._token_counts is None else self._token_counts.to(counts.device) + counts
        if self.span_f1 is None:
            return
        if posteriors is None and self.concept_error_rate is None and not partial:
            self.span_f1.add_counts(self.dense_span_counts(predicted, tags, mask, sentence_starts))
            return
        predicted_spans, gold_spans, correct = self.match(predicted, tags, mask, sentence_starts)
        self.span_f1.add_counts(self.span_counts(predicted_spans, gold_spans, correct))
        if posteriors is not None and self.span_calibration is not None:
            log_probabilities = posteriors.segment_log_probabilities(
                predicted_spans.rows, predicted_spans.starts, predicted_spans.ends
            )
            self.span_calibration(log_probabilities.clamp_max(0.0).exp().tolist(), correct.tolist())
        if self.concept_error_rate is not None:
            self.concept_error_rate.count_concepts(
                self.concepts(gold_spans, mask, sentence_starts), self.concepts(predicted_spans, mask, sentence_starts)
            )

    def calibration_batch(
        self,
        logits: torch.Tensor,
        tags: torch.LongTensor,
        mask: torch.BoolTensor,
        paths: torch.LongTensor,
        sentence_starts: Optional[torch.BoolTensor] = None,
    ) -> CalibrationBatch:
        """What a batch gives `nerzoo.modules.crf.calibration`: scores, gold tags, predicted paths and their spans."""
        if bool((tags == OPEN).any()):
            raise ConfigurationError("calibration needs fully annotated data; this data leaves tokens open")
        spans = None
        if self.span_f1 is not None:
            predicted_spans, _, correct = self.match(paths, tags, mask, sentence_starts)
            spans = SpanOutcomes(predicted_spans.rows, predicted_spans.starts, predicted_spans.ends, correct.double())
        return CalibrationBatch(logits, tags, mask, paths=paths, spans=spans).detached()

    def get_metrics(self, reset: bool = False) -> Dict[str, float]:
        # Token accuracy over every worker (allennlp's `CategoricalAccuracy` of the predicted tags).
        counts = torch.zeros(3, dtype=torch.long) if self._token_counts is None else self._token_counts
        correct, marked, total = dist_reduce_sum(counts.clone()).tolist()
        if reset:
            self._token_counts = None
        metrics = {"accuracy": correct / marked if marked > 0 else 0.0}
        if marked < total:
            metrics["marked_token_share"] = marked / total
        if self.span_f1 is not None:
            span_metrics = self.span_f1.get_metric(reset)
            if not self.verbose_metrics:
                span_metrics = {key: value for key, value in span_metrics.items() if key.endswith("-overall")}
            metrics.update(span_metrics)
        if self.span_calibration is not None:
            metrics.update(self.span_calibration.get_metric(reset))
        if self.concept_error_rate is not None:
            metrics.update(self.concept_error_rate.get_metric(reset))
        return metrics

    # ----------------------------------------------------------------------------------------------
    # Output

    def make_output_human_readable(
        self, output_dict: Dict[str, Any], paths: torch.LongTensor, posteriors: TagPosteriors
    ) -> Dict[str, Any]:
        """
        Adds `tag_probabilities` `(batch_size, num_tokens, num_tags)`, `tag_probability_labels` (its
        last dimension's labels), `tag_confidences` (each predicted tag's posterior) and `spans`
        (`label`, `start`, `end` exclusive, `confidence` = posterior of the span's exact tags), and
        turns `tags` into labels.  `paths`: the same predictions, `(batch_size, num_tokens)`.
        """
        mask = output_dict["mask"].bool()
        if "tags" not in output_dict:
            output_dict["tags"] = [row[:length] for row, length in zip(paths.tolist(), mask.sum(dim=1).tolist())]
        predicted: List[List[int]] = output_dict["tags"]
        confidences = posteriors.path_log_probabilities.exp().tolist()
        output_dict["tag_probabilities"] = posteriors.probabilities
        output_dict["tag_probability_labels"] = [list(self.labels)] * len(predicted)
        output_dict["tag_confidences"] = [row[: len(path)] for row, path in zip(confidences, predicted)]
        spans: List[List[Dict[str, Any]]] = [[] for _ in predicted]
        if self.tag_scheme is not None:
            found = self.spans(paths, mask, self.sentence_starts(output_dict.get("sentence_spans"), mask))
            log_probabilities = posteriors.segment_log_probabilities(found.rows, found.starts, found.ends)
            span_confidences = log_probabilities.clamp_max(0.0).exp().tolist()
            for row, start, end, label, confidence in zip(
                found.rows.tolist(), found.starts.tolist(), found.ends.tolist(), found.types.tolist(), span_confidences
            ):
                spans[row].append(
                    {"label": self.entity_types[label], "start": start, "end": end, "confidence": confidence}
                )
        output_dict["spans"] = spans
        output_dict["tags"] = [[self.labels[tag] for tag in path] for path in predicted]
        return output_dict
