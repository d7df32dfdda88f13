"""FOFE-NER through the real `allennlp` command: train, evaluate, predict, second pass, nested entities."""

import json

import pytest
import spacy
from nerzoo_runtime import Tagger
from spacy.tokens import Doc

from tests import PROJECT_ROOT, allennlp, evaluate, predict, train
from tests.commands.test_export import assert_tags_as_allennlp_predict, check_file, fixture_sentences

pytestmark = pytest.mark.end_to_end

CONFIG = "training_config/fofe_ner.jsonnet"
SECOND_PASS = "training_config/fofe_ner_second_pass.jsonnet"
NESTED = {
    "dataset_reader.file_format": "jsonl",
    "dataset_reader.conll": None,
    "train_data_path": "fixtures/nested/train.jsonl",
    "validation_data_path": "fixtures/nested/dev.jsonl",
}


@pytest.fixture(scope="module")
def first_pass(tmp_path_factory):
    run = tmp_path_factory.mktemp("fofe") / "first"
    allennlp("train", CONFIG, "-s", run, "--include-package", "nerzoo", "-o", json.dumps({"trainer.num_epochs": 12}))
    return run


@pytest.mark.xdist_group("fofe_first_pass")
def test_train_evaluate_predict_spans_with_scores_and_offsets(first_pass, tmp_path):
    metrics = json.loads((first_pass / "metrics.json").read_text())
    assert metrics["best_validation_f1-measure-overall"] > 0.8, metrics
    evaluated = evaluate(first_pass / "model.tar.gz", "fixtures/conll2003/test.txt", tmp_path / "eval.json")
    assert evaluated["f1-measure-overall"] == pytest.approx(metrics["test_f1-measure-overall"], abs=1e-9)

    sentences = [
        {"sentence": "Peter Blackburn visited Brussels on Monday ."},
        {"sentence": "Anna Keller , chief executive of Norvik Bank , resigned on Friday ."},
        {"tokens": ["Lena", "Holm", "visited", "Oslo", "."]},
    ]
    predictions = predict(first_pass / "model.tar.gz", sentences, tmp_path / "predictions.jsonl")
    assert len(predictions) == 3
    spans = [span for prediction in predictions for span in prediction["spans"]]
    assert spans and {"PER", "LOC"} <= {span["label"] for span in spans}
    for line, prediction in zip(sentences, predictions):
        text = line.get("sentence") or " ".join(line["tokens"])
        assert len(prediction["tags"]) == len(prediction["tokens"]) == len(prediction["tag_confidences"])
        assert all(0.0 < value <= 1.0 for value in prediction["tag_confidences"])
        expected_tags = ["O"] * len(prediction["tokens"])
        for span in prediction["spans"]:
            expected_tags[span["start"] : span["end"]] = [f"B-{span['label']}"] + [f"I-{span['label']}"] * (
                span["end"] - span["start"] - 1
            )
            assert prediction["tag_confidences"][span["start"] : span["end"]] == [span["score"]] * (
                span["end"] - span["start"]
            )
        assert prediction["tags"] == expected_tags
        for span in prediction["spans"]:
            assert set(span) == {"label", "start", "end", "text", "char_start", "char_end", "score", "level"}
            assert text[span["char_start"] : span["char_end"]] == span["text"]
            assert span["text"] == " ".join(prediction["tokens"][span["start"] : span["end"]])
            assert 0.5 <= span["score"] <= 1.0 and span["level"] == 1


@pytest.mark.xdist_group("fofe_first_pass")
def test_tag_probabilities_are_refused_with_a_reason(first_pass, tmp_path):
    inputs = tmp_path / "in.jsonl"
    inputs.write_text(json.dumps({"sentence": "Lena Holm won ."}) + "\n")
    result = allennlp(
        "predict",
        first_pass / "model.tar.gz",
        inputs,
        "--output-file",
        tmp_path / "out.jsonl",
        "--include-package",
        "nerzoo",
        "--predictor-args",
        json.dumps({"return_tag_probabilities": True}),
        check=False,
    )
    assert result.returncode != 0
    assert "classifies spans and has no tag probabilities" in result.stderr


@pytest.mark.xdist_group("fofe_first_pass")
def test_tag_text_prints_spans_and_takes_an_empty_text(first_pass):
    result = allennlp(
        "tag-text", first_pass / "model.tar.gz", "Lena Holm visited Oslo .", "", "--include-package", "nerzoo"
    )
    lines = result.stdout.splitlines()
    assert lines.count("entities:") == 2 and lines[0].startswith("Lena")
    assert "confidence" in result.stdout


