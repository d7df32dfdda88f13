#!/usr/bin/env python
"""
The engine of the paper benchmarks: a set of models trained one after the other on each of a set of
datasets, with the same CPU time budget each, evaluated on dev and test with `allennlp evaluate`, and
one row per model appended to the suite's own section of docs/RESULTS.md (span F1, wall time, train
sentences/s and its ratio to the baseline trained in the same run; with `Suite.predict_speed`, also
prediction sentences/s on the test file and its ratio to the baseline).

What is specific to a paper (its models, datasets, section heading and intro, defaults) is a `Suite`,
defined in the script that is run:

    .venv/bin/python benchmarks/deptree_benchmark.py    (dependency-aware NER, Aguilar & Solorio 2019)
    .venv/bin/python benchmarks/me_crf_benchmark.py     (ME-CRF, Liu, Baldwin & Cohn 2017)
    .venv/bin/python benchmarks/fofe_ner_benchmark.py   (FOFE-NER, Xu 2017)

This file itself is not meant to be run.  The training subprocess under nerzoo's `time_budget`
callback, the logging of every subprocess and the small helpers are `harness.py`; the rows go to
`docs/results/<suite>_suite.jsonl`, from which `results.py` renders the suite's table.  Prediction
speed, for suites that ask for it, is timed by `predict_speed.py` in this folder, in a subprocess per
archive.
"""

import argparse
import datetime
import glob
import json
import os
import re
import sys
import tempfile
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Callable, Dict, List, Optional, Sequence

import harness
import results
from harness import REPO_ROOT, SHARED_DATA, display_path, fmt, format_seconds

from nerzoo.data.dataset_readers.conll_columns import parse_held_out_path

BENCHMARK_DIR = os.path.dirname(os.path.abspath(__file__))

DEFAULT_GLOVE = os.path.join(SHARED_DATA, "embeddings_glove6b50d_filtered", "glove.6B.50d.filtered.txt.gz")
SMOKE_GLOVE = os.path.join(REPO_ROOT, "fixtures", "embeddings", "tiny_glove.txt")
DEFAULT_RESULTS = "docs/RESULTS.md"
DEFAULT_MAX_MINUTES = 8.5
SMOKE_MAX_MINUTES = 0.2
DEFAULT_EPOCHS = 100
PREDICT_BATCH_SIZE = 64
PREDICT_SPEED_SCRIPT = os.path.join(BENCHMARK_DIR, "predict_speed.py")

TABLE_HEADER = [
    "date",
    "dataset",
    "model",
    "config + overrides",
    "data (train/dev/test sentences)",
    "epochs run (best)",
    "train wall time (trainer)",
    "train sent/s",
    "vs baseline",
    "dev F1",
    "test F1",
]
# Suites with `predict_speed`: these two columns go right after "vs baseline".
PREDICT_COLUMNS = ["predict sent/s", "predict vs baseline"]

# `{archive:NAME}` in the value of a model's "env": the archive of model NAME trained earlier in the run.
ARCHIVE_PLACEHOLDER = re.compile(r"\{archive:([^{}]+)\}")


