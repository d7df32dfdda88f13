"""
FOFE-NER's span probabilities as candidate entities, and decoded spans as BIO tags: Xu (2017),
"Fixed-size Ordinally-Forgetting Encoding and Its Applications", MSc thesis, York University,
§5.3 (Algorithms 2-5, `nerzoo_runtime.span_decoding`, decode the candidates; the tags are the
output every nerzoo tagger gives, without the nested spans).
"""

from dataclasses import replace
from typing import List, Optional, Sequence, Tuple

import torch
from nerzoo_runtime.span_decoding import ScoredSpan, outermost_tags


def candidate_spans(
    probabilities: torch.Tensor,
    starts: torch.LongTensor,
    ends: torch.LongTensor,
    span_mask: torch.BoolTensor,
    entity_types: Sequence[str],
    threshold: float,
    confidences: Optional[torch.Tensor] = None,
) -> List[List[ScoredSpan]]:
    """
    Per sentence, the spans whose best class is not NONE, with probability at least `threshold`:
    label the class's entity type, `score` its probability, `confidence` its entry of `confidences`.

    # Parameters

    probabilities : `(batch, num_spans, num_classes)`, class 0 is NONE, class `k` `entity_types[k - 1]`
    starts, ends, span_mask : `(batch, num_spans)`
    confidences : `(batch, num_spans, num_classes)`, optional
    """
    scores, classes = probabilities.detach().max(dim=-1)
    candidates = span_mask & (classes > 0) & (scores >= threshold)
    batch_index, span_index = candidates.nonzero(as_tuple=True)
    chosen = classes[batch_index, span_index]
    reported = (
        scores[batch_index, span_index]
        if confidences is None
        else confidences.detach()[batch_index, span_index].gather(1, chosen.unsqueeze(1)).squeeze(1)
    )
    rows = zip(
        batch_index.tolist(),
        starts[batch_index, span_index].tolist(),
        ends[batch_index, span_index].tolist(),
        chosen.tolist(),
        scores[batch_index, span_index].tolist(),
        reported.tolist(),
    )
    per_sentence: List[List[ScoredSpan]] = [[] for _ in range(probabilities.size(0))]
    for sentence, start, end, label, score, confidence in rows:
        per_sentence[sentence].append(ScoredSpan(start, end, entity_types[label - 1], score, confidence))
    return per_sentence


def confidence_as_score(span: ScoredSpan) -> ScoredSpan:
    """The span with its `confidence` (if it has one) as its `score`."""
    return span if span.confidence is None else replace(span, score=span.confidence)


def spans_to_tags(
    decoded: Sequence[Sequence[Tuple[ScoredSpan, int]]],
    lengths: Sequence[int],
    starts: torch.LongTensor,
    ends: torch.LongTensor,
    span_mask: torch.BoolTensor,
    none_probabilities: torch.Tensor,
) -> Tuple[List[List[str]], List[List[float]]]:
    """
    Per sentence, the BIO tags of its outermost (level-1) decoded spans and each tag's confidence:
    inside a span the span's `score` (its confidence, `confidence_as_score`), for an `O` the smallest NONE probability of the scored spans
    that cover its word (1 if none does).

    # Parameters

    decoded : per sentence, `(span, nesting level)` pairs
    lengths : the sentences' lengths
    starts, ends, span_mask : `(batch, num_spans)`, the scored spans
    none_probabilities : `(batch, num_spans)`, each scored span's probability of NONE
    """
    positions = torch.arange(max(lengths, default=0), device=starts.device)
    covers = (starts.unsqueeze(-1) <= positions) & (positions < ends.unsqueeze(-1)) & span_mask.unsqueeze(-1)
    none_probabilities = none_probabilities.detach().unsqueeze(-1)
    outside = torch.where(covers, none_probabilities, torch.ones_like(none_probabilities)).min(dim=1).values
    tagged = [outermost_tags(spans, row[:length]) for length, spans, row in zip(lengths, decoded, outside.tolist())]
    return [tags for tags, _ in tagged], [confidences for _, confidences in tagged]
