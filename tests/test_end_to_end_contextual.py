"""The contextual configs through the real `allennlp` command, with the tests' tiny BERT."""

import json

import pytest

from tests import allennlp, evaluate, predict, train

pytestmark = pytest.mark.end_to_end
TEST = "fixtures/conll2003/test.txt"
FAST = {"trainer.num_epochs": 2, "trainer.patience": None}


def test_bilstm_crf_contextual_train_evaluate_predict(tmp_path):
    run = tmp_path / "run"
    train("training_config/bilstm_crf_contextual.jsonnet", run, json.dumps(FAST))
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
    train("training_config/deptree_ner_contextual.jsonnet", run, json.dumps({**FAST, "trainer.num_epochs": 1}))
    weights = json.loads((run / "metrics.json").read_text())
    assert weights["training_loss"] > 0


def test_a_missing_transformer_names_the_install_command(tmp_path):
    result = allennlp(
        "train",
        "training_config/bilstm_crf_contextual.jsonnet",
        "-s",
        tmp_path / "run",
        "--include-package",
        "nerzoo",
        check=False,
        env={"TRANSFORMER_MODEL": str(tmp_path / "nothing"), "TRANSFORMER_DIM": ""},
    )
    assert result.returncode != 0
    # AllenNLP prints the config's error, then Jsonnet's location of it.
    errors = [line for line in result.stderr.splitlines() if line.startswith("RuntimeError: RUNTIME ERROR")]
    assert len(errors) == 1 and "TRANSFORMER_MODEL=" in errors[0] and "make install-contextual" in errors[0]
    assert not (tmp_path / "run" / "model.tar.gz").exists()
