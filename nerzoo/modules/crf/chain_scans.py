"""
A linear chain's forward scores, partition function and Viterbi backpointers in O(log T) batched
rounds instead of T sequential steps: parallel scans over the chain's transfer matrices (Blelloch,
1990, "Prefix Sums and Their Applications"; Hillis & Steele, 1986; for CRFs, Rush, 2020,
"Torch-Struct: Deep Structured Prediction Library", ACL demos, §4, and Särkkä & García-Fernández,
2021, "Temporal Parallelization of Bayesian Smoothers", IEEE TAC).

A chain over `T` steps and `K` tags scores a path `y` by

    start[y_0] + sum_t logits[t, y_t] + sum_{t >= 1} transitions[y_{t-1}, y_t] + end[y_{T-1}].

With the transfer matrix of step `t >= 1`, `M_t[i, j] = transitions[i, j] + logits[t, j]`, the
forward scores are `alpha_t = alpha_{t-1} (x) M_t`, where `(x)` is the matrix product of a semiring:
`(A (x) B)[i, k] = logsumexp_j (A[i, j] + B[j, k])` for sums over paths, `max_j` for the best path.
The product is associative, so every `alpha_t` follows from a prefix scan of the `M_t`, and the
partition function from their product, each in `ceil(log2 T)` rounds of batched products.  A padded
step gets the semiring's identity (0 on the diagonal, `PADDING_SCORE` elsewhere), so a row's scores
stop at its last valid step.  On a GPU a small batch costs about one kernel launch per operator
call: a round is a handful of calls, where a step of the recursion was as many.

The scans trade work for depth: a round holds a `(batch_size, T, K, K, K)` tensor, `K` times the
work of a recursion step.  So callers scan only where launches, not arithmetic, bound the time
(`scan_rows`): on accelerators, in pieces of as many rows as a round of `MAX_SCAN_ELEMENTS` holds
(the whole batch where it fits; `in_pieces`), and step by step only where not one row fits (at
`K` = 17 in float32, a chain of over 27,000 steps).  On the CPU the
step-by-step recursions are faster at every size (one thread, `K` = 17: Viterbi 4-70x, the
likelihood with its gradient 3-13x, forward-backward in float64 6-400x, from 10 sentences of 8
words to 64 of 32); `NERZOO_CRF_SCANS=always` scans there too (to count an accelerator's operator
calls on the CPU), `never` nowhere.

Shapes: `transitions` `(K, K)`, `logits` `(batch_size, T, K)`, `mask` `(batch_size, T)` with each
row's valid steps first; `matrices` `(batch_size, n, K, K)`.
"""

import os
from typing import Any, Callable, Dict, Tuple

import torch

# Off-diagonal score of a padded step's identity: exp() of it is 0 in float32 and float64, and sums
# of a few of them stay finite (an infinite score would give NaN gradients through logsumexp).
PADDING_SCORE = -1e30
# The largest `(batch_size, T, K, K, K)` round the scans take: 512 MiB of float32 (a round's
# reduction holds about two at its peak). A larger batch is scanned in pieces.
MAX_SCAN_ELEMENTS = 2**27
# From how many elements of a `(batch_size, T, K, K, K)` float64 round (16 MiB) the log-semiring scans
# take `rescaled_log_product`: a pass over a larger round costs a GPU more than the product's few
# extra operator calls cost the host; below it the calls are what counts.
RESCALED_FROM_ELEMENTS = 2**21

Product = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
_IDENTITIES: Dict[Tuple[int, torch.dtype, torch.device], torch.Tensor] = {}


# Where the scans run: "accelerators" (every device but the CPU), "always" or "never".
SCANS_VARIABLE = "NERZOO_CRF_SCANS"
_POLICIES = ("accelerators", "always", "never")


def rows_per_scan(
    num_steps: int, num_tags: int, dtype: torch.dtype = torch.float32, matrix_products: bool = False
) -> int:
    """How many rows of a chain of this length one scan takes within `MAX_SCAN_ELEMENTS` (of float32;
    half as many of float64): 0 where not one fits.  A round holds `(rows, T, K, K, K)` sums, or
    `(rows, T, K, K)` matrices with `matrix_products` (`rescaled_log_product`)."""
    scale = 2 if dtype == torch.float64 else 1
    elements = num_tags**2 if matrix_products else num_tags**3
    return MAX_SCAN_ELEMENTS // (max(num_steps - 1, 1) * elements * scale)


