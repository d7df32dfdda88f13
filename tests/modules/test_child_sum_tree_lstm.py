import random
from typing import List

import pytest
import torch
from allennlp.common import Params
from allennlp.common.checks import ConfigurationError
from allennlp.modules.seq2seq_encoders import Seq2SeqEncoder

from nerzoo.modules.seq2seq_encoders import child_sum_tree_lstm
from nerzoo.modules.seq2seq_encoders.child_sum_tree_lstm import ChildSumTreeLstm
from tests import OperatorCalls
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
    "input_dim, num_layers, residual, projected_residual",
    [
        (6, 1, False, True),
        (6, 2, False, True),
        (5, 1, True, True),
        (5, 2, True, True),
        (6, 2, True, True),
        (6, 1, True, True),
        (6, 2, True, False),
    ],
)
def test_level_batched_equals_node_by_node_reference(seed, input_dim, num_layers, residual, projected_residual):
    torch.manual_seed(seed)
    mask, head_indices = random_batch(seed)
    module = ChildSumTreeLstm(
        input_dim, 5, num_layers=num_layers, residual=residual, dropout=0.2, projected_residual=projected_residual
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


def test_forward_and_backward_read_the_device_only_for_the_schedule(monkeypatch):
    """
    Every read of tensor data fails on the meta device (`.item()`, `torch.equal`, `nonzero`, ...).
    With the schedule's one copy to the host answered by the real mask and heads, a training-mode
    forward and backward pass run there: the schedule and the layers' level loops read nothing else
    from the device (on a GPU, nothing else would wait for it).
    """
    mask, head_indices = random_batch(0)
    copies = []

    def copy_to_host(tensor):
        copies.append((tensor.device.type, tuple(tensor.shape)))
        return torch.stack([mask.long(), head_indices.long()])

    monkeypatch.setattr(child_sum_tree_lstm, "_copy_to_host", copy_to_host)
    module = ChildSumTreeLstm(6, 6, num_layers=2, residual=True, dropout=0.2).to("meta").train()
    inputs = torch.empty(*mask.shape, 6, device="meta", requires_grad=True)
    states, root = module.encode(inputs, mask.to("meta"), head_indices.to("meta"))
    (states.sum() + root.sum()).backward()
    assert copies == [("meta", (2, *mask.shape))]
    assert states.shape == (*mask.shape, 6) and root.shape == (mask.shape[0], 6)
    assert inputs.grad.shape == inputs.shape
    assert all(parameter.grad is not None for parameter in module.parameters())


def test_a_tree_level_costs_few_operator_calls():
    """
    On a GPU each operator call of a small batch is about one kernel launch: a training step's forward
    and backward pass through one more tree level (a chain one token longer, in every row) costs a
    layer 14 calls (9 forward, 5 backward; every level view is cut from a column in one call).
    """
    module = ChildSumTreeLstm(4, 4).train()

    def calls(length: int) -> int:
        mask, head_indices = pad([list(range(length))] * 3)  # a chain: length levels
        inputs = torch.randn(*mask.shape, 4, requires_grad=True)
        counter = OperatorCalls()
        with counter:
            states, root = module.encode(inputs, mask, head_indices)
            (states.sum() + root.sum()).backward()
        return counter.calls

    calls(8)  # what is made once per size and device
    per_level = (calls(24) - calls(8)) / 16
    assert 0 < per_level <= 14


@pytest.mark.parametrize(
    "input_dim, num_layers, residual, projected_residual",
    [(6, 3, True, False), (5, 3, False, True), (6, 2, True, True), (5, 1, True, True)],
)
def test_without_gradients_the_layers_share_buffers_and_give_the_same_outputs(
    input_dim, num_layers, residual, projected_residual
):
    # Without gradients every layer runs in the first layer's buffers; a layer's outputs are still
    # its next layer's inputs and shortcut.
    torch.manual_seed(0)
    mask, head_indices = random_batch(1)
    module = ChildSumTreeLstm(
        input_dim, 5, num_layers=num_layers, residual=residual, projected_residual=projected_residual
    ).eval()
    inputs = torch.randn(*mask.shape, input_dim)
    states, root = module.encode(inputs, mask, head_indices)
    with torch.no_grad():
        shared_states, shared_root = module.encode(inputs, mask, head_indices)
    assert torch.equal(shared_states, states) and torch.equal(shared_root, root)


@pytest.mark.parametrize("residual,num_layers,input_dim", [(False, 1, 5), (True, 2, 5), (True, 2, 6)])
def test_the_dense_levels_equal_the_scheduled_ones(residual, num_layers, input_dim):
    torch.manual_seed(3)
    mask, head_indices = random_batch(4)
    batch_size, num_tokens = mask.shape
    encoder = ChildSumTreeLstm(input_dim, 6, num_layers=num_layers, residual=residual).double()
    inputs = torch.randn(batch_size, num_tokens, input_dim, dtype=torch.float64, requires_grad=True)
    scheduled = encoder.encode(inputs, mask, head_indices)
    # Depth 39 for the chain of 40: 40 levels are needed; more only repeat them.
    dense = encoder.encode_dense(inputs, mask, head_indices, num_levels=num_tokens + 3)
    torch.testing.assert_close(dense.states, scheduled.states)
    torch.testing.assert_close(dense.root, scheduled.root)
    weights = torch.randn_like(scheduled.states), torch.randn_like(scheduled.root)
    gradients = []
    for output in (scheduled, dense):
        encoder.zero_grad()
        inputs.grad = None
        ((output.states * weights[0]).sum() + (output.root * weights[1]).sum()).backward(retain_graph=True)
        gradients.append([inputs.grad.clone()] + [parameter.grad.clone() for parameter in encoder.parameters()])
    for expected, actual in zip(*gradients):
        torch.testing.assert_close(actual, expected)
    # Too few levels leave the deep chain's upper nodes unset: the contract is num_levels > every depth.
    short = encoder.encode_dense(inputs, mask, head_indices, num_levels=10)
    assert not torch.allclose(short.states, scheduled.states)


def test_the_dense_levels_read_nothing_back_from_the_device():
    mask, head_indices = random_batch(5)
    encoder = ChildSumTreeLstm(5, 6, num_layers=2, residual=True, dropout=0.3).train()
    meta = torch.device("meta")
    encoder.to(meta)
    inputs = torch.empty(*mask.shape, 5, device=meta, requires_grad=True)
    output = encoder.encode_dense(inputs, mask.to(meta), head_indices.to(meta), num_levels=8)
    (output.states.sum() + output.root.sum()).backward()
    assert output.states.shape == (*mask.shape, 6) and output.root.shape == (mask.size(0), 6)


def test_a_second_backward_through_the_same_graph_adds_the_same_gradients():
    # The layers' backward passes share one scratch buffer, which each run overwrites.
    torch.manual_seed(4)
    mask, head_indices = random_batch(4)
    module = ChildSumTreeLstm(6, 5, num_layers=3, residual=True).double()
    inputs = torch.randn(*mask.shape, 6, dtype=torch.double, requires_grad=True)
    states, root = module.encode(inputs, mask, head_indices)
    loss = (states * torch.randn_like(states)).sum() + (root * torch.randn_like(root)).sum()
    loss.backward(retain_graph=True)
    first = {name: parameter.grad.clone() for name, parameter in module.named_parameters()}
    first_inputs = inputs.grad.clone()
    loss.backward()
    for name, parameter in module.named_parameters():
        torch.testing.assert_close(parameter.grad, 2 * first[name], msg=name)
    torch.testing.assert_close(inputs.grad, 2 * first_inputs)
    assert first_inputs.abs().sum() > 0
