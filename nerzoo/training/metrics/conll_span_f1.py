from typing import Dict, List, Sequence

import torch
from allennlp.data.vocabulary import Vocabulary
from allennlp.nn.util import dist_reduce_sum
from allennlp.training.metrics.metric import Metric

from nerzoo.data.tag_schemes import split_tag, tags_to_spans


@Metric.register("conll_span_f1")
class ConllSpanF1(Metric):
    """
    Entity-level precision, recall and F1 with `conlleval` semantics, per entity type and overall
    (micro-averaged), as in Tjong Kim Sang & De Meulder (2003), https://aclanthology.org/W03-0419.

    Registered as a `Metric` with name "conll_span_f1".

    A predicted span counts as correct only when its type, start and end all equal a gold span's.
    Spans are decoded with `nerzoo.data.tag_schemes.tags_to_spans`, which follows conlleval's chunk
    rules for IOB1, BIO and BIOUL/BIOES alike.

    Counts live in one `(num_types, 3)` integer tensor (true positives, false positives, false
    negatives) over a type list fixed at construction, so under distributed training `get_metric`
    sums them exactly across workers (allennlp's `SpanBasedF1Measure` refuses to).

    The metric keys match allennlp's `SpanBasedF1Measure`: `precision-overall`, `recall-overall`,
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
    def from_vocab(cls, vocabulary: Vocabulary, tag_namespace: str = "labels") -> "ConllSpanF1":
        """The entity types are the tag types (the part after `X-`) of a label namespace."""
        tags = vocabulary.get_token_to_index_vocabulary(tag_namespace)
        return cls(sorted({label for label in map(lambda tag: split_tag(tag)[1], tags) if label}))

    def __call__(  # type: ignore
        self, predicted_tags: Sequence[Sequence[str]], gold_tags: Sequence[Sequence[str]]
    ) -> None:
        """
        # Parameters

        predicted_tags : `Sequence[Sequence[str]]`
            One tag sequence per sentence.  Call it sentence by sentence: entities never cross a
            sentence boundary.
        gold_tags : `Sequence[Sequence[str]]`
            The gold tags, aligned with `predicted_tags`.
        """
        if len(predicted_tags) != len(gold_tags):
            raise ValueError(f"{len(predicted_tags)} predicted but {len(gold_tags)} gold sequences")
        batch_counts = torch.zeros_like(self._counts)
        for predicted, gold in zip(predicted_tags, gold_tags):
            if len(predicted) != len(gold):
                raise ValueError(f"sequence lengths differ: {len(predicted)} vs {len(gold)}")
            predicted_spans = set(tags_to_spans(predicted))
            gold_spans = set(tags_to_spans(gold))
            for label, *_ in predicted_spans & gold_spans:
                batch_counts[self._index(label), 0] += 1
            for label, *_ in predicted_spans - gold_spans:
                batch_counts[self._index(label), 1] += 1
            for label, *_ in gold_spans - predicted_spans:
                batch_counts[self._index(label), 2] += 1
        self._counts += batch_counts

    def _index(self, label: str) -> int:
        try:
            return self._type_index[label]
        except KeyError:
            raise ValueError(
                f"entity type {label!r} is not among the metric's types {self.entity_types}"
            ) from None

    @property
    def counts(self) -> Dict[str, Dict[str, int]]:
        """This worker's raw counts: `{type: {"tp": .., "fp": .., "fn": ..}}`."""
        return {
            label: dict(zip(("tp", "fp", "fn"), self._counts[index].tolist()))
            for index, label in enumerate(self.entity_types)
        }

    def get_metric(self, reset: bool = False) -> Dict[str, float]:
        counts = dist_reduce_sum(self._counts).cpu()
        metrics: Dict[str, float] = {}
        for index, label in enumerate(self.entity_types):
            metrics.update(self._scores(counts[index], f"-{label}"))
        metrics.update(self._scores(counts.sum(dim=0), "-overall"))
        if reset:
            self.reset()
        return metrics

    @staticmethod
    def _scores(counts: torch.Tensor, suffix: str) -> Dict[str, float]:
        true_positives, false_positives, false_negatives = (int(value) for value in counts)
        precision = _ratio(true_positives, true_positives + false_positives)
        recall = _ratio(true_positives, true_positives + false_negatives)
        f1 = _ratio(2 * precision * recall, precision + recall)
        return {f"precision{suffix}": precision, f"recall{suffix}": recall, f"f1-measure{suffix}": f1}

    def reset(self) -> None:
        self._counts.zero_()


def _ratio(numerator: float, denominator: float) -> float:
    return float(numerator) / denominator if denominator else 0.0
