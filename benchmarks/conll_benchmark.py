#!/usr/bin/env python
"""
Trains and evaluates, in one run on CoNLL-2003 with a fixed budget each, a nerzoo config (the main
model, `--config`, bilstm_crf by default), the reference allennlp-models `crf_tagger` built with the
same embedder, encoder, dropout, token indexers, vocabulary and trainer, twice (with random batches,
as a `crf_tagger` config batches, and with the main config's bucketed batches, so that the gain of
nerzoo's code and the gain of bucketing can be told apart), and any `--extra` nerzoo configs; times
prediction of the test set for each, and appends one row per model to docs/RESULTS.md with its
ratios to the references and to the main model.

Run from anywhere (it works in the repository root):

    .venv/bin/python benchmarks/conll_benchmark.py --epochs 15
    .venv/bin/python benchmarks/conll_benchmark.py --epochs 15 \
        --extra deptree_ner=training_config/deptree_ner.jsonnet --max-epochs deptree_ner=3 \
        --extra fofe_ner=training_config/fofe_ner.jsonnet --max-epochs fofe_ner=3

See benchmarks/README.md for what is measured and how.

Helper mode, used by the script itself in a subprocess (one per archive):

    .venv/bin/python benchmarks/conll_benchmark.py --measure-predict ARCHIVE --kind nerzoo \
        --test FILE --predict-output OUT.json

This file is also imported by `allennlp train` (as the module `conll_benchmark`, with this folder on
PYTHONPATH) to register the `benchmark_time_budget` trainer callback.  It cannot be imported as
`benchmarks.conll_benchmark`: fairscale installs a top-level package named `benchmarks`.
"""

import argparse
import datetime
import importlib.util
import json
import logging
import os
import platform
import resource
import shlex
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

from allennlp.training.callbacks import TrainerCallback

logger = logging.getLogger("conll_benchmark")

BENCHMARK_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(BENCHMARK_DIR)
PYTHON = sys.executable
ALLENNLP = os.path.join(os.path.dirname(sys.executable), "allennlp")

DEFAULT_CONFIG = "training_config/bilstm_crf.jsonnet"
DEFAULT_TRAIN = "../shared/data/conll2003/eng.train"
DEFAULT_DEV = "../shared/data/conll2003/eng.testa"
DEFAULT_TEST = "../shared/data/conll2003/eng.testb"
DEFAULT_GLOVE = "../shared/data/embeddings_glove6b50d_filtered/glove.6B.50d.filtered.txt.gz"
DEFAULT_RESULTS = "docs/RESULTS.md"

PREDICT_BATCH_SIZE = 64
PREDICT_REPEATS = 3
REFERENCE = "reference"
BUCKETED_REFERENCE = "reference_bucketed"
REFERENCE_LABEL = "allennlp-models crf_tagger (reference)"
BUCKETED_REFERENCE_LABEL = "allennlp-models crf_tagger (reference, bucketed batches as nerzoo's config)"
SECTION_HEADING = "## CoNLL-2003 English NER: nerzoo models and the reference crf_tagger, random and bucketed batches"
TABLE_HEADER = [
    "date",
    "model",
    "config",
    "batches (train/dev size)",
    "data (train/dev/test sentences)",
    "epochs run (best)",
    "train wall time (trainer)",
    "train sent/s",
    "vs ref",
    "vs bucketed ref",
    "dev F1",
    "test F1",
    "predict sent/s",
    "predict vs ref",
    "predict vs main",
]
RESULTS_PREAMBLE = """# Results

Benchmarks of nerzoo models, appended by the scripts in `benchmarks/` (one row per trained model;
rows are never overwritten). All runs are on CPU unless the notes under a table say otherwise.
"""
SECTION_INTRO = """Written by `benchmarks/conll_benchmark.py` (see `benchmarks/README.md`). One run trains, one after
the other: the main nerzoo model (`--config`, `training_config/bilstm_crf.jsonnet` by default); the
allennlp-models reference `crf_tagger` with the same embedder, encoder, dropout, token indexers,
vocabulary and trainer, once with random batches of the main config's sizes (as a `crf_tagger`
config batches; "ref") and once with the main config's own batches, bucketed by length ("bucketed
ref"); then the `--extra` nerzoo configs. Columns:

- **date**: local start time of the run; the run's note (command line, machine, load) has the same time.
- **model**: the row's model; "main" is the first nerzoo row.
- **config**: the nerzoo config and its reader, or the generated reference config (in the run's output folder).
- **batches (train/dev size)**: how the training batches are formed (the `bucket` batch sampler and its
  sorting keys, or random batches) and the training / validation batch sizes.
- **data**: train/dev/test files and their sentence counts (`-DOCSTART-` lines skipped).
- **epochs run (best)**: epochs trained (patience or the time budget may stop training early) and, in
  brackets, the epoch (counted from 1) whose weights were kept; "num_epochs capped at N" when
  `--max-epochs` gave the model fewer epochs than `--epochs` (enough for a speed figure, not for F1).
- **train wall time (trainer)**: wall time of the whole `allennlp train` process and, in brackets, the
  trainer's own `training_duration`.
- **train sent/s**: train sentences x epochs run / `training_duration` seconds (the validation pass
  after every epoch included).
- **vs ref**: train sent/s divided by the reference's with random batches: code and batching gains together.
- **vs bucketed ref**: train sent/s divided by the reference's with the main config's bucketed batches:
  the code's gain alone (the bucketed reference's own "vs ref" is the batching's gain alone).
- **dev F1 / test F1**: span F1 x 100 (`f1-measure-overall` from `allennlp evaluate` on the archive).
- **predict sent/s**: in-process batched prediction (batch size 64, file order) of all test sentences,
  timed after loading the archive and reading the file (fastest of three passes): nerzoo models
  through their `sequence_tagger` predictor (`predict_batch_instance`, with posteriors and confidences),
  the reference through `Model.forward_on_instances` (which applies `make_output_human_readable`).
- **predict vs ref / predict vs main**: predict sent/s divided by the reference's (random batches) or
  by the main nerzoo model's.
"""


