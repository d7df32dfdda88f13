import pytest
from allennlp.common.checks import ConfigurationError
from allennlp.data import Batch, Instance, Vocabulary
from allennlp.data.fields import TextField
from allennlp.data.token_indexers import PretrainedTransformerMismatchedIndexer
from allennlp.data.tokenizers import Token

from nerzoo.data.token_indexers.contextual_word_pieces_indexer import ContextualWordPiecesIndexer
from tests.tiny_transformer import tiny_bert_directory

MODEL = str(tiny_bert_directory(16))  # written by tests/conftest.py
SENTENCES = [
    "EU rejects German call to boycott British lamb .".split(),
    "Peter Blackburn".split(),
    "Anna Keller visited Norvik Bank on Monday .".split() + ["\u200b", "Bank"],  # a word with no piece
    "Antidisestablishmentarianism Bank Bank".split(),
    [],
]


def tensors(indexer, sentences):
    batch = Batch(
        [Instance({"tokens": TextField([Token(word) for word in words], {"t": indexer})}) for words in sentences]
    )
    batch.index_instances(Vocabulary())
    return batch.as_tensor_dict()["tokens"]["t"]


@pytest.mark.parametrize("max_length", [None, 8])
def test_pieces_offsets_and_tensors_equal_allennlps_indexer(max_length):
    reference = tensors(PretrainedTransformerMismatchedIndexer(MODEL, max_length=max_length), SENTENCES)
    output = tensors(ContextualWordPiecesIndexer(MODEL, max_length=max_length), SENTENCES)
    assert output.keys() == reference.keys()
    for key in reference:
        assert output[key].equal(reference[key]), key
    assert (reference["offsets"] == -1).any()  # the word with no piece is covered


def test_a_missing_model_is_refused(tmp_path):
    with pytest.raises(ConfigurationError, match="make install-contextual"):
        ContextualWordPiecesIndexer(str(tmp_path / "absent"))
