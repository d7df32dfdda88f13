#!/usr/bin/env python
"""
ME-CRF (Liu, Baldwin & Cohn 2017) against the BiLSTM-CRF baseline on CoNLL-2003 English, at one CPU
budget.

It trains, one after the other and with the same time budget each,

    me_crf     training_config/me_crf_conll2003.jsonnet   (1 memory hop over every earlier word of
                                                          the document, frozen GloVe, CRF over BIO)
    baseline   training_config/bilstm_crf.jsonnet          (the BiLSTM-CRF baseline)

on ../shared/data/conll2003/eng.train (dev eng.testa, test eng.testb), each config with its own
reader (`conll_columns`: whole documents for me_crf, sentences for the baseline), evaluates each
archive on dev and test with `allennlp evaluate`, and adds one row per model to the table of the section
"ME-CRF (Liu, Baldwin & Cohn 2017) ..." of docs/RESULTS.md: span F1 over sentences (conlleval
semantics), wall time and train sentences/s, also as a ratio to the baseline trained in the same run.

Run it from the repository root on an otherwise idle machine (about 20 minutes with the default
budget of 8.5 minutes per model, see benchmarks/README.md):

    .venv/bin/python benchmarks/me_crf_benchmark.py

Smoke test on the fixtures (fixtures/conll2003, tiny GloVe fixtures/embeddings/tiny_glove.txt,
0.2-minute budgets, a few minutes in all; the rows go to RESULTS.smoke.md and results/ in a temporary folder,
never to docs/RESULTS.md):

    .venv/bin/python benchmarks/me_crf_benchmark.py --smoke

The engine (training under nerzoo's `time_budget` callback, evaluation, the results table) is
suite_benchmark.py and harness.py in this folder.  Prediction speed is not measured here.
"""

import os
import sys
from typing import Any, Dict

import suite_benchmark

REPO_ROOT = suite_benchmark.REPO_ROOT
SHARED_DATA = suite_benchmark.SHARED_DATA

ME_CRF_CONFIG = "training_config/me_crf_conll2003.jsonnet"
BASELINE_CONFIG = "training_config/bilstm_crf.jsonnet"

# The order is the default run order; the baseline is trained last, and its row is the one the
# ratios refer to.
MODELS: Dict[str, Dict[str, Any]] = {
    "me_crf": {"config": ME_CRF_CONFIG, "overrides": {}, "label": "me_crf (ME-CRF, 1 hop, document memory)"},
    "baseline": {"config": BASELINE_CONFIG, "overrides": {}, "label": "bilstm_crf (baseline)"},
}
BASELINE = "baseline"

# "reader": None, so each config keeps its own `conll_columns` reader (me_crf: `document_level: true`,
# BIO tags; the baseline: sentences, BIOUL tags).
DATASETS: Dict[str, Dict[str, Any]] = {
    "conll2003": suite_benchmark.conll2003_dataset(
        "CoNLL-2003 English (whole documents for me_crf, sentences for the baseline)"
    ),
}


def smoke_datasets() -> Dict[str, Dict[str, Any]]:
    """The same dataset on the CoNLL-2003 fixtures."""
    return {
        "conll2003": suite_benchmark.on_conll2003_fixtures(DATASETS["conll2003"]),
    }


SECTION_HEADING = "## ME-CRF (Liu, Baldwin & Cohn 2017): CoNLL-2003 English, document memory"
SECTION_INTRO = """Written by `benchmarks/me_crf_benchmark.py` (see `benchmarks/README.md`): the memory-enhanced
CRF of Liu, Baldwin & Cohn (2017) (`training_config/me_crf_conll2003.jsonnet`: one memory hop over
every earlier word of the document, frozen GloVe, CRF over BIO tags) and the BiLSTM-CRF baseline,
trained one after the other with the same time budget each (`--max-minutes`; `trainer.num_epochs` is
large and patience is off, so the budget is what stops training). Columns as in the CoNLL-2003 table
above, and:

- **dataset**: `conll2003` keeps each config's reader: `conll_columns` with `document_level: true`
  for me_crf (one instance per `-DOCSTART-` document), `conll_columns` over sentences for the
  baseline.
- **config + overrides**: the config and the overrides that make the model (the data, GloVe,
  `trainer.num_epochs`, `trainer.patience: null` and the time budget callback are overridden for
  every row; the exact overrides are in the run's output folder).
- **train sent/s**: train sentences x epochs run / trainer duration, as for the baseline; me_crf
  trains on whole documents, so its rate counts the sentences of the documents it processed.
- **vs baseline**: this row's train sent/s divided by the baseline's of the same run.
- **dev F1 / test F1**: span F1 x 100 over sentences, conlleval semantics (me_crf decodes whole
  documents but counts its spans per sentence).
"""

ME_CRF = suite_benchmark.Suite(
    name="me_crf",
    script=os.path.abspath(__file__),
    description="Train ME-CRF (document memory) and the BiLSTM-CRF baseline with one CPU budget each on "
    "CoNLL-2003 English; add the rows to docs/results/ and docs/RESULTS.md.",
    models=MODELS,
    datasets=DATASETS,
    smoke_datasets=smoke_datasets,
    section_heading=SECTION_HEADING,
    section_intro=SECTION_INTRO,
    default_datasets=("conll2003",),
    default_models=tuple(MODELS),
    baseline=BASELINE,
)


if __name__ == "__main__":
    sys.exit(suite_benchmark.main(suite=ME_CRF))
