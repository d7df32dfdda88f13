"""`fast` collation against allennlp's `Batch(instances).as_tensor_dict()`, which it must equal."""

import itertools
import pickle

import pytest
import torch
from allennlp.common import Params
from allennlp.data import Batch, DatasetReader, Instance, Token, Vocabulary
from allennlp.data.data_loaders.data_collator import DataCollator
from allennlp.data.fields import MetadataField, SequenceLabelField, TensorField, TextField
from allennlp.data.token_indexers import SingleIdTokenIndexer
from allennlp.models import Model
from allennlp.models.archival import load_archive
from allennlp.nn import util as nn_util

from nerzoo.data.fast_collator import BatchMetadata, FastCollator, collate
from nerzoo.data.token_indexers.fast_characters_indexer import FastCharactersIndexer
from nerzoo.data.token_indexers.lexical_features_indexer import LexicalFeaturesIndexer
from nerzoo.data.token_indexers.word_and_characters_indexer import WordAndCharactersIndexer
from nerzoo.models.nerzoo_model import tensors_to_device
from tests import FIXTURES_ROOT, PROJECT_ROOT
from tests.test_training_configs import build_on_fixtures, on_fixtures

# Shipped configs, and whether their readers make only the fields `fast` handles itself
# (the contextual configs' word pieces go through `Batch`).
CONFIGS = {
    "bilstm_crf": True,
    "bilstm_crf_pos": True,
    "deptree_ner": True,
    "seq2biseq": True,
    "seq2biseq_pos": True,
    "char_gated_tagger": True,
    "bilstm_crf_contextual": False,
    "me_crf_conll2003": True,
}


def _assert_same(expected, actual, where="batch"):
    if isinstance(actual, BatchMetadata):  # `Batch`'s list of metadata, as a sequence move_to_device leaves whole
        assert type(expected) is list and list(actual) == expected and actual == expected, where
        return
    assert type(expected) is type(actual), where
    if isinstance(expected, dict):
        assert expected.keys() == actual.keys(), where
        for key in expected:
            _assert_same(expected[key], actual[key], f"{where}.{key}")
    elif isinstance(expected, torch.Tensor):
        assert expected.dtype == actual.dtype and expected.shape == actual.shape, where
        assert torch.equal(expected, actual), where
    else:
        assert expected == actual, where


def _indexed_instances(config_name):
    params = on_fixtures(PROJECT_ROOT / "training_config" / f"{config_name}.jsonnet")
    reader = DatasetReader.from_params(params.pop("dataset_reader"))
    instances = list(reader.read(params.pop("validation_data_path")))
    vocab = Vocabulary.from_instances(instances)
    for instance in instances:
        instance.index_fields(vocab)
    return instances


@pytest.mark.parametrize("config_name", CONFIGS)
def test_equals_allennlps_batches_of_every_size(config_name):
    instances = _indexed_instances(config_name)
    assert len(instances) >= 2
    sizes = itertools.cycle([1, 2, 5, 16])
    start = 0
    while start < len(instances):
        batch = instances[start : start + next(sizes)]
        assert (collate(batch) is not None) is CONFIGS[config_name]
        _assert_same(Batch(batch).as_tensor_dict(), FastCollator()(batch))
        start += len(batch)


def _sentence(words, indexers, tags=None):
    text = TextField([Token(word) for word in words], indexers)
    fields = {"tokens": text, "metadata": MetadataField({"words": words})}
    if tags is not None:
        fields["tags"] = SequenceLabelField(tags, text)
    return Instance(fields)


def test_minimum_padding_empty_sentences_and_long_words():
    indexers = {
        "tokens": SingleIdTokenIndexer(lowercase_tokens=True, token_min_padding_length=4),
        "token_characters": FastCharactersIndexer(min_padding_length=3, token_min_padding_length=2),
        "shape": LexicalFeaturesIndexer(token_min_padding_length=5),
        "joint": WordAndCharactersIndexer(min_padding_length=4, token_min_padding_length=3),
    }
    instances = [
        _sentence([], indexers, []),
        _sentence(["a"], indexers, ["O"]),
        _sentence(["Internationalisation", "x", "yz"], indexers, ["B-LOC", "I-LOC", "O"]),
    ]
    vocab = Vocabulary.from_instances(instances)
    for instance in instances:
        instance.index_fields(vocab)
    for batch in ([instances[0]], instances[:2], instances):
        _assert_same(Batch(batch).as_tensor_dict(), collate(batch))
    assert collate(instances)["tokens"]["token_characters"]["token_characters"].shape == (3, 3, 20)
    assert collate(instances)["tokens"]["shape"]["features"].shape[:2] == (3, 5)
    assert collate(instances)["tokens"]["joint"]["token_characters"].shape == (3, 3, 20)


