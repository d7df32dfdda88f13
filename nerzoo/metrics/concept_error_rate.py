from typing import Dict, List, Sequence, Tuple

import torch
from allennlp.nn.util import dist_reduce_sum
from allennlp.training.metrics.metric import Metric
from nerzoo_runtime.tag_scheme import check_tag_scheme, invalid_tag_reason, tags_to_spans

# Positions in the count tensor.
_SUBSTITUTIONS, _DELETIONS, _INSERTIONS, _REFERENCE = range(4)


@Metric.register("concept_error_rate")
class ConceptErrorRate(Metric):
    """
    The Concept Error Rate (CER) of spoken language understanding, as reported for the MEDIA task
    by Seq2Biseq (Marco Dinarelli and Loïc Grobol, 2019, "Seq2Biseq: Bidirectional Output-wise
    Recurrent Neural Networks for Sequence Modelling", §4.3): "computed by Levenshtein alignment
    between reference annotation and model hypothesis", as the sclite toolkit computes word error
    rates.

    Registered as a `Metric` with name "concept_error_rate".

    A sentence's concepts are the labels of its chunks (`tags_to_spans`, conlleval rules), in
    order: `B-PER L-PER O U-LOC` gives `PER LOC`.  The hypothesis is aligned to the reference with
    unit-cost Levenshtein edits (`levenshtein_counts`: substitutions `S`, deletions `D`, insertions
    `I`), and over the corpus (and the distributed workers)

        CER = (S + D + I) / N

    with `N` the number of reference concepts (taken as 1 when there is none); it may exceed 1.
    The key is `concept_error_rate`.

    # Parameters

    tag_scheme : `str`, optional (default = `"BIOUL"`)
        The scheme of the tags ("IOB1", "BIO" or "BIOUL"; BIOES spellings are accepted in
        "BIOUL").  A tag that is not of the scheme raises `ValueError`; BIO tags are valid BIOUL
        tags.
    """

    def __init__(self, tag_scheme: str = "BIOUL") -> None:
        self.tag_scheme = check_tag_scheme(tag_scheme)
        self._counts = torch.zeros(4, dtype=torch.long)

    def __call__(  # type: ignore
        self, predicted_tags: Sequence[Sequence[str]], gold_tags: Sequence[Sequence[str]]
    ) -> None:
        """
        # Parameters

        predicted_tags : `Sequence[Sequence[str]]`
            One tag sequence per sentence (the model's hypothesis).
        gold_tags : `Sequence[Sequence[str]]`
            The reference tags, aligned with `predicted_tags`, sentence for sentence and token for
            token.
        """
        if len(predicted_tags) != len(gold_tags):
            raise ValueError(f"{len(predicted_tags)} predicted but {len(gold_tags)} gold sequences")
        for index, (predicted, gold) in enumerate(zip(predicted_tags, gold_tags)):
            if len(predicted) != len(gold):
                raise ValueError(f"sequence {index}: lengths differ: {len(predicted)} predicted vs {len(gold)} gold")
        self.count_concepts(
            [self._concepts(gold, index, "gold") for index, gold in enumerate(gold_tags)],
            [self._concepts(predicted, index, "predicted") for index, predicted in enumerate(predicted_tags)],
        )

    def count_concepts(self, references: Sequence[Sequence[str]], hypotheses: Sequence[Sequence[str]]) -> None:
        """
        Adds sentences given directly as concept sequences (the chunk labels in order), aligned
        sentence for sentence; for callers that decode chunks themselves.
        """
        if len(references) != len(hypotheses):
            raise ValueError(f"{len(hypotheses)} predicted but {len(references)} gold sequences")
        counts = [
            [*levenshtein_counts(reference, hypothesis), len(reference)]
            for reference, hypothesis in zip(references, hypotheses)
        ]
        self._counts += torch.tensor(counts, dtype=torch.long).view(-1, 4).sum(0)

    def _concepts(self, tags: Sequence[str], index: int, side: str) -> List[str]:
        for tag in tags:
            reason = invalid_tag_reason(tag, self.tag_scheme)
            if reason is not None:
                raise ValueError(f"{side} sequence {index}: {reason}")
        return concept_sequence(tags)

    # This worker's counts so far; `reference_concepts` is `N`.
    substitutions = property(lambda self: int(self._counts[_SUBSTITUTIONS]))
    deletions = property(lambda self: int(self._counts[_DELETIONS]))
    insertions = property(lambda self: int(self._counts[_INSERTIONS]))
    reference_concepts = property(lambda self: int(self._counts[_REFERENCE]))

    def get_metric(self, reset: bool = False) -> Dict[str, float]:
        counts = dist_reduce_sum(self._counts).cpu().tolist()
        errors = counts[_SUBSTITUTIONS] + counts[_DELETIONS] + counts[_INSERTIONS]
        rate = float(errors) / max(counts[_REFERENCE], 1)
        if reset:
            self.reset()
        return {"concept_error_rate": rate}

    def reset(self) -> None:
        self._counts.zero_()


def concept_sequence(tags: Sequence[str]) -> List[str]:
    """The labels of the chunks of `tags`, in order: `[B-PER, L-PER, O, U-LOC]` -> `[PER, LOC]`."""
    return [label for label, _, _ in tags_to_spans(tags)]


def levenshtein_counts(reference: Sequence[str], hypothesis: Sequence[str]) -> Tuple[int, int, int]:
    """
    The substitutions, deletions and insertions `(S, D, I)` of a minimum-cost alignment of
    `hypothesis` to `reference` (unit costs, free matches; `S + D + I` is the Levenshtein distance).
    Among equal-cost alignments (`A B` vs `B C`) the backtrace takes, at each step back, the
    diagonal first, then a deletion, then an insertion.
    """
    rows, columns = len(reference) + 1, len(hypothesis) + 1
    # cost[i][j]: edit distance between reference[:i] and hypothesis[:j].
    cost = [list(range(columns))] + [[i] + [0] * (columns - 1) for i in range(1, rows)]
    for i in range(1, rows):
        for j in range(1, columns):
            diagonal = cost[i - 1][j - 1] + (reference[i - 1] != hypothesis[j - 1])
            cost[i][j] = min(diagonal, cost[i - 1][j] + 1, cost[i][j - 1] + 1)
    substitutions = deletions = insertions = 0
    i, j = len(reference), len(hypothesis)
    while i > 0 or j > 0:
        if i > 0 and j > 0:
            mismatch = reference[i - 1] != hypothesis[j - 1]
            if cost[i][j] == cost[i - 1][j - 1] + mismatch:
                substitutions += mismatch
                i, j = i - 1, j - 1
                continue
        if i > 0 and cost[i][j] == cost[i - 1][j] + 1:
            deletions += 1
            i -= 1
        else:
            insertions += 1
            j -= 1
    return substitutions, deletions, insertions
