"""
The contextual configs through the real `allennlp` command, with the tests' tiny BERT (as wide as the
bundled model) passed as a user passes another model: by `-o`.
"""

import json
import pathlib

import _jsonnet
import pytest
from allennlp.common import Params

from nerzoo import transformer_models
from tests import PROJECT_ROOT, allennlp, evaluate, predict, train
from tests.tiny_transformer import BUNDLED_WIDTH, tiny_bert_overrides

pytestmark = pytest.mark.end_to_end
TEST = "fixtures/conll2003/test.txt"
FAST = {"trainer.num_epochs": 2, "trainer.patience": None}


def with_tiny_bert(config: str, overrides: dict) -> str:
    return json.dumps({**tiny_bert_overrides(Params.from_file(config).as_dict(quiet=True)), **overrides})


def test_the_configs_name_the_bundled_model_where_the_install_puts_it():
    contextual = json.loads(
        _jsonnet.evaluate_snippet(
            "snippet", 'import "contextual.libsonnet"', jpathdir=[str(PROJECT_ROOT / "training_config")]
        )
    )
    assert contextual == {"model_name": transformer_models.BUNDLED_MODEL_PATH, "dim": BUNDLED_WIDTH}
    installed = pathlib.Path(transformer_models.BUNDLED_MODEL_PATH).expanduser() / "config.json"
    if installed.exists():  # after `make install-contextual`
        assert json.loads(installed.read_text())["hidden_size"] == BUNDLED_WIDTH


def test_bilstm_crf_contextual_train_evaluate_predict(tmp_path):
    run = tmp_path / "run"
    config = "training_config/bilstm_crf_contextual.jsonnet"
    train(config, run, with_tiny_bert(config, FAST))
    config = json.loads((run / "config.json").read_text())
    embedder = config["model"]["text_field_embedder"]["token_embedders"]["transformer"]
    assert embedder["type"] == "contextual_word_vectors" and "tiny-bert" in embedder["model_name"]
    metrics = json.loads((run / "metrics.json").read_text())
    evaluated = evaluate(run / "model.tar.gz", TEST, tmp_path / "eval.json")
    assert evaluated["f1-measure-overall"] == pytest.approx(metrics["test_f1-measure-overall"], abs=1e-9)
    lines = [{"sentence": "Peter Blackburn visited Brussels on Monday ."}, {"tokens": ["Lena", "Holm", "."]}]
    predictions = predict(run / "model.tar.gz", lines, tmp_path / "predictions.jsonl")
    assert [len(p["tags"]) for p in predictions] == [7, 3]


def test_deptree_ner_contextual_trains(tmp_path):
    run = tmp_path / "run"
    config = "training_config/deptree_ner_contextual.jsonnet"
    train(config, run, with_tiny_bert(config, {**FAST, "trainer.num_epochs": 1}))
    weights = json.loads((run / "metrics.json").read_text())
    assert weights["training_loss"] > 0


def test_a_missing_transformer_names_the_install_command(tmp_path):
    config = "training_config/bilstm_crf_contextual.jsonnet"
    nothing = {key: str(tmp_path / "nothing") for key in json.loads(with_tiny_bert(config, {}))}
    result = allennlp(
        "train", config, "-s", tmp_path / "run", "--include-package", "nerzoo", "-o", json.dumps(nothing), check=False
    )
    assert result.returncode != 0
    errors = [
        line for line in result.stderr.splitlines() if line.startswith("allennlp.common.checks.ConfigurationError")
    ]
    assert errors and str(tmp_path / "nothing") in errors[-1] and "make install-contextual" in errors[-1]
    assert not (tmp_path / "run" / "model.tar.gz").exists()
