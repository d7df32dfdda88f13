import torch
from allennlp.modules.token_embedders import TokenCharactersEncoder, TokenEmbedder


@TokenEmbedder.register("packed_character_encoding")
class PackedCharacterEncoder(TokenCharactersEncoder):
    """
    allennlp's `character_encoding` (`TokenCharactersEncoder`: embed each token's characters, then
    a `Seq2VecEncoder` per token, e.g. the character CNN of Ma & Hovy 2016,
    https://aclanthology.org/P16-1101, §2.1) run on the real tokens of the batch only.

    `character_encoding` encodes every `(batch_size * num_tokens)` slot, padding included; in a
    batch of sentences of mixed lengths most slots can be padding.  This embedder gathers the tokens
    that have characters into one `(num_real_tokens, num_characters)` batch, encodes them, and
    scatters the vectors back; padded slots get zeros.  Real tokens get exactly what
    `character_encoding` gives them, and the parameters have the same names, so the two are
    interchangeable in a config and an archive.

    Registered as a `TokenEmbedder` with name "packed_character_encoding".

    # Parameters

    embedding : `Embedding`, required
        Character embedding (`vocab_namespace: "token_characters"`).
    encoder : `Seq2VecEncoder`, required
        `(num_real_tokens, num_characters, embedding_dim)` -> `(num_real_tokens, output_dim)`.
    dropout : `float`, optional (default = `0.0`)
        Dropout on the encoder output.
    """

    def forward(self, token_characters: torch.Tensor) -> torch.Tensor:
        """`(batch_size, num_tokens, num_characters)` ids -> `(batch_size, num_tokens, output_dim)`."""
        character_mask = token_characters != 0
        tokens = character_mask.any(dim=-1)
        characters = token_characters[tokens]
        encoded = self._encoder._module(self._embedding._module(characters), character_mask[tokens].long())
        output = encoded.new_zeros(*token_characters.shape[:2], encoded.size(-1))
        output[tokens] = encoded
        return self._dropout(output)
