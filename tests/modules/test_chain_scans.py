"""
The parallel scans of `nerzoo.modules.crf.chain_scans` against plain loops, and the CRF functions that use
them (Viterbi, likelihood, forward-backward) against their step-by-step recursions, which run on the CPU
and where a batch is too large to scan (the scans forced here with `NERZOO_CRF_SCANS=always`, the
recursions with `MAX_SCAN_ELEMENTS = 0`), and a batch too large for one scan in pieces.
"""

import pytest
import torch

from nerzoo.modules.crf import chain_scans, crf_marginals
from nerzoo.modules.crf.batched_crf import crf_log_likelihood, sequence_log_likelihood, viterbi_decode
from nerzoo.modules.crf.crf_marginals import forward_backward
from tests import OperatorCalls
from tests.modules.test_batched_crf import NUM_TAGS, _crf, _random_batch


def _loop_products(matrices, product, suffix=False):
    steps = range(matrices.size(1) - 1, -1, -1) if suffix else range(matrices.size(1))
    results, running = {}, None
    for t in steps:
        step = matrices[:, t]
        running = step if running is None else (product(step, running) if suffix else product(running, step))
        results[t] = running
    return torch.stack([results[t] for t in range(matrices.size(1))], dim=1)


@pytest.mark.parametrize("count", [1, 2, 3, 7, 8, 13])
@pytest.mark.parametrize(
    "product",
    [chain_scans.log_product, chain_scans.max_product, chain_scans.rescaled_log_product],
    ids=["log", "max", "rescaled-log"],
)
def test_prefix_suffix_and_chain_products_equal_loops(count, product):
    matrices = torch.randn(3, count, 4, 4, generator=torch.Generator().manual_seed(count), dtype=torch.float64)
    prefix = chain_scans.prefix_products(matrices, product)
    suffix = chain_scans.suffix_products(matrices, product)
    torch.testing.assert_close(prefix, _loop_products(matrices, product))
    torch.testing.assert_close(suffix, _loop_products(matrices, product, suffix=True))
    if product is chain_scans.log_product and count % 2 == 0:  # the likelihood's rounds: consecutive pairs
        pairs = chain_scans.pair_sums(matrices, 1, spacing=2).logsumexp(dim=3)
        torch.testing.assert_close(pairs, product(matrices[:, 0::2], matrices[:, 1::2]))
    if product is chain_scans.rescaled_log_product:
        torch.testing.assert_close(prefix, chain_scans.prefix_products(matrices, chain_scans.log_product))


@pytest.mark.parametrize("count", [1, 2, 5, 16])
def test_following_backpointers_equals_walking_back(count):
    generator = torch.Generator().manual_seed(count)
    backpointers = torch.randint(5, (4, count, 5), generator=generator)
    last = torch.randint(5, (4,), generator=generator)
    expected, tag = [], last
    for t in range(count - 1, -1, -1):
        tag = backpointers[:, t].gather(1, tag.unsqueeze(1)).squeeze(1)
        expected.append(tag)
    expected = torch.stack([*expected[::-1], last], 1)
    with_last_map = torch.cat([backpointers, last.view(4, 1, 1).expand(4, 1, 5)], dim=1)
    assert chain_scans.follow_backpointers(with_last_map).tolist() == expected.tolist()


def _both_ways(monkeypatch, function):
    monkeypatch.setenv(chain_scans.SCANS_VARIABLE, "always")
    scanned = function()
    monkeypatch.setattr(chain_scans, "MAX_SCAN_ELEMENTS", 0)
    stepwise = function()
    monkeypatch.undo()
    return scanned, stepwise


CASES = [
    (constrained, dtype, steps)
    for constrained in (True, False)
    for dtype in (torch.float32, torch.float64)
    for steps in (1, 2, 6, 17)
]


