"""
Speed of the level-batched `ChildSumTreeLstm` against the node-by-node reference
(`tests/modules/tree_lstm_reference.py`, the tests' slow obvious form), same weights, same run.

    .venv/bin/python benchmarks/speed/tree_lstm_speed.py [--batch-size 32] [--input-dim 100] [--hidden-dim 100]
        [--repeats 5] [--threads 1] [--data ../shared/data/ud_english_ewt/r2.9/en_ewt-ud-dev.conllu]

Sample: the first `--batch-size` sentences of `--data` with at least `--min-tokens` (default 5) basic
tokens and their gold trees (CoNLL-U `HEAD`); random float32 inputs (`--seed`), one layer.  Each
timing is forward + backward, median over `--repeats` runs after `--warmup` runs; the script checks
that both give the same outputs and gradients and ends with `speedup: <reference / batched>x`.  It
also counts the reads of tensor data from the device (what makes a GPU wait for the host) in one
forward and backward pass of the batched module, on the meta device, where every such read fails.
"""

import argparse
import copy
import os
import statistics
import sys
import time
from typing import List, Tuple

import torch

from nerzoo.modules.seq2seq_encoders import child_sum_tree_lstm
from nerzoo.modules.seq2seq_encoders.child_sum_tree_lstm import ChildSumTreeLstm

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO_ROOT)  # the reference lives with the tests
from tests.modules.tree_lstm_reference import reference_tree_lstm  # noqa: E402

DEFAULT_DATA = os.path.join(REPO_ROOT, "..", "shared", "data", "ud_english_ewt", "r2.9", "en_ewt-ud-dev.conllu")


def read_heads(path: str, count: int, min_tokens: int) -> List[List[int]]:
    """The HEAD column of the first `count` sentences with at least `min_tokens` basic tokens."""
    with open(path, encoding="utf-8") as conllu:
        blocks = conllu.read().split("\n\n")
    sentences = []
    for block in blocks:
        rows = [line.split("\t") for line in block.splitlines() if line and not line.startswith("#")]
        heads = [int(row[6]) for row in rows if row[0].isdigit()]  # not `1-2` ranges or `1.1` empty nodes
        if len(heads) >= min_tokens:
            sentences.append(heads)
    if len(sentences) < count:
        raise ValueError(f"{path} has only {len(sentences)} sentences with >= {min_tokens} tokens.")
    return sentences[:count]


def tree_height(heads: List[int]) -> int:
    """Longest path from a root down to a token (a single token has height 0)."""
    deepest = 0
    for token in range(1, len(heads) + 1):
        depth = 0
        while heads[token - 1] != 0:
            token = heads[token - 1]
            depth += 1
        deepest = max(deepest, depth)
    return deepest


def batch(sentences: List[List[int]]) -> Tuple[torch.Tensor, torch.Tensor]:
    max_length = max(len(heads) for heads in sentences)
    head_indices = torch.zeros(len(sentences), max_length, dtype=torch.long)
    mask = torch.zeros(len(sentences), max_length, dtype=torch.bool)
    for row, heads in enumerate(sentences):
        head_indices[row, : len(heads)] = torch.tensor(heads)
        mask[row, : len(heads)] = True
    return mask, head_indices


def time_runs(run, module: torch.nn.Module, warmup: int, repeats: int) -> Tuple[List[float], tuple]:
    timings = []
    result = None
    for index in range(warmup + repeats):
        module.zero_grad(set_to_none=True)
        started = time.perf_counter()
        states, root = run()
        (states.sum() + root.sum()).backward()
        elapsed = time.perf_counter() - started
        if index >= warmup:
            timings.append(elapsed)
        result = (states.detach(), root.detach(), [p.grad.clone() for p in module.parameters()])
    return timings, result


def device_reads(module: ChildSumTreeLstm, inputs: torch.Tensor, mask: torch.Tensor, head_indices: torch.Tensor) -> str:
    """
    Reads of tensor data from the device in one forward and backward pass of `module`, counted on
    the meta device (see the module docstring): "<n>", or the error of the first uncounted read.
    """
    copies = []
    copy_to_host = child_sum_tree_lstm._copy_to_host

    def answered(tensor: torch.Tensor) -> torch.Tensor:
        copies.append(tuple(tensor.shape))
        return torch.stack([mask.long(), head_indices.long()])

    on_meta = copy.deepcopy(module).to("meta")
    child_sum_tree_lstm._copy_to_host = answered
    try:
        states, root = on_meta.encode(inputs.to("meta"), mask.to("meta"), head_indices.to("meta"))
        (states.sum() + root.sum()).backward()
    except (RuntimeError, NotImplementedError) as error:
        return f"more than {len(copies)}: {type(error).__name__}: {str(error).splitlines()[0]}"
    finally:
        child_sum_tree_lstm._copy_to_host = copy_to_host
    return str(len(copies))


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
    mask, head_indices = batch(sentences)
    inputs = torch.randn(mask.shape[0], mask.shape[1], args.input_dim)
    module = ChildSumTreeLstm(args.input_dim, args.hidden_dim).eval()

    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, float32, device cpu")
    print(f"data {args.data}: first {len(sentences)} sentences with >= {args.min_tokens} tokens")
    print(
        f"sentences {len(sentences)}, tokens {int(mask.sum())}, longest {mask.shape[1]}, "
        f"max tree height {max(tree_height(heads) for heads in sentences)}"
    )
    print(f"input_dim {args.input_dim}, hidden_dim {args.hidden_dim}, warmup {args.warmup}, repeats {args.repeats}")
    print(
        f"level-batched: reads from the device per forward + backward: {device_reads(module, inputs, mask, head_indices)}"
    )

    batched_times, batched = time_runs(
        lambda: module.encode(inputs, mask, head_indices), module, args.warmup, args.repeats
    )
    reference_times, reference = time_runs(
        lambda: reference_tree_lstm(module, inputs, mask, head_indices), module, args.warmup, args.repeats
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
