import math

import pytest
import torch
from allennlp.common import Params
from allennlp.common.checks import ConfigurationError
from allennlp.modules.seq2seq_encoders import LstmSeq2SeqEncoder, Seq2SeqEncoder
from allennlp.nn.util import get_final_encoder_states

from nerzoo.modules.seq2seq_encoders.global_attention import GlobalAttention
from nerzoo.modules.seq2seq_encoders.relative_attention import AttentionOutput, RelativeAttention
from nerzoo.modules.seq2seq_encoders.residual_stack import ResidualStack

LENGTHS = [4, 2, 1, 3]
MAX_LENGTH = 5


def _batch(dim, seed=0):
    """Inputs (4, 5, dim) with NaN at padding (the modules must never read it), and their mask."""
    generator = torch.Generator().manual_seed(seed)
    mask = torch.tensor([[t < n for t in range(MAX_LENGTH)] for n in LENGTHS])
    inputs = torch.randn(len(LENGTHS), MAX_LENGTH, dim, generator=generator)
    return inputs.masked_fill(~mask.unsqueeze(-1), float("nan")), mask


def _with_garbage(inputs, mask, seed=1):
    generator = torch.Generator().manual_seed(seed)
    garbage = 1e3 * torch.randn(inputs.size(), generator=generator)
    return torch.where(mask.unsqueeze(-1), inputs, garbage)


def _randomise_layer_norm(layer_norm, seed=2):
    """A LayerNorm with a non-trivial affine part, so a test can tell whose LayerNorm ran."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        layer_norm.weight.copy_(torch.rand(layer_norm.weight.size(), generator=generator) + 0.5)
        layer_norm.bias.copy_(torch.randn(layer_norm.bias.size(), generator=generator))


def _layer_norm(vectors, layer_norm):
    """LayerNorm over the last dimension written out by hand, with the module's affine parameters."""
    mean = vectors.mean(-1, keepdim=True)
    variance = vectors.var(-1, unbiased=False, keepdim=True)
    return (vectors - mean) / torch.sqrt(variance + layer_norm.eps) * layer_norm.weight + layer_norm.bias


# ---------------------------------------------------------------------------------------------
# Relative attention (section 3.2.2)
# ---------------------------------------------------------------------------------------------


def _relative_by_hand(attention, sentence):
    """Eq. 1-2 for one unpadded sentence (n, d), one word pair at a time."""
    w_q, w_k, w_v = attention._query.weight, attention._key.weight, attention._value.weight
    n, d = sentence.size()
    queries, keys, values = sentence @ w_q.T, sentence @ w_k.T, sentence @ w_v.T
    weights = torch.zeros(n, n)
    for i in range(n):
        others = [j for j in range(n) if j != i]
        if not others:
            continue
        scores = torch.stack([queries[i] @ keys[j] / math.sqrt(d) for j in others])
        weights[i, others] = torch.softmax(scores, dim=0)
    weighted = torch.stack([sum(weights[i, j] * values[j] for j in range(n)) + values[i] for i in range(n)])
    return weights, weighted


def test_relative_attention_weights_are_distributions_over_the_other_words():
    torch.manual_seed(0)
    attention = RelativeAttention(input_dim=6)
    inputs, mask = _batch(6)
    result = attention.attend(inputs, mask)
    assert isinstance(result, AttentionOutput)
    weights = result.weights
    assert weights.size() == (4, MAX_LENGTH, MAX_LENGTH)
    assert result.output.size() == (4, MAX_LENGTH, 6)
    assert not torch.isnan(result.output).any()
    # Zero main diagonal.
    assert torch.all(torch.diagonal(weights, dim1=1, dim2=2) == 0)
    for row, length in enumerate(LENGTHS):
        # Padding rows and columns are zero.
        assert torch.all(weights[row, length:, :] == 0)
        assert torch.all(weights[row, :, length:] == 0)
        real = weights[row, :length, :length]
        if length > 1:
            assert torch.allclose(real.sum(-1), torch.ones(length), atol=1e-5)
            off_diagonal = ~torch.eye(length, dtype=torch.bool)
            assert torch.all(real[off_diagonal] > 0)
        else:
            assert torch.all(real == 0)
        # The paper's identity below eq. 1: sum_i sum_{j != i} A_ij = N (for N > 1).
        expected_total = length if length > 1 else 0
        assert weights[row].sum().item() == pytest.approx(expected_total, abs=1e-4)


