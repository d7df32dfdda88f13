"""Builds every shipped config against the fixtures and runs one forward pass."""
import pathlib

import pytest
from allennlp.common import Params
from allennlp.data import DatasetReader, Vocabulary
from allennlp.data.batch import Batch
from allennlp.models import Model

import nerzoo  # noqa: F401
from tests import PROJECT_ROOT

# Configs that extend a trained model's archive; they are trained end to end in the test named.
NEEDS_AN_ARCHIVE = {"fofe_ner_second_pass.jsonnet": "tests/test_end_to_end_fofe.py"}
CONFIGS = sorted(
    path for path in (PROJECT_ROOT / "training_config").glob("*.jsonnet") if path.name not in NEEDS_AN_ARCHIVE
)


def test_there_are_configs():
    assert CONFIGS


@pytest.mark.parametrize("config", sorted(NEEDS_AN_ARCHIVE))
def test_configs_needing_an_archive_are_trained_end_to_end(config):
    assert (PROJECT_ROOT / "training_config" / config).exists()
    assert f"training_config/{config}" in (PROJECT_ROOT / NEEDS_AN_ARCHIVE[config]).read_text()


@pytest.mark.parametrize("config", CONFIGS, ids=lambda path: path.name)
def test_config_builds_on_fixtures(config: pathlib.Path):
    params = Params.from_file(str(config))
    assert "fixtures/" in params["train_data_path"], "shipped configs train on the fixtures by default"
    reader = DatasetReader.from_params(params.pop("dataset_reader"))
    instances = list(reader.read(params.pop("train_data_path")))[:8]
    vocab = Vocabulary.from_params(params.pop("vocabulary", Params({})), instances=instances)
    model = Model.from_params(vocab=vocab, params=params.pop("model"))
    batch = Batch(instances)
    batch.index_instances(vocab)
    output = model(**batch.as_tensor_dict())
    assert output["loss"].requires_grad
    output["loss"].backward()
