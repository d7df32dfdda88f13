"""
The char-gated tagger (Rei et al. 2016) and Seq2Biseq (Dinarelli & Grobol 2019) through the real
`allennlp` command: train the shipped configs on the fixtures, evaluate, predict.
"""

import json

import pytest

from tests import evaluate, predict, train

pytestmark = pytest.mark.end_to_end

TEST = "fixtures/conll2003/test.txt"
SENTENCES = [
    {"sentence": "Anna Keller , chief executive of Norvik Bank , resigned on Friday ."},
    {"tokens": ["Lena", "Holm", "visited", "Oslo", "."]},
]
UPOS_READER = {
    "type": "conllu_ner",
    "tag_source": "upos",
    "token_indexers": {
        "tokens": {"type": "single_id", "lowercase_tokens": True},
        "token_characters": {"type": "characters", "min_padding_length": 1},
    },
}


def check_tagged(predictions, chunk_labels=True):
    assert len(predictions) == len(SENTENCES)
    for line, prediction in zip(SENTENCES, predictions):
        text = line.get("sentence") or " ".join(line["tokens"])
        assert len(prediction["tags"]) == len(prediction["tokens"]) == len(prediction["tag_confidences"])
        assert all(0.0 < value <= 1.0 for value in prediction["tag_confidences"])
        for span in prediction["spans"]:
            assert text[span["char_start"] : span["char_end"]] == span["text"]
    if chunk_labels:
        labels = {span["label"] for prediction in predictions for span in prediction["spans"]}
        assert "NP" in labels, labels


def test_char_gated_tagger_train_evaluate_predict(tmp_path):
    run = tmp_path / "gate"
    train("training_config/char_gated_tagger.jsonnet", run, json.dumps({"trainer.num_epochs": 6}))
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["best_validation_f1-measure-overall"] > 0.7, metrics
    # The cosine loss reached the model's loss (and is reported as a metric), and it fell.
    assert 0 < metrics["training_char_cosine_loss"]
    history = [json.loads((run / f"metrics_epoch_{epoch}.json").read_text()) for epoch in (0, metrics["epoch"])]
    assert history[-1]["training_char_cosine_loss"] < history[0]["training_char_cosine_loss"]
    evaluated = evaluate(run / "model.tar.gz", TEST, tmp_path / "eval.json")
    assert evaluated["f1-measure-overall"] == pytest.approx(metrics["test_f1-measure-overall"], abs=1e-9)
    check_tagged(predict(run / "model.tar.gz", SENTENCES, tmp_path / "predictions.jsonl"))


@pytest.mark.parametrize("variant", ["char_gated_tagger_words", "char_gated_tagger_concat"])
def test_char_gated_variants_train_without_the_cosine_loss(variant, tmp_path):
    run = tmp_path / variant
    train(f"training_config/{variant}.jsonnet", run, json.dumps({"trainer.num_epochs": 6}))
    metrics = json.loads((run / "metrics.json").read_text())
    assert "training_char_cosine_loss" not in metrics
    assert metrics["best_validation_f1-measure-overall"] > 0.5, metrics


def test_seq2biseq_train_evaluate_predict(tmp_path):
    run = tmp_path / "seq2biseq"
    # Batches of 16 on the fixtures' 100-odd sentences (the config's 100 is for real data).
    overrides = {"trainer.num_epochs": 8, "data_loader.batch_sampler.batch_size": 16}
    train("training_config/seq2biseq.jsonnet", run, json.dumps(overrides))
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["best_validation_accuracy"] > 0.8, metrics
    for key in ("accuracy", "f1-measure-overall", "concept_error_rate"):
        assert f"test_{key}" in metrics
    evaluated = evaluate(run / "model.tar.gz", TEST, tmp_path / "eval.json")
    for key in ("accuracy", "f1-measure-overall", "concept_error_rate"):
        assert evaluated[key] == pytest.approx(metrics[f"test_{key}"], abs=1e-9)
    predictions = predict(
        run / "model.tar.gz",
        SENTENCES,
        tmp_path / "predictions.jsonl",
        "--predictor-args",
        json.dumps({"return_tag_probabilities": True}),
    )
    check_tagged(predictions)
    for prediction in predictions:
        for probabilities, tag, confidence in zip(
            prediction["tag_probabilities"], prediction["tags"], prediction["tag_confidences"]
        ):
            assert sum(probabilities.values()) == pytest.approx(1.0, abs=1e-4)
            assert probabilities[tag] == pytest.approx(confidence, abs=1e-5)


def test_seq2biseq_pos_on_segments_then_whole_sentences(tmp_path):
    # Training reads 6-token overlapping segments; validation and evaluation whole sentences.
    run = tmp_path / "pos"
    overrides = {"trainer.num_epochs": 3, "dataset_reader.segment_length": 6}
    train("training_config/seq2biseq_pos.jsonnet", run, json.dumps(overrides))
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["best_validation_accuracy"] > 0.5 and "test_f1-measure-overall" not in metrics, metrics
    config = json.loads((run / "config.json").read_text())
    assert (
        config["dataset_reader"]["segment_length"] == 6 and "segment_length" not in config["validation_dataset_reader"]
    )
    evaluated = evaluate(run / "model.tar.gz", TEST, tmp_path / "eval.json")
    assert evaluated["accuracy"] == pytest.approx(metrics["test_accuracy"], abs=1e-9)
    predictions = predict(run / "model.tar.gz", SENTENCES, tmp_path / "predictions.jsonl")
    check_tagged(predictions, chunk_labels=False)
    assert all(prediction["spans"] == [] for prediction in predictions)


def test_seq2biseq_pos_reads_upos_from_conllu(tmp_path):
    run = tmp_path / "upos"
    overrides = {
        "trainer.num_epochs": 2,
        "dataset_reader": UPOS_READER,
        "validation_dataset_reader": UPOS_READER,
        "train_data_path": "fixtures/ud/ner_misc.conllu",
        "validation_data_path": "fixtures/ud/ner_misc.conllu",
        "test_data_path": "fixtures/ud/ner_column.conllu",
    }
    train("training_config/seq2biseq_pos.jsonnet", run, json.dumps(overrides))
    vocabulary = (run / "vocabulary" / "labels.txt").read_text().split()
    assert {"NOUN", "VERB", "PROPN"} <= set(vocabulary)
    # The reader parses predicted text but keeps no POS field (the tags are the POS): the parse has none.
    predictions = predict(run / "model.tar.gz", SENTENCES, tmp_path / "predictions.jsonl")
    check_tagged(predictions, chunk_labels=False)
    assert all(set(prediction["parse"]) == {"dependency_labels", "head_indices"} for prediction in predictions)
