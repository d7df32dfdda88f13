"""
Temperature scaling of a model's confidences (Guo, Pleiss, Sun & Weinberger, 2017, "On Calibration
of Modern Neural Networks", ICML, §4.2): the scores behind a confidence (a CRF's emissions and
transitions, one temperature or one each; a softmax's logits) are divided by `T > 0` fitted on dev
data.  Decoding never reads the temperatures.  `fit_temperatures` minimises the negative
log-likelihood of

- `"sequence"`: the gold labels, as Guo et al.;
- `"span"`: the correctness of the predicted spans, each a Bernoulli event of the span's
  confidence `c`: `right * log c + (1 - right) * log(1 - c)`, what a user thresholds on (the
  sequence likelihood, dominated by easy `O` tokens, can leave spans over-confident).

`allennlp calibrate` fits the temperatures of a model's `CalibrationSource`s and writes them into
a new archive's config.
"""

from typing import Any, Callable, Dict, List, NamedTuple, Optional, Protocol, Sequence, Tuple, runtime_checkable

import torch

from nerzoo.metrics.span_calibration import SpanCalibration


class SpanOutcomes(NamedTuple):
    """The predicted spans of a batch, `(num_spans,)` each: row, start, end (exclusive), and 1.0 where right."""

    rows: torch.LongTensor
    starts: torch.LongTensor
    ends: torch.LongTensor
    right: torch.Tensor


