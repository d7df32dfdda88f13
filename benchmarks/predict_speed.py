#!/usr/bin/env python
"""
Prediction speed of a model archive on the sentences of a CoNLL column file, through the archive's
`sequence_tagger` predictor on the CPU.

    .venv/bin/python benchmarks/predict_speed.py ARCHIVE DATA_FILE [--batch-size 64] [--threads N]
        [--versus OTHER_ARCHIVE [--passes P]] [--include-package nerzoo]

The sentences are the maximal runs of non-blank lines of DATA_FILE (`-DOCSTART-` lines skipped, as
nerzoo's `conll_columns` reads them); the first column of each line is the word, the gold
tags are not read.  Each sentence becomes a pre-tokenised input `{"tokens": [...]}`.  After loading
the archive (`Predictor.from_path(ARCHIVE, "sequence_tagger")`, CPU) and three untimed warm-up batches,
`predict_batch_json` is timed over all sentences, in batches of `--batch-size`, once; the time
covers building the instances, the model and the formatting of the predictor's output.  The last
line of the output is one JSON object:

    {"sentences": N, "seconds": S, "sentences_per_second": R, "cpu_seconds": C, "threads": K}

`cpu_seconds` is the process's CPU time over the same pass (all threads).  On a machine shared with
other jobs the wall time of a model with many small operations suffers more than that of one with a
few large ones; `--threads 1` and `cpu_seconds` then compare two models more steadily.

`--versus OTHER_ARCHIVE` loads a second archive into the same process and times both over the same
batches, alternating them batch by batch (which one goes first alternates too) for `--passes`
passes (default 1), so that both see the same load; the JSON line then also has `versus` (the
other archive's figures) and `ratio` (this archive's sentences/s over the other's, by wall time)
and `cpu_ratio` (by CPU time).

Used by suite_benchmark.py for suites with `predict_speed` (one subprocess per archive, its output
in `<model>.predict_speed.log`); a model whose config reads environment variables (the FOFE-NER
second pass: FOFE_FIRST_PASS) needs them set here too.  Torch keeps its default number of threads.
"""

import argparse
import json
import os
import sys
import time
from typing import List, Optional

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

DEFAULT_BATCH_SIZE = 64


def read_sentences(path: str) -> List[List[str]]:
    """The words (first column) of each sentence of a CoNLL column file, read by nerzoo's `conll_columns`."""
    from nerzoo.data.dataset_readers.conll_columns import ConllColumnsReader

    documents = ConllColumnsReader(file_tag_scheme=None).read_documents(path)
    return [[row[0] for row in rows] for _, sentences in documents for _, _, rows in sentences]


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Time batched prediction of the sentences of a CoNLL file with a model archive's "
        "sequence_tagger predictor (CPU); print one JSON line."
    )
    parser.add_argument("archive", help="model.tar.gz")
    parser.add_argument("data_file", help="CoNLL column file (first column: the words)")
    parser.add_argument("--batch-size", type=int, default=DEFAULT_BATCH_SIZE, help=f"default {DEFAULT_BATCH_SIZE}")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's default)")
    parser.add_argument("--versus", default=None, help="a second archive, timed batch by batch alternately")
    parser.add_argument("--passes", type=int, default=1, help="passes over the data with --versus (default 1)")
    parser.add_argument(
        "--include-package", action="append", default=None, help="package to import first (default nerzoo; repeatable)"
    )
    return parser.parse_args(argv)


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    if args.batch_size < 1:
        print("error: --batch-size must be at least 1", file=sys.stderr)
        return 2
    if args.threads is not None and args.threads < 1:
        print("error: --threads must be at least 1", file=sys.stderr)
        return 2
    if args.passes < 1:
        print("error: --passes must be at least 1", file=sys.stderr)
        return 2
    for path in (args.archive, args.data_file) + ((args.versus,) if args.versus else ()):
        if not os.path.exists(path):
            print(f"error: {path} does not exist", file=sys.stderr)
            return 2
    sentences = read_sentences(args.data_file)
    if not sentences:
        print(f"error: no sentences in {args.data_file}", file=sys.stderr)
        return 2

    import torch
    from allennlp.common.util import import_module_and_submodules
    from allennlp.predictors import Predictor

    if args.threads is not None:
        torch.set_num_threads(args.threads)

    for package in args.include_package or ["nerzoo"]:
        import_module_and_submodules(package)
    predictors = [Predictor.from_path(os.path.abspath(args.archive), "sequence_tagger", cuda_device=-1)]
    if args.versus:
        predictors.append(Predictor.from_path(os.path.abspath(args.versus), "sequence_tagger", cuda_device=-1))

    inputs = [{"tokens": words} for words in sentences]
    batches = [inputs[start : start + args.batch_size] for start in range(0, len(inputs), args.batch_size)]
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
