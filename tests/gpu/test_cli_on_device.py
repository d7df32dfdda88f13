"""
The `allennlp` commands on DEVICE (`trainer.cuda_device`, `--cuda-device`), run as a user runs them
(subprocesses, network refused), for two tiny experiments: bilstm_crf and deptree_ner.

Each is trained for a few epochs with the same seeds on the CPU and on DEVICE. The two models are
not bit-identical, so the comparisons run one archive on both devices:

- training on DEVICE finishes, and its best validation F1 and its test F1 equal `allennlp
  evaluate` of its archive on DEVICE;
- the archive trained on the CPU gives on DEVICE the test F1 that its training measured on the CPU;
- `evaluate`, `predict`, `calibrate` and `tag-text` of the archive trained on DEVICE give with
  `--cuda-device` DEVICE what they give with `--cuda-device -1`: the same F1, the same tags, the same
  temperatures; so does `serve`'s model (`ServedModel` and the app, in this process);
- training bilstm_crf with `trainer.use_amp` (CUDA only: allennlp's AMP is `torch.cuda.amp`)
  finishes with finite losses; so does training bilstm_crf with the `cuda_graphs` callback, which
  logs the graphs it captured and replayed, while deptree_ner with it stops before training with
  one error saying to train without it.

All commands start at once in two rounds (the trainings, then the rest), so the module's time is
about that of its two slowest commands.
"""

import json
import math
import os
import pathlib
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

import pytest

from tests import FIXTURES_ROOT, allennlp
from tests.gpu.device_under_test import CUDA_DEVICE, DEVICE, skip_unless_the_device_is_available
from tests.test_end_to_end import offline

skip_unless_the_device_is_available()
# One worker runs the whole module: each worker that took one of its tests would run every command
# again (`--dist loadgroup`).
pytestmark = pytest.mark.xdist_group("cli_on_device")

# The config and its number of epochs: few enough that the model is still short of F1 1.0 on the
# fixtures, so that equal F1s say something.
EXPERIMENTS = {
    "bilstm_crf": ("fixtures/experiments/bilstm_crf_tiny.jsonnet", 3),
    "deptree_ner": ("fixtures/experiments/deptree_ner_tiny.jsonnet", 1),
}
DEV = "fixtures/conll2003/dev.txt"
TEST = "fixtures/conll2003/test.txt"
# Where each command runs: (name, `--cuda-device`).
DEVICES = [("device", CUDA_DEVICE), ("cpu", -1)]
# Comparisons with the CPU turn off TF32 in NVIDIA's libraries: cuDNN runs the character CNN and
# the LSTMs in TF32 by default (relative errors around 1e-3), which would blur temperatures at 1e-4.
FULL_FLOAT32 = {"NVIDIA_TF32_OVERRIDE": "0"}
PLUGIN = ["--include-package", "nerzoo"]

Key = Tuple[str, str, str]  # (experiment, command, where it ran)


def _overrides(**extra) -> str:
    return json.dumps(
        {
            "evaluate_on_test": True,
            "test_data_path": TEST,
            "random_seed": 13370,
            "numpy_seed": 1337,
            "pytorch_seed": 133,
            **extra,
        }
    )


def _sentences(path: pathlib.Path, count: int) -> List[List[str]]:
    """The tokens of the first `count` sentences of a CoNLL file."""
    sentences, tokens = [], []
    for line in path.read_text().splitlines() + [""]:
        if line.strip() and not line.startswith("-DOCSTART-"):
            tokens.append(line.split()[0])
        elif tokens:
            sentences.append(tokens)
            tokens = []
    return sentences[:count]


PREDICT_LINES = [{"tokens": tokens} for tokens in _sentences(FIXTURES_ROOT / "conll2003" / "test.txt", 5)]
TEXTS = ["Anna Keller met Lena Holm of Norvik Bank in Oslo on Monday .", "Peter Blackburn flew to Brussels ."]
PREDICT_LINES.append({"sentence": TEXTS[0]})


