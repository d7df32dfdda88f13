"""
`highest_first_mask`: the batched tensor form of FOFE-NER's *highest-first* decoding
(`nerzoo_runtime.span_decoding.highest_first`, Algorithm 4 of Mingbin Xu, "Fixed-size
Ordinally-Forgetting Encoding and Its Applications", MSc thesis, York University, 2017, §5.3),
used to re-decode the second pass (§5.4).  The decoders over lists of spans live in
`nerzoo_runtime.span_decoding`.
"""

import torch


def highest_first_mask(
    scores: torch.Tensor,
    starts: torch.LongTensor,
    ends: torch.LongTensor,
    candidate_mask: torch.BoolTensor,
    sequence_length: int,
) -> torch.BoolTensor:
    """
    Batched *highest-first* (Algorithm 4 of Xu, 2017, §5.3) without merging: which candidates
    survive, with the same tie-breaking as `highest_first` (the position along `num_spans` playing
    the input position).  No Python loop over spans.

    Every candidate gets its rank in the preference order within its sentence; each word takes
    the highest rank among the candidates covering it; a candidate survives if and only if no
    word it covers has a higher one.  Memory is `O(batch_size * num_spans * sequence_length)`.

    # Parameters

    scores : `torch.Tensor`
        The candidates' scores, shape `(batch_size, num_spans)`.
    starts : `torch.LongTensor`
        Start offsets, shape `(batch_size, num_spans)`.
    ends : `torch.LongTensor`
        Exclusive end offsets, shape `(batch_size, num_spans)`, at most `sequence_length`.
    candidate_mask : `torch.BoolTensor`
        Which entries are candidates at all, shape `(batch_size, num_spans)`.  The others neither
        survive nor remove anything.  Empty spans (`end <= start`) never survive.
    sequence_length : `int`
        The number of word positions, at least the largest end.

    # Returns

    `torch.BoolTensor`
        The survivors, shape `(batch_size, num_spans)`.
    """
    batch_size, num_spans = scores.shape
    device = scores.device
    lengths = ends - starts
    # Stable sorts from the least to the most significant key leave `order` ascending in preference.
    order = torch.arange(num_spans - 1, -1, -1, device=device).expand(batch_size, num_spans)
    for key in (-starts, lengths, scores):
        resorted = key.gather(1, order).sort(dim=1, stable=True).indices
        order = order.gather(1, resorted)
    ranks = torch.empty_like(order).scatter_(
        1, order, torch.arange(num_spans, device=device).expand(batch_size, num_spans)
    )

    words = torch.arange(sequence_length, device=device)
    # (batch_size, num_spans, sequence_length): candidate covers word.
    covers = (starts.unsqueeze(-1) <= words) & (words < ends.unsqueeze(-1)) & candidate_mask.bool().unsqueeze(-1)
    best_rank_at_word = ranks.unsqueeze(-1).masked_fill(~covers, -1).amax(dim=1)  # (batch_size, sequence_length)
    best_rank_over_span = best_rank_at_word.unsqueeze(1).masked_fill(~covers, -1).amax(dim=2)
    return best_rank_over_span == ranks
