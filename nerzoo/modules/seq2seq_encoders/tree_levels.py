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
    parents, has_head = tree_parents(mask, head_indices)
    parents = parents.clamp(0, max(num_tokens - 1, 0))
    bad = mask & ((head_indices < 0) | (head_indices > num_tokens))
    if (bad | (has_head & ~mask.gather(1, parents))).any():
        raise ValueError("head_indices point outside the sentence or at masked positions.")
    depth = tree_depths(parents, has_head)
    if (mask & (depth >= num_tokens)).any():  # a token on or under a cycle
        raise ValueError("head_indices contain a cycle.")
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


def tree_parents(mask: torch.BoolTensor, head_indices: torch.LongTensor) -> Tuple[torch.LongTensor, torch.BoolTensor]:
    """`(parents, has_head)`: each token's head as a 0-based position (a root's or masked token's own),
    and whether it is a real token with a head, `(batch_size, num_tokens)` each; not checked."""
    positions = torch.arange(head_indices.size(1), device=head_indices.device)
    has_head = mask & (head_indices > 0)
    return torch.where(has_head, head_indices - 1, positions), has_head


@torch.jit.script_if_tracing
def tree_depths(parents: torch.Tensor, has_head: torch.Tensor) -> torch.Tensor:
    """
    Each token's distance to its root `(batch_size, num_tokens)`, from `tree_parents`, by pointer
    jumping: after round `r` each token's `ancestor` is its `2^r`-th (or its root) and `depth` counts
    the edges in between, until `2^r >= num_tokens`.  So a token on or under a cycle gets a depth
    of `num_tokens` or more, and a trace runs the rounds as a loop over any length.
    """
    depth, ancestor, reach = has_head.long(), parents, 1
    while reach < parents.size(1):
        depth = depth + depth.gather(1, ancestor)
        ancestor = ancestor.gather(1, ancestor)
        reach = reach * 2
    return depth