@dataclass(frozen=True)
class Suite:
    """
    What one paper's benchmark is made of.

    - `name`: names the run folder (`runs/benchmarks/<name>-<timestamp>`) and the smoke test's
      temporary folder (`<name>_benchmark_smoke_<timestamp>_*`).
    - `script`: absolute path of the script that runs the suite (quoted in the notes' command line).
    - `description`: the argparse description.
    - `models`: name -> {"config": path relative to the repository root, "overrides": dotted
      overrides that make the model, "label": row label}; the order is the order of `--models` help.
      Optional keys, for a model built on another one trained in the same run:
      "needs": the name of that model, which must have been trained earlier in the run (on the same
      dataset) and have left an archive, or this model's row is an error row and it is not
      trained; "env": {"VAR": "value"}, environment variables for this model's training, evaluation
      and prediction-speed subprocesses (and the Jsonnet `std.extVar`s when its config is read
      here), where `{archive:NAME}` in a value stands for the archive of model NAME in the
      dataset's run folder (NAME must have been trained earlier in the run too).
    - `datasets`: name -> {"title", "train", "dev", "test", "format" ("conll", "iob2" or "conllu"), "reader"
      (None: every config keeps its own reader; else it replaces every config's `dataset_reader`,
      the config's token indexers kept), optional "overrides" (dotted overrides of every model on
      this dataset, e.g. its label set), optional "caveat" (a sub-item of the run note)}.
    - `smoke_datasets`: returns the same names on the fixtures.
    - `section_heading`, `section_intro`: the section of the results file.
    - `default_datasets`, `default_models`: the defaults of `--datasets` and `--models`.
    - `baseline`: the model every "vs baseline" ratio of a dataset refers to.
    - `default_max_minutes`: the default of `--max-minutes` (without `--smoke`).
    - `metric`, `metric_label`: the `allennlp evaluate` metric of the dev and test columns (x 100) and
      its name in the table header (span F1 by default; "accuracy" for POS tagging).
    - `predict_speed`: when true, after its evaluation each archive predicts the sentences of the
      dataset's test file (`{"tokens": [...]}` inputs through the `sequence_tagger` predictor, batch
      size 64, CPU), timed by `predict_speed.py` in a subprocess (log `<model>.predict_speed.log`);
      the table then has the columns "predict sent/s" and "predict vs baseline" after "vs
      baseline" (`table_header`). Only for `conll` datasets.
    """

    name: str
    script: str
    description: str
    models: Dict[str, Dict[str, Any]]
    datasets: Dict[str, Dict[str, Any]]
    smoke_datasets: Callable[[], Dict[str, Dict[str, Any]]]
    section_heading: str
    section_intro: str
    default_datasets: Sequence[str]
    default_models: Sequence[str]
    baseline: str = "baseline"
    predict_speed: bool = False
    metric: str = "f1-measure-overall"
    metric_label: str = "F1"
    default_max_minutes: float = DEFAULT_MAX_MINUTES


def table_header(suite: Suite) -> List[str]:
    """
    The suite's table columns: TABLE_HEADER, with PREDICT_COLUMNS after "vs baseline" when it times
    prediction, and the last two named after the suite's metric ("dev accuracy" for `metric_label`
    "accuracy").
    """
    header = [*TABLE_HEADER[:-2], f"dev {suite.metric_label}", f"test {suite.metric_label}"]
    if not suite.predict_speed:
        return header
    position = header.index("vs baseline") + 1
    return [*header[:position], *PREDICT_COLUMNS, *header[position:]]


# --------------------------------------------------------------------------------------------------
# Data


def conll2003_dataset(title: str) -> Dict[str, Any]:
    """CoNLL-2003 English from ../shared/data (eng.train / eng.testa / eng.testb), each config's own reader."""
    folder = os.path.join(SHARED_DATA, "conll2003")
    return {
        "title": title,
        "train": os.path.join(folder, "eng.train"),
        "dev": os.path.join(folder, "eng.testa"),
        "test": os.path.join(folder, "eng.testb"),
        "format": "conll",
        "reader": None,
    }


def on_conll2003_fixtures(dataset: Dict[str, Any]) -> Dict[str, Any]:
    """`dataset` with its files replaced by the CoNLL-2003 fixtures (for --smoke)."""
    folder = os.path.join(REPO_ROOT, "fixtures", "conll2003")
    return dict(
        dataset,
        train=os.path.join(folder, "train.txt"),
        dev=os.path.join(folder, "dev.txt"),
        test=os.path.join(folder, "test.txt"),
    )


def missing_files(dataset: Dict[str, Any]) -> List[str]:
    paths = [parse_held_out_path(dataset[split])[0] for split in ("train", "dev", "test")]
    missing = [path for path in paths if not os.path.exists(path)]
    if dataset.get("reader") and "treebank" in dataset["reader"]:
        if not glob.glob(dataset["reader"]["treebank"]):
            missing.append(dataset["reader"]["treebank"])
    return missing


# --------------------------------------------------------------------------------------------------
# Configs


def model_overrides(
    model: Dict[str, Any],
    dataset: Dict[str, Any],
    glove: str,
    epochs: int,
    max_minutes: float,
    env: Optional[Dict[str, str]] = None,
):
    """
    All dotted overrides of one training: conll_benchmark's (data, GloVe in the embedder and the
    vocabulary, num_epochs, no test evaluation, the time budget callback), patience off, the model's
    own overrides and, for datasets with their own reader, the whole `dataset_reader`.  `env`: the
    model's environment variables (`model_env`), Jsonnet external variables of its config.
    Returns (overrides, resolved config).
    """
    from allennlp.common.params import Params

    config_path = os.path.join(REPO_ROOT, model["config"])
    config_params = Params.from_file(config_path, ext_vars=env).as_dict(quiet=True)
    namespace = SimpleNamespace(
        train=dataset["train"], dev=dataset["dev"], glove=glove, epochs=epochs, max_minutes=max_minutes
    )
    overrides = harness.benchmark_overrides(config_params, namespace)
    overrides["trainer.patience"] = None
    overrides.update(dataset.get("overrides") or {})
    overrides.update(model["overrides"])
    overrides.update(reader_overrides(config_params, dataset))
    resolved = Params.from_file(config_path, json.dumps(overrides), ext_vars=env).as_dict(quiet=True)
    return overrides, resolved