def test_relative_attention_without_residual_is_av_plus_v():
    torch.manual_seed(1)
    attention = RelativeAttention(input_dim=6, residual=False)
    inputs, mask = _batch(6)
    result = attention.attend(inputs, mask)
    for row, length in enumerate(LENGTHS):
        weights, weighted = _relative_by_hand(attention, inputs[row, :length])
        assert torch.allclose(result.weights[row, :length, :length], weights, atol=1e-6)
        assert torch.allclose(result.output[row, :length], weighted, atol=1e-5)
        assert torch.all(result.output[row, length:] == 0)


def test_relative_attention_with_residual_is_layer_norm_of_x_plus_m():
    torch.manual_seed(2)
    attention = RelativeAttention(input_dim=6)
    _randomise_layer_norm(attention._layer_norm)
    inputs, mask = _batch(6)
    output = attention(inputs, mask)
    for row, length in enumerate(LENGTHS):
        sentence = inputs[row, :length]
        _, weighted = _relative_by_hand(attention, sentence)
        expected = _layer_norm(sentence + weighted, attention._layer_norm)
        assert torch.allclose(output[row, :length], expected, atol=1e-5)
        assert torch.all(output[row, length:] == 0)


def test_relative_attention_ignores_what_padding_holds():
    torch.manual_seed(3)
    attention = RelativeAttention(input_dim=6)
    inputs, mask = _batch(6)
    clean = attention.attend(inputs, mask)
    dirty = attention.attend(_with_garbage(inputs, mask), mask)
    assert torch.allclose(clean.output, dirty.output, atol=1e-6)
    assert torch.allclose(clean.weights, dirty.weights, atol=1e-6)


def test_relative_attention_one_token_sentence_has_zero_row_and_m_equal_v():
    torch.manual_seed(4)
    attention = RelativeAttention(input_dim=6, residual=False)
    sentence = torch.randn(1, 1, 6)
    result = attention.attend(sentence, torch.ones(1, 1, dtype=torch.bool))
    assert torch.all(result.weights == 0)
    assert torch.allclose(result.output, attention._value(sentence), atol=1e-6)
    with_residual = RelativeAttention(input_dim=6)
    _randomise_layer_norm(with_residual._layer_norm)
    output = with_residual(sentence, torch.ones(1, 1, dtype=torch.bool))
    expected = _layer_norm(sentence + with_residual._value(sentence), with_residual._layer_norm)
    assert torch.allclose(output, expected, atol=1e-5)


def test_relative_attention_dropout_and_checks():
    torch.manual_seed(5)
    attention = RelativeAttention(input_dim=6, dropout=0.5)
    inputs, mask = _batch(6)
    attention.eval()
    assert torch.allclose(attention(inputs, mask), attention(inputs, mask))
    attention.train()
    assert not torch.allclose(attention(inputs, mask), attention(inputs, mask))
    assert (attention.get_input_dim(), attention.get_output_dim(), attention.is_bidirectional()) == (6, 6, False)
    with pytest.raises(ConfigurationError):
        RelativeAttention(input_dim=0)
    with pytest.raises(ConfigurationError):
        RelativeAttention(input_dim=4, dropout=1.0)
    with pytest.raises(ConfigurationError):
        attention(torch.randn(2, 3, 5), torch.ones(2, 3, dtype=torch.bool))


# ---------------------------------------------------------------------------------------------
# Global attention (section 3.2.3)
# ---------------------------------------------------------------------------------------------


