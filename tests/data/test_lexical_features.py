import pytest
import torch
from allennlp.common import Params
from allennlp.data import Token, TokenIndexer, Vocabulary

from nerzoo.data.token_indexers.lexical_features_indexer import (
    FEATURE_NAMES,
    LexicalFeaturesIndexer,
    word_shape_features,
)

# word: (starts_with_capital, all_capitals, all_lower_case, non_initial_capital,
#        letters_and_digits, has_punctuation), worked out by hand from the definitions.
EXPECTED = {
    "Peter": (1, 0, 0, 0, 0, 0),
    "EU": (1, 1, 0, 1, 0, 0),
    "the": (0, 0, 1, 0, 0, 0),
    "McDonald": (1, 0, 0, 1, 0, 0),
    "3M": (0, 0, 0, 1, 1, 0),
    "U.S.": (1, 0, 0, 1, 0, 1),
    "iPhone": (0, 0, 0, 1, 0, 0),
    ",": (0, 0, 0, 0, 0, 1),
    "1996": (0, 0, 0, 0, 0, 0),
    "B-52": (1, 0, 0, 0, 1, 1),
    "A": (1, 1, 0, 0, 0, 0),
    "a": (0, 0, 1, 0, 0, 0),
    "--": (0, 0, 0, 0, 0, 1),
    "": (0, 0, 0, 0, 0, 0),
    "1st": (0, 0, 0, 0, 1, 0),
    "e-mail": (0, 0, 0, 0, 0, 1),
    "O'Neill": (1, 0, 0, 1, 0, 1),
    "$": (0, 0, 0, 0, 0, 0),  # a currency symbol (Sc), not punctuation
    "Zürich": (1, 0, 0, 0, 0, 0),
    "ÉTÉ": (1, 1, 0, 1, 0, 0),
    "«": (0, 0, 0, 0, 0, 1),
}


def test_feature_names():
    assert FEATURE_NAMES == [
        "starts_with_capital",
        "all_capitals",
        "all_lower_case",
        "non_initial_capital",
        "letters_and_digits",
        "has_punctuation",
    ]


@pytest.mark.parametrize("word", list(EXPECTED))
def test_word_shape_features(word):
    assert tuple(word_shape_features(word)) == EXPECTED[word]


def test_indexer_indices_and_padding():
    indexer = TokenIndexer.from_params(Params({"type": "lexical_features"}))
    assert isinstance(indexer, LexicalFeaturesIndexer)
    vocab = Vocabulary()
    tokens = [Token("EU"), Token("rejects"), Token("1996")]
    counter = {}
    for token in tokens:
        indexer.count_vocab_items(token, counter)
    assert counter == {}
    indexed = indexer.tokens_to_indices(tokens, vocab)
    assert indexed == {"features": [list(EXPECTED["EU"]), [0, 0, 1, 0, 0, 0], [0] * 6]}
    assert indexer.get_padding_lengths(indexed) == {"features": 3}
    padded = indexer.as_padded_tensor_dict(indexed, {"features": 5})["features"]
    assert padded.dtype == torch.long and padded.shape == (5, 6)
    assert padded[:3].tolist() == indexed["features"] and padded[3:].sum() == 0
    empty = indexer.as_padded_tensor_dict(indexer.get_empty_token_list(), {"features": 2})["features"]
    assert empty.shape == (2, 6) and empty.sum() == 0
