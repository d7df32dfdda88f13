import functools
import random

import pytest
from allennlp.common import Params
from allennlp.training.metrics import Metric
from nerzoo_runtime.tag_scheme import convert_tags

from nerzoo.metrics.concept_error_rate import ConceptErrorRate, concept_sequence, levenshtein_counts
from tests.distributed import metric_in_two_processes


def _rate(predicted, gold, tag_scheme="BIOUL"):
    metric = ConceptErrorRate(tag_scheme)
    metric(predicted, gold)
    counts = (metric.substitutions, metric.deletions, metric.insertions, metric.reference_concepts)
    return metric.get_metric()["concept_error_rate"], counts


def test_concept_sequence_is_the_chunk_labels_in_order():
    assert concept_sequence(["B-PER", "L-PER", "O", "U-LOC"]) == ["PER", "LOC"]
    assert concept_sequence(["U-LOC", "U-LOC"]) == ["LOC", "LOC"]
    assert concept_sequence(["B-LOC", "I-LOC", "B-LOC"]) == ["LOC", "LOC"]  # BIO
    assert concept_sequence(["O", "O"]) == []


def test_identical_annotation_has_no_error():
    tags = [["B-PER", "L-PER", "O", "U-LOC"], ["O", "U-ORG"]]
    assert _rate(tags, tags) == (0.0, (0, 0, 0, 3))


def test_one_substitution():
    # Reference PER LOC, hypothesis ORG LOC.
    assert _rate([["U-ORG", "O", "U-LOC"]], [["U-PER", "O", "U-LOC"]]) == (0.5, (1, 0, 0, 2))


def test_one_deletion():
    # Reference PER LOC, hypothesis LOC.
    assert _rate([["O", "O", "U-LOC"]], [["U-PER", "O", "U-LOC"]]) == (0.5, (0, 1, 0, 2))
    # Two adjacent LOC chunks read as one: the boundary costs a deletion.
    assert _rate([["B-LOC", "L-LOC"]], [["U-LOC", "U-LOC"]]) == (0.5, (0, 1, 0, 2))


def test_one_insertion():
    # Reference PER, hypothesis PER LOC.
    assert _rate([["U-PER", "O", "U-LOC"]], [["U-PER", "O", "O"]]) == (1.0, (0, 0, 1, 1))


def test_mixed_sentence():
    gold = ["B-PER", "L-PER", "O", "U-ORG", "U-LOC", "O", "B-DATE", "I-DATE", "L-DATE", "U-MISC"]
    predicted = ["B-PER", "L-PER", "O", "O", "U-LOC", "O", "U-TIME", "B-MISC", "L-MISC", "U-ORG"]
    # Reference:  PER ORG LOC DATE MISC  (N = 5)
    # Hypothesis: PER     LOC TIME MISC ORG
    # PER = PER, ORG deleted, LOC = LOC, DATE -> TIME substituted, MISC = MISC, ORG inserted: cost 3.
    # No alignment costs 2: position by position 4 pairs differ, and removing one concept from each
    # side never leaves equal sequences (the reference has no TIME, the hypothesis no DATE).
    assert concept_sequence(gold) == ["PER", "ORG", "LOC", "DATE", "MISC"]
    assert concept_sequence(predicted) == ["PER", "LOC", "TIME", "MISC", "ORG"]
    assert _rate([predicted], [gold]) == (pytest.approx(3 / 5), (1, 1, 1, 5))


def test_corpus_rate_is_pooled_not_averaged():
    # Sentence 1: 1 reference concept, substituted (rate 1 alone); sentence 2: 3 concepts, all right
    # (rate 0 alone).  Pooled: 1 / 4, not the mean 1 / 2.
    gold = [["U-PER", "O"], ["U-PER", "U-LOC", "O", "U-ORG"]]
    predicted = [["U-LOC", "O"], ["U-PER", "U-LOC", "O", "U-ORG"]]
    assert _rate(predicted, gold) == (0.25, (1, 0, 0, 4))
    # The same sentences in two calls accumulate to the same rate.
    metric = ConceptErrorRate()
    metric(predicted[:1], gold[:1])
    metric(predicted[1:], gold[1:])
    assert metric.get_metric()["concept_error_rate"] == 0.25


