#!/usr/bin/env python
"""
What the span calibration metric (`span_ece`, `span_brier`) costs a CRF tagger during validation:
evaluation passes with the head's `calibration_metrics` off and on, alternated `--repeats` times, the
medians' difference against the mean epoch time in the `metrics.json` beside the archive.

    .venv/bin/python benchmarks/speed/calibration_metric_cost.py \\
        runs/converged/bilstm_crf-conll2003-1/model/model.tar.gz ../shared/data/conll2003/eng.testa
"""

import argparse
import json
import os
import statistics
import sys

import torch
from allennlp.models.archival import load_archive

from nerzoo.commands.calibrate import data_loader

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # benchmarks/: harness
import harness  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].strip())
    parser.add_argument("archive_file")
    parser.add_argument("data_file")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--overrides", default="")
    args = parser.parse_args()
    archive = load_archive(args.archive_file, overrides=args.overrides)
    model = archive.model.eval()
    batches = list(data_loader(archive, args.data_file, 64))

    def evaluate(flag: bool) -> None:
        model.head.calibration_metrics = flag
        with torch.no_grad():
            for batch in batches:
                model(**batch)
        model.get_metrics(reset=True)

    seconds, _ = harness.timed_passes({False: lambda: evaluate(False), True: lambda: evaluate(True)}, args.repeats)
    off, on = statistics.median(seconds[False]), statistics.median(seconds[True])
    metrics = harness.read_json(os.path.join(os.path.dirname(os.path.abspath(args.archive_file)), "metrics.json"))
    epoch = harness.parse_duration(metrics["training_duration"]) / (metrics["epoch"] + 1)
    print(
        json.dumps(
            {
                "validation_seconds_without": round(off, 3),
                "validation_seconds_with": round(on, 3),
                "added_seconds": round(on - off, 3),
                "mean_epoch_seconds": round(epoch, 1),
                "added_share_of_epoch": round((on - off) / epoch, 4),
                "torch_threads": torch.get_num_threads(),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
