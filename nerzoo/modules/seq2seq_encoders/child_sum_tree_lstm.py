"""
The child-sum Tree-LSTM over dependency trees, computed one tree level at a time for the whole batch.

Shapes: `inputs` `(batch_size, num_tokens, input_dim)`, `mask` and `head_indices`
`(batch_size, num_tokens)`, outputs `(batch_size, num_tokens, hidden_dim)`.
"""

from typing import Dict, List, NamedTuple, Optional, Tuple

import numpy as np
import torch
from allennlp.common.checks import ConfigurationError
from allennlp.modules.seq2seq_encoders.seq2seq_encoder import Seq2SeqEncoder
from torch.autograd.function import once_differentiable

from nerzoo.modules.full_precision import without_autocast
from nerzoo.modules.variational_dropout import VariationalDropout


class TreeLstmOutput(NamedTuple):
    states: torch.Tensor  # (batch_size, num_tokens, hidden_dim), zero at masked positions
    root: torch.Tensor  # (batch_size, hidden_dim): mean of the root states, zero for an empty row


class ChildSumTreeLstmLayer(torch.nn.Module):
    """
    The parameters of one Tree-LSTM layer, laid out so that a one-child-per-node tree maps onto a
    `torch.nn.LSTM` (footnote 2 of the paper):

    - `input_linearity`: `W x + b` for the gates `i, o, u, f`, in that order, `(input_dim -> 4 * hidden_dim)`;
    - `state_linearity`: `U h~` for `i, o, u`, `(hidden_dim -> 3 * hidden_dim)`, no bias;
    - `forget_state_linearity`: `U_f h_k` for the per-child forget gate, `(hidden_dim -> hidden_dim)`, no bias;
    - `layer_norm`: the residual connection's `LayerNorm`, or `None` for a layer without one;
    - `residual_projection`: `P` of a residual layer whose input size is not `hidden_dim`, `(input_dim
      -> hidden_dim)`, no bias, or `None`.
    """

    def __init__(self, input_dim: int, hidden_dim: int, residual: bool, projected_residual: bool = True) -> None:
        super().__init__()
        self.input_dim = input_dim
        self.hidden_dim = hidden_dim
        self.input_linearity = torch.nn.Linear(input_dim, 4 * hidden_dim, bias=True)
        self.state_linearity = torch.nn.Linear(hidden_dim, 3 * hidden_dim, bias=False)
        self.forget_state_linearity = torch.nn.Linear(hidden_dim, hidden_dim, bias=False)
        projected = residual and projected_residual and input_dim != hidden_dim
        self.layer_norm: Optional[torch.nn.LayerNorm] = (
            torch.nn.LayerNorm(hidden_dim) if residual and (input_dim == hidden_dim or projected) else None
        )
        self.residual_projection: Optional[torch.nn.Linear] = (
            torch.nn.Linear(input_dim, hidden_dim, bias=False) if projected else None
        )
        with torch.no_grad():
            # Forget-gate bias 1, as usual for LSTMs, so that children's memories pass up early in training.
            self.input_linearity.bias[3 * hidden_dim :].fill_(1.0)


class _LevelSchedule(NamedTuple):
    """Where every token goes when the batch is flattened to nodes sorted by depth, deepest first."""

    node_positions: torch.Tensor  # (num_nodes,): flat position b * num_tokens + t of each sorted node
    parent_or_self: torch.Tensor  # (num_nodes,): sorted index of the node's head, a root's own index
    level_sizes: List[int]  # nodes per depth, deepest first; the nodes of each depth are consecutive
    push_targets: List[torch.Tensor]  # per level (level_nodes,): sorted index of the head, num_nodes for a root
    node_rows: torch.Tensor  # (num_nodes,): the batch row (sentence) of each node
    root_rows: torch.Tensor  # (num_roots,): the batch row of each root, the last level's nodes
    root_counts: torch.Tensor  # (batch_size,): roots per sentence, at least 1
    # The backward passes' `_BackwardScratch` by (hidden size, dtype): the layers' backward passes
    # run one after the other, so they share one buffer and its level views.
    scratch: Dict[Tuple[int, torch.dtype], "_BackwardScratch"]


