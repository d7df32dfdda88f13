"""
The engine shared by the benchmarks in this folder: one `allennlp train` in a subprocess under a
time budget (nerzoo's `time_budget` callback), `allennlp evaluate` of its archive, the logging and
timing of every subprocess, the overrides that point a config at real data and GloVe, and the cells
every results table shares.  The benchmark scripts import it as `harness` (Python puts the folder of
the script it runs first on `sys.path`; fairscale owns the top-level name `benchmarks`).
"""

import json
import os
import platform
import resource
import shlex
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional

from nerzoo.training.callbacks.time_budget import REPORT_FILE

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED_DATA = os.path.normpath(os.path.join(REPO_ROOT, "..", "shared", "data"))
PYTHON = sys.executable
ALLENNLP = os.path.join(os.path.dirname(sys.executable), "allennlp")


# --------------------------------------------------------------------------------------------------
# Small helpers


def parse_duration(value: Any) -> Optional[float]:
    """allennlp writes `training_duration` as `str(timedelta)`: `H:MM:SS.ffffff` or `N day(s), H:MM:SS`."""
    if value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    text = str(value)
    days = 0
    if "day" in text:
        day_part, text = text.split(",", 1)
        days = int(day_part.split()[0])
    hours, minutes, seconds = text.strip().split(":")
    return days * 86400 + int(hours) * 3600 + int(minutes) * 60 + float(seconds)


def format_seconds(seconds: Optional[float]) -> str:
    if seconds is None:
        return "n/a"
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m{secs:02d}s"
    return f"{minutes}m{secs:02d}s"


def ratio(value: Optional[float], reference: Optional[float]) -> str:
    if value is None or not reference:
        return "n/a"
    return f"{value / reference:.2f}x"


def fmt(value: Optional[float], digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def absolute(path: Optional[str]) -> Optional[str]:
    return None if path is None else os.path.abspath(path)


def display_path(path: str) -> str:
    """Path relative to the repository root when that is shorter, for the results file."""
    relative = os.path.relpath(path, REPO_ROOT)
    return relative if len(relative) < len(path) else path


def get_nested(params: Dict[str, Any], dotted: str) -> Any:
    node: Any = params
    for key in dotted.split("."):
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    return node


def run_logged(command: List[str], log_path: str, timeout: Optional[float], env=None) -> Dict[str, Any]:
    """
    Runs `command` with stdout and stderr to `log_path`; kills it after `timeout` seconds.  Returns
    the exit status, the wall time, the CPU time (user + system) of the process and the mean
    1-minute load average sampled every 10 s while it ran (other processes inflate wall times).
    """
    print(f"$ {shlex.join(command)}\n  (log: {log_path})", flush=True)
    start = time.time()
    usage_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    killed = False
    loads: List[float] = []
    with open(log_path, "w") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=REPO_ROOT, env=env)
        while True:
            remaining = None if timeout is None else timeout - (time.time() - start)
            if remaining is not None and remaining <= 0:
                killed = True
                process.terminate()
                try:
                    process.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
                break
            try:
                process.wait(timeout=10 if remaining is None else min(10, remaining))
                break
            except subprocess.TimeoutExpired:
                loads.append(os.getloadavg()[0])
        returncode = process.returncode
    wall = time.time() - start
    usage_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (usage_after.ru_utime - usage_before.ru_utime) + (usage_after.ru_stime - usage_before.ru_stime)
    if returncode != 0 and not killed:
        with open(log_path) as log:
            tail = log.read()[-3000:]
        print(f"  command failed with exit status {returncode}; end of its log:\n{tail}", flush=True)
    return {
        "returncode": returncode,
        "killed": killed,
        "wall_seconds": wall,
        "cpu_seconds": cpu,
        "mean_load": sum(loads) / len(loads) if loads else None,
    }


def count_sentences(path: str, reader: Optional[Dict[str, Any]] = None) -> int:
    """
    The instances nerzoo's dataset reader `reader` (params; default `conll_columns` with the tags
    taken as they are) reads from `path`: sentences, or the selection a `?held_out=` path makes.
    """
    from allennlp.common import Params
    from allennlp.data import DatasetReader

    import nerzoo  # noqa: F401  (registers the readers)

    params = Params(dict(reader or {"type": "conll_columns", "file_tag_scheme": None}))
    params.pop("token_indexers", None)
    return sum(1 for _ in DatasetReader.from_params(params).read(path))


def command_line(script: str, argv: List[str]) -> str:
    """The command that ran, with paths inside the repository relative to its root."""
    python = os.path.relpath(PYTHON, REPO_ROOT) if PYTHON.startswith(REPO_ROOT) else PYTHON
    return shlex.join([python, os.path.relpath(os.path.abspath(script), REPO_ROOT), *argv])