def fits(
    batch_size: int, num_steps: int, num_tags: int, dtype: torch.dtype = torch.float32, matrix_products: bool = False
) -> bool:
    """Whether the scans of a batch of this shape stay within `MAX_SCAN_ELEMENTS` in one piece."""
    return batch_size <= rows_per_scan(num_steps, num_tags, dtype, matrix_products)


def scan_rows(
    batch_size: int,
    num_steps: int,
    num_tags: int,
    dtype: torch.dtype,
    device: torch.device,
    matrix_products: bool = False,
) -> int:
    """
    How many rows of a batch of this shape on `device` each scan takes: the batch's size where it
    fits, else as many rows as fit (`in_pieces` runs the pieces); 0 where it runs step by step (see
    the module's docstring).
    """
    policy = os.environ.get(SCANS_VARIABLE, "accelerators")
    if policy not in _POLICIES:
        raise ValueError(f"{SCANS_VARIABLE}={policy!r}: expected one of {', '.join(_POLICIES)}")
    if policy == "never" or (policy == "accelerators" and device.type == "cpu"):
        return 0
    return min(batch_size, rows_per_scan(num_steps, num_tags, dtype, matrix_products))


def in_pieces(rows: int, function: Callable[..., Any], *batched: torch.Tensor) -> Any:
    """
    `function(*batched)` on pieces of at most `rows` rows (the first dimension of every tensor in
    `batched`), one after the other: its output, a tensor or a tuple of tensors with the batch
    first, concatenated.  The rows of a chain are independent, so the pieces give what one call would.
    """
    if batched[0].size(0) <= rows:
        return function(*batched)
    outputs = [function(*piece) for piece in zip(*(tensor.split(rows) for tensor in batched))]
    if isinstance(outputs[0], torch.Tensor):
        return torch.cat(outputs)
    return tuple(torch.cat(parts) for parts in zip(*outputs))


