"""
The top-down pass of a bidirectional Tree-LSTM (Miwa and Bansal, "End-to-End Relation Extraction
using LSTMs on Sequences and Tree Structures", ACL 2016, https://arxiv.org/abs/1601.00770, §3.3):
an LSTM run from each root down every path, so that a word also sees its governor and, through its
head's bottom-up state, its siblings.  For a token `j` with head `p` (a root reads zeros for `p`):

    g_j = [x_j ; h^up_p]                      (its input and its head's bottom-up state)
    i_j, f_j, o_j = sigmoid(W g_j + U h^down_p + b),    u_j = tanh(W_u g_j + U_u h^down_p + b_u)
    c^down_j = i_j * u_j + f_j * c^down_p
    h^down_j = o_j * tanh(c^down_j)

Run over the same levels as the bottom-up pass (`tree_levels`), the shallowest first.
"""

from typing import List, Tuple

import torch

from nerzoo.modules.seq2seq_encoders.tree_levels import TreeLevels


class TopDownTreeLstmLayer(torch.nn.Module):
    """
    The parameters of one layer's top-down pass:

    - `input_linearity`: `W_x x_j + b` for the gates `i, f, o, u`, in that order, `(input_dim -> 4 * hidden_dim)`;
    - `state_linearity`: `W_h h^up_p + U h^down_p`, `(2 * hidden_dim -> 4 * hidden_dim)`, no bias.
    """

    def __init__(self, input_dim: int, hidden_dim: int) -> None:
        super().__init__()
        self.hidden_dim = hidden_dim
        self.input_linearity = torch.nn.Linear(input_dim, 4 * hidden_dim, bias=True)
        self.state_linearity = torch.nn.Linear(2 * hidden_dim, 4 * hidden_dim, bias=False)
        with torch.no_grad():
            self.input_linearity.bias[hidden_dim : 2 * hidden_dim].fill_(1.0)  # forget-gate bias 1


def top_down_cell(
    gate_inputs: torch.Tensor, head_states: torch.Tensor, head_cells: torch.Tensor, state_weight: torch.Tensor
) -> Tuple[torch.Tensor, torch.Tensor]:
    """`(h^down_j, c^down_j)` `(..., hidden)` from `W_x x_j + b` for `i, f, o, u`, the heads'
    `[h^up_p ; h^down_p]` and `c^down_p`, and `[W_h U]` (`state_weight`)."""
    hidden = head_cells.size(-1)
    gates = gate_inputs + torch.nn.functional.linear(head_states, state_weight)
    sigmoid_gates, update = gates.split([3 * hidden, hidden], dim=-1)
    input_gate, forget_gate, output_gate = torch.sigmoid(sigmoid_gates).chunk(3, dim=-1)
    cell = input_gate * torch.tanh(update) + forget_gate * head_cells
    return output_gate * torch.tanh(cell), cell


def top_down_states(
    layer: TopDownTreeLstmLayer, inputs: torch.Tensor, levels: TreeLevels, up_states: List[torch.Tensor]
) -> List[torch.Tensor]:
    """
    `h^down` of every row, a `(sizes[l], hidden_dim)` tensor per level as `up_states` (the bottom-up
    `h` per level).  `inputs` are the layer's rows `(num_rows, input_dim)`.  A level's rows read
    their heads' `[h^up ; h^down ; c^down]` from the level above by `head_slots`; roots read the
    zero row appended to it.
    """
    hidden = layer.hidden_dim
    gate_inputs = layer.input_linearity(inputs).split(levels.sizes)  # W_x x_j + b
    head_slots = levels.head_slots.split(levels.sizes)
    # Above the roots: zeros, as many rows as any root's head slot can name.
    heads = inputs.new_zeros(levels.sizes[-1] + 1, 3 * hidden)
    states: List[torch.Tensor] = [inputs.new_zeros(0, hidden)] * len(levels.sizes)
    for level in reversed(range(len(levels.sizes))):
        head_states, head_cells = heads[head_slots[level]].split([2 * hidden, hidden], dim=1)
        states[level], cell = top_down_cell(gate_inputs[level], head_states, head_cells, layer.state_linearity.weight)
        sent = torch.cat([up_states[level], states[level], cell], dim=1)
        heads = torch.cat([sent, sent.new_zeros(1, 3 * hidden)])
    return states


@torch.jit.script_if_tracing
def padded_top_down(
    gate_inputs: torch.Tensor,
    up: torch.Tensor,
    parents: torch.Tensor,
    has_head: torch.Tensor,
    state_weight: torch.Tensor,
    num_levels: torch.Tensor,
) -> torch.Tensor:
    """`h^down` `(batch_size, num_tokens, hidden)` of a padded batch after `num_levels` steps, from the
    bottom-up `h` (`up`) and `tree_parents`."""
    heads = parents.unsqueeze(2).expand(-1, -1, up.size(2))
    below_a_head = has_head.unsqueeze(2).to(up.dtype)  # a root reads zeros for its head
    head_up = up.gather(1, heads) * below_a_head
    state, cell = torch.zeros_like(up), torch.zeros_like(up)
    for _ in range(int(num_levels)):
        head_states = torch.cat([head_up, state.gather(1, heads) * below_a_head], dim=2)
        state, cell = top_down_cell(gate_inputs, head_states, cell.gather(1, heads) * below_a_head, state_weight)
    return state
