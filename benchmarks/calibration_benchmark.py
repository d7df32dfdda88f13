#!/usr/bin/env python
"""
Calibration of span confidences on CoNLL-2003: for each trained archive, fits the temperatures on dev
(`allennlp calibrate`'s code: span and sequence objective, one or two temperatures), then scores on test
the archive and the four calibrated archives: span F1 (unchanged by design), ECE (10 equal-count bins
and the fixed bins of `EDGES`), Brier score, precision of the 80% and 90% most confident spans, and the
ECE with one temperature fitted on test itself ("oracle").

    .venv/bin/python benchmarks/calibration_benchmark.py --record calibration \
        --archive bilstm_crf:1=runs/reproduce/bilstm_crf-conll2003-1/model/model.tar.gz
"""

import argparse
import datetime
import os
from typing import Any, Dict, List, Optional

import harness
import results

from nerzoo.commands.calibrate import calibrate, evaluate, evaluate_archive
from nerzoo.metrics import span_calibration
from nerzoo.modules.crf.calibration import fit_temperatures, has_spans

DEFAULT_DEV = os.path.join(harness.SHARED_DATA, "conll2003", "eng.testa")
DEFAULT_TEST = os.path.join(harness.SHARED_DATA, "conll2003", "eng.testb")
EDGES = [0.0, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 1.0]
# (objective, temperatures); the first is `allennlp calibrate`'s default.
VARIANTS = [("span", 1), ("span", 2), ("sequence", 1), ("sequence", 2)]
COLUMNS = ["model", "archive", "T: span 1 / 2; sequence 1 / 2", "dev ECE before / span 1 / 2 / sequence 1 / 2"]
COLUMNS += ["test F1 (all the same)", "test ECE before / span 1 / 2 / sequence 1 / 2"]
COLUMNS += ["test ECE fixed bins before / span 1", "test Brier before / span 1", "test P@80% before / span 1"]
COLUMNS += ["test P@90% before / span 1", "test ECE, span T fitted on test (oracle)"]


def scores(archive_file: str, data_file: str, overrides: str) -> Dict[str, Any]:
    """Span F1 and the calibration figures of an archive's spans on `data_file`."""
    evaluation = evaluate_archive(archive_file, data_file, overrides=overrides).evaluation
    confidences, correct = evaluation.confidences, evaluation.correct
    bins = span_calibration.fixed_bins(confidences, EDGES)
    return {
        "f1": evaluation.metrics.get("f1-measure-overall"),
        "ece": span_calibration.expected_calibration_error(confidences, correct),
        "ece_fixed": span_calibration.calibration_error(confidences, correct, bins),
        "brier": evaluation.metrics.get("span_brier"),
        "precision_at_80": span_calibration.precision_at_coverage(confidences, correct, 0.8),
        "precision_at_90": span_calibration.precision_at_coverage(confidences, correct, 0.9),
        "mean_confidence": float(confidences.mean()),
        "precision": float(correct.mean()),
        "spans": len(confidences),
    }


def oracle_ece(archive_file: str, test: str, overrides: str) -> float:
    """ECE on test after one temperature fitted on test itself (span objective where there are spans)."""
    measured = evaluate_archive(archive_file, test, overrides=overrides)
    for name, module in measured.modules.items():
        site = module.calibration_site(name)
        batches = measured.evaluation.batches[name]
        objective = "span" if has_spans(site, batches) else "sequence"
        site.set_temperatures(fit_temperatures(site, batches, 1, objective).temperatures)
    evaluation = evaluate(measured.archive.model, measured.loader, measured.modules)
    return span_calibration.expected_calibration_error(evaluation.confidences, evaluation.correct)


