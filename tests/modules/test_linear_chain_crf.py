"""
`LinearChainCrf` against brute force over every tag sequence of short chains, against allennlp's
`ConditionalRandomField` (`viterbi_tags`, and `forward` for the likelihood), against autograd (the
marginals are the gradient of the log-partition), and its two schedules against each other.
"""

import itertools

import pytest
import torch
from allennlp.common.checks import ConfigurationError
from allennlp.modules.conditional_random_field import ConditionalRandomField, allowed_transitions

from nerzoo.modules.crf.linear_chain_crf import (
    LOG,
    ChainScores,
    LinearChainCrf,
    chain_log_likelihood,
    forward_backward,
    forward_scores,
)
from nerzoo.modules.crf.tag_scorers import CrfScorer

TYPES = ["PER", "LOC", "ORG"]
LABELS = dict(enumerate(["O"] + [f"{p}-{t}" for t in TYPES for p in "BILU"]))
NUM_TAGS = len(LABELS)
SMALL = {0: "O", 1: "B-PER", 2: "I-PER", 3: "L-PER", 4: "U-PER"}
SCHEDULES = ["steps", "scan"]


def _random_batch(seed, dtype, batch_size=9, num_steps=11):
    generator = torch.Generator().manual_seed(seed)
    logits = (torch.randn(batch_size, num_steps, NUM_TAGS, generator=generator) * 3).to(dtype)
    lengths = torch.randint(1, num_steps + 1, (batch_size,), generator=generator)
    lengths[0], lengths[1] = num_steps, 1
    mask = torch.arange(num_steps).unsqueeze(0) < lengths.unsqueeze(1)
    # Padding carries garbage, as it may in a model.
    logits = logits.masked_fill(~mask.unsqueeze(-1), 7.5)
    tags = torch.randint(NUM_TAGS, (batch_size, num_steps), generator=generator)
    return logits, mask, tags, lengths


def _crf(constrained, include_start_end, seed, schedule="auto", labels=LABELS):
    torch.manual_seed(seed)
    constraints = allowed_transitions("BIOUL", labels) if constrained else None
    crf = LinearChainCrf(len(labels), constraints, include_start_end, schedule)
    with torch.no_grad():
        crf.transitions.mul_(3)
        if include_start_end:
            crf.start_transitions.normal_()
            crf.end_transitions.normal_()
    return crf


def _enumerated(scores, logits, length):
    """The score `s(y)` of every tag sequence of one row's first `length` steps."""
    transitions, start, end = scores
    found = {}
    for path in itertools.product(range(logits.size(-1)), repeat=length):
        score = start[path[0]] + end[path[-1]] + sum(logits[t, tag] for t, tag in enumerate(path))
        found[path] = score + sum(transitions[a, b] for a, b in zip(path, path[1:]))
    return found


@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("constrained", [True, False])
@pytest.mark.parametrize("include_start_end", [True, False])
def test_every_quantity_equals_enumeration(schedule, constrained, include_start_end):
    crf = _crf(constrained, include_start_end, 0, schedule, SMALL).double()
    lengths = [4, 1, 3]
    logits = torch.randn(3, 4, 5, dtype=torch.float64) * 2
    mask = torch.tensor([[t < n for t in range(4)] for n in lengths])
    tags = torch.randint(5, (3, 4))
    with torch.no_grad():
        decoded = crf.viterbi(logits, mask)
        passes = crf.forward_backward(logits, mask)
        likelihood = crf.log_likelihood(logits, tags, mask)
        posteriors = CrfScorer(crf).posteriors(logits, mask, decoded.tags)
        for row, length in enumerate(lengths):
            constrained_paths = _enumerated(crf.chain_scores(True), logits[row], length)
            log_z = torch.logsumexp(torch.stack(list(constrained_paths.values())), 0)
            assert passes.log_partition[row].item() == pytest.approx(log_z.item(), abs=1e-9)
            best = max(constrained_paths, key=constrained_paths.get)
            assert decoded.tags[row, :length].tolist() == list(best)
            assert decoded.scores[row].item() == pytest.approx(constrained_paths[best].item(), abs=1e-9)
            marginals = torch.zeros(length, 5, dtype=torch.float64)
            for path, score in constrained_paths.items():
                marginals[torch.arange(length), torch.tensor(path)] += (score - log_z).exp()
            torch.testing.assert_close(posteriors.probabilities[row, :length], marginals)
            assert not posteriors.probabilities[row, length:].any()
            # Any stretch of the best path: the summed probability of the paths that share it.
            for start in range(length):
                for end in range(start + 1, length + 1):
                    shared = [s for p, s in constrained_paths.items() if p[start:end] == best[start:end]]
                    wanted = torch.logsumexp(torch.stack(shared), 0) - log_z
                    got = posteriors.segment_log_probabilities(*torch.tensor([[row], [start], [end]]))
                    assert got.item() == pytest.approx(wanted.item(), abs=1e-9)
            # The likelihood is allennlp's: unconstrained.
            paths = _enumerated(crf.chain_scores(False), logits[row], length)
            gold = tuple(tags[row, :length].tolist())
            wanted = paths[gold] - torch.logsumexp(torch.stack(list(paths.values())), 0)
            assert likelihood[row].item() == pytest.approx(wanted.item(), abs=1e-9)