@dataclass
class Runs:
    """The commands' results by (experiment, command, where), and their directories."""

    root: pathlib.Path
    results: Dict[Key, subprocess.CompletedProcess]

    def directory(self, key: Key) -> pathlib.Path:
        return self.root.joinpath(*key)

    def succeeded(self, *key: str) -> pathlib.Path:
        """The command's directory, once checked that it ran, exited 0 and tried no network access."""
        assert key in self.results, f"{key} did not run: the training whose archive it needs failed"
        result = self.results[key]
        command = " ".join(map(str, result.args))
        assert result.returncode == 0, f"{command} failed ({result.returncode}):\n{result.stderr[-4000:]}"
        log = self.directory(key) / "network.log"
        assert not log.exists(), log.read_text()
        return self.directory(key)

    def output(self, *key: str) -> Dict[str, Any]:
        """What the command wrote to `out.json` (a training: its `run/metrics.json`)."""
        name = "run/metrics.json" if key[1] == "train" else "out.json"
        return json.loads((self.succeeded(*key) / name).read_text())


class Job(NamedTuple):
    args: List[Any]  # of `allennlp`
    env: Dict[str, str]  # added to the environment


def _run_all(runs: Runs, jobs: Dict[Key, Job]) -> None:
    """Runs every job at once, each in its own directory with the network refused; keeps the results."""
    workers = max(1, min(len(jobs), os.cpu_count() or 1))
    threads = {} if "OMP_NUM_THREADS" in os.environ else {"OMP_NUM_THREADS": str(max(1, os.cpu_count() // workers))}
    with ThreadPoolExecutor(workers) as pool:
        futures = {}
        for key, job in jobs.items():
            directory = runs.directory(key)
            directory.mkdir(parents=True, exist_ok=True)
            env = {**offline(directory), **threads, **job.env}
            futures[key] = pool.submit(allennlp, *job.args, check=False, env=env)
        runs.results.update((key, future.result()) for key, future in futures.items())


def _trainings(runs: Runs) -> Dict[Key, Job]:
    """Each experiment on the CPU and on DEVICE (and with CUDA graphs there), bilstm_crf under AMP on CUDA; each into `run/`."""
    settings = {where: {"trainer.cuda_device": cuda_device} for where, cuda_device in DEVICES}
    if DEVICE.type == "cuda":
        settings["amp"] = {"trainer.cuda_device": CUDA_DEVICE, "trainer.use_amp": True}
        settings["graphs"] = {"trainer.cuda_device": CUDA_DEVICE, "trainer.callbacks": [{"type": "cuda_graphs"}]}
    jobs = {}
    for experiment, (config, epochs) in EXPERIMENTS.items():
        for where, trainer in settings.items():
            if where == "amp" and experiment != "bilstm_crf":
                continue
            key = (experiment, "train", where)
            overrides = _overrides(**trainer, **{"trainer.num_epochs": epochs})
            jobs[key] = Job(["train", config, "-s", runs.directory(key) / "run", *PLUGIN, "-o", overrides], {})
    return jobs


def _archive(runs: Runs, experiment: str, where: str) -> Optional[pathlib.Path]:
    """The archive that the experiment's training on `where` wrote, or None where it failed."""
    key = (experiment, "train", where)
    archive = runs.directory(key) / "run" / "model.tar.gz"
    return archive if key in runs.results and runs.results[key].returncode == 0 and archive.exists() else None


def _commands(runs: Runs) -> Dict[Key, Job]:
    """The commands on the trained archives (those whose training succeeded); each writes `out.*`."""
    jobs = {}
    for experiment in EXPERIMENTS:
        archive = _archive(runs, experiment, "device")
        if archive is not None:
            for where, cuda_device in DEVICES:
                device = ["--cuda-device", cuda_device, *PLUGIN]
                out = runs.directory((experiment, "evaluate", where)) / "out.json"
                jobs[experiment, "evaluate", where] = Job(
                    ["evaluate", archive, TEST, "--output-file", out, *device], FULL_FLOAT32
                )
                directory = runs.directory((experiment, "predict", where))
                directory.mkdir(parents=True)
                inputs = directory / "in.jsonl"
                inputs.write_text("".join(json.dumps(line) + "\n" for line in PREDICT_LINES))
                jobs[experiment, "predict", where] = Job(
                    ["predict", archive, inputs, "--output-file", directory / "out.jsonl", "--silent"]
                    + ["--predictor", "sequence_tagger", "--batch-size", 2, *device],
                    FULL_FLOAT32,
                )
                out = runs.directory((experiment, "calibrate", where)) / "out.tar.gz"
                jobs[experiment, "calibrate", where] = Job(
                    ["calibrate", archive, DEV, "--output-file", out, "--temperatures", 2, *device], FULL_FLOAT32
                )
                jobs[experiment, "tag-text", where] = Job(
                    ["tag-text", archive, *TEXTS, "--json", *device], FULL_FLOAT32
                )
            # As training validated: with its settings.
            out = runs.directory((experiment, "evaluate-dev", "device")) / "out.json"
            jobs[experiment, "evaluate-dev", "device"] = Job(
                ["evaluate", archive, DEV, "--output-file", out, "--cuda-device", CUDA_DEVICE, *PLUGIN], {}
            )
        archive = _archive(runs, experiment, "cpu")
        if archive is not None:
            out = runs.directory((experiment, "evaluate-cpu-archive", "device")) / "out.json"
            jobs[experiment, "evaluate-cpu-archive", "device"] = Job(
                ["evaluate", archive, TEST, "--output-file", out, "--cuda-device", CUDA_DEVICE, *PLUGIN], FULL_FLOAT32
            )
    return jobs


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Runs:
    """Every command of the module, in two rounds: the trainings, then the commands on their archives."""
    runs = Runs(tmp_path_factory.mktemp("cli"), {})
    _run_all(runs, _trainings(runs))
    _run_all(runs, _commands(runs))
    return runs


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_training_on_the_device_reports_what_evaluate_gives(runs, experiment):
    metrics = runs.output(experiment, "train", "device")
    validation = runs.output(experiment, "evaluate-dev", "device")
    test = runs.output(experiment, "evaluate", "device")
    assert metrics["best_validation_f1-measure-overall"] > 0
    assert validation["f1-measure-overall"] == pytest.approx(metrics["best_validation_f1-measure-overall"], abs=1e-6)
    assert test["f1-measure-overall"] == pytest.approx(metrics["test_f1-measure-overall"], abs=1e-6)


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_an_archive_trained_on_the_cpu_scores_the_same_on_the_device(runs, experiment):
    metrics = runs.output(experiment, "train", "cpu")
    evaluated = runs.output(experiment, "evaluate-cpu-archive", "device")
    assert metrics["test_f1-measure-overall"] > 0
    assert evaluated["f1-measure-overall"] == pytest.approx(metrics["test_f1-measure-overall"], abs=1e-6)


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_evaluate_on_the_device_equals_the_cpu(runs, experiment):
    device, cpu = (runs.output(experiment, "evaluate", where) for where, _ in DEVICES)
    assert device.keys() == cpu.keys()
    assert 0 < cpu["f1-measure-overall"] < 1, cpu
    for key, value in cpu.items():
        if key.startswith(("precision", "recall", "f1-measure")) or key == "accuracy":
            assert device[key] == pytest.approx(value, abs=1e-6), key
    assert device["loss"] == pytest.approx(cpu["loss"], rel=1e-4)


def _same_predictions(device: List[Dict[str, Any]], cpu: List[Dict[str, Any]]) -> None:
    """The sequence_tagger predictor's JSON for the same inputs: the same tags and spans, confidences within 1e-4."""
    assert len(device) == len(cpu) > 0
    for got, wanted in zip(device, cpu):
        assert got["tokens"] == wanted["tokens"] and got["tags"] == wanted["tags"]
        assert got["tag_confidences"] == pytest.approx(wanted["tag_confidences"], abs=1e-4)
        assert [(span["label"], span["start"], span["end"]) for span in got["spans"]] == [
            (span["label"], span["start"], span["end"]) for span in wanted["spans"]
        ]
        assert [span["confidence"] for span in got["spans"]] == pytest.approx(
            [span["confidence"] for span in wanted["spans"]], abs=1e-4
        )


def _predictions(runs: Runs, experiment: str, where: str) -> List[Dict[str, Any]]:
    directory = runs.succeeded(experiment, "predict", where)
    return [json.loads(line) for line in (directory / "out.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_predict_on_the_device_equals_the_cpu(runs, experiment):
    device, cpu = (_predictions(runs, experiment, where) for where, _ in DEVICES)
    assert len(device) == len(cpu) == len(PREDICT_LINES)
    assert any(prediction["spans"] for prediction in cpu)
    _same_predictions(device, cpu)


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_tag_text_on_the_device_equals_the_cpu(runs, experiment):
    printed = []
    for where, _ in DEVICES:
        runs.succeeded(experiment, "tag-text", where)
        lines = runs.results[experiment, "tag-text", where].stdout.splitlines()
        printed.append([json.loads(line) for line in lines if line.startswith("{")])
    assert len(printed[-1]) == len(TEXTS)
    _same_predictions(*printed)


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_serving_on_the_device_equals_the_cpu(runs, experiment):
    from fastapi.testclient import TestClient

    from nerzoo.server.app import create_app
    from nerzoo.server.served_model import ServedModel

    runs.succeeded(experiment, "train", "device")
    archive = str(_archive(runs, experiment, "device"))
    answers = []
    for _, cuda_device in DEVICES:
        with TestClient(create_app([ServedModel(experiment, archive, cuda_device=cuda_device)])) as client:
            replies = [client.post(f"/api/models/{experiment}/predict", json={"sentence": text}) for text in TEXTS]
        assert [reply.status_code for reply in replies] == [200] * len(TEXTS), [reply.text for reply in replies]
        answers.append([reply.json() for reply in replies])
    _same_predictions(*answers)


def _calibration(runs: Runs, experiment: str, where: str) -> Dict[str, Any]:
    """The report that `allennlp calibrate` prints as its last line; its archive was written."""
    directory = runs.succeeded(experiment, "calibrate", where)
    assert (directory / "out.tar.gz").exists()
    return json.loads(runs.results[experiment, "calibrate", where].stdout.splitlines()[-1])


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_calibrate_on_the_device_equals_the_cpu(runs, experiment):
    device, cpu = (_calibration(runs, experiment, where) for where, _ in DEVICES)
    assert device["temperatures"].keys() == cpu["temperatures"].keys()
    assert len(cpu["temperatures"]) == 2, cpu["temperatures"]
    for key, temperature in cpu["temperatures"].items():
        assert device["temperatures"][key] == pytest.approx(temperature, abs=1e-4), key
    for stage in ("before", "after"):
        assert device[stage]["f1-measure-overall"] == pytest.approx(cpu[stage]["f1-measure-overall"], abs=1e-6)


@pytest.mark.skipif(DEVICE.type != "cuda", reason="allennlp's use_amp is torch.cuda.amp: CUDA only")
def test_training_under_amp_on_the_device(runs):
    metrics = runs.output("bilstm_crf", "train", "amp")
    assert (runs.directory(("bilstm_crf", "train", "amp")) / "run" / "model.tar.gz").exists()
    for key in ("training_loss", "validation_loss", "best_validation_loss", "test_loss"):
        assert math.isfinite(metrics[key]), (key, metrics[key])
    assert metrics["best_validation_f1-measure-overall"] > 0


@pytest.mark.skipif(DEVICE.type != "cuda", reason="cuda_graphs captures on CUDA only")
def test_cuda_graphs_refuse_deptree_ner_before_training(runs):
    result = runs.results[("deptree_ner", "train", "graphs")]
    assert result.returncode != 0
    assert "DeptreeNer has no graph_loss to capture; train it without `cuda_graphs`" in result.stdout + result.stderr
    assert not (runs.directory(("deptree_ner", "train", "graphs")) / "run" / "model.tar.gz").exists()


@pytest.mark.skipif(DEVICE.type != "cuda", reason="cuda_graphs captures on CUDA only")
@pytest.mark.parametrize("experiment", ["bilstm_crf"])
def test_training_with_cuda_graphs_on_the_device(runs, experiment):
    metrics = runs.output(experiment, "train", "graphs")
    directory = runs.directory((experiment, "train", "graphs"))
    assert (directory / "run" / "model.tar.gz").exists()
    for key in ("training_loss", "validation_loss", "best_validation_loss", "test_loss"):
        assert math.isfinite(metrics[key]), (key, metrics[key])
    assert metrics["best_validation_f1-measure-overall"] > 0
    result = runs.results[(experiment, "train", "graphs")]
    log = directory / "run" / "out.log"
    text = result.stdout + result.stderr + (log.read_text() if log.exists() else "")
    logged = re.search(r"cuda_graphs: (\d+) graphs, (\d+) replays", text)
    assert logged and int(logged[1]) >= 1 and int(logged[2]) >= 1, "no graph was captured and replayed"