def _global_by_hand(attention, sentence, query):
    """Eq. 3 for one unpadded sentence (n, d_h) and its query (d_q,), one word at a time."""
    w_h, b_h = attention._hidden_projection.weight, attention._hidden_projection.bias
    w_q, b_q = attention._query_projection.weight, attention._query_projection.bias
    v = attention._attention_vector.weight[0]
    scores = torch.stack([v @ torch.tanh(w_h @ h + b_h + w_q @ query + b_q) for h in sentence])
    weights = torch.exp(scores) / torch.exp(scores).sum()
    return weights, weights.unsqueeze(-1) * sentence


def test_global_attention_weights_sum_to_one_and_zero_at_padding():
    torch.manual_seed(6)
    attention = GlobalAttention(input_dim=6, attention_dim=4)
    inputs, mask = _batch(6)
    result = attention.attend(inputs, mask)
    assert isinstance(result, AttentionOutput)
    assert result.weights.size() == (4, MAX_LENGTH)
    assert result.output.size() == (4, MAX_LENGTH, 6)
    assert not torch.isnan(result.output).any()
    assert torch.allclose(result.weights.sum(-1), torch.ones(4), atol=1e-5)
    assert torch.all(result.weights[~mask] == 0)
    assert torch.all(result.weights[mask] > 0)
    assert torch.all(result.output[~mask] == 0)


@pytest.mark.parametrize("mode, residual", [("scale", False), ("scale", True), ("context", True)])
def test_global_attention_is_equation_3(mode, residual):
    torch.manual_seed(7)
    attention = GlobalAttention(input_dim=6, attention_dim=4, query_dim=3, residual=residual, mode=mode)
    if residual:
        _randomise_layer_norm(attention._layer_norm)
    inputs, mask = _batch(6)
    query = torch.randn(4, 3)
    result = attention.attend(inputs, mask, query=query)
    for row, length in enumerate(LENGTHS):
        sentence = inputs[row, :length]
        weights, weighted = _global_by_hand(attention, sentence, query[row])
        if mode == "context":
            context = sum(weights[j] * sentence[j] for j in range(length))
            projection = attention._context_projection
            weighted = (projection.weight @ context + projection.bias).expand(length, -1)
        if residual:
            weighted = _layer_norm(sentence + weighted, attention._layer_norm)
        assert torch.allclose(result.weights[row, :length], weights, atol=1e-6)
        assert torch.allclose(result.output[row, :length], weighted, atol=1e-5)


def _query_effect(attention):
    """How far the output moves when the query changes, and the query projection's gradient."""
    inputs, mask = _batch(6, seed=3)
    generator = torch.Generator().manual_seed(4)
    first, second = (3 * torch.randn(4, 6, generator=generator) for _ in range(2))
    with torch.no_grad():
        moved = (attention(inputs, mask, query=first) - attention(inputs, mask, query=second)).abs().max()
    attention.zero_grad()
    target = torch.randn(4, MAX_LENGTH, 6, generator=generator)
    (attention(inputs, mask, query=first) * target).sum().backward()
    return float(moved), float(attention._query_projection.weight.grad.abs().max())


def test_global_attention_context_mode_carries_the_query_to_the_output():
    torch.manual_seed(13)
    attention = GlobalAttention(input_dim=6, attention_dim=4)  # the default: context, residual
    moved, gradient = _query_effect(attention)
    assert moved > 1e-2 and gradient > 1e-3


def test_global_attention_scale_mode_with_residual_is_inert():
    # LayerNorm((1 + a_i) h_i) = LayerNorm(h_i) up to eps: the literal eq. 3-4 learn (almost) nothing.
    torch.manual_seed(13)
    attention = GlobalAttention(input_dim=6, attention_dim=4, mode="scale")
    moved, gradient = _query_effect(attention)
    assert moved < 1e-4 and gradient < 1e-4
    inputs, mask = _batch(6, seed=3)
    plain = torch.nn.functional.layer_norm(inputs.masked_fill(~mask.unsqueeze(-1), 0.0), (6,)) * mask.unsqueeze(-1)
    assert torch.allclose(attention(inputs, mask), plain, atol=1e-4)


