import argparse
import json
import random

import pytest
from allennlp.commands.subcommand import Subcommand
from allennlp.common.checks import ConfigurationError

import nerzoo  # noqa: F401
from nerzoo.commands.cross_validate_thread_discourse import (
    cross_validate_thread_discourse,
    read_thread_lines,
    stratified_thread_folds,
)
from tests import FIXTURES_ROOT, allennlp

CONFIG = "training_config/me_crf_thread_discourse.jsonnet"
TRAIN = FIXTURES_ROOT / "thread_discourse" / "train.jsonl"


def _check_partition(folds, num_threads):
    tested = [index for fold in folds for index in fold]
    assert sorted(tested) == list(range(num_threads))  # each thread in exactly one test fold
    assert all(fold for fold in folds)


@pytest.mark.parametrize("num_folds", [2, 3, 5, 10])
def test_folds_partition_the_threads_and_are_balanced(num_folds):
    rng = random.Random(num_folds)
    lengths = [rng.randint(1, 12) for _ in range(37)]
    folds = stratified_thread_folds(lengths, num_folds, seed=13)
    assert len(folds) == num_folds
    _check_partition(folds, len(lengths))
    sizes = [len(fold) for fold in folds]
    assert max(sizes) - min(sizes) <= 1
    posts = [sum(lengths[index] for index in fold) for fold in folds]
    assert max(posts) - min(posts) <= max(lengths)