class _LevelBuffers(NamedTuple):
    """A layer's per-node buffers, `(nodes, ...)` in node order, and their per-level views."""

    # (nodes, 4 * hidden): the pre-activations [i, o, u] (then the gates, in place) and the
    # children's f * c summed [m]; each level's pushes add to their heads' rows.
    gates: torch.Tensor
    # (nodes, 4 * hidden): [U h, W_f x_head + b_f + U_f h], then [U h, f * c]: a node's push.
    pushed: torch.Tensor
    work: torch.Tensor  # (nodes, 4 * hidden): [c, tanh c, h, f]
    states: torch.Tensor  # (nodes, hidden): work's h columns, the layer's output
    pushed_forgets: torch.Tensor  # (nodes, hidden): pushed's last columns
    # Per column (input and output gates, update, input gate, output gate, children's memory, cell,
    # tanh cell, state, push, pushed forget, forget) its views per level.
    levels: List[Tuple[torch.Tensor, ...]]
    weight: Optional[torch.Tensor]  # [U; U_f], (4 * hidden, hidden), in the buffers' dtype


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

    The output at each token is `h_j`.  When every node has one child (a chain whose root is the first
    word) this is an LSTM run over the reversed sentence (the paper's footnote 2).  `encode` also
    returns the sentence vector `h_root`: the mean of the root tokens' outputs ("in the case of
    multi-rooted phrases, we simply average the root vectors"), from the last layer.

    With `residual=True` a layer's output is `LayerNorm(x + TreeLSTM(x))` (§3.2.4, eq. 4), with its own
    `LayerNorm`.  When `input_dim != hidden_dim` the first layer's input goes through a learned
    linear map `P` (no bias), `LayerNorm(P x + TreeLSTM(x))` (He et al., 2016's projection
    shortcut); with `projected_residual=False` that layer outputs `TreeLSTM(x)`.  With
    `dropout > 0`, variational dropout (`InputVariationalDropout`, one mask per sentence) is applied
    to the input of every layer but the first.  Outputs at masked positions are zero.

    Computation: the nodes of the whole batch are sorted once by depth (root = 0, children one
    deeper than their head) and processed one depth at a time, deepest first, so the loop runs
    `1 + max tree depth` times per layer whatever the batch size.  `W x + b` is computed for all
    nodes at once; since `U h~_j` is the sum of the children's `U h_k`, each level's nodes make
    `[U h_k, U_f h_k]` in one product and push `[U h_k, f_jk * c_k]` into their heads' rows with one
    `index_add`; the backward pass is written out level by level (`_LevelRecurrence`, five
    operator calls a level), with one product over all nodes for the weights' gradient.  The schedule
    (depths, node order, level sizes, push targets) is built with numpy on the host from one copy of
    the mask and heads and sent back as one index tensor, so on a GPU a forward pass waits for the
    device once, not once per tree level, and the layers' loops never wait for it.  Without
    gradients (prediction) all layers run in one set of buffers, whose per-level views are cut once.

    Registered as a `Seq2SeqEncoder` with name "child_sum_tree_lstm".  Unlike most encoders it needs the
    dependency heads: `forward(inputs, mask, head_indices)`.

    # Parameters

    input_dim : `int`, required
        The size of the input vectors.
    hidden_dim : `int`, required
        The size of the states `h` and `c`, and of the outputs.
    num_layers : `int`, optional (default = `1`)
        Stacked Tree-LSTMs over the same tree, each taking the previous layer's outputs as its `x`.
    residual : `bool`, optional (default = `False`)
        `LayerNorm(x + TreeLSTM(x))` for every layer, see above.
    projected_residual : `bool`, optional (default = `True`)
        With `residual`, the first layer's residual goes through `P` when `input_dim != hidden_dim`;
        `False` leaves that layer without a residual.
    dropout : `float`, optional (default = `0.0`)
        Variational dropout on the inputs of the layers after the first.
    """

    def __init__(
        self,
        input_dim: int,
        hidden_dim: int,
        num_layers: int = 1,
        residual: bool = False,
        dropout: float = 0.0,
        projected_residual: bool = True,
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
        self._hidden_dim = hidden_dim
        self.layers = torch.nn.ModuleList(
            ChildSumTreeLstmLayer(
                input_dim if index == 0 else hidden_dim,
                hidden_dim,
                residual=residual,
                projected_residual=projected_residual,
            )
            for index in range(num_layers)
        )
        self.dropout = VariationalDropout(dropout)

    def get_input_dim(self) -> int:
        return self._input_dim

    def get_output_dim(self) -> int:
        return self._hidden_dim

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

        `(batch_size, num_tokens, hidden_dim)`: the last layer's `h` at every token.
        """
        return self.encode(inputs, mask, head_indices).states

    def encode(self, inputs: torch.Tensor, mask: torch.BoolTensor, head_indices: torch.LongTensor) -> TreeLstmOutput:
        """As `forward`, and also returns `root`, `(batch_size, hidden_dim)`: per sentence the mean of
        the last layer's outputs at its roots (zero for a row without tokens)."""
        batch_size, num_tokens, input_dim = inputs.shape
        if input_dim != self._input_dim:
            raise ValueError(f"Expected inputs of size {self._input_dim}, got {input_dim}.")
        if mask.shape != (batch_size, num_tokens) or head_indices.shape != (batch_size, num_tokens):
            raise ValueError(
                f"mask {tuple(mask.shape)} and head_indices {tuple(head_indices.shape)} must have the "
                f"shape (batch_size, num_tokens) = {(batch_size, num_tokens)}."
            )
        mask = mask.bool()
        schedule = _level_schedule(mask, head_indices)
        # The layers run on the real tokens in node order, `(nodes, dim)`: what masked positions hold
        # (even inf/nan) never reaches them.
        layer_input = inputs.reshape(batch_size * num_tokens, input_dim)[schedule.node_positions]
        # Without gradients the layers share one set of buffers (and their level views).
        shared: Optional[List[_LevelBuffers]] = None if torch.is_grad_enabled() else []
        for index, layer in enumerate(self.layers):
            if index > 0 and self.training and self.dropout.p > 0:  # in evaluation an identity
                # `InputVariationalDropout`'s mask, one per sentence (the same draws on the CPU),
                # picked for each node.
                layer_input = layer_input * self._dropout_mask(layer_input, batch_size)[schedule.node_rows]
            if shared and layer_input is shared[0].states and layer.layer_norm is not None:
                layer_input = layer_input.clone()  # the shortcut, which this layer's run would overwrite
            layer_input = _residual(layer, layer_input, self._run_layer(layer, layer_input, schedule, shared))
        node_states = layer_input  # (nodes, hidden_dim)
        hidden = self._hidden_dim
        states = node_states.new_zeros(batch_size * num_tokens, hidden).index_copy(
            0, schedule.node_positions, node_states
        )
        num_roots = schedule.root_rows.size(0)  # the roots: the last level
        root_sum = node_states.new_zeros(batch_size, hidden).index_add(
            0, schedule.root_rows, node_states[node_states.size(0) - num_roots :]
        )
        # Divided by the integer counts, which the division converts to the states' dtype.
        root = root_sum / schedule.root_counts.view(batch_size, 1)
        return TreeLstmOutput(states.view(batch_size, num_tokens, hidden), root)

    def encode_dense(
        self, inputs: torch.Tensor, mask: torch.BoolTensor, head_indices: torch.LongTensor, num_levels: int
    ) -> TreeLstmOutput:
        """
        `encode` for `(batch_size, num_tokens)` shapes that do not depend on the trees: every level
        updates the states of the whole batch where the depth is that level's, so no schedule is
        read on the host and a CUDA graph can hold it (`nerzoo.training.step_graphs`).  `num_levels`
        must exceed every tree's depth (a root's depth is 0); the work grows with it and with
        `num_tokens ** 2` (children are summed with a `(batch_size, num_tokens, num_tokens)`
        product), so `encode` is the faster choice wherever the host may be read.  The heads are
        not checked.
        """
        batch_size, num_tokens, _ = inputs.shape
        mask = mask.bool()
        positions = torch.arange(num_tokens, device=mask.device)
        has_head = mask & (head_indices > 0)
        # Each token's head (0-based), a root's or padding's own position.
        parents = torch.where(has_head, head_indices - 1, positions).clamp(0, num_tokens - 1)
        # children[b, j, k] = 1 where k's head is j.
        children = (parents.unsqueeze(1) == positions.view(1, -1, 1)) & has_head.unsqueeze(1)
        # Depth by pointer jumping: after r rounds each token has counted min(depth, 2^r) hops.
        depth, ancestor = has_head.long(), parents
        for _ in range(max(num_tokens - 1, 1).bit_length()):
            depth = depth + depth.gather(1, ancestor)
            ancestor = ancestor.gather(1, ancestor)
        roots = mask & ~has_head
        layer_input = inputs.masked_fill(~mask.unsqueeze(-1), 0.0)
        for index, layer in enumerate(self.layers):
            if index > 0 and self.training and self.dropout.p > 0:  # as `encode`: one mask per sentence
                layer_input = layer_input * self._dropout_mask(layer_input, batch_size).unsqueeze(1)
            output = _dense_levels(layer, layer_input, children, parents, depth, mask, num_levels)
            layer_input = _residual(layer, layer_input, output)
        states = layer_input.masked_fill(~mask.unsqueeze(-1), 0.0)
        root_counts = roots.sum(dim=1, keepdim=True).clamp(min=1)
        root = (states * roots.unsqueeze(-1)).sum(dim=1) / root_counts
        return TreeLstmOutput(states, root)

    def _dropout_mask(self, layer_input: torch.Tensor, batch_size: int) -> torch.Tensor:
        """`InputVariationalDropout`'s mask, one per sentence, `(batch_size, dim)` (the same draws on the CPU)."""
        keep = 1.0 - self.dropout.p
        dropout_mask = layer_input.new_empty(batch_size, layer_input.size(-1))
        return dropout_mask.bernoulli_(keep).div_(keep) if keep > 0 else dropout_mask.zero_()

    def _run_layer(
        self,
        layer: ChildSumTreeLstmLayer,
        inputs: torch.Tensor,
        schedule: _LevelSchedule,
        shared: Optional[List[_LevelBuffers]],
    ) -> torch.Tensor:
        """
        One Tree-LSTM layer over the scheduled forest, in node order: `(nodes, in)` -> `(nodes, hidden)`.
        Without gradients (`shared` a list) the layer runs in the buffers of the previous layer, kept
        in `shared`, when it has any of the same dtype, and the states it returns are overwritten by
        the next layer.
        """
        if not schedule.level_sizes:
            return inputs.new_zeros(0, self._hidden_dim)
        projected = layer.input_linearity(inputs)  # (nodes, 4 * hidden): W x + b for i, o, u, f
        weights = (layer.state_linearity.weight, layer.forget_state_linearity.weight)
        if shared is None:
            return _LevelRecurrence.apply(projected, *weights, schedule)
        reused = shared[0] if shared and shared[0].gates.dtype == projected.dtype else None
        shared[:] = [_run_levels(projected, *weights, schedule, reused)]
        return shared[0].states


class _LevelRecurrence(torch.autograd.Function):
    """
    The recurrent part of a layer, one level at a time, with its backward pass written out level by
    level: `(projected (nodes, 4 * hidden), state_weight (3 * hidden, hidden), forget_weight
    (hidden, hidden), schedule) -> (nodes, hidden)`, the states in node order.

    `U h~_j` is the sum of the children's `U h_k`, so a level's nodes make their whole push in one
    product with `[U; U_f]`: `[U h_k, f_jk * c_k]`, which one `index_add` adds to their heads'
    pre-activations and memory.  The backward pass gathers each node's head's gradients the same
    way (one `index_select`) and takes `d h_k` from them in one product; the derivatives of the
    gates that depend only on a node's own values are computed for all nodes at once before the
    levels, into a buffer whose strided views pair each factor with its gradient
    (`_BackwardScratch`: the three gates take one product a level, the push's two another), so a
    level costs five operator calls.  Each weight's gradient is one product over all nodes.
    """

    @staticmethod
    def forward(ctx, projected, state_weight, forget_weight, schedule):  # type: ignore[override]
        buffers = _run_levels(projected, state_weight, forget_weight, schedule, None)
        ctx.dtypes = (state_weight.dtype, forget_weight.dtype)
        ctx.schedule = schedule
        ctx.save_for_backward(buffers.gates, buffers.work, buffers.weight)
        return buffers.states

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_states):  # type: ignore[override]
        gates, work, weight = ctx.saved_tensors
        schedule = ctx.schedule
        sizes = schedule.level_sizes
        num_nodes, hidden = work.size(0), weight.size(1)
        pushing = num_nodes - sizes[-1]  # every node but the roots, which are the last level
        with without_autocast(grad_states):
            key = (hidden, work.dtype)
            if key not in schedule.scratch:
                schedule.scratch[key] = _backward_scratch(work.new_empty(num_nodes, 18 * hidden), schedule)
            scratch = schedule.scratch[key]
            by_input, by_output, by_update, cell_by_state, forget_by_push, forget_copy = scratch.factors
            input_gate, output_gate, update, _ = gates.split(hidden, dim=1)
            cell, tanh_cell, states, forget = work.split(hidden, dim=1)
            torch.ops.aten.sigmoid_backward.grad_input(update, input_gate, grad_input=by_input)
            torch.ops.aten.sigmoid_backward.grad_input(tanh_cell, output_gate, grad_input=by_output)
            torch.ops.aten.tanh_backward.grad_input(input_gate, update, grad_input=by_update)
            torch.ops.aten.tanh_backward.grad_input(output_gate, tanh_cell, grad_input=cell_by_state)
            torch.ops.aten.sigmoid_backward.grad_input(cell, forget, grad_input=forget_by_push)
            forget_copy.copy_(forget)
            scratch.grad_h.copy_(grad_states)  # d h from outside; each level adds what its head sends
            last = len(sizes) - 1
            for level in reversed(range(len(sizes))):
                (
                    gathered,
                    head_cell,
                    push_factors,
                    push_grads,
                    grad_h,
                    pushed_grads,
                    grad_pushed,
                    level_cell_by_state,
                    grad_cell,
                    cell_and_state,
                    gate_factors,
                    gate_grads,
                ) = (pieces[level] for pieces in scratch.levels)
                if level == last:
                    torch.mul(grad_h, level_cell_by_state, out=grad_cell)
                else:
                    torch.index_select(scratch.gather_source, 0, schedule.push_targets[level], out=gathered)
                    torch.mul(head_cell, push_factors, out=push_grads)
                    # d h = d h (outside) + d [U h, f_pre] @ [U; U_f]
                    grad_h.addmm_(pushed_grads, weight)
                    torch.addcmul(grad_pushed, grad_h, level_cell_by_state, out=grad_cell)
                torch.mul(cell_and_state, gate_factors, out=gate_grads)
            grad_projected = grad_state_weight = grad_forget_weight = None
            if ctx.needs_input_grad[0]:
                # d W_f x_head + b_f: summed over the head's children.
                scratch.grad_head_forget.zero_()
                scratch.grad_head_forget.index_add_(0, scratch.pushing_parents, scratch.pushing_forget_pre)
                # A view of the scratch, which the next layer down overwrites: autograd has used it
                # by then (that layer's output gradient goes through this layer's input product).
                grad_projected = scratch.grad_projected
            if ctx.needs_input_grad[1] or ctx.needs_input_grad[2]:
                grad_weight = scratch.pushing_grads_t.mm(states[:pushing])
                grad_state_weight, grad_forget_weight = grad_weight.split([3 * hidden, hidden])
                grad_state_weight = grad_state_weight.to(ctx.dtypes[0])
                grad_forget_weight = grad_forget_weight.to(ctx.dtypes[1])
        return grad_projected, grad_state_weight, grad_forget_weight, None


