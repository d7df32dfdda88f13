from typing import List, Optional

import torch
from allennlp.common.checks import ConfigurationError
from allennlp.modules.seq2seq_encoders import LstmSeq2SeqEncoder, Seq2SeqEncoder

from nerzoo.modules.row_reversal import gather_steps, reversal_index


@Seq2SeqEncoder.register("fast_lstm")
@Seq2SeqEncoder.register("unpacked_lstm")  # the earlier name: archives trained under it still load
class FastLstm(LstmSeq2SeqEncoder):
    """
    allennlp's `lstm` Seq2SeqEncoder (a (Bi)LSTM, Hochreiter & Schmidhuber 1997; bidirectional as in
    Graves & Schmidhuber 2005) run on the padded batch instead of a `PackedSequence`.

    `lstm` sorts the batch and packs it; on the CPU torch runs a packed sequence one time step at a
    time (matrix products per step and direction), while a padded batch goes through oneDNN's fused
    LSTM (cuDNN on a GPU).  Each direction runs once over the padded batch:

        forward:  h_t = LSTM_fw(x_t, h_{t-1})       padding only follows the real tokens
        backward: each row reversed within its own length (x_{n-1} ... x_0, then its padding),
                  run forwards with the reverse weights, and reversed back

    so every real position gets exactly what `lstm` gives it, and padded positions are zeros.
    Layers are chained as in `torch.nn.LSTM` (dropout between layers while training).  The
    parameters are `lstm`'s, under the same names, so the two are interchangeable in a config and
    an archive.

    Registered as a `Seq2SeqEncoder` with name "fast_lstm".

    # Parameters

    input_size : `int`, required
    hidden_size : `int`, required
        Per direction; the output is `2 * hidden_size` when `bidirectional`.
    num_layers : `int`, optional (default = `1`)
    bias : `bool`, optional (default = `True`)
    dropout : `float`, optional (default = `0.0`)
        Dropout on the output of every layer but the last, while training.
    bidirectional : `bool`, optional (default = `False`)
    """

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        dropout: float = 0.0,
        bidirectional: bool = False,
    ) -> None:
        super().__init__(input_size, hidden_size, num_layers, bias, dropout, bidirectional, stateful=False)

    def forward(  # type: ignore
        self, inputs: torch.Tensor, mask: Optional[torch.BoolTensor] = None, hidden_state: None = None
    ) -> torch.Tensor:
        """
        # Parameters

        inputs : `torch.Tensor`
            `(batch_size, sequence_length, input_size)`
        mask : `torch.BoolTensor`, optional
            `(batch_size, sequence_length)`, `True` at real tokens, which come first in each row.
        hidden_state : `None`
            Initial states are zeros, as in `lstm` without a `hidden_state`.

        # Returns

        `(batch_size, sequence_length, get_output_dim())`, zeros at padding.
        """
        if hidden_state is not None:
            raise ConfigurationError("fast_lstm starts from zero states; use allennlp's lstm for hidden_state")
        batch_size, sequence_length = inputs.shape[:2]
        mask = inputs.new_ones(batch_size, sequence_length, dtype=torch.bool) if mask is None else mask.bool()
        lstm = self._module
        reverse = reversal_index(mask) if lstm.bidirectional else None
        zeros = inputs.new_zeros(1, batch_size, lstm.hidden_size)
        output = inputs
        for layer in range(lstm.num_layers):
            if layer > 0 and lstm.dropout > 0:
                output = torch.nn.functional.dropout(output, lstm.dropout, self.training)
            directions = [self._run(output, self._weights(layer, ""), zeros)]
            if reverse is not None:
                backward = self._run(gather_steps(output, reverse), self._weights(layer, "_reverse"), zeros)
                directions.append(gather_steps(backward, reverse))
            output = torch.cat(directions, dim=-1) if len(directions) > 1 else directions[0]
        return output * mask.unsqueeze(-1)

    def _weights(self, layer: int, suffix: str) -> List[torch.Tensor]:
        names = ["weight_ih", "weight_hh"] + (["bias_ih", "bias_hh"] if self._module.bias else [])
        return [getattr(self._module, f"{name}_l{layer}{suffix}") for name in names]

    def _run(self, inputs: torch.Tensor, weights: List[torch.Tensor], zeros: torch.Tensor) -> torch.Tensor:
        """One direction of one layer over `(batch_size, sequence_length, dim)`, from the `zeros` states."""
        cpu_float16 = torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") == torch.float16
        if inputs.device.type == "cpu" and cpu_float16:
            # oneDNN has no float16 LSTM on most CPUs: run this one in float32 (cuDNN runs float16).
            with torch.autocast("cpu", enabled=False):
                return self._run(inputs.float(), [weight.float() for weight in weights], zeros.float())
        zeros = zeros.to(inputs.dtype)
        if len(weights) == 2 and inputs.is_cuda:
            # cuDNN without biases disagrees with the CPU (tests/gpu); with zero biases they agree.
            no_bias = weights[0].new_zeros(weights[0].size(0))
            weights = [*weights, no_bias, no_bias]
        output, _, _ = torch.lstm(
            inputs.contiguous(), (zeros, zeros), weights, len(weights) == 4, 1, 0.0, self.training, False, True
        )
        return output
