import itertools

import pytest
import torch
from allennlp.modules.conditional_random_field import ConditionalRandomField, allowed_transitions

from nerzoo.modules.crf.crf_marginals import (
    PathPosteriors,
    constrained_scores,
    forward_backward,
    tag_marginals,
)

LABELS = {0: "O", 1: "B-PER", 2: "I-PER", 3: "L-PER", 4: "U-PER"}


def _brute_force(crf, logits, length):
    """Enumerates every tag sequence: log-score of each, with the constrained scores."""
    transitions, start, end = constrained_scores(crf)
    scores = {}
    for path in itertools.product(range(crf.num_tags), repeat=length):
        score = start[path[0]] + end[path[-1]] + sum(logits[t, path[t]] for t in range(length))
        score = score + sum(transitions[path[t - 1], path[t]] for t in range(1, length))
        scores[path] = score
    return scores


@pytest.mark.parametrize("constrained", [True, False])
@pytest.mark.parametrize("include_start_end", [True, False])
def test_marginals_equal_enumeration(constrained, include_start_end):
    torch.manual_seed(0)
    constraints = allowed_transitions("BIOUL", LABELS) if constrained else None
    crf = ConditionalRandomField(5, constraints, include_start_end_transitions=include_start_end)
    lengths = [4, 1, 3]
    logits = torch.randn(3, 4, 5) * 2
    mask = torch.tensor([[t < n for t in range(4)] for n in lengths])
    result = forward_backward(crf, logits, mask)
    marginals = tag_marginals(result, mask)
    with torch.no_grad():
        for row, length in enumerate(lengths):
            scores = _brute_force(crf, logits[row], length)
            log_z = torch.logsumexp(torch.stack(list(scores.values())), 0)
            assert result.log_partition[row] == pytest.approx(log_z.item(), abs=1e-4)
            expected = torch.zeros(4, 5)
            for path, score in scores.items():
                for t, tag in enumerate(path):
                    expected[t, tag] += (score - log_z).exp()
            assert torch.allclose(marginals[row], expected, atol=1e-5)
            # Padding gets nothing; real steps sum to one.
            assert torch.allclose(marginals[row, :length].sum(-1), torch.ones(length), atol=1e-5)
            # Any segment of the best path: its posterior is the summed probability of the paths
            # that contain it.
            best = max(scores, key=lambda path: scores[path])
            paths = torch.zeros(3, 4, dtype=torch.long)
            paths[row, :length] = torch.tensor(best)
            on_path = PathPosteriors(result, logits, paths)
            for start in range(length):
                for end in range(start + 1, length + 1):
                    segment = best[start:end]
                    wanted = sum((s - log_z).exp() for p, s in scores.items() if p[start:end] == segment)
                    got = on_path.segment_log_probability(row, start, end)
                    assert got == pytest.approx(wanted.log().item(), abs=1e-4)
                got_marginal = float(on_path.tag_log_marginals[row, start])
                assert got_marginal == pytest.approx(expected[start, best[start]].log().item(), abs=1e-4)


def test_unconstrained_partition_matches_allennlp():
    torch.manual_seed(1)
    crf = ConditionalRandomField(5)
    logits = torch.randn(2, 6, 5)
    mask = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])
    result = forward_backward(crf, logits, mask)
    assert torch.allclose(result.log_partition, crf._input_likelihood(logits, crf.transitions, mask), atol=1e-5)


def test_constrained_marginals_forbid_invalid_tags():
    torch.manual_seed(2)
    crf = ConditionalRandomField(5, allowed_transitions("BIOUL", LABELS))
    logits = torch.randn(1, 5, 5)
    mask = torch.ones(1, 5, dtype=torch.bool)
    marginals = tag_marginals(forward_backward(crf, logits, mask), mask)[0]
    assert marginals[0, 2] < 1e-6 and marginals[0, 3] < 1e-6  # no I-/L- at the start
    assert marginals[-1, 1] < 1e-6 and marginals[-1, 2] < 1e-6  # no B-/I- at the end


def _logsumexp_alpha_beta(crf, logits, length):
    """One row, step by step, with logsumexp over (from, to): the obvious recursions."""
    transitions, start, end = constrained_scores(crf)
    alpha = [start + logits[0]]
    for t in range(1, length):
        alpha.append(torch.logsumexp(alpha[-1].unsqueeze(1) + transitions, dim=0) + logits[t])
    beta = [end]
    for t in range(length - 2, -1, -1):
        beta.append(torch.logsumexp(transitions + (logits[t + 1] + beta[-1]).unsqueeze(0), dim=1))
    return torch.stack(alpha), torch.stack(beta[::-1])


