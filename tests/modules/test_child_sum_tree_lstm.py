import random
from typing import List

import pytest
import torch
from allennlp.common import Params
from allennlp.common.checks import ConfigurationError
from allennlp.modules.seq2seq_encoders import Seq2SeqEncoder

from nerzoo.modules.seq2seq_encoders.child_sum_tree_lstm import ChildSumTreeLstm
from nerzoo.modules.seq2seq_encoders.tree_levels import tree_levels
from tests.modules.tree_lstm_reference import reference_tree_lstm


def random_forest(length: int, rng: random.Random, root_probability: float) -> List[int]:
    """CoNLL-U heads of a random forest: nodes in a random order, each attached to an earlier node
    (or made a root), so there is no cycle."""
    order = list(range(length))
    rng.shuffle(order)
    heads = [0] * length
    for rank, node in enumerate(order):
        if rank > 0 and rng.random() >= root_probability:
            heads[node] = order[rng.randrange(rank)] + 1
    return heads


def random_chain(length: int, rng: random.Random) -> List[int]:
    """A single path through the tokens in a random order: the deepest possible tree."""
    order = list(range(length))
    rng.shuffle(order)
    heads = [0] * length
    for rank in range(1, length):
        heads[order[rank]] = order[rank - 1] + 1
    return heads


def pad(sentences: List[List[int]], num_tokens: int = None):
    """`(mask, head_indices)` for the heads of each sentence, right-padded with 0."""
    num_tokens = num_tokens or max(len(heads) for heads in sentences)
    mask = torch.zeros(len(sentences), num_tokens, dtype=torch.bool)
    head_indices = torch.zeros(len(sentences), num_tokens, dtype=torch.long)
    for row, heads in enumerate(sentences):
        mask[row, : len(heads)] = True
        head_indices[row, : len(heads)] = torch.tensor(heads, dtype=torch.long)
    return mask, head_indices


def random_batch(seed: int):
    rng = random.Random(seed)
    sentences = [
        random_forest(rng.randint(2, 15), rng, root_probability=0.0),  # one tree
        random_forest(rng.randint(5, 15), rng, root_probability=0.3),  # several roots
        [0],  # a single token
        random_chain(40, rng),  # deep
        random_forest(rng.randint(20, 30), rng, root_probability=0.05),
        [0, 0, 0],  # only roots
        [],  # an empty row
        random_forest(rng.randint(2, 6), rng, root_probability=0.0),
    ]
    return pad(sentences, num_tokens=42)


def gradients(module, inputs, run):
    """Outputs of `run()` and gradients of a fixed random projection of them."""
    module.zero_grad(set_to_none=True)
    inputs = inputs.detach().clone().requires_grad_(True)
    states, root = run(inputs)
    generator = torch.Generator().manual_seed(123)
    projection = torch.randn(states.shape, generator=generator, dtype=states.dtype)
    root_projection = torch.randn(root.shape, generator=generator, dtype=root.dtype)
    ((states * projection).sum() + (root * root_projection).sum()).backward()
    grads = {name: parameter.grad.clone() for name, parameter in module.named_parameters()}
    return states.detach(), root.detach(), inputs.grad, grads


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize(
    "input_dim, num_layers, residual, projected_residual, top_down",
    [
        (6, 1, False, True, False),
        (6, 2, False, True, False),
        (5, 1, True, True, False),
        (5, 2, True, True, False),
        (6, 2, True, True, False),
        (6, 1, True, True, False),
        (6, 2, True, False, False),
        (6, 1, False, True, True),
        (6, 2, True, True, True),
        (10, 2, True, True, True),
        (6, 2, True, False, True),
    ],
)
def test_level_batched_equals_node_by_node_reference(
    seed, input_dim, num_layers, residual, projected_residual, top_down
):
    torch.manual_seed(seed)
    mask, head_indices = random_batch(seed)
    module = ChildSumTreeLstm(
        input_dim,
        5,
        num_layers=num_layers,
        residual=residual,
        dropout=0.2,
        projected_residual=projected_residual,
        top_down=top_down,
    )
    module = module.double().eval()  # eval: dropout off, as in the reference
    if residual:  # make the LayerNorms non-trivial
        for layer in module.layers:
            if layer.layer_norm is not None:
                torch.nn.init.normal_(layer.layer_norm.weight)
                torch.nn.init.normal_(layer.layer_norm.bias)
    inputs = torch.randn(*mask.shape, input_dim, dtype=torch.double)

    batched = gradients(module, inputs, lambda x: module.encode(x, mask, head_indices))
    reference = gradients(module, inputs, lambda x: reference_tree_lstm(module, x, mask, head_indices))

    torch.testing.assert_close(batched[0], reference[0], atol=1e-10, rtol=1e-8)  # states
    torch.testing.assert_close(batched[1], reference[1], atol=1e-10, rtol=1e-8)  # root
    torch.testing.assert_close(batched[2], reference[2], atol=1e-10, rtol=1e-8)  # input gradients
    assert batched[3].keys() == reference[3].keys()
    for name in batched[3]:
        torch.testing.assert_close(batched[3][name], reference[3][name], atol=1e-10, rtol=1e-8, msg=name)
    assert batched[0].abs().sum() > 0


