#!/usr/bin/env python
"""
FOFE-NER (Xu 2017), its second pass and the BiLSTM-CRF baseline on CoNLL-2003 English, at one CPU
budget each, with prediction speed.

It trains, one after the other and with the same time budget each,

    fofe_ner              training_config/fofe_ner.jsonnet              (first pass: every fragment of
                                                                        up to 7 words classified from
                                                                        its FOFE context codes)
    fofe_ner_second_pass  training_config/fofe_ner_second_pass.jsonnet  (§5.4: contexts see the first
                                                                        pass's entities as type tokens;
                                                                        needs the fofe_ner archive of
                                                                        this run, FOFE_FIRST_PASS)
    baseline              training_config/bilstm_crf.jsonnet            (the BiLSTM-CRF baseline)

on ../shared/data/conll2003/eng.train (dev eng.testa, test eng.testb), each config with its own
reader (`entity_spans` for both FOFE passes, `conll_columns` for the baseline), evaluates each
archive on dev and test with `allennlp evaluate`, times the prediction of the test sentences
(benchmarks/predict_speed.py: the archive's `sequence_tagger` predictor, batch size 64, CPU) and
adds one row per model to the table of the section "FOFE-NER (Xu 2017) ..." of docs/RESULTS.md: span F1, wall
time, train sentences/s and predict sentences/s, both also as a ratio to the baseline trained in the
same run.  The second pass's budget comes on top of the first pass's: the second pass is only usable
with its first pass, so a second-pass system costs both trainings.

Run it from the repository root on an otherwise idle machine (35 minutes or more with the default
budget of 8.5 minutes per model, evaluation and prediction timing included, see benchmarks/README.md):

    .venv/bin/python benchmarks/fofe_ner_benchmark.py

Smoke test on the fixtures (fixtures/conll2003, tiny GloVe fixtures/embeddings/tiny_glove.txt,
0.2-minute budgets, a few minutes in all; the rows go to RESULTS.smoke.md and results/ in a temporary folder,
never to docs/RESULTS.md):

    .venv/bin/python benchmarks/fofe_ner_benchmark.py --smoke

The engine (training under nerzoo's `time_budget` callback, evaluation, prediction timing, the
results table, the "needs"/"env" of a model built on another) is suite_benchmark.py and harness.py
in this folder.
"""

import os
import sys
from typing import Any, Dict

import suite_benchmark

REPO_ROOT = suite_benchmark.REPO_ROOT
SHARED_DATA = suite_benchmark.SHARED_DATA

FOFE_CONFIG = "training_config/fofe_ner.jsonnet"
SECOND_PASS_CONFIG = "training_config/fofe_ner_second_pass.jsonnet"
BASELINE_CONFIG = "training_config/bilstm_crf.jsonnet"

# The order is the default run order: the second pass after the first pass whose archive it reads
# (FOFE_FIRST_PASS, a Jsonnet std.extVar of its config, set for its training, evaluation and
# prediction timing), the baseline last, its row the one the ratios refer to.
MODELS: Dict[str, Dict[str, Any]] = {
    "fofe_ner": {"config": FOFE_CONFIG, "overrides": {}, "label": "fofe_ner (FOFE-NER first pass)"},
    "fofe_ner_second_pass": {
        "config": SECOND_PASS_CONFIG,
        "overrides": {},
        "label": "fofe_ner second pass (§5.4; its budget comes on top of the first pass's)",
        "needs": "fofe_ner",
        "env": {"FOFE_FIRST_PASS": "{archive:fofe_ner}"},
    },
    "baseline": {"config": BASELINE_CONFIG, "overrides": {}, "label": "bilstm_crf (baseline)"},
}
BASELINE = "baseline"

# "reader": None, so each config keeps its own reader (`entity_spans` over the IOB1 tags of column 3
# for both FOFE passes, `conll_columns` with BIOUL tags for the baseline).
DATASETS: Dict[str, Dict[str, Any]] = {
    "conll2003": suite_benchmark.conll2003_dataset(
        "CoNLL-2003 English (span classification for FOFE-NER, tagging for the baseline)"
    ),
}


def smoke_datasets() -> Dict[str, Dict[str, Any]]:
    """The same dataset on the CoNLL-2003 fixtures."""
    return {
        "conll2003": suite_benchmark.on_conll2003_fixtures(DATASETS["conll2003"]),
    }


SECTION_HEADING = "## FOFE-NER (Xu 2017): CoNLL-2003 English, span classification"
SECTION_INTRO = """Written by `benchmarks/fofe_ner_benchmark.py` (see `benchmarks/README.md`): FOFE-NER of Xu (2017)
(`training_config/fofe_ner.jsonnet`: every fragment of up to 7 words classified by a feed-forward
net from the FOFE codes of its contexts, its bag of words and its characters), its second pass
(`training_config/fofe_ner_second_pass.jsonnet`, §5.4: the contexts see the entities found by the
first pass of the same run, which is frozen and interpolated with it) and the BiLSTM-CRF baseline,
trained one after the other with the same time budget each (`--max-minutes`; `trainer.num_epochs` is
large and patience is off, so the budget is what stops training). The second pass's time budget comes
on top of the first pass's: a second-pass system costs both trainings. Columns as in the CoNLL-2003
table above, and:

- **dataset**: `conll2003` keeps each config's reader: `entity_spans` (IOB1 tags of column 3 read as
  entity spans) for both FOFE-NER passes, `conll_columns` (BIOUL tags) for the baseline.
- **config + overrides**: the config and the overrides that make the model (the data, GloVe,
  `trainer.num_epochs`, `trainer.patience: null` and the time budget callback are overridden for
  every row; the exact overrides are in the run's output folder). The second pass also gets
  `FOFE_FIRST_PASS`, the first pass's archive of the same run (its vocabulary comes from there).
- **train sent/s**: train sentences x epochs run / trainer duration, validation included; the second
  pass's rate is its own training's (the first pass only runs forward inside it).
- **vs baseline**: this row's train sent/s divided by the baseline's of the same run.
- **predict sent/s**: the test sentences predicted after training through the archive's
  `sequence_tagger` predictor (pre-tokenised `{"tokens": [...]}` inputs, `predict_batch_json`), batch
  size 64, on the CPU, in a fresh process (`benchmarks/predict_speed.py`): three warm-up batches are not
  timed, then one timed pass over all sentences. The second pass's rate includes its first pass.
- **predict vs baseline**: this row's predict sent/s divided by the baseline's of the same run.
- **dev F1 / test F1**: span F1 x 100 (`f1-measure-overall` of `allennlp evaluate`): exact
  (start, end, type) matches, as conlleval counts them; FOFE-NER cannot find entities longer than
  its 7-word fragments.
"""

FOFE_NER = suite_benchmark.Suite(
    name="fofe_ner",
    script=os.path.abspath(__file__),
    description="Train FOFE-NER, its second pass and the BiLSTM-CRF baseline with one CPU budget each on "
    "CoNLL-2003 English, time their prediction; add the rows to docs/results/ and docs/RESULTS.md.",
    models=MODELS,
    datasets=DATASETS,
    smoke_datasets=smoke_datasets,
    section_heading=SECTION_HEADING,
    section_intro=SECTION_INTRO,
    default_datasets=("conll2003",),
    default_models=tuple(MODELS),
    baseline=BASELINE,
    predict_speed=True,
)


if __name__ == "__main__":
    sys.exit(suite_benchmark.main(suite=FOFE_NER))
