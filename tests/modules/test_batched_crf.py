"""
The batched Viterbi and likelihood against allennlp's `ConditionalRandomField`, which stays the
reference: `viterbi_tags` (one instance at a time) and `forward` (the summed log-likelihood).
"""

import itertools

import pytest
import torch
from allennlp.modules.conditional_random_field import ConditionalRandomField, allowed_transitions

from nerzoo.modules.crf.batched_crf import crf_log_likelihood, viterbi_decode

TYPES = ["PER", "LOC", "ORG"]
LABELS = dict(enumerate(["O"] + [f"{p}-{t}" for t in TYPES for p in "BILU"]))
NUM_TAGS = len(LABELS)


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


def _crf(constrained, include_start_end, seed):
    torch.manual_seed(seed)
    constraints = allowed_transitions("BIOUL", LABELS) if constrained else None
    crf = ConditionalRandomField(NUM_TAGS, constraints, include_start_end_transitions=include_start_end)
    with torch.no_grad():
        crf.transitions.mul_(3)
    return crf


CASES = list(itertools.product([True, False], [True, False], [torch.float32, torch.float64], range(3)))


@pytest.mark.parametrize("constrained,include_start_end,dtype,seed", CASES)
def test_viterbi_equals_viterbi_tags(constrained, include_start_end, dtype, seed):
    crf = _crf(constrained, include_start_end, seed).to(dtype)
    logits, mask, _, lengths = _random_batch(seed, dtype)
    expected = crf.viterbi_tags(logits, mask)
    decoded = viterbi_decode(crf, logits, mask)
    assert decoded.tags.dtype == torch.long and decoded.tags.shape == mask.shape
    for row, (path, score) in enumerate(expected):
        assert decoded.tags[row, : lengths[row]].tolist() == path
        # allennlp decodes in float32 whatever the input dtype.
        assert decoded.scores[row].item() == pytest.approx(score, rel=1e-5, abs=1e-3)
    assert not decoded.tags[~mask].any()


@pytest.mark.parametrize("constrained,include_start_end,dtype,seed", CASES)
def test_log_likelihood_equals_allennlp_row_by_row_with_gradients(constrained, include_start_end, dtype, seed):
    crf = _crf(constrained, include_start_end, seed).to(dtype)
    logits, mask, tags, _ = _random_batch(seed, dtype)
    batched_logits = logits.clone().requires_grad_()
    reference_logits = logits.clone().requires_grad_()

    ours = crf_log_likelihood(crf, batched_logits, tags, mask)
    reference = torch.stack(
        [crf(reference_logits[row : row + 1], tags[row : row + 1], mask[row : row + 1]) for row in range(len(tags))]
    )
    tolerance = 1e-4 if dtype == torch.float32 else 1e-10
    assert ours.dtype == dtype
    assert torch.allclose(ours, reference, atol=tolerance, rtol=0)
    # The batch's sum is what allennlp's forward returns for the whole batch.
    assert ours.sum().item() == pytest.approx(crf(logits, tags, mask).item(), abs=tolerance * len(tags))

    parameters = [parameter for parameter in crf.parameters() if parameter.requires_grad]
    ours_grads = torch.autograd.grad(ours.sum(), [batched_logits, *parameters])
    reference_grads = torch.autograd.grad(reference.sum(), [reference_logits, *parameters])
    assert len(ours_grads) == (4 if include_start_end else 2)
    for got, wanted in zip(ours_grads, reference_grads):
        assert torch.allclose(got, wanted, atol=tolerance * 10, rtol=0)
    # Padding gets no gradient.
    assert not ours_grads[0][~mask].any()