def identity(num_tags: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """The `(K, K)` identity of both semirings, made once per size, dtype and device."""
    key = (num_tags, dtype, device)
    if key not in _IDENTITIES:
        with torch.inference_mode(False), torch.no_grad():
            eye = torch.eye(num_tags, dtype=torch.bool, device=device)
            _IDENTITIES[key] = torch.zeros((), dtype=dtype, device=device).masked_fill(~eye, PADDING_SCORE)
    return _IDENTITIES[key]


def chain_matrices(
    transitions: torch.Tensor, first: torch.Tensor, logits: torch.Tensor, mask: torch.BoolTensor, length: int
) -> torch.Tensor:
    """
    `(batch_size, length, K, K)`: the chain as `length >= T` matrices, `[F, M_1, ..., M_{T-1}]` then
    identities: every row of `F` is the first step's scores `first + logits[:, 0]` (`first` `(K,)`:
    the start scores or zeros), so that row 0 of the product of the first `t + 1` is alpha_t.  A
    padded step, and every step past `T`, is the identity.
    """
    num_steps, num_tags = logits.size(1), logits.size(2)
    if length > num_steps:
        logits = torch.nn.functional.pad(logits, (0, 0, 0, length - num_steps))
        mask = torch.nn.functional.pad(mask, (0, length - num_steps))
    # (length, K, K): the first step's scores in every row, then the transitions.
    steps = torch.cat([first.expand(1, num_tags, num_tags), transitions.expand(length - 1, num_tags, num_tags)])
    matrices = steps + logits.unsqueeze(2)
    return torch.where(mask.view(*mask.shape, 1, 1), matrices, identity(num_tags, logits.dtype, logits.device))


def log_product(left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
    """The log-semiring product of `(..., K, K)` matrices."""
    return (left.unsqueeze(-1) + right.unsqueeze(-3)).logsumexp(dim=-2)


def max_product(left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
    """The max-semiring product of `(..., K, K)` matrices."""
    return (left.unsqueeze(-1) + right.unsqueeze(-3)).amax(dim=-2)


def rescaled_log_product(left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
    """
    The log-semiring product of `(..., K, K)` matrices as a matrix product of probabilities: with
    `a_i` the largest entry of row `i` of `left` and `b_k` of column `k` of `right`,

        a_i + b_k + log sum_j exp(left[i, j] - a_i) exp(right[j, k] - b_k)

    a `(..., K, K)` product where `log_product` reduces a `(..., K, K, K)` sum: `K` times less memory
    and traffic.  Exact but for an entry whose every term falls below the dtype's range (in float64
    over 708 nats under `a_i + b_k`, 87 in float32), which is clamped there.
    """
    row_top = left.amax(dim=-1, keepdim=True)
    column_top = right.amax(dim=-2, keepdim=True)
    product = torch.matmul((left - row_top).exp(), (right - column_top).exp())
    return product.clamp_min(torch.finfo(product.dtype).tiny).log() + row_top + column_top


# The sum over the middle index that makes each product, by semiring (what the scans take as
# `product`); a product without one is called on the two matrices of each pair.
_REDUCTIONS = {log_product: torch.logsumexp, max_product: torch.amax}


def pair_sums(matrices: torch.Tensor, shift: int, spacing: int = 1) -> torch.Tensor:
    """
    `(batch_size, m, K, K, K)`: `matrices[:, spacing * s, i, j] + matrices[:, spacing * s + shift, j, k]`
    for every `s` where both exist, whose reduction over `j` is the semiring product of each pair:
    with `spacing` 1 the scans' shifted pairs, with `shift` 1 and `spacing` 2 consecutive pairs.  From
    two strided views of `matrices` (one operator call each, where slicing and unsqueezing take
    four); `matrices` is `(batch_size, n, K, K)`, or `(batch_size, n, K, 1, K)` as a reduction with
    `keepdim` leaves it.
    """
    batch_size, count, num_tags = matrices.shape[:3]
    batch_stride, step_stride, row_stride, column_stride = (matrices.stride(dim) for dim in (0, 1, 2, -1))
    offset = matrices.storage_offset()
    size = (batch_size, (count - shift - 1) // spacing + 1, num_tags, num_tags, num_tags)
    step = spacing * step_stride
    left = matrices.as_strided(size, (batch_stride, step, row_stride, column_stride, 0), offset)
    right = matrices.as_strided(size, (batch_stride, step, 0, row_stride, column_stride), offset + shift * step_stride)
    return left + right


def prefix_products(matrices: torch.Tensor, product: Product) -> torch.Tensor:
    """`(batch_size, n, K, K)`: `M_1 (x) ... (x) M_t` for every `t` (Hillis & Steele's scan)."""
    shift, count = 1, matrices.size(1)
    while shift < count:
        matrices = torch.cat([matrices[:, :shift], _shifted_products(matrices, shift, product)], dim=1)
        shift *= 2
    return matrices


def suffix_products(matrices: torch.Tensor, product: Product) -> torch.Tensor:
    """`(batch_size, n, K, K)`: `M_t (x) ... (x) M_n` for every `t`."""
    shift, count = 1, matrices.size(1)
    while shift < count:
        matrices = torch.cat([_shifted_products(matrices, shift, product), matrices[:, count - shift :]], dim=1)
        shift *= 2
    return matrices


def _shifted_products(matrices: torch.Tensor, shift: int, product: Product) -> torch.Tensor:
    """`(batch_size, n - shift, K, K)`: `matrices[:, s] (x) matrices[:, s + shift]` for every `s`."""
    reduce = _REDUCTIONS.get(product)
    if reduce is None:
        return product(matrices[:, :-shift], matrices[:, shift:])
    return reduce(pair_sums(matrices, shift), -2)


def follow_backpointers(backpointers: torch.LongTensor) -> torch.LongTensor:
    """
    `(batch_size, n)`: the tags of steps `0 .. n - 1` that `backpointers` `(batch_size, n, K)` lead
    to, where `backpointers[:, t]` maps a tag at step `t + 1` to the best one at step `t` and the
    last map sends every tag to the best last tag (all its entries equal).  The maps are composed
    by a suffix scan (pointer jumping), so the walk back takes `ceil(log2 n)` rounds of gathers
    instead of `n`.
    """
    shift, count = 1, backpointers.size(1)
    while shift < count:
        # Map t composed with map t + shift; where t + shift runs past the end, map t already reaches
        # the last map and sends every tag to one, so the wrapped-around index changes nothing.
        backpointers = backpointers.gather(2, backpointers.roll(-shift, dims=1))
        shift *= 2
    return backpointers[:, :, 0]
