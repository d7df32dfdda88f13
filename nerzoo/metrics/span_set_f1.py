from typing import Dict, Iterable, List, Sequence, Set, Tuple

import torch
from allennlp.data.vocabulary import Vocabulary
from allennlp.nn.util import dist_reduce_sum
from allennlp.training.metrics.metric import Metric

# (start, end, label) with `end` exclusive.
LabelledSpan = Tuple[int, int, str]


@Metric.register("span_set_f1")
class SpanSetF1(Metric):
    """
    Entity-level precision, recall and F1 over sets of labelled spans, per entity type and overall
    (micro-averaged).  Unlike tag-sequence metrics it handles nested and overlapping entities, as
    produced by FOFE-NER's nested decoding (Mingbin Xu, "Fixed-size Ordinally-Forgetting Encoding
    and Its Applications", MSc thesis, York University, 2017, §5.3).

    Registered as a `Metric` with name "span_set_f1".

    A predicted span is correct iff its `(start, end, label)` is among its sentence's gold spans;
    both sides are sets.  Counts (true positives, false positives, false negatives per type) are
    summed across workers by `get_metric`.  The keys are `precision-overall`, `recall-overall`,
    `f1-measure-overall` and `precision-TYPE`, `recall-TYPE`, `f1-measure-TYPE`.

    # Parameters

    entity_types : `Sequence[str]`, required
        Every entity type that may occur (e.g. `["LOC", "MISC", "ORG", "PER"]`).
    """

    def __init__(self, entity_types: Sequence[str]) -> None:
        self.entity_types: List[str] = sorted(set(entity_types))
        self._type_index = {label: index for index, label in enumerate(self.entity_types)}
        self._counts = torch.zeros(len(self.entity_types), 3, dtype=torch.long)

    @classmethod
    def from_vocab(cls, vocabulary: Vocabulary, namespace: str = "labels") -> "SpanSetF1":
        """
        Every label of `namespace` is an entity type (the padding and OOV tokens of a padded
        namespace excepted).
        """
        labels = vocabulary.get_token_to_index_vocabulary(namespace)
        special = {vocabulary._padding_token, vocabulary._oov_token} if vocabulary.is_padded(namespace) else set()
        return cls([label for label in labels if label not in special])

    def __call__(  # type: ignore
        self,
        predicted_spans: Sequence[Iterable[LabelledSpan]],
        gold_spans: Sequence[Iterable[LabelledSpan]],
    ) -> None:
        """
        # Parameters

        predicted_spans : `Sequence[Iterable[Tuple[int, int, str]]]`
            One collection of `(start, end, label)` per sentence.
        gold_spans : `Sequence[Iterable[Tuple[int, int, str]]]`
            The gold spans, aligned with `predicted_spans`.
        """
        if len(predicted_spans) != len(gold_spans):
            raise ValueError(f"{len(predicted_spans)} predicted but {len(gold_spans)} gold sentences")
        batch_counts = torch.zeros_like(self._counts)
        for predicted_sentence, gold_sentence in zip(predicted_spans, gold_spans):
            predicted, gold = _span_set(predicted_sentence), _span_set(gold_sentence)
            for column, spans in enumerate((predicted & gold, predicted - gold, gold - predicted)):
                for *_, label in spans:
                    batch_counts[self._index(label), column] += 1
        self._counts += batch_counts

    def add_counts(self, counts: torch.Tensor) -> None:
        """
        Adds counts computed elsewhere: `(num_types, 3)` true positives, false positives and false
        negatives, rows in the order of `entity_types`.
        """
        if counts.shape != self._counts.shape:
            raise ValueError(f"counts of shape {tuple(counts.shape)}, expected {tuple(self._counts.shape)}")
        # The counts stay where they are made (a GPU) until `get_metric` reads them.
        self._counts = self._counts.to(counts.device)
        self._counts += counts.to(dtype=self._counts.dtype)

    def _index(self, label: str) -> int:
        try:
            return self._type_index[label]
        except KeyError:
            raise ValueError(f"entity type {label!r} is not among the metric's types {self.entity_types}") from None

    @property
    def counts(self) -> Dict[str, Dict[str, int]]:
        """This worker's raw counts: `{type: {"tp": .., "fp": .., "fn": ..}}`."""
        return {
            label: dict(zip(("tp", "fp", "fn"), self._counts[index].tolist()))
            for index, label in enumerate(self.entity_types)
        }

    def get_metric(self, reset: bool = False) -> Dict[str, float]:
        counts: List[List[int]] = dist_reduce_sum(self._counts).tolist()
        metrics: Dict[str, float] = {}
        for label, row in zip(self.entity_types, counts):
            metrics.update(_scores(row, f"-{label}"))
        metrics.update(_scores([sum(column) for column in zip(*counts)] if counts else [0, 0, 0], "-overall"))
        if reset:
            self.reset()
        return metrics

    def reset(self) -> None:
        self._counts.zero_()


def _span_set(spans: Iterable[LabelledSpan]) -> Set[LabelledSpan]:
    return {(int(start), int(end), label) for start, end, label in spans}


def _scores(counts: Sequence[int], suffix: str) -> Dict[str, float]:
    true_positives, false_positives, false_negatives = counts
    precision = ratio(true_positives, true_positives + false_positives)
    recall = ratio(true_positives, true_positives + false_negatives)
    f1 = ratio(2 * precision * recall, precision + recall)
    return {f"precision{suffix}": precision, f"recall{suffix}": recall, f"f1-measure{suffix}": f1}


def ratio(numerator: float, denominator: float) -> float:
    return float(numerator) / denominator if denominator else 0.0