@pytest.mark.parametrize("constrained,dtype,num_steps", CASES)
def test_scans_equal_the_stepwise_recursions(monkeypatch, constrained, dtype, num_steps):
    crf = _crf(constrained, True, seed=num_steps).to(dtype)
    logits, mask, tags, _ = _random_batch(num_steps, dtype, num_steps=num_steps)
    tolerance = {"atol": 1e-4, "rtol": 1e-5} if dtype == torch.float32 else {"atol": 1e-9, "rtol": 1e-9}

    scanned, stepwise = _both_ways(monkeypatch, lambda: viterbi_decode(crf, logits, mask))
    assert scanned.tags.tolist() == stepwise.tags.tolist()
    torch.testing.assert_close(scanned.scores, stepwise.scores, **tolerance)

    def likelihood():
        leaf = logits.clone().requires_grad_()
        value = crf_log_likelihood(crf, leaf, tags, mask)
        weights = torch.linspace(-1.0, 2.0, value.size(0), dtype=dtype)  # a different gradient per row
        scores = [crf.transitions, crf.start_transitions, crf.end_transitions]
        return value, torch.autograd.grad((value * weights).sum(), [leaf, *scores])

    (scanned, scanned_grads), (stepwise, stepwise_grads) = _both_ways(monkeypatch, likelihood)
    torch.testing.assert_close(scanned, stepwise, **tolerance)
    for got, wanted in zip(scanned_grads, stepwise_grads):
        torch.testing.assert_close(got, wanted, **tolerance)

    # In float64 with logsumexp rounds and with rescaled matrix products (a batch this small takes
    # logsumexp unless told otherwise).
    for rescaled_from in [chain_scans.RESCALED_FROM_ELEMENTS] + ([0] if dtype == torch.float64 else []):
        monkeypatch.setattr(chain_scans, "RESCALED_FROM_ELEMENTS", rescaled_from)
        scanned, stepwise = _both_ways(monkeypatch, lambda: forward_backward(crf, logits, mask))
        torch.testing.assert_close(scanned.log_partition, stepwise.log_partition, **tolerance)
        valid = mask.unsqueeze(-1).expand(-1, -1, NUM_TAGS)
        # Forbidden tags score about -10000 either way: compared where the model allows them.
        allowed = valid & (stepwise.log_alpha > -5000) & (stepwise.log_beta > -5000)
        torch.testing.assert_close(scanned.log_alpha[allowed], stepwise.log_alpha[allowed], **tolerance)
        torch.testing.assert_close(scanned.log_beta[allowed], stepwise.log_beta[allowed], **tolerance)


def test_a_chain_too_long_for_one_row_runs_step_by_step(monkeypatch):
    assert chain_scans.fits(10, 40, 17) and not chain_scans.fits(256, 124, 17)
    assert chain_scans.rows_per_scan(124, 17) == 222 and chain_scans.rows_per_scan(27_321, 17) == 0
    called = []
    monkeypatch.setattr(chain_scans, "prefix_products", lambda *args: called.append(args))
    monkeypatch.setenv(chain_scans.SCANS_VARIABLE, "always")
    monkeypatch.setattr(chain_scans, "MAX_SCAN_ELEMENTS", 0)
    logits, mask, _, _ = _random_batch(0, torch.float32)
    viterbi_decode(_crf(True, True, 0), logits, mask)
    assert not called


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_a_batch_too_large_for_one_scan_is_scanned_in_pieces(monkeypatch, dtype):
    """A batch of 8 sentences of 9 steps scanned in pieces gives what one scan gives."""
    crf = _crf(True, True, seed=7).to(dtype)
    logits, mask, tags, _ = _random_batch(7, dtype, batch_size=8, num_steps=9)

    def run():
        leaf = logits.clone().requires_grad_()
        likelihood = crf_log_likelihood(crf, leaf, tags, mask)
        weights = torch.linspace(-1.0, 2.0, likelihood.size(0), dtype=dtype)
        gradients = torch.autograd.grad((likelihood * weights).sum(), [leaf, crf.transitions])
        return viterbi_decode(crf, logits, mask), likelihood, gradients, forward_backward(crf, logits, mask)

    monkeypatch.setenv(chain_scans.SCANS_VARIABLE, "always")
    monkeypatch.setattr(chain_scans, "RESCALED_FROM_ELEMENTS", 0)  # float64 forward-backward: matrix products
    whole_paths, whole_likelihood, whole_gradients, whole_marginals = run()
    pieces = []
    in_pieces = chain_scans.in_pieces
    monkeypatch.setattr(chain_scans, "in_pieces", lambda rows, *args: pieces.append(rows) or in_pieces(rows, *args))
    # Room for 45 rows of steps: 2 rows of the likelihood's 17 (9 padded to a power of two, plus
    # one), 5 of Viterbi's and forward-backward's 9; in float64 forward-backward's rounds are matrix
    # products, K times smaller, so the whole batch fits.
    monkeypatch.setattr(chain_scans, "MAX_SCAN_ELEMENTS", 45 * NUM_TAGS**3 * (2 if dtype == torch.float64 else 1))
    paths, likelihood, gradients, marginals = run()
    assert pieces == ([2, 5, 5] if dtype == torch.float32 else [2, 5, 8])
    if dtype == torch.float64:
        pieces.clear()
        monkeypatch.setattr(chain_scans, "MAX_SCAN_ELEMENTS", 45 * NUM_TAGS**2 * 2)
        marginals = forward_backward(crf, logits, mask)
        assert pieces == [5]
    assert paths.tags.tolist() == whole_paths.tags.tolist()
    tolerance = {"atol": 1e-5, "rtol": 1e-5} if dtype == torch.float32 else {"atol": 1e-12, "rtol": 1e-12}
    torch.testing.assert_close(paths.scores, whole_paths.scores, **tolerance)
    torch.testing.assert_close(likelihood, whole_likelihood, **tolerance)
    for got, wanted in zip([*gradients, *marginals[:3]], [*whole_gradients, *whole_marginals[:3]]):
        torch.testing.assert_close(got, wanted, **tolerance)


