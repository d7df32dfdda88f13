"""
Exact posterior marginals of allennlp's `ConditionalRandomField` by the forward-backward algorithm
(Lafferty, McCallum & Pereira, 2001; Sutton & McCallum, "An Introduction to Conditional Random
Fields", 2012, §4.1), under the same transition constraints that its Viterbi decoding applies.

Shapes: `logits` `(batch_size, num_steps, num_tags)`, `mask` `(batch_size, num_steps)` with each
row's valid steps first (right padding), as everywhere in allennlp.
"""

import functools
import weakref
from typing import Any, Dict, NamedTuple, Optional, Tuple, Union

import torch
from allennlp.modules.conditional_random_field import ConditionalRandomField

from nerzoo.modules.crf import chain_scans
from nerzoo.modules.full_precision import full_precision, without_autocast

# allennlp's Viterbi gives forbidden transitions this score; we do the same.
_FORBIDDEN = -10000.0
# At most this many (temperature, dtype, device) uses of the constrained scores are kept per CRF.
_KEPT_SCORES = 8


class ForwardBackward(NamedTuple):
    log_alpha: torch.Tensor  # (batch_size, num_steps, num_tags): paths ending at (t, tag), emissions up to t included
    log_beta: (
        torch.Tensor
    )  # (batch_size, num_steps, num_tags): paths leaving (t, tag) to the end, excluding emission at t
    log_partition: torch.Tensor  # (batch_size,)
    transitions: torch.Tensor  # (num_tags, num_tags), constrained


