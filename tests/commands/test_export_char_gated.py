"""
`allennlp export` of a trained char_gated_tagger (the `word_and_characters` indexer, a character
`lstm`), tagged by nerzoo_runtime against `allennlp predict` at batch sizes and lengths the export
never saw; the runtime's indexer against allennlp's, and the export's form of the character `lstm`.
"""

import json

import numpy
import pytest
import torch
from allennlp.commands.train import train_model_from_file
from allennlp.data import Instance, Token, Vocabulary
from allennlp.data.batch import Batch
from allennlp.data.fields import TextField
from allennlp.models.archival import load_archive
from allennlp.modules.seq2vec_encoders import (
    AugmentedLstmSeq2VecEncoder,
    GruSeq2VecEncoder,
    LstmSeq2VecEncoder,
    RnnSeq2VecEncoder,
)
from nerzoo_runtime.tagger import runtime_indexers

from nerzoo.commands import export
from nerzoo.data.token_indexers.word_and_characters_indexer import WordAndCharactersIndexer
from nerzoo.modules.seq2seq_encoders.allennlp_export_forms import RnnFinalStates
from tests import PROJECT_ROOT, allennlp
from tests.commands.test_export import assert_tags_as_allennlp_predict, fixture_sentences

# One trained archive for the module: its tests run on one pytest-xdist worker (--dist loadgroup).
pytestmark = pytest.mark.xdist_group("char_gated_archive")
EMBEDDER = "model.text_field_embedder.token_embedders.tokens."
# The shipped config, small: a few seconds of training that tag some of the fixtures' chunks.
TINY = {
    "trainer.num_epochs": 4,
    "trainer.optimizer.lr": 0.01,
    "model.encoder.hidden_size": 16,
    "model.head.hidden_dim": 12,
    EMBEDDER + "character_embedding.embedding_dim": 8,
    EMBEDDER + "character_encoder.input_size": 8,
    EMBEDDER + "character_encoder.hidden_size": 8,
}


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    run = tmp_path_factory.mktemp("char_gated") / "model"
    config = PROJECT_ROOT / "training_config" / "char_gated_tagger.jsonnet"
    train_model_from_file(str(config), str(run), overrides=json.dumps(TINY))
    return run / "model.tar.gz"


def test_the_export_of_a_char_gated_tagger_tags_the_fixtures_as_allennlp_predict_does(archive, tmp_path):
    output = tmp_path / "tagger"
    result = allennlp("export", archive, output, "--include-package", "nerzoo")
    assert json.loads(result.stdout.splitlines()[-1])["check"]["tags_equal"]
    assert [indexer["type"] for indexer in json.loads((output / "tagger.json").read_text())["indexers"]] == [
        "word_and_characters"
    ]
    sentences = fixture_sentences()
    sentences.append(([word for words in sentences[:-1] for word in words] * 2)[:150])  # longer than any
    assert len(sentences[-1]) == 150
    assert_tags_as_allennlp_predict(archive, output, sentences, tmp_path / "predictions.jsonl")


@pytest.mark.parametrize("lowercase, min_padding_length", [(True, 1), (False, 9)])
def test_the_runtime_indexes_words_as_the_word_and_characters_indexer_does(lowercase, min_padding_length):
    indexer = WordAndCharactersIndexer(lowercase_tokens=lowercase, min_padding_length=min_padding_length)
    sentences = [["Anna", "Keller", "flew", "."], ["OSLO"], ["anna", "Zürich", "xyzzy"]]
    instances = [Instance({"text": TextField([Token(w) for w in s], {"tokens": indexer})}) for s in sentences[:2]]
    vocab = Vocabulary.from_instances(instances)  # "Zürich" and "xyzzy" are out of it
    batch = Batch([Instance({"text": TextField([Token(w) for w in s], {"tokens": indexer})}) for s in sentences])
    batch.index_instances(vocab)
    expected = batch.as_tensor_dict()["text"]["tokens"]
    settings = {"name": "tokens", **indexer.export_settings(vocab)}
    vocabularies = {
        space: [vocab.get_token_from_index(i, space) for i in range(vocab.get_vocab_size(space))]
        for space in ("tokens", "token_characters")
    }
    parts = runtime_indexers(settings, vocabularies, PROJECT_ROOT)  # the words' ids and the characters'
    feeds = {name: ids for part in parts for name, ids in part.feeds(sentences).items()}
    assert sorted(feeds) == ["tokens.token_characters", "tokens.token_ids"]
    for key in ("token_ids", "token_characters"):
        assert feeds[f"tokens.{key}"].dtype == numpy.int64
        numpy.testing.assert_array_equal(feeds[f"tokens.{key}"], expected[key].numpy())


@pytest.mark.parametrize("encoder_class", [LstmSeq2VecEncoder, GruSeq2VecEncoder, RnnSeq2VecEncoder])
@pytest.mark.parametrize("num_layers, bidirectional", [(1, True), (2, True), (2, False)])
def test_the_exported_form_of_a_character_rnn_gives_its_final_states(encoder_class, num_layers, bidirectional):
    torch.manual_seed(0)
    encoder = encoder_class(5, 4, num_layers=num_layers, bidirectional=bidirectional).eval()
    inputs = torch.randn(4, 6, 5)
    mask = torch.arange(6)[None] < torch.tensor([6, 1, 3, 0])[:, None]  # a row without steps: zeros
    with torch.no_grad():
        expected = encoder(inputs, mask)
        got = RnnFinalStates(encoder)(inputs, mask)
    assert got.shape == expected.shape == (4, encoder.get_output_dim())
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-6)


def test_a_character_encoder_without_an_exported_form_is_named_before_tracing(archive):
    loaded = load_archive(str(archive))
    embedder = loaded.model.text_field_embedder._token_embedders["tokens"]
    embedder._character_encoder = AugmentedLstmSeq2VecEncoder(8, 8)
    with pytest.raises(
        export.ConfigurationError,
        match="cannot export this bilstm_crf: its encoder 'augmented_lstm' has no exported form",
    ):
        export.traced_scores(loaded)
