"""
Archives trained by an earlier layout of nerzoo's modules (fixtures/archives: `bilstm_crf_tiny` and
`fofe_ner_tiny`, trained on the fixtures) load and predict what they predicted when they were made
(fixtures/archives/predictions.json).
"""

import json

import pytest
from allennlp.models.archival import load_archive
from allennlp.predictors import Predictor

import nerzoo  # noqa: F401
from tests import FIXTURES_ROOT

EXPECTED = json.loads((FIXTURES_ROOT / "archives" / "predictions.json").read_text())
SENTENCE = "Peter Blackburn visited Brussels on Monday with Anna Keller ."


def _close(actual, expected, where):
    if isinstance(expected, dict):
        assert sorted(actual) == sorted(expected), where
        for key in expected:
            _close(actual[key], expected[key], f"{where}.{key}")
    elif isinstance(expected, list):
        assert len(actual) == len(expected), where
        for index, (left, right) in enumerate(zip(actual, expected)):
            _close(left, right, f"{where}[{index}]")
    elif isinstance(expected, float):
        assert actual == pytest.approx(expected, abs=1e-5), where
    else:
        assert actual == expected, where


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_an_archive_of_an_earlier_layout_predicts_as_it_did(name):
    predictor = Predictor.from_archive(load_archive(str(FIXTURES_ROOT / "archives" / f"{name}.tar.gz")))
    prediction = predictor.predict_json({"sentence": SENTENCE})
    assert prediction["tag_confidences"]
    _close(prediction, EXPECTED[name], name)
