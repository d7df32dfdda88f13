"""
The two ways a tagger turns per-token tag scores into a loss, a prediction and posteriors:

- `CrfScorer`: a linear-chain CRF (allennlp's `ConditionalRandomField` holds the parameters and the
  transition constraints; `nerzoo.modules.crf.batched_crf` decodes and scores whole batches;
  `nerzoo.modules.crf.crf_marginals` gives exact posteriors).
- `SoftmaxScorer`: an independent softmax at each position (MEMNET, Liu, Baldwin & Cohn, 2017,
  https://aclanthology.org/I17-1056, eq. 13; and Seq2Biseq's decoders).

Both return the same things, so `TagDecoder` turns either into labels, spans and confidences.
Both hold the temperatures that calibrate their posteriors (Guo et al., 2017, "On Calibration of
Modern Neural Networks", ICML, §4.2: scores divided by one scalar fitted on held-out data, see
`nerzoo.modules.crf.calibration`).  Decoding never reads them, so calibration changes no prediction.
Shapes: `logits` `(batch_size, num_steps, num_tags)`, `mask` `(batch_size, num_steps)`,
`paths` `(batch_size, num_steps)` tag ids (any value at padding).
"""

from typing import Dict, NamedTuple, Optional, Sequence, Union

import numpy
import torch
from allennlp.modules import ConditionalRandomField
from allennlp.modules.conditional_random_field import allowed_transitions

from nerzoo.modules.crf.batched_crf import crf_log_likelihood, sequence_log_likelihood, viterbi_decode
from nerzoo.modules.crf.crf_marginals import PathPosteriors, constrained_scores, forward_backward, tag_marginals
from nerzoo.modules.full_precision import full_precision


class TagPosteriors(NamedTuple):
    """
    `probabilities` `(batch_size, num_steps, num_tags)`: P(tag at t | x), zero at padding.
    `path_log_probabilities` `(batch_size, num_steps)`: log P(tag at t = path_t | x).
    `segment_start` and `segment_end` `(batch_size, num_steps)`: the log-probability that a path's
    tags on steps `s .. e` (inclusive) are all right is `segment_start[s] + segment_end[e]`.
    """

    probabilities: torch.Tensor
    path_log_probabilities: torch.Tensor
    segment_start: torch.Tensor
    segment_end: torch.Tensor

    def segment_log_probabilities(
        self, rows: torch.LongTensor, starts: torch.LongTensor, ends: torch.LongTensor
    ) -> torch.Tensor:
        """log P(path tags on `starts[k] .. ends[k] - 1` of row `rows[k]`), for every k at once."""
        return self.segment_start[rows, starts] + self.segment_end[rows, ends - 1]