# --------------------------------------------------------------------------------------------------
# Trainer callback: the time budget


@TrainerCallback.register("benchmark_time_budget")
class TimeBudgetCallback(TrainerCallback):
    """
    Stops training after the current epoch when the next epoch (estimated as the mean epoch time so
    far, validation included) would end past `max_minutes` after training started.  The stop goes
    through the trainer's early-stopping check, so the best weights are restored and archived as
    usual.  Writes `time_budget.json` in the serialization directory when it stops training.
    """

    def __init__(self, serialization_dir: str, max_minutes: float) -> None:
        super().__init__(serialization_dir)
        self.max_seconds = max_minutes * 60.0
        self.start_time: Optional[float] = None
        self.epochs_seen = 0

    def on_start(self, trainer, is_primary: bool = True, **kwargs) -> None:
        super().on_start(trainer, is_primary=is_primary, **kwargs)
        self.start_time = time.time()

    def on_epoch(self, trainer, metrics: Dict[str, Any], epoch: int, is_primary: bool = True, **kwargs) -> None:
        if self.start_time is None or epoch < 0:
            return
        self.epochs_seen += 1
        elapsed = time.time() - self.start_time
        mean_epoch = elapsed / self.epochs_seen
        if elapsed + mean_epoch <= self.max_seconds:
            return
        # GradientDescentTrainer has no public stop hook; its loop asks the metric tracker after
        # saving the epoch's weights, so answering "stop" there ends training cleanly.
        trainer._metric_tracker.should_stop_early = lambda: True
        note = {
            "stopped_after_epoch": epoch,
            "elapsed_seconds": round(elapsed, 1),
            "mean_epoch_seconds": round(mean_epoch, 1),
            "max_minutes": self.max_seconds / 60.0,
        }
        logger.warning("Time budget: stopping after epoch %d (%s)", epoch, note)
        if is_primary and self.serialization_dir:
            with open(os.path.join(self.serialization_dir, "time_budget.json"), "w") as handle:
                json.dump(note, handle, indent=2)


# --------------------------------------------------------------------------------------------------
# Small helpers


def count_sentences(path: str) -> int:
    """Sentences of a CoNLL column file: maximal runs of non-blank lines, `-DOCSTART-` lines skipped."""
    count, inside = 0, False
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            stripped = line.strip()
            if not stripped or stripped.split()[0] == "-DOCSTART-":
                inside = False
                continue
            if not inside:
                count += 1
                inside = True
    return count


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


def nerzoo_overrides(config_params: Dict[str, Any], args) -> Dict[str, Any]:
    """Dotted overrides for the nerzoo config: real data, GloVe, epochs, no test, the time budget."""
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
    callbacks.append({"type": "benchmark_time_budget", "max_minutes": args.max_minutes})
    overrides["trainer.callbacks"] = callbacks
    return overrides


