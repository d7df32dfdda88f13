"""
Fixed-size Ordinally-Forgetting Encoding (FOFE): Mingbin Xu, "Fixed-size Ordinally-Forgetting
Encoding and Its Applications", MSc thesis, York University, 2017 (after Zhang et al., ACL 2015).
A sequence `x_1 .. x_T` (one-hot vectors or, by eq. 4.3, their embeddings) is encoded as (eq. 3.1)

    z_0 = 0,    z_t = alpha * z_{t-1} + x_t,    so  z_t = sum_{s <= t} alpha^(t - s) x_s:

a fixed-size code that forgets old positions exponentially, unique for one-hot sequences when
`0 < alpha <= 0.5` (§3.4.2, theorem 2), a bag of words when `alpha = 1`.  All codes of a sentence
are `S = M V` with `M[t, s] = alpha^(t - s)` (eq. 4.1), batched over sentences (eq. 4.2);
`fofe_codes` applies `M` block by block, with no `T x T` matrix and no negative power of alpha.

FOFE-NER (§5.2) reads the codes of every fragment `x_i .. x_{j-1}` and of its contexts from the
prefix codes `P[t]` (of `x_0 .. x_{t-1}`): the fragment's is `P[j] - alpha^(j - i) P[i]`
(`prefix_codes`, `span_codes`).

Shapes: `inputs` `(batch_size, num_steps, dim)`, `mask` `(batch_size, num_steps)`; positions are
0-based (the thesis counts from 1).
"""

from typing import Optional, Union

import torch

Alpha = Union[float, torch.Tensor]