def test_other_fields_go_through_allennlps_batch():
    indexers = {"tokens": SingleIdTokenIndexer()}
    instances = [_sentence(["a", "b"], indexers), _sentence(["c"], indexers)]
    for instance, value in zip(instances, (1.0, 2.0)):
        instance.add_field("score", TensorField(torch.tensor([value])))
    vocab = Vocabulary.from_instances(instances)
    for instance in instances:
        instance.index_fields(vocab)
    assert collate(instances) is None
    _assert_same(Batch(instances).as_tensor_dict(), FastCollator()(instances))


def test_is_the_collate_fn_a_config_names():
    assert isinstance(DataCollator.from_params(Params({"type": "fast"})), FastCollator)


def _assert_same_outputs(expected, actual, count):
    assert len(actual) == len(expected) == count
    for want, got in zip(expected, actual):
        assert want.keys() == got.keys()
        for key in want:
            if hasattr(want[key], "shape"):
                assert (want[key] == got[key]).all(), key
            else:
                assert want[key] == got[key], key


def test_a_taggers_predictions_equal_allennlps_forward_on_instances():
    archive = load_archive(FIXTURES_ROOT / "archives" / "bilstm_crf_tiny.tar.gz")
    model = archive.model.eval()
    instances = list(archive.dataset_reader.read(FIXTURES_ROOT / "conll2003" / "dev.txt"))[:7]
    _assert_same_outputs(Model.forward_on_instances(model, instances), model.forward_on_instances(instances), 7)


@pytest.mark.parametrize("config", ["seq2biseq", "fofe_ner", "deptree_ner"])
def test_every_models_predictions_equal_allennlps_forward_on_instances(config):
    model, instances, _ = build_on_fixtures(PROJECT_ROOT / "training_config" / f"{config}.jsonnet")
    model.eval()
    words_only = [
        Instance({name: field for name, field in instance.fields.items() if name != "tags"}) for instance in instances
    ]
    assert type(model).forward_on_instances is not Model.forward_on_instances
    _assert_same_outputs(
        Model.forward_on_instances(model, words_only), model.forward_on_instances(words_only), len(instances)
    )


def _tensors(value):
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _tensors(item)


def test_a_batchs_tensors_move_and_its_metadata_is_left_alone():
    archive = load_archive(FIXTURES_ROOT / "archives" / "bilstm_crf_tiny.tar.gz")
    instances = list(archive.dataset_reader.read(FIXTURES_ROOT / "conll2003" / "dev.txt"))[:5]
    for instance in instances:
        instance.index_fields(archive.model.vocab)
    batch = FastCollator()(instances)
    moved = tensors_to_device(batch, torch.device("meta"))
    assert moved.keys() == batch.keys()
    assert len(list(_tensors(moved))) == len(list(_tensors(batch))) > 2
    assert all(tensor.device.type == "meta" for tensor in _tensors(moved))
    lists = [name for name, value in batch.items() if isinstance(value, BatchMetadata)]
    assert lists and all(moved[name] is batch[name] for name in lists)


def test_allennlps_move_to_device_leaves_the_metadata_whole(monkeypatch):
    archive = load_archive(FIXTURES_ROOT / "archives" / "bilstm_crf_tiny.tar.gz")
    instances = list(archive.dataset_reader.read(FIXTURES_ROOT / "conll2003" / "dev.txt"))[:8]
    for instance in instances:
        instance.index_fields(archive.model.vocab)
    batch = FastCollator()(instances)
    metadata = batch["metadata"]
    calls = []
    walk = nn_util.move_to_device
    monkeypatch.setattr(nn_util, "move_to_device", lambda obj, device: calls.append(obj) or walk(obj, device))
    moved = nn_util.move_to_device(batch, torch.device("cpu"))
    assert moved["metadata"] is metadata and len(metadata) == 8
    # A call for each dict and tensor of the text field and one for the metadata: none per word.
    assert sum(obj is metadata for obj in calls) == 1 and len(calls) < 12
    assert not any(isinstance(obj, (str, list)) for obj in calls)
    assert [instance["words"] for instance in metadata] == [instance["metadata"]["words"] for instance in instances]
    assert pickle.loads(pickle.dumps(metadata)) == metadata  # for the data loader's worker processes
