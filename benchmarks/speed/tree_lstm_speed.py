"""
Speed of the level-batched `ChildSumTreeLstm` against the node-by-node reference
(`tests/modules/tree_lstm_reference.py`, the tests' slow obvious form), same weights, same run.

    .venv/bin/python benchmarks/speed/tree_lstm_speed.py [--batch-size 32] [--input-dim 100] [--hidden-dim 100]
        [--repeats 5] [--threads 1] [--data ../shared/data/ud_english_ewt/r2.9/en_ewt-ud-dev.conllu]

The gold trees of the first sentences of `--data` with `--min-tokens` tokens, random inputs.  Forward
+ backward, the median of `--repeats` runs after `--warmup`; checks that both give the same outputs and
gradients and ends with `speedup: <reference / batched>x`.
"""

import argparse
import os
import statistics
import sys
import time
from typing import List, Tuple

import torch

from nerzoo.modules.seq2seq_encoders.child_sum_tree_lstm import ChildSumTreeLstm

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import harness  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from tests.modules.tree_lstm_reference import reference_tree_lstm  # noqa: E402

DEFAULT_DATA = os.path.join(harness.SHARED_DATA, "ud_english_ewt", "r2.9", "en_ewt-ud-dev.conllu")


def read_heads(path: str, count: int, min_tokens: int) -> List[List[int]]:
    """The HEAD column of the first `count` sentences with at least `min_tokens` basic tokens."""
    sentences: List[List[int]] = [[]]
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            columns = line.rstrip("\n").split("\t")
            if not line.strip():
                sentences.append([])
            elif columns[0].isdigit():  # basic tokens only: not `1-2` ranges, `1.1` empty nodes or comments
                sentences[-1].append(int(columns[6]))
    sentences = [heads for heads in sentences if len(heads) >= min_tokens]
    if len(sentences) < count:
        raise ValueError(f"{path} has only {len(sentences)} sentences with >= {min_tokens} tokens.")
    return sentences[:count]


def time_runs(run, module: torch.nn.Module, args) -> Tuple[List[float], tuple]:
    """Seconds of forward + backward of `--repeats` runs after `--warmup`; the last one's outputs and gradients."""
    timings = []
    for _ in range(args.warmup + args.repeats):
        module.zero_grad(set_to_none=True)
        started = time.perf_counter()
        states, root = run()
        (states.sum() + root.sum()).backward()
        timings.append(time.perf_counter() - started)
    return timings[args.warmup :], (states.detach(), root.detach(), [p.grad.clone() for p in module.parameters()])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=DEFAULT_DATA)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--min-tokens", type=int, default=5)
    parser.add_argument("--input-dim", type=int, default=100)
    parser.add_argument("--hidden-dim", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    sentences = read_heads(args.data, args.batch_size, args.min_tokens)
    head_indices, mask = harness.padded(sentences)
    inputs = torch.randn(mask.shape[0], mask.shape[1], args.input_dim)
    module = ChildSumTreeLstm(args.input_dim, args.hidden_dim).eval()

    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, float32, device cpu")
    print(f"data {args.data}: first {len(sentences)} sentences with >= {args.min_tokens} tokens")
    print(f"sentences {len(sentences)}, tokens {int(mask.sum())}, longest {mask.shape[1]}")
    print(f"input_dim {args.input_dim}, hidden_dim {args.hidden_dim}, warmup {args.warmup}, repeats {args.repeats}")

    batched_times, batched = time_runs(lambda: module.encode(inputs, mask, head_indices), module, args)
    reference_times, reference = time_runs(
        lambda: reference_tree_lstm(module, inputs, mask, head_indices), module, args
    )
    same = (
        torch.allclose(batched[0], reference[0], atol=1e-5)
        and torch.allclose(batched[1], reference[1], atol=1e-5)
        and all(torch.allclose(a, b, atol=1e-4) for a, b in zip(batched[2], reference[2]))
    )
    print(f"outputs and gradients allclose: {same}")
    if not same:
        raise SystemExit("the batched module and the reference disagree")
    for name, times in (("level-batched", batched_times), ("reference", reference_times)):
        runs = ", ".join(f"{t * 1000:.1f}" for t in times)
        print(f"{name}: median {statistics.median(times) * 1000:.2f} ms (forward + backward; runs {runs} ms)")
    speedup = statistics.median(reference_times) / statistics.median(batched_times)
    print(f"speedup: {speedup:.1f}x")


if __name__ == "__main__":
    main()
