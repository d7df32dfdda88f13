"""
The fast path of `fast_character_encoding` in prediction on the CPU: the character encoder runs on
the batch's real tokens only (in CoNLL-2003's batches of 64 sentences, a third of the slots), and
the padded slots get zeros, as the readable path gives them.  Tested equal to it in
tests/modules/test_fast_character_encoding.py.
"""

from typing import Callable

import torch


def encode_real_tokens(
    encode: Callable[[torch.LongTensor], torch.Tensor], token_characters: torch.LongTensor
) -> torch.Tensor:
    """`(batch_size, num_tokens, num_characters)` ids -> `(batch_size, num_tokens, dim)`, by `encode`
    `(num_words, num_characters)` -> `(num_words, dim)` of the tokens that have characters."""
    tokens = (token_characters != 0).any(dim=-1)
    encoded = encode(token_characters[tokens])
    output = encoded.new_zeros(*tokens.shape, encoded.size(-1))
    output[tokens] = encoded
    return output
