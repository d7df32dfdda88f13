"""
The level schedule of a Tree-LSTM over a batch of dependency trees: the tokens of one depth are
computed together, the deepest first, so every token comes one level after its children.

The batch is flattened to `num_positions = batch_size * num_tokens` positions `b * num_tokens + t`.
`mask` and `head_indices` are `(batch_size, num_tokens)`; `head_indices` holds the 1-based position
of each token's head within its sentence, `0` for a root.
"""

from typing import List, NamedTuple, Tuple

import torch


class TreeLevels(NamedTuple):
    """
    The pass computes `num_rows` rows, one per token of `tokens`; its levels are `sizes[l]` slots
    each, stored one level after the other (`num_slots = sum(sizes)`), deepest first.  A slot holds
    a token, or is empty (only in `fixed_depth_levels`): an empty slot computes something that goes
    nowhere.
    """

    tokens: torch.Tensor  # (num_rows,): the flat position of each row's token
    rows: torch.Tensor  # (num_slots,): the row whose input the slot reads
    outputs: torch.Tensor  # (num_slots,): the row its state goes to, num_rows (dropped) for an empty slot
    head_rows: torch.Tensor  # (num_slots,): the row of its head (anything for a root or an empty slot)
    # (num_slots,): its head's slot within the next level, or the next level's size (a row that is
    # dropped) for a root or an empty slot.
    head_slots: torch.Tensor
    sizes: List[int]  # slots per level


def tree_levels(mask: torch.BoolTensor, head_indices: torch.LongTensor) -> TreeLevels:
    """
    The exact levels of a batch: `1 + max depth` levels of the real tokens, one row and one slot
    each, in the same order.  Computed on the CPU (the loop's sizes are needed there anyway), the
    indices then sent to `mask`'s device.  Raises a `ValueError` for heads out of range, pointing at
    masked tokens, or forming a cycle.
    """
    device = mask.device
    mask, head_indices = mask.bool().cpu(), head_indices.long().cpu()
    batch_size, num_tokens = mask.shape
    depth, parents = _depths(mask, head_indices, check=True)
    num_levels = int(depth[mask].max()) + 1 if mask.any() else 1
    # Level of every position, deepest first; masked positions go to a last level that is cut off.
    level = torch.where(mask, num_levels - 1 - depth, num_levels).flatten()
    order = torch.argsort(level, stable=True)
    counts = torch.bincount(level, minlength=num_levels + 1)
    sizes = counts[:num_levels].tolist()
    num_rows = sum(sizes)
    tokens = order[:num_rows]

    row = torch.empty_like(order)
    row[order] = torch.arange(order.numel())  # (num_positions,): row of each position (masked ones past num_rows)
    slot = row - (torch.cumsum(counts, 0) - counts)[level]  # (num_positions,): slot within its level
    heads = (parents + torch.arange(batch_size).unsqueeze(1) * num_tokens).flatten()[tokens]
    is_root = (head_indices.flatten() == 0)[tokens]
    next_sizes = torch.tensor(sizes[1:] + [0])
    head_slots = torch.where(is_root, next_sizes[level[tokens]], slot[heads])
    rows = torch.arange(num_rows)
    tokens, rows, head_rows, head_slots = (tensor.to(device) for tensor in (tokens, rows, row[heads], head_slots))
    return TreeLevels(tokens, rows, rows, head_rows, head_slots, sizes)


def fixed_depth_levels(mask: torch.BoolTensor, head_indices: torch.LongTensor, num_levels: int) -> TreeLevels:
    """
    A row for every position, and `num_levels` levels of a slot for every row: slot `p` of the
    level of depth `d` holds position `p` where its token has depth `d` and is empty elsewhere.
    Shapes that do not depend on the trees, and nothing read back from the device, so a CUDA graph
    can hold the pass.  Tokens at depth `num_levels` or deeper get no state (zero); the heads are
    not checked.
    """
    batch_size, num_tokens = mask.shape
    num_positions = batch_size * num_tokens
    mask = mask.bool()
    depth, parents = _depths(mask, head_indices, check=False)
    flat = torch.arange(num_positions, device=mask.device)
    heads = (parents + torch.arange(batch_size, device=mask.device).unsqueeze(1) * num_tokens).flatten()
    level_depths = torch.arange(num_levels - 1, -1, -1, device=mask.device).unsqueeze(1)
    here = mask.flatten() & (depth.flatten() == level_depths)  # (num_levels, num_positions)
    has_head = (head_indices > 0).flatten()
    return TreeLevels(
        tokens=flat,
        rows=flat.repeat(num_levels),
        outputs=torch.where(here, flat, num_positions).flatten(),
        head_rows=heads.repeat(num_levels),
        head_slots=torch.where(here & has_head, heads, num_positions).flatten(),
        sizes=[num_positions] * num_levels,
    )


def _depths(
    mask: torch.BoolTensor, head_indices: torch.LongTensor, check: bool
) -> Tuple[torch.LongTensor, torch.LongTensor]:
    """
    `(depth, parents)`, both `(batch_size, num_tokens)`: each token's distance to its root, and its
    head's 0-based position (a root's or masked token's own).  Depths by pointer jumping: after
    round `r` each token's `ancestor` is its `2^r`-th (or its root) and `depth` counts the edges in
    between.
    """
    num_tokens = mask.size(1)
    positions = torch.arange(num_tokens, device=mask.device)
    has_head = mask & (head_indices > 0)
    parents = torch.where(has_head, head_indices - 1, positions).clamp(0, max(num_tokens - 1, 0))
    if check:
        bad = mask & ((head_indices < 0) | (head_indices > num_tokens))
        if (bad | (has_head & ~mask.gather(1, parents))).any():
            raise ValueError("head_indices point outside the sentence or at masked positions.")
    depth, ancestor = has_head.long(), parents
    for _ in range(max(num_tokens - 1, 1).bit_length()):  # a path has at most num_tokens - 1 edges
        depth = depth + depth.gather(1, ancestor)
        ancestor = ancestor.gather(1, ancestor)
    if check and (mask & has_head.gather(1, ancestor)).any():  # a token on or under a cycle
        raise ValueError("head_indices contain a cycle.")
    return depth, parents