def test_bio_and_bioul_input_agree():
    gold = [["B-PER", "L-PER", "O", "U-ORG", "U-ORG", "B-LOC", "I-LOC", "L-LOC"], ["O", "U-MISC", "O"]]
    predicted = [["B-PER", "I-PER", "L-PER", "O", "U-ORG", "U-LOC", "O", "U-LOC"], ["U-PER", "O", "U-PER"]]
    # Sentence 1: PER ORG ORG LOC vs PER ORG LOC LOC, one substitution; sentence 2: MISC vs PER PER,
    # a substitution and an insertion.
    expected = _rate(predicted, gold)
    assert expected == (pytest.approx(3 / 5), (2, 0, 1, 5))
    bio = [convert_tags(tags, "BIO") for tags in predicted], [convert_tags(tags, "BIO") for tags in gold]
    assert bio[1][0][3:5] == ["B-ORG", "B-ORG"]
    assert _rate(*bio, tag_scheme="BIO") == expected
    assert _rate(*bio, tag_scheme="BIOUL") == expected  # BIO tags are BIOUL tags
    iob1 = [convert_tags(tags, "IOB1") for tags in predicted], [convert_tags(tags, "IOB1") for tags in gold]
    assert iob1[1][0][3:5] == ["I-ORG", "B-ORG"]
    assert _rate(*iob1, tag_scheme="IOB1") == expected

    def bioes(sentences):
        return [[{"L": "E", "U": "S"}.get(tag[0], tag[0]) + tag[1:] for tag in tags] for tags in sentences]

    assert bioes(gold)[1] == ["O", "S-MISC", "O"]
    assert _rate(bioes(predicted), bioes(gold)) == expected


def test_all_o_sentences():
    assert _rate([["O", "O"]], [["O", "O"]]) == (0.0, (0, 0, 0, 0))
    # Nothing to find but two concepts inserted: (S + D + I) / max(N, 1).
    assert _rate([["U-PER", "U-LOC"]], [["O", "O"]]) == (2.0, (0, 0, 2, 0))
    assert _rate([["O", "O"]], [["B-PER", "L-PER"]]) == (1.0, (0, 1, 0, 1))
    assert ConceptErrorRate().get_metric() == {"concept_error_rate": 0.0}


def test_reset():
    metric = ConceptErrorRate()
    metric([["U-LOC"]], [["U-PER"]])
    assert metric.get_metric(reset=True) == {"concept_error_rate": 1.0}
    assert (metric.substitutions, metric.deletions, metric.insertions, metric.reference_concepts) == (0, 0, 0, 0)
    assert metric.get_metric() == {"concept_error_rate": 0.0}
    metric([["U-PER", "O"]], [["U-PER", "U-LOC"]])
    assert metric.get_metric() == {"concept_error_rate": 0.5}
    assert metric.get_metric() == {"concept_error_rate": 0.5}  # no reset: unchanged


def test_bad_input():
    with pytest.raises(ValueError, match="unknown tag scheme 'BIOES'"):
        ConceptErrorRate("BIOES")
    metric = ConceptErrorRate("BIO")
    with pytest.raises(ValueError, match="predicted sequence 1: tag 'U-LOC' is not a BIO tag"):
        metric([["O"], ["U-LOC"]], [["O"], ["B-LOC"]])
    with pytest.raises(ValueError, match="gold sequence 0: tag 'NNP' is not a BIO tag"):
        metric([["O"]], [["NNP"]])
    with pytest.raises(ValueError, match="1 predicted but 2 gold sequences"):
        metric([["O"]], [["O"], ["O"]])
    with pytest.raises(ValueError, match="sequence 0: lengths differ: 1 predicted vs 2 gold"):
        metric([["O"]], [["O", "O"]])
    assert metric.reference_concepts == 0  # nothing counted