def reader_overrides(config_params: Dict[str, Any], dataset: Dict[str, Any]) -> Dict[str, Any]:
    """The dataset's own reader, if it has one, with the config's token indexers, for every reader key."""
    if not dataset.get("reader"):
        return {}
    reader = dict(dataset["reader"])
    reader["token_indexers"] = config_params["dataset_reader"].get("token_indexers")
    overrides = {"dataset_reader": reader}  # a key equal to a whole object replaces it
    if "validation_dataset_reader" in config_params:
        overrides["validation_dataset_reader"] = reader
    return overrides


def required_models(model: Dict[str, Any]) -> List[str]:
    """The models this one needs trained before it: its "needs" and the `{archive:NAME}`s of its "env"."""
    names = [model["needs"]] if model.get("needs") else []
    for value in (model.get("env") or {}).values():
        names += [name for name in ARCHIVE_PLACEHOLDER.findall(value) if name not in names]
    return names


def missing_requirement(model: Dict[str, Any], results: List[Dict[str, Any]]) -> Optional[str]:
    """Why a model cannot be trained after `results` (the models trained so far on its dataset), or None."""
    for name in required_models(model):
        earlier = next((result for result in results if result["model"] == name), None)
        if earlier is None:
            return f"needs {name}, not trained before it in this run"
        if not earlier.get("archive"):
            return f"needs {name}, which left no archive"
    return None


def model_env(model: Dict[str, Any], results: List[Dict[str, Any]]) -> Dict[str, str]:
    """The model's "env" with each `{archive:NAME}` replaced by the archive of NAME among `results`."""
    archives = {result["model"]: result.get("archive") for result in results}
    return {
        variable: ARCHIVE_PLACEHOLDER.sub(lambda match: archives[match.group(1)], value)
        for variable, value in (model.get("env") or {}).items()
    }


def config_cell(model: Dict[str, Any], resolved: Optional[Dict[str, Any]]) -> str:
    """The "config + overrides" cell; `resolved` None for a model that was not trained (no reader then)."""
    cell = model["config"]
    if model["overrides"]:
        cell += f" -o {json.dumps(model['overrides'])}"
    for variable, value in (model.get("env") or {}).items():
        shown = ARCHIVE_PLACEHOLDER.sub(lambda match: f"<{match.group(1)} archive of this run>", value)
        cell += f"; {variable}={shown}"
    if resolved is None:
        return cell
    return f"{cell}; {harness.reader_description(resolved)}"


# --------------------------------------------------------------------------------------------------
# Training and evaluation


def train_and_evaluate(
    name: str,
    config_path: str,
    overrides: Dict[str, Any],
    dataset: Dict[str, Any],
    run_dir: str,
    max_minutes: float,
    env: Optional[Dict[str, str]] = None,
    metric: str = "f1-measure-overall",
) -> Dict[str, Any]:
    """
    Writes the run's overrides, then harness.train_and_evaluate on the dataset's dev and test
    (`env`: extra environment variables of its subprocesses; `metric`: the evaluated metric).
    """
    with open(os.path.join(run_dir, f"{name}.overrides.json"), "w") as handle:
        json.dump(overrides, handle, indent=2)
    return harness.train_and_evaluate(
        name,
        config_path,
        overrides,
        "nerzoo",
        run_dir,
        max_minutes,
        {"dev": dataset["dev"], "test": dataset["test"]},
        extra_env=env or None,
        metric=metric,
    )


