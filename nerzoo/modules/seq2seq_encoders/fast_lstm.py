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

    On the CPU torch runs a packed sequence a time step at a time, a padded batch through oneDNN's
    fused LSTM.  The forward direction runs over the padded rows (padding only follows the real
    tokens); the backward one over each row reversed within its own length, and reversed back.  So
    every real position gets what `lstm` gives it, padded positions are zeros, and the parameters
    are `lstm`'s, under the same names (the two are interchangeable in a config and an archive).

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
        mask = inputs.new_ones(inputs.shape[:2], dtype=torch.bool) if mask is None else mask.bool()
        return padded_run(self._module, inputs, mask, self.training)


# One direction of one layer of a torch RNN, by its `mode`.
RUNS = {"LSTM": torch.lstm, "GRU": torch.gru, "RNN_TANH": torch.rnn_tanh, "RNN_RELU": torch.rnn_relu}


def padded_run(rnn: torch.nn.RNNBase, inputs: torch.Tensor, mask: torch.BoolTensor, training: bool) -> torch.Tensor:
    """
    `rnn` (a batch-first `torch.nn.LSTM`, `GRU` or `RNN`) over the right-padded batch `(batch_size,
    num_steps, input_size)`, as `FastLstm` runs it: each direction of each layer once over the padded
    rows, the backward one over each row reversed within its length; zeros at padding.
    """
    reverse = reversal_index(mask) if rnn.bidirectional else None
    zeros = inputs.new_zeros(1, inputs.size(0), rnn.hidden_size)
    output = inputs
    for layer in range(rnn.num_layers):
        if layer > 0 and rnn.dropout > 0:
            output = torch.nn.functional.dropout(output, rnn.dropout, training)
        directions = [_run(rnn, output, _weights(rnn, layer, ""), zeros, training)]
        if reverse is not None:
            backward = _run(rnn, gather_steps(output, reverse), _weights(rnn, layer, "_reverse"), zeros, training)
            directions.append(gather_steps(backward, reverse))
        output = torch.cat(directions, dim=-1) if len(directions) > 1 else directions[0]
    return output * mask.unsqueeze(-1)


def _weights(rnn: torch.nn.RNNBase, layer: int, suffix: str) -> List[torch.Tensor]:
    names = ["weight_ih", "weight_hh"] + (["bias_ih", "bias_hh"] if rnn.bias else [])
    return [getattr(rnn, f"{name}_l{layer}{suffix}") for name in names]


def _run(
    rnn: torch.nn.RNNBase, inputs: torch.Tensor, weights: List[torch.Tensor], zeros: torch.Tensor, training: bool
) -> torch.Tensor:
    """One direction of one layer over `(batch_size, sequence_length, dim)`, from the `zeros` states."""
    cpu_float16 = torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") == torch.float16
    if inputs.device.type == "cpu" and cpu_float16:
        # oneDNN has no float16 LSTM on most CPUs: run this one in float32 (cuDNN runs float16).
        with torch.autocast("cpu", enabled=False):
            return _run(rnn, inputs.float(), [weight.float() for weight in weights], zeros.float(), training)
    zeros = zeros.to(inputs.dtype)
    if len(weights) == 2 and inputs.is_cuda:
        # cuDNN without biases disagrees with the CPU (tests/gpu); with zero biases they agree.
        no_bias = weights[0].new_zeros(weights[0].size(0))
        weights = [*weights, no_bias, no_bias]
    states = (zeros, zeros) if rnn.mode == "LSTM" else zeros
    return RUNS[rnn.mode](inputs.contiguous(), states, weights, len(weights) == 4, 1, 0.0, training, False, True)[0]