def test_float32_equals_reference():
    torch.manual_seed(3)
    mask, head_indices = random_batch(3)
    module = ChildSumTreeLstm(7, 6, num_layers=2).eval()
    inputs = torch.randn(*mask.shape, 7)
    states, root = module.encode(inputs, mask, head_indices)
    reference_states, reference_root = reference_tree_lstm(module, inputs, mask, head_indices)
    torch.testing.assert_close(states, reference_states, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(root, reference_root, atol=1e-5, rtol=1e-5)


def lstm_with_tree_weights(module: ChildSumTreeLstm) -> torch.nn.LSTM:
    """An LSTM with the first layer's weights: `torch.nn.LSTM` orders its gates i, f, g, o."""
    layer = module.layers[0]
    hidden = module.get_output_dim()
    w_i, w_o, w_u, w_f = layer.input_linearity.weight.split(hidden)
    b_i, b_o, b_u, b_f = layer.input_linearity.bias.split(hidden)
    u_i, u_o, u_u = layer.state_linearity.weight.split(hidden)
    u_f = layer.forget_state_linearity.weight
    lstm = torch.nn.LSTM(module.get_input_dim(), hidden, batch_first=True).double()
    with torch.no_grad():
        lstm.weight_ih_l0.copy_(torch.cat([w_i, w_f, w_u, w_o]))
        lstm.weight_hh_l0.copy_(torch.cat([u_i, u_f, u_u, u_o]))
        lstm.bias_ih_l0.copy_(torch.cat([b_i, b_f, b_u, b_o]))
        lstm.bias_hh_l0.zero_()
    return lstm


def test_chain_rooted_at_first_word_is_a_reversed_lstm():
    # Footnote 2: with the head of token i being token i - 1, the tree runs from the last word to the first.
    torch.manual_seed(0)
    lengths = [9, 4, 1]
    mask, head_indices = pad([list(range(length)) for length in lengths])  # heads 0, 1, 2, ...
    module = ChildSumTreeLstm(4, 3).double()
    inputs = torch.randn(len(lengths), 9, 4, dtype=torch.double)
    states, root = module.encode(inputs, mask, head_indices)
    lstm = lstm_with_tree_weights(module)
    for row, length in enumerate(lengths):
        reversed_inputs = inputs[row : row + 1, :length].flip(1)
        outputs, (last_state, _) = lstm(reversed_inputs)
        torch.testing.assert_close(states[row, :length], outputs[0].flip(0))
        torch.testing.assert_close(root[row], last_state[0, 0])
        assert states[row, length:].abs().sum() == 0


def test_top_down_on_a_chain_is_an_lstm_from_the_root():
    # Heads 0, 1, 2, ...: the top-down pass runs from the first word on, reading each head's
    # bottom-up state as extra input; with those weights zero it is a plain LSTM.
    torch.manual_seed(0)
    lengths = [9, 4, 1]
    mask, head_indices = pad([list(range(length)) for length in lengths])
    module = ChildSumTreeLstm(4, 3, top_down=True).double()
    down = module.layers[0].top_down
    with torch.no_grad():
        down.state_linearity.weight[:, :3].zero_()  # W_h h^up_p
    lstm = torch.nn.LSTM(4, 3, batch_first=True).double()
    w_i, w_f, w_o, w_u = down.input_linearity.weight.split(3)
    b_i, b_f, b_o, b_u = down.input_linearity.bias.split(3)
    u_i, u_f, u_o, u_u = down.state_linearity.weight[:, 3:].split(3)
    with torch.no_grad():
        lstm.weight_ih_l0.copy_(torch.cat([w_i, w_f, w_u, w_o]))
        lstm.weight_hh_l0.copy_(torch.cat([u_i, u_f, u_u, u_o]))
        lstm.bias_ih_l0.copy_(torch.cat([b_i, b_f, b_u, b_o]))
        lstm.bias_hh_l0.zero_()
    inputs = torch.randn(len(lengths), 9, 4, dtype=torch.double)
    states = module(inputs, mask, head_indices)
    assert states.shape == (3, 9, 6)
    for row, length in enumerate(lengths):
        outputs, _ = lstm(inputs[row : row + 1, :length])
        torch.testing.assert_close(states[row, :length, 3:], outputs[0])


def test_top_down_reaches_a_leaf_from_its_governor_and_siblings():
    # "Jason called Mary": Jason (a leaf) changes with called (its head) and Mary (its sibling)
    # only through the top-down pass.
    torch.manual_seed(0)
    mask, head_indices = pad([[2, 0, 2]])
    for top_down, moves in ((False, False), (True, True)):
        module = ChildSumTreeLstm(4, 3, top_down=top_down).eval()
        inputs = torch.randn(1, 3, 4)
        for changed in (1, 2):
            other = inputs.clone()
            other[0, changed] += 1.0
            before, after = module(inputs, mask, head_indices), module(other, mask, head_indices)
            assert (not torch.allclose(before[0, 0], after[0, 0])) == moves


def test_masked_positions_do_not_change_real_outputs():
    torch.manual_seed(0)
    rng = random.Random(0)
    sentences = [random_forest(n, rng, 0.2) for n in (7, 3, 10, 1)]
    mask, head_indices = pad(sentences, num_tokens=12)
    module = ChildSumTreeLstm(5, 5, num_layers=2, residual=True).double().eval()
    inputs = torch.randn(4, 12, 5, dtype=torch.double)
    states, root = module.encode(inputs, mask, head_indices)

    garbage_inputs = torch.where(mask.unsqueeze(-1), inputs, torch.randn_like(inputs) * 1e3)
    garbage_inputs[1, 5, 0] = float("nan")
    garbage_inputs[2, 11, 1] = float("inf")
    garbage_heads = torch.where(mask, head_indices, torch.randint(-5, 50, head_indices.shape))
    garbage_inputs.requires_grad_(True)
    garbage_states, garbage_root = module.encode(garbage_inputs, mask, garbage_heads)

    assert torch.equal(garbage_states[mask], states[mask])
    assert torch.equal(garbage_root, root)
    assert garbage_states[~mask].abs().sum() == 0  # padded outputs are zero (also after LayerNorm)
    garbage_states.sum().backward()
    assert torch.isfinite(garbage_inputs.grad).all()
    assert garbage_inputs.grad[~mask].abs().sum() == 0


def test_an_all_masked_batch_gives_zeros():
    module = ChildSumTreeLstm(3, 3, num_layers=2, residual=True)
    mask = torch.zeros(2, 4, dtype=torch.bool)
    output = module.encode(torch.randn(2, 4, 3), mask, torch.randint(0, 9, (2, 4)))
    assert output.states.shape == (2, 4, 3) and output.root.shape == (2, 3)
    assert output.states.abs().sum() == 0 and output.root.abs().sum() == 0


def test_a_token_before_a_masked_one_is_still_computed():
    # The mask need not be a prefix: token 2 is masked, tokens 1 and 3 are a tree.
    torch.manual_seed(0)
    module = ChildSumTreeLstm(3, 4).double()
    inputs = torch.randn(1, 3, 3, dtype=torch.double)
    mask = torch.tensor([[True, False, True]])
    states, _ = module.encode(inputs, mask, torch.tensor([[0, 7, 1]]))
    compact, _ = module.encode(inputs[:, [0, 2]], torch.tensor([[True, True]]), torch.tensor([[0, 1]]))
    torch.testing.assert_close(states[:, [0, 2]], compact)
    assert states[0, 1].abs().sum() == 0


def test_root_is_the_mean_of_the_root_states():
    torch.manual_seed(0)
    mask, head_indices = pad([[0, 1, 0, 3, 0, 5], [2, 0, 2], []])
    module = ChildSumTreeLstm(4, 3, num_layers=2).double()
    output = module.encode(torch.randn(3, 6, 4, dtype=torch.double), mask, head_indices)
    torch.testing.assert_close(output.root[0], output.states[0, [0, 2, 4]].mean(dim=0))
    torch.testing.assert_close(output.root[1], output.states[1, 1])
    assert output.root[2].abs().sum() == 0
    # The roots are not all equal, so the mean is not just one of them.
    assert not torch.allclose(output.states[0, 0], output.states[0, 2])


def test_forward_returns_the_states():
    torch.manual_seed(0)
    mask, head_indices = pad([[0, 1, 1], [0]])
    module = ChildSumTreeLstm(4, 3)
    inputs = torch.randn(2, 3, 4)
    outputs = module(inputs, mask, head_indices)
    assert outputs.shape == (2, 3, 3)
    assert torch.equal(outputs, module.encode(inputs, mask, head_indices).states)


def test_every_layer_is_residual_a_size_change_through_a_projection():
    layers = ChildSumTreeLstm(4, 3, 3, residual=True).layers
    assert [layer.layer_norm is not None for layer in layers] == [True, True, True]
    assert [layer.residual_projection is not None for layer in layers] == [True, False, False]
    assert layers[0].residual_projection.weight.shape == (3, 4) and layers[0].residual_projection.bias is None
    unprojected = ChildSumTreeLstm(4, 3, 3, residual=True, projected_residual=False).layers
    assert [layer.layer_norm is not None for layer in unprojected] == [False, True, True]
    assert all(layer.residual_projection is None for layer in unprojected)
    assert [layer.layer_norm is not None for layer in ChildSumTreeLstm(3, 3, 2, residual=True).layers] == [
        True,
        True,
    ]
    assert all(layer.layer_norm is None for layer in ChildSumTreeLstm(3, 3, 2).layers)


def test_dropout_only_in_training():
    torch.manual_seed(0)
    mask, head_indices = pad([[0, 1, 1, 2], [0, 1]])
    module = ChildSumTreeLstm(4, 4, num_layers=2, dropout=0.5)
    inputs = torch.randn(2, 4, 4)
    first = module(inputs, mask, head_indices)
    second = module(inputs, mask, head_indices)
    assert not torch.allclose(first, second)
    module.eval()
    assert torch.equal(module(inputs, mask, head_indices), module(inputs, mask, head_indices))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"input_dim": 0, "hidden_dim": 4},
        {"input_dim": 4, "hidden_dim": 0},
        {"input_dim": 4, "hidden_dim": 4, "num_layers": 0},
        {"input_dim": 4, "hidden_dim": 4, "dropout": 1.0},
        {"input_dim": 4, "hidden_dim": 4, "dropout": -0.1},
    ],
)
def test_constructor_checks_dimensions(kwargs):
    with pytest.raises(ConfigurationError):
        ChildSumTreeLstm(**kwargs)