def measure_predict_speed(
    name: str, archive: str, test_path: str, run_dir: str, env: Optional[Dict[str, str]] = None
) -> Dict[str, Any]:
    """
    `predict_speed.py` on the archive and the test file in a subprocess (log
    `<name>.predict_speed.log`, its JSON line also in `<name>.predict_speed.json`); returns
    `predict_sentences`, `predict_seconds` and `predict_sentences_per_second`, or `error`.
    """
    log_path = os.path.join(run_dir, f"{name}.predict_speed.log")
    command = [sys.executable, PREDICT_SPEED_SCRIPT, archive, test_path]
    command += ["--batch-size", str(PREDICT_BATCH_SIZE), "--include-package", "nerzoo"]
    print(f"=== {name}: timing prediction on test (batch size {PREDICT_BATCH_SIZE})", flush=True)
    run = harness.run_logged(command, log_path, 3600, dict(os.environ, **env) if env else None)
    timing = None
    if run["returncode"] == 0:
        with open(log_path, encoding="utf-8") as handle:
            for line in handle:  # the last JSON line wins; logging may precede it
                if line.startswith("{"):
                    try:
                        timing = json.loads(line)
                    except ValueError:
                        continue
    if not timing or "sentences_per_second" not in timing:
        return {"error": "prediction timing failed"}
    with open(os.path.join(run_dir, f"{name}.predict_speed.json"), "w") as handle:
        json.dump(timing, handle, indent=2)
    return {
        "predict_sentences": timing["sentences"],
        "predict_seconds": timing["seconds"],
        "predict_sentences_per_second": timing["sentences_per_second"],
    }


# --------------------------------------------------------------------------------------------------
# Results


def result_row(
    result: Dict[str, Any], baseline: Optional[Dict[str, Any]], common: Dict[str, Any], suite: Suite
) -> List[str]:

    def versus(key: str) -> str:
        rate = result.get(key)
        if result["model"] == suite.baseline:
            return "1.00x (baseline)" if rate else "n/a"
        return harness.ratio(rate, baseline.get(key) if baseline else None)

    model = result["label"]
    if result.get("error"):
        model += f" (ERROR: {result['error']})"
    predict_cells = []
    if suite.predict_speed:
        predict_cells = [fmt(result.get("predict_sentences_per_second"), 1), versus("predict_sentences_per_second")]
    return [
        common["date"],
        common["dataset"],
        model,
        result["config_display"],
        common["data"],
        *harness.epochs_and_wall_cells(result),
        fmt(result.get("train_sentences_per_second"), 1),
        versus("train_sentences_per_second"),
        *predict_cells,
        fmt(result.get("dev_f1")),
        fmt(result.get("test_f1")),
    ]


# --------------------------------------------------------------------------------------------------
# Main


def parse_args(argv: Optional[List[str]], suite: Suite) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=suite.description)
    parser.add_argument(
        "--datasets",
        default=",".join(suite.default_datasets),
        help=f"comma-separated, from {', '.join(suite.datasets)} (in this order)",
    )
    parser.add_argument(
        "--models",
        default=",".join(suite.default_models),
        help=f"comma-separated, from {', '.join(suite.models)} (trained in this order)",
    )
    parser.add_argument(
        "--max-minutes",
        type=float,
        default=None,
        help=f"training budget per model (default {suite.default_max_minutes:g}, {SMOKE_MAX_MINUTES:g} with --smoke): training "
        "stops after the epoch whose successor would overrun it; the process is killed at 1.25 x budget + 5 min",
    )
    parser.add_argument(
        "--epochs", type=int, default=DEFAULT_EPOCHS, help="trainer.num_epochs, large so that the budget stops training"
    )
    parser.add_argument(
        "--glove", default=None, help="pretrained embeddings (default: GloVe 6B 50d, tiny_glove with --smoke)"
    )
    parser.add_argument(
        "--output-dir",
        default=None,
        help=f"default runs/benchmarks/{suite.name}-<timestamp> (a temporary folder with --smoke)",
    )
    parser.add_argument(
        "--results",
        default=None,
        help=f"markdown file the rows are appended to (default {DEFAULT_RESULTS}; "
        "with --smoke RESULTS.smoke.md in the output folder)",
    )
    parser.add_argument(
        "--smoke", action="store_true", help="run everything on the fixtures with tiny budgets (a few minutes)"
    )
    return parser.parse_args(argv)


