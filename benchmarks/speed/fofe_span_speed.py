"""
Speed of the FOFE-NER word features of every candidate fragment, computed in prefix form
(`nerzoo/modules/fofe.py`) against recomputing each fragment's codes from scratch, same run.

    .venv/bin/python benchmarks/speed/fofe_span_speed.py [--sentences 2000] [--max-width 7] [--dim 64]
        [--batch-size 32] [--alpha 0.5] [--threads N] [--data ../shared/data/conll2003/eng.train]

The first `--sentences` sentences of `--data`, words embedded by a random float32 table (`--seed`).
For every fragment `x_i .. x_{j-1}` of at most `--max-width` words, seven codes (Xu 2017, §5.2.1-5.2.2):
its bag of words, the left context with and without it, the right context with and without it, and
the fragment's own codes left to right and right to left, `7 * --dim` numbers per fragment.  A
(nerzoo): per batch of `--batch-size` sentences, `prefix_codes` three times (left to right, right to
left, alpha = 1 for the bags of words), then `span_codes` and gathers for all fragments at once.  B
(reference): each code of each fragment as one weighted sum over its own slice.  The script checks
that A and B agree, times A three times (the best counts) and B once, and ends with `speedup: <B / A>x`.
Run it on an idle machine (the load average is printed): torch's threads in A wait on each other
when another process is busy on the cores.
"""

import argparse
import itertools
import os
import time
from typing import List, Tuple

import torch

from nerzoo.data.dataset_readers.conll_columns import ConllColumnsReader
from nerzoo.modules.fofe import prefix_codes, span_codes

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_DATA = os.path.join(REPO_ROOT, "..", "shared", "data", "conll2003", "eng.train")
NUM_FEATURES = 7

Span = Tuple[int, int]
# A batch for A: inputs (batch, T, dim), mask (batch, T), and the fragments' starts and ends as
# positions in the flattened prefix codes (batch * (T + 1) rows), `(1, fragments in the batch)`.
PreparedBatch = Tuple[torch.Tensor, torch.BoolTensor, torch.LongTensor, torch.LongTensor]


def read_sentences(path: str, count: int) -> List[List[str]]:
    """The word column of the first `count` sentences of a CoNLL-2003 file, read by nerzoo's `conll_columns`."""
    documents = ConllColumnsReader(file_tag_scheme=None).read_documents(path)
    words = ([row[0] for row in rows] for _, sentences in documents for _, _, rows in sentences)
    sentences = list(itertools.islice(words, count))
    if len(sentences) < count:
        raise ValueError(f"{path} has only {len(sentences)} sentences.")
    return sentences


def fragments(length: int, max_width: int) -> List[Span]:
    """Every `(i, j)`, `j` exclusive, with `1 <= j - i <= max_width`, by start then width."""
    return [(i, j) for i in range(length) for j in range(i + 1, min(i + max_width, length) + 1)]


def prepare_batches(embedded: List[torch.Tensor], spans: List[List[Span]], batch_size: int) -> List[PreparedBatch]:
    """
    Pads each batch of sentences and lists its fragments as positions in the flattened prefix
    codes: row `b`'s position `t` is `b * (T + 1) + t`, so one gather serves the whole batch and
    no padding fragments are computed.
    """
    batches = []
    for first in range(0, len(embedded), batch_size):
        sentences = embedded[first : first + batch_size]
        longest = max(x.size(0) for x in sentences)
        inputs = torch.zeros(len(sentences), longest, sentences[0].size(1))
        mask = torch.zeros(len(sentences), longest, dtype=torch.bool)
        starts: List[int] = []
        ends: List[int] = []
        for row, (x, row_spans) in enumerate(zip(sentences, spans[first : first + batch_size])):
            inputs[row, : x.size(0)] = x
            mask[row, : x.size(0)] = True
            offset = row * (longest + 1)
            starts.extend(offset + i for i, _ in row_spans)
            ends.extend(offset + j for _, j in row_spans)
        batches.append((inputs, mask, torch.tensor([starts]), torch.tensor([ends])))
    return batches


