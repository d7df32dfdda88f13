"""
Builds every shipped config against the fixtures and runs one forward pass; checks that its batches
hold instances of similar length.
"""

import collections
import copy
import json
import pathlib
import random
from typing import Any, Dict, List

import pytest
import torch
from allennlp.common import Params
from allennlp.data import DataLoader, DatasetReader, Vocabulary
from allennlp.data.batch import Batch
from allennlp.data.fields import Field, ListField, TextField
from allennlp.models import Model
from allennlp.modules.text_field_embedders import BasicTextFieldEmbedder
from allennlp.modules.token_embedders import Embedding

import nerzoo  # noqa: F401
from tests import PROJECT_ROOT
from tests.tiny_transformer import tiny_bert_overrides

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


def on_fixtures(config: pathlib.Path, overrides: str = "") -> Params:
    """
    The config's params (on the fixtures, as every shipped config is), `overrides` (JSON) applied,
    and its transformers the tests' tiny BERT (tests/tiny_transformer.py).
    """
    overrides_dict = json.loads(overrides or "{}")
    tiny = tiny_bert_overrides(Params.from_file(str(config), overrides_dict).as_dict(quiet=True))
    return Params.from_file(str(config), {**tiny, **overrides_dict})


def build_on_fixtures(config: pathlib.Path, overrides: str = ""):
    """The config's model and its first 8 training instances, with the vocabulary built from them."""
    params = on_fixtures(config, overrides)
    assert "fixtures/" in params["train_data_path"], "shipped configs train on the fixtures by default"
    reader = DatasetReader.from_params(params.pop("dataset_reader"))
    instances = list(reader.read(params.pop("train_data_path")))[:8]
    vocab = Vocabulary.from_params(params.pop("vocabulary", Params({})), instances=instances)
    return Model.from_params(vocab=vocab, params=params.pop("model")), instances, vocab


@pytest.mark.parametrize("config", CONFIGS, ids=lambda path: path.name)
def test_config_predicts_under_inference_mode_then_trains(config: pathlib.Path):
    # `allennlp serve` predicts under `torch.inference_mode()`; a training step follows in the same
    # process (as in a notebook), and predictions under `no_grad` equal the served ones.
    model, instances, vocab = build_on_fixtures(config)
    batch = Batch(instances)
    batch.index_instances(vocab)
    model.eval()
    with torch.inference_mode():
        served = model.make_output_human_readable(model(**batch.as_tensor_dict()))
    model.train()
    output = model(**batch.as_tensor_dict())
    assert output["loss"].requires_grad
    output["loss"].backward()
    model.eval()
    with torch.no_grad():
        predicted = model.make_output_human_readable(model(**batch.as_tensor_dict()))
    for key, value in served.items():
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            assert torch.allclose(value, predicted[key], atol=1e-5), key


@pytest.mark.parametrize("config", CONFIGS, ids=lambda path: path.name)
def test_regularizer_leaves_embedding_tables_alone(config: pathlib.Path):
    # An l2 term over a whole embedding table pulls the rows of words absent from a batch towards 0,
    # and with Adam by a step of about lr per update whatever the penalty's size: pretrained vectors
    # of words never seen in training would be erased.
    model, _, _ = build_on_fixtures(config)
    tables = [
        (name + ".weight", module.weight)
        for name, module in model.named_modules()
        if isinstance(module, (Embedding, torch.nn.Embedding))
        and module.weight.requires_grad
        and not name.startswith("label_embedding")
    ]
    if not tables:
        pytest.skip("no trainable embedding table")
    penalty = model.get_regularization_penalty()
    if penalty is None or not penalty.requires_grad:
        return
    gradients = torch.autograd.grad(penalty, [weight for _, weight in tables], allow_unused=True)
    reached = [
        name for (name, _), gradient in zip(tables, gradients) if gradient is not None and gradient.abs().sum() > 0
    ]
    assert not reached, f"the regularizer reaches {reached}"