class _BackwardScratch(NamedTuple):
    """
    The backward pass's per-node buffer of 18 columns of `hidden` and its views:

    - `factors`, what depends on a node's own values: [d i_pre per d c, d o_pre per d h, d u_pre
      per d c, d c per d h, d f_pre per d (f * c), f];
    - grads: [d c, d i_pre, d o_pre, d u_pre, d of its W_f x + b_f (after the levels), d h], whose
      first four its children gather;
    - from the head: the head's [d c, d i_pre, d o_pre, d u_pre], then the node's own d f_pre and
      d c through the push.

    The columns are laid out so that strided views pair each factor with its gradient: a child's
    `d f_pre` and `d c` through the push are one product of the head's `d c` with `[d f_pre per
    d (f * c), f]`, and the gates' `d i_pre, d u_pre, d o_pre` one product of `[d c, d h]` with
    their factors (the fourth product lands in the `W_f x + b_f` column, overwritten after the levels).
    """

    factors: Tuple[torch.Tensor, ...]  # the six factor columns, (nodes, hidden) each
    grad_h: torch.Tensor  # (nodes, hidden)
    grad_head_forget: torch.Tensor  # (nodes, hidden)
    gather_source: torch.Tensor  # (nodes, 4 * hidden): [d c, d i_pre, d o_pre, d u_pre]
    pushing_parents: torch.Tensor  # (pushing,): the heads of the nodes that push (all but the roots)
    pushing_forget_pre: torch.Tensor  # (pushing, hidden): their d f_pre
    # (4 * hidden, pushing): their head's [d i_pre, d o_pre, d u_pre] and own d f_pre, transposed
    pushing_grads_t: torch.Tensor
    grad_projected: torch.Tensor  # (nodes, 4 * hidden): [d i_pre, d o_pre, d u_pre, d W_f x + b_f]
    levels: List[Tuple[torch.Tensor, ...]]  # per view the level loop reads, its views per level


