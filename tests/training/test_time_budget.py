import json
from types import SimpleNamespace

import pytest
from allennlp.commands.train import train_model_from_file
from allennlp.common.checks import ConfigurationError

from nerzoo.training.callbacks.time_budget import TimeBudget

CONFIG = "training_config/bilstm_crf.jsonnet"


def _train(tmp_path, num_epochs, max_minutes):
    overrides = {
        "trainer.num_epochs": num_epochs,
        "trainer.patience": None,
        "trainer.callbacks": [{"type": "time_budget", "max_minutes": max_minutes}],
    }
    serialization_dir = tmp_path / "run"
    train_model_from_file(CONFIG, str(serialization_dir), overrides=json.dumps(overrides))
    metrics = json.loads((serialization_dir / "metrics.json").read_text())
    return serialization_dir, metrics


def test_a_spent_budget_stops_training_after_the_first_epoch_and_archives_it(tmp_path):
    serialization_dir, metrics = _train(tmp_path, num_epochs=4, max_minutes=1e-6)
    assert metrics["epoch"] == 0
    assert (serialization_dir / "model.tar.gz").exists()
    report = json.loads((serialization_dir / "time_budget.json").read_text())
    assert report["stopped_after_epoch"] == 0 and report["max_minutes"] == pytest.approx(1e-6)


def test_an_ample_budget_leaves_the_epochs_alone(tmp_path):
    serialization_dir, metrics = _train(tmp_path, num_epochs=2, max_minutes=60)
    assert metrics["epoch"] == 1
    assert not (serialization_dir / "time_budget.json").exists()


def test_bad_budget_and_unknown_trainer_are_clear_errors():
    with pytest.raises(ConfigurationError, match="max_minutes"):
        TimeBudget("unused", max_minutes=0)
    with pytest.raises(ConfigurationError, match="gradient_descent"):
        TimeBudget("unused", max_minutes=1).on_start(SimpleNamespace())
