from typing import Dict, List, Sequence

import torch
from allennlp.data.vocabulary import Vocabulary
from allennlp.training.metrics.metric import Metric
from nerzoo_runtime.tag_scheme import split_tag, tags_to_spans

from nerzoo.metrics.span_set_f1 import LabelledSpan, SpanSetF1


@Metric.register("conll_span_f1")
class ConllSpanF1(Metric):
    """
    Entity-level precision, recall and F1 with `conlleval` semantics, per entity type and overall
    (micro-averaged), as in Tjong Kim Sang & De Meulder (2003), https://aclanthology.org/W03-0419.

    Registered as a `Metric` with name "conll_span_f1".

    Spans are decoded by `nerzoo_runtime.tag_scheme.tags_to_spans` (conlleval's chunk rules for
    IOB1, BIO and BIOUL/BIOES) and counted by a `SpanSetF1`: a predicted span is correct when its
    type, start and end equal a gold span's.  The keys are those of allennlp's `SpanBasedF1Measure`.

    # Parameters

    entity_types : `Sequence[str]`, required
        Every entity type that may occur (e.g. `["LOC", "MISC", "ORG", "PER"]`).
    """

    def __init__(self, entity_types: Sequence[str]) -> None:
        self._spans = SpanSetF1(entity_types)

    @property
    def entity_types(self) -> List[str]:
        return self._spans.entity_types

    @classmethod
    def from_vocab(cls, vocabulary: Vocabulary, tag_namespace: str = "labels") -> "ConllSpanF1":
        """The entity types are the tag types (the part after `X-`) of a label namespace."""
        tags = vocabulary.get_token_to_index_vocabulary(tag_namespace)
        return cls(sorted({split_tag(tag)[1] for tag in tags} - {None, ""}))

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
        for predicted, gold in zip(predicted_tags, gold_tags):
            if len(predicted) != len(gold):
                raise ValueError(f"sequence lengths differ: {len(predicted)} vs {len(gold)}")
        self._spans(list(map(_labelled_spans, predicted_tags)), list(map(_labelled_spans, gold_tags)))

    def add_counts(self, counts: torch.Tensor) -> None:
        """`(num_types, 3)` true positive, false positive and false negative counts, in the order of
        `entity_types`, decoded elsewhere (e.g. from tag ids by `nerzoo.modules.crf.tag_decoder`)."""
        self._spans.add_counts(counts)

    @property
    def counts(self) -> Dict[str, Dict[str, int]]:
        """This worker's raw counts: `{type: {"tp": .., "fp": .., "fn": ..}}`."""
        return self._spans.counts

    def get_metric(self, reset: bool = False) -> Dict[str, float]:
        return self._spans.get_metric(reset)

    def reset(self) -> None:
        self._spans.reset()


def _labelled_spans(tags: Sequence[str]) -> List[LabelledSpan]:
    return [(start, end, label) for label, start, end in tags_to_spans(tags)]
