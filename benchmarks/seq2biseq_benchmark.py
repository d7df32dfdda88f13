#!/usr/bin/env python
"""
Seq2Biseq (Dinarelli & Grobol 2019) against the BiLSTM-CRF baseline on POS tagging, at one CPU budget
each.

It trains, one after the other and with the same time budget each,

    seq2biseq       training_config/seq2biseq_pos.jsonnet   (eq. 8 loss, Adam)
    seq2biseq_2opt  the same with model.backward_loss_weight 1: the backward decoder is also
                    trained on its own NLL (§4.3), with the same Adam, so the row differs from
                    seq2biseq in that alone
    baseline        training_config/bilstm_crf_pos.jsonnet  (the BiLSTM-CNN-CRF baseline, unconstrained CRF)

on two datasets:

    conll2000  CoNLL-2000's POS column (Brill-tagger tags); train.txt without every 9th sentence,
               dev = every 9th training sentence (`?held_out=9`), test = test.txt
    ewt        UD English-EWT r2.16 UPOS (`conllu_ner` with `tag_source: "upos"` replaces every
               config's readers), en_ewt-ud-{train,dev,test}.conllu

evaluates each archive on dev and test with `allennlp evaluate` and adds one row per model to the table of the
section "Seq2Biseq (Dinarelli & Grobol 2019) ..." of docs/RESULTS.md: token accuracy x 100, wall time,
train sentences/s and its ratio to the baseline.

Run it from the repository root on an otherwise idle machine (about 6 x budget + evaluation; the
default budget here is 5 minutes per model):

    .venv/bin/python benchmarks/seq2biseq_benchmark.py

Smoke test on the fixtures (rows go to RESULTS.smoke.md and results/ in a temporary folder):

    .venv/bin/python benchmarks/seq2biseq_benchmark.py --smoke

The engine is suite_benchmark.py in this folder.
"""

import os
import sys
from typing import Any, Dict

import suite_benchmark

REPO_ROOT = suite_benchmark.REPO_ROOT
SHARED_DATA = suite_benchmark.SHARED_DATA
SEQ2BISEQ_CONFIG = "training_config/seq2biseq_pos.jsonnet"

MODELS: Dict[str, Dict[str, Any]] = {
    "seq2biseq": {"config": SEQ2BISEQ_CONFIG, "overrides": {}, "label": "seq2biseq (eq. 8, Adam)"},
    "seq2biseq_2opt": {
        "config": SEQ2BISEQ_CONFIG,
        "overrides": {"model.backward_loss_weight": 1.0},
        "label": "seq2biseq 2-opt (backward decoder also on its own NLL, §4.3; same Adam)",
    },
    "baseline": {"config": "training_config/bilstm_crf_pos.jsonnet", "overrides": {}, "label": "bilstm_crf (baseline)"},
}
BASELINE = "baseline"
UPOS_READER = {"type": "conllu_ner", "tag_source": "upos"}


def conll2000_pos(folder: str) -> Dict[str, Any]:
    train = os.path.join(folder, "train.txt")
    return {
        "title": "CoNLL-2000 POS column (Brill-tagger tags; dev = every 9th training sentence)",
        "train": f"{train}?without_held_out=9",
        "dev": f"{train}?held_out=9",
        "test": os.path.join(folder, "test.txt"),
        "format": "conll",
        "reader": None,
    }


def ewt_upos(folder: str) -> Dict[str, Any]:
    return {
        "title": "UD English-EWT r2.16 UPOS",
        "train": os.path.join(folder, "en_ewt-ud-train.conllu"),
        "dev": os.path.join(folder, "en_ewt-ud-dev.conllu"),
        "test": os.path.join(folder, "en_ewt-ud-test.conllu"),
        "format": "conllu",
        "reader": UPOS_READER,
    }


DATASETS: Dict[str, Dict[str, Any]] = {
    "conll2000": conll2000_pos(os.path.join(SHARED_DATA, "conll2000")),
    "ewt": ewt_upos(os.path.join(SHARED_DATA, "ud_english_ewt", "r2.16")),
}


def smoke_datasets() -> Dict[str, Dict[str, Any]]:
    """The POS column of the CoNLL-2003 fixtures, and the UD fixture for UPOS."""
    conll = os.path.join(REPO_ROOT, "fixtures", "conll2003")
    ud = os.path.join(REPO_ROOT, "fixtures", "ud", "ner_misc.conllu")
    return {
        "conll2000": dict(
            DATASETS["conll2000"],
            train=os.path.join(conll, "train.txt"),
            dev=os.path.join(conll, "dev.txt"),
            test=os.path.join(conll, "test.txt"),
        ),
        "ewt": dict(DATASETS["ewt"], train=ud, dev=ud, test=ud),
    }


SECTION_HEADING = "## Seq2Biseq (Dinarelli & Grobol 2019): POS tagging"
SECTION_INTRO = """Written by `benchmarks/seq2biseq_benchmark.py` (see `benchmarks/README.md`): Seq2Biseq
(`training_config/seq2biseq_pos.jsonnet`: summed character GRU, word BiGRU, backward then forward label
decoders, eq. 8 loss), its two-optimiser variant (`model.backward_loss_weight: 1`: the backward decoder
is also trained on its own NLL, §4.3; rows before 2026-11-23 ran it with the paper's SGD instead of
the config's Adam) and the BiLSTM-CNN-CRF baseline
(`training_config/bilstm_crf_pos.jsonnet`), trained one after the other with the same time budget each
(`--max-minutes`; `trainer.num_epochs` is large and patience is off, so the budget stops training).
**dev/test accuracy** is token accuracy x 100 (`accuracy` of `allennlp evaluate`; for Seq2Biseq the
labels it decodes from its own predictions). `conll2000`: CoNLL-2000's POS column, dev = every 9th
training sentence (`train.txt?held_out=9`). `ewt`: UD English-EWT r2.16 UPOS, read by `conllu_ner`
with `tag_source: "upos"`. The paper reports 97.20 (Seq2Biseq) and 97.35 (2-opt) on WSJ POS, without
pretrained embeddings, against 97.13 for LSTM+CRF; both models here use GloVe 6B 50d.
"""

SEQ2BISEQ = suite_benchmark.Suite(
    name="seq2biseq",
    script=os.path.abspath(__file__),
    description="Train Seq2Biseq, its two-optimiser variant and the BiLSTM-CRF baseline with one CPU budget each "
    "on POS tagging; add the rows to docs/results/ and docs/RESULTS.md.",
    models=MODELS,
    datasets=DATASETS,
    smoke_datasets=smoke_datasets,
    section_heading=SECTION_HEADING,
    section_intro=SECTION_INTRO,
    default_datasets=tuple(DATASETS),
    default_models=tuple(MODELS),
    baseline=BASELINE,
    default_max_minutes=5.0,
    metric="accuracy",
    metric_label="accuracy",
)


if __name__ == "__main__":
    sys.exit(suite_benchmark.main(suite=SEQ2BISEQ))
