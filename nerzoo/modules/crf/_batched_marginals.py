"""
The fast path of the CRF's posteriors on the CPU: `linear_chain_crf.forward_backward` (`"steps"`)
in probability space, each step one matrix product for both passes of the batch instead of two
`(batch_size, K, K)` logsumexps.  Each step's vector is divided by its sum (the logs added back at
the end); scores too far apart for float64 underflow, which the passes' identity `logsumexp_j
(alpha_t[j] + beta_t[j]) = log Z` detects, and the readable passes run instead.  Tested equal to
them in tests/modules/test_batched_marginals.py.
"""

from typing import Optional

import torch

from nerzoo.modules.crf.linear_chain_crf import ChainScores, ForwardBackward, at_last_step
from nerzoo.modules.row_reversal import gather_steps, reversal_index


def forward_backward(scores: ChainScores, logits: torch.Tensor, mask: torch.BoolTensor) -> Optional[ForwardBackward]:
    """`linear_chain_crf.forward_backward(scores, logits, mask, "steps")` on the real steps, `None` on underflow."""
    transitions, start, end = (values.to(logits.device, logits.dtype) for values in scores)
    batch_size, num_steps, num_tags = logits.shape
    logits = logits.masked_fill(~mask.unsqueeze(-1), 0.0)
    index = reversal_index(mask)
    # Rows [0, batch_size): the forward pass; the others: the backward one, over each row reversed.
    emissions = torch.cat([logits, gather_steps(logits, index)])
    emissions[:, 0] += torch.cat([start.expand(batch_size, -1), end.expand(batch_size, -1)])
    shifts = emissions.amax(dim=2, keepdim=True)
    weights = (emissions - shifts).exp()
    moves = torch.stack([transitions, transitions.t()])
    move_shift = moves.amax()
    moves = (moves - move_shift).exp()
    vectors, sums = [weights[:, 0]], [weights[:, 0].sum(dim=1, keepdim=True)]
    for step in range(1, num_steps):
        vector = torch.bmm((vectors[-1] / sums[-1]).view(2, batch_size, num_tags), moves)
        vectors.append(vector.view(2 * batch_size, num_tags) * weights[:, step])
        sums.append(vectors[-1].sum(dim=1, keepdim=True))
    # The log of what each step's vector lost: its shifts and the previous step's sum.
    scales = shifts.squeeze(-1) + torch.nn.functional.pad(torch.cat(sums, dim=1)[:, :-1].log() + move_shift, (1, 0))
    log_scores = torch.stack(vectors, dim=1).log() + scales.cumsum(dim=1).unsqueeze(-1)
    log_alpha = log_scores[:batch_size]
    log_alpha[:, 0] = start + logits[:, 0]  # exact, so that the identity sees what the first division lost
    log_beta = gather_steps(log_scores[batch_size:], index) - logits
    log_partition = torch.logsumexp(at_last_step(log_alpha, mask) + end, dim=-1)
    totals = torch.logsumexp(log_alpha + log_beta, dim=2) - log_partition.unsqueeze(1)
    if not bool(((totals.abs() <= 1e-9) | ~mask).all()):
        return None
    return ForwardBackward(log_alpha, log_beta, log_partition, ChainScores(transitions, start, end))
