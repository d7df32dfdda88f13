import random

import pytest
from allennlp.common import Params
from allennlp.training.metrics import Metric

from nerzoo.metrics.thread_discourse_f1 import ThreadDiscourseF1
from tests.distributed import metric_in_two_processes

QQ, QA, AA, AO, RES = "Question-Question", "Question-Add", "Answer-Answer", "Answer-Objection", "Resolution"


def _hand_worked():
    """Two threads, five posts; per post: predicted (link, DA) and the gold (link, DA) pairs."""
    predicted_links = [[0, 1, 1], [0, 0]]
    predicted_acts = [[QQ, AA, RES], [AA, AA]]
    gold_links = [[[0], [1], [2, 1]], [[0], [0, 1]]]
    gold_acts = [[[QQ], [QA], [AO, RES]], [[QQ], [AA, AA]]]
    return predicted_links, predicted_acts, gold_links, gold_acts


def test_hand_worked_counts_with_multi_link_posts():
    metric = ThreadDiscourseF1()
    metric(*_hand_worked())
    # Post by post (link / DA / joint true positives; gold items):
    #   A1 (0,QQ) vs {(0,QQ)}:          1/1/1; gold links 1, DAs 1, pairs 1
    #   A2 (1,AA) vs {(1,QA)}:          1/0/0; 1, 1, 1
    #   A3 (1,RES) vs {(2,AO),(1,RES)}: 1/1/1; 2, 2, 2   (multi-link: one right of two)
    #   B1 (0,AA) vs {(0,QQ)}:          1/0/0; 1, 1, 1
    #   B2 (0,AA) vs {(0,AA),(1,AA)}:   1/1/1; 2, 1, 2   (one DA, twice: a single gold DA)
    assert metric.counts == {
        "link": {"tp": 5, "predicted": 5, "gold": 7},
        "da": {"tp": 3, "predicted": 5, "gold": 6},
        "joint": {"tp": 3, "predicted": 5, "gold": 7},
    }
    scores = metric.get_metric(reset=True)
    expected = {"link": (1.0, 5 / 7), "da": (3 / 5, 3 / 6), "joint": (3 / 5, 3 / 7)}
    for task, (precision, recall) in expected.items():
        assert scores[f"{task}_precision"] == pytest.approx(precision)
        assert scores[f"{task}_recall"] == pytest.approx(recall)
        assert scores[f"{task}_f1"] == pytest.approx(2 * precision * recall / (precision + recall))
    # Reset: nothing counted, all scores 0.
    assert set(metric.get_metric().values()) == {0.0}


def test_single_link_posts_score_accuracy():
    metric = ThreadDiscourseF1()
    metric([[0, 1, 1, 2]], [[QQ, AA, RES, AA]], [[[0], [1], [2], [2]]], [[[QQ], [AA], [RES], [RES]]])
    scores = metric.get_metric()
    assert scores["link_precision"] == scores["link_recall"] == scores["link_f1"] == 0.75
    assert scores["da_f1"] == 0.75 and scores["joint_f1"] == 0.5


def test_counts_accumulate_over_calls():
    metric = ThreadDiscourseF1()
    predicted_links, predicted_acts, gold_links, gold_acts = _hand_worked()
    for thread in range(2):
        metric(
            predicted_links[thread : thread + 1],
            predicted_acts[thread : thread + 1],
            gold_links[thread : thread + 1],
            gold_acts[thread : thread + 1],
        )
    whole = ThreadDiscourseF1()
    whole(*_hand_worked())
    assert metric.counts == whole.counts


def test_mismatched_inputs_are_errors():
    metric = ThreadDiscourseF1()
    with pytest.raises(ValueError, match="numbers of threads differ"):
        metric([[0]], [[QQ]], [], [])
    with pytest.raises(ValueError, match="numbers of posts differ"):
        metric([[0, 1]], [[QQ]], [[[0], [1]]], [[[QQ], [AA]]])
    with pytest.raises(ValueError, match="2 gold links but 1 gold DAs"):
        metric([[0]], [[QQ]], [[[0, 1]]], [[[QQ]]])


def test_registered():
    assert isinstance(Metric.from_params(Params({"type": "thread_discourse_f1"})), ThreadDiscourseF1)


def _random_threads(seed, num_threads=40):
    rng = random.Random(seed)
    acts = [QQ, QA, AA, AO, RES]
    predicted_links, predicted_acts, gold_links, gold_acts = [], [], [], []
    for _ in range(num_threads):
        posts = rng.randint(1, 8)
        predicted_links.append([rng.randrange(t) for t in range(1, posts + 1)])
        predicted_acts.append([rng.choice(acts) for _ in range(posts)])
        links = [rng.sample(range(t), k=min(t, rng.choice([1, 1, 1, 2]))) for t in range(1, posts + 1)]
        gold_links.append(links)
        gold_acts.append([[rng.choice(acts) for _ in post_links] for post_links in links])
    return predicted_links, predicted_acts, gold_links, gold_acts


def test_distributed_counts_aggregate_exactly(tmp_path):
    threads = _random_threads(5)
    single = ThreadDiscourseF1()
    single(*threads)
    expected = single.get_metric()
    assert 0.0 < expected["joint_f1"] < expected["link_f1"] < 1.0

    results = metric_in_two_processes(ThreadDiscourseF1, threads, tmp_path / "init")
    assert results[0] == expected and results[1] == expected
