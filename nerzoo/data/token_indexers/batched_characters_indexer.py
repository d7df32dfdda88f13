from typing import Dict

import numpy
import torch
from allennlp.data.token_indexers import TokenCharactersIndexer, TokenIndexer
from allennlp.data.token_indexers.token_indexer import IndexedTokenList


@TokenIndexer.register("batched_characters")
class BatchedCharactersIndexer(TokenCharactersIndexer):
    """
    allennlp's `characters` indexer (`TokenCharactersIndexer`: each token as the ids of its
    characters, for a character CNN such as Ma & Hovy 2016, https://aclanthology.org/P16-1101,
    §2.1) with a faster padding step.

    allennlp pads an instance's `(num_tokens, num_characters)` ids through `zip_longest` and builds
    the tensor from nested Python lists, which makes it the costliest step of turning a batch of
    instances into tensors.  Here each token's ids are written into a row of one zero array.  Same parameters, vocabulary and tensors (truncation included), so the two are
    interchangeable in a config and an archive.

    Registered as a `TokenIndexer` with name "batched_characters".  Parameters: those of
    `characters` (`namespace`, `character_tokenizer`, `start_tokens`, `end_tokens`,
    `min_padding_length`, `token_min_padding_length`).
    """

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