def random_batches(loader: Dict[str, Any], shuffle: bool) -> Dict[str, Any]:
    """
    A data loader's params with its batch sampler, if any, replaced by plain batches of the sampler's
    size (`shuffle`: random batches, else file order); a loader without a batch sampler is returned as it is.
    """
    loader = dict(loader)
    sampler = loader.pop("batch_sampler", None)
    if sampler is None:
        return loader
    return dict(loader, batch_size=sampler["batch_size"], shuffle=shuffle)


def validation_loader(resolved: Dict[str, Any]) -> Dict[str, Any]:
    """The validation data loader's params of a config (AllenNLP falls back on the training loader's)."""
    return resolved.get("validation_data_loader") or resolved["data_loader"]


def batches_cell(resolved: Dict[str, Any]) -> str:
    """The "batches" cell: the training batches' kind and the training / validation batch sizes."""

    def size(loader: Dict[str, Any]) -> Any:
        return (loader.get("batch_sampler") or loader).get("batch_size", "?")

    train = resolved["data_loader"]
    sampler = train.get("batch_sampler")
    if sampler is None:
        kind = "random" if train.get("shuffle", True) else "file order"
    elif sampler.get("type") == "bucket":
        keys = ", ".join(sampler.get("sorting_keys") or ["guessed"])
        kind = f"bucketed by {keys}"
    else:
        kind = f"{sampler.get('type')} sampler"
    return f"{kind}, {size(train)}/{size(validation_loader(resolved))}"


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


def allennlp_embedder(embedder: Dict[str, Any]) -> Dict[str, Any]:
    """The embedder config with nerzoo's `packed_character_encoding` spelled as allennlp's
    `character_encoding`: the same module on every real token, so the reference can build it."""
    embedders = {
        name: dict(params, type="character_encoding") if params.get("type") == "packed_character_encoding" else params
        for name, params in embedder.get("token_embedders", {}).items()
    }
    return dict(embedder, token_embedders=embedders) if embedders else embedder