def _backward_scratch(buffer: torch.Tensor, schedule: _LevelSchedule) -> _BackwardScratch:
    """`_BackwardScratch` over `buffer` `(nodes, 18 * hidden)`, with its views cut per level."""
    num_nodes, hidden = buffer.size(0), buffer.size(1) // 18
    sizes = schedule.level_sizes
    pushing = num_nodes - sizes[-1]
    row, base = buffer.stride(0), buffer.storage_offset()

    def columns(first: int, shape: Tuple[int, ...], strides: Tuple[int, ...]) -> torch.Tensor:
        """`(nodes, *shape)` of the buffer from its column `first` (in units of `hidden`)."""
        return buffer.as_strided((num_nodes, *shape), (row, *strides), base + first * hidden)

    factors, grads, from_head = buffer.split(6 * hidden, dim=1)
    factor_columns = factors.split(hidden, dim=1)
    grad_cell, _, _, _, grad_head_forget, grad_h = grads.split(hidden, dim=1)
    _, _, _, _, grad_forget_pre, grad_pushed = from_head.split(hidden, dim=1)
    pushed_grads = from_head[:, hidden : 5 * hidden]
    # [d c, d h] (nodes, 2, 1, hidden) times [[d i_pre, d u_pre] per d c, [d o_pre, d c] per d h]
    # (nodes, 2, 2, hidden) into [[d i_pre, d u_pre], [d o_pre, -]].
    cell_and_state = columns(6, (2, 1, hidden), (5 * hidden, 0, 1))
    gate_factors = columns(0, (2, 2, hidden), (hidden, 2 * hidden, 1))
    gate_grads = columns(7, (2, 2, hidden), (hidden, 2 * hidden, 1))
    # The head's d c (nodes, 1, hidden) times [d f_pre per d (f * c), f] into [d f_pre, d c].
    head_cell = columns(12, (1, hidden), (hidden, 1))
    push_factors = columns(4, (2, hidden), (hidden, 1))
    push_grads = columns(16, (2, hidden), (hidden, 1))
    views = [from_head[:, : 4 * hidden], head_cell, push_factors, push_grads, grad_h, pushed_grads, grad_pushed]
    views += [factor_columns[3], grad_cell, cell_and_state, gate_factors, gate_grads]
    return _BackwardScratch(
        factors=factor_columns,
        grad_h=grad_h,
        grad_head_forget=grad_head_forget,
        gather_source=grads[:, : 4 * hidden],
        pushing_parents=schedule.parent_or_self[:pushing],
        pushing_forget_pre=grad_forget_pre[:pushing],
        pushing_grads_t=pushed_grads[:pushing].t(),
        grad_projected=grads[:, hidden : 5 * hidden],
        levels=[view.split(sizes) for view in views],
    )


