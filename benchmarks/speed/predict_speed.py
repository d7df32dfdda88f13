#!/usr/bin/env python
"""
Prediction speed of a model archive on the sentences of a CoNLL column file, through the archive's
`sequence_tagger` predictor on the CPU, alone or against a second archive in the same process.

    .venv/bin/python benchmarks/speed/predict_speed.py ARCHIVE DATA_FILE [--batch-size 64] [--threads N]
        [--versus OTHER_ARCHIVE [--passes P]] [--include-package nerzoo]

After three warm-up batches, `predict_batch_json` over every sentence's words.  The last line is one
JSON object (`sentences`, `seconds`, `sentences_per_second`, `cpu_seconds`, `threads`); with
`--versus` the archives alternate batch by batch and it adds `versus`, `ratio` and `cpu_ratio`.
"""

import argparse
import json
import os
import sys
import time
from typing import List, Optional

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import harness  # noqa: E402


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].strip())
    parser.add_argument("archive", help="model.tar.gz")
    parser.add_argument("data_file", help="CoNLL column file (first column: the words)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's default)")
    parser.add_argument("--versus", default=None, help="a second archive, timed batch by batch alternately")
    parser.add_argument("--passes", type=int, default=1, help="passes over the data with --versus (default 1)")
    parser.add_argument("--include-package", action="append", default=None, help="default nerzoo; repeatable")
    args = parser.parse_args(argv)
    for path in (args.archive, args.data_file) + ((args.versus,) if args.versus else ()):
        if not os.path.exists(path):
            parser.error(f"{path} does not exist")
    sentences = harness.read_sentences(args.data_file)

    import torch
    from allennlp.common.util import import_module_and_submodules
    from allennlp.predictors import Predictor

    harness.set_threads(args.threads)
    for package in args.include_package or ["nerzoo"]:
        import_module_and_submodules(package)
    archives = [args.archive] + ([args.versus] if args.versus else [])
    predictors = [Predictor.from_path(os.path.abspath(path), "sequence_tagger", cuda_device=-1) for path in archives]
    batches = harness.batches([{"tokens": words} for words in sentences], args.batch_size)
    for predictor in predictors:
        for batch in batches[:3]:  # warm-up (first calls allocate and pick kernels), not timed
            predictor.predict_batch_json(batch)
    seconds, cpu_seconds, predicted = [0.0] * len(predictors), [0.0] * len(predictors), [0] * len(predictors)
    step = 0
    for _ in range(args.passes if args.versus else 1):
        for batch in batches:
            order = range(len(predictors)) if step % 2 == 0 else reversed(range(len(predictors)))
            step += 1
            for index in order:
                start, cpu_start = time.perf_counter(), time.process_time()
                predicted[index] += len(predictors[index].predict_batch_json(batch))
                seconds[index] += time.perf_counter() - start
                cpu_seconds[index] += time.process_time() - cpu_start
    timings = [
        {
            "sentences": predicted[index],
            "seconds": seconds[index],
            "sentences_per_second": predicted[index] / seconds[index],
            "cpu_seconds": cpu_seconds[index],
            "threads": torch.get_num_threads(),
        }
        for index in range(len(predictors))
    ]
    timing = timings[0]
    if args.versus:
        timing = dict(
            timing,
            passes=args.passes,
            versus=dict(timings[1], archive=args.versus),
            ratio=timings[0]["sentences_per_second"] / timings[1]["sentences_per_second"],
            cpu_ratio=timings[1]["cpu_seconds"] / timings[0]["cpu_seconds"],
        )
    print(json.dumps(timing), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
