#!/usr/bin/env python
"""
Tagging speed of the `nerzoo_ner` spaCy component (`nlp.pipe`) against the archive's Predictor
(`predict_batch_json`, as `allennlp predict` runs it) in the same process, at the same batch size.

    .venv/bin/python benchmarks/speed/spacy_pipe.py [--data conll2003|fixtures] [--archive ARCHIVE]
        [--batch-size 64] [--passes 3] [--threads N]

Both get the same words (`Doc(vocab, words=...)`, `{"tokens": [...]}`) of CoNLL-2003 eng.testb or
fixtures/conll2003/test.txt, a warm-up batch, then `--passes` passes alternately, the best kept.
Prints sentences/s of each and the ratio (component / predictor), then one JSON object.
"""

import argparse
import json
import os
import sys
from typing import List, Optional

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import harness  # noqa: E402

DATA = {
    "conll2003": os.path.join(harness.SHARED_DATA, "conll2003", "eng.testb"),
    "fixtures": os.path.join(harness.REPO_ROOT, "fixtures", "conll2003", "test.txt"),
}
DEFAULT_ARCHIVE = os.path.join(harness.REPO_ROOT, "fixtures", "archives", "bilstm_crf_tiny.tar.gz")


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].strip())
    parser.add_argument("--data", choices=sorted(DATA), default="conll2003")
    parser.add_argument("--archive", default=DEFAULT_ARCHIVE, help="a nerzoo tagger's model.tar.gz")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's default)")
    args = parser.parse_args(argv)
    data_file = DATA[args.data]
    for path in (args.archive, data_file):
        if not os.path.exists(path):
            parser.error(f"{path} does not exist")

    import spacy
    from allennlp.predictors import Predictor
    from spacy.tokens import Doc

    import nerzoo  # noqa: F401

    harness.set_threads(args.threads)
    archive = os.path.abspath(args.archive)
    sentences = harness.read_sentences(data_file)
    nlp = spacy.blank("en")
    nlp.add_pipe("nerzoo_ner", config={"archive": archive, "batch_size": args.batch_size})
    predictor = Predictor.from_path(archive, "sequence_tagger", cuda_device=-1)
    batches = harness.batches([{"tokens": words} for words in sentences], args.batch_size)

    def run_component(sentence_count=None):
        docs = (Doc(nlp.vocab, words=words) for words in sentences[:sentence_count])
        return sum(len(doc.ents) for doc in nlp.pipe(docs, batch_size=args.batch_size))

    def run_predictor(batch_count=None):
        chosen = batches[:batch_count]
        return sum(len(result["spans"]) for batch in chosen for result in predictor.predict_batch_json(batch))

    run_component(args.batch_size)  # warm-up: a batch each
    run_predictor(1)
    runs = {"component": run_component, "predictor": run_predictor}
    seconds, entities = harness.timed_passes(runs, args.passes, alternate=True)
    speed = {name: len(sentences) / min(passes) for name, passes in seconds.items()}
    result = {
        "command": harness.command_line(__file__, argv),
        "machine": harness.machine_description(),
        "data": harness.display_path(data_file),
        "archive": harness.display_path(archive),
        "sentences": len(sentences),
        "batch_size": args.batch_size,
        "component_sentences_per_second": round(speed["component"], 1),
        "predictor_sentences_per_second": round(speed["predictor"], 1),
        "ratio": round(speed["component"] / speed["predictor"], 3),
        "entities": entities,
    }
    print(f"nerzoo_ner nlp.pipe:             {speed['component']:9.1f} sentences/s")
    print(f"Predictor.predict_batch_json:    {speed['predictor']:9.1f} sentences/s")
    print(f"ratio (component / predictor):   {result['ratio']:9.3f}")
    print(json.dumps(result))
    return 0 if entities["component"] == entities["predictor"] else 1


if __name__ == "__main__":
    sys.exit(main())
