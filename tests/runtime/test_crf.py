"""
nerzoo_runtime's numpy CRF against the model's torch recursion (`LinearChainCrf.viterbi` and
`CrfScorer.posteriors`), through what `allennlp export` writes of a CRF (`LinearChainCrf.runtime_settings`).
"""

import json

import numpy
import pytest
import torch
from allennlp.modules.conditional_random_field import allowed_transitions
from nerzoo_runtime import crf as runtime_crf

from nerzoo.modules.crf.linear_chain_crf import LinearChainCrf
from nerzoo.modules.crf.tag_scorers import CrfScorer

LABELS = dict(enumerate(["O"] + [f"{prefix}-{kind}" for kind in ("PER", "LOC", "ORG") for prefix in "BILU"]))


def _crf(constrained, include_start_end):
    torch.manual_seed(3)
    constraints = allowed_transitions("BIOUL", LABELS) if constrained else None
    crf = LinearChainCrf(len(LABELS), constraints, include_start_end)
    with torch.no_grad():
        crf.transitions.mul_(3)
        if include_start_end:
            crf.start_transitions.normal_()
            crf.end_transitions.normal_()
    return crf


def _batch(batch_size, num_steps, seed):
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(batch_size, num_steps, len(LABELS), generator=generator) * 4
    lengths = torch.randint(1, num_steps + 1, (batch_size,), generator=generator)
    lengths[0] = num_steps
    mask = torch.arange(num_steps).unsqueeze(0) < lengths.unsqueeze(1)
    return logits.masked_fill(~mask.unsqueeze(-1), 7.5), mask  # padding carries garbage


@pytest.mark.parametrize("constrained", [True, False])
@pytest.mark.parametrize("include_start_end", [True, False])
@pytest.mark.parametrize("temperatures", [(1.0, 1.0), (1.7, 0.6)])
@pytest.mark.parametrize("batch_size, num_steps", [(1, 1), (9, 11), (4, 60)])
def test_viterbi_and_posteriors_equal_the_models(constrained, include_start_end, temperatures, batch_size, num_steps):
    model_crf = _crf(constrained, include_start_end)
    scorer = CrfScorer(model_crf, *temperatures)
    exported = runtime_crf.Crf.from_settings(model_crf.runtime_settings())
    logits, mask = _batch(batch_size, num_steps, seed=batch_size * num_steps)
    paths = model_crf.viterbi(logits, mask).tags
    found = runtime_crf.viterbi(exported.scores(), logits.numpy(), mask.numpy())
    assert (found == paths.numpy()).all()

    posteriors = scorer.posteriors(logits, mask, paths)
    scaled = logits.double().numpy() / float(numpy.float32(temperatures[0]))
    passes = runtime_crf.forward_backward(exported.scores(temperatures[1]), scaled, mask.numpy())
    for row, length in enumerate(mask.sum(dim=1).tolist()):
        path = paths[row].tolist()
        for start in range(length):
            for end in range(start + 1, min(length, start + 8) + 1):
                expected = posteriors.segment_log_probabilities(
                    torch.tensor([row]), torch.tensor([start]), torch.tensor([end])
                )
                got = runtime_crf.path_log_probability(passes, scaled, row, path, start, end)
                assert got == pytest.approx(float(expected), abs=1e-8)
            marginal = passes.log_alpha[row, start, path[start]] + passes.log_beta[row, start, path[start]]
            expected = float(posteriors.path_log_probabilities[row, start])
            assert marginal - passes.log_partition[row] == pytest.approx(expected, abs=1e-8)


@pytest.mark.parametrize("constrained", [True, False])
@pytest.mark.parametrize("include_start_end", [True, False])
@pytest.mark.parametrize("temperature", [1.0, 0.6])
def test_the_runtime_reads_the_chain_scores_the_model_decodes_with(constrained, include_start_end, temperature):
    model_crf = _crf(constrained, include_start_end)
    exported = runtime_crf.Crf.from_settings(json.loads(json.dumps(model_crf.runtime_settings())))
    expected = model_crf.chain_scores(constrained=True, temperature=temperature)
    for got, want in zip(exported.scores(temperature), expected):
        assert got.dtype == numpy.float32
        numpy.testing.assert_array_equal(got, want.detach().numpy())
    if not constrained:
        assert all(allowed.all() for allowed in exported[1:])
