"""
benchmarks/speed/gpu_training.py runs on the CPU on the fixtures, as tests/gpu/device_checks.sh runs
it on a GPU: its rows train and predict, and the `use_amp` rows are skipped with a message.
"""

import json
import subprocess
import sys

import pytest

from tests import PROJECT_ROOT


@pytest.mark.slow
def test_gpu_training_benchmark_runs_on_the_cpu(tmp_path):
    output = tmp_path / "results.json"
    command = [sys.executable, "benchmarks/speed/gpu_training.py", "--data", "fixtures", "--device", "cpu"]
    command += ["--epochs", "1", "--max-sentences", "30", "--rows", "bilstm_crf,bilstm_crf+cuda_graphs"]
    command += ["--predict-passes", "1", "--predict-batch-sizes", "4,16", "--json", str(output)]
    run = subprocess.run(command, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    rows = {row["row"]: row for row in json.loads(output.read_text())["rows"]}
    for model in ("bilstm_crf", "bilstm_crf+cuda_graphs"):
        assert rows[f"{model} float32"]["status"] == "ok", rows[f"{model} float32"]
        assert rows[f"{model} float32"]["train_sentences_per_second"] > 0
        assert rows[f"{model} use_amp"]["status"] == "skipped"
