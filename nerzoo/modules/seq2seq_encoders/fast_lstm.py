import logging
from typing import List, Optional

import torch
from allennlp.common.checks import ConfigurationError
from allennlp.modules.seq2seq_encoders import LstmSeq2SeqEncoder, Seq2SeqEncoder

logger = logging.getLogger(__name__)


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

    With `merge_directions` the two directions of a layer run as one LSTM call of `2 * hidden_size`
    units: its input is `[x_t ; x_rev_t]`, and each gate's weights are block-diagonal, the forward
    weights on the first `hidden_size` units and the reverse weights on the others, so no unit reads
    the other direction's input or state.  The output is the same, and cuDNN launches its few
    kernels per time step once instead of twice (docs/gpu.md).  The recurrent product does twice
    the arithmetic, half of it with zero blocks, which makes it slower on the CPU.

    On cuDNN each layer's direction keeps its weights in a flat buffer of its own
    (`own_weight_buffers`), as cuDNN takes a call's weights in place only when they start one.

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
    merge_directions : `bool`, optional (default = `False`)
        Whether a bidirectional layer runs as one call of block-diagonal weights.
    """

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        dropout: float = 0.0,
        bidirectional: bool = False,
        merge_directions: bool = False,
    ) -> None:
        super().__init__(input_size, hidden_size, num_layers, bias, dropout, bidirectional, stateful=False)
        self.merge_directions = merge_directions

    def _apply(self, fn, recurse=True):  # type: ignore[no-untyped-def]
        # `torch.nn.LSTM` flattens all its weights into one buffer after every move or cast.
        applied = super()._apply(fn, recurse)
        self.own_weight_buffers()
        return applied

    def own_weight_buffers(self) -> bool:
        """
        Gives each layer's direction a flat cuDNN weight buffer of its own, when the weights are on
        cuDNN; returns whether it did.  `torch.nn.LSTM` lays all of them out in one buffer for one
        call over every layer and direction, but this module calls cuDNN once per layer and
        direction, and cuDNN uses a call's weights in place only when they start their buffer
        (`try_get_weight_buf` in ATen): for any other direction it copies them into a new buffer
        at every call, forward and backward, and warns that the weights "are not part of single
        contiguous chunk of memory".  The parameters stay the same objects, with the same values.
        """
        lstm = self._module
        weights = [weight for weight in lstm._flat_weights if isinstance(weight, torch.Tensor)]
        if (
            self.merge_directions  # the merged weights are made at every call anyway
            or not lstm.bias  # `_run` adds zero biases on CUDA, which no buffer holds
            or (lstm.num_layers == 1 and not lstm.bidirectional)  # the one direction starts the buffer
            or len(weights) != len(lstm._flat_weights)
            or not _on_cudnn(weights)
        ):
            return False
        from torch.backends.cudnn import rnn

        directions = ["", "_reverse"] if lstm.bidirectional else [""]
        try:
            with torch.cuda.device_of(weights[0]), torch.no_grad():
                for layer in range(lstm.num_layers):
                    input_size = lstm.input_size if layer == 0 else lstm.hidden_size * len(directions)
                    for suffix in directions:
                        # Copies the weights into a new buffer and points them at their places in it.
                        torch._cudnn_rnn_flatten_weight(
                            self._weights(layer, suffix),
                            4,
                            input_size,
                            rnn.get_cudnn_mode(lstm.mode),
                            lstm.hidden_size,
                            0,
                            1,
                            True,
                            False,
                        )
        except RuntimeError as error:  # still correct: cuDNN copies the weights at every call
            logger.warning("fast_lstm could not give each direction its own cuDNN weight buffer: %s", error)
            return False
        return True

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
        if mask is None:
            mask = inputs.new_ones(batch_size, sequence_length, dtype=torch.bool)
        mask = mask.bool()
        lstm = self._module
        reverse = _reversal(mask) if lstm.bidirectional else None
        zeros = inputs.new_zeros(1, batch_size, lstm.hidden_size)
        merge = reverse is not None and self.merge_directions
        merged_zeros = zeros.new_zeros(1, batch_size, 2 * lstm.hidden_size) if merge else None
        output = inputs
        for layer in range(lstm.num_layers):
            if layer > 0 and lstm.dropout > 0:
                output = torch.nn.functional.dropout(output, lstm.dropout, self.training)
            if merge:
                both = torch.cat([output, _gather_positions(output, reverse)], dim=-1)
                both = self._run(both, self._merged_weights(layer), merged_zeros)
                forward, backward = both.split(lstm.hidden_size, dim=-1)
                output = torch.cat([forward, _gather_positions(backward, reverse)], dim=-1)
                continue
            directions = [self._run(output, self._weights(layer, ""), zeros)]
            if reverse is not None:
                backward = self._run(_gather_positions(output, reverse), self._weights(layer, "_reverse"), zeros)
                directions.append(_gather_positions(backward, reverse))
            output = torch.cat(directions, dim=-1) if len(directions) > 1 else directions[0]
        return output * mask.unsqueeze(-1)

    def _weights(self, layer: int, suffix: str) -> List[torch.Tensor]:
        names = ["weight_ih", "weight_hh"] + (["bias_ih", "bias_hh"] if self._module.bias else [])
        return [getattr(self._module, f"{name}_l{layer}{suffix}") for name in names]

    def _merged_weights(self, layer: int) -> List[torch.Tensor]:
        """
        The weights of one LSTM of `2 * hidden_size` units that runs both directions of `layer`:
        in each gate's rows (cuDNN's order: input, forget, cell, output) the forward direction's
        weights for the first half of the units and its input, the reverse direction's for the
        second half and the reversed input; zeros elsewhere.  Biases side by side per gate.
        """
        forward, reverse = self._weights(layer, ""), self._weights(layer, "_reverse")
        hidden = self._module.hidden_size
        merged = []
        for position, (ahead, back) in enumerate(zip(forward, reverse)):
            if position < 2:  # (4 * hidden, columns) matrices: block-diagonal per gate
                ahead, back = ahead.view(4, hidden, -1), back.view(4, hidden, -1)
                zeros = ahead.new_zeros(ahead.shape)
                top, bottom = torch.cat([ahead, zeros], dim=2), torch.cat([zeros, back], dim=2)
                merged.append(torch.cat([top, bottom], dim=1).view(8 * hidden, -1))
            else:  # (4 * hidden,) biases
                merged.append(torch.cat([ahead.view(4, hidden), back.view(4, hidden)], dim=1).view(8 * hidden))
        return merged

    def _run(self, inputs: torch.Tensor, weights: List[torch.Tensor], zeros: torch.Tensor) -> torch.Tensor:
        """One direction of one layer over `(batch_size, sequence_length, dim)`, from the `zeros` states."""
        if inputs.device.type == "cpu" and _cpu_float16_autocast():
            # oneDNN has no float16 LSTM on most CPUs: run this one in float32 (cuDNN runs float16).
            with torch.autocast("cpu", enabled=False):
                return self._run(inputs.float(), [weight.float() for weight in weights], zeros.float())
        zeros = zeros.to(inputs.dtype)
        if len(weights) == 2 and inputs.is_cuda:
            # Without biases this module's cuDNN outputs differed from the CPU's (two layers, an H100,
            # PyTorch 2.11, CUDA 13; tests/gpu); with zero biases they agree.
            no_bias = weights[0].new_zeros(weights[0].size(0))
            weights = [*weights, no_bias, no_bias]
        output, _, _ = torch.lstm(
            inputs.contiguous(), (zeros, zeros), weights, len(weights) == 4, 1, 0.0, self.training, False, True
        )
        return output


def _on_cudnn(weights: List[torch.Tensor]) -> bool:
    """Whether cuDNN runs LSTMs of these weights, and can flatten them (as `torch.nn.LSTM` checks)."""
    return (
        all(w.is_cuda and w.dtype == weights[0].dtype and torch.backends.cudnn.is_acceptable(w) for w in weights)
        and torch._use_cudnn_rnn_flatten_weight()
    )


def _cpu_float16_autocast() -> bool:
    return torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") == torch.float16


def _gather_positions(tensor: torch.Tensor, positions: torch.LongTensor) -> torch.Tensor:
    """`tensor[b, positions[b, t]]` for `(batch, length, dim)` tensors, where each row of `positions`
    is its own inverse (the reversal of `_reversal`)."""
    return _SelfInverseGather.apply(tensor, positions.unsqueeze(-1).expand(-1, -1, tensor.size(-1)))


class _SelfInverseGather(torch.autograd.Function):
    """
    `tensor.gather(1, index)` for an `index` that permutes each row and is its own inverse: the
    gradient is the same gather of the output's gradient, one call where autograd's scatter of a
    gather makes a zero tensor and adds into it (with atomics on a GPU).
    """

    @staticmethod
    def forward(ctx, tensor, index):  # type: ignore[override]
        ctx.save_for_backward(index)
        return tensor.gather(1, index)

    @staticmethod
    def backward(ctx, grad_output):  # type: ignore[override]
        (index,) = ctx.saved_tensors
        return grad_output.gather(1, index), None


def _reversal(mask: torch.BoolTensor) -> torch.LongTensor:
    """
    `(batch_size, sequence_length)`: where position t of a row reads from in the row reversed within
    its own length, `length - 1 - t` on the real tokens; the padding, which follows them, stays padding.
    """
    lengths = mask.sum(dim=-1, keepdim=True)
    positions = torch.arange(1, mask.size(1) + 1, device=mask.device)
    return (lengths - positions) % mask.size(1)
