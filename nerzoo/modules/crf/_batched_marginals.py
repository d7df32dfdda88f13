"""
The fast path of the CRF's posteriors on the CPU: `linear_chain_crf.forward_backward` (its
`"steps"` schedule) in probability space, where a step is one matrix product for both passes of
the whole batch instead of a `(batch_size, K, K)` logsumexp per pass.  Each step's vector is
divided by its sum, and the logs of the divisors are added back at the end, so nothing overflows;
a step whose scores are too far apart for float64 underflows, which the passes' own identity
(`logsumexp_j (alpha_t[j] + beta_t[j]) = log Z` at every step) detects: the caller then runs the
readable passes.  Tested equal to them in tests/modules/test_batched_marginals.py.
"""

from typing import Optional

import torch

from nerzoo.modules.crf.linear_chain_crf import ChainScores, ForwardBackward, at_last_step
from nerzoo.modules.row_reversal import gather_steps, reversal_index

# How far from `log Z` the identity may be at a real step before the readable passes run instead.
TOLERANCE = 1e-9


def forward_backward(scores: ChainScores, logits: torch.Tensor, mask: torch.BoolTensor) -> Optional[ForwardBackward]:
    """`linear_chain_crf.forward_backward(scores, logits, mask, "steps")` on its real steps, or `None` on underflow."""
    transitions, start, end = (values.to(logits.dtype) for values in scores)
    batch_size, num_steps, num_tags = logits.shape
    logits = logits.masked_fill(~mask.unsqueeze(-1), 0.0)
    index = reversal_index(mask)
    # Rows [0, batch_size): the forward pass; the others: the backward one, each row reversed.
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
    # log of what each step's vector was divided by, and the shifts taken out of its scores.
    divisors = torch.cat(sums, dim=1).log()
    scales = shifts.squeeze(-1) + torch.nn.functional.pad(divisors[:, :-1], (1, 0)) + move_shift
    scales[:, 0] -= move_shift
    log_scores = torch.stack(vectors, dim=1).log() + scales.cumsum(dim=1).unsqueeze(-1)
    log_alpha = log_scores[:batch_size]
    # Exact, so that the identity below also sees what the first step's division lost.
    log_alpha[:, 0] = start + logits[:, 0]
    log_beta = gather_steps(log_scores[batch_size:], index) - logits
    log_partition = torch.logsumexp(at_last_step(log_alpha, mask) + end, dim=-1)
    totals = torch.logsumexp(log_alpha + log_beta, dim=2) - log_partition.unsqueeze(1)
    if not bool(((totals.abs() <= TOLERANCE) | ~mask).all()):
        return None
    return ForwardBackward(log_alpha, log_beta, log_partition, ChainScores(transitions, start, end))
