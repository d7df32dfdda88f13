"""
`Seq2Biseq.decode` (eval mode, its own predictions) in the form `allennlp export` traces to ONNX:
each decoder step reads the argmax of the step before, so both passes run as scripted loops (ONNX
`Loop`s) over the padded batch, the GRU cell written out as `torch.nn.GRU` computes it.  Tested
against `decode`.
"""

from typing import List, Tuple

import torch

from nerzoo.models.seq2biseq import Seq2Biseq
from nerzoo.modules.row_reversal import gather_steps, reversal_index


@torch.jit.script
def _gru_cell(inputs: torch.Tensor, state: torch.Tensor, weights: List[torch.Tensor]) -> torch.Tensor:
    """`torch.nn.GRU`'s step: `weights` are its `weight_ih, weight_hh, bias_ih, bias_hh` (gates r, z, n)."""
    reset_i, update_i, new_i = torch.nn.functional.linear(inputs, weights[0], weights[2]).chunk(3, dim=1)
    reset_h, update_h, new_h = torch.nn.functional.linear(state, weights[1], weights[3]).chunk(3, dim=1)
    reset, update = torch.sigmoid(reset_i + reset_h), torch.sigmoid(update_i + update_h)
    return (1 - update) * torch.tanh(new_i + reset * new_h) + update * state


@torch.jit.script
def _greedy_pass(
    lexical: torch.Tensor,
    first_label: int,
    labels: torch.Tensor,
    decoder: List[torch.Tensor],
    output: List[torch.Tensor],
    backward_states: torch.Tensor,
    lexical_decoders: bool,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """
    One decoder over `lexical` `(batch_size, num_steps, dim)`, each step reading the label embedding
    (`labels`) of the previous step's argmax, from `first_label`: its states and logits.  The output
    layer (`output`: weight, bias) reads `[lexical_i; state_i]` when `backward_states` has no steps (the
    backward decoder), else `[state_i; lexical_i; backward_i]` (the forward one).
    """
    previous = torch.full(lexical.shape[:1], first_label, dtype=torch.long, device=lexical.device)
    state = lexical.new_zeros(lexical.size(0), decoder[1].size(1))
    states: List[torch.Tensor] = []
    logits: List[torch.Tensor] = []
    for step in range(lexical.size(1)):
        words = lexical[:, step]
        inputs = torch.cat([words, labels[previous]], dim=1) if lexical_decoders else labels[previous]
        state = _gru_cell(inputs, state, decoder)
        if backward_states.size(1) == 0:
            read = torch.cat([words, state], dim=1)
        else:
            read = torch.cat([state, words, backward_states[:, step]], dim=1)
        scores = torch.nn.functional.linear(read, output[0], output[1])
        states.append(state)
        logits.append(scores)
        previous = scores.argmax(dim=1)
    return torch.stack(states, dim=1), torch.stack(logits, dim=1)


def exported_decode(model: Seq2Biseq, lexical: torch.Tensor, mask: torch.BoolTensor) -> torch.Tensor:
    """`model.decode(lexical, mask)`'s forward logits `(batch_size, num_tokens, num_tags)`, as scripted loops."""
    reverse = reversal_index(mask)
    labels = model.label_embedding.weight
    passes = []
    for gru, linear in ((model.backward_decoder, model.backward_output), (model.forward_decoder, model.forward_output)):
        passes.append(
            ([gru.weight_ih_l0, gru.weight_hh_l0, gru.bias_ih_l0, gru.bias_hh_l0], [linear.weight, linear.bias])
        )
    no_steps = lexical.new_zeros(lexical.size(0), 0, 1)
    states, _ = _greedy_pass(
        gather_steps(lexical, reverse), model.end_label, labels, *passes[0], no_steps, model.lexical_decoders
    )
    backward_states = gather_steps(states, reverse)
    _, logits = _greedy_pass(lexical, model.start_label, labels, *passes[1], backward_states, model.lexical_decoders)
    return logits


def exportable(model: Seq2Biseq) -> bool:
    """Whether `exported_decode` computes `model`'s decoders: one-layer GRUs with biases."""
    return all(gru.num_layers == 1 and gru.bias for gru in (model.backward_decoder, model.forward_decoder))
