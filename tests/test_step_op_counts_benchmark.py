"""benchmarks/speed/step_op_counts.py on the fixtures, in this process: it counts a training step and a prediction batch."""

import importlib.util
import sys

from tests import PROJECT_ROOT


def test_step_op_counts_on_the_fixtures(monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))  # the script puts benchmarks/ on it
    monkeypatch.setenv("NERZOO_DATA", "fixtures")
    spec = importlib.util.spec_from_file_location("step_op_counts", PROJECT_ROOT / "benchmarks/speed/step_op_counts.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    row = script.count("bilstm_crf", steps=2, batch_size=4)
    assert row["batch"] == 4
    # Forward, backward, clipping, a foreach SGD step and the metrics read: hundreds of calls, not none.
    assert 100 < row["training_step"] < 2000 and 50 < row["prediction_batch"] < 2000
    assert sum(calls for _, calls in row["top_training_operators"]) <= row["training_step"]