class CalibrationBatch(NamedTuple):
    """
    `logits` `(batch_size, num_steps, num_classes)`, gold `tags` and `mask` `(batch_size,
    num_steps)`; `mixture`, probabilities of the same shape as `logits` that the model mixes with its
    own (FOFE-NER's second pass), or `None`; for the span likelihood, the predicted `paths`
    `(batch_size, num_steps)` and their `spans`.
    """

    logits: torch.Tensor
    tags: torch.LongTensor
    mask: torch.BoolTensor
    mixture: Optional[torch.Tensor] = None
    paths: Optional[torch.LongTensor] = None
    spans: Optional[SpanOutcomes] = None

    def detached(self) -> "CalibrationBatch":
        """On the CPU, out of the graph, so that a whole dev set can be kept."""

        def cpu(tensor: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
            return None if tensor is None else tensor.detach().cpu()

        spans = None if self.spans is None else SpanOutcomes(*(cpu(values) for values in self.spans))
        return CalibrationBatch(
            cpu(self.logits.float()), cpu(self.tags), cpu(self.mask.bool()), cpu(self.mixture), cpu(self.paths), spans
        )


class CalibrationSite(NamedTuple):
    """
    `config_keys`: the dotted keys under `model` of the temperatures it can fit; `log_likelihood`
    `(batch_size,)` log P(gold | x) and `span_log_likelihood` `(num_spans,)` (or `None`), both
    differentiable in `temperatures` (one value, or one per key); `set_temperatures(values)`.
    """

    config_keys: Tuple[str, ...]
    log_likelihood: Callable[[CalibrationBatch, torch.Tensor], torch.Tensor]
    set_temperatures: Callable[[Sequence[float]], None]
    span_log_likelihood: Optional[Callable[[CalibrationBatch, torch.Tensor], torch.Tensor]] = None


class FittedTemperatures(NamedTuple):
    temperatures: List[float]
    nll_before: float  # the objective's mean negative log-likelihood (per instance or per span) at T = 1
    nll_after: float
    objective: str = "sequence"


MIN_TEMPERATURE, MAX_TEMPERATURE = 0.05, 20.0


def mean_nll(
    site: CalibrationSite, batches: Sequence[CalibrationBatch], temperatures: torch.Tensor, objective: str = "sequence"
) -> torch.Tensor:
    """Mean negative log-likelihood over `batches` at `temperatures`: per instance, or per predicted span."""
    if objective == "span":
        terms = [-site.span_log_likelihood(batch, temperatures) for batch in batches if batch.spans is not None]
        return sum(term.sum() for term in terms) / max(sum(len(term) for term in terms), 1)
    total = sum(-site.log_likelihood(batch, temperatures).sum() for batch in batches)
    return total / max(sum(int(batch.mask.size(0)) for batch in batches), 1)


def has_spans(site: CalibrationSite, batches: Sequence[CalibrationBatch]) -> bool:
    """Whether the span objective applies: the site has a span likelihood and the batches predicted spans."""
    return site.span_log_likelihood is not None and any(
        batch.spans is not None and len(batch.spans.right) for batch in batches
    )


def fit_temperatures(
    site: CalibrationSite, batches: Sequence[CalibrationBatch], num_temperatures: int = 1, objective: str = "sequence"
) -> FittedTemperatures:
    """
    Minimises the mean negative log-likelihood of `objective` (`"sequence"` or `"span"`, see the
    module's docstring) over `batches` in `log T` (L-BFGS from T = 1, each T kept within [0.05, 20]);
    `num_temperatures` is 1 (one T for all scores) or `len(site.config_keys)`.
    """
    if not 1 <= num_temperatures <= len(site.config_keys):
        raise ValueError(f"this site fits 1 to {len(site.config_keys)} temperatures, not {num_temperatures}")
    if objective not in ("sequence", "span"):
        raise ValueError(f"objective must be 'sequence' or 'span', not {objective!r}")
    if objective == "span" and not has_spans(site, batches):
        raise ValueError("the span objective needs predicted spans, and this site or data has none")
    log_temperatures = torch.zeros(num_temperatures, dtype=torch.float64, requires_grad=True)
    low, high = torch.log(torch.tensor(MIN_TEMPERATURE)), torch.log(torch.tensor(MAX_TEMPERATURE))

    def temperatures() -> torch.Tensor:
        return log_temperatures.clamp(low, high).exp()

    with torch.no_grad():
        before = float(mean_nll(site, batches, torch.ones(num_temperatures, dtype=torch.float64), objective))
    optimizer = torch.optim.LBFGS([log_temperatures], lr=1.0, max_iter=100, line_search_fn="strong_wolfe")

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        loss = mean_nll(site, batches, temperatures(), objective)
        loss.backward()
        return loss

    optimizer.step(closure)
    with torch.no_grad():
        fitted = temperatures()
        after = float(mean_nll(site, batches, fitted, objective))
    values = [float(value) for value in fitted]
    if after > before:  # never worse than leaving the scores alone
        values, after = [1.0] * num_temperatures, before
    return FittedTemperatures(values, before, after, objective)


def scorer_site(scorer: Any, config_prefix: str) -> CalibrationSite:
    """
    The site of a `CrfScorer` (keys `temperature`, `transition_temperature`) or a `SoftmaxScorer`
    (`temperature`) held by the component at `config_prefix` (`""`: the model itself).
    """
    prefix = f"{config_prefix}." if config_prefix else ""
    keys = ("temperature", "transition_temperature")[: scorer.num_temperatures]

    def log_likelihood(batch: CalibrationBatch, temperatures: torch.Tensor) -> torch.Tensor:
        return scorer.calibration_log_likelihood(batch.logits, batch.tags, batch.mask, temperatures)

    def span_log_likelihood(batch: CalibrationBatch, temperatures: torch.Tensor) -> torch.Tensor:
        posteriors = scorer.scaled_posteriors(batch.logits.double(), batch.mask, batch.paths, temperatures)
        spans = batch.spans
        log_confidences = posteriors.segment_log_probabilities(spans.rows, spans.starts, spans.ends).clamp_max(0.0)
        return bernoulli_log_likelihood(log_confidences, spans.right)

    return CalibrationSite(
        tuple(prefix + key for key in keys), log_likelihood, scorer.set_temperatures, span_log_likelihood
    )


def bernoulli_log_likelihood(log_confidences: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
    """`right * log c + (1 - right) * log(1 - c)` from `log c`, kept finite at c = 0 and c = 1."""
    tiny = torch.finfo(log_confidences.dtype).tiny
    log_wrong = torch.log((-torch.expm1(log_confidences)).clamp_min(tiny))
    right = right.to(log_confidences.dtype)
    return (
        right * log_confidences.clamp_min(torch.log(torch.tensor(tiny, dtype=log_confidences.dtype)))
        + (1 - right) * log_wrong
    )


def site_config(site: CalibrationSite, temperatures: Sequence[float]) -> Dict[str, float]:
    """Dotted config keys (under `model`) and their values; one temperature fills every key."""
    values = list(temperatures) * len(site.config_keys) if len(temperatures) == 1 else list(temperatures)
    return dict(zip(site.config_keys, values))


@runtime_checkable
class CalibrationSource(Protocol):
    """
    A model, or a module of one (e.g. its `TagHead`), whose confidences have temperatures:
    `allennlp calibrate` finds these by module name, which is also their config path under `model`.
    """

    @property
    def span_calibration(self) -> Optional[SpanCalibration]:
        """The metric that scores span confidences in evaluation mode, or `None` (no spans)."""
        ...

    def calibration_site(self, config_prefix: str) -> CalibrationSite:
        """Where its temperatures are in the config, and its likelihoods."""
        ...

    def calibration_batch(self, output_dict: Dict[str, Any], batch: Dict[str, Any]) -> Optional[CalibrationBatch]:
        """What one evaluated batch (gold labels given) contributes to fitting them, or `None`."""
        ...


def calibration_modules(model: torch.nn.Module) -> Dict[str, CalibrationSource]:
    """
    The `CalibrationSource`s of `model` by module name (`""`: the model), which is their config path
    under `model`; a found one's submodules (e.g. FOFE-NER's frozen first pass) are not searched.
    """
    found: Dict[str, CalibrationSource] = {}
    for name, module in model.named_modules():
        if "" in found or any(name.startswith(f"{prefix}.") for prefix in found):
            continue
        if isinstance(module, CalibrationSource):
            found[name] = module
    return found
