import itertools
from typing import Dict, List

import numpy
import torch
from allennlp.common.checks import ConfigurationError
from allennlp.data import Token, Vocabulary
from allennlp.data.token_indexers import TokenCharactersIndexer, TokenIndexer
from allennlp.data.token_indexers.token_indexer import IndexedTokenList
from allennlp.data.tokenizers import CharacterTokenizer


@TokenIndexer.register("fast_characters")
@TokenIndexer.register("batched_characters")  # the earlier name: archives trained under it still load
class FastCharactersIndexer(TokenCharactersIndexer):
    """
    allennlp's `characters` indexer (`TokenCharactersIndexer`: each token as the ids of its
    characters, for a character CNN such as Ma & Hovy 2016, https://aclanthology.org/P16-1101,
    §2.1) with faster indexing and padding steps.

    allennlp pads an instance's `(num_tokens, num_characters)` ids through `zip_longest` and builds
    the tensor from nested Python lists, which makes it the costliest step of turning a batch of
    instances into tensors.  Here each token's ids are written into a row of one zero array.  And
    allennlp indexes a token by building a `Token` object per character; here, with a plain
    `CharacterTokenizer` (no byte encoding, no character-level start or end tokens), the
    characters are looked up in the vocabulary directly.  Same parameters, vocabulary, ids and
    tensors (truncation included), so the two are interchangeable in a config and an archive.

    Registered as a `TokenIndexer` with name "fast_characters".  Parameters: those of
    `characters` (`namespace`, `character_tokenizer`, `start_tokens`, `end_tokens`,
    `min_padding_length`, `token_min_padding_length`).
    """

    def tokens_to_indices(self, tokens: List[Token], vocabulary: Vocabulary) -> Dict[str, List[List[int]]]:
        tokenizer = self._character_tokenizer
        plain = (
            type(tokenizer) is CharacterTokenizer
            and tokenizer._byte_encoding is None
            and not tokenizer._start_tokens
            and not tokenizer._end_tokens
        )
        if not plain:
            return super().tokens_to_indices(tokens, vocabulary)
        lowercase = bool(tokenizer._lowercase_characters)
        lookup = vocabulary.get_token_to_index_vocabulary(self._namespace)
        indices: List[List[int]] = []
        for token in itertools.chain(self._start_tokens, tokens, self._end_tokens):
            text = token.text
            if text is None:
                raise ConfigurationError("TokenCharactersIndexer needs a tokenizer that retains text")
            if lowercase:
                text = text.lower()
            ids = [lookup.get(character) for character in text]
            if None in ids:  # out-of-vocabulary characters: the vocabulary's own rule
                ids = [vocabulary.get_token_index(character, self._namespace) for character in text]
            indices.append(ids)
        return {"token_characters": indices}

    def as_padded_tensor_dict(
        self, tokens: IndexedTokenList, padding_lengths: Dict[str, int]
    ) -> Dict[str, torch.Tensor]:
        """`padding_lengths`: `token_characters` (tokens) and `num_token_characters` (per token)."""
        num_tokens = padding_lengths["token_characters"]
        num_characters = padding_lengths["num_token_characters"]
        padded = numpy.zeros((num_tokens, num_characters), dtype=numpy.int64)
        for row, characters in zip(padded, tokens["token_characters"]):
            characters = characters[:num_characters]
            row[: len(characters)] = characters
        return {"token_characters": torch.from_numpy(padded)}
