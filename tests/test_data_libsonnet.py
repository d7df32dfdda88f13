"""
training_config/data.libsonnet fills what each config declares in `on_real_data`: on every real
data set, every pretrained file of every shipped config is GloVe and nothing points into fixtures/;
a config that holds a pretrained file it does not declare (so that a real data set would leave its
fixture vectors), declares a field that holds none, or declares nothing is a Jsonnet error; and the
task a config declares is the one its reader labels.
"""

import pathlib
from typing import Any, Iterator, Tuple

import pytest

from tests.test_real_data_configs import ALL_CONFIGS, GLOVE, REAL_PAIRS, TRAINING_CONFIG, accepted, jsonnet, params_on

BILSTM_CRF = '(import "bilstm_crf.jsonnet").fixture_config'
TOKEN_EMBEDDERS = "model.text_field_embedder.token_embedders"
# The column of the CoNLL-2003 fixtures each task is read from.
FIXTURE_COLUMNS = {1: "POS", 2: "chunking", 3: "NER"}


def strings(params: Any, path: str = "") -> Iterator[Tuple[str, str]]:
    """(dot-separated path, value) of every string in `params`."""
    if isinstance(params, dict):
        for key, value in params.items():
            yield from strings(value, f"{path}{key}.")
    elif isinstance(params, list):
        for index, value in enumerate(params):
            yield from strings(value, f"{path}{index}.")
    elif isinstance(params, str):
        yield path.rstrip("."), params


def is_pretrained_file(path: str) -> bool:
    keys = path.split(".")
    return keys[-1] == "pretrained_file" or (len(keys) > 1 and keys[-2] == "pretrained_files")


@pytest.mark.parametrize("config, data", REAL_PAIRS, ids=lambda value: getattr(value, "stem", value))
def test_every_pretrained_file_is_glove_on_real_data(config: pathlib.Path, data: str):
    params = params_on(config, data)
    pretrained = {path: value for path, value in strings(params) if is_pretrained_file(path)}
    if params["model"]["type"] != "me_crf_thread_discourse":
        assert any(path.startswith("model.") for path in pretrained)
    assert all(value == GLOVE for value in pretrained.values()), pretrained
    assert not [(path, value) for path, value in strings(params) if value.startswith("fixtures/")]


@pytest.mark.parametrize("config", ALL_CONFIGS, ids=lambda path: path.name)
def test_the_declared_task_is_the_fixture_column_the_reader_labels(config: pathlib.Path):
    fixture_config = jsonnet(f'local c = (import "{config.name}").fixture_config; c + {{ task: c.on_real_data.task }}')
    reader = fixture_config["dataset_reader"]
    column = reader.get("conll", reader).get("tag_column")
    if reader["type"] == "thread_discourse":
        assert fixture_config["task"] == "thread discourse"
    else:
        assert fixture_config["task"] == FIXTURE_COLUMNS[column]


def on(config: str, data: str) -> Any:
    return jsonnet(f'(import "data.libsonnet").on({config}, "{data}")')


def changed(change: str) -> str:
    return f"{BILSTM_CRF} + {{ {change} }}"


@pytest.mark.parametrize("data", accepted(TRAINING_CONFIG / "bilstm_crf.jsonnet"))
@pytest.mark.parametrize(
    "wrong, message",
    [
        # A second pretrained embedder under a key of its own, and one inside another embedder.
        (
            changed(
                "model+: { text_field_embedder+: { token_embedders+: { other: { type: 'embedding', "
                "embedding_dim: 50, pretrained_file: 'fixtures/embeddings/tiny_glove.txt' } } } }"
            ),
            f"pretrained files not in its on_real_data.glove, which would keep their fixture vectors: "
            f"{TOKEN_EMBEDDERS}.other.pretrained_file",
        ),
        (
            changed(
                "model+: { text_field_embedder+: { token_embedders+: { "
                "local tokens = super.tokens, tokens: { type: 'word_dropout', embedder: tokens } } } }"
            ),
            f"pretrained files not in its on_real_data.glove, which would keep their fixture vectors: "
            f"{TOKEN_EMBEDDERS}.tokens.embedder.pretrained_file",
        ),
        (
            changed("vocabulary+: { pretrained_files+: { characters: 'fixtures/embeddings/tiny_glove.txt' } }"),
            "pretrained files not in its on_real_data.glove, which would keep their fixture vectors: "
            "vocabulary.pretrained_files.characters",
        ),
        (
            changed("on_real_data+:: { glove+: ['model.encoder.pretrained_file'] }"),
            "on_real_data.glove names fields that hold no pretrained file: model.encoder.pretrained_file",
        ),
        # Without its hidden fields.
        (f"std.mergePatch({BILSTM_CRF}, {{}})", "the config declares no `on_real_data"),
    ],
    ids=["another-key", "wrapped", "vocabulary", "declared-but-absent", "undeclared"],
)
def test_a_config_that_does_not_declare_its_pretrained_files_is_an_error(wrong: str, message: str, data: str):
    assert on(BILSTM_CRF, data)["model"]["type"] == "bilstm_crf"
    with pytest.raises(RuntimeError) as error:
        on(wrong, data)
    assert f"model bilstm_crf: {message}" in str(error.value).splitlines()[0]