def test_dimensions_and_registration():
    module = Seq2SeqEncoder.from_params(Params({"type": "child_sum_tree_lstm", "input_dim": 8, "hidden_dim": 6}))
    assert isinstance(module, ChildSumTreeLstm)
    assert (module.get_input_dim(), module.get_output_dim(), module.is_bidirectional()) == (8, 6, False)
    both = Seq2SeqEncoder.from_params(
        Params({"type": "child_sum_tree_lstm", "input_dim": 8, "hidden_dim": 6, "num_layers": 2, "top_down": True})
    )
    assert both.get_output_dim() == 12 and both(
        torch.randn(1, 2, 8), torch.ones(1, 2, dtype=torch.bool), torch.tensor([[0, 1]])
    ).shape == (1, 2, 12)
    with pytest.raises(ValueError):
        module(torch.randn(1, 2, 7), torch.ones(1, 2, dtype=torch.bool), torch.tensor([[0, 1]]))


@pytest.mark.parametrize(
    "heads",
    [
        [[2, 1, 0]],  # a cycle
        [[1]],  # a token that is its own head
        [[0, 4, 1]],  # a head past the end
        [[0, -1, 1]],  # a negative head
    ],
)
def test_invalid_heads_raise(heads):
    module = ChildSumTreeLstm(2, 2)
    head_indices = torch.tensor(heads)
    with pytest.raises(ValueError):
        module(torch.randn(*head_indices.shape, 2), torch.ones_like(head_indices, dtype=torch.bool), head_indices)