def allennlp_indexers(indexers: Optional[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """The token indexers with nerzoo's `batched_characters` spelled as allennlp's `characters`
    (the same ids and tensors), so the reference pads as allennlp does."""
    if indexers is None:
        return None
    return {
        name: dict(params, type="characters") if params.get("type") == "batched_characters" else params
        for name, params in indexers.items()
    }


def allennlp_encoder(encoder: Dict[str, Any]) -> Dict[str, Any]:
    """The encoder config with nerzoo's `unpacked_lstm` spelled as allennlp's `lstm` (the same
    parameters and outputs at real tokens, run on packed sequences), so the reference runs allennlp's."""
    return dict(encoder, type="lstm") if encoder.get("type") == "unpacked_lstm" else encoder


def reference_config(
    resolved: Dict[str, Any], args, bucketed: bool = False, num_epochs: Optional[int] = None
) -> Dict[str, Any]:
    """
    The allennlp-models `crf_tagger` + `conll2003` reader, with the embedder, encoder, dropout, token
    indexers, vocabulary and trainer of the (overridden) nerzoo config `resolved`.  With `bucketed`
    it also takes the config's data loaders as they are; without, random training batches and
    validation batches in file order, of the config's batch sizes.  `num_epochs`: the trainer's,
    when not the config's.
    """
    model = resolved["model"]
    head = model.get("head") or {}
    reader = resolved["dataset_reader"]
    tag_scheme = head.get("tag_scheme", "BIOUL")
    if tag_scheme != "BIOUL":
        print(f"  note: nerzoo head uses {tag_scheme}; the reference uses BIOUL (its reader only converts to BIOUL)")
    data_loader, validation_data_loader = resolved["data_loader"], validation_loader(resolved)
    if not bucketed:
        data_loader = random_batches(data_loader, shuffle=True)
        validation_data_loader = random_batches(validation_data_loader, shuffle=False)
    trainer = dict(resolved["trainer"])
    if num_epochs is not None:
        trainer["num_epochs"] = num_epochs
    return {
        "dataset_reader": {
            "type": "conll2003",
            "tag_label": "ner",
            "coding_scheme": "BIOUL",
            "token_indexers": allennlp_indexers(reader.get("token_indexers"))
            or {
                "tokens": {"type": "single_id", "lowercase_tokens": True},
                "token_characters": {"type": "characters", "min_padding_length": 3},
            },
        },
        "train_data_path": args.train,
        "validation_data_path": args.dev,
        "evaluate_on_test": False,
        "vocabulary": resolved["vocabulary"],
        "model": {
            "type": "crf_tagger",
            "label_encoding": "BIOUL",
            "constrain_crf_decoding": True,
            "calculate_span_f1": True,
            "include_start_end_transitions": head.get("include_start_end_transitions", True),
            "dropout": model.get("dropout", 0.5),
            "text_field_embedder": allennlp_embedder(model["text_field_embedder"]),
            "encoder": allennlp_encoder(model["encoder"]),
        },
        "data_loader": data_loader,
        "validation_data_loader": validation_data_loader,
        "trainer": trainer,
    }


# --------------------------------------------------------------------------------------------------
# Training, evaluation, prediction timing


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
    `allennlp train` in a subprocess with the time budget callback loadable, a hard kill at 1.25 x
    budget + 5 min (the best weights so far are then archived), then `allennlp evaluate` on each of
    `evaluation_files` (split name -> file), whose `metric` x 100 (span F1 by default) lands in
    `<split>_f1`.  `extra_env`:
    environment variables added to those of this process for both subprocesses (e.g. a Jsonnet
    `std.extVar` of the config); this process's own environment is left as it is.
    """
    serialization_dir = os.path.join(run_dir, name)
    result: Dict[str, Any] = {"name": name, "serialization_dir": serialization_dir}
    command = [ALLENNLP, "train", config_path, "-s", serialization_dir, "--include-package", include_package]
    command += ["--include-package", "conll_benchmark"]
    if overrides:
        command += ["-o", json.dumps(overrides)]
    env = dict(os.environ)
    env.update(extra_env or {})
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [BENCHMARK_DIR, env.get("PYTHONPATH")]))
    # The callback stops gracefully between epochs; this hard limit only catches an epoch that alone
    # overruns the budget (or a hang), with a margin for start-up and archiving.
    hard_limit = max_minutes * 60 * 1.25 + 300
    print(f"\n=== {name}: training (budget {max_minutes:g} min, hard kill after {hard_limit / 60:.0f} min)", flush=True)
    train_run = run_logged(command, os.path.join(run_dir, f"{name}.train.log"), hard_limit, env)
    result["train_wall_seconds"] = train_run["wall_seconds"]
    result["train_cpu_seconds"] = train_run["cpu_seconds"]
    result["train_mean_load"] = train_run["mean_load"]
    result["killed"] = train_run["killed"]
    result["stopped_by_budget"] = os.path.exists(os.path.join(serialization_dir, "time_budget.json"))
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


def train_and_measure(
    name: str,
    kind: str,
    config_path: str,
    overrides: Optional[Dict[str, Any]],
    include_package: str,
    run_dir: str,
    args,
) -> Dict[str, Any]:
    """`train_and_evaluate` on dev and test, then the in-process prediction timing."""
    result = train_and_evaluate(
        name, config_path, overrides, include_package, run_dir, args.max_minutes, {"dev": args.dev, "test": args.test}
    )
    result["kind"] = kind
    if "archive" not in result:
        return result
    archive = result["archive"]

    output_file = os.path.join(run_dir, f"{name}.predict_timing.json")
    command = [PYTHON, os.path.abspath(__file__), "--measure-predict", archive, "--kind", kind]
    command += ["--test", args.test, "--predict-output", output_file]
    print(f"=== {name}: timing prediction on test", flush=True)
    run = run_logged(command, os.path.join(run_dir, f"{name}.predict_timing.log"), 3600)
    if run["returncode"] == 0 and os.path.exists(output_file):
        with open(output_file) as handle:
            timing = json.load(handle)
        result["predict_sentences_per_second"] = timing["sentences_per_second"]
        result["predict_seconds"] = timing["seconds"]
    else:
        result.setdefault("error", "prediction timing failed")
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


def measure_predict(archive_path: str, kind: str, test_path: str, output_path: str) -> None:
    """Helper mode: time batched prediction of every test sentence with the archived model."""
    import torch
    from allennlp.common.util import import_module_and_submodules
    from allennlp.data.tokenizers import Token
    from allennlp.models.archival import load_archive

    import_module_and_submodules("nerzoo" if kind == "nerzoo" else "allennlp_models.tagging")
    archive = load_archive(archive_path, cuda_device=-1)
    reader = archive.dataset_reader
    model = archive.model
    model.eval()

    # Read the file with the archive's own reader, then rebuild each sentence without its gold tags,
    # as a caller with raw tokens would (so no loss or metrics are computed while timing).
    read = list(reader.read(test_path))
    sentences = [[token.text for token in instance["tokens"].tokens] for instance in read]
    if kind == "nerzoo":
        from allennlp.predictors import Predictor

        predictor = Predictor.from_archive(archive, "sequence_tagger")
        if "head_indices" in read[0].fields:
            # Dependency readers: the tree read with the file (parsed once, cached), not parsed again.
            instances = [
                reader.text_to_instance(
                    words,
                    instance["pos_tags"].labels,
                    instance["dependency_labels"].labels,
                    instance["head_indices"].labels,
                )
                for words, instance in zip(sentences, read)
            ]
        else:
            instances = [reader.text_to_instance(words) for words in sentences]

        def predict(batch):
            return predictor.predict_batch_instance(batch)

    else:
        instances = [reader.text_to_instance([Token(word) for word in words]) for words in sentences]

        def predict(batch):
            # forward_on_instances runs forward and then make_output_human_readable (tag strings).
            return model.forward_on_instances(batch)

    for instance in instances:
        reader.apply_token_indexers(instance)
    batches = [instances[start : start + PREDICT_BATCH_SIZE] for start in range(0, len(instances), PREDICT_BATCH_SIZE)]
    predict(batches[0])  # warm-up, not timed
    # The whole test set is predicted PREDICT_REPEATS times; the fastest pass counts (the least
    # disturbed by other processes).
    passes = []
    for _ in range(PREDICT_REPEATS):
        start = time.perf_counter()
        num_predicted = 0
        for batch in batches:
            num_predicted += len(predict(batch))
        passes.append(time.perf_counter() - start)
    seconds = min(passes)
    result = {
        "archive": archive_path,
        "kind": kind,
        "sentences": num_predicted,
        "tokens": sum(len(words) for words in sentences),
        "batch_size": PREDICT_BATCH_SIZE,
        "seconds": seconds,
        "seconds_per_pass": passes,
        "sentences_per_second": num_predicted / seconds,
        "torch_threads": torch.get_num_threads(),
    }
    with open(output_path, "w") as handle:
        json.dump(result, handle, indent=2)
    print(json.dumps(result, indent=2))


# --------------------------------------------------------------------------------------------------
# Results file


def table_row(cells: List[str]) -> str:
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def update_results(results_path: str, rows: List[List[str]], note: str) -> None:
    """Appends `rows` to this script's section of the results file and `note` at its end."""
    append_to_section(results_path, SECTION_HEADING, SECTION_INTRO, TABLE_HEADER, rows, note, RESULTS_PREAMBLE)


def append_to_section(
    results_path: str,
    heading: str,
    intro: str,
    table_header: List[str],
    rows: List[List[str]],
    note: str,
    preamble: str = "# Results",
) -> None:
    """
    Appends `rows` to the table of section `heading` of the results file and `note` at the end of
    the section; creates the section (heading, `intro`, table header, "Runs:") at the end of the
    file, and the file (starting with `preamble`), when missing.  Other sections are left as they are.
    """
    header = [table_row(table_header), "|" + "---|" * len(table_header)]
    if os.path.exists(results_path):
        with open(results_path, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    else:
        lines = preamble.rstrip("\n").splitlines()
    if heading not in lines:
        while lines and not lines[-1].strip():
            lines.pop()
        intro_lines = [*intro.rstrip("\n").splitlines(), ""] if intro.strip() else []
        lines += ["", heading, "", *intro_lines, *header, "", "Runs:", ""]
    section_start = lines.index(heading)
    section_end = next(
        (index for index in range(section_start + 1, len(lines)) if lines[index].startswith("## ")),
        len(lines),
    )
    table_end = None
    for index in range(section_start + 1, section_end):
        if lines[index].startswith("|"):
            table_end = index + 1
        elif table_end is not None:
            break
    if table_end is None:  # heading without a table: put one right under it
        lines[section_start + 1 : section_start + 1] = ["", *header]
        table_end = section_start + 1 + len(header) + 1
        section_end += len(header) + 1
    new_rows = [table_row(row) for row in rows]
    lines[table_end:table_end] = new_rows
    section_end += len(new_rows)
    # The run note goes at the end of the section, before any trailing blank lines.
    insert_at = section_end
    while insert_at > table_end and not lines[insert_at - 1].strip():
        insert_at -= 1
    lines[insert_at:insert_at] = ["", *note.splitlines()]
    text = "\n".join(lines).rstrip("\n") + "\n"
    os.makedirs(os.path.dirname(os.path.abspath(results_path)), exist_ok=True)
    with open(results_path, "w", encoding="utf-8") as handle:
        handle.write(text)


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


def result_row(
    result: Dict[str, Any], by_name: Dict[str, Dict[str, Any]], main_name: str, common: Dict[str, Any]
) -> List[str]:
    """
    One table row; `by_name`: every result of the run by name (the references' and the main model's
    rates are the denominators of the ratios), `main_name`: the main nerzoo model's name.
    """

    def versus(key: str, other: str, itself: str) -> str:
        if result["name"] == other:
            return f"1.00x ({itself})" if result.get(key) else "n/a"
        if other not in by_name:
            return "n/a"
        return ratio(result.get(key), by_name[other].get(key))

    train, predict = "train_sentences_per_second", "predict_sentences_per_second"
    model = result["label"]
    if result.get("error"):
        model += f" (ERROR: {result['error']})"
    return [
        common["date"],
        model,
        result["config_display"],
        result.get("batches", "n/a"),
        common["data"],
        *epochs_and_wall_cells(result),
        fmt(result.get(train), 1),
        versus(train, REFERENCE, "ref"),
        versus(train, BUCKETED_REFERENCE, "bucketed ref"),
        fmt(result.get("dev_f1")),
        fmt(result.get("test_f1")),
        fmt(result.get(predict), 1),
        versus(predict, REFERENCE, "ref"),
        versus(predict, main_name, "main"),
    ]


# --------------------------------------------------------------------------------------------------
# Main


def named_values(values: List[str], option: str) -> Dict[str, str]:
    """`["NAME=VALUE", ...]` of a repeated option as a dict (in order); a missing `=` or a repeated NAME is an error."""
    named: Dict[str, str] = {}
    for value in values:
        name, separator, rest = value.partition("=")
        if not separator or not name or not rest:
            raise ValueError(f"{option} expects NAME=VALUE, got {value!r}")
        if name in named:
            raise ValueError(f"{option} names {name} twice")
        named[name] = rest
    return named


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Train and evaluate nerzoo configs and the allennlp-models crf_tagger reference (random and "
        "bucketed batches) on CoNLL-2003 in one run; append the rows to docs/RESULTS.md."
    )
    parser.add_argument("--config", default=DEFAULT_CONFIG, help="the main nerzoo training config (jsonnet)")
    parser.add_argument("--train", default=None, help=f"train file (default {DEFAULT_TRAIN})")
    parser.add_argument("--dev", default=None, help=f"validation file (default {DEFAULT_DEV})")
    parser.add_argument("--test", default=None, help=f"test file (default {DEFAULT_TEST})")
    parser.add_argument("--glove", default=None, help=f"pretrained embeddings (default {DEFAULT_GLOVE})")
    parser.add_argument(
        "--epochs", type=int, default=15, help="trainer.num_epochs of every model (patience stays as in the configs)"
    )
    parser.add_argument(
        "--max-epochs",
        action="append",
        default=[],
        metavar="NAME=N",
        help="cap one model's trainer.num_epochs at N (repeatable); names: the main config's file stem "
        f"(bilstm_crf by default), {REFERENCE}, {BUCKETED_REFERENCE} and the --extra names",
    )
    parser.add_argument(
        "--extra",
        action="append",
        default=[],
        metavar="NAME=CONFIG",
        help="another nerzoo config trained and measured in the same run, after the references (repeatable)",
    )
    parser.add_argument(
        "--max-minutes",
        type=float,
        default=60.0,
        help="training budget per model: training stops after the epoch whose successor would overrun it; "
        "the process is killed at 1.25 x budget + 5 min",
    )
    parser.add_argument("--no-reference", action="store_true", help="skip both allennlp-models crf_tagger trainings")
    parser.add_argument(
        "--no-bucketed-reference",
        action="store_true",
        help="skip the crf_tagger with the main config's bucketed batches",
    )
    parser.add_argument("--output-dir", default=None, help="default runs/benchmarks/<timestamp>")
    parser.add_argument("--results", default=DEFAULT_RESULTS, help="markdown file the rows are appended to")
    parser.add_argument(
        "--label", default=None, help="row name of the main nerzoo model (default: nerzoo <config stem>)"
    )
    parser.add_argument("--measure-predict", metavar="ARCHIVE", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--kind", choices=["nerzoo", "reference"], default="nerzoo", help=argparse.SUPPRESS)
    parser.add_argument("--predict-output", default=None, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def config_stem(path: str) -> str:
    return os.path.splitext(os.path.basename(path))[0]


def main(argv: Optional[List[str]] = None) -> int:
    logging.basicConfig(level=logging.WARNING)
    raw_argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(raw_argv)
    if args.measure_predict:
        measure_predict(
            absolute(args.measure_predict), args.kind, absolute(args.test or DEFAULT_TEST), args.predict_output
        )
        return 0

    # User paths are relative to the current directory, defaults to the repository root.
    def resolve(value: Optional[str], default: str) -> str:
        return absolute(value) if value is not None else os.path.normpath(os.path.join(REPO_ROOT, default))

    args.config = absolute(args.config) if args.config != DEFAULT_CONFIG else os.path.join(REPO_ROOT, DEFAULT_CONFIG)
    args.train = resolve(args.train, DEFAULT_TRAIN)
    args.dev = resolve(args.dev, DEFAULT_DEV)
    args.test = resolve(args.test, DEFAULT_TEST)
    args.glove = resolve(args.glove, DEFAULT_GLOVE)
    args.results = (
        absolute(args.results) if args.results != DEFAULT_RESULTS else os.path.join(REPO_ROOT, DEFAULT_RESULTS)
    )
    main_name = config_stem(args.config)
    try:
        extras = {name: absolute(path) for name, path in named_values(args.extra, "--extra").items()}
        caps = {name: int(value) for name, value in named_values(args.max_epochs, "--max-epochs").items()}
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    names = [main_name, REFERENCE, BUCKETED_REFERENCE]
    clashes = [name for name in extras if name in names]
    unknown = [name for name in caps if name not in names and name not in extras]
    if clashes or unknown or any(cap < 1 for cap in caps.values()):
        print(
            f"error: --extra names already taken {clashes}, --max-epochs unknown names {unknown} (or a cap "
            f"below 1); the names are {names + list(extras)}",
            file=sys.stderr,
        )
        return 2
    for path in (args.config, args.train, args.dev, args.test, args.glove, *extras.values()):
        if not os.path.exists(path):
            print(f"error: {path} does not exist", file=sys.stderr)
            return 2
    started = datetime.datetime.now()
    load_before = os.getloadavg()
    if load_before[0] > 1.0:
        print(
            f"warning: 1-minute load average is {load_before[0]:.2f}; other processes will slow the timings", flush=True
        )
    run_dir = absolute(args.output_dir) or os.path.join(
        REPO_ROOT, "runs", "benchmarks", started.strftime("%Y%m%d-%H%M%S")
    )
    os.makedirs(run_dir, exist_ok=True)
    os.chdir(REPO_ROOT)  # .allennlp_plugins and the nerzoo package are found from here

    import torch
    from allennlp.common.params import Params

    counts = {
        split: count_sentences(path) for split, path in (("train", args.train), ("dev", args.dev), ("test", args.test))
    }
    print(f"sentences: {counts}", flush=True)

    def epochs_of(name: str) -> Tuple[int, Optional[int]]:
        """The model's num_epochs and, when --max-epochs lowered it, the cap."""
        cap = caps.get(name)
        return (cap, cap) if cap is not None and cap < args.epochs else (args.epochs, None)

    def nerzoo_model(name: str, config: str, label: str) -> Dict[str, Any]:
        """A nerzoo model of the run: its overrides (written to the run folder) and resolved config."""
        num_epochs, cap = epochs_of(name)
        config_params = Params.from_file(config).as_dict(quiet=True)
        overrides = nerzoo_overrides(config_params, argparse.Namespace(**dict(vars(args), epochs=num_epochs)))
        with open(os.path.join(run_dir, f"{name}.overrides.json"), "w") as handle:
            json.dump(overrides, handle, indent=2)
        resolved = Params.from_file(config, json.dumps(overrides)).as_dict(quiet=True)
        return {
            "name": name,
            "kind": "nerzoo",
            "label": label,
            "config": config,
            "overrides": overrides,
            "cap": cap,
            "package": "nerzoo",
            "resolved": resolved,
            "config_display": f"{display_path(config)}; {reader_description(resolved)}",
        }

    main_model = nerzoo_model(main_name, args.config, args.label or f"nerzoo {main_name}")
    models = [main_model]
    references = [] if args.no_reference else [(REFERENCE, REFERENCE_LABEL, False)]
    if references and importlib.util.find_spec("allennlp_models") is None:
        print(
            "error: the reference crf_tagger needs allennlp-models: run `make install-bench` (or pass --no-reference)",
            file=sys.stderr,
        )
        return 2
    bucketing = "batch_sampler" in main_model["resolved"]["data_loader"]
    if not args.no_reference and not args.no_bucketed_reference:
        if bucketing:
            references.append((BUCKETED_REFERENCE, BUCKETED_REFERENCE_LABEL, True))
        else:
            print(f"  note: {display_path(args.config)} has no batch sampler; no bucketed reference", flush=True)
    for name, label, bucketed in references:
        num_epochs, cap = epochs_of(name)
        config = reference_config(main_model["resolved"], args, bucketed=bucketed, num_epochs=num_epochs)
        path = os.path.join(run_dir, f"{name}_crf_tagger.json")
        with open(path, "w") as handle:
            json.dump(config, handle, indent=2)
        models.append(
            {
                "name": name,
                "kind": "reference",
                "label": label,
                "config": path,
                "overrides": None,
                "cap": cap,
                "package": "allennlp_models.tagging",
                "resolved": config,
                "config_display": f"generated: {display_path(path)}",
            }
        )
    for name, config in extras.items():
        models.append(nerzoo_model(name, config, f"nerzoo {name}"))

    results: List[Dict[str, Any]] = []
    for model in models:
        result = train_and_measure(
            model["name"], model["kind"], model["config"], model["overrides"], model["package"], run_dir, args
        )
        result.update(
            label=model["label"],
            config_display=model["config_display"],
            batches=batches_cell(model["resolved"]),
            epochs_cap=model["cap"],
        )
        result["train_sentences_per_second"] = train_sentences_per_second(result, counts["train"])
        results.append(result)

    common = {
        "date": started.strftime("%Y-%m-%d %H:%M"),
        "data": f"{os.path.basename(args.train)}/{os.path.basename(args.dev)}/{os.path.basename(args.test)} "
        f"({counts['train']}/{counts['dev']}/{counts['test']})",
    }
    by_name = {result["name"]: result for result in results}
    rows = [result_row(result, by_name, main_name, common) for result in results]

    command_line = shlex.join(
        [
            os.path.relpath(PYTHON, REPO_ROOT) if PYTHON.startswith(REPO_ROOT) else PYTHON,
            os.path.relpath(os.path.abspath(__file__), REPO_ROOT),
            *raw_argv,
        ]
    )
    machine = (
        f"{os.cpu_count()} CPU cores ({platform.processor() or platform.machine()}), no GPU used, "
        f"torch {torch.__version__} ({torch.get_num_threads()} threads), Python {platform.python_version()}, "
        f"{platform.system()} {platform.release()}"
    )
    capped = ", ".join(f"{model['name']} {model['cap']}" for model in models if model["cap"] is not None)
    note = (
        f"- {common['date']}: `{command_line}` (run from the repository root; output in "
        f"`{display_path(run_dir)}`). Machine: {machine}. Budget {args.max_minutes:g} min per model, "
        f"`trainer.num_epochs` {args.epochs}{f' (capped: {capped})' if capped else ''}. Load average "
        f"(1/5/15 min) at start "
        f"{'/'.join(f'{value:.2f}' for value in load_before)}, at end "
        f"{'/'.join(f'{value:.2f}' for value in os.getloadavg())}."
    )
    for result in results:
        note += (
            f" {result['label']}: training process CPU time {format_seconds(result.get('train_cpu_seconds'))}, "
            f"mean 1-min load during training {fmt(result.get('train_mean_load'))}."
        )
    update_results(args.results, rows, note)

    print("\n=== Summary")
    for result, row in zip(results, rows):
        print(f"{result['label']}:")
        for name, cell in zip(TABLE_HEADER, row):
            print(f"  {name:32s} {cell}")
        print(f"  {'train CPU time':32s} {format_seconds(result.get('train_cpu_seconds'))}")
        print(f"  {'mean load during training':32s} {fmt(result.get('train_mean_load'))}")
        print(f"  {'model archive':32s} {result.get('archive', 'n/a')}")
    print(f"\nrows appended to {args.results}\nrun folder: {run_dir}")
    return 1 if any(result.get("error") for result in results) else 0


if __name__ == "__main__":
    sys.exit(main())
