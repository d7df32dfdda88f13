from typing import List, NamedTuple, Optional, Tuple

import torch
from allennlp.common.checks import ConfigurationError
from allennlp.modules.seq2seq_encoders.seq2seq_encoder import Seq2SeqEncoder

from nerzoo.modules.seq2seq_encoders.top_down_tree_lstm import TopDownTreeLstmLayer, padded_top_down, top_down_states
from nerzoo.modules.seq2seq_encoders.tree_levels import TreeLevels, tree_depths, tree_levels, tree_parents
from nerzoo.modules.variational_dropout import VariationalDropout


class TreeLstmOutput(NamedTuple):
    states: torch.Tensor  # (batch_size, num_tokens, output_dim), zero at masked positions
    root: torch.Tensor  # (batch_size, output_dim): mean of the root states, zero for an empty row


class ChildSumTreeLstmLayer(torch.nn.Module):
    """
    The parameters of one Tree-LSTM layer, laid out so that a one-child-per-node tree maps onto a
    `torch.nn.LSTM` (footnote 2 of the paper):

    - `input_linearity`: `W x + b` for the gates `i, o, u, f`, in that order, `(input_dim -> 4 * hidden_dim)`;
    - `state_linearity`: `U h~` for `i, o, u`, `(hidden_dim -> 3 * hidden_dim)`, no bias;
    - `forget_state_linearity`: `U_f h_k` for the per-child forget gate, `(hidden_dim -> hidden_dim)`, no bias;
    - `top_down`: the top-down pass's parameters, or `None` for a bottom-up layer;
    - `layer_norm`: the residual connection's `LayerNorm`, or `None` for a layer without one;
    - `residual_projection`: `P` of a residual layer whose input size is not its output size
      (`hidden_dim`, twice that with `top_down`), no bias, or `None`.
    """

    def __init__(
        self, input_dim: int, hidden_dim: int, residual: bool, projected_residual: bool = True, top_down: bool = False
    ) -> None:
        super().__init__()
        self.hidden_dim = hidden_dim
        self.output_dim = 2 * hidden_dim if top_down else hidden_dim
        self.input_linearity = torch.nn.Linear(input_dim, 4 * hidden_dim, bias=True)
        self.state_linearity = torch.nn.Linear(hidden_dim, 3 * hidden_dim, bias=False)
        self.forget_state_linearity = torch.nn.Linear(hidden_dim, hidden_dim, bias=False)
        self.top_down = TopDownTreeLstmLayer(input_dim, hidden_dim) if top_down else None
        projected = residual and projected_residual and input_dim != self.output_dim
        self.layer_norm: Optional[torch.nn.LayerNorm] = (
            torch.nn.LayerNorm(self.output_dim) if residual and (input_dim == self.output_dim or projected) else None
        )
        self.residual_projection: Optional[torch.nn.Linear] = (
            torch.nn.Linear(input_dim, self.output_dim, bias=False) if projected else None
        )
        with torch.no_grad():
            # Forget-gate bias 1, as usual for LSTMs, so that children's memories pass up early in training.
            self.input_linearity.bias[3 * hidden_dim :].fill_(1.0)


