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

A round holds a `(batch_size, T, K, K, K)` tensor; callers use the step-by-step recursion when that
exceeds `MAX_SCAN_ELEMENTS` (`fits`).

Shapes: `transitions` `(K, K)`, `logits` `(batch_size, T, K)`, `mask` `(batch_size, T)` with each
row's valid steps first; `matrices` `(batch_size, n, K, K)`.
"""

from typing import Callable, Dict, Tuple

import torch

# Off-diagonal score of a padded step's identity: exp() of it is 0 in float32 and float64, and sums
# of a few of them stay finite (an infinite score would give NaN gradients through logsumexp).
PADDING_SCORE = -1e30
# The largest `(batch_size, T, K, K, K)` round the scans take (128 MiB of float32).
MAX_SCAN_ELEMENTS = 2**25

Product = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
_IDENTITIES: Dict[Tuple[int, torch.dtype, torch.device], torch.Tensor] = {}


def fits(batch_size: int, num_steps: int, num_tags: int, dtype: torch.dtype = torch.float32) -> bool:
    """Whether the scans of a batch of this shape stay within `MAX_SCAN_ELEMENTS` (of float32; half as many of float64)."""
    scale = 2 if dtype == torch.float64 else 1
    return batch_size * max(num_steps - 1, 1) * num_tags**3 * scale <= MAX_SCAN_ELEMENTS


def identity(num_tags: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """The `(K, K)` identity of both semirings, made once per size, dtype and device."""
    key = (num_tags, dtype, device)
    if key not in _IDENTITIES:
        with torch.inference_mode(False), torch.no_grad():
            eye = torch.eye(num_tags, dtype=torch.bool, device=device)
            _IDENTITIES[key] = torch.zeros((), dtype=dtype, device=device).masked_fill(~eye, PADDING_SCORE)
    return _IDENTITIES[key]


def transfer_matrices(transitions: torch.Tensor, logits: torch.Tensor, mask: torch.BoolTensor) -> torch.Tensor:
    """`(batch_size, T - 1, K, K)`: `M_t` of steps `1 .. T - 1`, the identity where step `t` is padding."""
    matrices = transitions + logits[:, 1:].unsqueeze(2)
    return torch.where(mask[:, 1:, None, None], matrices, identity(logits.size(-1), logits.dtype, logits.device))


def log_product(left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
    """The log-semiring product of `(..., K, K)` matrices."""
    return (left.unsqueeze(-1) + right.unsqueeze(-3)).logsumexp(dim=-2)


def max_product(left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
    """The max-semiring product of `(..., K, K)` matrices."""
    return (left.unsqueeze(-1) + right.unsqueeze(-3)).amax(dim=-2)


def log_chain_product(matrices: torch.Tensor) -> torch.Tensor:
    """`(batch_size, K, K)`: `M_1 (x) ... (x) M_n` in the log semiring, by pairwise rounds; `n >= 1`."""
    while matrices.size(1) > 1:
        count = matrices.size(1)
        pairs = (matrices if count % 2 == 0 else matrices[:, : count - 1]).unflatten(1, (count // 2, 2))
        product = log_product(*pairs.unbind(2))
        matrices = product if count % 2 == 0 else torch.cat([product, matrices[:, count - 1 :]], dim=1)
    return matrices[:, 0]


def prefix_products(matrices: torch.Tensor, product: Product) -> torch.Tensor:
    """`(batch_size, n, K, K)`: `M_1 (x) ... (x) M_t` for every `t` (Hillis & Steele's scan)."""
    shift, count = 1, matrices.size(1)
    while shift < count:
        combined = product(matrices[:, :-shift], matrices[:, shift:])
        matrices = torch.cat([matrices[:, :shift], combined], dim=1)
        shift *= 2
    return matrices


def suffix_products(matrices: torch.Tensor, product: Product) -> torch.Tensor:
    """`(batch_size, n, K, K)`: `M_t (x) ... (x) M_n` for every `t`."""
    shift, count = 1, matrices.size(1)
    while shift < count:
        combined = product(matrices[:, :-shift], matrices[:, shift:])
        matrices = torch.cat([combined, matrices[:, count - shift :]], dim=1)
        shift *= 2
    return matrices


def follow_backpointers(backpointers: torch.LongTensor, last: torch.LongTensor) -> torch.LongTensor:
    """
    `(batch_size, n)`: the tags of steps `0 .. n - 1` that `backpointers` `(batch_size, n, K)` lead
    back to from `last` `(batch_size,)` at step `n`, where `backpointers[:, t]` maps a tag at step
    `t + 1` to the best one at step `t`.  The maps are composed by a suffix scan (pointer jumping),
    so the walk back takes `ceil(log2 n)` rounds of gathers instead of `n`.
    """
    shift, count = 1, backpointers.size(1)
    while shift < count:
        composed = backpointers[:, :-shift].gather(2, backpointers[:, shift:])
        backpointers = torch.cat([composed, backpointers[:, count - shift :]], dim=1)
        shift *= 2
    return backpointers.gather(2, last.view(-1, 1, 1).expand(-1, count, 1)).squeeze(2)
