from typing import NamedTuple, Optional, Tuple

import torch
from allennlp.common.checks import ConfigurationError
from allennlp.modules.seq2seq_encoders.seq2seq_encoder import Seq2SeqEncoder
from allennlp.nn.util import masked_softmax

from nerzoo.modules.full_precision import full_precision, without_autocast


class AttentionOutput(NamedTuple):
    """
    What the nerzoo attention encoders' `attend` returns.

    output : `torch.Tensor`
        The encoded sequence, `(batch_size, sequence_length, output_dim)`, zeros at padding.
    weights : `torch.Tensor`
        The attention weights: `(batch_size, sequence_length, sequence_length)` for relative
        attention, `(batch_size, sequence_length)` for global attention; zeros at padding.
    """

    output: torch.Tensor
    weights: torch.Tensor


def masked_inputs(
    name: str, input_dim: int, inputs: torch.Tensor, mask: Optional[torch.BoolTensor]
) -> Tuple[torch.Tensor, torch.BoolTensor, torch.BoolTensor]:
    """
    `inputs` `(batch_size, sequence_length, input_dim)` zeroed at padding (whatever it holds, even inf
    or NaN), the mask (all `True` when `None`) and the padding `(batch_size, sequence_length, 1)`.
    """
    if inputs.size(-1) != input_dim:
        raise ConfigurationError(f"{name} was built for input_dim {input_dim}, got inputs of size {inputs.size(-1)}.")
    mask = inputs.new_ones(inputs.shape[:2], dtype=torch.bool) if mask is None else mask.bool()
    padding = ~mask.unsqueeze(-1)
    return inputs.masked_fill(padding, 0.0), mask, padding


@Seq2SeqEncoder.register("relative_attention")
class RelativeAttention(Seq2SeqEncoder):
    """
    The relative attention of Aguilar and Solorio, "Dependency-Aware Named Entity Recognition with
    Relative and Global Attentions" (arXiv preprint, 2019, https://arxiv.org/abs/1909.05166),
    section 3.2.2: scaled dot-product self-attention in which every word distributes its
    probability over the *other* words of the sentence.

    With `Q = X W_Q`, `K = X W_K`, `V = X W_V` (each `W` of shape `(d_a, d_a)`, `d_a = input_dim`):

        A = softmax(d_a^-0.5 Q K^T)      (eq. 1, the main diagonal masked out before the softmax)
        M = A V + V = (A + I) V          (eq. 2 and footnote 3)

    and, with the residual connection of section 3.2.4 (eq. 4), the output is `LayerNorm(X + M)`.

    Each row of `A` belonging to a real token sums to 1 over the other real tokens; rows and
    columns of padding are zero, and so is the whole row of a one-token sentence (which has no other
    word to attend to, so its `M = V`).  Output vectors at padded positions are zero.

    Registered as a `Seq2SeqEncoder` with name "relative_attention".

    # Parameters

    input_dim : `int`, required
        `d_a`, the size of the input vectors, which is also the size of the output vectors.
    residual : `bool`, optional (default = `True`)
        Return `LayerNorm(inputs + M)` (section 3.2.4) instead of `M`.
    dropout : `float`, optional (default = `0.0`)
        Dropout on the attention weights `A` (while training) before they weight `V`.
    """

    def __init__(self, input_dim: int, residual: bool = True, dropout: float = 0.0) -> None:
        super().__init__()
        if input_dim <= 0:
            raise ConfigurationError(f"RelativeAttention needs input_dim > 0, got {input_dim}.")
        if not 0.0 <= dropout < 1.0:
            raise ConfigurationError(f"RelativeAttention needs 0 <= dropout < 1, got {dropout}.")
        self._input_dim = input_dim
        # Eq. 1-2: W_Q, W_K, W_V in R^{d_a x d_a}, plain linear maps of the input.
        self._query = torch.nn.Linear(input_dim, input_dim, bias=False)
        self._key = torch.nn.Linear(input_dim, input_dim, bias=False)
        self._value = torch.nn.Linear(input_dim, input_dim, bias=False)
        self._layer_norm = torch.nn.LayerNorm(input_dim) if residual else None
        self._dropout = torch.nn.Dropout(dropout) if dropout > 0 else None

    def get_input_dim(self) -> int:
        return self._input_dim

    def get_output_dim(self) -> int:
        return self._input_dim

    def is_bidirectional(self) -> bool:
        # W_V mixes all the features, so no forward/backward halves survive.
        return False

    def forward(self, inputs: torch.Tensor, mask: Optional[torch.BoolTensor] = None) -> torch.Tensor:
        """
        # Parameters

        inputs : `torch.Tensor`
            `(batch_size, sequence_length, input_dim)`
        mask : `torch.BoolTensor`, optional
            `(batch_size, sequence_length)`, `True` at real tokens.

        # Returns

        `(batch_size, sequence_length, input_dim)`, zeros at padding.
        """
        return self.attend(inputs, mask).output

    def attend(self, inputs: torch.Tensor, mask: Optional[torch.BoolTensor] = None) -> AttentionOutput:
        """
        Like `forward`, but also returns the attention matrix `A` of eq. 1,
        `(batch_size, sequence_length, sequence_length)` (before any dropout).

        Computed in float32 under autocast (mixed precision): the scores are unbounded dot products
        of `input_dim`-d vectors, and once training has sharpened the attention, float16's rounding
        of two close, large scores decides which word a row attends to.
        """
        with without_autocast(inputs):
            inputs, mask, padding = masked_inputs("RelativeAttention", self._input_dim, full_precision(inputs), mask)
            # Shape: (batch_size, sequence_length, input_dim) each, from one product with W_Q, W_K, W_V stacked.
            weight = torch.cat([self._query.weight, self._key.weight, self._value.weight])
            queries, keys, values = torch.nn.functional.linear(inputs, weight).chunk(3, dim=-1)

            # Eq. 1, scores scaled by d_a^-0.5.
            # Shape: (batch_size, sequence_length, sequence_length)
            scores = torch.bmm(queries, keys.transpose(1, 2)) * (self._input_dim**-0.5)

            # Word i attends to word j when both are real and i != j.
            # Shape: (batch_size, sequence_length, sequence_length)
            positions = torch.arange(inputs.size(1), device=inputs.device)
            itself = positions.unsqueeze(0) == positions.unsqueeze(1)
            blocked = padding | padding.transpose(1, 2) | itself
            # Rows with nothing to attend to (padding, one-token sentences) come out all zero.
            weights = masked_softmax(scores, ~blocked, memory_efficient=True).masked_fill(blocked, 0.0)

            attended = weights if self._dropout is None else self._dropout(weights)
            # Eq. 2: M = A V + V.
            # Shape: (batch_size, sequence_length, input_dim)
            weighted = torch.baddbmm(values, attended, values)

            if self._layer_norm is not None:
                # Eq. 4: z = LayerNorm(x + Sublayer(x)).
                weighted = self._layer_norm(inputs + weighted)
            output = weighted.masked_fill(padding, 0.0)
            return AttentionOutput(output=output, weights=weights)
