#!/usr/bin/env python
"""
The engine of the paper benchmarks: a set of models trained one after the other on each of a set of
datasets, with the same CPU time budget each, evaluated on dev and test with `allennlp evaluate`, and
one row per model appended to the suite's own section of docs/RESULTS.md (span F1, wall time, train
sentences/s and its ratio to the baseline trained in the same run).

What is specific to a paper (its models, datasets, section heading and intro, defaults) is a `Suite`,
defined in the script that is run:

    .venv/bin/python benchmarks/deptree_benchmark.py    (dependency-aware NER, Aguilar & Solorio 2019)
    .venv/bin/python benchmarks/me_crf_benchmark.py     (ME-CRF, Liu, Baldwin & Cohn 2017)

This file itself is not meant to be run.  The training subprocess, the time budget callback
(`benchmark_time_budget`), the logging of every subprocess and the small helpers come from
`conll_benchmark.py` in this folder (imported as the top-level module `conll_benchmark`: fairscale
owns the name `benchmarks`).  Prediction speed is not measured here.
"""
import argparse
import datetime
import glob
import json
import os
import platform
import shlex
import sys
import tempfile
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Callable, Dict, List, Optional, Sequence

BENCHMARK_DIR = os.path.dirname(os.path.abspath(__file__))
if BENCHMARK_DIR not in sys.path:
    sys.path.insert(0, BENCHMARK_DIR)

import conll_benchmark  # noqa: E402  (needs BENCHMARK_DIR on sys.path)

REPO_ROOT = conll_benchmark.REPO_ROOT
SHARED_DATA = os.path.normpath(os.path.join(REPO_ROOT, "..", "shared", "data"))

