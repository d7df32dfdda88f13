"""
The fragments FOFE-NER classifies, and the ones it trains on: Xu (2017), "Fixed-size
Ordinally-Forgetting Encoding and Its Applications", MSc thesis, York University, §5.1 and
Algorithm 1.

Every fragment of up to `n` words is a candidate entity (§5.1).  Training (Algorithm 1) keeps
every fragment that matches a gold entity and a random share of the others: those that partially
overlap a gold entity and those disjoint from all of them, each at its own rate.

Spans are token offsets `[start, end)` (end exclusive), laid out per sentence by start, then
width: column `start * n + width - 1`.
"""

from typing import NamedTuple, Optional, Set, Tuple

import torch

from nerzoo.data.dataset_readers.entity_spans import UNKNOWN_ENTITY


class FlatSpans(NamedTuple):
    """
    Spans as one flat list over a batch: span `k` is `[starts[k], ends[k])` of sentence
    `batch[k]`, each `(num_spans,)`.
    """

    batch: torch.LongTensor
    starts: torch.LongTensor
    ends: torch.LongTensor

    @classmethod
    def where(cls, keep: torch.BoolTensor, starts: torch.LongTensor, ends: torch.LongTensor) -> "FlatSpans":
        """The spans `(batch, num_spans)` where `keep` is true, row by row (the order of `keep[keep]`)."""
        span_batch, column = keep.nonzero(as_tuple=True)
        return cls(span_batch, starts[span_batch, column], ends[span_batch, column])


def enumerate_spans(
    mask: torch.BoolTensor, max_width: int
) -> Tuple[torch.LongTensor, torch.LongTensor, torch.BoolTensor]:
    """
    Every span of 1 to `max_width` tokens (§5.1).

    # Parameters

    mask : `(batch_size, num_tokens)`, true at real tokens (a prefix of each row)
    max_width : `int`, `n`

    # Returns

    `starts`, `ends`, `span_mask`, each `(batch_size, num_tokens * max_width)`: span `(start, start
    + width)` at column `start * max_width + width - 1`, `span_mask` true where it lies inside its
    sentence (`ends` is clamped to `num_tokens` elsewhere).
    """
    batch_size, num_tokens = mask.shape
    positions = torch.arange(num_tokens, device=mask.device)
    widths = torch.arange(1, max_width + 1, device=mask.device)
    starts = positions.unsqueeze(1).expand(num_tokens, max_width).reshape(1, -1)
    ends = (positions.unsqueeze(1) + widths.unsqueeze(0)).reshape(1, -1)
    span_mask = ends <= mask.sum(1, keepdim=True)
    return starts.expand(batch_size, -1), ends.expand(batch_size, -1).clamp(max=num_tokens), span_mask


def gold_span_classes(
    entities: torch.LongTensor, starts: torch.LongTensor, ends: torch.LongTensor, span_mask: torch.BoolTensor
) -> torch.LongTensor:
    """
    The class of each span: 1 + the type id of the gold entity with the span's boundaries, else 0
    (NONE).

    # Parameters

    entities : `(batch_size, num_tokens, num_tokens)`
        Gold entity type ids at `[start, end - 1]`, -1 elsewhere (-2 where unknown).
    starts, ends, span_mask : `(batch_size, num_spans)`, as `enumerate_spans` gives them

    # Returns

    `(batch_size, num_spans)`, 0 where `span_mask` is false.
    """
    return (span_values(entities, starts, ends) + 1).clamp(min=0) * span_mask


def known_spans(entities: torch.LongTensor, starts: torch.LongTensor, ends: torch.LongTensor) -> torch.BoolTensor:
    """`(batch_size, num_spans)`: false at the spans a partial annotation leaves open (`UNKNOWN_ENTITY`)."""
    return span_values(entities, starts, ends) != UNKNOWN_ENTITY


def open_spans(entities: Optional[torch.LongTensor]) -> Set[Tuple[int, int, int]]:
    """`(row, start, end)` (end exclusive) of every span a partial annotation leaves open; none without `entities`."""
    if entities is None:
        return set()
    return {(row, start, last + 1) for row, start, last in (entities == UNKNOWN_ENTITY).nonzero().tolist()}


def span_values(entities: torch.LongTensor, starts: torch.LongTensor, ends: torch.LongTensor) -> torch.LongTensor:
    """`(batch_size, num_spans)`: each span's entry `[start, end - 1]` of `entities`."""
    index = starts * entities.size(1) + (ends - 1).clamp(min=0)
    return entities.reshape(entities.size(0), -1).gather(1, index)


def sample_spans(
    gold: torch.LongTensor,
    entities: torch.LongTensor,
    starts: torch.LongTensor,
    ends: torch.LongTensor,
    mask: torch.BoolTensor,
    overlap_rate: float,
    disjoint_rate: float,
) -> torch.BoolTensor:
    """
    Algorithm 1: keeps every span that matches a gold entity, each span that overlaps one without
    matching it with probability `overlap_rate`, and each span disjoint from all gold entities with
    probability `disjoint_rate` (one uniform draw per span).

    # Parameters

    gold : `(batch_size, num_spans)`, from `gold_span_classes`
    entities : `(batch_size, num_tokens, num_tokens)`, as for `gold_span_classes`
    starts, ends : `(batch_size, num_spans)`
    mask : `(batch_size, num_tokens)`
    overlap_rate, disjoint_rate : `float`, in [0, 1]

    # Returns

    `(batch_size, num_spans)`, true at the kept spans (padding spans included: combine with the
    span mask).
    """
    has_entity = entities >= 0
    opened = has_entity.sum(2)  # entities starting at each token
    closed = torch.nn.functional.pad(has_entity.sum(1), (1, 0))[:, :-1]  # entities ended before each token
    covered = (torch.cumsum(opened - closed, dim=1) > 0) & mask
    covered_prefix = torch.nn.functional.pad(torch.cumsum(covered.long(), dim=1), (1, 0))
    covered_in_span = covered_prefix.gather(1, ends) - covered_prefix.gather(1, starts)
    exact = gold > 0
    disjoint = covered_in_span == 0
    overlapping = ~exact & ~disjoint
    draw = torch.rand(gold.shape, device=gold.device)
    return exact | (overlapping & (draw < overlap_rate)) | (disjoint & (draw < disjoint_rate))


def row_prefix_mask(counts: torch.LongTensor) -> torch.BoolTensor:
    """`(batch, max(1, max(counts)))`: the first `counts[b]` entries of row `b` are true."""
    width = max(int(counts.max()), 1) if counts.numel() else 1
    return torch.arange(width, device=counts.device).unsqueeze(0) < counts.unsqueeze(1)


def scatter_rows(values: torch.Tensor, mask: torch.BoolTensor) -> torch.Tensor:
    """
    Flat per-span `values` `(mask.sum(), ...)` laid out row by row at the true entries of `mask`
    `(batch, width)`, zeros elsewhere: `(batch, width, ...)`.
    """
    padded = values.new_zeros(*mask.shape, *values.shape[1:])
    padded[mask] = values
    return padded
