import itertools
import math

import pytest
import torch
from allennlp.modules.conditional_random_field import allowed_transitions

from nerzoo.metrics.span_calibration import (
    SpanCalibration,
    calibration_error,
    expected_calibration_error,
    fixed_bins,
    precision_at_coverage,
)
from nerzoo.modules.crf.calibration import (
    CalibrationBatch,
    SpanOutcomes,
    bernoulli_log_likelihood,
    fit_temperatures,
    scorer_site,
    site_config,
)
from nerzoo.modules.crf.linear_chain_crf import LinearChainCrf
from nerzoo.modules.crf.tag_scorers import CrfScorer, SoftmaxScorer

LABELS = {0: "O", 1: "B-PER", 2: "I-PER", 3: "L-PER", 4: "U-PER"}


def _crf():
    torch.manual_seed(0)
    crf = LinearChainCrf.for_labels(LABELS, "BIOUL")
    with torch.no_grad():
        for parameter in (crf.transitions, crf.start_transitions, crf.end_transitions):
            parameter.normal_()
    return crf


def _brute_force(crf, logits, temperature, transition_temperature):
    """P(path) of every allowed path of one sentence, scores divided by the temperatures."""
    allowed = allowed_transitions("BIOUL", LABELS)
    num_tags, start, end = len(LABELS), len(LABELS), len(LABELS) + 1
    probabilities = {}
    for path in itertools.product(range(num_tags), repeat=logits.size(0)):
        moves = [(start, path[0]), *zip(path, path[1:]), (path[-1], end)]
        if not all(move in allowed for move in moves):
            continue
        score = sum(logits[t, tag] for t, tag in enumerate(path)) / temperature
        score = (
            score
            + (
                crf.start_transitions[path[0]]
                + sum(crf.transitions[a, b] for a, b in zip(path, path[1:]))
                + crf.end_transitions[path[-1]]
            )
            / transition_temperature
        )
        probabilities[path] = score
    log_z = torch.logsumexp(torch.stack(list(probabilities.values())), 0)
    return {path: (score - log_z).exp() for path, score in probabilities.items()}


@pytest.mark.parametrize("temperatures", [(1.0, 1.0), (2.0, 2.0), (1.7, 0.6)])
def test_crf_posteriors_and_likelihood_equal_enumeration_with_temperatures(temperatures):
    crf = _crf()
    logits = torch.randn(1, 4, len(LABELS), dtype=torch.float64)
    mask = torch.ones(1, 4, dtype=torch.bool)
    scorer = CrfScorer(crf, *temperatures)
    paths = _brute_force(crf, logits[0].float(), *temperatures)
    marginals = torch.zeros(4, len(LABELS), dtype=torch.float64)
    for path, probability in paths.items():
        for t, tag in enumerate(path):
            marginals[t, tag] += probability
    best = max(paths, key=paths.get)
    viterbi = torch.tensor([best])
    posteriors = scorer.posteriors(logits.float(), mask, viterbi)
    assert torch.allclose(posteriors.probabilities[0].double(), marginals, atol=1e-5)
    segment = posteriors.segment_log_probabilities(torch.tensor([0]), torch.tensor([1]), torch.tensor([3])).exp()
    expected = sum(p for path, p in paths.items() if path[1:3] == best[1:3])
    assert float(segment.detach()) == pytest.approx(float(expected.detach()), abs=1e-5)
    log_likelihood = scorer.calibration_log_likelihood(logits, viterbi, mask, torch.tensor(temperatures))
    assert float(log_likelihood.detach()) == pytest.approx(float(paths[best].detach().log()), abs=1e-5)


def test_temperature_one_is_the_identity_and_decoding_ignores_temperatures():
    crf = _crf()
    logits = torch.randn(3, 6, len(LABELS))
    mask = torch.tensor([[True] * 6, [True] * 4 + [False] * 2, [True] + [False] * 5])
    plain, unit, hot = CrfScorer(crf), CrfScorer(crf, 1.0, 1.0), CrfScorer(crf, 3.0, 0.5)
    paths = plain.decode(logits, mask)
    assert torch.equal(hot.decode(logits, mask), paths)
    for before, after in zip(plain.posteriors(logits, mask, paths), unit.posteriors(logits, mask, paths)):
        assert torch.equal(before, after)
    assert not torch.allclose(
        plain.posteriors(logits, mask, paths).probabilities, hot.posteriors(logits, mask, paths).probabilities
    )
    softmax, scaled = SoftmaxScorer(), SoftmaxScorer(2.0)
    assert torch.equal(softmax.decode(logits, mask), scaled.decode(logits, mask))
    expected = torch.log_softmax(logits / 2.0, dim=-1).exp() * mask.unsqueeze(-1)
    assert torch.allclose(scaled.posteriors(logits, mask, paths).probabilities, expected)


def _over_confident(num_items=6000, num_classes=5, sharpening=3.0):
    """Labels drawn from softmax(z); the model's logits are sharpening * z."""
    generator = torch.Generator().manual_seed(0)
    z = 1.5 * torch.randn(num_items, 1, num_classes, generator=generator)
    gold = torch.multinomial(torch.softmax(z[:, 0], dim=-1), 1, generator=generator)
    return CalibrationBatch(sharpening * z, gold, torch.ones(num_items, 1, dtype=torch.bool))