# The scan does K times the work: its cases are fewer (it equals the steps below).
CASES = list(itertools.product(["steps"], [True, False], [True, False], [torch.float32, torch.float64], range(2)))
CASES += list(itertools.product(["scan"], [True, False], [True, False], [torch.float32], [0]))


@pytest.mark.parametrize("schedule,constrained,include_start_end,dtype,seed", CASES)
def test_viterbi_equals_viterbi_tags(schedule, constrained, include_start_end, dtype, seed):
    crf = _crf(constrained, include_start_end, seed, schedule).to(dtype)
    logits, mask, _, lengths = _random_batch(seed, dtype)
    decoded = crf.viterbi(logits, mask)
    assert decoded.tags.dtype == torch.long and decoded.tags.shape == mask.shape
    for row, (path, score) in enumerate(crf.viterbi_tags(logits, mask)):
        assert decoded.tags[row, : lengths[row]].tolist() == path
        # allennlp decodes in float32 whatever the input dtype.
        assert decoded.scores[row].item() == pytest.approx(score, rel=1e-5, abs=1e-3)
    assert not decoded.tags[~mask].any()


@pytest.mark.parametrize("schedule,constrained,include_start_end,dtype,seed", CASES)
def test_log_likelihood_equals_allennlp_row_by_row_with_gradients(
    schedule, constrained, include_start_end, dtype, seed
):
    crf = _crf(constrained, include_start_end, seed, schedule).to(dtype)
    logits, mask, tags, _ = _random_batch(seed, dtype)
    ours_logits, reference_logits = logits.clone().requires_grad_(), logits.clone().requires_grad_()
    ours = crf.log_likelihood(ours_logits, tags, mask)
    reference = torch.stack(
        [crf(reference_logits[row : row + 1], tags[row : row + 1], mask[row : row + 1]) for row in range(len(tags))]
    )
    tolerance = 1e-4 if dtype == torch.float32 else 1e-10
    assert ours.dtype == dtype
    torch.testing.assert_close(ours, reference, atol=tolerance, rtol=0)
    parameters = [parameter for parameter in crf.parameters() if parameter.requires_grad]
    ours_grads = torch.autograd.grad(ours.sum(), [ours_logits, *parameters])
    reference_grads = torch.autograd.grad(reference.sum(), [reference_logits, *parameters])
    assert len(ours_grads) == (4 if include_start_end else 2)
    for got, wanted in zip(ours_grads, reference_grads):
        torch.testing.assert_close(got, wanted, atol=tolerance * 10, rtol=0)
    assert not ours_grads[0][~mask].any()  # padding gets no gradient