_FORGET_COLUMNS: Dict[Tuple[int, torch.device], torch.Tensor] = {}


def _forget_columns(hidden: int, device: torch.device) -> torch.Tensor:
    """`(4 * hidden,)`, true on the last `hidden` columns of `[i, o, u, f]`; made once per size and device."""
    key = (hidden, device)
    if key not in _FORGET_COLUMNS:
        with torch.inference_mode(False), torch.no_grad():
            _FORGET_COLUMNS[key] = torch.arange(4 * hidden, device=device) >= 3 * hidden
    return _FORGET_COLUMNS[key]


def _level_buffers(projected: torch.Tensor, schedule: _LevelSchedule, hidden: int) -> _LevelBuffers:
    """New buffers for a layer: `gates` `projected` with the children's memory 0, the pushes zero,
    and their level views."""
    num_nodes = projected.size(0)
    gates = projected.masked_fill(_forget_columns(hidden, projected.device), 0.0)
    pushed = projected.new_zeros(num_nodes, 4 * hidden)
    work = projected.new_empty(num_nodes, 4 * hidden)
    cells, tanh_cells, states, forgets = work.split(hidden, dim=1)
    input_gates, output_gates, updates, memories = gates.split(hidden, dim=1)
    pushed_forgets = pushed[:, 3 * hidden :]
    columns = [gates[:, : 2 * hidden], updates, input_gates, output_gates, memories, cells, tanh_cells, states]
    columns += [pushed, pushed_forgets, forgets]
    levels = [column.split(schedule.level_sizes) for column in columns]
    return _LevelBuffers(gates, pushed, work, states, pushed_forgets, levels, None)