def machine_description() -> str:
    import torch

    return (
        f"{os.cpu_count()} CPU cores ({platform.processor() or platform.machine()}), no GPU used, "
        f"torch {torch.__version__} ({torch.get_num_threads()} threads), Python {platform.python_version()}, "
        f"{platform.system()} {platform.release()}"
    )


def loads_text(loads) -> str:
    return "/".join(f"{value:.2f}" for value in loads)


# --------------------------------------------------------------------------------------------------
# Configs


def pretrained_file_keys(params: Dict[str, Any], prefix: str) -> List[str]:
    """The dotted keys of every `pretrained_file` inside `params` (nested objects included)."""
    keys = []
    for name, value in params.items():
        if name == "pretrained_file":
            keys.append(f"{prefix}.{name}")
        elif isinstance(value, dict):
            keys += pretrained_file_keys(value, f"{prefix}.{name}")
    return keys


def embedding_overrides(config_params: Dict[str, Any], glove: str) -> Dict[str, Any]:
    """Dotted overrides pointing every pretrained file of the config (embedders, vocabulary) at `glove`."""
    overrides: Dict[str, Any] = {}
    # Embedders of a text field embedder, and those a model takes directly (fofe_ner's word_embedders),
    # with the embeddings nested in them (char_gated's word_embedding).
    for embedders_key in ("model.text_field_embedder.token_embedders", "model.word_embedders"):
        for dotted in pretrained_file_keys(get_nested(config_params, embedders_key) or {}, embedders_key):
            overrides[dotted] = glove
    for namespace in get_nested(config_params, "vocabulary.pretrained_files") or {}:
        overrides[f"vocabulary.pretrained_files.{namespace}"] = glove
    return overrides


def benchmark_overrides(config_params: Dict[str, Any], args) -> Dict[str, Any]:
    """
    Dotted overrides of a nerzoo config for a benchmark: `args.train` / `args.dev` data, no test
    evaluation, `args.epochs`, GloVe (`args.glove`) for every pretrained file, and the `time_budget`
    callback (`args.max_minutes`) after the config's own callbacks.
    """
    overrides: Dict[str, Any] = {
        "train_data_path": args.train,
        "validation_data_path": args.dev,
        "test_data_path": None,
        "evaluate_on_test": False,
        "trainer.num_epochs": args.epochs,
    }
    glove = embedding_overrides(config_params, args.glove)
    if not glove:
        print("  note: the config names no pretrained_file; --glove is not used for it", flush=True)
    overrides.update(glove)
    callbacks = list(get_nested(config_params, "trainer.callbacks") or [])
    callbacks.append({"type": "time_budget", "max_minutes": args.max_minutes})
    overrides["trainer.callbacks"] = callbacks
    return overrides


def reader_description(resolved: Dict[str, Any]) -> str:
    """`reader <type>` and what sets it apart (tag source, trees, whole documents)."""
    reader = resolved.get("dataset_reader") or {}
    text = f"reader {reader.get('type', '?')}"
    if reader.get("type") == "conllu_ner" and reader.get("tag_source", "ner") != "ner":
        text += f" ({reader['tag_source'].upper()} tags)"
    elif reader.get("type") == "conllu_ner":
        text += " (gold trees)"
    elif reader.get("spacy_model"):
        text += f" ({reader['spacy_model']} trees)"
    if reader.get("document_level"):
        text += " (whole documents)"
    return text


# --------------------------------------------------------------------------------------------------
# Training and evaluation


