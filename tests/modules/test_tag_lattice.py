"""The partial-annotation likelihood against brute-force enumeration of the tag paths it allows."""

import itertools

import pytest
import torch

from nerzoo.data.partial_tags import OPEN
from nerzoo.modules.crf.linear_chain_crf import LinearChainCrf, chain_log_likelihood, partial_log_likelihood
from nerzoo.modules.crf.tag_lattice import OpenTokens, annotation_weights, continuations

LABELS = {
    "BIO": ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"],
    "BIOUL": ["O", "B-PER", "I-PER", "L-PER", "U-PER", "U-LOC"],
}


def _case(scheme, seed):
    generator = torch.Generator().manual_seed(seed)
    labels = dict(enumerate(LABELS[scheme]))
    crf = LinearChainCrf(len(labels))
    with torch.no_grad():
        for parameter in crf.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator))
    logits = torch.randn(3, 4, len(labels), generator=generator, requires_grad=True)
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0], [1, 0, 0, 0]], dtype=torch.bool)
    if scheme == "BIO":  # the token after a marked PER may not continue it
        tags = torch.tensor([[OPEN, 1, OPEN, OPEN], [2, OPEN, 0, 0], [OPEN, 0, 0, 0]])
    else:
        tags = torch.tensor([[OPEN, 1, 3, OPEN], [4, OPEN, 5, 0], [OPEN, 0, 0, 0]])
    return labels, crf, logits, tags, mask


def _score(crf, logits, path):
    scores = crf.chain_scores(constrained=False)
    value = scores.start[path[0]] + scores.end[path[-1]] + sum(logits[t, tag] for t, tag in enumerate(path))
    return value + sum(scores.transitions[a, b] for a, b in zip(path, path[1:]))


def _brute_force(labels, crf, logits, tags, mask, scheme):
    rows = []
    for row in range(logits.size(0)):
        length = int(mask[row].sum())
        paths = list(itertools.product(range(len(labels)), repeat=length))
        scores = torch.stack([_score(crf, logits[row], path) for path in paths])

        def allowed(path, row=row):
            for t, tag in enumerate(path):
                fixed = int(tags[row, t])
                if fixed != OPEN and tag != fixed:
                    return False
                # BIO: an open token does not continue the marked span before it.
                if fixed == OPEN and t > 0 and int(tags[row, t - 1]) != OPEN and scheme == "BIO":
                    before = labels[int(tags[row, t - 1])]
                    if before != "O" and labels[tag] == "I-" + before[2:]:
                        return False
            return True

        keep = torch.tensor([allowed(path) for path in paths])
        rows.append(torch.logsumexp(scores[keep], 0) - torch.logsumexp(scores, 0))
    return torch.stack(rows)


@pytest.mark.parametrize("schedule", ["steps", "scan"])
@pytest.mark.parametrize("scheme", sorted(LABELS))
def test_equals_brute_force_value_and_gradient(scheme, schedule):
    labels, crf, logits, tags, mask = _case(scheme, 0)
    weights = annotation_weights(tags, len(labels), continuations(labels, scheme))
    scores = crf.chain_scores(constrained=False)
    got = partial_log_likelihood(scores, logits, tags, mask, weights, schedule)
    wanted = _brute_force(labels, crf, logits, tags, mask, scheme)
    torch.testing.assert_close(got, wanted, rtol=1e-5, atol=1e-5)
    got_grads = torch.autograd.grad(got.sum(), [logits, crf.transitions, crf.start_transitions])
    wanted_grads = torch.autograd.grad(wanted.sum(), [logits, crf.transitions, crf.start_transitions])
    for have, want in zip(got_grads, wanted_grads):
        torch.testing.assert_close(have, want, rtol=1e-4, atol=1e-5)


def test_a_fully_marked_row_is_chain_log_likelihood_to_the_bit_and_an_open_one_adds_nothing():
    labels, crf, logits, _, mask = _case("BIOUL", 1)
    tags = torch.tensor([[0, 1, 3, 0], [4, 0, 5, 0], [OPEN, 0, 0, 0]])
    scores = crf.chain_scores(constrained=False)
    weights = annotation_weights(tags, len(labels), continuations(labels, "BIOUL"))
    got = partial_log_likelihood(scores, logits, tags, mask, weights, "steps")
    whole = chain_log_likelihood(scores, logits, tags.clamp_min(0), mask, "steps")
    assert torch.equal(got[:2], whole[:2])
    assert got[2] == 0
    (gradient,) = torch.autograd.grad(got[2], logits)
    assert not gradient.any()


def test_open_weights_weigh_the_open_tokens_tags():
    labels, crf, logits, tags, mask = _case("BIOUL", 2)
    prior = torch.log(torch.tensor([0.9] + [0.02] * 5))
    weights = annotation_weights(tags, len(labels), continuations(labels, "BIOUL"), prior)
    assert torch.equal(weights[0, 0], prior) and torch.equal(weights[2, 0], prior)
    assert weights[0, 1, 1] == 0 and (weights[0, 1, [0, 2, 3, 4, 5]] < -1000).all()


def test_the_entity_ratio_term_is_zero_within_the_margin_and_pulls_the_expected_ratio_towards_rho():
    labels, crf, logits, _, mask = _case("BIOUL", 3)
    paths = list(itertools.product(range(len(labels)), repeat=4))
    probabilities = torch.softmax(torch.stack([_score(crf, logits[0], path) for path in paths]), 0)
    expected = sum(p * sum(tag != 0 for tag in path) for p, path in zip(probabilities, paths)) / 4
    row = mask[:1]
    within = OpenTokens(entity_ratio=float(expected) + 0.01, ratio_margin=0.05)
    assert within.ratio_loss(crf, logits[:1], row, 0) == 0
    below = OpenTokens(entity_ratio=0.01, ratio_margin=0.0, ratio_weight=2.0)
    term = below.ratio_loss(crf, logits[:1], row, 0)
    torch.testing.assert_close(term, 2.0 * (expected - 0.01), rtol=1e-5, atol=1e-6)
    (gradient,) = torch.autograd.grad(term, logits)
    assert torch.isfinite(gradient).all() and gradient[0, :, 0].sum() < 0  # more O lowers the term


def test_the_entity_ratio_term_reads_no_step_past_a_rows_end():
    labels, crf, logits, _, mask = _case("BIOUL", 4)
    padded = torch.cat([logits.detach(), torch.full((3, 60, len(labels)), 50.0)], dim=1).requires_grad_()
    longer = torch.nn.functional.pad(mask, (0, 60))
    terms = [
        OpenTokens(entity_ratio=0.9).ratio_loss(crf, values, rows, 0)
        for values, rows in ((padded, longer), (logits, mask))
    ]
    torch.testing.assert_close(terms[0], terms[1])
    (gradient,) = torch.autograd.grad(terms[0], padded)
    assert torch.isfinite(gradient).all() and not gradient[:, 4:].any()
