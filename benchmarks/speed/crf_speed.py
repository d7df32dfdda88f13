#!/usr/bin/env python
"""
The CRF head's per-batch work, nerzoo's batched code against allennlp's, in one run: Viterbi
(`LinearChainCrf.viterbi` vs `ConditionalRandomField.viterbi_tags`), the likelihood forward + backward
(`LinearChainCrf.log_likelihood` vs `ConditionalRandomField.forward`), and the training metrics
(`TagDecoder.update_metrics` vs `ConllSpanF1` on label lists and `CategoricalAccuracy`).

    .venv/bin/python benchmarks/speed/crf_speed.py [--data ../shared/data/conll2003/eng.train] [--batches 100]
        [--schedule steps|scan]

Batches of consecutive sentences' BIOUL tags, random logits, a constrained CRF.  The variants alternate
batch by batch; the medians of three passes are printed with `speedup` (allennlp / nerzoo).
"""

import argparse
import os
import statistics
import sys
import time
from typing import Callable, Dict, List

import torch
from allennlp.data import Vocabulary
from allennlp.training.metrics import CategoricalAccuracy

from nerzoo.data.dataset_readers.conll_columns import ConllColumnsReader
from nerzoo.modules.crf.linear_chain_crf import SCHEDULES, LinearChainCrf
from nerzoo.modules.crf.tag_decoder import TagDecoder
from nerzoo.training.metrics.conll_span_f1 import ConllSpanF1

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import harness  # noqa: E402

DEFAULT_DATA = os.path.join(harness.SHARED_DATA, "conll2003", "eng.train")


def read_tag_batches(path: str, batch_size: int, num_batches: int) -> List[List[List[str]]]:
    reader = ConllColumnsReader(tag_column=3, file_tag_scheme="IOB1", tag_scheme="BIOUL")
    sentences: List[List[str]] = []
    for instance in reader.read(path):
        sentences.append(list(instance["tags"].labels))
        if len(sentences) == batch_size * num_batches:
            break
    return [sentences[start : start + batch_size] for start in range(0, len(sentences), batch_size)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=DEFAULT_DATA)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--batches", type=int, default=100)
    parser.add_argument("--schedule", choices=SCHEDULES, default="auto", help="the CRF's schedule")
    args = parser.parse_args()

    batches = read_tag_batches(args.data, args.batch_size, args.batches)
    vocab = Vocabulary()
    vocab.add_tokens_to_namespace(
        sorted({tag for batch in batches for sentence in batch for tag in sentence}), "labels"
    )
    labels = vocab.get_index_to_token_vocabulary("labels")
    torch.manual_seed(0)
    crf = LinearChainCrf.for_labels(labels, "BIOUL", schedule=args.schedule)
    decoder = TagDecoder(vocab)
    span_f1 = ConllSpanF1.from_vocab(vocab)
    accuracy = CategoricalAccuracy()

    tensors = []
    for batch in batches:
        tags, mask = harness.padded([[vocab.get_token_index(tag, "labels") for tag in sentence] for sentence in batch])
        logits = torch.randn(len(batch), tags.size(1), len(labels)) * 2
        tensors.append((logits.requires_grad_(), mask, tags))

    def string_metrics(logits, mask, tags):
        paths = logits.argmax(-1) * mask
        lengths = mask.sum(1).tolist()
        one_hot = torch.zeros(*tags.shape, len(labels))
        for row, path in enumerate(paths.tolist()):
            one_hot[row, torch.arange(lengths[row]), torch.tensor(path[: lengths[row]])] = 1
        accuracy(one_hot, tags, mask)
        predicted = [[labels[tag] for tag in row[:length]] for row, length in zip(paths.tolist(), lengths)]
        gold = [[labels[tag] for tag in row[:length]] for row, length in zip(tags.tolist(), lengths)]
        span_f1(predicted, gold)

    variants: Dict[str, Dict[str, Callable]] = {
        "viterbi": {
            "allennlp": lambda logits, mask, tags: crf.viterbi_tags(logits, mask),
            "nerzoo": lambda logits, mask, tags: crf.viterbi(logits, mask).tags.tolist(),
        },
        "likelihood forward+backward": {
            "allennlp": lambda logits, mask, tags: (-crf(logits, tags, mask)).backward(),
            "nerzoo": lambda logits, mask, tags: (-crf.log_likelihood(logits, tags, mask).sum()).backward(),
        },
        "training metrics": {
            "allennlp": string_metrics,
            "nerzoo": lambda logits, mask, tags: decoder.update_metrics(logits.argmax(-1) * mask, tags, mask),
        },
    }
    sentences = sum(map(len, batches))
    print(f"{len(batches)} batches, {sentences} sentences of {os.path.relpath(args.data)}, {len(labels)} tags")
    for name, pair in variants.items():
        timings = {side: [] for side in pair}
        for _ in range(3):
            totals = dict.fromkeys(pair, 0.0)
            for logits, mask, tags in tensors:
                for side, function in pair.items():
                    start = time.perf_counter()
                    function(logits, mask, tags)
                    totals[side] += time.perf_counter() - start
            for side in pair:
                timings[side].append(totals[side])
        allennlp, nerzoo = statistics.median(timings["allennlp"]), statistics.median(timings["nerzoo"])
        print(
            f"{name}: allennlp {allennlp * 1000:.0f} ms, nerzoo {nerzoo * 1000:.0f} ms "
            f"({sentences / nerzoo:.0f} vs {sentences / allennlp:.0f} sentences/s), speedup {allennlp / nerzoo:.1f}x"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