def test_folds_are_stratified_by_thread_length():
    # Lengths 1 .. 20 once each, 5 folds: each fold gets one of the 5 longest, one of the next 5, ...
    lengths = list(range(1, 21))
    random.Random(0).shuffle(lengths)
    folds = stratified_thread_folds(lengths, 5, seed=3)
    for fold in folds:
        bands = sorted((lengths[index] - 1) // 5 for index in fold)
        assert bands == [0, 1, 2, 3]
    # Serpentine dealing: the post totals are equal here.
    assert len({sum(lengths[index] for index in fold) for fold in folds}) == 1


def test_folds_are_deterministic_under_a_seed():
    lengths = [3, 5, 5, 5, 4, 4, 3, 3, 3, 6, 6, 5, 4, 3, 3, 5, 4, 4, 6, 3]
    first = stratified_thread_folds(lengths, 4, seed=13)
    assert stratified_thread_folds(lengths, 4, seed=13) == first
    # The seed breaks ties between threads of equal length, so another seed gives another split.
    others = {json.dumps(stratified_thread_folds(lengths, 4, seed=seed)) for seed in range(10)}
    assert len(others) > 1
    for folds in map(json.loads, others):
        _check_partition(folds, len(lengths))


def test_fixture_threads_split_into_disjoint_folds():
    threads, acts = read_thread_lines(str(TRAIN))
    lengths = [thread.num_posts for thread in threads]
    assert len(threads) == 24 and sum(lengths) == 138
    # 4 posts with two links (fixtures/thread_discourse/README.md).
    assert sum(thread.gold["link"] for thread in threads) == sum(thread.gold["joint"] for thread in threads) == 142
    assert "Question-Question" in acts
    folds = stratified_thread_folds(lengths, 10, seed=13)
    _check_partition(folds, 24)
    for first in range(10):
        for second in range(first + 1, 10):
            assert not set(folds[first]) & set(folds[second])


@pytest.mark.parametrize(
    "lengths, num_folds, message",
    [([3, 4, 5], 1, "at least 2 folds"), ([3, 4, 5], 4, "4 folds but only 3 threads"), ([3], 0, "at least 2")],
)
def test_bad_fold_counts_are_configuration_errors(lengths, num_folds, message):
    with pytest.raises(ConfigurationError, match=message):
        stratified_thread_folds(lengths, num_folds)


def test_errors_before_any_training(tmp_path):
    output = tmp_path / "out"
    with pytest.raises(ConfigurationError, match="data file not found: .*missing.jsonl"):
        cross_validate_thread_discourse(CONFIG, str(tmp_path / "missing.jsonl"), str(output), num_folds=2)
    with pytest.raises(ConfigurationError, match="25 folds but only 24 threads"):
        cross_validate_thread_discourse(CONFIG, str(TRAIN), str(output), num_folds=25)
    unlabelled = tmp_path / "unlabelled.jsonl"
    unlabelled.write_text(json.dumps({"posts": [{"title": "t", "text": "x", "author": "a"}]}) + "\n")
    with pytest.raises(ConfigurationError, match="needs labelled threads"):
        cross_validate_thread_discourse(CONFIG, str(unlabelled), str(output), num_folds=2)
    (output / "fold-1").mkdir(parents=True)
    with pytest.raises(ConfigurationError, match="not empty"):
        cross_validate_thread_discourse(CONFIG, str(TRAIN), str(output), num_folds=2)


def test_subcommand_parses():
    parser = argparse.ArgumentParser()
    Subcommand.by_name("cross-validate-thread-discourse")().add_subparser(parser.add_subparsers())
    args = parser.parse_args(
        ["cross-validate-thread-discourse", CONFIG, "threads.jsonl", "-s", "out", "--folds", "3", "-o", "{}"]
    )
    assert (args.param_path, args.data_file, args.serialization_dir) == (CONFIG, "threads.jsonl", "out")
    assert args.folds == 3 and args.seed == 13 and args.overrides == "{}" and callable(args.func)


@pytest.mark.end_to_end
def test_cross_validate_end_to_end(tmp_path):
    output = tmp_path / "cv"
    result = allennlp(
        "cross-validate-thread-discourse",
        CONFIG,
        TRAIN,
        "--folds",
        2,
        "-s",
        output,
        "-o",
        json.dumps({"trainer.num_epochs": 2}),
        "--include-package",
        "nerzoo",
    )
    summary = json.loads((output / "cross_validation.json").read_text())
    assert summary["folds"] == 2 and len(summary["per_fold"]) == 2
    threads = [line for line in TRAIN.read_text().splitlines() if line.strip()]
    tested = []
    for fold in (1, 2):
        fold_dir = output / f"fold-{fold}"
        train = fold_dir.joinpath("train.jsonl").read_text().splitlines()
        test = fold_dir.joinpath("test.jsonl").read_text().splitlines()
        assert sorted(train + test) == sorted(threads) and not set(train) & set(test)
        tested += test
        assert (fold_dir / "model" / "model.tar.gz").exists()
        # Trained on the training folds only: nothing was validated, nothing selected on the test fold.
        config = json.loads((fold_dir / "model" / "config.json").read_text())
        assert config["train_data_path"] == str(fold_dir / "train.jsonl")
        assert "validation_data_path" not in config and "test_data_path" not in config
        fold_metrics = json.loads((fold_dir / "metrics.json").read_text())
        assert summary["per_fold"][fold - 1]["joint_f1"] == fold_metrics["joint_f1"]
    assert sorted(tested) == sorted(threads)
    for name in ("link_f1", "da_f1", "joint_f1"):
        values = [fold[name] for fold in summary["per_fold"]]
        assert summary["mean"][name] == pytest.approx(sum(values) / 2)
        assert summary["std"][name] == pytest.approx(abs(values[0] - values[1]) / 2**0.5)
    # Pooled over all 138 posts (142 gold links), each tested once.
    folds_posts = [fold["test_posts"] for fold in summary["per_fold"]]
    assert sum(folds_posts) == 138
    correct = sum(round(fold["link_precision"] * fold["test_posts"]) for fold in summary["per_fold"])
    assert summary["pooled"]["link_precision"] == pytest.approx(correct / 138)
    assert summary["pooled"]["link_recall"] == pytest.approx(correct / 142)
    assert "mean ± std" in result.stdout and "pooled (micro)" in result.stdout and "joint F1" in result.stdout
