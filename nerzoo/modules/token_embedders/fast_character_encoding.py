import torch
from allennlp.modules.token_embedders import TokenCharactersEncoder, TokenEmbedder

from nerzoo.modules.full_precision import without_autocast


@TokenEmbedder.register("fast_character_encoding")
@TokenEmbedder.register("packed_character_encoding")  # the earlier name: archives trained under it still load
class FastCharacterEncoder(TokenCharactersEncoder):
    """
    allennlp's `character_encoding` (`TokenCharactersEncoder`: embed each token's characters, then
    a `Seq2VecEncoder` per token, e.g. the character CNN of Ma & Hovy 2016,
    https://aclanthology.org/P16-1101, §2.1), run in float32 under autocast, with zeros at padded
    tokens.  The same parameters under the same names, so the two are interchangeable in a config
    and an archive.

    Under float16 autocast (`use_amp`) allennlp's `CnnEncoder` gives a word shorter than a filter
    float16's lowest value (-65504: its mask is added in float32 and then looked for at float32's
    lowest), which dropout or an LSTM's float16 input turns into -inf; in float32 it gets 0.

    Registered as a `TokenEmbedder` with name "fast_character_encoding".

    # Parameters

    embedding : `Embedding`, required
        Character embedding (`vocab_namespace: "token_characters"`).
    encoder : `Seq2VecEncoder`, required
        `(batch_size * num_tokens, num_characters, embedding_dim)` -> `(..., output_dim)`.
    dropout : `float`, optional (default = `0.0`)
        Dropout on the encoder output.
    """

    def forward(self, token_characters: torch.Tensor) -> torch.Tensor:
        """`(batch_size, num_tokens, num_characters)` ids -> `(batch_size, num_tokens, output_dim)`, float32."""
        tokens = (token_characters != 0).any(dim=-1, keepdim=True)
        with without_autocast(token_characters):
            return super().forward(token_characters) * tokens