@Seq2SeqEncoder.register("child_sum_tree_lstm")
class ChildSumTreeLstm(Seq2SeqEncoder):
    """
    The child-sum Tree-LSTM of Tai, Socher and Manning, "Improved Semantic Representations From
    Tree-Structured Long Short-Term Memory Networks" (ACL 2015, https://arxiv.org/abs/1503.00075,
    §3.1), run bottom-up over dependency trees as in Aguilar and Solorio, "Dependency-Aware Named
    Entity Recognition with Relative and Global Attentions" (arXiv preprint, 2019,
    https://arxiv.org/abs/1909.05166), §3.2.1.  For a token `j` with input `x_j` and children `C(j)`:

        h~_j = sum_{k in C(j)} h_k
        i_j = sigmoid(W_i x_j + U_i h~_j + b_i)
        f_jk = sigmoid(W_f x_j + U_f h_k + b_f)            (one forget gate per child k)
        o_j = sigmoid(W_o x_j + U_o h~_j + b_o)
        u_j = tanh(W_u x_j + U_u h~_j + b_u)
        c_j = i_j * u_j + sum_{k in C(j)} f_jk * c_k
        h_j = o_j * tanh(c_j)

    The output at each token is `h_j`; with `top_down=True` it is `[h_j ; h^down_j]`, the top-down
    pass (`top_down_tree_lstm.py`) of Miwa and Bansal's bidirectional Tree-LSTM (2016).  `encode`
    also returns the sentence vector `h_root`, the mean of the last layer's outputs at the roots.

    With `residual=True` a layer's output is `LayerNorm(x + TreeLSTM(x))` (§3.2.4, eq. 4), or
    `LayerNorm(P x + TreeLSTM(x))` with a learned `P` (no bias) when the layer changes the size
    (`projected_residual=False`: `TreeLSTM(x)` there).  Variational dropout (one mask per sentence)
    applies to the input of every layer but the first.  Outputs at masked positions are zero.

    The batch's tokens are computed one level (tokens of one depth) at a time, the deepest first
    (`tree_levels`): `1 + max tree depth` steps per layer (twice with `top_down`).

    Registered as a `Seq2SeqEncoder` with name "child_sum_tree_lstm".  Unlike most encoders it needs the
    dependency heads: `forward(inputs, mask, head_indices)`.

    # Parameters

    input_dim : `int`, required
        The size of the input vectors.
    hidden_dim : `int`, required
        The size of the states `h` and `c`, and of the outputs (twice that with `top_down`).
    num_layers : `int`, optional (default = `1`)
        Stacked Tree-LSTMs over the same tree, each taking the previous layer's outputs as its `x`.
    residual : `bool`, optional (default = `False`)
        `LayerNorm(x + TreeLSTM(x))` for every layer, see above.
    projected_residual : `bool`, optional (default = `True`)
        With `residual`, the first layer's residual goes through `P` when `input_dim != hidden_dim`;
        `False` leaves that layer without a residual.
    dropout : `float`, optional (default = `0.0`)
        Variational dropout on the inputs of the layers after the first.
    top_down : `bool`, optional (default = `False`)
        Also run every layer top-down and output `[h ; h^down]`, see above.
    """

    def __init__(
        self,
        input_dim: int,
        hidden_dim: int,
        num_layers: int = 1,
        residual: bool = False,
        dropout: float = 0.0,
        projected_residual: bool = True,
        top_down: bool = False,
    ) -> None:
        super().__init__()
        if input_dim < 1 or hidden_dim < 1:
            raise ConfigurationError(
                f"ChildSumTreeLstm needs positive sizes, got input_dim={input_dim}, hidden_dim={hidden_dim}."
            )
        if num_layers < 1:
            raise ConfigurationError(f"ChildSumTreeLstm needs num_layers >= 1, got {num_layers}.")
        if not 0.0 <= dropout < 1.0:
            raise ConfigurationError(f"ChildSumTreeLstm needs 0 <= dropout < 1, got {dropout}.")
        self._input_dim = input_dim
        self._output_dim = 2 * hidden_dim if top_down else hidden_dim
        self.layers = torch.nn.ModuleList(
            ChildSumTreeLstmLayer(
                input_dim if index == 0 else self._output_dim,
                hidden_dim,
                residual=residual,
                projected_residual=projected_residual,
                top_down=top_down,
            )
            for index in range(num_layers)
        )
        self.dropout = VariationalDropout(dropout)

    def get_input_dim(self) -> int:
        return self._input_dim

    def get_output_dim(self) -> int:
        return self._output_dim

    def is_bidirectional(self) -> bool:
        return False

    def forward(self, inputs: torch.Tensor, mask: torch.BoolTensor, head_indices: torch.LongTensor) -> torch.Tensor:
        """
        # Parameters

        inputs : `torch.Tensor`, required
            `(batch_size, num_tokens, input_dim)`.
        mask : `torch.BoolTensor`, required
            `(batch_size, num_tokens)`, true at real tokens.  Masked positions are not part of any
            tree: their inputs and heads are ignored and their outputs are zero.
        head_indices : `torch.LongTensor`, required
            `(batch_size, num_tokens)`, the CoNLL-U `HEAD` column: the 1-based position of each
            token's head within its sentence (row), `0` for a root.  A sentence may have several roots.
            Values at masked positions are ignored (padding them with 0 is fine).  A real token whose
            head is out of range or masked, or heads that form a cycle, raise a `ValueError`.

        # Returns

        `(batch_size, num_tokens, output_dim)`: the last layer's output at every token.
        """
        return self.encode(inputs, mask, head_indices).states

    def encode(self, inputs: torch.Tensor, mask: torch.BoolTensor, head_indices: torch.LongTensor) -> TreeLstmOutput:
        """
        As `forward`, and also returns `root`, `(batch_size, output_dim)`: per sentence the mean of
        the last layer's outputs at its roots (zero for a row without tokens).
        """
        batch_size, num_tokens, input_dim = inputs.shape
        if input_dim != self._input_dim:
            raise ValueError(f"Expected inputs of size {self._input_dim}, got {input_dim}.")
        if mask.shape != (batch_size, num_tokens) or head_indices.shape != (batch_size, num_tokens):
            raise ValueError(
                f"mask {tuple(mask.shape)} and head_indices {tuple(head_indices.shape)} must have the "
                f"shape (batch_size, num_tokens) = {(batch_size, num_tokens)}."
            )
        mask = mask.bool()
        levels = tree_levels(mask, head_indices)
        # The layers run on the rows of `levels.tokens`, `(num_rows, dim)`; what masked positions
        # hold (even inf/nan) reaches no token.
        flat_inputs = inputs.masked_fill(~mask.unsqueeze(-1), 0.0).reshape(batch_size * num_tokens, input_dim)
        layer_input = flat_inputs[levels.tokens]
        for index, layer in enumerate(self.layers):
            if index > 0 and self.training and self.dropout.p > 0:
                # `VariationalDropout`'s mask, one per sentence, picked for each row.
                sentence_masks = self.dropout(layer_input.new_ones(batch_size, 1, layer_input.size(1))).squeeze(1)
                layer_input = layer_input * sentence_masks[levels.tokens // num_tokens]
            up = _tree_lstm_layer(layer, layer_input, levels)
            output = torch.cat(up)
            if layer.top_down is not None:
                down = top_down_states(layer.top_down, layer_input, levels, up)
                output = torch.cat([output, torch.cat(down)], dim=1)
            layer_input = residual(layer, layer_input, output)
        flat_states = layer_input.new_zeros(batch_size * num_tokens, self._output_dim)
        flat_states = flat_states.index_copy(0, levels.tokens, layer_input)
        return _with_root(flat_states.view(batch_size, num_tokens, self._output_dim), mask, head_indices)

    def export_form(self) -> torch.nn.Module:
        """`PaddedTreeLstm` of this encoder (parameters shared), which a trace follows over any batch."""
        return PaddedTreeLstm(self)


class PaddedTreeLstm(torch.nn.Module):
    """
    `ChildSumTreeLstm` (in eval mode) as `allennlp export` traces it: the level schedule's sizes come
    from the trees, which a trace would fix, so here each pass is a loop (an ONNX `Loop`) of `1 + max
    depth` steps, each computing every token of the padded batch again from its children's states
    (`padded_child_sum`) or its head's (`padded_top_down`) of the step before.  Heads must form
    trees; nothing here checks them.

    # Parameters

    encoder : `ChildSumTreeLstm`, required
        Its layers, parameters included, are shared, not copied.
    """

    def __init__(self, encoder: ChildSumTreeLstm) -> None:
        super().__init__()
        self.layers = encoder.layers

    def forward(self, inputs: torch.Tensor, mask: torch.BoolTensor, head_indices: torch.LongTensor) -> torch.Tensor:
        """As `ChildSumTreeLstm.forward`."""
        return self.encode(inputs, mask, head_indices).states

    def encode(self, inputs: torch.Tensor, mask: torch.BoolTensor, head_indices: torch.LongTensor) -> TreeLstmOutput:
        """As `ChildSumTreeLstm.encode`."""
        mask = mask.bool()
        outside = ~mask.unsqueeze(-1)
        parents, has_head = tree_parents(mask, head_indices)
        positions = torch.arange(mask.size(1), device=mask.device)
        children = (has_head.unsqueeze(1) & (parents.unsqueeze(1) == positions.view(1, -1, 1))).to(inputs.dtype)
        num_levels = tree_depths(parents, has_head).max() + 1
        layer_input = inputs.masked_fill(outside, 0.0)
        for layer in self.layers:
            hidden = layer.hidden_dim
            projected = layer.input_linearity(layer_input)
            head_forget_inputs = projected[:, :, 3 * hidden :].gather(1, parents.unsqueeze(2).expand(-1, -1, hidden))
            state_weights = torch.cat([layer.state_linearity.weight, layer.forget_state_linearity.weight])
            output = padded_child_sum(
                projected[:, :, : 3 * hidden], head_forget_inputs, children, state_weights, num_levels
            )
            if layer.top_down is not None:
                down_inputs = layer.top_down.input_linearity(layer_input)
                down_weight = layer.top_down.state_linearity.weight
                down = padded_top_down(down_inputs, output, parents, has_head, down_weight, num_levels)
                output = torch.cat([output, down], dim=2)
            layer_input = residual(layer, layer_input, output.masked_fill(outside, 0.0))
        return _with_root(layer_input.masked_fill(outside, 0.0), mask, head_indices)


def _with_root(states: torch.Tensor, mask: torch.BoolTensor, head_indices: torch.LongTensor) -> TreeLstmOutput:
    """`states` and their `root`: per row the mean of the states at its roots (zero for a row without tokens)."""
    roots = (mask & (head_indices == 0)).unsqueeze(-1)
    return TreeLstmOutput(states, (states * roots).sum(dim=1) / roots.sum(dim=1).clamp(min=1))


def child_sum_cell(gate_inputs: torch.Tensor, children: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """`(h_j, c_j)` `(..., hidden)` from `W x_j + b` for `i, o, u` and the sum of what the children
    sent, `[U h~_j ; sum_k f_jk * c_k]` `(..., 4 * hidden)` (zero for a leaf)."""
    hidden = children.size(-1) // 4
    children_gates, children_memory = children.split([3 * hidden, hidden], dim=-1)
    gates = gate_inputs + children_gates  # W x_j + U h~_j + b for i, o, u
    input_and_output, update = gates.split([2 * hidden, hidden], dim=-1)
    input_gate, output_gate = torch.sigmoid(input_and_output).chunk(2, dim=-1)
    cell = input_gate * torch.tanh(update) + children_memory
    return output_gate * torch.tanh(cell), cell


def child_message(
    state: torch.Tensor, cell: torch.Tensor, head_forget_inputs: torch.Tensor, state_weights: torch.Tensor
) -> torch.Tensor:
    """What `k` sends its head `j`, `[U h_k ; f_jk * c_k]` (`h~_j` enters the gates only as
    `U h~_j = sum_k U h_k`), from `h_k`, `c_k`, `W_f x_j + b_f` and `[U; U_f]` (`state_weights`)."""
    hidden = cell.size(-1)
    pushed_gates, pushed_forget = torch.nn.functional.linear(state, state_weights).split([3 * hidden, hidden], dim=-1)
    forget_gate = torch.sigmoid(head_forget_inputs + pushed_forget)
    return torch.cat([pushed_gates, forget_gate * cell], dim=-1)


def _tree_lstm_layer(layer: ChildSumTreeLstmLayer, inputs: torch.Tensor, levels: TreeLevels) -> List[torch.Tensor]:
    """
    One layer a level at a time: `inputs` `(num_rows, in)` -> `h` of every row, `(sizes[l], hidden)`
    per level.  Each row's `child_message` adds up in its head's row of the next level's `children`
    (one extra row, dropped, takes what roots send).
    """
    hidden = layer.hidden_dim
    projected = layer.input_linearity(inputs)  # (num_rows, 4 * hidden): W x + b for i, o, u, f
    gate_inputs = projected[:, : 3 * hidden].split(levels.sizes)  # W x_j + b for i, o, u
    head_forget_inputs = projected[levels.head_rows, 3 * hidden :].split(levels.sizes)  # W_f x_j + b_f
    head_slots = levels.head_slots.split(levels.sizes)
    state_weights = torch.cat([layer.state_linearity.weight, layer.forget_state_linearity.weight])  # [U; U_f]
    children = projected.new_zeros(levels.sizes[0], 4 * hidden)  # the deepest level has no children
    states = []
    for level in range(len(levels.sizes)):
        state, cell = child_sum_cell(gate_inputs[level], children)
        states.append(state)
        if level + 1 < len(levels.sizes):
            sent = child_message(state, cell, head_forget_inputs[level], state_weights)
            next_size = levels.sizes[level + 1]
            children = sent.new_zeros(next_size + 1, 4 * hidden).index_add(0, head_slots[level], sent)[:next_size]
    return states


@torch.jit.script_if_tracing
def padded_child_sum(
    gate_inputs: torch.Tensor,
    head_forget_inputs: torch.Tensor,
    children: torch.Tensor,
    state_weights: torch.Tensor,
    num_levels: torch.Tensor,
) -> torch.Tensor:
    """`h` `(batch_size, num_tokens, hidden)` of a padded batch after `num_levels` steps; `children`
    `(batch_size, num_tokens, num_tokens)` is 1 where the second token is the head of the third."""
    state = torch.zeros_like(head_forget_inputs)
    cell = torch.zeros_like(head_forget_inputs)
    for _ in range(int(num_levels)):
        sent = child_message(state, cell, head_forget_inputs, state_weights)
        state, cell = child_sum_cell(gate_inputs, torch.bmm(children, sent))
    return state


def residual(layer: ChildSumTreeLstmLayer, layer_input: torch.Tensor, output: torch.Tensor) -> torch.Tensor:
    """
    A layer's output: `LayerNorm(shortcut + output)` with a residual connection, else `output`; the
    norm called as a function, so that allennlp's NormalizationBiasVerification does not take
    input_linearity's bias for one feeding it.
    """
    if layer.layer_norm is None:
        return output
    norm = layer.layer_norm
    shortcut = layer_input if layer.residual_projection is None else layer.residual_projection(layer_input)
    return torch.nn.functional.layer_norm(shortcut + output, norm.normalized_shape, norm.weight, norm.bias, norm.eps)