def alpha_powers(alpha: Alpha, exponents: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """
    `alpha ** exponents` in `dtype`, on the device of `exponents` (non-negative integers, any
    shape).  A Python float is raised in float64 and rounded once; a tensor alpha keeps its graph.
    """
    if isinstance(alpha, torch.Tensor):
        working = torch.promote_types(alpha.dtype, dtype)
        base = alpha.to(device=exponents.device, dtype=working)
        return (base ** exponents.to(working)).to(dtype)
    return torch.pow(float(alpha), exponents.to(torch.float64)).to(dtype)


def fofe_matrix(
    length: int,
    alpha: Alpha,
    reverse: bool = False,
    dtype: torch.dtype = torch.float32,
    device: Optional[Union[torch.device, str]] = None,
) -> torch.Tensor:
    """
    The matrix `M` of eq. 4.1, `(length, length)`: `M[t, s] = alpha^(t - s)` for `s <= t` and 0
    above the diagonal, so that row `t` of `M @ V` is the code of `x_0 .. x_t`.  With `reverse`
    it is the transpose, `M[t, s] = alpha^(s - t)` for `s >= t`: row `t` of `M @ V` is the
    right-to-left code of `x_t .. x_{length-1}`.

    # Parameters

    length : `int`, required
        The number of positions `T`.
    alpha : `float` or 0-d `torch.Tensor`, required
        The forgetting factor; gradients flow to a tensor.
    reverse : `bool`, optional (default = `False`)
        Right to left instead of left to right.
    dtype : `torch.dtype`, optional (default = `torch.float32`)
    device : optional (default = the CPU, or alpha's device for a tensor alpha)
    """
    if device is None:
        device = alpha.device if isinstance(alpha, torch.Tensor) else torch.device("cpu")
    positions = torch.arange(length, device=device)
    distance = positions.unsqueeze(1) - positions.unsqueeze(0)  # t - s
    if reverse:
        distance = -distance
    # No negative power is formed: it could overflow, and its gradient would turn masked zeros into NaN.
    return alpha_powers(alpha, distance.clamp(min=0), dtype) * (distance >= 0).to(dtype)


def _left_to_right(inputs: torch.Tensor, alpha: Alpha, block_size: int) -> torch.Tensor:
    """
    Codes of every prefix, `(batch_size, num_steps, dim)`, of inputs zero where masked.  Within
    each block of `K = block_size` positions one product with `fofe_matrix(K)` gives the codes as if
    the block started the sequence; the full codes at the block ends obey the same recursion with
    factor `alpha^K` (`c_b = alpha^K c_{b-1} + l_b`, `l_b` the last in-block code of block `b`), so
    this function computes them one level up, and `alpha^(k+1) c_{b-1}` is added to in-block
    position `k` of block `b`.  Each level divides the length by `K`; no power of alpha is negative.
    """
    batch_size, num_steps, dim = inputs.shape
    if num_steps <= block_size:
        matrix = fofe_matrix(num_steps, alpha, dtype=inputs.dtype, device=inputs.device)
        return torch.matmul(matrix, inputs)
    num_blocks = (num_steps + block_size - 1) // block_size  # no negative floor division: ONNX truncates it
    padded = torch.nn.functional.pad(inputs, (0, 0, 0, num_blocks * block_size - num_steps))
    blocks = padded.view(batch_size, num_blocks, block_size, dim)
    matrix = fofe_matrix(block_size, alpha, dtype=inputs.dtype, device=inputs.device)
    # (batch_size, num_blocks, block_size, dim): codes restarted at every block.
    local = torch.matmul(matrix, blocks)
    block_alpha = alpha**block_size
    # (batch_size, num_blocks, dim): the full code at the end of every block.
    block_ends = _left_to_right(local[:, :, -1], block_alpha, block_size)
    carried = torch.nn.functional.pad(block_ends[:, :-1], (0, 0, 1, 0))  # into block b: end of b - 1
    offsets = torch.arange(1, block_size + 1, device=inputs.device)
    decay = alpha_powers(alpha, offsets, inputs.dtype)  # alpha^(k+1) for in-block position k
    codes = local + decay.view(1, 1, block_size, 1) * carried.unsqueeze(2)
    return codes.reshape(batch_size, num_blocks * block_size, dim)[:, :num_steps]


def fofe_codes(
    inputs: torch.Tensor,
    mask: Optional[torch.BoolTensor],
    alpha: Alpha,
    reverse: bool = False,
    block_size: int = 64,
) -> torch.Tensor:
    """
    The FOFE code at every position (eq. 3.1), computed as the batched products of eq. 4.1-4.2,
    block by block (see `_left_to_right`): `(batch_size, num_steps, dim)` with

        left to right:  out[:, t] = sum_{s <= t} alpha^(t - s) x_s
        right to left:  out[:, t] = sum_{s >= t} alpha^(s - t) x_s

    Masked positions count as zero vectors in the sums (they still advance the forgetting), and
    their outputs are 0.  With one-hot `inputs` these are the thesis' codes; with embeddings they
    are the projected codes `M (V U)` of eq. 4.3.

    # Parameters

    inputs : `torch.Tensor`, required
        `(batch_size, num_steps, dim)`.
    mask : `torch.BoolTensor`, optional
        `(batch_size, num_steps)`, true at real positions; `None` means no padding.
    alpha : `float` or 0-d `torch.Tensor`, required
        The forgetting factor; a tensor may require grad.  `alpha = 1` gives running sums.
    reverse : `bool`, optional (default = `False`)
        Right to left.
    block_size : `int`, optional (default = `64`)
        Positions per block (at least 2); `fofe_matrix(block_size)` is the largest matrix formed.
    """
    codes = prefix_codes(inputs, mask, alpha, reverse, block_size)
    codes = codes[:, :-1] if reverse else codes[:, 1:]
    return codes if mask is None else codes * mask.unsqueeze(-1).to(codes.dtype)


def prefix_codes(
    inputs: torch.Tensor,
    mask: Optional[torch.BoolTensor],
    alpha: Alpha,
    reverse: bool = False,
    block_size: int = 64,
) -> torch.Tensor:
    """
    The codes of every prefix (left to right) or suffix (right to left), with an empty code at
    the open end: `(batch_size, num_steps + 1, dim)`.

        left to right:  P[:, 0] = 0,  P[:, t] = code of x_0 .. x_{t-1} = sum_{s < t} alpha^(t-1-s) x_s
        right to left:  Q[:, t] = code of x_t .. x_{T-1} = sum_{s >= t} alpha^(s - t) x_s,  Q[:, T] = 0

    In FOFE-NER (§5.2.1) the left context of a fragment `x_i .. x_{j-1}` is `P[j]` including the
    fragment and `P[i]` excluding it; the right context is `Q[i]` including it and `Q[j]`
    excluding it.  Masked positions count as zero vectors; unlike `fofe_codes` the codes after a
    masked position are not zeroed, so `span_codes` stays right for any mask.  The parameters are
    `fofe_codes`'.
    """
    if block_size < 2:
        raise ValueError(f"block_size must be at least 2, got {block_size}")
    if mask is not None:
        inputs = inputs * mask.unsqueeze(-1).to(inputs.dtype)
    if reverse:
        return torch.nn.functional.pad(_left_to_right(inputs.flip(1), alpha, block_size).flip(1), (0, 0, 0, 1))
    return torch.nn.functional.pad(_left_to_right(inputs, alpha, block_size), (0, 0, 1, 0))


def span_codes(
    prefix: torch.Tensor,
    starts: torch.LongTensor,
    ends: torch.LongTensor,
    alpha: Alpha,
    reverse: bool = False,
    span_batch: Optional[torch.LongTensor] = None,
) -> torch.Tensor:
    """
    The codes of the spans `x_start .. x_{end-1}` (`ends` exclusive) in prefix form, from the
    output of `prefix_codes` with the same `alpha` and direction, `(batch_size, num_spans, dim)`:

        left to right:  P[end] - alpha^(end - start) * P[start]
        right to left:  Q[start] - alpha^(end - start) * Q[end]

    i.e. `sum_{s} alpha^(end-1-s) x_s` and `sum_{s} alpha^(s-start) x_s` over the span.  Only
    gathers and one product per span; empty spans (`start == end`) give 0.

    # Parameters

    prefix : `torch.Tensor`, required
        `(batch_size, num_steps + 1, dim)` from `prefix_codes`.
    starts : `torch.LongTensor`, required
        `(batch_size, num_spans)`, first position of each span.
    ends : `torch.LongTensor`, required
        `(batch_size, num_spans)`, one past the last position; `starts <= ends <= num_steps`.
    alpha : `float` or 0-d `torch.Tensor`, required
    reverse : `bool`, optional (default = `False`)
    span_batch : `torch.LongTensor`, optional
        `(num_spans,)`: the spans are one flat list, span `k` of sentence `span_batch[k]`, and
        `starts`, `ends` and the result have no batch dimension.
    """
    batch_size, num_positions, dim = prefix.shape
    rows = prefix.reshape(batch_size * num_positions, dim)
    if span_batch is None:
        row_offsets = torch.arange(batch_size, device=prefix.device).unsqueeze(1) * num_positions
    else:
        row_offsets = span_batch * num_positions

    def gather(positions: torch.LongTensor) -> torch.Tensor:
        flat = (positions + row_offsets).reshape(-1)
        return rows.index_select(0, flat).view(*positions.shape, dim)

    decay = alpha_powers(alpha, ends - starts, prefix.dtype).unsqueeze(-1)
    near, far = (starts, ends) if reverse else (ends, starts)
    return gather(near) - decay * gather(far)