@pytest.mark.parametrize("scale", [1.0, 30.0, 300.0])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_rescaled_recursions_equal_logsumexp_ones_even_for_extreme_scores(scale, dtype):
    torch.manual_seed(3)
    crf = ConditionalRandomField(5, allowed_transitions("BIOUL", LABELS)).to(dtype)
    lengths = [7, 3, 1]
    logits = (torch.randn(3, 7, 5) * scale).to(dtype)
    mask = torch.tensor([[t < n for t in range(7)] for n in lengths])
    with torch.no_grad():
        result = forward_backward(crf, logits, mask)
        marginals = tag_marginals(result, mask)
        assert torch.isfinite(result.log_alpha).all() and torch.isfinite(result.log_beta).all()
        for row, length in enumerate(lengths):
            alpha, beta = _logsumexp_alpha_beta(crf, logits[row], length)
            expected = (alpha + beta - torch.logsumexp(alpha[-1] + constrained_scores(crf)[2], 0)).exp()
            # float32 scores in the thousands keep about 1e-4 of relative precision.
            tolerance = 1e-3 if dtype == torch.float32 and scale > 100 else 1e-5
            assert torch.allclose(marginals[row, :length], expected, atol=tolerance)
            assert torch.allclose(marginals[row, :length].sum(-1), torch.ones(length, dtype=dtype), atol=tolerance)


@pytest.mark.parametrize("scale", [1.0, 5.0])
def test_float16_autocast_computes_in_float32_without_the_exact_fallback(scale, monkeypatch):
    import nerzoo.modules.crf.crf_marginals as crf_marginals

    torch.manual_seed(4)
    crf = ConditionalRandomField(5, allowed_transitions("BIOUL", LABELS))
    logits = (torch.randn(3, 40, 5) * scale).half()
    mask = torch.tensor([[t < n for t in range(40)] for n in [40, 17, 1]])
    with torch.no_grad():
        expected = forward_backward(crf, logits.float(), mask)

        def no_fallback(*args, **kwargs):
            raise AssertionError("the rescaled recursion underflowed and fell back to logsumexp")

        monkeypatch.setattr(crf_marginals, "_log_matmul_exp_exact", no_fallback)
        with torch.autocast("cpu", dtype=torch.float16):
            result = forward_backward(crf, logits, mask)
    assert result.log_alpha.dtype == result.log_beta.dtype == torch.float32
    assert torch.allclose(tag_marginals(result, mask), tag_marginals(expected, mask), atol=1e-6)
    assert torch.allclose(result.log_partition, expected.log_partition)


def test_constrained_scores_are_kept_for_each_dtype_until_the_scores_change():
    """Prediction decodes in float32 and takes marginals in float64: both stay kept, and follow a change."""
    torch.manual_seed(0)
    crf = ConditionalRandomField(5, allowed_transitions("BIOUL", LABELS))
    with torch.no_grad():
        single, double = constrained_scores(crf, dtype=torch.float32), constrained_scores(crf, dtype=torch.float64)
        assert constrained_scores(crf, dtype=torch.float32) is single
        assert constrained_scores(crf, dtype=torch.float64) is double
        crf.transitions.add_(1.0)
        changed = constrained_scores(crf, dtype=torch.float64)
    assert changed is not double
    assert torch.equal(changed[0], constrained_scores(crf, dtype=torch.float64)[0])
    assert torch.allclose(
        changed[0][crf._constraint_mask[:5, :5] > 0.5].float(),
        crf.transitions.detach()[crf._constraint_mask[:5, :5] > 0.5],
    )


@pytest.mark.parametrize(
    "optimizer",
    [
        lambda parameters: torch.optim.Adam(parameters, lr=0.1),
        lambda parameters: torch.optim.Adam(parameters, lr=0.1, fused=True),
        lambda parameters: torch.optim.SGD(parameters, lr=0.1, fused=True),
    ],
    ids=["adam", "fused-adam", "fused-sgd"],
)
def test_kept_constrained_scores_follow_every_optimizer_step(optimizer):
    """Fused optimizers update parameters in place without bumping their versions: the kept scores follow anyway."""
    torch.manual_seed(0)
    crf = ConditionalRandomField(5, allowed_transitions("BIOUL", LABELS))
    step = optimizer([crf.transitions, crf.start_transitions, crf.end_transitions])
    logits, tags = torch.randn(2, 4, 5), torch.tensor([[0, 1, 3, 0], [4, 0, 0, 4]])
    for _ in range(2):
        with torch.no_grad():
            kept = [scores.clone() for scores in constrained_scores(crf, dtype=torch.float64)]
        step.zero_grad()
        (-crf(logits, tags)).backward()
        step.step()
        with torch.no_grad():
            after = constrained_scores(crf, dtype=torch.float64)
        allowed, first = crf._constraint_mask[:5, :5] > 0.5, crf._constraint_mask[5, :5] > 0.5
        assert not torch.equal(after[0], kept[0])
        torch.testing.assert_close(after[0][allowed], crf.transitions.detach()[allowed].double())
        torch.testing.assert_close(after[1][first], crf.start_transitions.detach()[first].double())