@pytest.mark.parametrize("num_steps", [1, 2, 5, 8, 37])
def test_the_two_schedules_agree_in_outputs_and_gradients(num_steps):
    logits, mask, tags, _ = _random_batch(num_steps, torch.float64, num_steps=num_steps)
    results = {}
    for schedule in SCHEDULES:
        crf = _crf(True, True, 3, schedule).double()
        leaf = logits.clone().requires_grad_()
        likelihood = crf.log_likelihood(leaf, tags, mask)
        trained = [parameter for parameter in crf.parameters() if parameter.requires_grad]
        gradients = torch.autograd.grad(likelihood.sum(), [leaf, *trained])
        passes = crf.forward_backward(logits, mask)
        marginals = (passes.log_alpha + passes.log_beta - passes.log_partition.view(-1, 1, 1)).exp() * mask[..., None]
        results[schedule] = (crf.viterbi(logits, mask), likelihood, gradients, passes.log_partition, marginals)
    steps, scan = results["steps"], results["scan"]
    assert torch.equal(steps[0].tags, scan[0].tags)
    torch.testing.assert_close(steps[0].scores, scan[0].scores)
    for got, wanted in zip(scan[1:], steps[1:]):
        torch.testing.assert_close(got, wanted)


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_marginals_are_the_gradient_of_the_log_partition(schedule):
    crf = _crf(True, True, 1, schedule).double()
    logits, mask, _, _ = _random_batch(1, torch.float64)
    leaf = logits.clone().requires_grad_()
    passes = crf.forward_backward(leaf, mask)
    (gradient,) = torch.autograd.grad(passes.log_partition.sum(), leaf)
    with torch.inference_mode():
        explicit = crf.forward_backward(logits, mask)
    marginals = (explicit.log_alpha + explicit.log_beta - explicit.log_partition.view(-1, 1, 1)).exp()
    torch.testing.assert_close(marginals * mask[..., None], gradient)


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_gradcheck_of_the_likelihood_and_of_the_forward_scores(schedule):
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 5, 4, dtype=torch.float64, generator=generator, requires_grad=True)
    scores = [
        torch.randn(*shape, dtype=torch.float64, generator=generator, requires_grad=True)
        for shape in ((4, 4), (4,), (4,))
    ]
    mask = torch.tensor([[True] * 5, [True] * 3 + [False] * 2, [True] + [False] * 4])
    tags = torch.randint(4, (3, 5), generator=generator)

    def likelihood(logits, transitions, start, end):
        return chain_log_likelihood(ChainScores(transitions, start, end), logits, tags, mask, schedule)

    def partition(logits, transitions, start, end):
        return forward_backward(ChainScores(transitions, start, end), logits, mask, schedule).log_partition

    assert torch.autograd.gradcheck(likelihood, (logits, *scores))
    assert torch.autograd.gradcheck(partition, (logits, *scores))
    first = torch.randn(3, 4, dtype=torch.float64, generator=generator, requires_grad=True)
    assert torch.autograd.gradcheck(lambda *inputs: forward_scores(*inputs, LOG, schedule), (first, scores[0], logits))


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_inference_mode_gives_what_no_grad_gives_and_training_follows(schedule):
    crf = _crf(True, True, 2, schedule)
    scorer = CrfScorer(crf)
    logits, mask, tags, _ = _random_batch(2, torch.float32)
    with torch.no_grad():
        expected = (crf.viterbi(logits, mask).tags, crf.log_likelihood(logits, tags, mask))
        expected_posteriors = scorer.posteriors(logits, mask, expected[0])
    for _ in range(2):
        with torch.inference_mode():
            paths = crf.viterbi(logits, mask).tags
            likelihood = crf.log_likelihood(logits, tags, mask)
            posteriors = scorer.posteriors(logits, mask, paths)
        assert torch.equal(paths, expected[0]) and torch.equal(likelihood, expected[1])
        for got, wanted in zip(posteriors, expected_posteriors):
            assert torch.equal(got, wanted)
        # A training step between predictions: the next prediction follows the new scores.
        optimizer = torch.optim.SGD(crf.parameters(), lr=1.0)
        (-crf.log_likelihood(logits, tags, mask).sum()).backward()
        optimizer.step()
        with torch.no_grad():
            expected = (crf.viterbi(logits, mask).tags, crf.log_likelihood(logits, tags, mask))
            expected_posteriors = scorer.posteriors(logits, mask, expected[0])
        for row, (path, _) in enumerate(crf.viterbi_tags(logits, mask)):
            assert expected[0][row, : len(path)].tolist() == path


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_logits_are_scored_in_float32(dtype):
    crf = _crf(True, True, 2)
    logits, mask, tags, _ = _random_batch(2, torch.float32)
    rounded = logits.to(dtype)
    with torch.autocast("cpu", dtype=dtype):
        paths = crf.viterbi(rounded, mask).tags
        likelihood = crf.log_likelihood(rounded, tags, mask)
    assert torch.equal(paths, crf.viterbi(rounded.float(), mask).tags)
    assert likelihood.dtype == torch.float32
    torch.testing.assert_close(likelihood, crf.log_likelihood(rounded.float(), tags, mask))


def test_rows_without_steps_decode_to_nothing():
    crf = _crf(True, True, 0)
    logits = torch.randn(2, 3, NUM_TAGS)
    mask = torch.tensor([[True, True, False], [False, False, False]])
    decoded = crf.viterbi(logits, mask)
    assert decoded.tags[1].tolist() == [0, 0, 0] and decoded.scores[1].item() == 0.0
    assert decoded.tags[0, :2].tolist() == crf.viterbi_tags(logits[:1], mask[:1])[0][0]
    assert crf.viterbi(logits[:, :0], mask[:, :0]).tags.shape == (2, 0)


def test_keeps_allennlps_parameters_and_checks_its_arguments():
    crf = _crf(True, True, 0)
    reference = ConditionalRandomField(NUM_TAGS, allowed_transitions("BIOUL", LABELS))
    assert isinstance(crf, ConditionalRandomField)
    assert crf.state_dict().keys() == reference.state_dict().keys()
    reference.load_state_dict(crf.state_dict())
    logits, mask, _, lengths = _random_batch(0, torch.float32)
    assert [path for path, _ in reference.viterbi_tags(logits, mask)] == [
        row[:length] for row, length in zip(crf.viterbi(logits, mask).tags.tolist(), lengths)
    ]
    assert crf.schedule_on(torch.device("cpu")) == "steps" and crf.schedule_on(torch.device("cuda")) == "scan"
    with pytest.raises(ConfigurationError, match="schedule"):
        LinearChainCrf(NUM_TAGS, schedule="parallel")
    with pytest.raises(ValueError, match=r"logits \(batch_size, num_steps, 13\)"):
        crf.viterbi(logits[..., :5], mask)
