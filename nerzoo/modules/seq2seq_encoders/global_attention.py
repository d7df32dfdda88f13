from typing import Optional

import torch
from allennlp.common.checks import ConfigurationError
from allennlp.modules.seq2seq_encoders.seq2seq_encoder import Seq2SeqEncoder
from allennlp.nn.util import get_final_encoder_states, masked_softmax

from nerzoo.modules.seq2seq_encoders.relative_attention import AttentionOutput, masked_inputs

MODES = ("context", "scale")


@Seq2SeqEncoder.register("global_attention")
class GlobalAttention(Seq2SeqEncoder):
    """
    The global attention of Aguilar and Solorio, "Dependency-Aware Named Entity Recognition with
    Relative and Global Attentions" (arXiv preprint, 2019, https://arxiv.org/abs/1909.05166),
    section 3.2.3: additive attention (Bahdanau et al., 2014) of a sentence-level query `q` over
    the words (eq. 3):

        u_i = v^T tanh(W_h h_i + b_h + W_q q + b_q)
        a = softmax(u)                  (over the real words of the sentence)

    and what the words receive, by `mode`:

    - `"context"` (default): the attended sentence vector `c = sum_j a_j h_j`, projected, is added to
      every word through the residual connection of section 3.2.4 (eq. 4):
      `LayerNorm(h_i + W_c c + b_c)`.  The attention decides which words summarise the sentence, and
      every word, and so every emission score, sees that summary.
    - `"scale"`: eq. 3 as written, `z_i = a_i h_i`; with the residual, `LayerNorm(h_i + z_i)`, which
      equals `LayerNorm(h_i)` up to LayerNorm's eps (it removes any positive per-token scale), so the
      attention gets (almost) no gradient.  Kept to reproduce the paper's text.

    The query summarises the sentence (the paper: the Tree-LSTM's root vector or the LSTM's last
    hidden state); without one, `forward` uses the inputs' final state (`get_final_encoder_states`),
    which needs `query_dim == input_dim`.  Weights and outputs are zero at padding.

    Registered as a `Seq2SeqEncoder` with name "global_attention".

    # Parameters

    input_dim : `int`, required
        `d_h`, the size of the word vectors `h_i`, which is also the size of the output vectors.
    attention_dim : `int`, required
        `d_a`, the size of the attention space (`W_h`, `W_q` project into it, `v` lives in it).
    query_dim : `int`, optional (default = `input_dim`)
        `d_q`, the size of an explicit query vector.
    residual : `bool`, optional (default = `True`)
        `LayerNorm(h_i + ...)` (section 3.2.4).  `"context"` needs it (alone, the sentence vector is
        the same for every word); `"scale"` without it returns `z_i`.
    bidirectional_input : `bool`, optional (default = `False`)
        The inputs come from a bidirectional encoder (forward half first), so the default query is
        the forward half's last state joined with the backward half's first state.
    mode : `str`, optional (default = `"context"`)
        `"context"` or `"scale"`, see above.
    """

    def __init__(
        self,
        input_dim: int,
        attention_dim: int,
        query_dim: Optional[int] = None,
        residual: bool = True,
        bidirectional_input: bool = False,
        mode: str = "context",
    ) -> None:
        super().__init__()
        query_dim = input_dim if query_dim is None else query_dim
        for name, value in (("input_dim", input_dim), ("attention_dim", attention_dim), ("query_dim", query_dim)):
            if value <= 0:
                raise ConfigurationError(f"GlobalAttention needs {name} > 0, got {value}.")
        if bidirectional_input and input_dim % 2 != 0:
            raise ConfigurationError(
                f"GlobalAttention with bidirectional_input needs an even input_dim (two halves), got {input_dim}."
            )
        if bidirectional_input and query_dim != input_dim:
            raise ConfigurationError(
                f"GlobalAttention with bidirectional_input takes its query from the inputs' final state, "
                f"so query_dim ({query_dim}) must equal input_dim ({input_dim})."
            )
        if mode not in MODES:
            raise ConfigurationError(f"GlobalAttention mode must be one of {MODES}, got {mode!r}.")
        if mode == "context" and not residual:
            raise ConfigurationError(
                "GlobalAttention mode 'context' needs residual=True: without the words themselves every "
                "word would get the same sentence vector."
            )
        self._mode = mode
        self._input_dim = input_dim
        self._query_dim = query_dim
        self._bidirectional_input = bidirectional_input
        # Eq. 3: W_h in R^{d_a x d_h} with b_h, W_q in R^{d_a x d_q} with b_q, v in R^{d_a}.
        self._hidden_projection = torch.nn.Linear(input_dim, attention_dim, bias=True)
        self._query_projection = torch.nn.Linear(query_dim, attention_dim, bias=True)
        # v of eq. 3, a module so that allennlp's NormalizationBiasVerification sees no bias before the LayerNorm.
        self._attention_vector = torch.nn.Linear(attention_dim, 1, bias=False)
        # W_c, b_c of the context mode.
        self._context_projection = torch.nn.Linear(input_dim, input_dim) if mode == "context" else None
        self._layer_norm = torch.nn.LayerNorm(input_dim) if residual else None

    def get_input_dim(self) -> int:
        return self._input_dim

    def get_output_dim(self) -> int:
        return self._input_dim

    def is_bidirectional(self) -> bool:
        # z_i = a_i h_i keeps every feature in place, so the halves of a bidirectional input survive;
        # the projected sentence vector mixes them.
        return self._bidirectional_input and self._mode == "scale"

    def forward(
        self,
        inputs: torch.Tensor,
        mask: Optional[torch.BoolTensor] = None,
        query: Optional[torch.Tensor] = None,
    ) -> torch.Tensor:
        """
        # Parameters

        inputs : `torch.Tensor`
            The word vectors `h`, `(batch_size, sequence_length, input_dim)`.
        mask : `torch.BoolTensor`, optional
            `(batch_size, sequence_length)`, `True` at real tokens (right-padded).
        query : `torch.Tensor`, optional
            `q`, `(batch_size, query_dim)`; by default the final state of `inputs`.

        # Returns

        `(batch_size, sequence_length, input_dim)`, zeros at padding.
        """
        return self.attend(inputs, mask, query).output

    def attend(
        self,
        inputs: torch.Tensor,
        mask: Optional[torch.BoolTensor] = None,
        query: Optional[torch.Tensor] = None,
    ) -> AttentionOutput:
        """
        Like `forward`, but also returns the weights `a` of eq. 3, `(batch_size, sequence_length)`.
        """
        inputs, mask, padding = masked_inputs("GlobalAttention", self._input_dim, inputs, mask)
        batch_size = inputs.size(0)
        if query is None:
            if self._query_dim != self._input_dim:
                raise ConfigurationError(
                    f"GlobalAttention was built for queries of size {self._query_dim}; without an explicit "
                    f"query it uses the inputs' final state, of size {self._input_dim}."
                )
            # Shape: (batch_size, input_dim)
            query = get_final_encoder_states(inputs, mask, bidirectional=self._bidirectional_input)
        elif query.size() != (batch_size, self._query_dim):
            raise ConfigurationError(
                f"GlobalAttention expects a query of shape ({batch_size}, {self._query_dim}), "
                f"got {tuple(query.size())}."
            )

        # Shape: (batch_size, sequence_length, attention_dim)
        projected_inputs = self._hidden_projection(inputs)
        # Shape: (batch_size, 1, attention_dim)
        projected_query = self._query_projection(query).unsqueeze(1)
        # Eq. 3: u_i = v^T tanh(W_h h_i + b_h + W_q q + b_q).
        # Shape: (batch_size, sequence_length)
        scores = self._attention_vector(torch.tanh(projected_inputs + projected_query)).squeeze(-1)
        # Shape: (batch_size, sequence_length), zero on the padding.
        weights = masked_softmax(scores, mask, memory_efficient=True) * mask

        if self._mode == "context":
            # c = sum_j a_j h_j, (batch_size, input_dim), projected and added to every word.
            context = torch.bmm(weights.unsqueeze(1), inputs).squeeze(1)
            # Shape: (batch_size, 1, input_dim)
            sublayer = self._context_projection(context).unsqueeze(1)
        else:
            # z_i = a_i h_i.
            # Shape: (batch_size, sequence_length, input_dim)
            sublayer = weights.unsqueeze(-1) * inputs
        if self._layer_norm is not None:
            # Eq. 4: z = LayerNorm(x + Sublayer(x)), functional, so that NormalizationBiasVerification
            # does not take the context projection's bias for one feeding this norm.
            norm = self._layer_norm
            sublayer = torch.nn.functional.layer_norm(
                inputs + sublayer, norm.normalized_shape, norm.weight, norm.bias, norm.eps
            )
        output = sublayer.masked_fill(padding, 0.0)
        return AttentionOutput(output=output, weights=weights)
