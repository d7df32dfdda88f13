"""
The CPU fast path of the CRF's posteriors (`nerzoo.modules.crf._batched_marginals`) against the
readable forward-backward passes (`linear_chain_crf.forward_backward`) they must equal; brute force
over every tag sequence is in test_linear_chain_crf.py (`CrfScorer.posteriors` there takes this path).
"""

import pytest
import torch
from allennlp.modules.conditional_random_field import allowed_transitions

from nerzoo.modules.crf import _batched_marginals
from nerzoo.modules.crf.linear_chain_crf import ChainScores, LinearChainCrf, forward_backward
from nerzoo.modules.crf.tag_scorers import CrfScorer

LABELS = dict(enumerate(["O"] + [f"{p}-{t}" for t in ["PER", "LOC", "ORG", "MISC"] for p in "BILU"]))


def _case(seed, scale, constrained=True, include_start_end=True, batch_size=16, num_steps=23):
    torch.manual_seed(seed)
    constraints = allowed_transitions("BIOUL", LABELS) if constrained else None
    crf = LinearChainCrf(len(LABELS), constraints, include_start_end, schedule="steps")
    with torch.no_grad():
        crf.transitions.mul_(3)
        if include_start_end:
            crf.start_transitions.normal_()
            crf.end_transitions.normal_()
    logits = torch.randn(batch_size, num_steps, len(LABELS), dtype=torch.float64) * scale
    lengths = torch.randint(1, num_steps + 1, (batch_size,))
    lengths[0], lengths[1] = num_steps, 1
    mask = torch.arange(num_steps).unsqueeze(0) < lengths.unsqueeze(1)
    return crf, logits.masked_fill(~mask.unsqueeze(-1), 7.5), mask


def _readable_posteriors(scorer, logits, mask, paths):
    """`CrfScorer`'s posteriors through the readable passes (`scaled_posteriors` runs them)."""
    temperatures = torch.tensor([scorer.temperature, scorer.transition_temperature], dtype=torch.float64)
    with torch.no_grad():
        return scorer.scaled_posteriors(logits, mask, paths, temperatures)


@pytest.mark.parametrize("constrained", [True, False])
@pytest.mark.parametrize("include_start_end", [True, False])
@pytest.mark.parametrize("scale", [1.0, 5.0, 40.0])
def test_passes_equal_the_readable_ones_on_real_steps(constrained, include_start_end, scale):
    crf, logits, mask = _case(0, scale, constrained, include_start_end)
    with torch.no_grad():
        scores = crf.chain_scores(True, 0.8)
        fast = _batched_marginals.forward_backward(scores, logits, mask)
        readable = forward_backward(ChainScores(*(s.double() for s in scores)), logits, mask, "steps")
    assert fast is not None
    torch.testing.assert_close(fast.log_partition, readable.log_partition, rtol=0, atol=1e-9)
    marginals = [
        (passes.log_alpha + passes.log_beta - passes.log_partition.view(-1, 1, 1)).exp()[mask]
        for passes in (fast, readable)
    ]
    torch.testing.assert_close(*marginals, rtol=0, atol=1e-9)


@pytest.mark.parametrize("num_steps", [1, 2])
def test_batches_of_one_and_two_steps(num_steps):
    crf, logits, mask = _case(0, 4.0, batch_size=3, num_steps=num_steps)
    with torch.no_grad():
        scores = crf.chain_scores(True, 1.0)
        fast = _batched_marginals.forward_backward(scores, logits, mask)
        readable = forward_backward(ChainScores(*(s.double() for s in scores)), logits, mask, "steps")
    torch.testing.assert_close(fast.log_partition, readable.log_partition, rtol=0, atol=1e-9)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("temperatures", [(1.0, 1.0), (1.0, 0.6)])
def test_posteriors_equal_the_readable_ones(seed, temperatures):
    crf, logits, mask = _case(seed, 4.0)
    scorer = CrfScorer(crf, *temperatures)
    paths = crf.viterbi(logits, mask).tags
    for inference_mode in (False, True):
        with torch.inference_mode(inference_mode):
            got = scorer.posteriors(logits, mask, paths)
        wanted = _readable_posteriors(scorer, logits, mask, paths)
        for values, expected in zip(got, wanted):
            torch.testing.assert_close(values, expected, rtol=0, atol=1e-9)


def test_scores_too_far_apart_for_float64_take_the_readable_passes():
    crf, logits, mask = _case(1, 400.0)
    with torch.no_grad():
        assert _batched_marginals.forward_backward(crf.chain_scores(True), logits, mask) is None
    scorer = CrfScorer(crf)
    paths = crf.viterbi(logits, mask).tags
    for values, expected in zip(
        scorer.posteriors(logits, mask, paths), _readable_posteriors(scorer, logits, mask, paths)
    ):
        assert torch.equal(values, expected)
