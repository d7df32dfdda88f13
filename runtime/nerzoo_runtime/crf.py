r"""
A linear-chain CRF's decoding and posteriors in numpy: the recursion of nerzoo's
`nerzoo.modules.crf.linear_chain_crf` (its `"steps"` schedule), run on the emission scores an
exported graph gives.  A tag path `y` of `T` steps over `K` tags scores

    s(y) = start[y_1] + sum_{t=1..T} x_t[y_t] + sum_{t=2..T} A[y_{t-1}, y_t] + end[y_T]

and the forward scores are `alpha_1 = start + x_1`, `alpha_t[j] = (+)_i (alpha_{t-1}[i] + A[i, j]) + x_t[j]`:

- with `(+) = max` (in the logits' float32, as the model decodes): the Viterbi path, read back from
  `y_T = argmax_j (alpha_T[j] + end[j])`, `y_{t-1} = argmax_i (alpha_{t-1}[i] + A[i, y_t])`;
- with `(+) = logsumexp` (in float64, as the model's posteriors): `log Z = logsumexp_j (alpha_T[j] +
  end[j])`, and the backward scores `beta_t` from the same recursion over each row reversed, with the
  transposed transitions (`beta_t + x_t` is then an alpha that starts from `end + x_T`).

A tag's marginal is `exp(alpha_t[j] + beta_t[j] - log Z)`; the probability that the path's tags on
steps `s .. e` are all right (a span's confidence) is

    exp(alpha_s[y_s] + sum_{k=s+1..e} (A[y_{k-1}, y_k] + x_k[y_k]) + beta_e[y_e] - log Z).

Shapes: `logits` `(batch_size, T, K)`, `mask` `(batch_size, T)` with each row's steps first; scores
past a row's end mean nothing (padded emissions count as 0).
"""

from typing import Dict, List, NamedTuple

import numpy

# The model's score of a transition its tag scheme forbids.
FORBIDDEN = -10000.0


class ChainScores(NamedTuple):
    """`transitions` `(K, K)` (from, to), `start` and `end` `(K,)`."""

    transitions: numpy.ndarray
    start: numpy.ndarray
    end: numpy.ndarray


class Crf(NamedTuple):
    """
    The learned scores (float32) and which moves the tag scheme allows: `allowed_transitions`
    `(K, K)`, `allowed_start` and `allowed_end` `(K,)`, all true without constraints.
    """

    learned: ChainScores
    allowed_transitions: numpy.ndarray
    allowed_start: numpy.ndarray
    allowed_end: numpy.ndarray

    @classmethod
    def from_settings(cls, settings: Dict[str, List]) -> "Crf":
        """From `tagger.json`'s `crf`: the lists `LinearChainCrf.runtime_settings` gives (nerzoo's torch CRF)."""
        learned = ChainScores(*(numpy.array(settings[key], dtype=numpy.float32) for key in ChainScores._fields))
        return cls(learned, *(numpy.array(settings[f"allowed_{key}"], dtype=bool) for key in ChainScores._fields))

    def scores(self, temperature: float = 1.0) -> ChainScores:
        """The learned scores divided by `temperature` (in float32), forbidden moves scored `FORBIDDEN`."""
        learned = [values / numpy.float32(temperature) if temperature != 1.0 else values for values in self.learned]
        allowed = (self.allowed_transitions, self.allowed_start, self.allowed_end)
        return ChainScores(*(numpy.where(ok, values, numpy.float32(FORBIDDEN)) for ok, values in zip(allowed, learned)))


class Posteriors(NamedTuple):
    log_alpha: numpy.ndarray  # (batch_size, T, K)
    log_beta: numpy.ndarray  # (batch_size, T, K)
    log_partition: numpy.ndarray  # (batch_size,)
    scores: ChainScores  # in float64


def logsumexp(values: numpy.ndarray, axis: int) -> numpy.ndarray:
    """`log(sum(exp(values)))` over `axis`, computed from the maximum."""
    maximum = values.max(axis=axis, keepdims=True)
    maximum = numpy.where(numpy.isfinite(maximum), maximum, 0.0)
    return numpy.log(numpy.exp(values - maximum).sum(axis=axis)) + maximum.squeeze(axis)


