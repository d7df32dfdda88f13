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
    The pass computes one row per token of `tokens`, deepest level first: level `l` is the next
    `sizes[l]` rows.  A row's head is a row of the next level.
    """

    tokens: torch.Tensor  # (num_rows,): the flat position of each row's token
    head_rows: torch.Tensor  # (num_rows,): the row of its head (anything for a root)
    # (num_rows,): its head's place within the next level, or the next level's size (a row that
    # is dropped) for a root.
    head_slots: torch.Tensor
    sizes: List[int]  # rows per level


def tree_levels(mask: torch.BoolTensor, head_indices: torch.LongTensor) -> TreeLevels:
    """
    The levels of a batch: `1 + max depth` levels of its real tokens.  Computed on the CPU (the
    loop's sizes are needed there anyway), the indices then sent to `mask`'s device.  Raises a `ValueError` for heads out of range, pointing at
    masked tokens, or forming a cycle.
    """
    device = mask.device
    mask, head_indices = mask.bool().cpu(), head_indices.long().cpu()
    batch_size, num_tokens = mask.shape
    depth, parents = _depths(mask, head_indices)
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
    slot = row - (torch.cumsum(counts, 0) - counts)[level]  # (num_positions,): place within its level
    heads = (parents + torch.arange(batch_size).unsqueeze(1) * num_tokens).flatten()[tokens]
    is_root = (head_indices.flatten() == 0)[tokens]
    next_sizes = torch.tensor(sizes[1:] + [0])
    head_slots = torch.where(is_root, next_sizes[level[tokens]], slot[heads])
    tokens, head_rows, head_slots = (tensor.to(device) for tensor in (tokens, row[heads], head_slots))
    return TreeLevels(tokens, head_rows, head_slots, sizes)


def _depths(mask: torch.BoolTensor, head_indices: torch.LongTensor) -> Tuple[torch.LongTensor, torch.LongTensor]:
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
    bad = mask & ((head_indices < 0) | (head_indices > num_tokens))
    if (bad | (has_head & ~mask.gather(1, parents))).any():
        raise ValueError("head_indices point outside the sentence or at masked positions.")
    depth, ancestor = has_head.long(), parents
    for _ in range(max(num_tokens - 1, 1).bit_length()):  # a path has at most num_tokens - 1 edges
        depth = depth + depth.gather(1, ancestor)
        ancestor = ancestor.gather(1, ancestor)
    if (mask & has_head.gather(1, ancestor)).any():  # a token on or under a cycle
        raise ValueError("head_indices contain a cycle.")
    return depth, parents