@pytest.mark.xdist_group("fofe_first_pass")
def test_second_pass_trains_on_first_pass_entities_and_predicts(first_pass, tmp_path):
    env = {"FOFE_FIRST_PASS": str(first_pass / "model.tar.gz")}
    run = tmp_path / "second"
    train(SECOND_PASS, run, json.dumps({"trainer.num_epochs": 12}), env=env)
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["best_validation_f1-measure-overall"] > 0.8, metrics
    config = json.loads((run / "config.json").read_text())
    assert config["model"]["first_pass"]["archive_file"] == env["FOFE_FIRST_PASS"]
    predictions = predict(
        run / "model.tar.gz", [{"tokens": ["Lena", "Holm", "visited", "Oslo", "."]}], tmp_path / "second.jsonl", env=env
    )
    assert predictions[0]["spans"]


@pytest.mark.xdist_group("fofe_first_pass")
def test_the_export_tags_the_fixtures_as_allennlp_predict_does(first_pass, tmp_path):
    output = tmp_path / "export"
    result = allennlp("export", first_pass / "model.tar.gz", output, "--include-package", "nerzoo")
    assert json.loads(result.stdout.splitlines()[-1])["check"]["tags_equal"]
    archive, sentences = first_pass / "model.tar.gz", fixture_sentences()
    assert_tags_as_allennlp_predict(archive, output, sentences, tmp_path / "predictions.jsonl")


@pytest.fixture(scope="module")
def nested(tmp_path_factory):
    run = tmp_path_factory.mktemp("fofe") / "nested"
    overrides = {
        **NESTED,
        "test_data_path": "fixtures/nested/test.jsonl",
        "trainer.num_epochs": 30,
        "trainer.patience": None,
        "data_loader.batch_sampler.batch_size": 8,
        "model.thresholds": [0.5, 0.5],
        "model.decoding": ["longest_first", "highest_first"],
    }
    allennlp("train", CONFIG, "-s", run, "--include-package", "nerzoo", "-o", json.dumps(overrides))
    dev = [json.loads(line) for line in (PROJECT_ROOT / "fixtures/nested/dev.jsonl").read_text().splitlines()]
    return run, [{"tokens": sentence["tokens"]} for sentence in dev]


@pytest.mark.xdist_group("fofe_nested")
def test_nested_entities_are_predicted_inside_outer_ones(nested, tmp_path):
    run, lines = nested
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["best_validation_f1-measure-overall"] > 0.5, metrics
    predictions = predict(run / "model.tar.gz", lines, tmp_path / "nested.jsonl")
    inner = [
        (span, outer)
        for prediction in predictions
        for span in prediction["spans"]
        if span["level"] == 2
        for outer in prediction["spans"]
        if outer["level"] == 1 and outer["start"] <= span["start"] and span["end"] <= outer["end"]
    ]
    assert inner, "no nested entity predicted on the nested dev set"


@pytest.mark.xdist_group("fofe_nested")
def test_the_export_decodes_nested_entities_as_the_archive_does(nested, tmp_path):
    run, lines = nested
    sentences = [line["tokens"] for line in lines]
    check = check_file(tmp_path / "check.jsonl", sentences)  # the export stops unless it tags them as the archive
    allennlp("export", run / "model.tar.gz", tmp_path / "export", "--check-file", check, "--include-package", "nerzoo")
    results = Tagger.load(tmp_path / "export").tag(sentences, batch_size=64)
    assert any(span["level"] == 2 for result in results for span in result["spans"])
    # In spaCy, nerzoo's component and the runtime's set the outermost spans as the doc's entities.
    outermost = [[(s["start"], s["end"], s["label"]) for s in result["spans"] if s["level"] == 1] for result in results]
    for factory, config in [
        ("nerzoo_ner", {"archive": str(run / "model.tar.gz")}),
        ("nerzoo_onnx_ner", {"directory": str(tmp_path / "export")}),
    ]:
        nlp = spacy.blank("en")
        nlp.add_pipe(factory, config=config)
        docs = nlp.pipe(Doc(nlp.vocab, words=words) for words in sentences)
        assert [[(entity.start, entity.end, entity.label_) for entity in doc.ents] for doc in docs] == outermost