def test_global_attention_modes_are_checked():
    with pytest.raises(ConfigurationError, match="mode"):
        GlobalAttention(input_dim=6, attention_dim=4, mode="gate")
    with pytest.raises(ConfigurationError, match="residual"):
        GlobalAttention(input_dim=6, attention_dim=4, residual=False)
    assert GlobalAttention(input_dim=6, attention_dim=4, residual=False, mode="scale")._layer_norm is None
    # The projected sentence vector mixes the halves of a bidirectional input; scaling keeps them.
    assert not GlobalAttention(input_dim=6, attention_dim=4, bidirectional_input=True).is_bidirectional()
    assert GlobalAttention(input_dim=6, attention_dim=4, bidirectional_input=True, mode="scale").is_bidirectional()


@pytest.mark.parametrize("bidirectional", [False, True])
def test_global_attention_default_query_is_the_final_encoder_state(bidirectional):
    torch.manual_seed(8)
    attention = GlobalAttention(input_dim=6, attention_dim=4, bidirectional_input=bidirectional)
    inputs, mask = _batch(6)
    final_states = get_final_encoder_states(inputs.masked_fill(~mask.unsqueeze(-1), 0.0), mask, bidirectional)
    default = attention.attend(inputs, mask)
    for row, length in enumerate(LENGTHS):
        weights, _ = _global_by_hand(attention, inputs[row, :length], final_states[row])
        assert torch.allclose(default.weights[row, :length], weights, atol=1e-6)
    explicit = attention.attend(inputs, mask, query=final_states)
    assert torch.allclose(default.output, explicit.output)
    assert not attention.is_bidirectional()


def test_global_attention_uses_an_explicit_query():
    torch.manual_seed(9)
    attention = GlobalAttention(input_dim=6, attention_dim=4)
    inputs, mask = _batch(6)
    query = 3 * torch.randn(4, 6)
    default = attention.attend(inputs, mask)
    explicit = attention.attend(inputs, mask, query=query)
    assert not torch.allclose(default.weights, explicit.weights, atol=1e-3)
    weights, _ = _global_by_hand(attention, inputs[0, :4], query[0])
    assert torch.allclose(explicit.weights[0, :4], weights, atol=1e-6)


def test_global_attention_ignores_what_padding_holds():
    torch.manual_seed(10)
    attention = GlobalAttention(input_dim=6, attention_dim=4, bidirectional_input=True)
    inputs, mask = _batch(6)
    clean = attention.attend(inputs, mask)
    dirty = attention.attend(_with_garbage(inputs, mask), mask)
    assert torch.allclose(clean.output, dirty.output, atol=1e-6)
    assert torch.allclose(clean.weights, dirty.weights, atol=1e-6)


def test_global_attention_dimension_checks():
    with pytest.raises(ConfigurationError, match="even"):
        GlobalAttention(input_dim=5, attention_dim=4, bidirectional_input=True)
    with pytest.raises(ConfigurationError, match="query_dim"):
        GlobalAttention(input_dim=6, attention_dim=4, query_dim=3, bidirectional_input=True)
    with pytest.raises(ConfigurationError, match="attention_dim"):
        GlobalAttention(input_dim=6, attention_dim=0)
    attention = GlobalAttention(input_dim=6, attention_dim=4, query_dim=3)
    assert (attention.get_input_dim(), attention.get_output_dim(), attention.is_bidirectional()) == (6, 6, False)
    inputs, mask = _batch(6)
    with pytest.raises(ConfigurationError, match="final state"):
        attention(inputs, mask)
    with pytest.raises(ConfigurationError, match="query of shape"):
        attention(inputs, mask, query=torch.randn(4, 6))
    with pytest.raises(ConfigurationError, match="input_dim"):
        attention(torch.randn(4, MAX_LENGTH, 5), mask, query=torch.randn(4, 3))


