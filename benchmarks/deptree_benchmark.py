#!/usr/bin/env python
"""
Dependency-aware NER (Aguilar & Solorio 2019) against the BiLSTM-CRF baseline, at one CPU budget.

For each dataset (UNER English-EWT with gold UD r2.9 trees, CoNLL-2003 with spaCy trees) it trains,
one after the other and with the same time budget each,

    deptree_ner   training_config/deptree_ner.jsonnet                 (BiLSTM + Tree-LSTM)
    blstm_only    the same with -o '{"model.syntactic_encoder": null}'  (ablation: no Tree-LSTM)
    tlstm_only    the same with -o '{"model.semantic_encoder": null}'   (ablation: no BiLSTM)
    baseline      training_config/bilstm_crf.jsonnet                  (the BiLSTM-CRF baseline)

evaluates each archive on dev and test with `allennlp evaluate`, and adds one row per model to
the table of the section "Dependency-aware NER (Aguilar & Solorio 2019) ..." of docs/RESULTS.md: span F1, wall
time and train sentences/s, also as a ratio to the baseline trained in the same run.

Run it from the repository root on an otherwise idle machine (about 1h30 with the default budget of
8.5 minutes per model, see benchmarks/README.md):

    .venv/bin/python benchmarks/deptree_benchmark.py
    .venv/bin/python benchmarks/deptree_benchmark.py --datasets uner_ewt --models deptree_ner,baseline

Smoke test on the fixtures (tiny GloVe, 0.2-minute budgets, a few minutes in all; the rows go to a
results file in a temporary folder, never to docs/RESULTS.md):

    .venv/bin/python benchmarks/deptree_benchmark.py --smoke

The engine (training under nerzoo's `time_budget` callback, evaluation, the results table) is
suite_benchmark.py and harness.py in this folder.  Prediction speed is not measured here.
"""

# The engine (argument parsing, training, evaluation, the results section) is suite_benchmark.py in
# this folder, which builds on harness.py; this file only defines the deptree suite.
import os
import sys
from typing import Any, Dict

import suite_benchmark

REPO_ROOT = suite_benchmark.REPO_ROOT
SHARED_DATA = suite_benchmark.SHARED_DATA

DEPTREE_CONFIG = "training_config/deptree_ner.jsonnet"
BASELINE_CONFIG = "training_config/bilstm_crf.jsonnet"

# name -> (config, model-specific overrides, row label). The order is the default run order; the
# baseline is trained last, and its row is the one every ratio of its dataset refers to.
MODELS: Dict[str, Dict[str, Any]] = {
    "deptree_ner": {"config": DEPTREE_CONFIG, "overrides": {}, "label": "deptree_ner (BiLSTM + Tree-LSTM)"},
    "blstm_only": {
        "config": DEPTREE_CONFIG,
        "overrides": {"model.syntactic_encoder": None},
        "label": "deptree_ner BLSTM-only (no Tree-LSTM)",
    },
    "tlstm_only": {
        "config": DEPTREE_CONFIG,
        "overrides": {"model.semantic_encoder": None},
        "label": "deptree_ner TLSTM-only (no BiLSTM)",
    },
    "baseline": {"config": BASELINE_CONFIG, "overrides": {}, "label": "bilstm_crf (baseline)"},
}
BASELINE = "baseline"

UNER_DIR = os.path.join(SHARED_DATA, "uner_english_ewt")
UNER_TRAIN_PRERELEASE = os.path.join(UNER_DIR, "prerelease", "en_ewt-ud-train.prerelease-0c7ce0d.iob2")
UNER_CAVEAT = (
    "UNER caveat: the released `en_ewt-ud-train.iob2` is not available here (see "
    "`../shared/data/uner_english_ewt/PROVENANCE.md`); these models were trained on the pre-release "
    '`prerelease/en_ewt-ud-train.prerelease-0c7ce0d.iob2` (commit 0c7ce0d, "not tested, DO NOT USE"; '
    "its `B-OTH`/`I-OTH` and spurious `B-O` tags are read as `O` through `drop_entity_types`), and "
    "evaluated on the released dev and test files. The F1 figures approximate, and must not be "
    "reported as, official UNER English-EWT results."
)

