"""
Temperature scaling of a model's confidences, fitted on held-out data (Guo, Pleiss, Sun &
Weinberger, 2017, "On Calibration of Modern Neural Networks", ICML, §4.2): the scores behind a
confidence are divided by a temperature `T > 0` chosen to minimise the negative log-likelihood of the
gold labels.  For a CRF the scores are the emissions and the transitions, divided by one temperature
or by one each; for a softmax, the logits.  Viterbi paths and argmaxes are unchanged by construction:
decoding never reads the temperatures.

A model that supports calibration has two methods:

- `calibration_sites() -> Dict[str, CalibrationSite]`: each place whose confidences come from a
  temperature-scaled scorer, by name;
- `calibration_batches(output_dict, **batch) -> Dict[str, CalibrationBatch]`: what one batch
  (`forward` in evaluation mode, gold labels given) contributes to each site's likelihood.

`allennlp calibrate` (`nerzoo.commands.calibrate`) fits them on a dev file and writes the
temperatures into the config of a new archive.
"""

from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

import torch


class CalibrationBatch(NamedTuple):
    """
    `logits` `(batch_size, num_steps, num_classes)`, gold `tags` and `mask` `(batch_size,
    num_steps)`; `mixture`, probabilities of the same shape as `logits` that the model mixes with its
    own (FOFE-NER's second pass), or `None`.
    """

    logits: torch.Tensor
    tags: torch.LongTensor
    mask: torch.BoolTensor
    mixture: Optional[torch.Tensor] = None

    def detached(self) -> "CalibrationBatch":
        """On the CPU, out of the graph, so that a whole dev set can be kept."""

        def cpu(tensor: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
            return None if tensor is None else tensor.detach().cpu()

        return CalibrationBatch(cpu(self.logits.float()), cpu(self.tags), cpu(self.mask.bool()), cpu(self.mixture))


class CalibrationSite(NamedTuple):
    """
    `config_keys`: the dotted keys under the config's `model` that hold the temperatures, as many as
    the site can fit (a CRF: emissions, transitions; a softmax: one).
    `log_likelihood(batch, temperatures)`: `(batch_size,)` log P(gold | x), differentiable in the
    `temperatures` tensor (one value for all scores, or one per key).
    `set_temperatures(values)`: makes the model's confidences use them.
    """

    config_keys: Tuple[str, ...]
    log_likelihood: Callable[[CalibrationBatch, torch.Tensor], torch.Tensor]
    set_temperatures: Callable[[Sequence[float]], None]


class FittedTemperatures(NamedTuple):
    temperatures: List[float]
    nll_before: float  # mean negative log-likelihood per instance at temperature 1
    nll_after: float


MIN_TEMPERATURE, MAX_TEMPERATURE = 0.05, 20.0


def mean_nll(site: CalibrationSite, batches: Sequence[CalibrationBatch], temperatures: torch.Tensor) -> torch.Tensor:
    """Mean negative log-likelihood per instance over `batches` at `temperatures`."""
    total = sum(-site.log_likelihood(batch, temperatures).sum() for batch in batches)
    return total / max(sum(int(batch.mask.size(0)) for batch in batches), 1)


def fit_temperatures(
    site: CalibrationSite, batches: Sequence[CalibrationBatch], num_temperatures: int = 1
) -> FittedTemperatures:
    """
    Minimises the mean negative log-likelihood over `batches` in `log T` (L-BFGS from T = 1, each T
    kept within [0.05, 20]); `num_temperatures` is 1 (one T for all scores) or `len(site.config_keys)`.
    """
    if not 1 <= num_temperatures <= len(site.config_keys):
        raise ValueError(f"this site fits 1 to {len(site.config_keys)} temperatures, not {num_temperatures}")
    log_temperatures = torch.zeros(num_temperatures, dtype=torch.float64, requires_grad=True)
    low, high = torch.log(torch.tensor(MIN_TEMPERATURE)), torch.log(torch.tensor(MAX_TEMPERATURE))

    def temperatures() -> torch.Tensor:
        return log_temperatures.clamp(low, high).exp()

    with torch.no_grad():
        before = float(mean_nll(site, batches, torch.ones(num_temperatures, dtype=torch.float64)))
    optimizer = torch.optim.LBFGS([log_temperatures], lr=1.0, max_iter=100, line_search_fn="strong_wolfe")

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        loss = mean_nll(site, batches, temperatures())
        loss.backward()
        return loss

    optimizer.step(closure)
    with torch.no_grad():
        fitted = temperatures()
        after = float(mean_nll(site, batches, fitted))
    values = [float(value) for value in fitted]
    if after > before:  # never worse than leaving the scores alone
        values, after = [1.0] * num_temperatures, before
    return FittedTemperatures(values, before, after)


def scorer_site(scorer: Any, config_prefix: str) -> CalibrationSite:
    """
    The site of a `CrfScorer` (keys `temperature`, `transition_temperature`) or a `SoftmaxScorer`
    (`temperature`) held by the component at `config_prefix` (`""`: the model itself).
    """
    prefix = f"{config_prefix}." if config_prefix else ""
    keys = ("temperature", "transition_temperature")[: scorer.num_temperatures]

    def log_likelihood(batch: CalibrationBatch, temperatures: torch.Tensor) -> torch.Tensor:
        return scorer.calibration_log_likelihood(batch.logits, batch.tags, batch.mask, temperatures)

    return CalibrationSite(tuple(prefix + key for key in keys), log_likelihood, scorer.set_temperatures)


def site_config(site: CalibrationSite, temperatures: Sequence[float]) -> Dict[str, float]:
    """Dotted config keys (under `model`) and their values; one temperature fills every key."""
    values = list(temperatures) * len(site.config_keys) if len(temperatures) == 1 else list(temperatures)
    return dict(zip(site.config_keys, values))
