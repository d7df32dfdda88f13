"""The fast path of `fast_character_encoding` in prediction on the CPU: the real tokens encoded alone
(a third of CoNLL-2003's slots in batches of 64), zeros at padding; tests/modules/test_fast_character_encoding.py."""

from typing import Callable

import torch


def encode_real_tokens(encode: Callable[[torch.Tensor], torch.Tensor], token_characters: torch.Tensor) -> torch.Tensor:
    """`(batch_size, num_tokens, num_characters)` ids -> `(batch_size, num_tokens, dim)` by `encode` of the real ones."""
    tokens = (token_characters != 0).any(dim=-1)
    encoded = encode(token_characters[tokens])
    return encoded.new_zeros(*tokens.shape, encoded.size(-1)).index_put_((tokens,), encoded)