def main(argv: Optional[List[str]] = None, suite: Optional[Suite] = None) -> int:
    if suite is None:
        raise ValueError(
            "suite_benchmark.main needs a suite "
            "(run deptree_benchmark.py, me_crf_benchmark.py or fofe_ner_benchmark.py)"
        )
    raw_argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(raw_argv, suite)
    datasets_available = suite.smoke_datasets() if args.smoke else suite.datasets
    if suite.predict_speed and any(dataset["format"] != "conll" for dataset in datasets_available.values()):
        raise ValueError("predict_speed reads the test sentences of CoNLL column files only (format 'conll')")
    dataset_names = [name.strip() for name in args.datasets.split(",") if name.strip()]
    model_names = [name.strip() for name in args.models.split(",") if name.strip()]
    unknown = [name for name in dataset_names if name not in suite.datasets]
    unknown += [name for name in model_names if name not in suite.models]
    if unknown or not dataset_names or not model_names:
        print(f"error: unknown or missing dataset/model names {unknown}", file=sys.stderr)
        return 2
    max_minutes = (
        args.max_minutes
        if args.max_minutes is not None
        else (SMOKE_MAX_MINUTES if args.smoke else suite.default_max_minutes)
    )
    glove = os.path.abspath(args.glove) if args.glove else (SMOKE_GLOVE if args.smoke else DEFAULT_GLOVE)
    started = datetime.datetime.now()
    if args.output_dir:
        run_dir = os.path.abspath(args.output_dir)
    elif args.smoke:
        run_dir = tempfile.mkdtemp(prefix=f"{suite.name}_benchmark_smoke_{started:%Y%m%d-%H%M%S}_")
    else:
        run_dir = os.path.join(REPO_ROOT, "runs", "benchmarks", f"{suite.name}-{started:%Y%m%d-%H%M%S}")
    if args.results:
        results_path = os.path.abspath(args.results)
    else:
        results_path = (
            os.path.join(run_dir, "RESULTS.smoke.md") if args.smoke else os.path.join(REPO_ROOT, DEFAULT_RESULTS)
        )
    if args.smoke and os.path.abspath(results_path) == os.path.join(REPO_ROOT, DEFAULT_RESULTS):
        print("error: --smoke never writes to docs/RESULTS.md; give another --results", file=sys.stderr)
        return 2

    problems = [] if os.path.exists(glove) else [glove]
    selected = []
    for name in dataset_names:
        missing = missing_files(datasets_available[name])
        if missing and args.smoke:
            print(f"note: smoke test skips {name}: missing {', '.join(missing)}", flush=True)
        elif missing:
            problems += missing
        else:
            selected.append(name)
    if problems or not selected:
        print(f"error: missing files: {', '.join(problems) or 'no dataset left'}", file=sys.stderr)
        return 2

    os.makedirs(run_dir, exist_ok=True)
    os.chdir(REPO_ROOT)  # .allennlp_plugins, the nerzoo package and the configs' relative paths
    load_start = os.getloadavg()
    if load_start[0] > 1.0:
        print(
            f"warning: 1-minute load average is {load_start[0]:.2f}; other processes will slow the timings", flush=True
        )
    command_line = harness.command_line(suite.script, raw_argv)
    machine = harness.machine_description()
    print(
        f"output: {run_dir}\nresults: {results_path}\nbudget {max_minutes:g} min per model, "
        f"num_epochs {args.epochs}, GloVe {glove}",
        flush=True,
    )

    summary: List[str] = []
    any_error = False
    for dataset_name in selected:
        dataset = datasets_available[dataset_name]
        dataset_dir = os.path.join(run_dir, dataset_name)
        os.makedirs(dataset_dir, exist_ok=True)
        dataset_started = datetime.datetime.now()
        dataset_load = os.getloadavg()
        counts = {
            split: harness.count_sentences(dataset[split], dataset["reader"]) for split in ("train", "dev", "test")
        }
        print(f"\n##### {dataset_name}: {dataset['title']}; sentences {counts}", flush=True)
        measured: List[Dict[str, Any]] = []
        for model_name in model_names:
            model = suite.models[model_name]
            missing = missing_requirement(model, measured)
            if missing:
                print(f"\n=== {model_name}: not trained: {missing}", flush=True)
                measured.append(
                    {
                        "name": model_name,
                        "model": model_name,
                        "label": model["label"],
                        "config_display": config_cell(model, None),
                        "error": missing,
                        "train_sentences_per_second": None,
                    }
                )
                continue
            env = model_env(model, measured)
            overrides, resolved = model_overrides(model, dataset, glove, args.epochs, max_minutes, env)
            result = train_and_evaluate(
                model_name,
                os.path.join(REPO_ROOT, model["config"]),
                overrides,
                dataset,
                dataset_dir,
                max_minutes,
                env,
                suite.metric,
            )
            result.update(
                model=model_name,
                label=model["label"],
                config_display=config_cell(model, resolved),
            )
            if env:
                result["env"] = env
            result["train_sentences_per_second"] = harness.train_sentences_per_second(result, counts["train"])
            if suite.predict_speed and result.get("archive"):
                speed = measure_predict_speed(model_name, result["archive"], dataset["test"], dataset_dir, env)
                error = speed.pop("error", None)
                if error:
                    result.setdefault("error", error)
                result.update(speed)
            measured.append(result)
            predict_text = f", {fmt(result.get('predict_sentences_per_second'), 1)} predict sent/s"
            print(
                f"  {model_name}: dev {suite.metric_label} {fmt(result.get('dev_f1'))}, "
                f"test {suite.metric_label} {fmt(result.get('test_f1'))}, "
                f"{fmt(result['train_sentences_per_second'], 1)} train sent/s"
                + (predict_text if suite.predict_speed else "")
                + (f", ERROR: {result['error']}" if result.get("error") else ""),
                flush=True,
            )

        baseline = next((result for result in measured if result["model"] == suite.baseline), None)
        common = {
            "date": started.strftime("%Y-%m-%d %H:%M"),
            "dataset": dataset_name,
            "data": f"{os.path.basename(dataset['train'])}/{os.path.basename(dataset['dev'])}/"
            f"{os.path.basename(dataset['test'])} ({counts['train']}/{counts['dev']}/{counts['test']})",
        }
        rows = [result_row(result, baseline, common, suite) for result in measured]
        note = (
            f"- {common['date']}, {dataset_name} ({dataset_started:%H:%M}): `{command_line}` (run from the "
            f"repository root; output in `{display_path(dataset_dir)}`). Machine: {machine}. "
            f"Budget {max_minutes:g} min per model, `trainer.num_epochs` {args.epochs}, patience off, GloVe "
            f"`{display_path(glove)}`. Load average (1/5/15 min) at the start of this dataset "
            f"{harness.loads_text(dataset_load)}, at its end {harness.loads_text(os.getloadavg())}."
        )
        for result in measured:
            if "train_wall_seconds" not in result:  # not trained: a model it needs is missing
                note += f" {result['model']}: not trained ({result.get('error')})."
                continue
            note += (
                f" {result['model']}: training process CPU time "
                f"{format_seconds(result.get('train_cpu_seconds'))}, mean 1-min load during "
                f"training {fmt(result.get('train_mean_load'))}"
            )
            for variable, value in (result.get("env") or {}).items():
                note += f", {variable}=`{display_path(value)}`"
            note += "."
        if suite.predict_speed:
            note += (
                f" Prediction speed: `benchmarks/predict_speed.py`, the {counts['test']} test sentences through "
                f"the archive's `sequence_tagger` predictor, batch size {PREDICT_BATCH_SIZE}, CPU, three warm-up batches "
                "not timed, one timed pass."
            )
        if baseline is None:
            note += " The baseline was not trained in this run, so there are no ratios."
        if dataset.get("caveat"):
            note += f"\n  - {dataset['caveat']}"
        columns = table_header(suite)
        record = {
            "started": common["date"],
            "dataset": dataset_name,
            "command": command_line,
            "columns": columns,
            "rows": [dict(zip(columns, row)) for row in rows],
            "results": measured,
            "note": note,
        }
        results.append_run(results_path, f"{suite.name}_suite", record, suite.section_heading, suite.section_intro)
        with open(os.path.join(dataset_dir, "results.json"), "w") as handle:
            json.dump({"counts": counts, "results": measured}, handle, indent=2, default=str)
        for result, row in zip(measured, rows):
            summary.append(f"{dataset_name:10s} {result['model']:12s} " + " | ".join(row[5:]))
        any_error = any_error or any(result.get("error") for result in measured)

    predict_summary = " | predict sent/s | predict vs baseline" if suite.predict_speed else ""
    print(
        f"\n=== Summary (epochs run (best) | train wall (trainer) | train sent/s | vs baseline{predict_summary} "
        f"| dev {suite.metric_label} | test {suite.metric_label})"
    )
    print("\n".join(summary))
    print(
        f"\nrows added to {results.rows_dir(results_path)}/{suite.name}_suite.jsonl and {results_path}\nrun folder: {run_dir}"
    )
    return 1 if any_error else 0


if __name__ == "__main__":
    print(
        "suite_benchmark.py is the engine of the paper benchmarks; run one of them instead:\n"
        "    .venv/bin/python benchmarks/deptree_benchmark.py\n"
        "    .venv/bin/python benchmarks/me_crf_benchmark.py\n"
        "    .venv/bin/python benchmarks/fofe_ner_benchmark.py",
        file=sys.stderr,
    )
    sys.exit(2)
