"""
A tagger's emission scores to tags, confidences and spans: the rows the scores are decoded in (each
word list, or each of its sentences), the best tags with their log-probabilities under the CRF or
under independent softmaxes, and each sentence's spans with their probabilities.
"""

from typing import Callable, List, NamedTuple, Optional, Sequence, Tuple

import numpy

from nerzoo_runtime import crf
from nerzoo_runtime.tag_scheme import tags_to_spans

Spans = List[Tuple[int, int]]
Chain = Tuple[int, int, int]  # the word list's row, the first word and one past the last


class Scored(NamedTuple):
    """Per chain: the best tags `(num_chains, num_tokens)`, their log-probabilities, and a span's."""

    paths: numpy.ndarray
    tag_log_probabilities: numpy.ndarray
    span_log_probability: Callable[[int, int, int], float]  # (chain, start, end) -> log-probability


def sentence_rows(
    logits: numpy.ndarray, mask: numpy.ndarray, sentences: Optional[Sequence[Spans]]
) -> Tuple[List[Chain], numpy.ndarray, numpy.ndarray]:
    """
    The chains of a batch's emission scores `(batch_size, num_tokens, num_tags)` and their scores
    and mask: each word list one chain, or with `sentences` each sentence a row of its own.
    """
    lengths = mask.sum(axis=1)
    chains = [
        (row, start, end)
        for row in range(len(logits))
        for start, end in (sentences[row] if sentences is not None else [(0, int(lengths[row]))])
    ]
    if len(chains) == len(logits):
        return chains, logits, mask
    num_steps = max(end - start for _, start, end in chains)
    chain_logits = numpy.zeros((len(chains), num_steps, logits.shape[2]), dtype=logits.dtype)
    for index, (row, start, end) in enumerate(chains):
        chain_logits[index, : end - start] = logits[row, start:end]
    chain_lengths = numpy.array([end - start for _, start, end in chains])
    return chains, chain_logits, numpy.arange(chain_logits.shape[1])[None] < chain_lengths[:, None]


def crf_scored(
    model: crf.Crf, logits: numpy.ndarray, mask: numpy.ndarray, temperature: float, transition_temperature: float
) -> Scored:
    """The CRF's best paths; a tag's and a span's posterior, at the temperatures of the confidences."""
    paths = crf.viterbi(model.scores(), logits, mask)
    scaled = logits.astype(numpy.float64)
    if temperature != 1.0:
        scaled = scaled / float(numpy.float32(temperature))
    posteriors = crf.forward_backward(model.scores(transition_temperature), scaled, mask)
    tag_log_probabilities = (
        numpy.take_along_axis(posteriors.log_alpha + posteriors.log_beta, paths[:, :, None], axis=2)[:, :, 0]
        - posteriors.log_partition[:, None]
    )

    def span_log_probability(chain: int, start: int, end: int) -> float:
        return crf.path_log_probability(posteriors, scaled, chain, paths[chain], start, end)

    return Scored(paths, tag_log_probabilities, span_log_probability)


def softmax_scored(logits: numpy.ndarray, mask: numpy.ndarray, temperature: float) -> Scored:
    """Independent positions: a tag's softmax probability, a span's the product of its tags'."""
    paths = logits.argmax(axis=-1) * mask
    scaled = logits.astype(numpy.float32) / numpy.float32(temperature)
    log_softmax = scaled - crf.logsumexp(scaled, axis=-1)[:, :, None]
    tag_log_probabilities = numpy.take_along_axis(log_softmax, paths[:, :, None], axis=2)[:, :, 0]

    def span_log_probability(chain: int, start: int, end: int) -> float:
        return float(tag_log_probabilities[chain, start:end].astype(numpy.float64).sum())

    return Scored(paths, tag_log_probabilities, span_log_probability)


def tagged(
    chains: Sequence[Chain], scored: Scored, labels: Sequence[str], sentences: Optional[Sequence[Spans]], rows: int
) -> List[Tuple[List[str], List[float], List[Tuple]]]:
    """
    Per word list: its tags, their confidences, and its spans `(label, start, end, confidence)`,
    found within each of its `sentences` (none without).
    """
    results = []
    for row in range(rows):
        tags, confidences, spans = [], [], []
        row_chains = [(index, start, end) for index, (of, start, end) in enumerate(chains) if of == row]
        for chain, start, end in row_chains:
            tags += [labels[tag] for tag in scored.paths[chain, : end - start]]
            confidences += numpy.exp(scored.tag_log_probabilities[chain, : end - start]).tolist()
        for first, last in sentences[row] if sentences is not None else []:
            chain, offset = next((chain, start) for chain, start, end in row_chains if start <= first < end)
            for label, start, end in tags_to_spans(tags[first:last]):
                log_probability = scored.span_log_probability(chain, first + start - offset, first + end - offset)
                spans.append((label, first + start, first + end, float(numpy.exp(min(log_probability, 0.0)))))
        results.append((tags, confidences, spans))
    return results
