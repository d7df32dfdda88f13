"""
Every shipped config trained by the real `allennlp train` in two gloo processes (allennlp's
`"distributed": {"cuda_devices": [-1, -1]}`), then evaluated by `allennlp evaluate` in one: the
validation metrics of the distributed run (span F1, accuracy, calibration, thread metrics) equal
the single-process ones on the same weights, and the test evaluation after training finishes
(no deadlock) with the single-process figures.

Minutes in all: `make test-slow` runs them (CI too), `make test` does not.
"""

import json
import math

import pytest
from allennlp.common import Params

from tests import PROJECT_ROOT, evaluate, train
from tests.tiny_transformer import tiny_bert_overrides

pytestmark = [pytest.mark.end_to_end, pytest.mark.slow]

CONFIGS = sorted(path.stem for path in (PROJECT_ROOT / "training_config").glob("*.jsonnet"))
# Two epochs; the curriculum unfreezes the CRF's transitions after the first, under DDP.
OVERRIDES = {
    "distributed": {"cuda_devices": [-1, -1]},
    "trainer.num_epochs": 2,
    "trainer.patience": None,
    # One validation batch a worker, so that neither stops before the other (allennlp's trainer
    # ends validation on every worker as soon as one has no batch left).
    "validation_data_loader.batch_sampler.batch_size": 1000,
}
CONFIG_OVERRIDES = {
    "me_crf_thread_discourse": {
        "trainer.callbacks": [
            {"type": "crf_transition_curriculum", "frozen_epochs": 1},
            {"type": "leave_process_group"},
        ]
    }
}
# Not a property of the predictions: losses are per-batch averages, which depend on the batching.
NOT_COMPARED = ("loss", "_loss", "training_duration")


def _same(key, value, expected):
    """Counts give equal figures; confidences differ in float32 rounding with the batch padding."""
    if "ece" in key or "brier" in key:
        return math.isclose(value, expected, abs_tol=1e-5)
    return math.isclose(value, expected, rel_tol=1e-9, abs_tol=1e-12)


def _data_paths(run):
    config = json.loads((run / "config.json").read_text())
    return config["validation_data_path"], config.get("test_data_path")


def _train_two_processes(config, run, env=None):
    path = f"training_config/{config}.jsonnet"
    tiny = tiny_bert_overrides(Params.from_file(path, ext_vars=env).as_dict(quiet=True))
    overrides = {**tiny, **OVERRIDES, **CONFIG_OVERRIDES.get(config, {})}
    train(path, run, json.dumps(overrides), env=env)


def _compared(metrics, prefix):
    return {
        key[len(prefix) :]: value
        for key, value in metrics.items()
        if key.startswith(prefix)
        and not key.endswith(NOT_COMPARED)
        and isinstance(value, (int, float))
        and not key.startswith(prefix + "epoch")
    }


@pytest.mark.parametrize("config", CONFIGS)
def test_two_process_training_gives_the_single_process_metrics(config, tmp_path):
    env = None
    if config == "fofe_ner_second_pass":
        first = tmp_path / "first"
        _train_two_processes("fofe_ner", first)
        env = {"FOFE_FIRST_PASS": str(first / "model.tar.gz")}
    run = tmp_path / "run"
    _train_two_processes(config, run, env=env)
    metrics = json.loads((run / "metrics.json").read_text())
    validation, test = _data_paths(run)
    expected_validation = _compared(evaluate(run / "model.tar.gz", validation, tmp_path / "dev.json"), "")
    distributed_validation = _compared(metrics, "best_validation_")
    assert distributed_validation, metrics
    assert distributed_validation.keys() <= expected_validation.keys()
    for key, value in distributed_validation.items():
        assert _same(key, value, expected_validation[key]), (key, value, expected_validation[key])
    if test:
        expected_test = _compared(evaluate(run / "model.tar.gz", test, tmp_path / "test.json"), "")
        distributed_test = _compared(metrics, "test_")
        assert distributed_test.keys() == expected_test.keys()
        for key, value in distributed_test.items():
            assert _same(key, value, expected_test[key]), (key, value, expected_test[key])


def test_fused_adam_gives_the_single_process_metrics(tmp_path, monkeypatch):
    """Fused optimizers update parameters without bumping their versions: the CRF's kept scores follow them."""
    fused = {"trainer.optimizer.parameter_groups": [[["."], {"fused": True}]]}
    monkeypatch.setitem(CONFIG_OVERRIDES, "deptree_ner", fused)
    test_two_process_training_gives_the_single_process_metrics("deptree_ner", tmp_path)
