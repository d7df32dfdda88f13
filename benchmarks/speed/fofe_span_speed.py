"""
Speed of the FOFE-NER word features of every candidate fragment, computed in prefix form
(`nerzoo/modules/fofe/codes.py`) against recomputing each fragment's codes from scratch, same run.

    .venv/bin/python benchmarks/speed/fofe_span_speed.py [--sentences 2000] [--max-width 7] [--dim 64]
        [--batch-size 32] [--alpha 0.5] [--threads N] [--data ../shared/data/conll2003/eng.train]

Words embedded by a random table; for every fragment of at most `--max-width` words, FOFE-NER's five
word codes (Xu 2017, 5.2.1-5.2.2).  A: the model's `word_codes` and `span_features` per batch.  B: each
code as one weighted sum over its own slice.  Checks that they agree, times A three times (the best
counts) and B once, and ends with `speedup: <B / A>x`.  Run it on an idle machine.
"""

import argparse
import os
import sys
from typing import List, Tuple

import torch

from nerzoo.modules.fofe.span_features import span_features, word_codes
from nerzoo.modules.fofe.spans import FlatSpans, enumerate_spans

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import harness  # noqa: E402

DEFAULT_DATA = os.path.join(harness.SHARED_DATA, "conll2003", "eng.train")
NUM_FEATURES = 5

Span = Tuple[int, int]


def fragments(length: int, max_width: int) -> List[Span]:
    """Every `(i, j)`, `j` exclusive, with `1 <= j - i <= max_width`, by start then width."""
    return [(i, j) for i in range(length) for j in range(i + 1, min(i + max_width, length) + 1)]


def method_a(embedded: List[torch.Tensor], alpha: float, max_width: int, batch_size: int) -> torch.Tensor:
    """FOFE-NER's own path (`word_codes`, `span_features`), batched: `(num_fragments, 5 * dim)`."""
    outputs = []
    for sentences in harness.batches(embedded, batch_size):
        inputs, mask = harness.padded(sentences)
        starts, ends, keep = enumerate_spans(mask, max_width)
        spans = FlatSpans.where(keep, starts, ends)
        outputs.append(span_features([word_codes(inputs, mask, alpha)], None, spans, alpha, alpha))
    return torch.cat(outputs)


def method_b(embedded: List[torch.Tensor], spans: List[List[Span]], alpha: float) -> torch.Tensor:
    """Each fragment's five codes from their own slices, one weighted sum each."""
    longest = max(x.size(0) for x in embedded)
    ascending = torch.pow(alpha, torch.arange(longest, dtype=torch.float64)).float()  # alpha^0 .. alpha^(L-1)
    descending = ascending.flip(0)  # alpha^(L-1) .. alpha^0
    ones = torch.ones(longest)

    def left_to_right(segment: torch.Tensor) -> torch.Tensor:  # sum_s alpha^(last - s) x_s
        return descending[longest - segment.size(0) :] @ segment

    def right_to_left(segment: torch.Tensor) -> torch.Tensor:  # sum_s alpha^(s - first) x_s
        return ascending[: segment.size(0)] @ segment

    rows = []
    for x, sentence_spans in zip(embedded, spans):
        for i, j in sentence_spans:
            codes = [ones[: j - i] @ x[i:j], left_to_right(x[:j]), left_to_right(x[:i])]
            rows.append(torch.cat(codes + [right_to_left(x[i:]), right_to_left(x[j:])]))
    return torch.stack(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=DEFAULT_DATA)
    parser.add_argument("--sentences", type=int, default=2000)
    parser.add_argument("--max-width", type=int, default=7)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--alpha", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's default)")
    args = parser.parse_args()
    harness.set_threads(args.threads)
    torch.manual_seed(args.seed)
    sentences = harness.read_sentences(args.data, args.sentences)
    vocabulary = {word: index for index, word in enumerate(sorted({w for words in sentences for w in words}))}
    table = torch.randn(len(vocabulary), args.dim)
    embedded = [table[torch.tensor([vocabulary[w] for w in words])] for words in sentences]
    spans = [fragments(len(words), args.max_width) for words in sentences]
    num_spans = sum(len(s) for s in spans)

    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, float32, device cpu, load average {load}")
    print(
        f"data {harness.display_path(args.data)}: first {len(sentences)} sentences, "
        f"{sum(len(w) for w in sentences)} tokens, longest {max(len(w) for w in sentences)}, "
        f"{len(vocabulary)} distinct words"
    )
    print(
        f"fragments of <= {args.max_width} words: {num_spans}; dim {args.dim}, alpha {args.alpha}, "
        f"batch size {args.batch_size}, {NUM_FEATURES} codes per fragment"
    )

    with torch.no_grad():
        method_a(embedded, args.alpha, args.max_width, args.batch_size)  # warm-up
        times, features = harness.timed_passes(
            {"A": lambda: method_a(embedded, args.alpha, args.max_width, args.batch_size)}, 3
        )
        method_b(embedded[:50], spans[:50], args.alpha)  # warm-up
        b_times, b_features = harness.timed_passes({"B": lambda: method_b(embedded, spans, args.alpha)}, 1)
    a_times, features_a, b_time, features_b = times["A"], features["A"], b_times["B"][0], b_features["B"]

    assert features_a.shape == features_b.shape == (num_spans, NUM_FEATURES * args.dim)
    difference = (features_a - features_b).abs().max().item()
    print(f"max abs difference A vs B: {difference:.2e}")
    if not difference < 1e-4:
        raise SystemExit("prefix form and reference disagree")
    a_time = min(a_times)
    runs = ", ".join(f"{t * 1000:.1f}" for t in a_times)
    print(
        f"A prefix form (batched): best {a_time * 1000:.1f} ms of 3 (runs {runs} ms), "
        f"{num_spans / a_time:,.0f} fragments/s"
    )
    print(f"B from scratch (per fragment): {b_time * 1000:.1f} ms, {num_spans / b_time:,.0f} fragments/s")
    print(f"speedup: {b_time / a_time:.1f}x")


if __name__ == "__main__":
    main()