@pytest.mark.parametrize(
    "policy,device,scans",
    [
        (None, "cpu", False),
        (None, "meta", True),
        ("always", "cpu", True),
        ("never", "meta", False),
        ("accelerators", "meta", True),
    ],
)
def test_scans_run_on_accelerators_and_where_asked(monkeypatch, policy, device, scans):
    if policy is None:
        monkeypatch.delenv(chain_scans.SCANS_VARIABLE, raising=False)
    else:
        monkeypatch.setenv(chain_scans.SCANS_VARIABLE, policy)
    assert chain_scans.scan_rows(10, 16, 17, torch.float32, torch.device(device)) == (10 if scans else 0)
    # A batch too large for one round is scanned in pieces of as many rows as fit.
    assert chain_scans.scan_rows(256, 124, 17, torch.float32, torch.device(device)) == (222 if scans else 0)


def test_an_unknown_scan_policy_is_a_clear_error(monkeypatch):
    monkeypatch.setenv(chain_scans.SCANS_VARIABLE, "sometimes")
    logits, mask, _, _ = _random_batch(0, torch.float32)
    with pytest.raises(ValueError, match="NERZOO_CRF_SCANS='sometimes': expected one of accelerators, always, never"):
        viterbi_decode(_crf(True, True, 0), logits, mask)


@pytest.mark.parametrize("include_start_end", [True, False])
def test_the_scanned_likelihoods_written_out_gradient_passes_gradcheck(monkeypatch, include_start_end):
    monkeypatch.setenv(chain_scans.SCANS_VARIABLE, "always")
    crf = _crf(False, include_start_end, seed=3).double()
    logits, mask, tags, _ = _random_batch(3, torch.float64, batch_size=4, num_steps=6)
    scores = [crf.transitions.detach().clone().requires_grad_()]
    if include_start_end:
        scores += [crf.start_transitions.detach().clone().requires_grad_(), crf.end_transitions.detach().clone()]
        scores[-1].requires_grad_()

    def likelihood(logits, *scores):
        transitions, start, end = (*scores, None, None)[:3]
        return sequence_log_likelihood(transitions, start, end, logits, tags, mask)

    assert torch.autograd.gradcheck(likelihood, (logits.clone().requires_grad_(), *scores))


