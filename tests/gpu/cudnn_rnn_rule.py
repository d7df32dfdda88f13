"""
cuDNN's rule for RNNs, applied on the CPU: an LSTM, GRU or plain RNN run in evaluation mode (the
`train` flag of `torch.lstm` and friends off, as `torch.nn.LSTM` passes it in `eval()`) has no
backward pass. On a GPU the backward raises `RuntimeError: cudnn RNN backward can only be called in
training mode`; on the CPU it runs, so a test that backpropagates through an RNN in evaluation mode
passes there and fails on the GPU. Inside `cudnn_rnn_rule()` the CPU raises the same error.
"""

import contextlib
import functools
from typing import Callable, Iterator, Tuple

import torch
from torch.utils._pytree import tree_flatten, tree_unflatten

RNNS = frozenset(["lstm", "gru", "rnn_tanh", "rnn_relu"])
MESSAGE = "cudnn RNN backward can only be called in training mode"


class _NoBackward(torch.autograd.Function):
    """A copy of its tensors, whose backward raises cuDNN's error."""

    @staticmethod
    def forward(ctx, *tensors: torch.Tensor):
        return tuple(tensor.clone() for tensor in tensors)

    @staticmethod
    def backward(ctx, *gradients: torch.Tensor):
        raise RuntimeError(f"{MESSAGE} (the cuDNN rule, emulated on the CPU)")


def _following_the_rule(rnn: Callable) -> Callable:
    @functools.wraps(rnn)
    def run(*args, **kwargs):
        output = rnn(*args, **kwargs)
        if _training(args) or not torch.is_grad_enabled():
            return output
        leaves, spec = tree_flatten(output)
        positions = [index for index, leaf in enumerate(leaves) if _on_the_cpu_with_a_graph(leaf)]
        if positions:
            for index, tensor in zip(positions, _NoBackward.apply(*(leaves[index] for index in positions))):
                leaves[index] = tensor
        return tree_unflatten(leaves, spec)

    return run


def _training(args: Tuple) -> bool:
    # `(input, hx, params, has_biases, num_layers, dropout, train, ...)`, or with the batch sizes of
    # a PackedSequence after the input.
    packed = len(args) > 1 and torch.is_tensor(args[1]) and not args[1].is_floating_point()
    position = 7 if packed else 6
    return len(args) <= position or bool(args[position])


def _on_the_cpu_with_a_graph(value) -> bool:
    return torch.is_tensor(value) and value.device.type == "cpu" and value.requires_grad


@contextlib.contextmanager
def cudnn_rnn_rule() -> Iterator[None]:
    """RNNs on the CPU in evaluation mode refuse a backward pass, as cuDNN's do."""
    # `torch.nn.LSTM` and friends call `torch._VF.lstm`, nerzoo's fast_lstm `torch.lstm`.
    saved = [(namespace, name, vars(namespace).get(name)) for namespace in (torch, torch._VF) for name in RNNS]
    for namespace, name, _ in saved:
        setattr(namespace, name, _following_the_rule(getattr(namespace, name)))
    try:
        yield
    finally:
        for namespace, name, original in saved:
            if original is None:
                delattr(namespace, name)
            else:
                setattr(namespace, name, original)