DEFAULT_GLOVE = os.path.join(SHARED_DATA, "embeddings_glove6b50d_filtered", "glove.6B.50d.filtered.txt.gz")
SMOKE_GLOVE = os.path.join(REPO_ROOT, "fixtures", "embeddings", "tiny_glove.txt")
DEFAULT_RESULTS = "docs/RESULTS.md"
DEFAULT_MAX_MINUTES = 8.5
SMOKE_MAX_MINUTES = 0.2
DEFAULT_EPOCHS = 100

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
    - `datasets`: name -> {"title", "train", "dev", "test", "format" ("conll" or "iob2"), "reader"
      (None: every config keeps its own reader; else it replaces every config's `dataset_reader`,
      the config's token indexers kept), optional "caveat" (a sub-item of the run note)}.
    - `smoke_datasets`: returns the same names on the fixtures.
    - `section_heading`, `section_intro`: the section of the results file.
    - `default_datasets`, `default_models`: the defaults of `--datasets` and `--models`.
    - `baseline`: the model every "vs baseline" ratio of a dataset refers to.
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


# --------------------------------------------------------------------------------------------------
# Data


def count_iob2_sentences(path: str) -> int:
    """Sentences of a UNER `.iob2` file: maximal runs of non-blank lines, `#` comment lines skipped."""
    count, inside = 0, False
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            stripped = line.strip()
            if stripped.startswith("#"):
                continue
            if not stripped:
                inside = False
                continue
            if not inside:
                count += 1
                inside = True
    return count


def count_sentences(path: str, file_format: str) -> int:
    if file_format == "iob2":
        return count_iob2_sentences(path)
    return conll_benchmark.count_sentences(path)


def missing_files(dataset: Dict[str, Any]) -> List[str]:
    paths = [dataset["train"], dataset["dev"], dataset["test"]]
    missing = [path for path in paths if not os.path.exists(path)]
    if dataset.get("reader") and "treebank" in dataset["reader"]:
        if not glob.glob(dataset["reader"]["treebank"]):
            missing.append(dataset["reader"]["treebank"])
    return missing


# --------------------------------------------------------------------------------------------------
# Configs


def model_overrides(model: Dict[str, Any], dataset: Dict[str, Any], glove: str, epochs: int, max_minutes: float):
    """
    All dotted overrides of one training: conll_benchmark's (data, GloVe in the embedder and the
    vocabulary, num_epochs, no test evaluation, the time budget callback), patience off, the model's
    own overrides and, for datasets with their own reader, the whole `dataset_reader`.
    Returns (overrides, resolved config).
    """
    from allennlp.common.params import Params

    config_path = os.path.join(REPO_ROOT, model["config"])
    config_params = Params.from_file(config_path).as_dict(quiet=True)
    namespace = SimpleNamespace(
        train=dataset["train"], dev=dataset["dev"], glove=glove, epochs=epochs, max_minutes=max_minutes
    )
    overrides = conll_benchmark.nerzoo_overrides(config_params, namespace)
    overrides["trainer.patience"] = None
    overrides.update(model["overrides"])
    if dataset.get("reader"):
        reader = dict(dataset["reader"])
        reader["token_indexers"] = config_params["dataset_reader"].get("token_indexers")
        overrides["dataset_reader"] = reader  # a key equal to a whole object replaces it
    resolved = Params.from_file(config_path, json.dumps(overrides)).as_dict(quiet=True)
    return overrides, resolved


def config_cell(model: Dict[str, Any], resolved: Dict[str, Any]) -> str:
    cell = model["config"]
    if model["overrides"]:
        cell += f" -o {json.dumps(model['overrides'])}"
    reader = resolved.get("dataset_reader") or {}
    cell += f"; reader {reader.get('type', '?')}"
    if reader.get("type") == "conllu_ner":
        cell += " (gold trees)"
    elif reader.get("spacy_model"):
        cell += f" ({reader['spacy_model']} trees)"
    if reader.get("document_level"):
        cell += " (whole documents)"
    return cell


# --------------------------------------------------------------------------------------------------
# Training and evaluation


def train_and_evaluate(
    name: str, config_path: str, overrides: Dict[str, Any], dataset: Dict[str, Any], run_dir: str, max_minutes: float
) -> Dict[str, Any]:
    """Writes the run's overrides, then conll_benchmark.train_and_evaluate on the dataset's dev and test."""
    with open(os.path.join(run_dir, f"{name}.overrides.json"), "w") as handle:
        json.dump(overrides, handle, indent=2)
    return conll_benchmark.train_and_evaluate(
        name, config_path, overrides, "nerzoo", run_dir, max_minutes, {"dev": dataset["dev"], "test": dataset["test"]}
    )


# --------------------------------------------------------------------------------------------------
# Results


def result_row(
    result: Dict[str, Any], baseline: Optional[Dict[str, Any]], common: Dict[str, Any], suite: Suite
) -> List[str]:
    fmt = conll_benchmark.fmt
    rate = result.get("train_sentences_per_second")
    if result["model"] == suite.baseline:
        versus = "1.00x (baseline)" if rate else "n/a"
    else:
        versus = conll_benchmark.ratio(rate, baseline.get("train_sentences_per_second") if baseline else None)
    model = result["label"]
    if result.get("error"):
        model += f" (ERROR: {result['error']})"
    return [
        common["date"],
        common["dataset"],
        model,
        result["config_display"],
        common["data"],
        *conll_benchmark.epochs_and_wall_cells(result),
        fmt(rate, 1),
        versus,
        fmt(result.get("dev_f1")),
        fmt(result.get("test_f1")),
    ]


def update_section(results_path: str, rows: List[List[str]], note: str, suite: Suite) -> None:
    """
    Appends `rows` to the table of the suite's section of the results file and `note` at the end of
    the section (`conll_benchmark.append_to_section`, which creates the section when missing).
    """
    conll_benchmark.append_to_section(
        results_path, suite.section_heading, suite.section_intro, TABLE_HEADER, rows, note
    )


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
        help=f"training budget per model (default {DEFAULT_MAX_MINUTES:g}, {SMOKE_MAX_MINUTES:g} with --smoke): training "
        "stops after the epoch whose successor would overrun it; the process is killed at 1.25 x budget + 5 min",
    )
    parser.add_argument(
        "--epochs", type=int, default=DEFAULT_EPOCHS, help="trainer.num_epochs, large so that the budget stops training"
    )
    parser.add_argument("--glove", default=None, help="pretrained embeddings (default: GloVe 6B 50d, tiny_glove with --smoke)")
    parser.add_argument(
        "--output-dir",
        default=None,
        help=f"default runs/benchmarks/{suite.name}-<timestamp> (a temporary folder with --smoke)",
    )
    parser.add_argument(
        "--results", default=None, help=f"markdown file the rows are appended to (default {DEFAULT_RESULTS}; "
        "with --smoke RESULTS.smoke.md in the output folder)"
    )
    parser.add_argument(
        "--smoke", action="store_true", help="run everything on the fixtures with tiny budgets (a few minutes)"
    )
    return parser.parse_args(argv)


def main(argv: Optional[List[str]] = None, suite: Optional[Suite] = None) -> int:
    if suite is None:
        raise ValueError("suite_benchmark.main needs a suite (run deptree_benchmark.py or me_crf_benchmark.py)")
    raw_argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(raw_argv, suite)
    datasets_available = suite.smoke_datasets() if args.smoke else suite.datasets
    dataset_names = [name.strip() for name in args.datasets.split(",") if name.strip()]
    model_names = [name.strip() for name in args.models.split(",") if name.strip()]
    unknown = [name for name in dataset_names if name not in suite.datasets]
    unknown += [name for name in model_names if name not in suite.models]
    if unknown or not dataset_names or not model_names:
        print(f"error: unknown or missing dataset/model names {unknown}", file=sys.stderr)
        return 2
    max_minutes = args.max_minutes if args.max_minutes is not None else (
        SMOKE_MAX_MINUTES if args.smoke else DEFAULT_MAX_MINUTES
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
        results_path = os.path.join(run_dir, "RESULTS.smoke.md") if args.smoke else os.path.join(REPO_ROOT, DEFAULT_RESULTS)
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
        print(f"warning: 1-minute load average is {load_start[0]:.2f}; other processes will slow the timings", flush=True)
    python = sys.executable
    command_line = shlex.join(
        [os.path.relpath(python, REPO_ROOT) if python.startswith(REPO_ROOT) else python,
         os.path.relpath(suite.script, REPO_ROOT), *raw_argv]
    )
    machine = machine_description()
    fmt = conll_benchmark.fmt
    format_seconds = conll_benchmark.format_seconds
    print(f"output: {run_dir}\nresults: {results_path}\nbudget {max_minutes:g} min per model, "
          f"num_epochs {args.epochs}, GloVe {glove}", flush=True)

    summary: List[str] = []
    any_error = False
    for dataset_name in selected:
        dataset = datasets_available[dataset_name]
        dataset_dir = os.path.join(run_dir, dataset_name)
        os.makedirs(dataset_dir, exist_ok=True)
        dataset_started = datetime.datetime.now()
        dataset_load = os.getloadavg()
        counts = {split: count_sentences(dataset[split], dataset["format"]) for split in ("train", "dev", "test")}
        print(f"\n##### {dataset_name}: {dataset['title']}; sentences {counts}", flush=True)
        results: List[Dict[str, Any]] = []
        for model_name in model_names:
            model = suite.models[model_name]
            overrides, resolved = model_overrides(model, dataset, glove, args.epochs, max_minutes)
            result = train_and_evaluate(
                model_name, os.path.join(REPO_ROOT, model["config"]), overrides, dataset, dataset_dir, max_minutes
            )
            result.update(
                model=model_name,
                label=model["label"],
                config_display=config_cell(model, resolved),
            )
            result["train_sentences_per_second"] = conll_benchmark.train_sentences_per_second(result, counts["train"])
            results.append(result)
            print(
                f"  {model_name}: dev F1 {fmt(result.get('dev_f1'))}, test F1 {fmt(result.get('test_f1'))}, "
                f"{fmt(result['train_sentences_per_second'], 1)} train sent/s"
                + (f", ERROR: {result['error']}" if result.get("error") else ""),
                flush=True,
            )

        baseline = next((result for result in results if result["model"] == suite.baseline), None)
        common = {
            "date": started.strftime("%Y-%m-%d %H:%M"),
            "dataset": dataset_name,
            "data": f"{os.path.basename(dataset['train'])}/{os.path.basename(dataset['dev'])}/"
            f"{os.path.basename(dataset['test'])} ({counts['train']}/{counts['dev']}/{counts['test']})",
        }
        rows = [result_row(result, baseline, common, suite) for result in results]
        note = (
            f"- {common['date']}, {dataset_name} ({dataset_started:%H:%M}): `{command_line}` (run from the "
            f"repository root; output in `{conll_benchmark.display_path(dataset_dir)}`). Machine: {machine}. "
            f"Budget {max_minutes:g} min per model, `trainer.num_epochs` {args.epochs}, patience off, GloVe "
            f"`{conll_benchmark.display_path(glove)}`. Load average (1/5/15 min) at the start of this dataset "
            f"{loads_text(dataset_load)}, at its end {loads_text(os.getloadavg())}."
        )
        for result in results:
            note += (
                f" {result['model']}: training process CPU time "
                f"{format_seconds(result.get('train_cpu_seconds'))}, mean 1-min load during "
                f"training {fmt(result.get('train_mean_load'))}."
            )
        if baseline is None:
            note += " The baseline was not trained in this run, so there are no ratios."
        if dataset.get("caveat"):
            note += f"\n  - {dataset['caveat']}"
        update_section(results_path, rows, note, suite)
        with open(os.path.join(dataset_dir, "results.json"), "w") as handle:
            json.dump({"counts": counts, "results": results}, handle, indent=2, default=str)
        for result, row in zip(results, rows):
            summary.append(f"{dataset_name:10s} {result['model']:12s} " + " | ".join(row[5:]))
        any_error = any_error or any(result.get("error") for result in results)

    print("\n=== Summary (epochs run (best) | train wall (trainer) | train sent/s | vs baseline | dev F1 | test F1)")
    print("\n".join(summary))
    print(f"\nrows appended to {results_path}\nrun folder: {run_dir}")
    return 1 if any_error else 0


if __name__ == "__main__":
    print(
        "suite_benchmark.py is the engine of the paper benchmarks; run one of them instead:\n"
        "    .venv/bin/python benchmarks/deptree_benchmark.py\n"
        "    .venv/bin/python benchmarks/me_crf_benchmark.py",
        file=sys.stderr,
    )
    sys.exit(2)
