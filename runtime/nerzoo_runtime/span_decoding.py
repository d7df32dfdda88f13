"""
FOFE-NER's decoders, Mingbin Xu, "Fixed-size Ordinally-Forgetting Encoding and Its Applications",
MSc thesis, York University, 2017, §5.3 (Algorithms 2-5): the candidates (fragments of up to `n`
words with a non-NONE label whose score passes a threshold) may overlap or nest; *highest-first* and
*longest-first* pick a non-overlapping subset, one nesting level at a time.  `decode` turns the span
scores of an exported `fofe_ner` graph into nested entities and BIO tags, as the model does.

Offsets are 0-based with an exclusive end: the thesis' `[w_i, ..., w_j]` is `ScoredSpan(i - 1, j, ...)`.
Ties: the preferred candidate has the higher score, then the longer span, the earlier start, the
earlier position in the input.
"""

from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy

Span = Tuple[str, int, int, float, int]  # label, start, end (exclusive), score, nesting level


@dataclass(frozen=True)
class ScoredSpan:
    """
    A candidate entity: tokens `start` to `end` (exclusive) labelled `label` with score `score`.

    # Parameters

    start : `int`
        Offset of the first token.
    end : `int`
        Offset one past the last token; `end > start`.
    label : `str`
        The entity type (never the rejection label NONE: such fragments are no candidates).
    score : `float`
        The network's score for `label` on this fragment; decoding ranks and prunes by it.
    confidence : `float`, optional (default = `score`)
        The probability reported for the span (e.g. a calibrated one); decoding never reads it.
    """

    start: int
    end: int
    label: str
    score: float
    confidence: Optional[float] = None

    def __post_init__(self) -> None:
        if not 0 <= self.start < self.end:
            raise ValueError(f"a span needs 0 <= start < end, got start={self.start}, end={self.end}")

    @property
    def length(self) -> int:
        return self.end - self.start


def _priority(span: ScoredSpan, position: int) -> Tuple[float, int, int, int]:
    """Larger is preferred: higher score, longer, earlier start, earlier in the input."""
    return (span.score, span.length, -span.start, -position)


def merge_adjacent_same_type(spans: Sequence[ScoredSpan]) -> List[ScoredSpan]:
    """
    `mergeAdjacentOfSameType` of Algorithms 4 and 5 (§5.3): a span that begins where the previous
    one (by start) ends, with the same label, is merged into it, runs of any length into one span.
    Its score and confidence are the maxima of its parts' (the thesis does not say).

    # Parameters

    spans : `Sequence[ScoredSpan]`
        Non-overlapping spans, in any order.  Overlapping spans are a `ValueError`.

    # Returns

    `List[ScoredSpan]`
        The merged spans, sorted by start.
    """
    merged: List[ScoredSpan] = []
    for span in sorted(spans, key=lambda span: (span.start, span.end)):
        previous = merged[-1] if merged else None
        if previous is not None and span.start < previous.end:
            raise ValueError(f"cannot merge overlapping spans {previous} and {span}")
        if previous is not None and span.start == previous.end and span.label == previous.label:
            parts = [part.score if part.confidence is None else part.confidence for part in (previous, span)]
            confidence = None if previous.confidence is None and span.confidence is None else max(parts)
            merged[-1] = replace(previous, end=span.end, score=max(previous.score, span.score), confidence=confidence)
        else:
            merged.append(span)
    return merged