class CrfScorer:
    """
    # Parameters

    crf : `ConditionalRandomField`
        Holds the transition scores and constraints; the model owns it as a submodule (so its
        parameters keep their names in archives), the scorer only reads it.
    temperature : `float`, optional (default = `1.0`)
        Divides the emission scores (`logits`) in the posteriors.
    transition_temperature : `float`, optional (default = `temperature`)
        Divides the transition (and start / end) scores in the posteriors.
    """

    num_temperatures = 2

    def __init__(
        self, crf: ConditionalRandomField, temperature: float = 1.0, transition_temperature: Optional[float] = None
    ) -> None:
        self.crf = crf
        self.temperature = float(temperature)
        self.transition_temperature = float(temperature if transition_temperature is None else transition_temperature)

    @classmethod
    def build_crf(
        cls, labels: Dict[int, str], tag_scheme: Optional[str] = None, include_start_end_transitions: bool = True
    ) -> ConditionalRandomField:
        """A CRF over `labels` (tag id to tag), with the forbidden transitions of `tag_scheme` (`None`: none)."""
        constraints = allowed_transitions(tag_scheme, labels) if tag_scheme is not None else None
        return ConditionalRandomField(
            len(labels), constraints, include_start_end_transitions=include_start_end_transitions
        )

    def loss(self, logits: torch.Tensor, tags: torch.LongTensor, mask: torch.BoolTensor) -> torch.Tensor:
        """Negative log-likelihood summed over the batch, as `-ConditionalRandomField.forward`."""
        return -crf_log_likelihood(self.crf, logits, tags, mask).sum()

    def decode(self, logits: torch.Tensor, mask: torch.BoolTensor) -> torch.LongTensor:
        """Viterbi paths under the constraints, `(batch_size, num_steps)`, 0 at padding."""
        return viterbi_decode(self.crf, logits, mask).tags

    @torch.no_grad()
    def posteriors(self, logits: torch.Tensor, mask: torch.BoolTensor, paths: torch.LongTensor) -> TagPosteriors:
        """
        Forward-backward marginals and the exact posterior of any stretch of `paths`, in float64:
        a marginal is `exp(alpha + beta - log Z)` with `log Z` in the hundreds, where float32 keeps
        only about 3e-5 of it.
        """
        logits = logits.double()
        if self.temperature != 1.0:  # the temperature as a float32 tensor would hold it
            logits = logits / float(numpy.float32(self.temperature))
        return self._posteriors(logits, mask, paths, self.transition_temperature)

    def scaled_posteriors(
        self, logits: torch.Tensor, mask: torch.BoolTensor, paths: torch.LongTensor, temperatures: torch.Tensor
    ) -> TagPosteriors:
        """`posteriors` with the emissions divided by `temperatures[0]` and the transitions by
        `temperatures[-1]`, differentiable in them; computed in the dtype of `logits`."""
        temperatures = temperatures.to(logits.device)
        logits = logits / temperatures[0].to(logits.dtype)
        return self._posteriors(logits, mask, paths, temperatures[-1])

    def _posteriors(
        self,
        logits: torch.Tensor,
        mask: torch.BoolTensor,
        paths: torch.LongTensor,
        transition_temperature: Union[float, torch.Tensor],
    ) -> TagPosteriors:
        result = forward_backward(self.crf, logits, mask, transition_temperature)
        on_paths = PathPosteriors(result, logits, paths)
        return TagPosteriors(
            tag_marginals(result, mask), on_paths.tag_log_marginals, on_paths.segment_start, on_paths.segment_end
        )

    def calibration_log_likelihood(
        self, logits: torch.Tensor, tags: torch.LongTensor, mask: torch.BoolTensor, temperatures: torch.Tensor
    ) -> torch.Tensor:
        """
        `(batch_size,)` log P(tags | x) under the constrained chain of the posteriors, with the
        emissions divided by `temperatures[0]` and the transitions by `temperatures[-1]`
        (differentiable in `temperatures`, a tensor of one or two values).
        """
        # The batches may be kept on another device than the model (`calibrate` holds them on the CPU).
        transitions, start, end = (
            scores.to(logits.device)
            for scores in constrained_scores(self.crf, temperatures[-1].to(self.crf.transitions.device))
        )
        temperatures = temperatures.to(logits.device)
        return sequence_log_likelihood(transitions, start, end, logits.double() / temperatures[0], tags, mask)

    def set_temperatures(self, temperatures: Sequence[float]) -> None:
        self.temperature, self.transition_temperature = float(temperatures[0]), float(temperatures[-1])


class SoftmaxScorer:
    """
    Independent positions: cross-entropy loss, argmax prediction, softmax posteriors.

    # Parameters

    temperature : `float`, optional (default = `1.0`)
        Divides the scores in the posteriors.
    """

    num_temperatures = 1

    def __init__(self, temperature: float = 1.0) -> None:
        self.temperature = float(temperature)

    def loss(self, logits: torch.Tensor, tags: torch.LongTensor, mask: torch.BoolTensor) -> torch.Tensor:
        """Cross-entropy summed over the unmasked tokens of the batch."""
        token_mask = mask.bool()
        return torch.nn.functional.cross_entropy(logits[token_mask], tags[token_mask], reduction="sum")

    def decode(self, logits: torch.Tensor, mask: torch.BoolTensor) -> torch.LongTensor:
        return logits.argmax(dim=-1) * mask

    @torch.no_grad()
    def posteriors(self, logits: torch.Tensor, mask: torch.BoolTensor, paths: torch.LongTensor) -> TagPosteriors:
        """A segment's probability is the product of its tokens' (the positions are independent)."""
        temperatures = torch.tensor([self.temperature], device=logits.device)
        return self.scaled_posteriors(full_precision(logits), mask, paths, temperatures)

    def scaled_posteriors(
        self, logits: torch.Tensor, mask: torch.BoolTensor, paths: torch.LongTensor, temperatures: torch.Tensor
    ) -> TagPosteriors:
        """`posteriors` with the scores divided by `temperatures[0]`, differentiable in it."""
        log_softmax = torch.log_softmax(logits / temperatures[0].to(logits.device, logits.dtype), dim=-1)
        on_path = log_softmax.gather(2, paths.unsqueeze(-1)).squeeze(-1) * mask
        prefix = on_path.double().cumsum(dim=1)
        return TagPosteriors(log_softmax.exp() * mask.unsqueeze(-1), on_path, on_path.double() - prefix, prefix)

    def calibration_log_likelihood(
        self, logits: torch.Tensor, tags: torch.LongTensor, mask: torch.BoolTensor, temperatures: torch.Tensor
    ) -> torch.Tensor:
        """`(batch_size,)` log P(tags | x) with the scores divided by `temperatures[0]` (differentiable in it)."""
        log_softmax = torch.log_softmax(logits.double() / temperatures[0].to(logits.device), dim=-1)
        return (log_softmax.gather(2, tags.unsqueeze(-1)).squeeze(-1) * mask).sum(dim=1)

    def set_temperatures(self, temperatures: Sequence[float]) -> None:
        self.temperature = float(temperatures[0])
