"""
One table over every component nerzoo registers (as thinc's layer API test does): each entry is
built from a tiny config and checked.  A newly registered component that is missing from the table
fails `test_every_registered_component_is_in_the_table`.
"""
import argparse
import importlib
import inspect

import pytest
from allennlp.commands.subcommand import Subcommand
from allennlp.common import Params, Registrable
from allennlp.data import DatasetReader, Vocabulary
from allennlp.models import Model
from allennlp.predictors import Predictor
from allennlp.training.metrics import Metric

import nerzoo  # noqa: F401
from tests import FIXTURES_ROOT

COMPONENTS = {
    (DatasetReader, "conll_columns"): {"tag_column": 3},
    (Metric, "conll_span_f1"): {"entity_types": ["LOC", "PER"]},
    (Model, "bilstm_crf"): None,  # built and trained in tests/models/test_bilstm_crf.py
    (Predictor, "entity_tagger"): None,  # needs a model: tests/predictors/
    (Subcommand, "tag-text"): None,  # see test_tag_text_subcommand_parses
}


def _nerzoo_registrations():
    for base, registry in Registrable._registry.items():
        for name, (cls, _) in registry.items():
            if cls.__module__.startswith("nerzoo."):
                yield base, name


def test_every_registered_component_is_in_the_table():
    assert set(_nerzoo_registrations()) == set(COMPONENTS)


def test_names_do_not_clash_with_allennlp_models():
    # Importing allennlp-models' registrations after nerzoo's raises on any duplicate name.
    for module in ("allennlp_models.tagging", "allennlp_models.structured_prediction", "allennlp_models.coref"):
        importlib.import_module(module)


@pytest.mark.parametrize("key", [key for key, params in COMPONENTS.items() if params is not None], ids=lambda key: key[1])
def test_component_builds_from_params(key):
    base, name = key
    component = base.from_params(Params({"type": name, **COMPONENTS[key]}))
    assert inspect.getmodule(type(component)).__name__.startswith("nerzoo.")
    if base is DatasetReader:
        instances = list(component.read(FIXTURES_ROOT / "conll2003" / "dev.txt"))
        vocab = Vocabulary.from_instances(instances)
        assert vocab.get_vocab_size("labels") > 1
    if base is Metric:
        component([["U-PER"]], [["U-PER"]])
        assert component.get_metric()["f1-measure-overall"] == 1.0


def test_tag_text_subcommand_parses():
    parser = argparse.ArgumentParser()
    Subcommand.by_name("tag-text")().add_subparser(parser.add_subparsers())
    args = parser.parse_args(["tag-text", "model.tar.gz", "One .", "Two .", "--spacy-model", "blank:en"])
    assert args.archive_file == "model.tar.gz" and args.text == ["One .", "Two ."]
    assert args.spacy_model == "blank:en" and callable(args.func)
