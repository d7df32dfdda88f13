#!/usr/bin/env python
"""
What a trained `char_gated` embedder does on a data file: the mean gate z, the share of gate
features near 0 or 1, the OOV share and the mean cos(x, m) between word and character vectors.

    .venv/bin/python benchmarks/char_gate_stats.py ARCHIVE "../shared/data/conll2000/train.txt?held_out=9"
"""

import argparse
import itertools

import torch
from allennlp.data import Batch
from allennlp.models.archival import load_archive

import nerzoo  # noqa: F401


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("archive")
    parser.add_argument("data_path")
    parser.add_argument("--sentences", type=int, default=None, help="only the first N sentences of the file")
    parser.add_argument("--batch-size", type=int, default=50)
    args = parser.parse_args()
    torch.set_num_threads(1)

    archive = load_archive(args.archive)
    model, reader = archive.model.eval(), archive.dataset_reader
    embedder = getattr(model.text_field_embedder, "token_embedder_tokens", None)
    if getattr(embedder, "_combination", None) != "gate":
        raise SystemExit(f"{args.archive}: its 'tokens' embedder is not a char_gated embedder with combination 'gate'")
    instances = list(itertools.islice(reader.read(args.data_path), args.sentences))
    gates, oov, cosines = [], [], []
    with torch.no_grad():
        for start in range(0, len(instances), args.batch_size):
            batch = Batch(instances[start : start + args.batch_size])
            batch.index_instances(model.vocab)
            tensors = batch.as_tensor_dict()["tokens"]["tokens"]
            ids = tensors["token_ids"]
            words = embedder._word_embedding(ids)
            characters = embedder.character_representation(tensors["token_characters"])
            _, gate = embedder.combine(words, characters)
            mask = ids != 0
            gates.append(gate[mask])
            oov.append((ids == embedder._oov_index)[mask])
            cosines.append(torch.nn.functional.cosine_similarity(words, characters, dim=-1)[mask])
    gate, is_oov, cosine = torch.cat(gates), torch.cat(oov), torch.cat(cosines)
    print(f"sentences {len(instances)}, tokens {len(gate)}, OOV tokens {int(is_oov.sum())}")
    print(
        f"mean z {gate.mean():.3f}; gate features > 0.9: {(gate > 0.9).float().mean():.3f}, < 0.1: {(gate < 0.1).float().mean():.3f}"
    )
    print(f"mean cos(x, m) {cosine.mean():.3f}")


if __name__ == "__main__":
    main()