def filled_namespaces(indexer, instances) -> set:
    """The vocabulary namespaces `indexer` counts the tokens of `instances` into."""
    counter: Dict[str, Dict[str, int]] = collections.defaultdict(lambda: collections.defaultdict(int))
    fields = [field for instance in instances for field in instance.fields.values()]
    while fields:
        field = fields.pop()
        fields.extend(field.field_list if isinstance(field, ListField) else [])
        for token in field.tokens if isinstance(field, TextField) else []:
            indexer.count_vocab_items(token, counter)
    return set(counter)


@pytest.mark.parametrize("config", CONFIGS, ids=lambda path: path.name)
def test_each_embedding_has_a_row_per_entry_of_its_indexers_namespace(config: pathlib.Path):
    # An embedding sized by another namespace (a character table with a row per word) trains, but
    # starts and regularises its vectors at the wrong scale.
    model, instances, vocab = build_on_fixtures(config)
    indexers = on_fixtures(config).as_dict(quiet=True)["dataset_reader"].get("token_indexers", {})
    reader_indexers = DatasetReader.from_params(on_fixtures(config).pop("dataset_reader"))._token_indexers
    checked = 0
    for field_embedder in (module for module in model.modules() if isinstance(module, BasicTextFieldEmbedder)):
        for key, embedder in field_embedder._token_embedders.items():
            if key not in indexers:
                continue
            namespaces = filled_namespaces(reader_indexers[key], instances)
            for name, table in embedder.named_modules():
                if isinstance(table, Embedding) and table._vocab_namespace is not None:
                    where = f"{key}.{name}: namespace {table._vocab_namespace!r}, indexer fills {sorted(namespaces)}"
                    assert table._vocab_namespace in namespaces, where
                    assert table.num_embeddings == vocab.get_vocab_size(table._vocab_namespace), where
                    checked += 1
    if not checked:
        pytest.skip("no embedding table sized by a vocabulary")


def labelled_sequence(instance) -> Field:
    """The field the labels run over: `tags` (sentences, documents, threads) or fofe_ner's `entities`."""
    return instance.fields["tags"] if "tags" in instance.fields else instance.fields["entities"]


def check_sorting_keys(sampler: Dict[str, Any], instances) -> None:
    """The bucket sampler sorts by the length of the labelled sequence, a field every instance has."""
    assert sampler["type"] == "bucket"
    # Explicit keys: the sampler's guess takes the longest field of a few instances, which can be
    # the metadata (its number of entries) for short sentences.
    assert sampler["sorting_keys"]
    for instance in instances:
        for key in sampler["sorting_keys"]:
            assert isinstance(instance.fields.get(key), (TextField, ListField)), (key, list(instance.fields))
            assert len(instance.fields[key]) == len(labelled_sequence(instance)), key


def padded_positions(batches: List[List[int]], lengths: List[int]) -> int:
    """Positions of the padded batches: per batch, its size times its longest instance."""
    return sum(len(batch) * max(lengths[index] for index in batch) for batch in batches)