def train_and_evaluate(
    name: str,
    config_path: str,
    overrides: Optional[Dict[str, Any]],
    include_package: str,
    run_dir: str,
    max_minutes: float,
    evaluation_files: Dict[str, str],
    extra_env: Optional[Dict[str, str]] = None,
    metric: str = "f1-measure-overall",
) -> Dict[str, Any]:
    """
    `allennlp train` in a subprocess (the config carries the `time_budget` callback), a hard kill at 1.25 x
    budget + 5 min (the best weights so far are then archived), then `allennlp evaluate` on each of
    `evaluation_files` (split name -> file), whose `metric` x 100 (span F1 by default) lands in
    `<split>_f1`.  `extra_env`:
    environment variables added to those of this process for both subprocesses (e.g. a Jsonnet
    `std.extVar` of the config); this process's own environment is left as it is.
    """
    serialization_dir = os.path.join(run_dir, name)
    result: Dict[str, Any] = {"name": name, "serialization_dir": serialization_dir}
    command = [ALLENNLP, "train", config_path, "-s", serialization_dir]
    for package in dict.fromkeys([include_package, "nerzoo"]):  # nerzoo: the time_budget callback
        command += ["--include-package", package]
    if overrides:
        command += ["-o", json.dumps(overrides)]
    env = dict(os.environ, **(extra_env or {}))
    # The callback stops gracefully between epochs; this hard limit only catches an epoch that alone
    # overruns the budget (or a hang), with a margin for start-up and archiving.
    hard_limit = max_minutes * 60 * 1.25 + 300
    print(f"\n=== {name}: training (budget {max_minutes:g} min, hard kill after {hard_limit / 60:.0f} min)", flush=True)
    train_run = run_logged(command, os.path.join(run_dir, f"{name}.train.log"), hard_limit, env)
    result["train_wall_seconds"] = train_run["wall_seconds"]
    result["train_cpu_seconds"] = train_run["cpu_seconds"]
    result["train_mean_load"] = train_run["mean_load"]
    result["killed"] = train_run["killed"]
    result["stopped_by_budget"] = os.path.exists(os.path.join(serialization_dir, REPORT_FILE))
    archive = os.path.join(serialization_dir, "model.tar.gz")

    if train_run["killed"]:
        print(f"  {name}: training killed after {format_seconds(train_run['wall_seconds'])}", flush=True)
        if os.path.exists(os.path.join(serialization_dir, "best.th")):
            from allennlp.models.archival import archive_model

            archive_model(serialization_dir, weights="best.th")
            print(f"  archived the best weights so far: {archive}", flush=True)
    elif train_run["returncode"] != 0:
        result["error"] = f"allennlp train exited with {train_run['returncode']}"
        return result

    metrics = read_training_metrics(serialization_dir)
    result["training_duration"] = parse_duration(metrics.get("training_duration"))
    if "epoch" in metrics:
        result["epochs_run"] = int(metrics["epoch"]) + 1
    if metrics.get("best_epoch") is not None:
        result["best_epoch"] = int(metrics["best_epoch"]) + 1
    result["best_validation_f1"] = metrics.get(f"best_validation_{metric}")

    if not os.path.exists(archive):
        result["error"] = "no model archive"
        return result
    result["archive"] = archive

    for split, path in evaluation_files.items():
        output_file = os.path.join(run_dir, f"{name}.evaluate.{split}.json")
        command = [ALLENNLP, "evaluate", archive, path, "--output-file", output_file]
        command += ["--include-package", include_package]
        print(f"=== {name}: evaluating on {split}", flush=True)
        evaluate_env = dict(os.environ, **extra_env) if extra_env else None
        run = run_logged(command, os.path.join(run_dir, f"{name}.evaluate.{split}.log"), 3600, evaluate_env)
        result[f"{split}_evaluate_seconds"] = run["wall_seconds"]
        if run["returncode"] == 0 and os.path.exists(output_file):
            with open(output_file) as handle:
                result[f"{split}_f1"] = 100.0 * json.load(handle)[metric]
        else:
            result.setdefault("error", f"evaluate on {split} failed")
    return result


def read_training_metrics(serialization_dir: str) -> Dict[str, Any]:
    """`metrics.json`, or after a kill the last `metrics_epoch_N.json`."""
    path = os.path.join(serialization_dir, "metrics.json")
    if not os.path.exists(path):
        epochs = (
            sorted(
                (int(file[len("metrics_epoch_") : -len(".json")]), file)
                for file in os.listdir(serialization_dir)
                if file.startswith("metrics_epoch_") and file.endswith(".json")
            )
            if os.path.isdir(serialization_dir)
            else []
        )
        if not epochs:
            return {}
        path = os.path.join(serialization_dir, epochs[-1][1])
    with open(path) as handle:
        return json.load(handle)


# --------------------------------------------------------------------------------------------------
# Cells every table shares


def train_sentences_per_second(result: Dict[str, Any], train_sentences: int) -> Optional[float]:
    """Train sentences x epochs run / trainer duration (validation included)."""
    if result.get("epochs_run") and result.get("training_duration"):
        return train_sentences * result["epochs_run"] / result["training_duration"]
    return None


def epochs_and_wall_cells(result: Dict[str, Any]) -> List[str]:
    """The "epochs run (best)" and "train wall time (trainer)" cells of a training result."""
    epochs = str(result.get("epochs_run", "n/a"))
    if result.get("best_epoch") is not None:
        epochs += f" ({result['best_epoch']})"
    if result.get("epochs_cap") is not None:
        epochs += f", num_epochs capped at {result['epochs_cap']}"
    if result.get("stopped_by_budget"):
        epochs += ", stopped by time budget"
    if result.get("killed"):
        epochs += ", killed at hard limit"
    wall = f"{format_seconds(result.get('train_wall_seconds'))} ({format_seconds(result.get('training_duration'))})"
    return [epochs, wall]
