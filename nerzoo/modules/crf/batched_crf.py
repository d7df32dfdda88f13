"""
Batched inference and likelihood for allennlp's `ConditionalRandomField` (Lafferty, McCallum &
Pereira, 2001, "Conditional Random Fields: Probabilistic Models for Segmenting and Labeling
Sequence Data", ICML).  The CRF module stays the holder of the parameters (`transitions`,
`start_transitions`, `end_transitions`, `_constraint_mask`); these functions only replace its
per-instance Python loops:

- `viterbi_decode` equals `ConditionalRandomField.viterbi_tags` (same constrained scores: a
  forbidden transition scores -10000), but decodes the whole batch at once: the forward scores by a
  max-semiring prefix scan, every step's backpointers in one product, and the path followed back
  by pointer jumping (`nerzoo.modules.crf.chain_scans`, `ceil(log2 T)` rounds each).
- `crf_log_likelihood` equals `ConditionalRandomField.forward` per instance (unconstrained
  transitions, as allennlp trains): the gold path's score is gathered without a loop, the
  partition function is a log-semiring product of the transfer matrices in pairwise rounds.

On the CPU the same recursions run one step at a time; a batch too large for one scan is scanned in
pieces (`chain_scans.scan_rows`).

Shapes: `logits` `(batch_size, num_steps, num_tags)`, `mask` `(batch_size, num_steps)` with each
row's valid steps first (right padding), as everywhere in allennlp.  Half-precision logits (under
autocast) are scored in float32, with autocast off.
"""

import functools
from typing import NamedTuple, Optional

import torch
from allennlp.modules.conditional_random_field import ConditionalRandomField
from torch.autograd.function import once_differentiable

from nerzoo.modules.crf import chain_scans
from nerzoo.modules.crf.crf_marginals import constrained_scores
from nerzoo.modules.full_precision import full_precision, without_autocast


class ViterbiPaths(NamedTuple):
    tags: torch.LongTensor  # (batch_size, num_steps): best path; 0 at padding
    scores: torch.Tensor  # (batch_size,): its constrained score


@torch.no_grad()
def viterbi_decode(crf: ConditionalRandomField, logits: torch.Tensor, mask: torch.BoolTensor) -> ViterbiPaths:
    """
    The highest-scoring tag path of every row under the CRF's constraints.

    At padded steps a row's scores are carried over unchanged and its backpointers point each tag
    to itself, so following them back from the last step leaves the row's path intact.
    """
    logits = full_precision(logits)  # no graph is built: the decorator turns gradients off
    with without_autocast(logits):
        return _viterbi(crf, logits, mask)


def _viterbi(crf: ConditionalRandomField, logits: torch.Tensor, mask: torch.BoolTensor) -> ViterbiPaths:
    batch_size, num_steps, num_tags = logits.shape
    mask = mask.bool()
    transitions, start, end = constrained_scores(crf, dtype=logits.dtype)
    if num_steps == 0:
        empty = logits.new_zeros((batch_size, 0), dtype=torch.long)
        return ViterbiPaths(empty, logits.new_zeros(batch_size))
    if num_steps == 1:
        best_score, tag = (start + logits[:, 0] + end).max(dim=1)
        return ViterbiPaths(tag.unsqueeze(1) * mask, best_score * mask[:, 0])
    rows = chain_scans.scan_rows(batch_size, num_steps, num_tags, logits.dtype, logits.device)
    if rows:
        scanned = functools.partial(_scanned_viterbi, transitions, start, end)
        best_score, tags = chain_scans.in_pieces(rows, scanned, logits, mask)
    else:
        stay = torch.arange(num_tags, device=logits.device)
        best_score, tags = _stepwise_viterbi(transitions, start + logits[:, 0], end, logits, mask, stay)
    # A row with no valid step (its mask starts false) has no path and scores 0.
    return ViterbiPaths(tags, best_score * mask[:, 0])


def _scanned_viterbi(transitions, start, end, logits, mask):
    """The best paths' scores and tags by a max-semiring scan and pointer jumping."""
    batch_size, num_steps, num_tags = logits.shape
    matrices = chain_scans.chain_matrices(transitions, start, logits, mask, num_steps)
    # Row 0 of the prefix products: the forward scores alpha_t, (batch, T, K).
    scores = chain_scans.prefix_products(matrices, chain_scans.max_product)[:, :, 0]
    # The best previous tag of each tag at steps 1 .. T - 1; a padded step's identity keeps the tag.
    backpointers = (scores[:, :-1].unsqueeze(3) + matrices[:, 1:]).argmax(dim=2)
    best_score, tag = (scores[:, -1] + end).max(dim=1)
    # The walk back starts from a last map that sends every tag to the best last one.
    last = tag.view(batch_size, 1, 1).expand(batch_size, 1, num_tags)
    return best_score, chain_scans.follow_backpointers(torch.cat([backpointers, last], dim=1)) * mask