def test_log_likelihood_is_a_normalised_distribution():
    """exp(log P(y)) over every tag sequence of a short row sums to one."""
    crf = _crf(False, True, 0).double()
    logits = torch.randn(1, 3, NUM_TAGS, dtype=torch.float64)
    mask = torch.ones(1, 3, dtype=torch.bool)
    paths = torch.tensor(list(itertools.product(range(NUM_TAGS), repeat=3)))
    log_probabilities = crf_log_likelihood(crf, logits.expand(len(paths), -1, -1), paths, mask.expand(len(paths), -1))
    assert log_probabilities.exp().sum().item() == pytest.approx(1.0, abs=1e-9)


def test_viterbi_path_has_the_highest_likelihood_under_constraints():
    crf = _crf(True, True, 1).double()
    logits = torch.randn(1, 3, NUM_TAGS, dtype=torch.float64) * 2
    mask = torch.ones(1, 3, dtype=torch.bool)
    allowed = crf._constraint_mask
    paths = [
        path
        for path in itertools.product(range(NUM_TAGS), repeat=3)
        if allowed[NUM_TAGS, path[0]]
        and allowed[path[-1], NUM_TAGS + 1]
        and all(allowed[a, b] for a, b in zip(path, path[1:]))
    ]
    scores = crf_log_likelihood(
        crf, logits.expand(len(paths), -1, -1), torch.tensor(paths), mask.expand(len(paths), -1)
    )
    best = paths[int(scores.argmax())]
    assert viterbi_decode(crf, logits, mask).tags[0].tolist() == list(best)


def test_half_precision_logits_are_scored_in_float32():
    crf = _crf(True, True, 2)
    logits, mask, tags, _ = _random_batch(2, torch.float32)
    rounded = logits.to(torch.bfloat16)
    assert torch.equal(viterbi_decode(crf, rounded, mask).tags, viterbi_decode(crf, rounded.float(), mask).tags)
    likelihood = crf_log_likelihood(crf, rounded, tags, mask)
    assert likelihood.dtype == torch.float32
    assert torch.allclose(likelihood, crf_log_likelihood(crf, rounded.float(), tags, mask))


def test_rows_without_steps_decode_to_nothing():
    crf = _crf(True, True, 0)
    logits = torch.randn(2, 3, NUM_TAGS)
    mask = torch.tensor([[True, True, False], [False, False, False]])
    decoded = viterbi_decode(crf, logits, mask)
    assert decoded.tags[1].tolist() == [0, 0, 0] and decoded.scores[1].item() == 0.0
    assert decoded.tags[0, :2].tolist() == crf.viterbi_tags(logits[:1], mask[:1])[0][0]


def test_float16_autocast_decodes_and_scores_in_float32():
    crf = _crf(True, True, 2)
    logits, mask, tags, _ = _random_batch(2, torch.float32)
    rounded = logits.half()
    with torch.autocast("cpu", dtype=torch.float16):
        paths = viterbi_decode(crf, rounded, mask).tags
        likelihood = crf_log_likelihood(crf, rounded, tags, mask)
    assert torch.equal(paths, viterbi_decode(crf, rounded.float(), mask).tags)
    assert likelihood.dtype == torch.float32
    assert torch.allclose(likelihood, crf_log_likelihood(crf, rounded.float(), tags, mask))


def test_decoding_follows_every_change_of_the_scores():
    """The constrained scores are kept between decodings while the CRF's scores stay the same."""
    crf = _crf(True, True, 0)
    logits, mask, _, lengths = _random_batch(0, torch.float32)
    for change in (None, "transitions", "start_transitions", "end_transitions", "load"):
        with torch.no_grad():
            if change == "load":
                state = {name: torch.randn_like(value) * 3 for name, value in crf.state_dict().items()}
                state["_constraint_mask"] = crf._constraint_mask.clone()
                crf.load_state_dict(state)
            elif change is not None:
                getattr(crf, change).add_(torch.randn_like(getattr(crf, change)) * 5)
            decoded = viterbi_decode(crf, logits, mask)
        for row, (path, _) in enumerate(crf.viterbi_tags(logits, mask)):
            assert decoded.tags[row, : lengths[row]].tolist() == path, change