def test_registered_and_built_from_params():
    assert Metric.by_name("concept_error_rate") is ConceptErrorRate
    metric = Metric.from_params(Params({"type": "concept_error_rate", "tag_scheme": "BIO"}))
    assert isinstance(metric, ConceptErrorRate) and metric.tag_scheme == "BIO"


# --------------------------------------------------------------------------------------------------
# levenshtein_counts


def test_levenshtein_counts_by_hand():
    assert levenshtein_counts([], []) == (0, 0, 0)
    assert levenshtein_counts(["A", "B"], []) == (0, 2, 0)
    assert levenshtein_counts([], ["A"]) == (0, 0, 1)
    assert levenshtein_counts(["A", "B", "C"], ["A", "X", "C"]) == (1, 0, 0)
    assert levenshtein_counts(["A", "B", "C"], ["A", "C"]) == (0, 1, 0)
    assert levenshtein_counts(["A", "C"], ["A", "B", "C"]) == (0, 0, 1)
    # Equal cost 2 either way; the backtrace prefers the diagonal: two substitutions.
    assert levenshtein_counts(["A", "B"], ["B", "C"]) == (2, 0, 0)
    assert levenshtein_counts(("k", "i", "t", "t", "e", "n"), ("s", "i", "t", "t", "i", "n", "g")) == (2, 0, 1)


def _edit_distance(reference, hypothesis):
    """Slow, obviously right recursive Levenshtein distance."""

    @functools.lru_cache(maxsize=None)
    def distance(i, j):
        if i == len(reference):
            return len(hypothesis) - j
        if j == len(hypothesis):
            return len(reference) - i
        return min(
            distance(i + 1, j + 1) + (reference[i] != hypothesis[j]),
            distance(i + 1, j) + 1,
            distance(i, j + 1) + 1,
        )

    return distance(0, 0)


def test_levenshtein_counts_against_brute_force():
    generator = random.Random(20190901)
    for _ in range(400):
        alphabet = "ABCD"[: generator.randint(1, 4)]
        reference = [generator.choice(alphabet) for _ in range(generator.randint(0, 7))]
        hypothesis = [generator.choice(alphabet) for _ in range(generator.randint(0, 7))]
        substitutions, deletions, insertions = levenshtein_counts(reference, hypothesis)
        assert min(substitutions, deletions, insertions) >= 0
        assert substitutions + deletions + insertions == _edit_distance(reference, hypothesis)
        matches = len(reference) - substitutions - deletions
        assert matches >= 0
        assert len(hypothesis) == substitutions + insertions + matches
        assert levenshtein_counts(reference, hypothesis) == (substitutions, deletions, insertions)  # deterministic
        # Swapping the sides swaps deletions and insertions in the total.
        assert sum(levenshtein_counts(hypothesis, reference)) == substitutions + deletions + insertions


# --------------------------------------------------------------------------------------------------
# Distributed


def test_distributed_counts_are_summed(tmp_path):
    generator = random.Random(7)
    labels = ["U-PER", "U-LOC", "U-ORG", "O", "O"]
    gold = [[generator.choice(labels) for _ in range(generator.randint(1, 8))] for _ in range(30)]
    predicted = [[tag if generator.random() < 0.7 else generator.choice(labels) for tag in tags] for tags in gold]
    single = ConceptErrorRate()
    single(predicted, gold)
    expected = single.get_metric()
    assert 0.0 < expected["concept_error_rate"] < 1.0
    make_metric = functools.partial(ConceptErrorRate, "BIOUL")
    results = metric_in_two_processes(make_metric, (predicted, gold), tmp_path / "init")
    assert results[0] == expected and results[1] == expected
