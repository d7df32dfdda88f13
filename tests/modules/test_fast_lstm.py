"""`fast_lstm` against allennlp's `lstm` (packed sequences), which it must equal on real tokens."""

import functools
from unittest import mock

import pytest
import torch
from allennlp.common import Params
from allennlp.modules.seq2seq_encoders import LstmSeq2SeqEncoder, Seq2SeqEncoder

from nerzoo.modules.seq2seq_encoders.fast_lstm import FastLstm

SHAPES = {
    "one layer, one direction": {"num_layers": 1, "bidirectional": False, "bias": True},
    "one layer, bidirectional": {"num_layers": 1, "bidirectional": True, "bias": True},
    "two layers, bidirectional": {"num_layers": 2, "bidirectional": True, "bias": True},
    "two layers, one direction, no bias": {"num_layers": 2, "bidirectional": False, "bias": False},
}


def _pair(shape, dtype):
    def params(name):
        return Params({"type": name, "input_size": 5, "hidden_size": 4, **SHAPES[shape]})

    torch.manual_seed(0)
    reference = Seq2SeqEncoder.from_params(params("lstm"))
    unpacked = Seq2SeqEncoder.from_params(params("fast_lstm"))
    assert isinstance(unpacked, FastLstm) and type(reference) is LstmSeq2SeqEncoder
    unpacked.load_state_dict(reference.state_dict())
    return reference.to(dtype), unpacked.to(dtype)


def _batch(dtype):
    generator = torch.Generator().manual_seed(1)
    lengths = torch.tensor([7, 1, 4, 0, 7, 3])  # unsorted, with an empty row and a one-token row
    mask = torch.arange(7).unsqueeze(0) < lengths.unsqueeze(1)
    inputs = torch.randn(6, 7, 5, generator=generator, dtype=dtype)
    inputs[~mask] = 1e3  # what padding holds must not matter
    return inputs, mask


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_outputs_and_gradients_equal_packed_lstm(shape, dtype):
    reference, unpacked = _pair(shape, dtype)
    inputs, mask = _batch(dtype)
    expected_inputs = inputs.clone().requires_grad_()
    unpacked_inputs = inputs.clone().requires_grad_()
    expected = reference(expected_inputs, mask)
    output = unpacked(unpacked_inputs, mask)
    assert output.shape == expected.shape == (6, 7, unpacked.get_output_dim())
    tolerance = 1e-5 if dtype == torch.float32 else 1e-10
    assert torch.allclose(output, expected, atol=tolerance)
    assert not output[~mask].any()
    weights = torch.randn(expected.shape, dtype=dtype)
    (expected * weights).sum().backward()
    (output * weights).sum().backward()
    assert torch.allclose(unpacked_inputs.grad, expected_inputs.grad, atol=tolerance)
    assert not unpacked_inputs.grad[~mask].any()
    for (name, got), (_, wanted) in zip(unpacked.named_parameters(), reference.named_parameters()):
        assert torch.allclose(got.grad, wanted.grad, atol=10 * tolerance), name


def test_without_mask_every_position_is_real():
    reference, unpacked = _pair("two layers, bidirectional", torch.float32)
    inputs = torch.randn(3, 4, 5)
    assert torch.allclose(unpacked(inputs, None), reference(inputs, None), atol=1e-5)


def test_dropout_between_layers_only_while_training():
    params = Params({"type": "fast_lstm", "input_size": 5, "hidden_size": 4, "num_layers": 2, "dropout": 0.5})
    encoder = Seq2SeqEncoder.from_params(params)
    inputs, mask = _batch(torch.float32)
    encoder.train()
    torch.manual_seed(2)
    first = encoder(inputs, mask)
    torch.manual_seed(3)
    assert not torch.allclose(first[mask], encoder(inputs, mask)[mask])
    encoder.eval()
    assert torch.equal(encoder(inputs, mask), encoder(inputs, mask))


def test_archives_are_interchangeable():
    reference, unpacked = _pair("two layers, bidirectional", torch.float32)
    assert list(unpacked.state_dict()) == list(reference.state_dict())


def test_cpu_float16_autocast_runs_in_float32_with_the_same_outputs_and_gradients():
    reference, unpacked = _pair("two layers, bidirectional", torch.float32)
    inputs, mask = _batch(torch.float32)
    expected = reference(inputs, mask)
    (expected.sum()).backward()
    with torch.autocast("cpu", dtype=torch.float16):
        output = unpacked(inputs.half(), mask)
    output.sum().backward()
    assert output.dtype == torch.float32
    assert torch.allclose(output, expected, atol=1e-2)
    for (name, got), (_, wanted) in zip(unpacked.named_parameters(), reference.named_parameters()):
        assert got.grad.dtype == torch.float32 and torch.allclose(got.grad, wanted.grad, atol=5e-2), name


def test_inference_mode_then_a_changed_mask_then_a_training_step_match_the_reference():
    reference, unpacked = _pair("one layer, bidirectional", torch.float32)
    inputs, mask = _batch(torch.float32)
    with torch.inference_mode():  # as `allennlp serve` predicts
        served = unpacked(inputs, mask)
    assert torch.allclose(served, reference(inputs, mask), atol=1e-6)
    mask[0, 6] = False  # the same mask tensor, changed in place: row 0 now has 6 tokens
    output = unpacked(inputs, mask)
    assert torch.allclose(output, reference(inputs, mask), atol=1e-6)
    assert torch.equal(output[0, 6], torch.zeros_like(output[0, 6]))
    output.sum().backward()
    assert all(parameter.grad is not None for parameter in unpacked.parameters())