def test_head_pointing_at_a_masked_token_raises():
    module = ChildSumTreeLstm(2, 2)
    mask = torch.tensor([[True, True, False]])
    with pytest.raises(ValueError):
        module(torch.randn(1, 3, 2), mask, torch.tensor([[0, 3, 0]]))


def depths_by_walking(heads: List[int]) -> List[int]:
    """Each token's distance to its root, walking up its heads one at a time."""
    depths = []
    for token in range(len(heads)):
        depth = 0
        while heads[token] > 0:
            token, depth = heads[token] - 1, depth + 1
        depths.append(depth)
    return depths


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_levels_hold_each_token_once_after_its_children(seed):
    mask, head_indices = random_batch(seed)
    batch_size, num_tokens = mask.shape
    levels = tree_levels(mask, head_indices)
    depth = {}
    for row in range(batch_size):
        heads = head_indices[row, : int(mask[row].sum())].tolist()
        for token, token_depth in enumerate(depths_by_walking(heads)):
            depth[row * num_tokens + token] = token_depth
    max_depth = max(depth.values())
    assert levels.sizes == [sum(d == max_depth - level for d in depth.values()) for level in range(max_depth + 1)]
    # One row per real token.
    assert sorted(levels.tokens.tolist()) == sorted(depth)
    level_tokens = levels.tokens.split(levels.sizes)
    for level, (tokens, head_slots) in enumerate(zip(level_tokens, levels.head_slots.split(levels.sizes))):
        assert all(depth[position] == max_depth - level for position in tokens.tolist())
        for position, head_slot in zip(tokens.tolist(), head_slots.tolist()):
            head = int(head_indices.view(-1)[position])
            if head == 0:  # a root: what it sends goes to the dropped row
                assert head_slot == (levels.sizes[level + 1] if level + 1 < len(levels.sizes) else 0)
            else:
                head_position = position - position % num_tokens + head - 1
                assert int(level_tokens[level + 1][head_slot]) == head_position


