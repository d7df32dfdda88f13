"""
The two ways a tagger turns per-token tag scores into a loss, a prediction and posteriors, alike
for `TagDecoder`: `CrfScorer` (a linear-chain CRF) and `SoftmaxScorer` (an independent softmax at
each position: MEMNET, Liu, Baldwin & Cohn, 2017, eq. 13, and Seq2Biseq's decoders).  Both hold the
temperatures of their posteriors (`nerzoo.modules.crf.calibration`), which decoding never reads.
Shapes: `logits` `(batch_size, num_steps, num_tags)`, `mask` `(batch_size, num_steps)`,
`paths` `(batch_size, num_steps)` tag ids (any value at padding).
"""

import math
from typing import NamedTuple, Optional, Sequence, Union

import numpy
import torch

from nerzoo.modules.crf import _batched_marginals
from nerzoo.modules.crf.linear_chain_crf import ForwardBackward, LinearChainCrf, chain_log_likelihood
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

    crf : `LinearChainCrf`
        Holds the transition scores and constraints; the model owns it as a submodule (so its
        parameters keep their names in archives), the scorer only reads it.
    temperature : `float`, optional (default = `1.0`)
        Divides the emission scores (`logits`) in the posteriors.
    transition_temperature : `float`, optional (default = `temperature`)
        Divides the transition (and start / end) scores in the posteriors.
    """

    num_temperatures = 2

    def __init__(
        self, crf: LinearChainCrf, temperature: float = 1.0, transition_temperature: Optional[float] = None
    ) -> None:
        self.crf = crf
        self.temperature = float(temperature)
        self.transition_temperature = float(temperature if transition_temperature is None else transition_temperature)

    def loss(self, logits: torch.Tensor, tags: torch.LongTensor, mask: torch.BoolTensor) -> torch.Tensor:
        """Negative log-likelihood summed over the batch, as `-ConditionalRandomField.forward`."""
        return -self.crf.log_likelihood(logits, tags, mask).sum()

    def decode(self, logits: torch.Tensor, mask: torch.BoolTensor) -> torch.LongTensor:
        """Viterbi paths under the constraints, `(batch_size, num_steps)`, 0 at padding."""
        return self.crf.viterbi(logits, mask).tags

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
        passes = None
        if self.crf.schedule_on(logits.device) == "steps":  # the CPU: one matrix product a step
            scores = self.crf.chain_scores(True, self.transition_temperature)
            passes = _batched_marginals.forward_backward(scores, logits, mask.bool())
        return self._posteriors(logits, mask, paths, self.transition_temperature, passes)

    def scaled_posteriors(
        self, logits: torch.Tensor, mask: torch.BoolTensor, paths: torch.LongTensor, temperatures: torch.Tensor
    ) -> TagPosteriors:
        """`posteriors` with the emissions divided by `temperatures[0]` and the transitions by
        `temperatures[-1]`, differentiable in them; computed in the dtype of `logits`."""
        logits = logits / temperatures[0].to(logits.device, logits.dtype)
        return self._posteriors(logits, mask, paths, temperatures[-1].to(self.crf.transitions.device))

    def _posteriors(
        self,
        logits: torch.Tensor,
        mask: torch.BoolTensor,
        paths: torch.LongTensor,
        transition_temperature: Union[float, torch.Tensor],
        passes: Optional[ForwardBackward] = None,
    ) -> TagPosteriors:
        """
        The marginals, and along `paths` (typically the Viterbi paths) the posterior of any stretch:

            log P(y_s..y_e = path_s..path_e | x)
                = alpha_s[path_s] + sum_{k=s+1..e} (A[path_{k-1}, path_k] + x_k[path_k]) + beta_e[path_e] - log Z

        For a predicted entity, the probability of exactly its boundaries and type, whatever the
        rest of the sentence carries.  `passes`: the forward-backward passes when already run.
        """
        mask = mask.bool()
        if passes is None:
            passes = self.crf.forward_backward(logits, mask, transition_temperature)
        log_partition = passes.log_partition.view(-1, 1)
        on_path = paths.unsqueeze(-1)
        alpha = passes.log_alpha.gather(2, on_path).squeeze(-1)
        beta = passes.log_beta.gather(2, on_path).squeeze(-1)
        steps = passes.scores.transitions[paths[:, :-1], paths[:, 1:]] + logits.gather(2, on_path).squeeze(-1)[:, 1:]
        prefix = torch.nn.functional.pad(steps.cumsum(dim=1), (1, 0))
        # The passes run on past a row's end, where they mean nothing: 0 there, as the softmax's.
        log_marginals = passes.log_alpha + passes.log_beta - log_partition.unsqueeze(-1)
        probabilities = log_marginals.masked_fill(~mask.unsqueeze(-1), -math.inf).exp()
        path_log_marginals, segment_start = alpha + beta - log_partition, alpha - prefix - log_partition
        return TagPosteriors(
            probabilities,
            *(values.masked_fill(~mask, 0.0) for values in (path_log_marginals, segment_start, beta + prefix)),
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
        scores = self.crf.chain_scores(True, temperatures[-1].to(self.crf.transitions.device))
        logits = logits.double() / temperatures.to(logits.device)[0]
        scores = type(scores)(*(values.to(logits.device) for values in scores))
        return chain_log_likelihood(scores, logits, tags, mask.bool(), self.crf.schedule_on(logits.device))

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
