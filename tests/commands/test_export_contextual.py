"""
`allennlp export` of a bilstm_crf with contextual word vectors (the tests' tiny BERT, inside the
graph), tagged by nerzoo_runtime against `allennlp predict` on the fixtures, odd words and a long
sentence; its word pieces against allennlp's indexer; its refusals.
"""

import json
import subprocess
import sys

import numpy
import pytest
from allennlp.common import Params
from allennlp.data import Batch, Instance, Token
from allennlp.data.fields import TextField
from allennlp.models.archival import load_archive
from nerzoo_runtime import Tagger

from nerzoo.commands import export_graph
from nerzoo.data.dataset_readers.conll_columns import ConllColumnsReader
from tests import FIXTURES_ROOT, allennlp, predict
from tests.tiny_transformer import tiny_bert_overrides

CONFIG = FIXTURES_ROOT / "experiments" / "bilstm_crf_contextual_tiny.jsonnet"
# Accents, scripts the tiny vocabulary lacks, long words, punctuation and words without word pieces
# (control and format characters, a lone combining accent, which the tokenizer removes).
ODD_WORDS = ["Café", "Ünïcödé", "naïve", "Москва", "東京", "Antidisestablishmentarianism", "1996-08-22", "U.S."]
ODD_WORDS += ["...", "'s", "(", "…", "😀", "\u200b", "\x07", "\u0301", "ﬁne", "[SEP]", "x" * 60]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny contextual bilstm_crf trained in-process on the fixtures."""
    from allennlp.commands.train import train_model

    overrides = {**tiny_bert_overrides(Params.from_file(str(CONFIG)).as_dict(quiet=True)), "trainer.num_epochs": 5}
    serialization_dir = tmp_path_factory.mktemp("trained") / "model"
    train_model(Params.from_file(str(CONFIG), json.dumps(overrides)), str(serialization_dir))
    return serialization_dir / "model.tar.gz"


@pytest.fixture(scope="module")
def exported(trained, tmp_path_factory):
    output = tmp_path_factory.mktemp("export") / "tagger"
    result = allennlp("export", trained, output, "--include-package", "nerzoo", "--spacy-model", "blank:en")
    assert json.loads(result.stdout.splitlines()[-1])["check"]["tags_equal"]
    return output


@pytest.fixture(scope="module")
def sentences():
    """The test fixture's sentences, the odd words among fixture words, and a sentence longer than any."""
    reader = ConllColumnsReader(tag_column=3)
    words = [instance["metadata"]["words"] for instance in reader.read(str(FIXTURES_ROOT / "conll2003" / "test.txt"))]
    every = [word for sentence in words for word in sentence]
    return words + [every[:8] + ODD_WORDS + every[8:12], (every * 2)[:120]]


@pytest.fixture(scope="module")
def predicted(trained, sentences, tmp_path_factory):
    expected = predict(trained, [{"tokens": words} for words in sentences], tmp_path_factory.mktemp("p") / "p.jsonl")
    assert sum(len(result["spans"]) for result in expected) > 5
    return expected


def assert_same(got, expected):
    """Tokens, offsets, tags and spans equal, confidences within 1e-4."""
    assert len(got) == len(expected)
    for have, want in zip(got, expected):
        for result in (have, want):
            result["confidences"] = result.pop("tag_confidences") + [span.pop("confidence") for span in result["spans"]]
        assert have["confidences"] == pytest.approx(want["confidences"], abs=1e-4)
        assert {**have, "confidences": None} == {**want, "confidences": None}


def test_the_export_tags_as_allennlp_predict_does(exported, sentences, predicted):
    tagger = Tagger.load(exported)
    for batch_size in (1, 5):
        assert_same(tagger.tag(sentences, batch_size=batch_size), json.loads(json.dumps(predicted)))
    assert sorted(path.name for path in exported.iterdir()) == [
        "model.onnx",
        "model_card.json",
        "tagger.json",
        "transformer.tokenizer.json",
        "vocabularies.json",
    ]
    card = json.loads((exported / "model_card.json").read_text())
    assert card["check"]["largest_confidence_difference"] <= 1e-4


def test_the_word_pieces_are_allennlps(trained, exported, sentences):
    archive = load_archive(str(trained))
    indexers = archive.validation_dataset_reader._token_indexers
    batch = Batch([Instance({"tokens": TextField([Token(word) for word in words], indexers)}) for words in sentences])
    batch.index_instances(archive.model.vocab)
    expected = batch.as_tensor_dict()["tokens"]["transformer"]
    got = Tagger.load(exported).indexers[-1].feeds(sentences)
    for key in export_graph.WORD_PIECES:
        assert numpy.array_equal(got[f"transformer.{key}"], expected[key].numpy()), key
    assert (expected["offsets"] == -1).all(-1).sum() == 3  # the words without pieces
    assert expected["offsets"].diff(dim=-1).max() > 10  # a word wider than any the graph was traced on


def test_a_sentence_over_the_transformers_max_length_is_an_error_for_it_alone(exported, sentences):
    tagger = Tagger.load(exported)
    too_long = sentences[-1] * 3
    results = tagger.tag([sentences[0], too_long, "Oslo ."])
    assert results[0] == tagger.tag([sentences[0]])[0] and results[2]["tokens"] == ["Oslo", "."]
    assert results[1]["error"].startswith("input 1: its ")
    assert (
        "word pieces (start and end included) are more than the transformer's max_length of 512" in results[1]["error"]
    )


def test_tagging_imports_neither_torch_nor_transformers(exported):
    program = (
        "import json, sys\n"
        "from nerzoo_runtime import Tagger\n"
        f"Tagger.load({str(exported)!r}).tag([['Peter', 'Blackburn', 'visited', 'Brussels', '.']])\n"
        "print(json.dumps([name for name in ('allennlp', 'torch', 'transformers') if name in sys.modules]))\n"
    )
    run = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=300, check=True)
    assert json.loads(run.stdout) == []