def run_one(name: str, archive_file: str, overrides: str, args) -> Dict[str, Any]:
    print(f"=== {name}: {archive_file}", flush=True)
    variants: Dict[str, Dict[str, Any]] = {}
    options = {"archive_file": archive_file, "input_file": args.dev, "overrides": overrides}
    for objective, count in VARIANTS:
        key = f"{objective} {count}"
        output_file = os.path.join(args.output_dir, f"{name.replace(':', '-')}.{objective}{count}.tar.gz")
        chosen = {"output_file": output_file, "temperatures": count, "objective": objective}
        report = calibrate(argparse.Namespace(**options, **chosen, batch_size=64, cuda_device=-1))
        variants[key] = {name: report[name] for name in ("temperatures", "objectives")}
        variants[key].update(dev=report["after"], test=scores(output_file, args.test, ""))
        print(f"  {key}: {report['temperatures']} test ECE {variants[key]['test']['ece']:.4f}", flush=True)
    result = {"name": name, "archive": archive_file, "dev_before": report["before"]}
    result.update(test_before=scores(archive_file, args.test, overrides), variants=variants)
    return dict(result, test_oracle_ece=oracle_ece(archive_file, args.test, overrides))


def row(result: Dict[str, Any]) -> Dict[str, str]:
    model, _, seed = result["name"].partition(":")
    variants = [result["variants"][f"{objective} {count}"] for objective, count in VARIANTS]
    before, default = result["test_before"], variants[0]["test"]

    def temperatures(variant: Dict[str, Any]) -> str:
        values = list(dict.fromkeys(variant["temperatures"].values()))  # one value when all keys share it
        return ",".join(f"{value:.2f}" for value in values)

    def slashed(values: List[float]) -> str:
        return " / ".join(f"{value:.4f}" for value in values)

    f1s = {round(variant["test"]["f1"], 12) for variant in variants} | {round(before["f1"], 12)}
    cells = [
        model,
        f"{harness.display_path(result['archive'])} (seed {seed})",
        "; ".join(" / ".join(map(temperatures, pair)) for pair in (variants[:2], variants[2:])),
        slashed([result["dev_before"]["span_ece"], *(variant["dev"]["span_ece"] for variant in variants)]),
        f"{100 * before['f1']:.2f}" + ("" if len(f1s) == 1 else " (CHANGED)"),
        slashed([before["ece"], *(variant["test"]["ece"] for variant in variants)]),
        *(slashed([before[key], default[key]]) for key in ("ece_fixed", "brier", "precision_at_80", "precision_at_90")),
        f"{result['test_oracle_ece']:.4f}",
    ]
    return dict(zip(COLUMNS, cells))


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].strip())
    parser.add_argument("--archive", action="append", default=[], metavar="MODEL:SEED=PATH", required=True)
    parser.add_argument("--overrides", action="append", default=[], metavar="MODEL:SEED=JSON")
    parser.add_argument("--dev", default=DEFAULT_DEV)
    parser.add_argument("--test", default=DEFAULT_TEST)
    parser.add_argument("--output-dir", default=None, help="the calibrated archives (default runs/calibration/TIME)")
    parser.add_argument("--record", metavar="TABLE", default=None)
    args = parser.parse_args(argv)
    started = datetime.datetime.now()
    args.output_dir = args.output_dir or os.path.join(harness.REPO_ROOT, f"runs/calibration/{started:%Y%m%d-%H%M%S}")
    os.makedirs(args.output_dir, exist_ok=True)
    overrides = harness.named(parser, args.overrides, "--overrides")
    archives = harness.named(parser, args.archive, "--archive")
    measured = [run_one(name, path, overrides.get(name, ""), args) for name, path in archives.items()]
    rows = [row(result) for result in measured]
    harness.write_json(os.path.join(args.output_dir, "results.json"), measured)
    print(results.markdown_row(COLUMNS))
    for cells in rows:
        print(results.markdown_row([cells[column] for column in COLUMNS]))
    if args.record:
        note = (
            f"- {started:%Y-%m-%d %H:%M}: `{harness.command_line(__file__, argv)}`; dev "
            f"`{harness.display_path(args.dev)}`, test `{harness.display_path(args.test)}`. Machine: "
            f"{harness.machine_description()}. Wall time {datetime.datetime.now() - started}."
        )
        record = {"started": f"{started:%Y-%m-%d %H:%M}", "columns": COLUMNS, "rows": rows, "results": measured}
        results.append_run(results.DEFAULT_RESULTS, args.record, dict(record, note=note))


if __name__ == "__main__":
    main()
