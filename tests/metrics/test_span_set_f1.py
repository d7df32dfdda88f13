import functools
import random

import pytest
import torch
from allennlp.data.vocabulary import Vocabulary
from allennlp.training.metrics import Metric
from nerzoo_runtime.tag_scheme import tags_to_spans

from nerzoo.metrics.conll_span_f1 import ConllSpanF1
from nerzoo.metrics.span_set_f1 import SpanSetF1
from tests.distributed import metric_in_two_processes

TYPES = ["LOC", "MISC", "ORG", "PER"]


def _hand_worked():
    """Three sentences with nested entities: predicted and gold (start, end, label) per sentence."""
    predicted = [
        [(0, 4, "ORG"), (2, 4, "PER"), (5, 6, "PER"), (5, 6, "PER")],  # listed twice: counts once
        {(0, 3, "LOC"), (1, 2, "PER"), (0, 1, "LOC")},
        [(0, 2, "PER"), (0, 2, "LOC")],  # one span, two labels
    ]
    gold = [
        [(0, 4, "ORG"), (2, 4, "LOC"), (5, 6, "PER")],
        [(0, 3, "ORG"), (1, 2, "PER"), (0, 1, "LOC")],
        [(0, 2, "PER")],
    ]
    return predicted, gold


def test_hand_worked_nested_counts_and_scores():
    metric = SpanSetF1(TYPES)
    metric(*_hand_worked())
    # Sentence 1: ORG(0,4), PER(5,6) right; PER(2,4) spurious; LOC(2,4) missed.
    # Sentence 2: PER(1,2), LOC(0,1) right; LOC(0,3) has the wrong type (fp), ORG(0,3) missed.
    # Sentence 3: PER(0,2) right; LOC(0,2) spurious.
    assert metric.counts == {
        "LOC": {"tp": 1, "fp": 2, "fn": 1},
        "MISC": {"tp": 0, "fp": 0, "fn": 0},
        "ORG": {"tp": 1, "fp": 0, "fn": 1},
        "PER": {"tp": 3, "fp": 1, "fn": 0},
    }
    scores = metric.get_metric()
    expected = {
        "LOC": (1 / 3, 1 / 2, 2 / 5),
        "MISC": (0.0, 0.0, 0.0),
        "ORG": (1.0, 1 / 2, 2 / 3),
        "PER": (3 / 4, 1.0, 6 / 7),
        "overall": (5 / 8, 5 / 7, 2 / 3),
    }
    assert len(scores) == 3 * len(expected)
    for suffix, (precision, recall, f1) in expected.items():
        assert scores[f"precision-{suffix}"] == pytest.approx(precision)
        assert scores[f"recall-{suffix}"] == pytest.approx(recall)
        assert scores[f"f1-measure-{suffix}"] == pytest.approx(f1)


def test_counts_accumulate_and_reset():
    predicted, gold = _hand_worked()
    metric = SpanSetF1(TYPES)
    for sentence in range(3):
        metric(predicted[sentence : sentence + 1], gold[sentence : sentence + 1])
    whole = SpanSetF1(TYPES)
    whole(predicted, gold)
    assert metric.counts == whole.counts
    assert metric.get_metric(reset=True) == whole.get_metric()
    assert set(metric.get_metric().values()) == {0.0}
    assert all(value == 0 for label in metric.counts.values() for value in label.values())
    metric([[(0, 1, "PER")]], [[(0, 1, "PER")]])
    assert metric.get_metric()["f1-measure-overall"] == 1.0
    metric.reset()
    assert metric.get_metric()["f1-measure-PER"] == 0.0


def test_unknown_label_is_an_error_and_counts_nothing():
    metric = SpanSetF1(["PER"])
    with pytest.raises(ValueError, match="'ORG' is not among"):
        metric([[(0, 1, "PER")]], [[(0, 2, "ORG")]])
    with pytest.raises(ValueError, match="'GPE' is not among"):
        metric([[(0, 1, "PER"), (3, 4, "GPE")]], [[]])
    assert metric.counts == {"PER": {"tp": 0, "fp": 0, "fn": 0}}


def test_sentence_count_mismatch_is_an_error():
    with pytest.raises(ValueError, match="2 predicted but 1 gold"):
        SpanSetF1(TYPES)([[], []], [[]])


def test_from_vocab_and_registration():
    vocabulary = Vocabulary()
    vocabulary.add_tokens_to_namespace(["PER", "ORG", "NONE"], namespace="labels")
    vocabulary.add_tokens_to_namespace(["GPE"], namespace="entities")
    assert SpanSetF1.from_vocab(vocabulary).entity_types == ["NONE", "ORG", "PER"]
    # A padded namespace: its padding and OOV tokens are no types.
    assert SpanSetF1.from_vocab(vocabulary, namespace="entities").entity_types == ["GPE"]
    assert Metric.by_name("span_set_f1") is SpanSetF1


def _random_bio(rng, length):
    tags = []
    for _ in range(length):
        roll = rng.random()
        if roll < 0.5:
            tags.append("O")
        else:
            tags.append(("B-" if roll < 0.75 else "I-") + rng.choice(TYPES))
    return tags


def _corrupt(tags, rng):
    return [_random_bio(rng, 1)[0] if rng.random() < 0.15 else tag for tag in tags]


def test_agrees_with_conll_span_f1_on_flat_entities():
    rng = random.Random(5)
    gold_tags = [_random_bio(rng, rng.randint(1, 20)) for _ in range(500)]
    predicted_tags = [_corrupt(tags, rng) for tags in gold_tags]

    def as_spans(tags):
        return [(start, end, label) for label, start, end in tags_to_spans(tags)]

    conll = ConllSpanF1(TYPES)
    conll(predicted_tags, gold_tags)
    ours = SpanSetF1(TYPES)
    ours([as_spans(tags) for tags in predicted_tags], [as_spans(tags) for tags in gold_tags])

    assert ours.counts == conll.counts
    expected = conll.get_metric()
    assert ours.get_metric() == expected
    assert 0.3 < expected["f1-measure-overall"] < 0.9  # the corruption really changed things


def _random_nested(rng, sentences):
    def spans():
        result = set()
        for _ in range(rng.randint(0, 6)):
            start = rng.randrange(12)
            result.add((start, start + rng.randint(1, 4), rng.choice(TYPES)))
        return result

    gold = [spans() for _ in range(sentences)]
    predicted = [
        {span for span in sentence if rng.random() < 0.7} | (spans() if rng.random() < 0.5 else set())
        for sentence in gold
    ]
    return [sorted(sentence) for sentence in predicted], [sorted(sentence) for sentence in gold]


def test_distributed_counts_aggregate_exactly(tmp_path):
    predicted, gold = _random_nested(random.Random(3), 301)
    single = SpanSetF1(TYPES)
    single(predicted, gold)
    expected = single.get_metric()
    assert 0.3 < expected["f1-measure-overall"] < 0.95

    # Each process alone sees only half: its own scores differ from the whole.
    half = SpanSetF1(TYPES)
    half(predicted[::2], gold[::2])
    assert half.get_metric() != expected

    results = metric_in_two_processes(functools.partial(SpanSetF1, TYPES), (predicted, gold), tmp_path / "init")
    assert results[0] == expected and results[1] == expected


def test_counts_are_a_fixed_long_tensor():
    metric = SpanSetF1(["PER", "LOC", "PER"])
    assert metric.entity_types == ["LOC", "PER"]
    assert metric._counts.shape == (2, 3) and metric._counts.dtype == torch.long