def forward_scores(first: numpy.ndarray, transitions: numpy.ndarray, emissions: numpy.ndarray, plus) -> numpy.ndarray:
    """
    `(batch_size, n + 1, K)`: `alpha_1 = first` `(batch_size, K)`, then `alpha_{t+1}[j] = plus_i
    (alpha_t[i] + transitions[i, j]) + emissions[:, t, j]`, `emissions` `(batch_size, n, K)`.
    """
    alphas = [first]
    for step in range(emissions.shape[1]):
        alphas.append(plus(alphas[-1][:, :, None] + transitions[None], 1) + emissions[:, step])
    return numpy.stack(alphas, axis=1)


def at_last_step(values: numpy.ndarray, mask: numpy.ndarray) -> numpy.ndarray:
    """`values` `(batch_size, T, ...)` at each row's last valid step (the first if none)."""
    last = numpy.maximum(mask.sum(axis=1) - 1, 0)
    return values[numpy.arange(values.shape[0]), last]


def reverse_rows(values: numpy.ndarray, mask: numpy.ndarray) -> numpy.ndarray:
    """`values` `(batch_size, T, ...)` with each row's valid steps in reverse order (padding stays)."""
    steps = numpy.arange(mask.shape[1])[None]
    lengths = mask.sum(axis=1, keepdims=True)
    index = numpy.where(steps < lengths, lengths - 1 - steps, steps)
    return values[numpy.arange(values.shape[0])[:, None], index]


def viterbi(scores: ChainScores, logits: numpy.ndarray, mask: numpy.ndarray) -> numpy.ndarray:
    """`(batch_size, T)`: the best path of every row, 0 at padding."""
    transitions, start, end = (values.astype(logits.dtype) for values in scores)
    logits = numpy.where(mask[:, :, None], logits, 0).astype(logits.dtype)
    alpha = forward_scores(start + logits[:, 0], transitions, logits[:, 1:], numpy.max)
    path = [(at_last_step(alpha, mask) + end).argmax(axis=-1)]
    for step in range(alpha.shape[1] - 1, 0, -1):
        best = (alpha[:, step - 1] + transitions.T[path[-1]]).argmax(axis=-1)
        path.append(numpy.where(mask[:, step], best, path[-1]))
    return numpy.stack(path[::-1], axis=1) * mask


def forward_backward(scores: ChainScores, logits: numpy.ndarray, mask: numpy.ndarray) -> Posteriors:
    """Both passes in the log semiring, in the dtype of `logits`."""
    scores = ChainScores(*(values.astype(logits.dtype) for values in scores))
    transitions, start, end = scores
    logits = numpy.where(mask[:, :, None], logits, 0.0)
    log_alpha = forward_scores(start + logits[:, 0], transitions, logits[:, 1:], logsumexp)
    reverse = reverse_rows(logits, mask)
    beta_and_emission = forward_scores(end + reverse[:, 0], transitions.T, reverse[:, 1:], logsumexp)
    log_beta = reverse_rows(beta_and_emission, mask) - logits
    log_partition = logsumexp(at_last_step(log_alpha, mask) + end, axis=-1)
    return Posteriors(log_alpha, log_beta, log_partition, scores)


def path_log_probability(posteriors: Posteriors, logits: numpy.ndarray, row: int, path, start: int, end: int) -> float:
    """log P(the tags of `path` on steps `start .. end - 1` of `row` | x), `logits` as the passes read them."""
    alpha, beta = posteriors.log_alpha[row], posteriors.log_beta[row]
    inside = sum(
        posteriors.scores.transitions[path[step - 1], path[step]] + logits[row, step, path[step]]
        for step in range(start + 1, end)
    )
    return alpha[start, path[start]] + inside + beta[end - 1, path[end - 1]] - posteriors.log_partition[row]