# Datasets of a full run. "reader" is None when every config keeps its own dataset reader; otherwise
# it replaces the whole `dataset_reader` of every config (the baseline's model ignores the tree fields).
DATASETS: Dict[str, Dict[str, Any]] = {
    "conll2003": suite_benchmark.conll2003_dataset("CoNLL-2003 English (spaCy trees)"),
    "uner_ewt": {
        "title": "UNER English-EWT (gold UD r2.9 trees)",
        "train": UNER_TRAIN_PRERELEASE,
        "dev": os.path.join(UNER_DIR, "en_ewt-ud-dev.iob2"),
        "test": os.path.join(UNER_DIR, "en_ewt-ud-test.iob2"),
        "format": "iob2",
        "reader": {
            "type": "conllu_ner",
            "treebank": os.path.join(SHARED_DATA, "ud_english_ewt", "r2.9", "*.conllu"),
            "drop_entity_types": ["OTH", "O"],
            "file_tag_scheme": "BIO",
            "tag_scheme": "BIOUL",
        },
        "caveat": UNER_CAVEAT,
    },
}


def smoke_datasets() -> Dict[str, Dict[str, Any]]:
    """The same datasets on the fixtures: train, dev and test are the same small files."""
    uner_sample = os.path.join(REPO_ROOT, "fixtures", "ud", "uner_sample.iob2")
    uner_treebank = os.path.join(REPO_ROOT, "fixtures", "ud", "uner_treebank.conllu")
    return {
        "conll2003": suite_benchmark.on_conll2003_fixtures(DATASETS["conll2003"]),
        "uner_ewt": dict(
            DATASETS["uner_ewt"],
            train=uner_sample,
            dev=uner_sample,
            test=uner_sample,
            reader=dict(DATASETS["uner_ewt"]["reader"], treebank=uner_treebank),
            caveat="Smoke test: the UNER fixture sample is train, dev and test at once.",
        ),
    }


SECTION_HEADING = (
    "## Dependency-aware NER (Aguilar & Solorio 2019): UNER English-EWT (gold trees) and CoNLL-2003 (spaCy trees)"
)
SECTION_INTRO = """Written by `benchmarks/deptree_benchmark.py` (see `benchmarks/README.md`): the dependency-aware
model of Aguilar & Solorio (2019), its two encoder ablations and the BiLSTM-CRF baseline, trained one
after the other with the same time budget each (`--max-minutes`; `trainer.num_epochs` is large and
patience is off, so the budget is what stops training). Columns as in the CoNLL-2003 table above, and:

- **dataset**: `uner_ewt` reads every model's data with the `conllu_ner` reader (UNER IOB2 labels
  joined on `sent_id` with the gold UD English-EWT r2.9 trees); `conll2003` keeps each config's
  reader (`spacy_parsed_conll`, trees from spaCy, for the dependency-aware models; `conll_columns`
  for the baseline).
- **config + overrides**: the config and the overrides that make the model (the data, GloVe,
  `trainer.num_epochs`, `trainer.patience: null` and the time budget callback are overridden for
  every row; the exact overrides are in the run's output folder).
- **vs baseline**: this row's train sent/s divided by the baseline's of the same dataset and run.
"""

DEPTREE = suite_benchmark.Suite(
    name="deptree",
    script=os.path.abspath(__file__),
    description="Train deptree_ner, its BLSTM-only and TLSTM-only ablations and the BiLSTM-CRF baseline "
    "with one CPU budget each on UNER English-EWT and CoNLL-2003; add the rows to docs/results/ and docs/RESULTS.md.",
    models=MODELS,
    datasets=DATASETS,
    smoke_datasets=smoke_datasets,
    section_heading=SECTION_HEADING,
    section_intro=SECTION_INTRO,
    default_datasets=("conll2003", "uner_ewt"),
    default_models=tuple(MODELS),
    baseline=BASELINE,
)


if __name__ == "__main__":
    sys.exit(suite_benchmark.main(suite=DEPTREE))
