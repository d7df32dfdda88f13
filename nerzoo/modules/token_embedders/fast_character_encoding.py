import torch
from allennlp.modules.seq2vec_encoders import CnnEncoder
from allennlp.modules.token_embedders import TokenCharactersEncoder, TokenEmbedder
from allennlp.nn.util import min_value_of_dtype


@TokenEmbedder.register("fast_character_encoding")
@TokenEmbedder.register("packed_character_encoding")  # the earlier name: archives trained under it still load
class FastCharacterEncoder(TokenCharactersEncoder):
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

    An allennlp `cnn` encoder is run as its equivalent matrix product: each window of `h`
    characters (`unfold`) times the convolution's weights seen as a `(num_filters, dim * h)` matrix,
    then the same masking and max-pooling.  On the CPU oneDNN's convolution spends more on setting up
    every batch's shapes than on these small products.  Under float16 autocast (`use_amp`) a word
    shorter than a filter gets 0 from it, as in float32; allennlp's `CnnEncoder` gives it float16's
    lowest value (-65504: its mask is added in float32 and then looked for at float32's lowest),
    which dropout or an LSTM's float16 input turns into -inf.

    Registered as a `TokenEmbedder` with name "fast_character_encoding".

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
        # Gathering the real tokens needs their number on the host: on an accelerator that would
        # stall the device every batch, so there every slot is encoded and the padding zeroed; so
        # too under `torch.compile`, whose graphs need shapes that do not depend on the data.
        pack = token_characters.device.type == "cpu" and not torch.compiler.is_compiling()
        return self.encode(token_characters, pack=pack)

    def encode(self, token_characters: torch.Tensor, pack: bool) -> torch.Tensor:
        """`forward` with the real tokens gathered into one batch (`pack`) or every slot encoded."""
        character_mask = token_characters != 0
        tokens = character_mask.any(dim=-1)
        if pack:
            encoded = self._encode_words(token_characters[tokens], character_mask[tokens])
            output = encoded.new_zeros(*token_characters.shape[:2], encoded.size(-1))
            output[tokens] = encoded
        else:
            words = token_characters.reshape(-1, token_characters.size(-1))
            encoded = self._encode_words(words, character_mask.reshape(words.shape))
            output = encoded.reshape(*token_characters.shape[:2], -1) * tokens.unsqueeze(-1)
        return self._dropout(output)

    def _encode_words(self, characters: torch.LongTensor, mask: torch.BoolTensor) -> torch.Tensor:
        """`(num_words, num_characters)` ids -> `(num_words, output_dim)`."""
        embedded = self._embedding._module(characters)
        encoder = self._encoder._module
        if isinstance(encoder, CnnEncoder) and characters.size(-1) >= max(encoder._ngram_filter_sizes):
            return _cnn_encoder_as_products(encoder, embedded, mask)
        return encoder(embedded, mask.long())


def _cnn_encoder_as_products(encoder: CnnEncoder, embedded: torch.Tensor, mask: torch.BoolTensor) -> torch.Tensor:
    """
    `encoder(embedded, mask)` for an allennlp `CnnEncoder`, each convolution as a product of the
    windows with its weights: `(num_words, num_characters, dim)` -> `(num_words, output_dim)`.
    Padded windows are masked with the lowest value of the activations' dtype (float16 under
    autocast), or with 0 after a ReLU, which gives the same maxima.
    """
    relu = isinstance(encoder._activation, torch.nn.ReLU)
    if not relu:
        embedded = embedded * mask.unsqueeze(-1)
        # Shape: (num_words, 1): windows starting at or after length - h + 1 reach padding.
        lengths = mask.sum(dim=1, keepdim=True)
    num_words, num_characters, dim = embedded.shape
    pooled = []
    for convolution in encoder._convolution_layers:
        height = convolution.kernel_size[0]
        num_windows = num_characters - height + 1
        # Shape: (num_words, num_windows, dim * height), ordered as the weights' (dim, height).
        windows = embedded.unfold(1, height, 1).reshape(num_words, num_windows, dim * height)
        weight = convolution.weight.reshape(convolution.out_channels, dim * height)
        activations = encoder._activation(torch.nn.functional.linear(windows, weight, convolution.bias))
        if relu:
            # A window reaches padding where its last character does.  The activations are at least
            # 0, so a padded window set to 0 never wins the max, and a word shorter than the
            # window gets 0, as in CnnEncoder.
            padded = ~mask[:, height - 1 :].unsqueeze(-1)
            pooled.append(activations.masked_fill(padded, 0.0).max(dim=1)[0])
            continue
        outside = torch.arange(num_windows, device=embedded.device).unsqueeze(0) >= lengths - height + 1
        lowest = min_value_of_dtype(activations.dtype)
        maxima = activations.masked_fill(outside.unsqueeze(-1), lowest).max(dim=1)[0]
        # A word shorter than the window has no window: 0, as in CnnEncoder.
        pooled.append(maxima.masked_fill(lengths < height, 0.0))
    maxpool = torch.cat(pooled, dim=1) if len(pooled) > 1 else pooled[0]
    return encoder.projection_layer(maxpool) if encoder.projection_layer else maxpool
