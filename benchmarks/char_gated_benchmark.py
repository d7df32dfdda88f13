#!/usr/bin/env python
"""
The three word representations of Rei, Crichton & Pyysalo (2016), "Attending to Characters in Neural
Sequence Labeling Models" (blog: ../shared/papers/char-attention_rei-2016-blog.txt), on CoNLL-2000
chunking, at one CPU budget each.

It trains, one after the other and with the same time budget each,

    words        training_config/char_gated_tagger_words.jsonnet   (word embeddings only)
    concatenate  training_config/char_gated_tagger_concat.jsonnet  ([x; m])
    gate         training_config/char_gated_tagger.jsonnet         (char_gated: gate + cosine loss)

on ../shared/data/conll2000/train.txt without every 9th sentence (7,944 sentences), with every 9th
training sentence as dev (992; CoNLL-2000 has no dev set: `conll_columns`' `?held_out=9` paths) and
test.txt as test, evaluates each archive on dev and test with `allennlp evaluate` and adds one row
per model to the table of the section "Char-gated embeddings (Rei et al. 2016) ..." of docs/RESULTS.md: chunk span
F1, wall time, train sentences/s and its ratio to the word-only model trained in the same run. The
blog reports 91.23 < 92.35 < 92.67 (words < concatenate < gate); this run tests that ordering.

Run it from the repository root on an otherwise idle machine (about 3 x budget + evaluation; the
default budget here is 6 minutes per model):

    .venv/bin/python benchmarks/char_gated_benchmark.py

Smoke test on the fixtures (a few minutes; rows go to RESULTS.smoke.md and results/ in a temporary folder):

    .venv/bin/python benchmarks/char_gated_benchmark.py --smoke

The engine is suite_benchmark.py in this folder.
"""

import os
import sys
from typing import Any, Dict

import suite_benchmark

REPO_ROOT = suite_benchmark.REPO_ROOT
SHARED_DATA = suite_benchmark.SHARED_DATA

MODELS: Dict[str, Dict[str, Any]] = {
    "words": {
        "config": "training_config/char_gated_tagger_words.jsonnet",
        "overrides": {},
        "label": "word-based (baseline)",
    },
    "concatenate": {
        "config": "training_config/char_gated_tagger_concat.jsonnet",
        "overrides": {},
        "label": "char concat [x; m]",
    },
    "gate": {
        "config": "training_config/char_gated_tagger.jsonnet",
        "overrides": {},
        "label": "char attn (char_gated: gate + cosine loss)",
    },
}
BASELINE = "words"


# The eleven CoNLL-2000 chunk types. Training never has a multi-word LST chunk (B-LST, L-LST in BIOUL),
# which test.txt has, and UCP occurs only in the held-out dev sentences: every label is declared.
CHUNK_TYPES = ("ADJP", "ADVP", "CONJP", "INTJ", "LST", "NP", "PP", "PRT", "SBAR", "UCP", "VP")
BIOUL_CHUNK_LABELS = ["O"] + [f"{prefix}-{chunk}" for chunk in CHUNK_TYPES for prefix in "BILU"]


def conll2000_chunking(folder: str) -> Dict[str, Any]:
    """CoNLL-2000 from `folder`: every 9th training sentence held out as dev; each config's reader (chunk column)."""
    train = os.path.join(folder, "train.txt")
    return {
        "overrides": {"vocabulary.tokens_to_add": {"labels": BIOUL_CHUNK_LABELS}},
        "title": "CoNLL-2000 chunking (chunk column, BIO read, BIOUL tagged; dev = every 9th training sentence)",
        "train": f"{train}?without_held_out=9",
        "dev": f"{train}?held_out=9",
        "test": os.path.join(folder, "test.txt"),
        "format": "conll",
        "reader": None,
    }


DATASETS: Dict[str, Dict[str, Any]] = {"conll2000": conll2000_chunking(os.path.join(SHARED_DATA, "conll2000"))}


def smoke_datasets() -> Dict[str, Dict[str, Any]]:
    """The chunk column of the CoNLL-2003 fixtures (the configs' defaults)."""
    folder = os.path.join(REPO_ROOT, "fixtures", "conll2003")
    return {
        "conll2000": dict(
            DATASETS["conll2000"],
            train=os.path.join(folder, "train.txt"),
            dev=os.path.join(folder, "dev.txt"),
            test=os.path.join(folder, "test.txt"),
        )
    }


SECTION_HEADING = "## Char-gated embeddings (Rei et al. 2016): CoNLL-2000 chunking"
SECTION_INTRO = """Written by `benchmarks/char_gated_benchmark.py` (see `benchmarks/README.md`): the BiLSTM-CRF of
Rei, Crichton & Pyysalo (2016) (BiLSTM 200 per direction, a 50-d tanh layer, CRF) with its three word
representations, trained one after the other with the same time budget each (`--max-minutes`;
`trainer.num_epochs` is large and patience is off, so the budget stops training): word embeddings
only (`char_gated_tagger_words.jsonnet`), word and character representations concatenated
(`char_gated_tagger_concat.jsonnet`), and mixed by the learned gate with the cosine loss
(`char_gated_tagger.jsonnet`, the `char_gated` embedder). The blog reports chunking F1 91.23 <
92.35 < 92.67 for the three (300-d embeddings, trained to convergence). Columns as in the tables above;
**dev/test F1** is the chunk span F1 x 100 (conlleval); dev is every 9th sentence of CoNLL-2000's
train.txt (`train.txt?held_out=9`), and the models train on the others (`?without_held_out=9`). The
label vocabulary declares all eleven chunk types (`vocabulary.tokens_to_add`): training has no
multi-word LST chunk, which the test file has, and UCP occurs only in the dev sentences.
"""

CHAR_GATED = suite_benchmark.Suite(
    name="char_gated",
    script=os.path.abspath(__file__),
    description="Train the word-only, char-concat and char-gated taggers with one CPU budget each on CoNLL-2000 "
    "chunking; add the rows to docs/results/ and docs/RESULTS.md.",
    models=MODELS,
    datasets=DATASETS,
    smoke_datasets=smoke_datasets,
    section_heading=SECTION_HEADING,
    section_intro=SECTION_INTRO,
    default_datasets=("conll2000",),
    default_models=tuple(MODELS),
    baseline=BASELINE,
    default_max_minutes=6.0,
)


if __name__ == "__main__":
    sys.exit(suite_benchmark.main(suite=CHAR_GATED))
