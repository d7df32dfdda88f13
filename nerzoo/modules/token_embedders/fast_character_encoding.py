import torch
from allennlp.modules.seq2vec_encoders import CnnEncoder
from allennlp.modules.token_embedders import TokenCharactersEncoder, TokenEmbedder
from allennlp.nn.util import min_value_of_dtype

from nerzoo.modules.token_embedders._real_tokens import encode_real_tokens


@TokenEmbedder.register("fast_character_encoding")
@TokenEmbedder.register("packed_character_encoding")  # the earlier name: archives trained under it still load
class FastCharacterEncoder(TokenCharactersEncoder):
    """
    allennlp's `character_encoding` (`TokenCharactersEncoder`: embed each token's characters, then
    a `Seq2VecEncoder` per token, e.g. the character CNN of Ma & Hovy 2016,
    https://aclanthology.org/P16-1101, §2.1), right in every dtype, with zeros at padded tokens.
    The same parameters under the same names, so the two are interchangeable in a config and an
    archive.

    allennlp's `CnnEncoder` masks a window that reaches padding by adding float32's lowest value:
    a word shorter than a filter then gets -inf from it in float64 and -65504 under float16
    autocast (`use_amp`), which an LSTM turns into NaN.  Here padded windows are masked with the lowest
    value of the activations' own dtype, and a word shorter than a filter gets 0 from it, as allennlp
    gives it in float32.  Without gradients on the CPU (prediction), a CNN encodes the real tokens
    only (`_real_tokens`), with the same result.

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
        """`(batch_size, num_tokens, num_characters)` ids -> `(batch_size, num_tokens, output_dim)`."""
        tokens = (token_characters != 0).any(dim=-1, keepdim=True)
        encoder = self._encoder._module
        if not isinstance(encoder, CnnEncoder) or token_characters.size(-1) < max(encoder._ngram_filter_sizes):
            return super().forward(token_characters) * tokens

        def encode(words: torch.LongTensor) -> torch.Tensor:
            return masked_cnn(encoder, self._embedding._module(words), words != 0)

        if token_characters.device.type == "cpu" and not torch.is_grad_enabled():
            return self._dropout(encode_real_tokens(encode, token_characters))
        words = token_characters.reshape(-1, token_characters.size(-1))
        return self._dropout(encode(words).view(*token_characters.shape[:2], -1) * tokens)


def masked_cnn(encoder: CnnEncoder, embedded: torch.Tensor, mask: torch.BoolTensor) -> torch.Tensor:
    """
    `encoder(embedded, mask)`, `(num_words, num_characters, dim)` -> `(num_words, output_dim)`: each
    filter's activations max-pooled over the windows inside the word, 0 for a word shorter than it.
    """
    lengths = mask.sum(dim=1, keepdim=True)
    # Shape: (num_words, dim, num_characters), as Conv1d takes it.
    characters = (embedded * mask.unsqueeze(-1)).transpose(1, 2)
    pooled = []
    for convolution in encoder._convolution_layers:
        height = convolution.kernel_size[0]
        # Shape: (num_words, num_filters, num_windows).
        activations = encoder._activation(convolution(characters))
        outside = torch.arange(activations.size(-1), device=mask.device) > lengths - height
        lowest = min_value_of_dtype(activations.dtype)
        maxima = activations.masked_fill(outside.unsqueeze(1), lowest).max(dim=-1).values
        pooled.append(maxima.masked_fill(lengths < height, 0.0))
    maxpool = torch.cat(pooled, dim=1)
    return encoder.projection_layer(maxpool) if encoder.projection_layer else maxpool