def _stepwise_viterbi(transitions, first, end, logits, mask, stay):
    """The same, one step at a time (on the CPU, and for chains too long for one row's scan)."""
    stay = stay.expand(logits.size(0), -1)
    step_mask = mask.t().unsqueeze(-1)  # (num_steps, batch_size, 1)
    step_logits = logits.transpose(0, 1)  # (num_steps, batch_size, num_tags)
    score = first
    backpointers = []
    for t in range(1, logits.size(1)):
        # (batch, from, to): best previous tag for each tag at t.
        best, previous = (score.unsqueeze(2) + transitions).max(dim=1)
        score = torch.where(step_mask[t], best + step_logits[t], score)
        backpointers.append(torch.where(step_mask[t], previous, stay))
    best_score, tag = (score + end.unsqueeze(0)).max(dim=1)
    path = [tag]
    for previous in reversed(backpointers):
        tag = previous.gather(1, tag.unsqueeze(1)).squeeze(1)
        path.append(tag)
    return best_score, torch.stack(path[::-1], dim=1) * mask


def crf_log_likelihood(
    crf: ConditionalRandomField, logits: torch.Tensor, tags: torch.LongTensor, mask: torch.BoolTensor
) -> torch.Tensor:
    """
    `(batch_size,)` log P(tags | logits) of each row, as `ConditionalRandomField.forward` computes
    it (which returns their sum) with unconstrained transitions.  Every row needs at least one
    valid step.
    """
    ends = (crf.start_transitions, crf.end_transitions) if crf.include_start_end_transitions else (None, None)
    return sequence_log_likelihood(crf.transitions, *ends, logits, tags, mask)


def sequence_log_likelihood(
    transitions: torch.Tensor,
    start: Optional[torch.Tensor],
    end: Optional[torch.Tensor],
    logits: torch.Tensor,
    tags: torch.LongTensor,
    mask: torch.BoolTensor,
) -> torch.Tensor:
    """
    `(batch_size,)` log P(tags | logits) of a linear chain with these `transitions` `(num_tags,
    num_tags)` and `start` / `end` scores `(num_tags,)` (`None`: none).

    The forward recursion runs over all steps without masking (padded emissions are zeroed first)
    and each row's log-partition is read at its own last step.
    """
    logits = full_precision(logits)
    with without_autocast(logits):
        return _chain_log_likelihood(transitions, start, end, logits, tags, mask)


def _chain_log_likelihood(transitions, start, end, logits, tags, mask) -> torch.Tensor:
    batch_size, num_steps, num_tags = logits.shape
    mask = mask.bool()
    # The scan pads the chain with identities to a power of two steps (no more rounds, no odd leftovers).
    length = 1 << max(num_steps - 1, 0).bit_length()
    transitions = transitions.to(logits.dtype)
    start, end = (None if scores is None else scores.to(logits.dtype) for scores in (start, end))
    rows = chain_scans.scan_rows(batch_size, length + 1, num_tags, logits.dtype, logits.device)
    if num_steps > 1 and rows:

        def scanned(logits, tags, mask):
            return ScannedChainLogLikelihood.apply(transitions, start, end, logits, tags, mask, length)

        return chain_scans.in_pieces(rows, scanned, logits, tags, mask)
    # The recursion reads every step: padded emissions are zeroed first.
    logits = logits.masked_fill(~mask.unsqueeze(-1), 0.0)
    first = logits.new_zeros(num_tags) if start is None else start
    numerator = _gold_scores(transitions, start, end, logits, tags, mask)[0]
    rows = torch.arange(batch_size, device=logits.device)
    last = (mask.sum(dim=1) - 1).clamp_min(0)
    alphas = [logits[:, 0] + first]
    for t in range(1, num_steps):
        alphas.append(torch.logsumexp(alphas[-1].unsqueeze(2) + transitions, dim=1) + logits[:, t])
    final = torch.stack(alphas, dim=1)[rows, last]
    if end is not None:
        final = final + end.unsqueeze(0)
    return numerator - torch.logsumexp(final, dim=1)


def _gold_scores(transitions, start, end, logits, tags, mask):
    """`(batch_size,)` the gold paths' scores, and `(batch_size,)` each row's last gold tag (`None` without `end`)."""
    # Step by step (`where`: whatever padding holds stays out of it).
    gold = logits.gather(2, tags.unsqueeze(-1)).squeeze(-1)
    gold = gold + torch.nn.functional.pad(transitions[tags[:, :-1], tags[:, 1:]], (1, 0))
    numerator = torch.where(mask, gold, 0.0).sum(dim=1)
    if start is not None:
        numerator = numerator + start[tags[:, 0]]
    last_tags = None
    if end is not None:
        last = (mask.sum(dim=1) - 1).clamp_min(0)
        last_tags = tags.gather(1, last.unsqueeze(1)).squeeze(1)
        numerator = numerator + end[last_tags]
    return numerator, last_tags