def _run_levels(
    projected: torch.Tensor,
    state_weight: torch.Tensor,
    forget_weight: torch.Tensor,
    schedule: _LevelSchedule,
    buffers: Optional[_LevelBuffers],
) -> _LevelBuffers:
    """
    The forward pass of `_LevelRecurrence`, in `buffers` (those of an earlier layer, overwritten)
    or in new ones: `projected` `(nodes, 4 * hidden)`, the weights `(3 * hidden, hidden)` and
    `(hidden, hidden)`.  The states are the returned buffers' `states`.
    """
    with without_autocast(projected):
        hidden = state_weight.size(1)
        weight = torch.cat([state_weight, forget_weight]).to(projected.dtype)
        # The children's memory starts at 0 (in the columns of `W_f x + b_f`); a node's forget gate
        # reads its head's W_f x + b_f (a root's own, unused).
        if buffers is None:
            buffers = _level_buffers(projected, schedule, hidden)
        else:
            forget_columns = _forget_columns(hidden, projected.device)
            torch.ops.aten.masked_fill.Scalar_out(projected, forget_columns, 0.0, out=buffers.gates)
            buffers.pushed.zero_()
        buffers = buffers._replace(weight=weight)
        gates, levels = buffers.gates, buffers.levels
        torch.index_select(projected[:, 3 * hidden :], 0, schedule.parent_or_self, out=buffers.pushed_forgets)
        weight_t = weight.t()
        last = len(schedule.level_sizes) - 1
        for level, targets in enumerate(schedule.push_targets):
            (
                input_and_output,
                update,
                input_gate,
                output_gate,
                children_memory,
                cell,
                tanh_cell,
                state,
                push,
                pushed_forget,
                forget,
            ) = (pieces[level] for pieces in levels)
            input_and_output.sigmoid_()
            update.tanh_()
            torch.addcmul(children_memory, input_gate, update, out=cell)
            torch.tanh(cell, out=tanh_cell)
            torch.mul(output_gate, tanh_cell, out=state)
            if level < last:  # the last level holds only roots
                push.addmm_(state, weight_t)
                torch.sigmoid(pushed_forget, out=forget)
                torch.mul(forget, cell, out=pushed_forget)
                gates.index_add_(0, targets, push)
    return buffers


