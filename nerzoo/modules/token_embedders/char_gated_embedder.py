from typing import Dict, Optional, Tuple

import torch
from allennlp.common.checks import ConfigurationError, check_dimensions_match
from allennlp.data import Vocabulary
from allennlp.modules.seq2vec_encoders import Seq2VecEncoder
from allennlp.modules.token_embedders.embedding import Embedding
from allennlp.modules.token_embedders.token_embedder import TokenEmbedder

from nerzoo.modules.auxiliary_loss import AuxiliaryLossTerms

COMBINATIONS = ("gate", "concatenate")


@TokenEmbedder.register("char_gated")
class CharGatedEmbedder(TokenEmbedder):
    """
    The character-attention word representation of Rei, Crichton and Pyysalo, "Attending to
    characters in neural sequence labeling models" (COLING 2016,
    https://aclanthology.org/C16-1030; described in Rei's blog post of the same title).

    For token `t`, `x_t` (size `d`) is its word embedding (`word_embedding`, possibly from a
    pretrained file).  Its characters are embedded (`character_embedding`) and read by
    `character_encoder` (in the paper a bidirectional LSTM whose final states of both directions
    are concatenated); a feed-forward layer maps the result to the word-embedding size:

        m_t = tanh(W_m h_t + b_m)                                   (size d)

    With `combination = "gate"` (the paper's "char attn") the two are mixed feature by feature
    with weights predicted from both:

        z_t  = sigmoid(W_z3 tanh(W_z1 x_t + W_z2 m_t))              (W_z1 without bias)
        x~_t = z_t * x_t + (1 - z_t) * m_t                          (size d)

    `z_t` near 1 takes a feature from the word embedding, near 0 from the characters.  With
    `combination = "concatenate"` (the paper's "char concat" baseline, after Lample et al. 2016)
    the output is `x~_t = [x_t; m_t]` (size 2d) and there are no gate weights.

    So that the features of `m_t` line up with those of `x_t`, the paper adds to the tagging loss

        E~ = E + sum_t g_t (1 - cos(m_t, x_t)),    g_t = 0 if w_t is OOV (or padding), else 1,

    with no gradient into `x_t`.  Here it is weighted by `cosine_loss_weight`, computed in float32
    and handed to the model as the auxiliary loss "char_cosine" (`nerzoo.modules.auxiliary_loss`).

    It needs both the word id and the characters, so it pairs with the "word_and_characters" token
    indexer under the same name (as `training_config/char_gated_tagger.libsonnet` does), and
    `character_embedding` needs `vocab_namespace: "token_characters"`.  Words without characters
    (padding) skip the character encoder: `m_t = tanh(b_m)` and `g_t = 0`.

    Registered as a `TokenEmbedder` with name "char_gated".

    # Parameters

    vocab : `Vocabulary`, required
        Passed automatically when built from params; gives the OOV id of `vocab_namespace`.
    word_embedding : `Embedding`, required
        Gives `x_t`, size `d = word_embedding.get_output_dim()`.
    character_embedding : `Embedding`, required
        Embeds the character ids.
    character_encoder : `Seq2VecEncoder`, required
        Reads the embedded characters of each word, `(num_words, num_characters, input_dim)` ->
        `(num_words, output_dim)`; its input size must equal the character embedding size.
    vocab_namespace : `str`, optional (default = `"tokens"`)
        Namespace of the word ids, for the OOV id.
    combination : `str`, optional (default = `"gate"`)
        "gate" (`z * x + (1 - z) * m`, size `d`) or "concatenate" (`[x; m]`, size `2d`).
    cosine_loss_weight : `float`, optional (default = `1.0`)
        Weight of the cosine loss; 0 turns it off (the paper's "char concat" baseline has none).
    dropout : `float`, optional (default = `0.0`)
        Dropout on `m_t` before it is combined with `x_t` (the cosine loss sees `m_t` without it).
    """

    def __init__(
        self,
        vocab: Vocabulary,
        word_embedding: Embedding,
        character_embedding: Embedding,
        character_encoder: Seq2VecEncoder,
        vocab_namespace: str = "tokens",
        combination: str = "gate",
        cosine_loss_weight: float = 1.0,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        if combination not in COMBINATIONS:
            raise ConfigurationError(
                f"CharGatedEmbedder combination must be one of {COMBINATIONS}, got {combination!r}."
            )
        if cosine_loss_weight < 0:
            raise ConfigurationError(f"CharGatedEmbedder needs cosine_loss_weight >= 0, got {cosine_loss_weight}.")
        if not 0.0 <= dropout < 1.0:
            raise ConfigurationError(f"CharGatedEmbedder needs 0 <= dropout < 1, got {dropout}.")
        check_dimensions_match(
            character_embedding.get_output_dim(),
            character_encoder.get_input_dim(),
            "character embedding dim",
            "character encoder input dim",
        )
        try:
            self._oov_index = vocab.get_token_index(vocab._oov_token, vocab_namespace)
        except KeyError:
            raise ConfigurationError(
                f"CharGatedEmbedder needs an OOV token in the namespace {vocab_namespace!r} (a padded namespace)."
            ) from None
        self._combination = combination
        self._cosine_loss_weight = cosine_loss_weight

        self._word_embedding = word_embedding
        self._character_embedding = character_embedding
        self._character_encoder = character_encoder
        self._word_dim = word_embedding.get_output_dim()
        # h_t -> m_t, (num_words, encoder output dim) -> (num_words, d).
        self._character_projection = torch.nn.Linear(character_encoder.get_output_dim(), self._word_dim)
        self._dropout = torch.nn.Dropout(dropout)

        gate = combination == "gate"
        dim = self._word_dim
        self._gate_word = torch.nn.Linear(dim, dim, bias=False) if gate else None  # W_z1
        self._gate_character = torch.nn.Linear(dim, dim) if gate else None  # W_z2
        self._gate_output = torch.nn.Linear(dim, dim) if gate else None  # W_z3

        self._auxiliary_losses = AuxiliaryLossTerms()

    def pop_auxiliary_losses(self) -> Dict[str, torch.Tensor]:
        """The cosine loss terms of the forward passes since the last call (`{}` without one), cleared."""
        return self._auxiliary_losses.pop()

    def get_output_dim(self) -> int:
        return self._word_dim if self._combination == "gate" else 2 * self._word_dim

    def forward(self, token_ids: torch.LongTensor, token_characters: torch.LongTensor) -> torch.Tensor:
        """`(batch_size, num_tokens)` ids and `(batch_size, num_tokens, num_characters)` character ids, 0 at
        padding -> `(batch_size, num_tokens, get_output_dim())`."""
        words = self._word_embedding(token_ids)  # (batch_size, num_tokens, d)
        characters = self.character_representation(token_characters)
        if self._cosine_loss_weight > 0:
            self._auxiliary_losses.add("char_cosine", self.cosine_loss(token_ids, words, characters))
        output, _ = self.combine(words, self._dropout(characters))
        return output

    def character_representation(self, token_characters: torch.LongTensor) -> torch.Tensor:
        """
        `m_t = tanh(W_m h_t + b_m)` for every token, from `token_characters` of shape
        `(batch_size, num_tokens, num_characters)`; returns `(batch_size, num_tokens, d)`.  Only
        words with at least one character go through the encoder; the others get `h_t = 0`.
        """
        batch_size, num_tokens, num_characters = token_characters.shape
        # (batch_size * num_tokens, num_characters)
        flat_characters = token_characters.reshape(batch_size * num_tokens, num_characters)
        character_mask = flat_characters != 0
        # (num_real_words,)
        real_words = character_mask.any(dim=-1).nonzero(as_tuple=True)[0]
        encoder_dim = self._character_encoder.get_output_dim()
        if real_words.numel() == 0:
            encoded = flat_characters.new_zeros(
                (batch_size * num_tokens, encoder_dim), dtype=self._character_projection.weight.dtype
            )
        else:
            # (num_real_words, num_characters)
            selected = flat_characters.index_select(0, real_words)
            # (num_real_words, encoder_dim)
            selected_encoded = self._character_encoder(
                self._character_embedding(selected), character_mask.index_select(0, real_words)
            )
            # (batch_size * num_tokens, encoder_dim), zeros for words without characters.
            encoded = selected_encoded.new_zeros((batch_size * num_tokens, encoder_dim)).index_copy(
                0, real_words, selected_encoded
            )
        # (batch_size, num_tokens, d)
        return torch.tanh(self._character_projection(encoded)).reshape(batch_size, num_tokens, self._word_dim)

    def combine(self, words: torch.Tensor, characters: torch.Tensor) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
        """
        Combines `x` (`words`) and `m` (`characters`), both `(..., d)`.  Returns the output,
        `(..., d)` with "gate" or `(..., 2d)` with "concatenate", and the gate `z` (`(..., d)`), or
        `None` with "concatenate".
        """
        if self._combination == "concatenate":
            return torch.cat([words, characters], dim=-1), None
        gate = torch.sigmoid(self._gate_output(torch.tanh(self._gate_word(words) + self._gate_character(characters))))
        return gate * words + (1 - gate) * characters, gate

    def cosine_loss(self, token_ids: torch.LongTensor, words: torch.Tensor, characters: torch.Tensor) -> torch.Tensor:
        """
        `cosine_loss_weight * sum_t g_t (1 - cos(m_t, x_t))`, a float32 scalar, with `g_t = 0` for
        padding (id 0) and OOV tokens.  `token_ids` is `(batch_size, num_tokens)`, `words` (x) and
        `characters` (m) `(batch_size, num_tokens, d)`; no gradient flows into `words`.
        """
        in_vocabulary = (token_ids != 0) & (token_ids != self._oov_index)  # (batch_size, num_tokens)
        cosine = torch.nn.functional.cosine_similarity(characters.float(), words.detach().float(), dim=-1)
        return self._cosine_loss_weight * (1.0 - cosine[in_vocabulary]).sum()