class ScannedChainLogLikelihood(torch.autograd.Function):
    """
    `(batch_size,)` log P(tags | logits) of a linear chain, its partition function by pairwise
    log-semiring products (`chain_scans.chain_matrices`, padded to `length`, a power of two), with the
    gradient written out: the gold path's indicators minus the posterior marginals (Sutton &
    McCallum, 2012, §5.1.1), the marginals by the outside pass down the same rounds.  For a round's
    product `P[i, k] = logsumexp_j (L[i, j] + R[j, k])` and the gradient `G` of `P`, the gradients of
    the two factors are `sum_k W` and `sum_i W` with `W[i, j, k] = G[i, k] exp(L[i, j] + R[j, k] - P[i, k])`.
    Autograd through the rounds takes about twice the operator calls: a launch each on a GPU.

    The gold path's score is read from the same matrices: at each valid step `t` its entry
    `[y_{t-1}, y_t]` (row 0 of the first, whose rows all hold the first step's scores), in one
    gather; so its gradient is one `scatter_add` into the matrices' gradient, from which the
    logits', transitions' and start scores' gradients are sums.

    Inputs: `transitions` `(K, K)`, `start` and `end` `(K,)` or `None`, in the logits' dtype;
    `logits` `(batch_size, T, K)`, `tags` and `mask` `(batch_size, T)`, every row with a valid step.
    """

    @staticmethod
    def forward(ctx, transitions, start, end, logits, tags, mask, length):  # type: ignore[override]
        batch_size, num_steps, num_tags = logits.shape
        first = logits.new_zeros(num_tags) if start is None else start
        matrices = chain_scans.chain_matrices(transitions, first, logits, mask, length)
        # (batch, T): where each step's gold entry [y_{t-1}, y_t] lies in its row of the matrices;
        # the first step's row is any (here the last tag's): all rows of the first matrix are equal.
        steps = torch.arange(0, num_steps * num_tags**2, num_tags**2, device=tags.device)
        gold = torch.add(tags, tags.roll(1, dims=1), alpha=num_tags).add_(steps)
        # Padded steps read an identity's entry (finite), which the mask drops.
        numerator = (matrices.view(batch_size, -1).gather(1, gold) * mask).sum(dim=1)
        last_tags = None
        if end is not None:
            last_tags = tags.gather(1, mask.sum(dim=1, keepdim=True) - 1).view(batch_size)
            numerator = numerator + end.index_select(0, last_tags)
        sums = []
        while matrices.size(1) > 1:
            sums.append(chain_scans.pair_sums(matrices, 1, spacing=2))  # (batch, n / 2, K, K, K)
            matrices = sums[-1].logsumexp(dim=3, keepdim=True)  # (batch, n / 2, K, 1, K)
        final = matrices.flatten(1)[:, :num_tags]  # row 0 of the product
        if end is not None:
            final = final + end
        ctx.has_start, ctx.has_end = start is not None, end is not None
        ctx.save_for_backward(gold, mask, last_tags, final, *sums)
        return numerator - final.logsumexp(dim=1)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):  # type: ignore[override]
        gold, mask, last_tags, final, *rounds = ctx.saved_tensors
        batch_size, num_steps = gold.shape
        num_tags = final.size(1)
        # d log-likelihood / d final: minus the last step's marginals, times the incoming gradient.
        per_row = grad.unsqueeze(1)
        weights = final.softmax(dim=1).mul_(per_row).neg_()
        grad_end = weights.sum(dim=0) if ctx.has_end else None
        # The gradient of the whole product: row 0 only, as only row 0 of the first matrix is read.
        # Kept as `(batch, n, K, 1, K)`, the shape that broadcasts against a round's sums.
        outer = torch.nn.functional.pad(weights.view(batch_size, 1, 1, 1, num_tags), (0, 0, 0, 0, 0, num_tags - 1))
        for index in reversed(range(len(rounds))):
            sums = rounds[index]
            # exp(L[i, j] + R[j, k] - P[i, k]): the sums' softmax over j, as P is their logsumexp.
            terms = sums.softmax(dim=3).mul_(outer)
            shape = (batch_size, 2 * sums.size(1), num_tags) + ((1, num_tags) if index else (num_tags,))
            outer = torch.stack([terms.sum(dim=4), terms.sum(dim=2)], dim=2).view(shape)
        # (batch, T, K, K): steps past T and padded steps were identities, which no score reaches.
        outer = outer[:, :num_steps] * mask.view(batch_size, num_steps, 1, 1)
        # Plus the gold path's indicators.
        valid = per_row * mask
        outer.view(batch_size, -1).scatter_add_(1, gold, valid)
        grad_logits = outer.sum(dim=2)
        grad_transitions = outer[:, 1:].sum(dim=(0, 1))
        # The first step's scores: its marginals are in row 0, its gold indicator in any row.
        grad_start = outer[:, 0].sum(dim=(0, 1)) if ctx.has_start else None
        if grad_end is not None:
            grad_end.index_put_((last_tags,), grad, accumulate=True)
        return grad_transitions, grad_start, grad_end, grad_logits, None, None, None
