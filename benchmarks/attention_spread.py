#!/usr/bin/env python
"""
How far a trained deptree_ner archive's global-attention weights are from uniform.

    .venv/bin/python benchmarks/attention_spread.py ARCHIVE DATA_FILE [--sentences 400] [--min-words 5]

Over the first `--sentences` sentences of at least `--min-words` words, the mean of entropy(a) / log n
(1.000 when uniform) and of max_i a_i x n (1.00 when uniform, n when all the weight is on one word).
"""

import argparse
import itertools
import math
import sys

import numpy


def spread(weights: numpy.ndarray):
    """Normalised entropy and largest weight x n of one sentence's attention weights."""
    n = len(weights)
    entropy = -float(numpy.sum(weights * numpy.log(numpy.clip(weights, 1e-12, None))))
    return entropy / math.log(n), float(weights.max()) * n


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[1])
    parser.add_argument("archive")
    parser.add_argument("data_file")
    parser.add_argument("--sentences", type=int, default=400)
    parser.add_argument("--min-words", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()

    from allennlp.models.archival import load_archive

    import nerzoo  # noqa: F401

    archive = load_archive(args.archive)
    model = archive.model.eval()
    instances = list(itertools.islice(archive.dataset_reader.read(args.data_file), args.sentences))
    entropies, peaks = [], []
    for start in range(0, len(instances), args.batch_size):
        for output in model.forward_on_instances(instances[start : start + args.batch_size]):
            if "global_attention" not in output:
                print("this model has no global attention", file=sys.stderr)
                return 1
            weights = numpy.asarray(output["global_attention"], dtype=numpy.float64)[: len(output["words"])]
            if len(weights) >= args.min_words:
                entropy, peak = spread(weights)
                entropies.append(entropy)
                peaks.append(peak)
    print(f"sentences of {args.min_words}+ words: {len(entropies)}")
    print(f"entropy / log n: {numpy.mean(entropies):.3f}")
    print(f"max weight x n: {numpy.mean(peaks):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