def constrained_scores(
    crf: ConditionalRandomField,
    temperature: Union[float, torch.Tensor] = 1.0,
    dtype: Optional[torch.dtype] = None,
    device: Optional[torch.device] = None,
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """
    `(transitions, start, end)` with forbidden moves scored as in `crf.viterbi_tags`; the learned
    scores divided by `temperature` (a float or a scalar tensor), the forbidden ones left forbidden;
    in `dtype` and on `device` (default: the CRF's).
    """
    if not torch.is_tensor(temperature) and not torch.is_grad_enabled():
        # Decoding and prediction: made once per version of the scores, kept on the CRF for each
        # temperature, dtype and device (decoding in the logits' dtype and marginals in float64
        # alternate in a prediction batch).
        use = (torch.is_inference_mode_enabled(), temperature, dtype, device)
        version = (crf._constraint_mask._version,)
        version += tuple(
            (scores.data_ptr(), scores._version, scores.dtype, scores.device) for scores in _crf_scores(crf)
        )
        kept = _kept_scores(crf)
        cached = kept.get(use)
        if cached is None or cached[0] != version:
            if len(kept) >= _KEPT_SCORES:
                kept.clear()
            kept[use] = cached = (version, _constrained(crf, temperature, dtype, device))
        return cached[1]
    return _constrained(crf, temperature, dtype, device)


def _kept_scores(crf: ConditionalRandomField) -> Dict[Any, Any]:
    """
    The constrained scores kept on `crf`, forgotten whenever a gradient reaches its scores.  Fused
    optimizers (`fused=True`) update parameters in place without bumping their versions, so a
    version alone would keep stale scores; every optimizer step needs a gradient first.
    """
    scores = _crf_scores(crf)
    hooked = tuple((weakref.ref(score), score.requires_grad) for score in scores)
    kept_hooks = crf.__dict__.get("_nerzoo_forgetting_hooks", ())
    if [(ref(), grad) for ref, grad in kept_hooks] != [(score, score.requires_grad) for score in scores]:
        owner = weakref.ref(crf)

        def forget(_: torch.Tensor) -> None:
            crf_now = owner()
            if crf_now is not None:
                crf_now.__dict__.pop("_nerzoo_constrained_scores", None)

        for score in scores:
            if score.requires_grad:
                score.register_post_accumulate_grad_hook(forget)
        crf.__dict__["_nerzoo_forgetting_hooks"] = hooked
    return crf.__dict__.setdefault("_nerzoo_constrained_scores", {})


def _crf_scores(crf: ConditionalRandomField) -> Tuple[torch.Tensor, ...]:
    ends = (crf.start_transitions, crf.end_transitions) if crf.include_start_end_transitions else ()
    return (crf.transitions, *ends)


def _constrained(
    crf: ConditionalRandomField,
    temperature: Union[float, torch.Tensor],
    dtype: Optional[torch.dtype],
    device: Optional[torch.device],
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    scores = _scaled_constrained(crf, temperature)
    if dtype is None and device is None:
        return scores
    return tuple(values.to(device or values.device, dtype or values.dtype) for values in scores)  # type: ignore


def _scaled_constrained(
    crf: ConditionalRandomField, temperature: Union[float, torch.Tensor]
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    transitions_allowed, start_allowed, end_allowed = _allowed_moves(crf)
    scaled = crf.transitions if _is_one(temperature) else crf.transitions / temperature
    transitions = torch.where(transitions_allowed, scaled, _FORBIDDEN)
    if crf.include_start_end_transitions:
        start, end = crf.start_transitions, crf.end_transitions
        if not _is_one(temperature):
            start, end = start / temperature, end / temperature
        return transitions, torch.where(start_allowed, start, _FORBIDDEN), torch.where(end_allowed, end, _FORBIDDEN)
    forbidden = torch.tensor(_FORBIDDEN, dtype=transitions.dtype, device=transitions.device)
    return transitions, torch.where(start_allowed, 0.0, forbidden), torch.where(end_allowed, 0.0, forbidden)


def _is_one(temperature: Union[float, torch.Tensor]) -> bool:
    return not torch.is_tensor(temperature) and temperature == 1.0


def _allowed_moves(crf: ConditionalRandomField) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`(num_tags, num_tags)` allowed transitions, `(num_tags,)` allowed first and last tags."""
    constraint = crf._constraint_mask  # (num_tags + 2, num_tags + 2); rows/cols num_tags, num_tags + 1 = start, end
    # Made once per CRF, device and version of its constraints, and kept on the CRF.
    key = (constraint.device, constraint._version)
    cached = crf.__dict__.get("_nerzoo_allowed_moves")
    if cached is None or cached[0] != key:
        num_tags = crf.num_tags
        with torch.no_grad():
            allowed = constraint.detach() > 0.5
            masks = (allowed[:num_tags, :num_tags], allowed[num_tags, :num_tags], allowed[:num_tags, num_tags + 1])
        crf.__dict__["_nerzoo_allowed_moves"] = cached = (key, masks)
    return cached[1]


def _log_matmul_exp(log_values: torch.Tensor, exp_matrix: torch.Tensor, shift: torch.Tensor):
    """
    `log(exp(log_values) @ exp(matrix))` for `(batch, n)` values and an `(n, m)` matrix given as
    `exp_matrix = exp(matrix - shift)` (`shift` `(m,)`, each column's maximum), by a matrix product
    rescaled per row instead of a `(batch, n, m)` logsumexp.  Also returns where an entry
    underflowed (every term below the float range of the row's largest one), `(batch,)`.
    """
    top = log_values.max(dim=1, keepdim=True).values
    product = torch.mm((log_values - top).exp(), exp_matrix)
    tiny = torch.finfo(product.dtype).tiny
    return product.clamp_min(tiny).log() + top + shift, (product < tiny).any(dim=1)


def _log_matmul_exp_exact(log_values: torch.Tensor, matrix: torch.Tensor, shift: torch.Tensor):
    """The same by a `(batch, n, m)` logsumexp, for scores too far apart for the rescaled product."""
    return torch.logsumexp(log_values.unsqueeze(2) + matrix.unsqueeze(0), dim=1), None


def forward_backward(
    crf: ConditionalRandomField, logits: torch.Tensor, mask: torch.BoolTensor, transition_temperature: float = 1.0
) -> ForwardBackward:
    """
    Runs both recursions, batched over sentences.  On accelerators
    (`nerzoo.modules.crf.chain_scans.scan_rows`), both are log-semiring scans over the transfer matrices
    (`ceil(log2 T)` rounds each), a batch too large for one scan in pieces: for a large batch in
    float64 (`chain_scans.RESCALED_FROM_ELEMENTS`) each round a rescaled matrix product
    (`chain_scans.rescaled_log_product`), checked for consistency and run again step by step with
    logsumexp where a clamped entry mattered; else an exact logsumexp.  On the
    CPU they run one step at a time, each
    step a rescaled matrix product in probability space (see `_log_matmul_exp`); if any valid step
    underflowed (scores hundreds of nats apart), both recursions are run again with logsumexp.  The
    transition scores are divided by `transition_temperature` (the caller scales `logits`).
    """
    logits = full_precision(logits)
    with without_autocast(logits):
        if torch.is_tensor(transition_temperature):
            transition_temperature = transition_temperature.to(crf.transitions.device)
        # The CRF may live on another device than the logits (`calibrate` holds its batches on the CPU).
        transitions, start, end = constrained_scores(crf, transition_temperature, logits.dtype, logits.device)
        mask = mask.bool()
        batch_size, num_steps, num_tags = logits.shape
        rescaled = (
            logits.dtype == torch.float64
            and 2 * batch_size * num_steps * num_tags**3 > chain_scans.RESCALED_FROM_ELEMENTS
        )
        rows = chain_scans.scan_rows(*logits.shape, logits.dtype, logits.device, matrix_products=rescaled)
        if logits.size(1) > 1 and rows:
            product = chain_scans.rescaled_log_product if rescaled else chain_scans.log_product
            scanned = functools.partial(_scanned_recursions, transitions, start, end, product)
            result = ForwardBackward(*chain_scans.in_pieces(rows, scanned, logits, mask), transitions)
            if not rescaled or _consistent(result):
                return result
            return _recursions(transitions, start, end, logits, mask, _log_matmul_exp_exact)[0]
        result, underflow = _recursions(transitions, start, end, logits, mask, _log_matmul_exp)
        if underflow is not None and bool(underflow):
            result, _ = _recursions(transitions, start, end, logits, mask, _log_matmul_exp_exact)
    return result


def _scanned_recursions(
    transitions, start, end, product, logits, mask
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """
    `ForwardBackward`'s `log_alpha`, `log_beta` and `log_partition` by scans of log-semiring
    `product`s.  alpha_t is row 0 of the prefix products of `[F, M_1, ..., M_{T-1}]`, where every row of `F` is
    the first step's scores; beta_t is column 0 of the suffix products of `[M_{t+1}, ..., M_{T-1}, E]`,
    where every column of `E` is the end scores.  A padded step's identity carries both over.  Where
    twice the batch fits, one scan gives both.
    """
    batch_size, num_steps, num_tags = logits.shape
    matrices = chain_scans.chain_matrices(transitions, start, logits, mask, num_steps)  # [F, M_1, ..., M_{T-1}]
    last = end.view(1, 1, num_tags, 1).expand(batch_size, 1, num_tags, num_tags)
    following = torch.cat([matrices[:, 1:], last], dim=1)  # [M_1, ..., M_{T-1}, E]
    matrix_products = product is chain_scans.rescaled_log_product
    if chain_scans.fits(2 * batch_size, num_steps, num_tags, logits.dtype, matrix_products):
        # Both in one scan: the suffix products are the transposes of the prefix products of the
        # transposed matrices in reverse order, `(A (x) B)^T = B^T (x) A^T`.
        both = torch.cat([matrices, following.flip(1).transpose(2, 3)])
        products = chain_scans.prefix_products(both, product)[:, :, 0]
        log_alpha, log_beta = products[:batch_size], products[batch_size:].flip(1)
    else:
        log_alpha = chain_scans.prefix_products(matrices, product)[:, :, 0]
        log_beta = chain_scans.suffix_products(following, product)[..., 0]
    return log_alpha, log_beta, torch.logsumexp(log_alpha[:, -1] + end, dim=1)


def _consistent(result: ForwardBackward, tolerance: float = 1e-6) -> bool:
    """
    Whether every step's `logsumexp(alpha_t + beta_t)` is the partition function, as it is for exact
    recursions (padding included: there both carry over).  An entry that `rescaled_log_product`
    clamped breaks it only where it mattered.  One read back to the host.
    """
    with torch.no_grad():
        totals = torch.logsumexp(result.log_alpha + result.log_beta, dim=2)
        return bool(((totals - result.log_partition.unsqueeze(1)).abs() <= tolerance).all())


def _recursions(transitions, start, end, logits, mask, log_matmul_exp):
    batch_size, num_steps, num_tags = logits.shape
    rescaled = log_matmul_exp is _log_matmul_exp
    underflows = []
    # alpha_t[to] = log sum_from exp(alpha_{t-1}[from] + transition[from, to]) + emission_t[to]
    column_max = transitions.max(dim=0).values
    forward_matrix = (transitions - column_max.unsqueeze(0)).exp() if rescaled else transitions
    alphas = [start.view(1, num_tags) + logits[:, 0]]
    for t in range(1, num_steps):
        step, underflow = log_matmul_exp(alphas[-1], forward_matrix, column_max)
        alphas.append(torch.where(mask[:, t : t + 1], step + logits[:, t], alphas[-1]))
        if underflow is not None:
            underflows.append(underflow & mask[:, t])
    log_alpha = torch.stack(alphas, dim=1)
    # After the loop alphas[-1] holds each row's alpha at its last valid step.
    log_partition = torch.logsumexp(alphas[-1] + end.view(1, num_tags), dim=1)

    # beta_t[from] = log sum_to exp(transition[from, to] + emission_{t+1}[to] + beta_{t+1}[to])
    row_max = transitions.max(dim=1).values
    backward_matrix = ((transitions - row_max.unsqueeze(1)).exp() if rescaled else transitions).t()
    end_scores = end.view(1, num_tags).expand(batch_size, num_tags)
    betas = [end_scores]
    for t in range(num_steps - 2, -1, -1):
        step, underflow = log_matmul_exp(logits[:, t + 1] + betas[-1], backward_matrix, row_max)
        # Where t+1 is padding, t is the last valid step (or padding): only the end transition remains.
        betas.append(torch.where(mask[:, t + 1 : t + 2], step, end_scores))
        if underflow is not None:
            underflows.append(underflow & mask[:, t + 1])
    log_beta = torch.stack(betas[::-1], dim=1)
    any_underflow = torch.stack(underflows).any() if underflows else None
    return ForwardBackward(log_alpha, log_beta, log_partition, transitions), any_underflow


def tag_marginals(result: ForwardBackward, mask: torch.BoolTensor) -> torch.Tensor:
    """`(batch_size, num_steps, num_tags)` posterior P(tag at t | x); zero at padding."""
    log_marginals = result.log_alpha + result.log_beta - result.log_partition.view(-1, 1, 1)
    return log_marginals.exp() * mask.unsqueeze(-1)


class PathPosteriors:
    """
    Posteriors along given tag paths (typically the Viterbi paths), computed batched once so that
    any stretch of a path can then be scored in O(1):

        log P(y_s..y_e = path_s..path_e | x)
            = log_alpha[s, path_s] + sum_{k=s+1..e} (T[path_{k-1}, path_k] + logits[k, path_k])
              + log_beta[e, path_e] - log Z

    For a predicted entity this is the probability that the model gives to that entity with
    exactly its boundaries and type, whatever the rest of the sentence carries.

    # Parameters

    result : `ForwardBackward`
    logits : `torch.Tensor`, `(batch_size, num_steps, num_tags)`
    paths : `torch.LongTensor`, `(batch_size, num_steps)`, any value at padding
    """

    def __init__(self, result: ForwardBackward, logits: torch.Tensor, paths: torch.LongTensor) -> None:
        on_path = paths.unsqueeze(-1)
        alpha = result.log_alpha.gather(2, on_path).squeeze(-1)  # (batch_size, num_steps)
        beta = result.log_beta.gather(2, on_path).squeeze(-1)
        emissions = logits.gather(2, on_path).squeeze(-1)
        steps = result.transitions[paths[:, :-1], paths[:, 1:]] + emissions[:, 1:]
        prefix = torch.cat([torch.zeros_like(alpha[:, :1]), steps.cumsum(dim=1)], dim=1)
        log_partition = result.log_partition.unsqueeze(1)
        # Marginal of each step's path tag, and the two halves of any segment's score,
        # all (batch_size, num_steps).
        self.tag_log_marginals = alpha + beta - log_partition
        self.segment_start = alpha - prefix - log_partition
        self.segment_end = beta + prefix

    def segment_log_probability(self, row: int, start: int, end: int) -> float:
        """log-posterior of the path's tags on steps `start .. end - 1` of instance `row`."""
        return float(self.segment_start[row, start] + self.segment_end[row, end - 1])
