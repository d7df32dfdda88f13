#!/usr/bin/env python
"""
Calibration of span confidences on CoNLL-2003: for each trained archive, fits the temperatures on dev
(`allennlp calibrate`'s code: the span and the sequence objective, one temperature and, for CRF
heads, two), then scores the span confidences of the archive and of the four calibrated archives on
test: span F1 (unchanged by design),
ECE over 10 equal-count bins (`span_ece` of `allennlp evaluate`) and over the fixed bins 0, 0.5, 0.6,
0.7, 0.8, 0.9, 0.95, 0.99, 1, the Brier score, the precision of the 80% and 90% most confident spans,
and, as a diagnosis only, the ECE with one temperature fitted on test itself ("oracle": what a
temperature could do if dev and test were alike).

    .venv/bin/python benchmarks/calibration_benchmark.py \\
        --archive bilstm_crf:1=runs/converged/bilstm_crf-conll2003-1/model/model.tar.gz \\
        --archive deptree_ner:1=runs/converged/deptree_ner_decay-conll2003-1/model/model.tar.gz \\
        --overrides deptree_ner:1='{"model.type": "deptree_ner"}' --record calibration

`--overrides NAME=JSON` loads an archive with config overrides (archives trained before the model was
renamed need `{"model.type": "deptree_ner"}`).  The calibrated archives are written to `--output-dir`
(default `runs/calibration/<timestamp>`).  With `--record TABLE` the rows also go to
docs/results/TABLE.jsonl and the table TABLE of docs/RESULTS.md (`results.py`).
"""

import argparse
import datetime
import json
import os
import sys
from typing import Any, Dict, List, Optional

import harness
import results

from nerzoo.commands.calibrate import calibrate, evaluate, evaluate_archive
from nerzoo.modules.calibration import fit_temperatures, has_spans
from nerzoo.training.metrics.span_calibration import (
    calibration_error,
    expected_calibration_error,
    fixed_bins,
    precision_at_coverage,
)

DEFAULT_DEV = os.path.join(harness.SHARED_DATA, "conll2003", "eng.testa")
DEFAULT_TEST = os.path.join(harness.SHARED_DATA, "conll2003", "eng.testb")
EDGES = [0.0, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 1.0]
# (objective, temperatures); the first is `allennlp calibrate`'s default.
VARIANTS = [("span", 1), ("span", 2), ("sequence", 1), ("sequence", 2)]
COLUMNS = [
    "model",
    "archive",
    "T: span 1 / 2; sequence 1 / 2",
    "dev ECE before / span 1 / 2 / sequence 1 / 2",
    "test F1 (all the same)",
    "test ECE before / span 1 / 2 / sequence 1 / 2",
    "test ECE fixed bins before / span 1",
    "test Brier before / span 1",
    "test P@80% before / span 1",
    "test P@90% before / span 1",
    "test ECE, span T fitted on test (oracle)",
]


def scores(archive_file: str, data_file: str, overrides: str) -> Dict[str, Any]:
    """Span F1 and the calibration figures of an archive's spans on `data_file`, and what produced them."""
    measured = evaluate_archive(archive_file, data_file, overrides=overrides)
    evaluation = measured.evaluation
    confidences, correct = evaluation.confidences, evaluation.correct
    figures = {
        "f1": evaluation.metrics.get("f1-measure-overall"),
        "ece": expected_calibration_error(confidences, correct),
        "ece_fixed": calibration_error(confidences, correct, fixed_bins(confidences, EDGES)),
        "brier": evaluation.metrics.get("span_brier"),
        "precision_at_80": precision_at_coverage(confidences, correct, 0.8),
        "precision_at_90": precision_at_coverage(confidences, correct, 0.9),
        "mean_confidence": float(confidences.mean()),
        "precision": float(correct.mean()),
        "spans": len(confidences),
    }
    return {"figures": figures, "measured": measured}


def oracle_ece(archive_file: str, test: str, overrides: str) -> float:
    """ECE on test after one temperature fitted on test itself (span objective where there are spans)."""
    measured = scores(archive_file, test, overrides)["measured"]
    for name, module in measured.modules.items():
        site = module.calibration_site(name)
        batches = measured.evaluation.batches[name]
        objective = "span" if has_spans(site, batches) else "sequence"
        site.set_temperatures(fit_temperatures(site, batches, 1, objective).temperatures)
    evaluation = evaluate(measured.archive.model, measured.loader, measured.modules)
    return expected_calibration_error(evaluation.confidences, evaluation.correct)