def highest_first(candidates: Sequence[ScoredSpan], merge_adjacent: bool = True) -> List[ScoredSpan]:
    """
    *Highest-first*, Algorithm 4 (§5.3): at every word, all candidates covering it but the preferred
    one are removed; a candidate survives if it is the preferred one at every word it covers.  Not
    greedy selection: with `(0, 2)` scored 0.8, `(1, 3)` 0.9 and `(2, 4)` 0.95 only `(2, 4)`
    survives, as `(1, 3)` removes `(0, 2)` at word 1.  (The listing resets `removed` inside its loop
    over words; we initialise it once, as the prose describes.)

    # Parameters

    candidates : `Sequence[ScoredSpan]`
        The candidates of one sentence (one nesting level).
    merge_adjacent : `bool`, optional (default = `True`)
        Apply `merge_adjacent_same_type` to the survivors, as the algorithm does.

    # Returns

    `List[ScoredSpan]`
        Non-overlapping spans sorted by start.
    """
    best_at_word: Dict[int, int] = {}
    for position, span in enumerate(candidates):
        priority = _priority(span, position)
        for word in range(span.start, span.end):
            rival = best_at_word.get(word)
            if rival is None or priority > _priority(candidates[rival], rival):
                best_at_word[word] = position
    kept = [
        span
        for position, span in enumerate(candidates)
        if all(best_at_word[word] == position for word in range(span.start, span.end))
    ]
    kept.sort(key=lambda span: span.start)
    return merge_adjacent_same_type(kept) if merge_adjacent else kept


def longest_first(candidates: Sequence[ScoredSpan], merge_adjacent: bool = True) -> List[ScoredSpan]:
    """
    *Longest-first*, Algorithm 5 (§5.3), a dynamic programme over sentence prefixes (its listing;
    the prose describes a local rule): the non-overlapping subset of the candidates that covers the
    most words, then has the higher total score (summed exactly), then holds the preferred candidate
    among those where two subsets differ, so that the input order does not matter.

    # Parameters

    candidates : `Sequence[ScoredSpan]`
        The candidates of one sentence (one nesting level).
    merge_adjacent : `bool`, optional (default = `True`)
        Apply `merge_adjacent_same_type` to the chosen spans, as the algorithm does.

    # Returns

    `List[ScoredSpan]`
        Non-overlapping spans sorted by start.
    """
    if not candidates:
        return []
    # Tie-break weight: 2 ** rank, rank increasing with preference.  A sum of distinct powers of
    # two is decided by the highest power in which two subsets differ.
    by_preference = sorted(range(len(candidates)), key=lambda index: _priority(candidates[index], index))
    weight = {position: 1 << rank for rank, position in enumerate(by_preference)}
    ending_at: Dict[int, List[int]] = {}
    for position, span in enumerate(candidates):
        ending_at.setdefault(span.end, []).append(position)

    sentence_length = max(span.end for span in candidates)
    # best[i]: (covered words, total score, tie-break weight) of the best subset within words [0, i).
    best: List[Tuple[int, Fraction, int]] = [(0, Fraction(0), 0)]
    # choice[i]: the candidate ending at i in that subset, or None if word i - 1 is uncovered.
    choice: List[Optional[int]] = [None]
    for end in range(1, sentence_length + 1):
        best.append(best[end - 1])
        choice.append(None)
        for position in ending_at.get(end, ()):
            span = candidates[position]
            covered, total, tie_break = best[span.start]
            extended = (covered + span.length, total + Fraction(span.score), tie_break + weight[position])
            if extended > best[end]:
                best[end], choice[end] = extended, position

    chosen: List[ScoredSpan] = []
    end = sentence_length
    while end > 0:
        position = choice[end]
        if position is None:
            end -= 1
        else:
            chosen.append(candidates[position])
            end = candidates[position].start
    chosen.reverse()
    return merge_adjacent_same_type(chosen) if merge_adjacent else chosen


DECODERS: Dict[str, Callable[..., List[ScoredSpan]]] = {
    "highest_first": highest_first,
    "longest_first": longest_first,
}


def check_levels(algorithms: Sequence[str], thresholds: Sequence[float]) -> None:
    """One known decoder name (a key of `DECODERS`) and one threshold per nesting level, at least one level."""
    if len(algorithms) != len(thresholds):
        raise ValueError(
            f"need one threshold per nesting level: {len(algorithms)} algorithms, {len(thresholds)} thresholds"
        )
    if not algorithms:
        raise ValueError("need at least one nesting level (one algorithm and one threshold)")
    for name in algorithms:
        if name not in DECODERS:
            raise ValueError(f"unknown decoding algorithm {name!r}; expected one of {sorted(DECODERS)}")