def _residual(layer: ChildSumTreeLstmLayer, layer_input: torch.Tensor, output: torch.Tensor) -> torch.Tensor:
    """
    A layer's output: `LayerNorm(shortcut + output)` with a residual connection, else `output`.
    The layer's own LayerNorm is called as a function: allennlp's trainer-time
    NormalizationBiasVerification pairs each biased module with the next module *called*, and would
    take input_linearity (whose output goes through the gates and the recurrence, not into this
    norm) for a bias feeding it, and stop training.
    """
    if layer.layer_norm is None:
        return output
    norm = layer.layer_norm
    shortcut = layer_input if layer.residual_projection is None else layer.residual_projection(layer_input)
    return torch.nn.functional.layer_norm(shortcut + output, norm.normalized_shape, norm.weight, norm.bias, norm.eps)


def _dense_levels(
    layer: ChildSumTreeLstmLayer,
    inputs: torch.Tensor,
    children: torch.BoolTensor,
    parents: torch.LongTensor,
    depth: torch.LongTensor,
    mask: torch.BoolTensor,
    num_levels: int,
) -> torch.Tensor:
    """
    One layer of `encode_dense`: `(batch_size, num_tokens, in)` -> `(batch_size, num_tokens, hidden)`,
    the deepest level first.  `U h~_j` is the sum of the children's `U h_k` and the forget gate of
    child `k` reads its head's `W_f x_j + b_f`, so a level is one product with `[U; U_f]` and one
    sum over children for `[U h~, sum f * c]`.
    """
    projected = layer.input_linearity(inputs)  # (batch, tokens, 4 * hidden): W x + b for i, o, u, f
    with without_autocast(projected):
        hidden = layer.hidden_dim
        dtype = projected.dtype
        weight = torch.cat([layer.state_linearity.weight, layer.forget_state_linearity.weight]).to(dtype)
        head_forget = projected[..., 3 * hidden :].gather(1, parents.unsqueeze(-1).expand(-1, -1, hidden))
        gates_pre = projected[..., : 3 * hidden]
        children = children.to(dtype)
        states = projected.new_zeros(*projected.shape[:2], hidden)
        cells = torch.zeros_like(states)
        # (levels, batch, tokens, 1): the tokens each level updates.
        active = ((depth == torch.arange(num_levels, device=depth.device).view(-1, 1, 1)) & mask).unsqueeze(-1)
        for level in reversed(range(num_levels)):
            pushed = torch.matmul(states, weight.t())  # (batch, tokens, 4 * hidden): [U h_k, U_f h_k]
            forget = torch.sigmoid(head_forget + pushed[..., 3 * hidden :])
            summed = torch.bmm(children, torch.cat([pushed[..., : 3 * hidden], forget * cells], dim=-1))
            gates = gates_pre + summed[..., : 3 * hidden]
            input_gate, output_gate = torch.sigmoid(gates[..., : 2 * hidden]).chunk(2, dim=-1)
            cell = torch.addcmul(summed[..., 3 * hidden :], input_gate, torch.tanh(gates[..., 2 * hidden :]))
            state = output_gate * torch.tanh(cell)
            cells = torch.where(active[level], cell, cells)
            states = torch.where(active[level], state, states)
    return states


def _copy_to_host(tensor: torch.Tensor) -> torch.Tensor:
    """The one read from a device other than the CPU per forward pass: `tensor` on the CPU."""
    return tensor.cpu()