def run_one(name: str, archive_file: str, overrides: str, args) -> Dict[str, Any]:
    print(f"=== {name}: {archive_file}", flush=True)
    variants: Dict[str, Dict[str, Any]] = {}
    for objective, count in VARIANTS:
        key = f"{objective} {count}"
        output_file = os.path.join(args.output_dir, f"{name.replace(':', '-')}.{objective}{count}.tar.gz")
        report = calibrate(
            argparse.Namespace(
                archive_file=archive_file,
                input_file=args.dev,
                output_file=output_file,
                temperatures=count,
                objective=objective,
                batch_size=64,
                cuda_device=-1,
                overrides=overrides,
            )
        )
        variants[key] = {
            "temperatures": report["temperatures"],
            "objectives": report["objectives"],
            "dev": report["after"],
            "test": scores(output_file, args.test, "")["figures"],
        }
        print(f"  {key}: {report['temperatures']} test ECE {variants[key]['test']['ece']:.4f}", flush=True)
    return {
        "name": name,
        "archive": archive_file,
        "dev_before": report["before"],
        "test_before": scores(archive_file, args.test, overrides)["figures"],
        "variants": variants,
        "test_oracle_ece": oracle_ece(archive_file, args.test, overrides),
    }


def row(result: Dict[str, Any]) -> Dict[str, str]:
    model, _, seed = result["name"].partition(":")
    variants = [result["variants"][f"{objective} {count}"] for objective, count in VARIANTS]
    default = variants[0]
    before = result["test_before"]

    def temperatures(variant: Dict[str, Any]) -> str:
        values = list(dict.fromkeys(variant["temperatures"].values()))  # one value when all keys share it
        return ",".join(f"{value:.2f}" for value in values)

    f1s = {round(variant["test"]["f1"], 12) for variant in variants} | {round(before["f1"], 12)}
    cells = [
        model,
        f"{harness.display_path(result['archive'])} (seed {seed})",
        " / ".join(temperatures(variant) for variant in variants[:2])
        + "; "
        + " / ".join(temperatures(variant) for variant in variants[2:]),
        " / ".join(
            f"{value:.4f}" for value in [result["dev_before"]["span_ece"], *(v["dev"]["span_ece"] for v in variants)]
        ),
        f"{100 * before['f1']:.2f}" + ("" if len(f1s) == 1 else " (CHANGED)"),
        " / ".join(f"{value:.4f}" for value in [before["ece"], *(v["test"]["ece"] for v in variants)]),
        f"{before['ece_fixed']:.4f} / {default['test']['ece_fixed']:.4f}",
        f"{before['brier']:.4f} / {default['test']['brier']:.4f}",
        f"{before['precision_at_80']:.4f} / {default['test']['precision_at_80']:.4f}",
        f"{before['precision_at_90']:.4f} / {default['test']['precision_at_90']:.4f}",
        f"{result['test_oracle_ece']:.4f}",
    ]
    return dict(zip(COLUMNS, cells))


def named(values: List[str], option: str) -> Dict[str, str]:
    pairs = {}
    for value in values:
        name, separator, rest = value.partition("=")
        if not separator:
            raise SystemExit(f"error: {option} expects NAME=VALUE, got {value!r}")
        pairs[name] = rest
    return pairs


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].strip())
    parser.add_argument("--archive", action="append", default=[], metavar="MODEL:SEED=PATH", required=True)
    parser.add_argument("--overrides", action="append", default=[], metavar="MODEL:SEED=JSON")
    parser.add_argument("--dev", default=DEFAULT_DEV)
    parser.add_argument("--test", default=DEFAULT_TEST)
    parser.add_argument("--output-dir", default=None)
    parser.add_argument("--record", metavar="TABLE", default=None)
    args = parser.parse_args(argv)
    raw_argv = list(sys.argv[1:] if argv is None else argv)
    started = datetime.datetime.now()
    args.output_dir = args.output_dir or os.path.join(
        harness.REPO_ROOT, "runs", "calibration", started.strftime("%Y%m%d-%H%M%S")
    )
    os.makedirs(args.output_dir, exist_ok=True)
    overrides = named(args.overrides, "--overrides")
    measured = [
        run_one(name, path, overrides.get(name, ""), args) for name, path in named(args.archive, "--archive").items()
    ]
    rows = [row(result) for result in measured]
    with open(os.path.join(args.output_dir, "results.json"), "w") as handle:
        json.dump(measured, handle, indent=1)
    print(results.markdown_row(COLUMNS))
    for cells in rows:
        print(results.markdown_row([cells[column] for column in COLUMNS]))
    if args.record:
        note = (
            f"- {started:%Y-%m-%d %H:%M}: `{harness.command_line(__file__, raw_argv)}`; dev "
            f"`{harness.display_path(args.dev)}`, test `{harness.display_path(args.test)}`. Machine: "
            f"{harness.machine_description()}. Wall time {datetime.datetime.now() - started}."
        )
        record = {
            "started": f"{started:%Y-%m-%d %H:%M}",
            "columns": COLUMNS,
            "rows": rows,
            "results": measured,
            "note": note,
        }
        results.append_run(results.DEFAULT_RESULTS, args.record, record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