def at(prefix: torch.Tensor, positions: torch.LongTensor) -> torch.Tensor:
    """`prefix[0, positions[0, k]]`, the codes at the given flat positions: `(num_spans, dim)`."""
    return prefix[0].index_select(0, positions[0])


def method_a(batches: List[PreparedBatch], alpha: float, num_spans: int) -> torch.Tensor:
    """Prefix form, batched: `(num_fragments, 7 * dim)` in sentence, then fragment order."""
    dim = batches[0][0].size(-1)
    output = torch.empty(num_spans, NUM_FEATURES * dim)
    filled = 0
    for inputs, mask, starts, ends in batches:
        # (batch, T + 1, dim) codes, viewed as one row of batch * (T + 1) positions.
        left = prefix_codes(inputs, mask, alpha).reshape(1, -1, dim)  # P[t]: code of x_0 .. x_{t-1}
        right = prefix_codes(inputs, mask, alpha, reverse=True).reshape(1, -1, dim)  # Q[t]: x_t .. x_{n-1}
        sums = prefix_codes(inputs, mask, 1.0).reshape(1, -1, dim)  # prefix sums
        count = starts.size(1)
        torch.cat(
            [
                span_codes(sums, starts, ends, 1.0)[0],  # bag of words
                at(left, ends),  # left context incl.
                at(left, starts),  # left context excl.
                at(right, starts),  # right context incl.
                at(right, ends),  # right context excl.
                span_codes(left, starts, ends, alpha)[0],  # fragment, left to right
                span_codes(right, starts, ends, alpha, reverse=True)[0],  # fragment, right to left
            ],
            dim=-1,
            out=output[filled : filled + count],
        )
        filled += count
    return output


def method_b(embedded: List[torch.Tensor], spans: List[List[Span]], alpha: float) -> torch.Tensor:
    """Each fragment's seven codes from their own slices, one weighted sum each."""
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
            rows.append(
                torch.cat(
                    [
                        ones[: j - i] @ x[i:j],
                        left_to_right(x[:j]),
                        left_to_right(x[:i]),
                        right_to_left(x[i:]),
                        right_to_left(x[j:]),
                        left_to_right(x[i:j]),
                        right_to_left(x[i:j]),
                    ]
                )
            )
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

    if args.threads is not None:
        torch.set_num_threads(args.threads)

    torch.manual_seed(args.seed)
    sentences = read_sentences(args.data, args.sentences)
    vocabulary = {word: index for index, word in enumerate(sorted({w for words in sentences for w in words}))}
    table = torch.randn(len(vocabulary), args.dim)
    embedded = [table[torch.tensor([vocabulary[w] for w in words])] for words in sentences]
    spans = [fragments(len(words), args.max_width) for words in sentences]
    num_spans = sum(len(s) for s in spans)
    batches = prepare_batches(embedded, spans, args.batch_size)

    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, float32, device cpu, load average {load}")
    print(
        f"data {os.path.relpath(args.data, REPO_ROOT)}: first {len(sentences)} sentences, "
        f"{sum(len(w) for w in sentences)} tokens, longest {max(len(w) for w in sentences)}, "
        f"{len(vocabulary)} distinct words"
    )
    print(
        f"fragments of <= {args.max_width} words: {num_spans}; dim {args.dim}, alpha {args.alpha}, "
        f"batch size {args.batch_size} ({len(batches)} batches), {NUM_FEATURES} codes per fragment"
    )

    with torch.no_grad():
        method_a(batches, args.alpha, num_spans)  # warm-up
        a_times = []
        for _ in range(3):
            started = time.perf_counter()
            features_a = method_a(batches, args.alpha, num_spans)
            a_times.append(time.perf_counter() - started)
        method_b(embedded[:50], spans[:50], args.alpha)  # warm-up
        started = time.perf_counter()
        features_b = method_b(embedded, spans, args.alpha)
        b_time = time.perf_counter() - started

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