def test_the_scanned_likelihood_costs_few_operator_calls(monkeypatch):
    """
    On a GPU each operator call of a small batch is about one kernel launch: the likelihood and its
    gradient cost ten calls per round (four forward, six backward) around about 50 (the transfer
    matrices, the gold path in one gather and one `scatter_add`, the gradients' sums).
    """
    monkeypatch.setenv(chain_scans.SCANS_VARIABLE, "always")
    crf = _crf(False, True, seed=4)

    def calls(num_steps: int) -> int:
        logits = torch.randn(3, num_steps, NUM_TAGS, requires_grad=True)
        tags = torch.randint(NUM_TAGS, (3, num_steps))
        counter = OperatorCalls()
        with counter:
            crf_log_likelihood(crf, logits, tags, torch.ones(3, num_steps, dtype=torch.bool)).sum().backward()
        return counter.calls

    calls(16)  # the padded steps' identity matrix is made once
    per_round = (calls(65) - calls(17)) / 2  # 7 rounds against 5 (chains padded to 128 and 32 steps)
    assert 0 < per_round <= 10
    assert calls(16) <= 95  # 4 rounds


def test_forward_backward_in_one_scan_equals_two(monkeypatch):
    """Where twice the batch fits, alpha and beta come from one scan; else from a prefix and a suffix scan."""
    monkeypatch.setenv(chain_scans.SCANS_VARIABLE, "always")
    monkeypatch.setattr(chain_scans, "RESCALED_FROM_ELEMENTS", 0)
    crf = _crf(True, True, seed=5).double()
    logits, mask, _, _ = _random_batch(5, torch.float64, num_steps=7)
    suffix_scans = []
    suffix = chain_scans.suffix_products
    monkeypatch.setattr(chain_scans, "suffix_products", lambda *args: suffix_scans.append(args) or suffix(*args))
    both = forward_backward(crf, logits, mask)
    assert not suffix_scans
    # Room for one batch of this shape but not for two (float64 rounds of matrix products): the
    # prefix and suffix scans run apart.
    monkeypatch.setattr(chain_scans, "MAX_SCAN_ELEMENTS", logits.size(0) * 6 * NUM_TAGS**2 * 2)
    apart = forward_backward(crf, logits, mask)
    assert len(suffix_scans) == 1
    for got, wanted in zip(both[:3], apart[:3]):
        torch.testing.assert_close(got, wanted, atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("scale", [30.0, 1000.0])
def test_forward_backward_where_the_rescaled_products_clamp(monkeypatch, scale):
    """
    Emissions `scale` nats apart: at 30 the float64 scans' rescaled products are exact; at 1000 some
    entries clamp where they matter, the consistency check sees it and the exact recursions run.
    Either way the marginals are the step-by-step recursions'.
    """
    crf = _crf(True, True, seed=11).double()
    logits, mask, _, _ = _random_batch(11, torch.float64, batch_size=4, num_steps=40)
    logits = logits / logits.std() * scale
    monkeypatch.setattr(chain_scans, "RESCALED_FROM_ELEMENTS", 0)
    checks = []
    consistent = crf_marginals._consistent
    monkeypatch.setattr(crf_marginals, "_consistent", lambda result: checks.append(consistent(result)) or checks[-1])
    scanned, stepwise = _both_ways(monkeypatch, lambda: forward_backward(crf, logits, mask))
    assert checks == [scale < 100]
    torch.testing.assert_close(
        crf_marginals.tag_marginals(scanned, mask), crf_marginals.tag_marginals(stepwise, mask), atol=1e-9, rtol=0
    )
    torch.testing.assert_close(scanned.log_partition, stepwise.log_partition, atol=1e-9, rtol=1e-12)


@pytest.mark.parametrize("batch_size,num_steps,rescaled", [(10, 16, False), (64, 40, True)])
def test_large_float64_batches_take_rescaled_products(monkeypatch, batch_size, num_steps, rescaled):
    """Rounds of more than `RESCALED_FROM_ELEMENTS` sums are matrix products; a small batch's, logsumexps."""
    monkeypatch.setenv(chain_scans.SCANS_VARIABLE, "always")
    crf = _crf(True, True, seed=3).double()
    logits, mask, _, _ = _random_batch(3, torch.float64, batch_size=batch_size, num_steps=num_steps)
    products = []
    monkeypatch.setattr(chain_scans, "prefix_products", lambda matrices, product: products.append(product) or matrices)
    forward_backward(crf, logits, mask)
    assert products == [chain_scans.rescaled_log_product if rescaled else chain_scans.log_product]
