"""
One table over every shipped tagger config: each is trained for one epoch on its fixtures, and its
archive goes through `sequence_tagger` with every predictor option, on good, empty and bad inputs.
Every model must give the same output keys (the contract the predictor reads).
"""

import argparse
import json
import os

import pytest
from allennlp.commands.train import train_model_from_file
from allennlp.common import Params
from allennlp.common.checks import ConfigurationError
from allennlp.models.archival import load_archive
from allennlp.predictors import Predictor

import nerzoo  # noqa: F401
from nerzoo.commands.calibrate import calibrate
from nerzoo.modules.crf.calibration import calibration_modules
from tests import PROJECT_ROOT
from tests.tiny_transformer import tiny_bert_overrides

# Every config under training_config/ but the thread model, which has its own predictor.
CONFIGS = sorted(
    path.stem for path in (PROJECT_ROOT / "training_config").glob("*.jsonnet") if path.stem != "me_crf_thread_discourse"
)
OPTIONS = [
    {},
    {"output_format": "conll"},
    {"return_tag_probabilities": True},
    {"return_attention": True},
    {"spacy_model": "blank:en"},
]
SENTENCE = "Anna Keller of Norvik Bank visited Oslo on Monday ."
GOOD = [{"sentence": SENTENCE}, {"tokens": ["Lena", "Holm", "won", "."]}]
EMPTY = [{"sentence": " "}, {"tokens": []}]
BAD = [{"tokens": 3}, {"text": "no known key"}]
# The attention each model returns with `return_attention`.
ATTENTION = {
    "deptree_ner": {"relative_attention", "global_attention"},
    "deptree_ner_contextual": {"relative_attention", "global_attention"},
    "deptree_ner_gpu": {"relative_attention", "global_attention"},
    "me_crf_conll2003": {"memory_attention"},
    "me_crf_conll2003_contextual": {"memory_attention"},
}
ATTENTION_KEYS = {"relative_attention", "global_attention", "memory_attention"}


def test_the_table_covers_every_shipped_config():
    assert {"bilstm_crf", "deptree_ner", "fofe_ner", "fofe_ner_second_pass", "me_crf_conll2003", "seq2biseq"} <= set(
        CONFIGS
    )


def _train(config, directory, env=None):
    os.environ.update(env or {})
    try:
        path = str(PROJECT_ROOT / "training_config" / f"{config}.jsonnet")
        tiny = tiny_bert_overrides(Params.from_file(path).as_dict(quiet=True))
        train_model_from_file(
            path, str(directory), overrides=json.dumps({**tiny, "trainer.num_epochs": 1, "evaluate_on_test": False})
        )
    finally:
        for key in env or {}:
            os.environ.pop(key)
    return directory / "model.tar.gz"


@pytest.fixture(scope="module")
def archives(tmp_path_factory):
    """Each config's archive, trained when first asked for (the second pass needs the first)."""
    root = tmp_path_factory.mktemp("contract")
    trained = {}

    def archive(config):
        if config not in trained:
            env = None
            if config == "fofe_ner_second_pass":
                env = {"FOFE_FIRST_PASS": str(archive("fofe_ner"))}
            trained[config] = _train(config, root / config, env)
        return trained[config]

    return archive


def _check_result(result, inputs, options, config):
    assert {"tokens", "tags", "tag_confidences", "spans"} <= set(result)
    expected_attention = ATTENTION.get(config, set()) if options.get("return_attention") else set()
    assert set(result) & ATTENTION_KEYS == expected_attention
    if "tokens" in inputs:
        assert result["tokens"] == inputs["tokens"]
    assert len(result["tags"]) == len(result["tokens"]) == len(result["tag_confidences"]) > 0
    assert all(0.0 <= value <= 1.0 for value in result["tag_confidences"])
    for span in result["spans"]:
        assert 0 <= span["start"] < span["end"] <= len(result["tokens"])
    if options.get("return_tag_probabilities"):
        assert len(result["tag_probabilities"]) == len(result["tokens"])
        for probabilities, tag, confidence in zip(
            result["tag_probabilities"], result["tags"], result["tag_confidences"]
        ):
            assert sum(probabilities.values()) == pytest.approx(1.0, abs=1e-4)
            assert probabilities[tag] == pytest.approx(confidence, abs=1e-5)
    else:
        assert "tag_probabilities" not in result


