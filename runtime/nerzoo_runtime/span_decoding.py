"""
FOFE-NER's span decoding in numpy: the span scores of an exported `fofe_ner` graph to nested entities
and BIO tags, as the model decodes them at prediction time.  The decoders are those of Mingbin Xu,
"Fixed-size Ordinally-Forgetting Encoding and Its Applications", MSc thesis, York University, 2017,
§5.3 (Algorithms 2-5): *highest-first*, *longest-first*, the merging of adjacent entities of one type
and the nested recursion.

Every span of up to `max_span_width` words is scored.  A span whose most probable class is not NONE
and whose probability passes the smallest threshold is a candidate; each nesting level keeps the
candidates that pass its own threshold and makes them non-overlapping.  Spans are token offsets
`[start, end)`.  When two candidates compete, the preferred one has the higher probability, then is
longer, then starts earlier, then comes earlier among the candidates (ordered by start, then width).
"""

from fractions import Fraction
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy

Span = Tuple[str, int, int, float, int]  # label, start, end (exclusive), score, nesting level


class Candidate(NamedTuple):
    start: int
    end: int
    label: str
    score: float  # the probability of `label`: decoding ranks and prunes by it
    confidence: float  # the same at the model's temperature: what a span reports


def softmax(logits: numpy.ndarray) -> numpy.ndarray:
    """
    Softmax over the last axis in float32, in torch's order of operations on a CPU (exponentials
    rounded from float64, the classes summed in order, scaled by the sum's reciprocal): with fewer
    classes than the CPU's vector lanes (8 or 16), nearly always the model's values to the last bit,
    so that its ties are ties here.
    """
    shifted = (logits - logits.max(axis=-1, keepdims=True)).astype(numpy.float64)
    exponentials = numpy.exp(shifted).astype(numpy.float32)
    total = exponentials[..., 0]
    for index in range(1, exponentials.shape[-1]):
        total = total + exponentials[..., index]
    return exponentials * (numpy.float32(1.0) / total)[..., None]


def _priority(span: Candidate, position: int) -> Tuple[float, int, int, int]:
    """Larger is preferred: higher score, longer, earlier start, earlier position."""
    return (span.score, span.end - span.start, -span.start, -position)


def merge_adjacent_same_type(spans: Sequence[Candidate]) -> List[Candidate]:
    """Non-overlapping spans by start, each run of adjacent spans of one label merged (maximum score and confidence)."""
    merged: List[Candidate] = []
    for span in sorted(spans, key=lambda span: (span.start, span.end)):
        if merged and merged[-1].end == span.start and merged[-1].label == span.label:
            last = merged[-1]
            merged[-1] = last._replace(
                end=span.end, score=max(last.score, span.score), confidence=max(last.confidence, span.confidence)
            )
        else:
            merged.append(span)
    return merged


def highest_first(candidates: Sequence[Candidate], merge_adjacent: bool) -> List[Candidate]:
    """Algorithm 4: the candidates preferred at every word they cover, by start."""
    best_at_word: Dict[int, int] = {}
    for position, span in enumerate(candidates):
        for word in range(span.start, span.end):
            rival = best_at_word.get(word)
            if rival is None or _priority(span, position) > _priority(candidates[rival], rival):
                best_at_word[word] = position
    kept = [
        span
        for position, span in enumerate(candidates)
        if all(best_at_word[word] == position for word in range(span.start, span.end))
    ]
    kept.sort(key=lambda span: span.start)
    return merge_adjacent_same_type(kept) if merge_adjacent else kept


def longest_first(candidates: Sequence[Candidate], merge_adjacent: bool) -> List[Candidate]:
    """
    Algorithm 5, a dynamic programme over sentence prefixes: the non-overlapping candidates that
    cover the most words; among those, the highest exact sum of scores, then the set holding the
    most preferred candidate where two sets differ (each candidate weighs 2 ** its preference rank).
    """
    if not candidates:
        return []
    ranked = sorted(range(len(candidates)), key=lambda position: _priority(candidates[position], position))
    weights = {position: 1 << rank for rank, position in enumerate(ranked)}
    length = max(span.end for span in candidates)
    # best[i]: (words covered, total score, tie-break weight) of the best choice within words [0, i),
    # last[i]: the candidate of that choice ending at i, None if word i - 1 is left out.
    best: List[Tuple[int, Fraction, int]] = [(0, Fraction(0), 0)]
    last: List[Optional[int]] = [None]
    for end in range(1, length + 1):
        best.append(best[end - 1])
        last.append(None)
        for position, span in enumerate(candidates):
            if span.end == end:
                covered, total, weight = best[span.start]
                extended = (covered + end - span.start, total + Fraction(span.score), weight + weights[position])
                if extended > best[end]:
                    best[end], last[end] = extended, position
    chosen: List[Candidate] = []
    end = length
    while end > 0:
        position = last[end]
        if position is None:
            end -= 1
        else:
            chosen.append(candidates[position])
            end = candidates[position].start
    chosen.reverse()
    return merge_adjacent_same_type(chosen) if merge_adjacent else chosen


DECODERS: Dict[str, Callable[[Sequence[Candidate], bool], List[Candidate]]] = {
    "highest_first": highest_first,
    "longest_first": longest_first,
}


