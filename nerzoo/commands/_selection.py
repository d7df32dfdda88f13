"""
The sentence scores of `allennlp select` (higher: more worth annotating), the choice of sentences
under a budget and the stretches a partial annotation asks about, as pure functions of a model's
outputs.  Shapes: `probabilities` `(num_tokens, num_tags)`, each row a token's tag marginals.
"""

from typing import List, Optional, Sequence, Tuple

import numpy
from nerzoo_runtime.tag_scheme import chunk_starts, split_tag

from nerzoo.modules.crf.linear_chain_crf import ChainScores


def mnlp(sequence_log_probability: float, length: int) -> float:
    """Shen et al. (2017): `-log P(y* | x) / n`, the predicted sequence's normalised log-probability negated."""
    return -sequence_log_probability / max(length, 1)


def token_entropy(probabilities: numpy.ndarray) -> float:
    """The entropy of each token's tag marginals, `-sum_k p_k log p_k`, averaged over the tokens."""
    probabilities = numpy.asarray(probabilities, dtype=numpy.float64)
    logs = numpy.log(numpy.where(probabilities > 0, probabilities, 1.0))
    return float(-(probabilities * logs).sum(axis=-1).mean()) if len(probabilities) else 0.0


def expected_span_count(probabilities: numpy.ndarray, opens: Sequence[bool]) -> float:
    """E[number of spans] = sum_t P(a span opens at t) = sum_t sum_{k opens} p_t[k]."""
    return float(numpy.asarray(probabilities, dtype=numpy.float64)[..., numpy.asarray(opens, dtype=bool)].sum())


def expected_errors(expected_spans: float, confidences: Sequence[float]) -> float:
    """
    Expected span errors of the predicted spans `S`, each right with probability its confidence `c_s`:

        E[false positives] + E[false negatives] = sum_s (1 - c_s) + (E[number of spans] - sum_s c_s)

    (the gold spans the prediction has are expected to number `sum_s c_s`).  Exact where `c_s` is
    the probability of the span itself, as a BIOUL CRF's confidences are.
    """
    return float(expected_spans + len(confidences) - 2.0 * sum(confidences))


def opening_tags(labels: Sequence[str], allowed: ChainScores) -> Optional[List[bool]]:
    """
    For each tag, whether a span opens at it (conlleval's rule), where that holds after every tag
    the chain allows before it (sentence start included): then `expected_span_count` of the
    marginals is exact.  `None` where it depends on the previous tag (an unconstrained chain, IOB1).
    """
    parts = [split_tag(label) for label in labels]
    parts = [(prefix, label) if prefix else ("O", None) for prefix, label in parts]
    opens: List[bool] = []
    for current, (prefix, label) in enumerate(parts):
        before = [parts[previous] for previous in range(len(parts)) if bool(allowed.transitions[previous, current])]
        before += [("O", None)] if bool(allowed.start[current]) else []
        found = {prefix != "O" and chunk_starts(*previous, prefix, label) for previous in before}
        if len(found) > 1:
            return None
        opens.append(found == {True})
    return opens


def tie_order(count: int, seed: int) -> numpy.ndarray:
    """A seeded random permutation's ranks: breaks every tie the same way for a seed (and orders `random`)."""
    ranks = numpy.empty(count, dtype=numpy.int64)
    ranks[numpy.random.default_rng(seed).permutation(count)] = numpy.arange(count)
    return ranks


def choose(scores: Sequence[float], costs: Sequence[int], budget: int, seed: int) -> List[int]:
    """
    The indices to annotate, by score (highest first, ties by `tie_order`), until the next would
    take the summed cost past `budget`; items of cost 0 are never chosen.  A first item that alone
    exceeds the budget gives none.
    """
    ranks = tie_order(len(scores), seed)
    order = sorted(range(len(scores)), key=lambda index: (-scores[index], ranks[index]))
    chosen: List[int] = []
    spent = 0
    for index in order:
        if costs[index] == 0:
            continue
        if spent + costs[index] > budget:
            break
        chosen.append(index)
        spent += costs[index]
    return chosen


def open_questions(confidences: Sequence[float], spans: Sequence[Tuple[int, int]], threshold: float) -> List[bool]:
    """
    Which tokens a partial annotation asks about: those whose predicted tag's marginal is below
    `threshold`, widened to every predicted span (`(start, end)`, end exclusive) they touch, so that
    no span is cut.
    """
    marked = [confidence < threshold for confidence in confidences]
    for start, end in sorted(spans, key=lambda span: span[1] - span[0]):  # nested spans before those around them
        if any(marked[start:end]):
            marked[start:end] = [True] * (end - start)
    return marked
