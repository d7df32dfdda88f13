"""A model trained from partial annotation (training_config/bilstm_crf_partial.jsonnet) is an ordinary archive."""

import json

import pytest
import spacy

from tests import allennlp, evaluate, predict

pytestmark = pytest.mark.end_to_end

CONFIG = "training_config/bilstm_crf_partial.jsonnet"
PARTIAL = "fixtures/partial/train.txt"
DEV, TEST = "fixtures/conll2003/dev.txt", "fixtures/conll2003/test.txt"
SENTENCES = [{"tokens": ["Lena", "Holm", "visited", "Oslo", "."]}, {"sentence": "Anna Keller left Norvik Bank ."}]


@pytest.fixture(scope="module")
def partial_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("partial") / "run"
    allennlp("train", CONFIG, "-s", run, "--include-package", "nerzoo", "-o", '{"trainer.num_epochs": 4}')
    return run


@pytest.mark.xdist_group("partial")
def test_evaluate_on_whole_and_on_partial_data_and_calibrate_on_whole(partial_run, tmp_path):
    metrics = json.loads((partial_run / "metrics.json").read_text())
    assert 0 < metrics["training_marked_token_share"] < 1 and "test_marked_token_share" not in metrics
    whole = evaluate(partial_run / "model.tar.gz", TEST, tmp_path / "whole.json")
    assert whole["f1-measure-overall"] == pytest.approx(metrics["test_f1-measure-overall"], abs=1e-9)
    assert "marked_token_share" in evaluate(partial_run / "model.tar.gz", PARTIAL, tmp_path / "partial.json")
    calibrated = tmp_path / "calibrated.tar.gz"
    allennlp("calibrate", partial_run / "model.tar.gz", DEV, "--output-file", calibrated)
    refused = allennlp("calibrate", partial_run / "model.tar.gz", PARTIAL, "--output-file", tmp_path / "x", check=False)
    assert refused.returncode != 0 and "fully annotated" in refused.stderr and "Traceback" not in refused.stderr


@pytest.mark.xdist_group("partial")
def test_predict_export_serve_and_the_spacy_component(partial_run, tmp_path):
    archive = partial_run / "model.tar.gz"
    predictions = predict(archive, SENTENCES, tmp_path / "predictions.jsonl")
    assert [len(prediction["tags"]) for prediction in predictions] == [5, 6]
    (tmp_path / "check.jsonl").write_text("".join(json.dumps(line) + "\n" for line in SENTENCES))
    allennlp("export", archive, tmp_path / "export", "--check-file", tmp_path / "check.jsonl")
    assert (tmp_path / "export" / "tagger.json").exists()

    from nerzoo.server.served_model import ServedModel

    served = ServedModel("partial", str(archive)).predict_batch([(SENTENCES[0], (False, False))])[0]
    assert served["tags"] == predictions[0]["tags"]
    nlp = spacy.blank("en")
    nlp.add_pipe("nerzoo_ner", config={"archive": str(archive)})
    doc = nlp(spacy.tokens.Doc(nlp.vocab, words=SENTENCES[0]["tokens"]))
    assert [token._.nerzoo_tag for token in doc] == predictions[0]["tags"]


def test_cross_estimate_writes_each_rounds_weights_then_trains_with_them_and_resumes(tmp_path):
    run = tmp_path / "cross"
    arguments = ("cross-estimate", CONFIG, "-s", run, "--folds", 2, "--rounds", 1, "-o", '{"trainer.num_epochs": 1}')
    first = allennlp(*arguments, "--include-package", "nerzoo")
    assert "round 1 of 1, fold 2 of 2" in first.stdout and (run / "model" / "model.tar.gz").exists()
    lines = [json.loads(line) for line in (run / "round1.jsonl").read_text().splitlines()]
    assert lines and all(line["id"].startswith("train.txt:d") for line in lines)
    for line in lines:
        for token in line["tags"]:
            assert token is None or abs(sum(token.values()) - 1) < 1e-3
    config = json.loads((run / "model" / "config.json").read_text())
    assert config["dataset_reader"]["open_weights"] == str(run / "round1.jsonl")
    again = allennlp(*arguments, "--include-package", "nerzoo")
    assert "fold" not in again.stdout and "final model" in again.stdout