class Encode(torch.nn.Module):
    """`encode` of a `ChildSumTreeLstm` as its forward, for `torch.func.functional_call`."""

    def __init__(self, module: ChildSumTreeLstm) -> None:
        super().__init__()
        self.module = module

    def forward(self, inputs, mask, head_indices):
        return tuple(self.module.encode(inputs, mask, head_indices))


@pytest.mark.parametrize("top_down", [False, True])
def test_gradcheck_on_a_small_forest(top_down):
    torch.manual_seed(0)
    mask, head_indices = pad([[0, 1, 1, 2, 0], [2, 0, 2]])
    encode = Encode(ChildSumTreeLstm(3, 2, num_layers=2, residual=True, top_down=top_down).double())
    names = [name for name, _ in encode.named_parameters()]
    inputs = torch.randn(*mask.shape, 3, dtype=torch.double, requires_grad=True)
    parameters = [parameter.detach().clone().requires_grad_() for parameter in encode.parameters()]

    def run(inputs, *parameters):
        return torch.func.functional_call(encode, dict(zip(names, parameters)), (inputs, mask, head_indices))

    assert torch.autograd.gradcheck(run, (inputs, *parameters), fast_mode=True)


def test_inference_mode_gives_the_outputs_of_a_training_pass():
    torch.manual_seed(1)
    mask, head_indices = random_batch(1)
    module = ChildSumTreeLstm(6, 5, num_layers=2, residual=True, dropout=0.3).eval()
    inputs = torch.randn(*mask.shape, 6)
    expected = module.encode(inputs, mask, head_indices)
    with torch.inference_mode():
        served = module.encode(inputs.clone(), mask.clone(), head_indices.clone())
    torch.testing.assert_close(served.states, expected.states, atol=0, rtol=0)
    torch.testing.assert_close(served.root, expected.root, atol=0, rtol=0)
    # A training step after serving still works.
    module.train()
    states, root = module.encode(inputs.requires_grad_(), mask, head_indices)
    (states.sum() + root.sum()).backward()
    assert all(parameter.grad is not None for parameter in module.parameters())
