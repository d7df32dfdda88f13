#!/usr/bin/env python
"""
Where the span confidences of a CRF tagger are over-confident: its predicted spans on DATA_FILE
split by whether every word of the span occurs in TRAIN_FILE ("seen") or not ("unseen"), with the
count, mean confidence and precision (spans exactly right) of each group, as one JSON object.

    .venv/bin/python benchmarks/calibration_seen_words.py CALIBRATED.tar.gz \\
        ../shared/data/conll2003/eng.testb ../shared/data/conll2003/eng.train
"""

import argparse
import json
import sys

import torch
from allennlp.models.archival import load_archive

from nerzoo.commands.calibrate import data_loader
from nerzoo.data.dataset_readers.conll_columns import ConllColumnsReader
from nerzoo.modules.tag_decoder import TagDecoder


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].strip())
    parser.add_argument("archive_file")
    parser.add_argument("data_file")
    parser.add_argument("train_file")
    parser.add_argument("--overrides", default="")
    args = parser.parse_args()
    documents = ConllColumnsReader(file_tag_scheme=None).read_documents(args.train_file)
    seen = {row[0] for _, sentences in documents for _, _, rows in sentences for row in rows}
    archive = load_archive(args.archive_file, overrides=args.overrides)
    model, head = archive.model, archive.model.head
    model.eval()
    groups = {"seen": [], "unseen": []}
    with torch.no_grad():
        for batch in data_loader(archive, args.data_file, 64):
            output = model(**batch)
            mask, paths = output["mask"].bool(), output["paths"]
            starts = TagDecoder.sentence_starts(output["sentence_spans"], mask)
            predicted, _, right = head.decoder.match(paths, batch["tags"], mask, starts)
            posteriors = head.posteriors(output["logits"], mask, paths, output["sentence_spans"])
            log_confidences = posteriors.segment_log_probabilities(predicted.rows, predicted.starts, predicted.ends)
            for confidence, ok, row, start, end in zip(
                log_confidences.clamp_max(0.0).exp().tolist(),
                right.tolist(),
                predicted.rows.tolist(),
                predicted.starts.tolist(),
                predicted.ends.tolist(),
            ):
                words = output["words"][row][start:end]
                groups["seen" if all(word in seen for word in words) else "unseen"].append((confidence, ok))
    summary = {
        name: {
            "spans": len(pairs),
            "mean_confidence": round(sum(c for c, _ in pairs) / max(len(pairs), 1), 4),
            "precision": round(sum(ok for _, ok in pairs) / max(len(pairs), 1), 4),
        }
        for name, pairs in groups.items()
    }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