def _recorded_lstm(calls, lstm, *args):
    calls.append(args[2])  # the weights
    return lstm(*args)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("shape", ["one layer, bidirectional", "two layers, bidirectional", "no bias"])
def test_both_directions_in_one_call_equal_two_calls(shape, dtype):
    """`merge_directions`: the same outputs and gradients, one LSTM call a layer."""
    settings = {"no bias": {"num_layers": 2, "bidirectional": True, "bias": False}}.get(shape, SHAPES.get(shape))
    torch.manual_seed(0)
    apart = FastLstm(5, 4, merge_directions=False, **settings).to(dtype)
    merged = FastLstm(5, 4, merge_directions=True, **settings).to(dtype)
    merged.load_state_dict(apart.state_dict())
    inputs, mask = _batch(dtype)
    results = []
    for encoder in (apart, merged):
        leaf = inputs.clone().requires_grad_()
        calls = []
        with mock.patch.object(torch, "lstm", functools.partial(_recorded_lstm, calls, torch.lstm)):
            output = encoder(leaf, mask)
        (output * torch.linspace(-1, 1, output.numel(), dtype=dtype).view(output.shape)).sum().backward()
        results.append((output, leaf.grad, [parameter.grad for parameter in encoder.parameters()], calls))
    (output, grad, grads, calls), (merged_output, merged_grad, merged_grads, merged_calls) = results
    layers = settings["num_layers"]
    assert len(calls) == 2 * layers and len(merged_calls) == layers
    assert all(weights[1].shape == (32, 8) for weights in merged_calls)  # (4 gates x 2 x 4 units, 2 x 4 states)
    tolerance = {"atol": 1e-6, "rtol": 1e-5} if dtype == torch.float32 else {"atol": 1e-12, "rtol": 1e-12}
    torch.testing.assert_close(merged_output, output, **tolerance)
    assert not merged_output[~mask].any()
    torch.testing.assert_close(merged_grad, grad, **tolerance)
    for got, wanted in zip(merged_grads, grads):
        torch.testing.assert_close(got, wanted, **tolerance)


def test_directions_merge_only_when_asked():
    encoder = FastLstm(5, 4, bidirectional=True)
    inputs, mask = _batch(torch.float32)
    calls = []
    with mock.patch.object(torch, "lstm", functools.partial(_recorded_lstm, calls, torch.lstm)):
        encoder(inputs, mask)
    assert [weights[1].shape for weights in calls] == [(16, 4), (16, 4)]
    assert encoder.merge_directions is False


def _flatten_like_cudnn(weights, weight_stride0, input_size, mode, hidden_size, proj_size, num_layers, *flags):
    """What `torch._cudnn_rnn_flatten_weight` does for one direction of one layer: the weights copied,
    in order, into a new buffer that they then view."""
    assert (weight_stride0, mode, proj_size, num_layers, flags[1]) == (4, 2, 0, 1, False)
    assert weights[0].shape == (4 * hidden_size, input_size)
    buffer = torch.cat([w.detach().reshape(-1) for w in weights])
    offset = 0
    for weight in weights:
        weight.set_(buffer.untyped_storage(), offset, weight.shape)
        offset += weight.numel()
    return buffer


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_on_cudnn_each_direction_gets_a_weight_buffer_of_its_own(shape):
    # cuDNN uses a call's weights in place only when they start their buffer (tests/gpu checks it there).
    reference, lstm = _pair(shape, torch.float32)
    inputs, mask = _batch(torch.float32)
    expected = lstm(inputs, mask)
    parameters = dict(lstm.named_parameters())
    with (
        mock.patch("nerzoo.modules.seq2seq_encoders.fast_lstm._on_cudnn", return_value=True),
        mock.patch.object(torch, "_cudnn_rnn_flatten_weight", side_effect=_flatten_like_cudnn) as flatten,
    ):
        lstm.float()  # a move or cast: `torch.nn.LSTM` flattens all its weights into one buffer again
    module, calls = lstm._module, flatten.call_args_list
    if not module.bias or SHAPES[shape] == SHAPES["one layer, one direction"]:
        assert not calls  # no buffer holds the zero biases; a single direction already starts one
        return
    directions = ["", "_reverse"] if module.bidirectional else [""]
    assert [call.args[2] for call in calls] == [
        module.input_size if layer == 0 else module.hidden_size * len(directions)
        for layer in range(module.num_layers)
        for _ in directions
    ]
    flattened = [[id(w) for w in call.args[0]] for call in calls]
    layers = [(layer, suffix) for layer in range(module.num_layers) for suffix in directions]
    assert flattened == [[id(w) for w in lstm._weights(*key)] for key in layers]
    assert dict(lstm.named_parameters()) == parameters  # the same objects, for the optimiser
    for key in layers:
        first = lstm._weights(*key)[0]
        assert first.untyped_storage().data_ptr() == first.data_ptr()
    assert torch.equal(lstm(inputs, mask), expected)
    assert lstm.state_dict().keys() == reference.state_dict().keys()


def test_on_the_cpu_the_weights_stay_in_one_buffer():
    _, lstm = _pair("two layers, bidirectional", torch.float32)
    with mock.patch.object(torch, "_cudnn_rnn_flatten_weight") as flatten:
        lstm.double()
    assert not flatten.called and not lstm.own_weight_buffers()
