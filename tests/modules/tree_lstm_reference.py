"""
The obvious node-by-node child-sum Tree-LSTM: the oracle `ChildSumTreeLstm` is tested against, and
the baseline `benchmarks/speed/tree_lstm_speed.py` times it against.  Not registered, not for
training: it recurses over each sentence's tree in Python, one token at a time, with the parameters
of a given `ChildSumTreeLstm`.
"""

from typing import Dict, List, Tuple

import torch

from nerzoo.modules.seq2seq_encoders.child_sum_tree_lstm import ChildSumTreeLstm, ChildSumTreeLstmLayer
from nerzoo.modules.seq2seq_encoders.top_down_tree_lstm import TopDownTreeLstmLayer


def reference_tree_lstm(
    module: ChildSumTreeLstm,
    inputs: torch.Tensor,
    mask: torch.BoolTensor,
    head_indices: torch.LongTensor,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """
    `(states, root)` as `module.encode(inputs, mask, head_indices)` computes them: states
    `(batch_size, num_tokens, hidden_dim)`, root `(batch_size, hidden_dim)`.  Dropout is not applied,
    so compare with the module in eval mode (or with `dropout=0`).
    """
    if module.training and module.dropout.p > 0:
        raise ValueError("The reference applies no dropout: put the module in eval mode.")
    batch_size, num_tokens, _ = inputs.shape
    hidden_dim = module.get_output_dim()
    layer_input = inputs.masked_fill(~mask.bool().unsqueeze(-1), 0.0)
    for layer in module.layers:
        sentences = []
        for row in range(batch_size):
            tokens = [t for t in range(num_tokens) if bool(mask[row, t])]
            heads = {t: int(head_indices[row, t]) - 1 for t in tokens}  # -1 for a root
            states = _tree_lstm_sentence(layer, layer_input[row], tokens, heads)
            if layer.top_down is not None:
                down = _top_down_sentence(layer.top_down, layer_input[row], tokens, heads, states)
                states = {t: torch.cat([states[t], down[t]]) for t in tokens}
            zero = layer_input.new_zeros(hidden_dim)
            sentences.append(torch.stack([states.get(t, zero) for t in range(num_tokens)]))
        output = torch.stack(sentences)
        if layer.layer_norm is not None:
            shortcut = layer_input
            if layer.residual_projection is not None:
                shortcut = layer_input @ layer.residual_projection.weight.t()
            residual = layer.layer_norm(shortcut + output)
            output = torch.stack(
                [
                    torch.stack(
                        [
                            residual[row, t] if bool(mask[row, t]) else residual.new_zeros(hidden_dim)
                            for t in range(num_tokens)
                        ]
                    )
                    for row in range(batch_size)
                ]
            )
        layer_input = output

    roots = []
    for row in range(batch_size):
        root_states = [
            layer_input[row, t] for t in range(num_tokens) if bool(mask[row, t]) and int(head_indices[row, t]) == 0
        ]
        if root_states:
            roots.append(torch.stack(root_states).mean(dim=0))
        else:
            roots.append(layer_input.new_zeros(hidden_dim))
    return layer_input, torch.stack(roots)


def _tree_lstm_sentence(
    layer: ChildSumTreeLstmLayer, inputs: torch.Tensor, tokens: List[int], heads: Dict[int, int]
) -> Dict[int, torch.Tensor]:
    """`h` of every token of one sentence, computing each node after its children, recursively."""
    hidden_dim = layer.hidden_dim
    children: Dict[int, List[int]] = {t: [] for t in tokens}
    for t in tokens:
        if heads[t] >= 0:
            children[heads[t]].append(t)
    hs: Dict[int, torch.Tensor] = {}
    cs: Dict[int, torch.Tensor] = {}

    def compute(j: int) -> None:
        for k in children[j]:
            compute(k)
        w_i, w_o, w_u, w_f = layer.input_linearity(inputs[j]).split(hidden_dim)
        h_tilde = inputs.new_zeros(hidden_dim)
        for k in children[j]:
            h_tilde = h_tilde + hs[k]
        u_i, u_o, u_u = layer.state_linearity(h_tilde).split(hidden_dim)
        i = torch.sigmoid(w_i + u_i)
        o = torch.sigmoid(w_o + u_o)
        u = torch.tanh(w_u + u_u)
        c = i * u
        for k in children[j]:
            f = torch.sigmoid(w_f + layer.forget_state_linearity(hs[k]))
            c = c + f * cs[k]
        hs[j] = o * torch.tanh(c)
        cs[j] = c

    for t in tokens:
        if heads[t] < 0:
            compute(t)
    return hs


def _top_down_sentence(
    layer: TopDownTreeLstmLayer,
    inputs: torch.Tensor,
    tokens: List[int],
    heads: Dict[int, int],
    up: Dict[int, torch.Tensor],
) -> Dict[int, torch.Tensor]:
    """`h^down` of every token of one sentence, computing each node after its head, recursively."""
    hidden_dim = layer.hidden_dim
    hs: Dict[int, torch.Tensor] = {}
    cs: Dict[int, torch.Tensor] = {}

    def compute(j: int) -> None:
        if j in hs:
            return
        zero = inputs.new_zeros(hidden_dim)
        p = heads[j]
        if p >= 0:
            compute(p)
        head_up, head_h, head_c = (up[p], hs[p], cs[p]) if p >= 0 else (zero, zero, zero)
        gates = layer.input_linearity(inputs[j]) + layer.state_linearity(torch.cat([head_up, head_h]))
        w_i, w_f, w_o, w_u = gates.split(hidden_dim)
        cs[j] = torch.sigmoid(w_i) * torch.tanh(w_u) + torch.sigmoid(w_f) * head_c
        hs[j] = torch.sigmoid(w_o) * torch.tanh(cs[j])

    for t in tokens:
        compute(t)
    return hs