def _copy_to_device(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """
    A CPU tensor on `device`.  To a GPU it goes from pinned memory without waiting for the GPU to
    finish its queued work (the copy is queued after it).
    """
    if device.type == "cuda":
        return tensor.pin_memory().to(device, non_blocking=True)
    return tensor.to(device)


@torch.no_grad()
def _level_schedule(mask: torch.BoolTensor, head_indices: torch.LongTensor) -> _LevelSchedule:
    """
    The schedule of a batch.  Built on the host with numpy; on another device from one copy of the
    mask and heads, then sent back as one index tensor, so the device is read once per forward pass
    (not once per tree level, nor for the checks and the level sizes) and the layers run without
    reading it.
    """
    batch_size, num_tokens = mask.shape
    device = mask.device
    if device.type == "cpu":
        host_mask, host_heads = mask.numpy(), head_indices.numpy()
    else:
        host_mask, host_heads = _copy_to_host(torch.stack([mask.long(), head_indices.long()])).numpy()
    indices, level_sizes = _host_schedule(host_mask.astype(bool), host_heads.astype(np.int64))
    index_tensor = torch.from_numpy(indices)
    if device.type != "cpu":
        index_tensor = _copy_to_device(index_tensor, device)
    num_nodes = sum(level_sizes)
    num_roots = level_sizes[-1] if level_sizes else 0  # the last level holds every root
    node_positions, parent_or_self, *push_targets, node_rows, root_rows, root_counts = index_tensor.split(
        [num_nodes, num_nodes, *level_sizes, num_nodes, num_roots, batch_size]
    )
    return _LevelSchedule(
        node_positions, parent_or_self, level_sizes, push_targets, node_rows, root_rows, root_counts, {}
    )


def _host_schedule(mask: np.ndarray, head_indices: np.ndarray) -> Tuple[np.ndarray, List[int]]:
    """
    Depths of every real token, with numpy over the whole batch, and the node order sorted by
    depth, deepest first: `(indices, level_sizes)`, where `indices` holds, one after the
    other, `node_positions`, `parent_or_self`, the push targets of every level, `node_rows`,
    `root_rows` and `root_counts` as in `_LevelSchedule`.  `mask` and `head_indices` are
    `(batch_size, num_tokens)` arrays.  Raises a `ValueError` for heads out of range, pointing at
    masked positions, or forming a cycle.
    """
    batch_size, num_tokens = mask.shape
    num_positions = batch_size * num_tokens
    heads = np.where(mask, head_indices, 0)  # (batch, tokens)
    has_head = heads > 0
    head_position = np.clip(heads - 1, 0, max(num_tokens - 1, 0))  # 0-based, within the row
    bad = mask & ((heads < 0) | (heads > num_tokens))
    bad |= has_head & ~np.take_along_axis(mask, head_position, axis=1)
    if bad.any():
        raise ValueError("head_indices point outside the sentence or at masked positions.")

    row_start = np.arange(batch_size).reshape(-1, 1) * num_tokens  # (batch, 1)
    # Flat position of each token's head; roots and masked tokens point at a dummy slot.
    flat_head = np.where(has_head, head_position + row_start, num_positions).reshape(-1)  # (positions,)

    # Depth (distance to the root) by pointer jumping: after step k each position's `ancestor` is
    # its 2^k-th (or its root's dummy slot) and `depth` counts the edges in between.
    ancestor = np.append(flat_head, num_positions)  # (positions + 1,)
    depth = np.append(has_head.reshape(-1).astype(np.int64), 0)
    for _ in range(max(num_tokens - 1, 1).bit_length()):  # a path has at most num_tokens - 1 edges
        depth = depth + depth[ancestor]
        ancestor = ancestor[ancestor]
    if (ancestor[:num_positions] != num_positions).any():  # only tokens on or under a cycle
        raise ValueError("head_indices contain a cycle.")

    # Level num_tokens - 1 - depth, so that every node comes a level after its children (and the
    # roots last); masked positions sort first and are dropped, as are the empty levels in front.
    sort_key = np.where(mask.reshape(-1), (num_tokens - 1) - depth[:num_positions], -1)
    order = np.argsort(sort_key, kind="stable")
    counts = np.bincount(sort_key + 1, minlength=1).tolist()
    num_masked, level_sizes = counts[0], counts[1:]
    while level_sizes and level_sizes[0] == 0:
        level_sizes.pop(0)
    num_nodes = sum(level_sizes)
    num_roots = level_sizes[-1] if level_sizes else 0  # the last level holds every root

    node_positions = order[num_masked:]  # (nodes,)
    node_index = np.full(num_positions + 1, num_nodes, dtype=np.int64)
    node_index[node_positions] = np.arange(num_nodes)
    push_targets = node_index[flat_head[node_positions]]  # (nodes,): sorted index of the head, roots -> num_nodes
    parent_or_self = np.where(push_targets == num_nodes, np.arange(num_nodes), push_targets)
    node_rows = node_positions // max(num_tokens, 1)
    root_rows = node_rows[num_nodes - num_roots :]
    root_counts = np.maximum(np.bincount(root_rows, minlength=batch_size), 1)
    pieces = (node_positions, parent_or_self, push_targets, node_rows, root_rows, root_counts)
    return np.concatenate(pieces).astype(np.int64), level_sizes
