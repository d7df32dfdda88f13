"""`fast_characters` against allennlp's `characters` indexer, whose tensors it must equal."""

import random

import pytest
import torch
from allennlp.data import Batch, Instance, Token, Vocabulary
from allennlp.data.fields import TextField
from allennlp.data.token_indexers import TokenCharactersIndexer

from nerzoo.data.token_indexers.fast_characters_indexer import FastCharactersIndexer


def _sentences(seed: int):
    generator = random.Random(seed)
    alphabet = "abcdefghijXYZ-'."
    return [
        [
            "".join(generator.choice(alphabet) for _ in range(generator.randint(1, 12)))
            for _ in range(generator.randint(1, 9))
        ]
        for _ in range(12)
    ]


@pytest.mark.parametrize("min_padding_length", [1, 3, 15])
@pytest.mark.parametrize("seed", [0, 1])
def test_batch_tensors_equal_allennlps(min_padding_length, seed):
    sentences = _sentences(seed)
    tensors = []
    for indexer_class in (TokenCharactersIndexer, FastCharactersIndexer):
        indexer = indexer_class(min_padding_length=min_padding_length, start_tokens=["@@S@@"])
        instances = [
            Instance({"tokens": TextField([Token(word) for word in words], {"chars": indexer})}) for words in sentences
        ]
        vocab = Vocabulary.from_instances(instances)
        batch = Batch(instances)
        batch.index_instances(vocab)
        tensors.append(batch.as_tensor_dict()["tokens"]["chars"]["token_characters"])
    assert tensors[1].dtype == tensors[0].dtype == torch.long
    assert tensors[1].shape == tensors[0].shape
    assert torch.equal(tensors[1], tensors[0])


@pytest.mark.parametrize(
    "padding_lengths",
    [
        {"token_characters": 6, "num_token_characters": 4},  # more tokens, shorter words: pads and truncates
        {"token_characters": 2, "num_token_characters": 9},  # fewer tokens than the instance has
        {"token_characters": 3, "num_token_characters": 1},
    ],
)
def test_padding_and_truncation_equal_allennlps(padding_lengths):
    tokens = {"token_characters": [[3, 4, 5, 6, 7], [2], [8, 9, 10]]}
    expected = TokenCharactersIndexer(min_padding_length=1).as_padded_tensor_dict(tokens, padding_lengths)
    result = FastCharactersIndexer(min_padding_length=1).as_padded_tensor_dict(tokens, padding_lengths)
    assert result["token_characters"].shape == expected["token_characters"].shape
    assert torch.equal(result["token_characters"], expected["token_characters"])


@pytest.mark.parametrize(
    "tokenizer",
    [{}, {"lowercase_characters": True}, {"byte_encoding": "utf-8"}, {"start_tokens": ["<w>"], "end_tokens": ["</w>"]}],
    ids=["plain", "lowercase", "bytes", "character start and end"],
)
def test_ids_equal_allennlps_with_unknown_characters(tokenizer):
    from allennlp.data.tokenizers import CharacterTokenizer

    train = [Token(word) for word in ["Abc", "déjà", "x-Y"]]
    test = [Token(word) for word in ["Zq", "ABC", "vu", "é"]]  # Z, q, v, u unseen
    ids = []
    for indexer_class in (TokenCharactersIndexer, FastCharactersIndexer):
        indexer = indexer_class(
            min_padding_length=1, character_tokenizer=CharacterTokenizer(**tokenizer), end_tokens=["@@E@@"]
        )
        vocab = Vocabulary.from_instances([Instance({"tokens": TextField(train, {"chars": indexer})})])
        ids.append(indexer.tokens_to_indices(test, vocab))
    assert ids[1] == ids[0]
    if "byte_encoding" not in tokenizer:  # bytes need no vocabulary
        assert any(1 in word for word in ids[0]["token_characters"])  # the OOV id is used