def decode_spans(
    candidates: Sequence[ScoredSpan],
    algorithms: Sequence[str],
    thresholds: Sequence[float],
    merge_adjacent: bool = True,
) -> List[Tuple[ScoredSpan, int]]:
    """
    Nested decoding, Algorithms 2 and 3 (§5.3, as its closing prose says): level 1 runs
    `algorithms[0]` over the candidates scoring at least `thresholds[0]`; inside every entity E of
    level `l`, level `l + 1` runs `algorithms[l]` over the candidates scoring at least
    `thresholds[l]` that lie inside E with other boundaries, recursively.  A merged entity's parts
    are such candidates; an entity of E's own boundaries found inside it is dropped.

    # Parameters

    candidates : `Sequence[ScoredSpan]`
        The candidates of one sentence.
    algorithms : `Sequence[str]`
        One decoder name (a key of `DECODERS`) per nesting level.
    thresholds : `Sequence[float]`
        One minimum score per nesting level, as many as `algorithms`.
    merge_adjacent : `bool`, optional (default = `True`)
        Passed on to every decoder.

    # Returns

    `List[Tuple[ScoredSpan, int]]`
        `(span, level)` pairs, `level` counting from 1, ordered by start and, for the same start,
        outer before inner.
    """
    check_levels(algorithms, thresholds)
    results: List[Tuple[ScoredSpan, int]] = []

    def inside(parent: ScoredSpan, span: ScoredSpan) -> bool:
        same_boundaries = (span.start, span.end) == (parent.start, parent.end)
        return parent.start <= span.start and span.end <= parent.end and not same_boundaries

    def decode_level(pool: Sequence[ScoredSpan], level: int, parent: Optional[ScoredSpan]) -> None:
        # Depth-first, children right after their parent: that is the promised order.
        eligible = [span for span in pool if span.score >= thresholds[level - 1]]
        for entity in DECODERS[algorithms[level - 1]](eligible, merge_adjacent=merge_adjacent):
            if parent is not None and not inside(parent, entity):
                continue  # its parts merged back into the parent
            results.append((entity, level))
            if level < len(algorithms):
                decode_level([span for span in candidates if inside(entity, span)], level + 1, entity)

    decode_level(candidates, 1, None)
    return results


def outermost_tags(nested: Sequence[Tuple[ScoredSpan, int]], outside: Sequence[float]) -> Tuple[List[str], List[float]]:
    """
    The BIO tags of the level-1 spans of `nested` over `len(outside)` words, and each tag's
    confidence: inside a span its `confidence` (else its `score`), for an `O` at word `i` `outside[i]`.
    """
    tags, confidences = ["O"] * len(outside), list(outside)
    for span, level in nested:
        if level == 1:
            width = span.end - span.start
            tags[span.start : span.end] = [f"B-{span.label}"] + [f"I-{span.label}"] * (width - 1)
            confidences[span.start : span.end] = [span.score if span.confidence is None else span.confidence] * width
    return tags, confidences


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
            ScoredSpan(
                int(start),
                int(start) + int(width) + 1,
                entity_types[classes[row, start, width] - 1],
                float(scores[row, start, width]),
                float(confidences[row, start, width, classes[row, start, width]]),
            )
            for start, width in zip(*numpy.nonzero(kept))  # by start, then width
        ]
        nested = decode_spans(candidates, decoding, thresholds, merge_adjacent)
        none = numpy.where(covers & real[:, :, None], confidences[row, :, :, 0, None], numpy.float32(1.0))
        tags, tag_confidences = outermost_tags(nested, [float(value) for value in none.min(axis=(0, 1))[:length]])
        results.append((tags, tag_confidences, [(s.label, s.start, s.end, s.confidence, level) for s, level in nested]))
    return results
