"""
`allennlp export` of a trained me_crf (the shipped config): its memory over whole documents, a CRF
per sentence, word shapes indexed by the runtime; tagged by nerzoo_runtime against `allennlp
predict` for sentences, raw texts and documents (lists of sentences), at batch sizes and lengths the
export never saw.
"""

import json

import pytest
from allennlp.commands.train import train_model_from_file
from allennlp.data import Token
from nerzoo_runtime import Tagger
from nerzoo_runtime.word_shapes import WordShapes

from nerzoo.data.token_indexers.lexical_features_indexer import LexicalFeaturesIndexer
from tests import PROJECT_ROOT, allennlp, predict
from tests.commands.test_export import RAW_TEXTS, assert_same, fixture_sentences

# One trained archive for the module: its tests run on one pytest-xdist worker (--dist loadgroup).
pytestmark = pytest.mark.xdist_group("me_crf_archive")


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    run = tmp_path_factory.mktemp("me_crf") / "model"
    config = PROJECT_ROOT / "training_config" / "me_crf_conll2003.jsonnet"
    train_model_from_file(str(config), str(run), overrides=json.dumps({"trainer.num_epochs": 6}))
    output = tmp_path_factory.mktemp("export") / "tagger"
    result = allennlp("export", run / "model.tar.gz", output, "--include-package", "nerzoo")
    assert json.loads(result.stdout.splitlines()[-1])["check"]["tags_equal"]
    assert json.loads((output / "tagger.json").read_text())["crf_per_sentence"]
    return run / "model.tar.gz", output


def test_the_export_of_me_crf_tags_sentences_and_documents_as_allennlp_predict_does(exported, tmp_path):
    archive, output = exported
    sentences = fixture_sentences()  # and one of 150 words, longer than any the export saw
    documents = [sentences[start : start + 3] for start in range(0, len(sentences) - 1, 3)]
    documents.append([sentences[0], [], sentences[1]])  # an empty sentence, left out as allennlp does
    lines = [{"tokens": words} for words in sentences] + [{"sentence": text} for text in RAW_TEXTS]
    lines += [{"sentences": document} for document in documents]
    texts = [" ".join(" ".join(words) for words in document) for document in documents[:4]]
    texts.append("Peter Blackburn visited Brussels on Monday. He met Anna Keller there. She left for Oslo.")
    lines += [{"document": text} for text in texts]
    expected = predict(archive, lines, tmp_path / "predictions.jsonl")
    assert sum(len(result["spans"]) for result in expected) > 10
    assert len(expected[-1]["sentences"]) == 3
    assert expected[-len(texts) - 1]["sentences"] == [
        [0, len(sentences[0])],
        [len(sentences[0]), len(sentences[0] + sentences[1])],
    ]
    tagger = Tagger.load(output)
    for batch_size in (1, 5, 64):
        got = tagger.tag(
            sentences + RAW_TEXTS + documents + [{"document": text} for text in texts], batch_size=batch_size
        )
        assert_same(got, expected)
        assert [result.get("sentences") for result in got] == [result.get("sentences") for result in expected]


def test_the_runtime_gives_word_shapes_as_the_lexical_features_indexer_does():
    words = ["Peter", "EU", "the", "McDonald", "3M", "B-52", "don't", "1996", "$", "iPhone", "東京", "Zürich", "'s"]
    expected = LexicalFeaturesIndexer().tokens_to_indices([Token(word) for word in words], None)["features"]
    assert WordShapes({"name": "shape"}).feeds([words])["shape"][0].tolist() == expected