@pytest.mark.xdist_group("predictor_contract")
@pytest.mark.parametrize("config", CONFIGS)
def test_every_option_gives_the_contract(archives, config):
    archive = load_archive(str(archives(config)))
    for options in OPTIONS:
        if options.get("return_tag_probabilities") and config.startswith("fofe_ner"):
            with pytest.raises(ConfigurationError, match="no tag probabilities"):
                Predictor.from_archive(archive, "sequence_tagger", extra_args=options)
            continue
        predictor = Predictor.from_archive(archive, "sequence_tagger", extra_args=options)
        results = predictor.predict_batch_json(GOOD + EMPTY + BAD)
        assert len(results) == len(GOOD + EMPTY + BAD)
        for inputs, result in zip(GOOD, results):
            _check_result(result, inputs, options, config)
            if options.get("output_format") == "conll":
                lines = predictor.dump_line(result).split("\n")
                assert lines[: len(result["tokens"])] == [
                    f"{token}\t{tag}" for token, tag in zip(result["tokens"], result["tags"])
                ]
        for result in results[len(GOOD) : len(GOOD) + len(EMPTY)]:
            assert result["tokens"] == result["tags"] == result["tag_confidences"] == result["spans"] == []
        for result in results[len(GOOD) + len(EMPTY) :]:
            assert set(result) == {"error"}


def _predictions(archive):
    predictor = Predictor.from_archive(archive, "sequence_tagger")
    return predictor.predict_batch_json(GOOD)


def _decisions(results):
    """What a user acts on: the tags and the spans, without their confidences."""
    return [
        (result["tags"], [(span["start"], span["end"], span["label"]) for span in result["spans"]])
        for result in results
    ]


def _confidences(results):
    return [
        result["tag_confidences"] + [span.get("confidence", span.get("score")) for span in result["spans"]]
        for result in results
    ]


@pytest.mark.xdist_group("predictor_contract")
@pytest.mark.parametrize("config", CONFIGS)
def test_temperatures_change_confidences_not_predictions_and_calibrated_archives_round_trip(archives, config, tmp_path):
    archive_file = str(archives(config))
    archive = load_archive(archive_file)
    modules = calibration_modules(archive.model)
    assert modules, f"{config} has no calibration site"
    plain = _predictions(archive)
    for name, module in modules.items():
        module.calibration_site(name).set_temperatures([2.5, 0.4])
    hot = _predictions(archive)
    assert _decisions(hot) == _decisions(plain)
    assert _confidences(hot) != _confidences(plain)

    dev = archive.config["validation_data_path"]
    output_file = tmp_path / "calibrated.tar.gz"
    report = calibrate(
        argparse.Namespace(
            archive_file=archive_file,
            input_file=dev,
            output_file=str(output_file),
            temperatures=2,
            objective="span",
            batch_size=8,
            cuda_device=-1,
            overrides="",
        )
    )
    calibrated = load_archive(str(output_file))
    for key, value in report["temperatures"].items():
        node = calibrated.config.as_dict(quiet=True)["model"]
        for part in key.split("."):
            node = node[part]
        assert node == value > 0
    assert report["dev_nll"] and all(after <= before for before, after in report["dev_nll"].values())
    scores = [key for key in report["before"] if key == "accuracy" or key.endswith("-overall")]
    assert scores and all(report["after"][key] == report["before"][key] for key in scores)
    assert _decisions(_predictions(calibrated)) == _decisions(plain)