# ---------------------------------------------------------------------------------------------
# Residual stack (section 3.2.4)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("projected_residual", [True, False])
def test_residual_stack_equals_manual_composition(projected_residual):
    torch.manual_seed(11)
    widen = LstmSeq2SeqEncoder(input_size=4, hidden_size=3, bidirectional=True)  # 4 -> 6: through P, or plain
    keep = LstmSeq2SeqEncoder(input_size=6, hidden_size=3, bidirectional=True)  # 6 -> 6: residual
    attend = RelativeAttention(input_dim=6, residual=False)  # 6 -> 6: residual
    stack = ResidualStack([widen, keep, attend], dropout=0.3, projected_residual=projected_residual)
    stack.eval()
    residual_layers = {"0", "1", "2"} if projected_residual else {"1", "2"}
    assert set(stack._layer_norms.keys()) == residual_layers
    assert set(stack._projections.keys()) == ({"0"} if projected_residual else set())
    for index in residual_layers:
        _randomise_layer_norm(stack._layer_norms[index], seed=int(index))
    inputs, mask = _batch(4)
    inputs = inputs.masked_fill(~mask.unsqueeze(-1), 0.0)
    keep_mask = mask.unsqueeze(-1)
    expected = widen(inputs, mask)
    if projected_residual:
        projection = stack._projections["0"].weight  # (6, 4)
        assert stack._projections["0"].bias is None
        expected = _layer_norm(inputs @ projection.T + expected, stack._layer_norms["0"]) * keep_mask
    expected = _layer_norm(expected + keep(expected, mask), stack._layer_norms["1"]) * keep_mask
    expected = _layer_norm(expected + attend(expected, mask), stack._layer_norms["2"]) * keep_mask
    output = stack(inputs, mask)
    assert output.size() == (4, MAX_LENGTH, 6)
    assert torch.allclose(output, expected, atol=1e-5)
    assert (stack.get_input_dim(), stack.get_output_dim(), stack.is_bidirectional()) == (4, 6, False)
    # Dropout acts between the layers while training.
    stack.train()
    assert not torch.allclose(stack(inputs, mask), output, atol=1e-4)


def test_residual_stack_checks_consecutive_dimensions():
    with pytest.raises(ConfigurationError, match="layer 1 takes inputs of size 5"):
        ResidualStack(
            [
                LstmSeq2SeqEncoder(input_size=4, hidden_size=3, bidirectional=True),
                LstmSeq2SeqEncoder(input_size=5, hidden_size=3),
            ]
        )
    with pytest.raises(ConfigurationError):
        ResidualStack([])


def test_residual_stack_from_params_with_lstm_layers():
    torch.manual_seed(12)
    stack = Seq2SeqEncoder.from_params(
        Params(
            {
                "type": "residual_stack",
                "dropout": 0.2,
                "layers": [
                    {"type": "lstm", "input_size": 6, "hidden_size": 3, "bidirectional": True},
                    {"type": "lstm", "input_size": 6, "hidden_size": 4, "bidirectional": True},
                ],
            }
        )
    )
    assert isinstance(stack, ResidualStack)
    assert (stack.get_input_dim(), stack.get_output_dim(), stack.is_bidirectional()) == (6, 8, True)
    assert set(stack._layer_norms.keys()) == {"0", "1"}
    assert set(stack._projections.keys()) == {"1"}
    inputs, mask = _batch(6)
    output = stack(inputs.masked_fill(~mask.unsqueeze(-1), 0.0), mask)
    assert output.size() == (4, MAX_LENGTH, 8)
    assert torch.all(output[~mask] == 0)


@pytest.mark.parametrize(
    "params, expected_type",
    [
        ({"type": "relative_attention", "input_dim": 6}, RelativeAttention),
        ({"type": "global_attention", "input_dim": 6, "attention_dim": 4}, GlobalAttention),
    ],
)
def test_attention_encoders_build_from_params(params, expected_type):
    encoder = Seq2SeqEncoder.from_params(Params(params))
    assert type(encoder) is expected_type
    inputs, mask = _batch(6)
    output = encoder(inputs, mask)
    assert output.size() == (4, MAX_LENGTH, 6)
    assert torch.all(output[~mask] == 0) and not torch.isnan(output).any()