def _strictly_inside(span: Candidate, parent: Candidate) -> bool:
    """Within `parent` and shorter: without its boundaries."""
    return parent.start <= span.start and span.end <= parent.end and span.end - span.start < parent.end - parent.start


def decode_nested(
    candidates: Sequence[Candidate], decoding: Sequence[str], thresholds: Sequence[float], merge_adjacent: bool
) -> List[Tuple[Candidate, int]]:
    """
    Algorithms 2 and 3: level 1 decodes the candidates scoring at least `thresholds[0]` with
    `decoding[0]`; inside each entity found at level `l`, level `l + 1` decodes the candidates lying
    within it without its boundaries, and so on.  An entity with its parent's boundaries (its
    parts merged back) is dropped.  `(span, level)` pairs, each entity followed by those inside it.
    """
    found: List[Tuple[Candidate, int]] = []

    def decode_level(pool: Sequence[Candidate], level: int, parent: Optional[Candidate]) -> None:
        eligible = [span for span in pool if span.score >= thresholds[level - 1]]
        for entity in DECODERS[decoding[level - 1]](eligible, merge_adjacent):
            if parent is not None and not _strictly_inside(entity, parent):
                continue
            found.append((entity, level))
            if level < len(decoding):
                decode_level([span for span in candidates if _strictly_inside(span, entity)], level + 1, entity)

    decode_level(candidates, 1, None)
    return found


def decode(
    logits: numpy.ndarray,
    lengths: Sequence[int],
    entity_types: Sequence[str],
    decoding: Sequence[str],
    thresholds: Sequence[float],
    merge_adjacent: bool = True,
    temperature: float = 1.0,
) -> List[Tuple[List[str], List[float], List[Span]]]:
    """
    Per sentence: its BIO tags (of the level-1 entities), their confidences, and its entities
    `(label, start, end, score, level)`, ordered by start, each followed by the entities inside it.
    A span's score is the probability of its label at `temperature`; an `O` tag's confidence is the
    smallest NONE probability at `temperature` of the spans covering its word.

    # Parameters

    logits : `numpy.ndarray`, `(batch_size, num_tokens, max_span_width, num_classes)`
        `[b, i, w]` scores span `[i, i + w + 1)` of sentence `b`, class 0 NONE and class `k`
        `entity_types[k - 1]`; entries of spans past a sentence's end are ignored.
    lengths : `Sequence[int]`, `(batch_size,)`, each sentence's number of words
    entity_types : `Sequence[str]`, `num_classes - 1` labels
    decoding : `Sequence[str]`, one of `DECODERS` per nesting level
    thresholds : `Sequence[float]`, one minimum probability per nesting level
    merge_adjacent : `bool`, optional (default = `True`), merge adjacent entities of one type
    temperature : `float`, optional (default = `1.0`), of the reported probabilities
    """
    if len(decoding) != len(thresholds) or not decoding:
        raise ValueError(f"need one threshold per nesting level, got decoding {decoding} and thresholds {thresholds}")
    unknown = [name for name in decoding if name not in DECODERS]
    if unknown:
        raise ValueError(f"unknown decoding algorithms {unknown}; expected some of {sorted(DECODERS)}")
    logits = numpy.asarray(logits, dtype=numpy.float32)
    num_tokens, max_width = logits.shape[1:3]
    probabilities = softmax(logits)
    confidences = probabilities if temperature == 1.0 else softmax(logits / numpy.float32(temperature))
    scores, classes = probabilities.max(axis=-1), probabilities.argmax(axis=-1)  # (batch_size, num_tokens, max_width)
    starts = numpy.arange(num_tokens)[:, None]  # (num_tokens, 1)
    ends = starts + numpy.arange(1, max_width + 1)  # (num_tokens, max_width)
    words = numpy.arange(num_tokens)
    covers = (starts[:, :, None] <= words) & (words < ends[:, :, None])  # (num_tokens, max_width, num_tokens)
    results = []
    for row, length in enumerate(lengths):
        real = ends <= length
        kept = real & (classes[row] > 0) & (scores[row] >= numpy.float32(min(thresholds)))
        candidates = [
            Candidate(
                int(start),
                int(start) + int(width) + 1,
                entity_types[classes[row, start, width] - 1],
                float(scores[row, start, width]),
                float(confidences[row, start, width, classes[row, start, width]]),
            )
            for start, width in zip(*numpy.nonzero(kept))  # by start, then width
        ]
        nested = decode_nested(candidates, decoding, thresholds, merge_adjacent)
        none = numpy.where(covers & real[:, :, None], confidences[row, :, :, 0, None], numpy.float32(1.0))
        tags, tag_confidences = ["O"] * length, [float(value) for value in none.min(axis=(0, 1))[:length]]
        for span, level in nested:
            if level == 1:
                width = span.end - span.start
                tags[span.start : span.end] = [f"B-{span.label}"] + [f"I-{span.label}"] * (width - 1)
                tag_confidences[span.start : span.end] = [span.confidence] * width
        results.append((tags, tag_confidences, [(s.label, s.start, s.end, s.confidence, level) for s, level in nested]))
    return results
