"""
`ChildSumTreeLstm.encode` in the form `allennlp export` traces to ONNX.  The level loop of
`tree_levels` takes its sizes from the trees, which a trace would fix to the traced batch; here each
pass is a scripted loop (an ONNX `Loop`) that recomputes every token of the padded batch from its
children's states (bottom-up) or its head's (top-down) of the step before.  After step `s` every
token whose subtree is less than `s` levels deep (top-down: less than `s` levels below its root)
holds its exact state, and later steps compute it again from the same states, so `1 + max depth`
steps give the level form's outputs, for a pass over all tokens per step.  Tested against it.
"""

import torch

from nerzoo.modules.seq2seq_encoders.child_sum_tree_lstm import ChildSumTreeLstm, TreeLstmOutput, _residual


@torch.jit.script
def _num_levels(parents: torch.Tensor, has_head: torch.Tensor) -> torch.Tensor:
    """`1 + max depth` of `(batch_size, num_tokens)` trees, by pointer jumping as `tree_levels`."""
    depth, ancestor, reach = has_head.long(), parents, 1
    while reach < parents.size(1):
        depth = depth + depth.gather(1, ancestor)
        ancestor = ancestor.gather(1, ancestor)
        reach = reach * 2
    return depth.max() + 1


@torch.jit.script
def _bottom_up(
    gate_inputs: torch.Tensor,
    head_forget_inputs: torch.Tensor,
    children: torch.Tensor,
    state_weights: torch.Tensor,
    num_levels: torch.Tensor,
) -> torch.Tensor:
    """
    `h` `(batch_size, num_tokens, hidden)` from `W x_j + b` for `i, o, u` (`gate_inputs`), `W_f x_j + b_f`
    of each token's head (`head_forget_inputs`), `children` `(batch_size, num_tokens, num_tokens)`, 1
    where the second token is the head of the third, and `[U; U_f]` (`state_weights`).
    """
    hidden = head_forget_inputs.size(2)
    state, cell = torch.zeros_like(head_forget_inputs), torch.zeros_like(head_forget_inputs)
    for _ in range(int(num_levels)):
        pushed = torch.matmul(state, state_weights.t())  # [U h_k, U_f h_k]
        forget_gate = torch.sigmoid(head_forget_inputs + pushed[:, :, 3 * hidden :])
        summed = torch.bmm(children, torch.cat([pushed[:, :, : 3 * hidden], forget_gate * cell], dim=2))
        gates = gate_inputs + summed[:, :, : 3 * hidden]  # [U h~_j, sum_k f_jk c_k] added
        input_gate = torch.sigmoid(gates[:, :, :hidden])
        output_gate = torch.sigmoid(gates[:, :, hidden : 2 * hidden])
        cell = input_gate * torch.tanh(gates[:, :, 2 * hidden :]) + summed[:, :, 3 * hidden :]
        state = output_gate * torch.tanh(cell)
    return state


@torch.jit.script
def _top_down(
    gate_inputs: torch.Tensor,
    up: torch.Tensor,
    parents: torch.Tensor,
    has_head: torch.Tensor,
    state_weight: torch.Tensor,
    num_levels: torch.Tensor,
) -> torch.Tensor:
    """`h^down` `(batch_size, num_tokens, hidden)` from `W_x x_j + b` for `i, f, o, u`, `h^up` and the heads."""
    hidden = up.size(2)
    heads = parents.unsqueeze(2).expand(-1, -1, hidden)
    below_a_head = has_head.unsqueeze(2).to(up.dtype)  # a root reads zeros for its head
    head_up = up.gather(1, heads) * below_a_head
    state, cell = torch.zeros_like(up), torch.zeros_like(up)
    for _ in range(int(num_levels)):
        head_state, head_cell = state.gather(1, heads) * below_a_head, cell.gather(1, heads) * below_a_head
        gates = gate_inputs + torch.matmul(torch.cat([head_up, head_state], dim=2), state_weight.t())
        sigmoid_gates = torch.sigmoid(gates[:, :, : 3 * hidden])
        input_gate, forget_gate = sigmoid_gates[:, :, :hidden], sigmoid_gates[:, :, hidden : 2 * hidden]
        cell = input_gate * torch.tanh(gates[:, :, 3 * hidden :]) + forget_gate * head_cell
        state = sigmoid_gates[:, :, 2 * hidden :] * torch.tanh(cell)
    return state


class ExportedTreeLstm(torch.nn.Module):
    """
    `module`'s `encode` (in eval mode: no dropout) as scripted loops over the padded batch.  Heads
    must form trees, as `tree_levels` checks for the level form; nothing here checks them.

    # Parameters

    module : `ChildSumTreeLstm`, required
        Its layers, parameters included, are shared, not copied.
    """

    def __init__(self, module: ChildSumTreeLstm) -> None:
        super().__init__()
        self.module = module

    def encode(self, inputs: torch.Tensor, mask: torch.BoolTensor, head_indices: torch.LongTensor) -> TreeLstmOutput:
        """As `ChildSumTreeLstm.encode`: `inputs` `(batch_size, num_tokens, input_dim)`, `mask` and `head_indices` `(batch_size, num_tokens)`."""
        mask = mask.bool()
        outside = ~mask.unsqueeze(-1)
        positions = torch.arange(mask.size(1), device=mask.device)
        has_head = mask & (head_indices > 0)
        parents = torch.where(has_head, head_indices - 1, positions).clamp(min=0)
        children = (has_head.unsqueeze(1) & (parents.unsqueeze(1) == positions.view(1, -1, 1))).to(inputs.dtype)
        num_levels = _num_levels(parents, has_head)
        layer_input = inputs.masked_fill(outside, 0.0)
        for layer in self.module.layers:
            hidden = layer.hidden_dim
            projected = layer.input_linearity(layer_input)
            head_forget_inputs = projected[:, :, 3 * hidden :].gather(1, parents.unsqueeze(2).expand(-1, -1, hidden))
            state_weights = torch.cat([layer.state_linearity.weight, layer.forget_state_linearity.weight])
            output = _bottom_up(projected[:, :, : 3 * hidden], head_forget_inputs, children, state_weights, num_levels)
            if layer.top_down is not None:
                down_inputs = layer.top_down.input_linearity(layer_input)
                down_weight = layer.top_down.state_linearity.weight
                output = torch.cat(
                    [output, _top_down(down_inputs, output, parents, has_head, down_weight, num_levels)], 2
                )
            layer_input = _residual(layer, layer_input, output.masked_fill(outside, 0.0))
        states = layer_input.masked_fill(outside, 0.0)
        roots = (mask & (head_indices == 0)).unsqueeze(-1)
        return TreeLstmOutput(states, (states * roots).sum(dim=1) / roots.sum(dim=1).clamp(min=1))