def _argmax_ece(batch, temperature):
    probabilities = torch.softmax(batch.logits[:, 0].double() / temperature, dim=-1)
    confidences, predicted = probabilities.max(dim=-1)
    return expected_calibration_error(confidences, (predicted == batch.tags[:, 0]).double())


def test_fitting_on_over_confident_scores_recovers_the_temperature_and_lowers_ece():
    batch = _over_confident()
    scorer = SoftmaxScorer()
    site = scorer_site(scorer, "head")
    fitted = fit_temperatures(site, [batch])
    assert fitted.temperatures[0] == pytest.approx(3.0, rel=0.1)
    assert fitted.nll_after < fitted.nll_before
    assert _argmax_ece(batch, 1.0) > 0.1 and _argmax_ece(batch, fitted.temperatures[0]) < 0.02
    site.set_temperatures(fitted.temperatures)
    assert scorer.temperature == fitted.temperatures[0]
    assert site_config(site, fitted.temperatures) == {"head.temperature": fitted.temperatures[0]}


def test_fitting_calibrated_scores_keeps_the_temperature_near_one_and_two_temperatures_fill_two_keys():
    batch = _over_confident(sharpening=1.0)
    assert fit_temperatures(scorer_site(SoftmaxScorer(), ""), [batch]).temperatures[0] == pytest.approx(1.0, abs=0.1)
    site = scorer_site(CrfScorer(_crf()), "head")
    assert site.config_keys == ("head.temperature", "head.transition_temperature")
    assert site_config(site, [2.0]) == {"head.temperature": 2.0, "head.transition_temperature": 2.0}
    assert site_config(site, [2.0, 0.5]) == {"head.temperature": 2.0, "head.transition_temperature": 0.5}
    with pytest.raises(ValueError):
        fit_temperatures(scorer_site(SoftmaxScorer(), ""), [batch], num_temperatures=2)


def test_span_calibration_metric_against_hand_computed_values():
    metric = SpanCalibration(num_bins=2)
    metric([0.9, 0.9, 0.6, 0.2], [True, False, True, False])
    metrics = metric.get_metric(reset=True)
    # Equal-mass bins {0.2, 0.6} and {0.9, 0.9}: |0.4 - 0.5| and |0.9 - 0.5|, weighted 2/4 each.
    assert metrics["span_ece"] == pytest.approx(0.25)
    assert metrics["span_brier"] == pytest.approx((0.01 + 0.81 + 0.16 + 0.04) / 4)
    assert metric.get_metric() == {}
    confidences = torch.tensor([0.95, 0.45, 0.999, 0.7], dtype=torch.float64)
    correct = torch.tensor([1.0, 0.0, 1.0, 0.0], dtype=torch.float64)
    bins = fixed_bins(confidences, [0.0, 0.5, 0.99, 1.0])
    assert [index.tolist() for index in bins] == [[1], [0, 3], [2]]
    assert calibration_error(confidences, correct, bins) == pytest.approx((0.45 + 2 * abs(0.825 - 0.5) + 0.001) / 4)
    assert precision_at_coverage(confidences, correct, 0.5) == 1.0
    assert precision_at_coverage(confidences, correct, 0.75) == pytest.approx(2 / 3)


def test_bernoulli_log_likelihood_is_finite_at_the_extremes():
    log_confidences = torch.log(torch.tensor([0.8, 0.8, 1.0, 0.0], dtype=torch.float64))
    right = torch.tensor([1.0, 0.0, 1.0, 0.0], dtype=torch.float64)
    values = bernoulli_log_likelihood(log_confidences, right)
    assert values[:3].tolist() == pytest.approx([math.log(0.8), math.log(0.2), 0.0])
    assert torch.isfinite(values).all()


def test_the_span_objective_recovers_the_temperature_of_over_confident_spans():
    """Single-token spans whose correctness is drawn with probability softmax(z); the model says 3 z."""
    generator = torch.Generator().manual_seed(1)
    num_items, num_classes = 6000, 5
    z = 1.5 * torch.randn(num_items, 1, num_classes, generator=generator)
    paths = z.argmax(dim=-1)
    truth = torch.softmax(z, dim=-1).gather(2, paths.unsqueeze(-1)).flatten()
    right = (torch.rand(num_items, generator=generator) < truth).double()
    rows = torch.arange(num_items)
    spans = SpanOutcomes(rows, torch.zeros_like(rows), torch.ones_like(rows), right)
    mask = torch.ones(num_items, 1, dtype=torch.bool)
    batch = CalibrationBatch(3.0 * z, paths, mask, paths=paths, spans=spans)
    site = scorer_site(SoftmaxScorer(), "")
    fitted = fit_temperatures(site, [batch], objective="span")
    assert fitted.objective == "span" and fitted.temperatures[0] == pytest.approx(3.0, rel=0.1)
    assert fitted.nll_after < fitted.nll_before
    with pytest.raises(ValueError, match="span objective"):
        fit_temperatures(site, [batch._replace(spans=None)], objective="span")
