"""`fast_lstm` against allennlp's `lstm` (packed sequences), which it must equal on real tokens."""

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