@pytest.mark.parametrize("config", CONFIGS, ids=lambda path: path.name)
def test_config_batches_instances_of_similar_length(config: pathlib.Path):
    params = on_fixtures(config).as_dict(quiet=True)
    reader_params = params["dataset_reader"]
    loaders = {
        "data_loader": (reader_params, params["train_data_path"]),
        "validation_data_loader": (
            params.get("validation_dataset_reader", reader_params),
            params["validation_data_path"],
        ),
    }
    for name, (reader, data_path) in loaders.items():
        sampler = params[name]["batch_sampler"]
        loader = DataLoader.from_params(
            Params(copy.deepcopy(params[name])),
            reader=DatasetReader.from_params(Params(copy.deepcopy(reader))),
            data_path=data_path,
        )
        instances = list(loader.iter_instances())
        check_sorting_keys(sampler, instances)
        lengths = [len(instance.fields[sampler["sorting_keys"][0]]) for instance in instances]
        random.seed(0)
        batches = list(loader.batch_sampler.get_batch_indices(instances))
        assert sorted(index for batch in batches for index in batch) == list(range(len(instances))), name
        assert sum(len(batch) < sampler["batch_size"] for batch in batches) <= 1, name
        if name == "validation_data_loader":
            # No noise and no shuffling: the batches follow one another in length order.
            assert loader.batch_sampler.padding_noise == 0.0
            assert [lengths[index] for batch in batches for index in batch] == sorted(lengths)
        else:
            # The noisy sort pads far less than batches cut in file order, nearly as little as
            # batches cut from the exactly sorted instances.
            size = sampler["batch_size"]
            by_length = sorted(range(len(instances)), key=lambda index: lengths[index])
            least = padded_positions(
                [by_length[start : start + size] for start in range(0, len(instances), size)], lengths
            )
            in_file_order = [
                list(range(start, min(start + size, len(instances)))) for start in range(0, len(instances), size)
            ]
            unsorted = padded_positions(in_file_order, lengths)
            assert padded_positions(batches, lengths) - least <= (unsorted - least) / 2, name


def restart_conflict(trainer: Dict[str, Any]) -> str:
    """
    Why a trainer's early stopping or epoch count cuts a cosine schedule with warm restarts short
    ("" when it does not): the rate jumps back up at every restart, so `patience` can stop training
    right after one, before the new cycle anneals, and a `num_epochs` inside a cycle ends it hot.
    """
    scheduler = trainer.get("learning_rate_scheduler") or {}
    if scheduler.get("type") != "cosine":
        return ""
    cycle, factor = scheduler["t_initial"], scheduler.get("t_mul", 1.0)
    ends, end = [], 0
    while end < trainer["num_epochs"]:
        end += int(cycle)
        cycle *= factor
        ends.append(end)
    if trainer.get("patience") is not None:
        return f"patience {trainer['patience']} beside warm restarts at epochs {ends[:-1]}"
    if trainer["num_epochs"] not in ends:
        return f"num_epochs {trainer['num_epochs']} is not the end of a cycle ({ends})"
    return ""


def test_restart_conflicts_are_seen():
    cosine = {"type": "cosine", "t_initial": 10, "t_mul": 2.0}
    assert restart_conflict({"learning_rate_scheduler": cosine, "num_epochs": 30, "patience": 10})
    assert restart_conflict({"learning_rate_scheduler": cosine, "num_epochs": 40, "patience": None})
    assert not restart_conflict({"learning_rate_scheduler": cosine, "num_epochs": 150})
    assert not restart_conflict({"num_epochs": 30, "patience": 5})


@pytest.mark.parametrize("config", CONFIGS, ids=lambda path: path.name)
def test_warm_restarts_are_not_cut_short(config: pathlib.Path):
    assert restart_conflict(on_fixtures(config).as_dict(quiet=True)["trainer"]) == ""


def test_deptree_paper_schedule_in_its_comments_is_not_cut_short():
    config = PROJECT_ROOT / "training_config" / "deptree_ner.jsonnet"
    lines = [line.strip() for line in config.read_text().splitlines()]
    comments = "".join(line[2:].strip() for line in lines if line.startswith("//"))
    overrides = comments[comments.index("-o '") + 4 : comments.index("}'", comments.index("-o '")) + 1]
    params = on_fixtures(config, overrides)
    trainer = params.as_dict(quiet=True)["trainer"]
    assert trainer["optimizer"] == {"type": "sgd", "lr": 0.005, "momentum": 0.9}
    assert restart_conflict(trainer) == ""


@pytest.mark.parametrize("config", CONFIGS, ids=lambda path: path.name)
def test_config_leaves_the_device_to_allennlp(config: pathlib.Path):
    """No hard-coded device: allennlp's trainer takes GPU 0 when there is one, else the CPU."""
    trainer = on_fixtures(config).as_dict(quiet=True)["trainer"]
    assert "cuda_device" not in trainer
