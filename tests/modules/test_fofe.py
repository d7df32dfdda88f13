"""
FOFE (Xu, MSc thesis, York University, 2017): nerzoo/modules/fofe/codes.py and the "fofe" Seq2VecEncoder,
checked against slow references written here (the recursion of eq. 3.1 as a Python loop in float64).
"""

import itertools
import random
from fractions import Fraction

import pytest
import torch
from allennlp.common import Params
from allennlp.common.checks import ConfigurationError
from allennlp.data import Batch, Instance, Vocabulary
from allennlp.data.fields import TextField
from allennlp.data.token_indexers import TokenCharactersIndexer
from allennlp.data.tokenizers import Token
from allennlp.modules.token_embedders import TokenEmbedder

from nerzoo.modules.fofe.codes import fofe_codes, fofe_matrix, prefix_codes, span_codes
from nerzoo.modules.seq2vec_encoders.fofe_encoder import FofeEncoder

ALPHAS = [0.3, 0.5, 0.7, 1.0]


def recursion(x, alpha, reverse=False):
    """Eq. 3.1 step by step on one sequence `(T, dim)`, float64: `z_t = alpha z_{t-1} + x_t`."""
    x = x.double()
    out = torch.zeros_like(x)
    z = torch.zeros(x.size(-1), dtype=torch.float64)
    order = range(x.size(0) - 1, -1, -1) if reverse else range(x.size(0))
    for t in order:
        z = alpha * z + x[t]
        out[t] = z
    return out


def code_of(x, alpha, reverse=False):
    """The code of a whole sequence by the recursion (zeros for an empty one)."""
    if x.size(0) == 0:
        return torch.zeros(x.size(-1), dtype=torch.float64)
    codes = recursion(x, alpha, reverse)
    return codes[0] if reverse else codes[-1]


def padded_batch(lengths, dim, dtype=torch.float64, seed=0):
    generator = torch.Generator().manual_seed(seed)
    inputs = torch.randn(len(lengths), max(lengths), dim, generator=generator, dtype=dtype)
    mask = torch.tensor([[t < n for t in range(max(lengths))] for n in lengths])
    return inputs, mask


# --------------------------------------------------------------------------- fofe_codes


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("block_size", [2, 3, 4, 64])
def test_codes_equal_the_recursion(alpha, reverse, block_size):
    lengths = [11, 7, 1, 4]
    inputs, mask = padded_batch(lengths, 5)
    codes = fofe_codes(inputs, mask, alpha, reverse=reverse, block_size=block_size)
    assert codes.shape == inputs.shape
    for row, length in enumerate(lengths):
        expected = recursion(inputs[row, :length], alpha, reverse)
        assert torch.allclose(codes[row, :length], expected, rtol=1e-12, atol=1e-12)
        assert (codes[row, length:] == 0).all()
    # float32 inputs follow the float64 recursion to float32 rounding.
    codes32 = fofe_codes(inputs.float(), mask, alpha, reverse=reverse, block_size=block_size)
    assert codes32.dtype == torch.float32
    assert torch.allclose(codes32.double(), codes, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("reverse", [False, True])
def test_masked_positions_count_as_zero_vectors(reverse):
    inputs, _ = padded_batch([9, 9], 3)
    mask = torch.tensor([[1, 1, 0, 1, 0, 0, 1, 1, 1], [0, 1, 1, 1, 1, 1, 1, 1, 0]], dtype=torch.bool)
    codes = fofe_codes(inputs, mask, 0.6, reverse=reverse, block_size=2)
    for row in range(2):
        zeroed = inputs[row] * mask[row].unsqueeze(-1)
        expected = recursion(zeroed, 0.6, reverse) * mask[row].unsqueeze(-1)
        assert torch.allclose(codes[row], expected, atol=1e-12)
    # Without a mask nothing is zeroed.
    assert torch.allclose(fofe_codes(inputs, None, 0.6, reverse)[0], recursion(inputs[0], 0.6, reverse), atol=1e-12)


def test_block_size_below_two_is_refused():
    with pytest.raises(ValueError):
        fofe_codes(torch.zeros(1, 3, 2), None, 0.5, block_size=1)


def test_alpha_one_is_a_running_bag_of_words():
    inputs, mask = padded_batch([6, 3], 4)
    assert torch.allclose(fofe_codes(inputs, mask, 1.0), inputs.cumsum(1) * mask.unsqueeze(-1), atol=1e-12)
    reversed_sums = inputs.flip(1).cumsum(1).flip(1)
    assert torch.allclose(fofe_codes(inputs, None, 1.0, reverse=True), reversed_sums, atol=1e-12)


def test_table_3_2_worked_example():
    """Thesis Table 3.2: the partial codes of w6 w4 w5 w0 w5 w4 in the 7-word vocabulary of Table 3.1."""
    ids = torch.tensor([[6, 4, 5, 0, 5, 4]])
    one_hots = torch.nn.functional.one_hot(ids, 7).double()
    # Table 3.1 writes w_0 as 1000000: component k is word w_k.

    def table(a):
        return [
            [0, 0, 0, 0, 0, 0, 1],
            [0, 0, 0, 0, 1, 0, a],
            [0, 0, 0, 0, a, 1, a**2],
            [1, 0, 0, 0, a**2, a, a**3],
            [a, 0, 0, 0, a**3, 1 + a**2, a**4],
            [a**2, 0, 0, 0, 1 + a**4, a + a**3, a**5],
        ]

    for alpha in [0.5, 0.25, 0.75]:  # dyadic: every entry is exact in float64
        codes = fofe_codes(one_hots, None, alpha)[0]
        assert torch.equal(codes, torch.tensor(table(alpha), dtype=torch.float64))
    codes = fofe_codes(one_hots, None, 0.3)[0]
    assert torch.allclose(codes, torch.tensor(table(0.3), dtype=torch.float64), rtol=1e-15, atol=0)


# --------------------------------------------------------------------------- eq. 4.1 and 4.3


@pytest.mark.parametrize("reverse", [False, True])
def test_fofe_matrix_is_eq_4_1(reverse):
    alpha = 0.3
    matrix = fofe_matrix(6, alpha, reverse=reverse, dtype=torch.float64)
    for t in range(6):
        for s in range(6):
            power = (s - t) if reverse else (t - s)
            expected = alpha**power if power >= 0 else 0.0
            assert matrix[t, s].item() == pytest.approx(expected, rel=1e-15, abs=0.0)
    assert fofe_matrix(4, 0.5).dtype == torch.float32
    assert fofe_matrix(0, 0.5).shape == (0, 0)


@pytest.mark.parametrize("alpha", [0.5, 0.8])
@pytest.mark.parametrize("reverse", [False, True])
def test_projected_form_eq_4_3(alpha, reverse):
    """(M V) U = M (V U): the code of the one-hot sequence, projected, is the code of the embeddings."""
    generator = torch.Generator().manual_seed(1)
    vocab_size, dim, length = 11, 5, 9
    ids = torch.randint(vocab_size, (2, length), generator=generator)
    embedding = torch.randn(vocab_size, dim, generator=generator, dtype=torch.float64)
    one_hots = torch.nn.functional.one_hot(ids, vocab_size).double()  # V, (2, T, vocab_size)
    matrix = fofe_matrix(length, alpha, reverse=reverse, dtype=torch.float64)  # M
    projected = matrix @ one_hots @ embedding  # (M V) U
    codes = fofe_codes(embedding[ids], None, alpha, reverse=reverse, block_size=4)  # M (V U), blockwise
    assert torch.allclose(projected, codes, atol=1e-12)
    assert torch.allclose(fofe_codes(one_hots, None, alpha, reverse=reverse) @ embedding, codes, atol=1e-12)


# --------------------------------------------------------------------------- prefix form


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("reverse", [False, True])
def test_every_span_equals_the_recursion_on_the_span(alpha, reverse):
    lengths = [9, 6]
    inputs, mask = padded_batch(lengths, 4, seed=3)
    prefix = prefix_codes(inputs, mask, alpha, reverse=reverse)
    assert prefix.shape == (2, 10, 4)
    # All spans of each row (empty ones included) in one call; the shorter row is padded with (0, 0).
    pairs = [[(i, j) for i in range(length + 1) for j in range(i, length + 1)] for length in lengths]
    most = max(len(row_pairs) for row_pairs in pairs)
    starts = torch.tensor([[i for i, _ in row_pairs] + [0] * (most - len(row_pairs)) for row_pairs in pairs])
    ends = torch.tensor([[j for _, j in row_pairs] + [0] * (most - len(row_pairs)) for row_pairs in pairs])
    spans = span_codes(prefix, starts, ends, alpha, reverse=reverse)
    assert spans.shape == (2, most, 4)
    for row in range(len(lengths)):
        for k, (i, j) in enumerate(pairs[row]):
            expected = code_of(inputs[row, i:j], alpha, reverse)
            assert torch.allclose(spans[row, k], expected, atol=1e-12), (row, i, j)
            if i == j:
                assert (spans[row, k] == 0).all()
        assert (spans[row, len(pairs[row]) :] == 0).all()


@pytest.mark.parametrize("alpha", [0.5, 0.9])
def test_context_codes_equal_the_recursion_on_the_context(alpha):
    """§5.2.1: left context incl./excl. the fragment x_i..x_{j-1} is P[j]/P[i]; right context is Q[i]/Q[j]."""
    lengths = [8, 5]
    inputs, mask = padded_batch(lengths, 3, seed=4)
    left = prefix_codes(inputs, mask, alpha)
    right = prefix_codes(inputs, mask, alpha, reverse=True)
    for row, length in enumerate(lengths):
        x = inputs[row, :length]
        assert (left[row, 0] == 0).all() and (right[row, length] == 0).all()
        for i in range(length):
            for j in range(i + 1, length + 1):
                assert torch.allclose(left[row, j], code_of(x[:j], alpha), atol=1e-12)  # incl.
                assert torch.allclose(left[row, i], code_of(x[:i], alpha), atol=1e-12)  # excl.
                assert torch.allclose(right[row, i], code_of(x[i:], alpha, True), atol=1e-12)  # incl.
                assert torch.allclose(right[row, j], code_of(x[j:], alpha, True), atol=1e-12)  # excl.


def test_prefix_codes_keep_codes_across_masked_holes():
    inputs, _ = padded_batch([7], 3, seed=5)
    mask = torch.tensor([[1, 0, 1, 1, 0, 1, 1]], dtype=torch.bool)
    zeroed = inputs[0] * mask[0].unsqueeze(-1)
    for reverse in [False, True]:
        prefix = prefix_codes(inputs, mask, 0.7, reverse=reverse)
        spans = span_codes(prefix, torch.tensor([[0, 1, 2, 3]]), torch.tensor([[7, 5, 6, 4]]), 0.7, reverse)[0]
        for k, (i, j) in enumerate([(0, 7), (1, 5), (2, 6), (3, 4)]):
            assert torch.allclose(spans[k], code_of(zeroed[i:j], 0.7, reverse), atol=1e-12)


# --------------------------------------------------------------------------- long sequences

LONG = 10_000
# Largest |float32 - float64 recursion| measured (randn inputs, dim 8, seed 0, lengths 10,000 and
# 6,001, both directions, default block size 64): alpha 0.5: codes 4.9e-7, near-end spans 3.1e-7
# (|codes| <= 5.7); alpha 0.9: codes 1.5e-6, spans 7.1e-7 (|codes| <= 10.5); alpha 1.0, running
# sums up to |263|: codes 7.8e-5, spans 2.8e-5.  The tolerances leave about 4x room.
LONG_TOLERANCES = {0.5: (2e-6, 1.5e-6), 0.9: (6e-6, 3e-6), 1.0: (3e-4, 1.2e-4)}


@pytest.fixture(scope="module")
def long_batch():
    inputs, mask = padded_batch([LONG, 6001], 8, seed=0)
    return inputs, mask


@pytest.mark.parametrize("alpha", sorted(LONG_TOLERANCES))
def test_long_sequences_in_float32_follow_the_float64_recursion(long_batch, alpha):
    inputs64, mask = long_batch
    code_tolerance, span_tolerance = LONG_TOLERANCES[alpha]
    inputs = inputs64.float()
    for reverse in [False, True]:
        codes = fofe_codes(inputs, mask, alpha, reverse=reverse)
        prefix = prefix_codes(inputs, mask, alpha, reverse=reverse)
        assert torch.isfinite(codes).all() and torch.isfinite(prefix).all()
        for row, length in enumerate([LONG, 6001]):
            expected = recursion(inputs64[row, :length], alpha, reverse)
            error = (codes[row, :length].double() - expected).abs().max().item()
            assert error < code_tolerance, (reverse, row, error)
            assert (codes[row, length:] == 0).all()
            # Spans of up to 7 words near the end (and the very start) of the sequence.
            pairs = [(i, j) for j in range(length - 9, length + 1) for i in range(max(0, j - 7), j)]
            pairs += [(0, 1), (0, 7), (3, 9)]
            starts = torch.tensor([[i for i, _ in pairs]])
            ends = torch.tensor([[j for _, j in pairs]])
            spans = span_codes(prefix[row : row + 1], starts, ends, alpha, reverse=reverse)[0]
            for k, (i, j) in enumerate(pairs):
                span_error = (spans[k].double() - code_of(inputs64[row, i:j], alpha, reverse)).abs().max().item()
                assert span_error < span_tolerance, (reverse, row, i, j, span_error)


# --------------------------------------------------------------------------- uniqueness (§3.4.2)


def sequences_to_test():
    """All sequences of length 0..5 over 3 symbols, and 300 random ones of length 6..12."""
    sequences = [seq for n in range(6) for seq in itertools.product(range(3), repeat=n)]
    rng = random.Random(0)
    longer = {tuple(rng.randrange(3) for _ in range(rng.randint(6, 12))) for _ in range(300)}
    return sequences + sorted(longer)


def one_hot_codes(sequences, alpha, vocab_size=3):
    """The left-to-right code of each whole sequence, `(num_sequences, vocab_size)`, float64."""
    longest = max(len(seq) for seq in sequences)
    ids = torch.zeros(len(sequences), max(longest, 1), dtype=torch.long)
    mask = torch.zeros(len(sequences), max(longest, 1), dtype=torch.bool)
    for row, seq in enumerate(sequences):
        ids[row, : len(seq)] = torch.tensor(seq, dtype=torch.long)
        mask[row, : len(seq)] = True
    one_hots = torch.nn.functional.one_hot(ids, vocab_size).double()
    prefix = prefix_codes(one_hots, mask, alpha)
    lengths = mask.sum(1)
    return prefix[torch.arange(len(sequences)), lengths]


@pytest.mark.parametrize("alpha", [0.5, 0.4, 0.25])
def test_codes_of_distinct_sequences_are_distinct_theorem_2(alpha):
    sequences = sequences_to_test()
    assert len(set(sequences)) == len(sequences) > 600
    codes = one_hot_codes(sequences, alpha)
    distances = torch.cdist(codes, codes, p=float("inf"))
    distances.fill_diagonal_(float("inf"))
    # For alpha <= 1/2, two codes differ at the most recent position where the sequences differ
    # by alpha^k minus at most sum_{m=k+1}^{L-1} alpha^m >= alpha^(L-1) (L = longest length), a
    # bound reached by a sequence and its suffix of length L-1.
    longest = max(len(seq) for seq in sequences)
    bound = alpha ** (longest - 1)
    assert distances.min().item() >= bound * (1 - 1e-6)
    suffix_pair = [sequences.index(seq) for seq in sequences if len(seq) == longest][0]
    seq = sequences[suffix_pair]
    shorter = one_hot_codes([seq[1:]], alpha)[0]
    assert (codes[suffix_pair] - shorter).abs().max().item() == pytest.approx(bound, rel=1e-12)


@pytest.mark.parametrize("alpha", [0.5, 0.4, 0.25])
def test_lemma_1_one_element_at_least_one_is_the_last_symbol(alpha):
    sequences = [seq for seq in sequences_to_test() if seq]
    codes = one_hot_codes(sequences, alpha)
    at_least_one = codes >= 1
    assert (at_least_one.sum(1) == 1).all()
    last = torch.tensor([seq[-1] for seq in sequences])
    assert torch.equal(at_least_one.float().argmax(1), last)
    # For alpha > 1/2 the lemma fails: 'a a a b' gives a = alpha + alpha^2 + alpha^3 > 1 at alpha = 0.6.
    assert (one_hot_codes([(0, 0, 0, 1)], 0.6)[0] >= 1).sum() == 2


def test_a_collision_above_one_half():
    """
    Theorem 3's exception: at alpha = (sqrt(5) - 1) / 2, where alpha = alpha^2 + alpha^3,
    'a a b b' and 'b b a b' have the same code (a: alpha^3 + alpha^2 = alpha; b: alpha + 1 =
    alpha^3 + alpha^2 + 1).  Exact check in Q(sqrt 5), then the float64 codes agree to rounding.
    """

    def multiply(x, y):  # (p, q) is p + q sqrt(5)
        return (x[0] * y[0] + 5 * x[1] * y[1], x[0] * y[1] + x[1] * y[0])

    alpha = (Fraction(-1, 2), Fraction(1, 2))

    def exact_code(sequence):
        code = [(Fraction(0), Fraction(0))] * 2
        for symbol in sequence:
            code = [multiply(alpha, value) for value in code]
            code[symbol] = (code[symbol][0] + 1, code[symbol][1])
        return code

    first, second = (0, 0, 1, 1), (1, 1, 0, 1)
    assert exact_code(first) == exact_code(second)
    assert exact_code(first) != exact_code((0, 1, 0, 1))
    golden = (5**0.5 - 1) / 2
    codes = one_hot_codes([first, second], golden, vocab_size=2)
    assert (codes[0] - codes[1]).abs().max().item() < 1e-15
    # Nearby alphas separate them.
    for alpha_near in [0.6, 0.64]:
        codes = one_hot_codes([first, second], alpha_near, vocab_size=2)
        assert (codes[0] - codes[1]).abs().max().item() > 1e-3


# --------------------------------------------------------------------------- gradients


@pytest.mark.parametrize("reverse", [False, True])
def test_gradients_reach_alpha_gradcheck(reverse):
    inputs, mask = padded_batch([7, 4], 3, seed=6)
    inputs.requires_grad_(True)
    alpha = torch.tensor(0.6, dtype=torch.float64, requires_grad=True)
    starts = torch.tensor([[0, 2, 3, 5], [0, 1, 1, 3]])
    ends = torch.tensor([[7, 5, 3, 7], [4, 3, 4, 4]])

    def codes(x, a):
        return fofe_codes(x, mask, a, reverse=reverse, block_size=3)

    def spans(x, a):
        return span_codes(prefix_codes(x, mask, a, reverse=reverse, block_size=2), starts, ends, a, reverse)

    assert torch.autograd.gradcheck(codes, (inputs, alpha))
    assert torch.autograd.gradcheck(spans, (inputs, alpha))
    # And the value: d/d alpha of the code at the last position is sum_s (t-s) alpha^(t-s-1) x_s.
    fofe_codes(inputs[:1], None, alpha)[0, -1].sum().backward()
    powers = torch.arange(6, -1, -1, dtype=torch.float64)
    expected = ((powers * 0.6 ** (powers - 1).clamp(min=0)).unsqueeze(-1) * inputs[0].detach()).sum()
    assert alpha.grad.item() == pytest.approx(expected.item(), rel=1e-12)


# --------------------------------------------------------------------------- FofeEncoder


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("alpha", [0.5, 1.0])
def test_encoder_gives_the_whole_sequence_codes(bidirectional, alpha):
    lengths = [6, 3, 1]
    inputs, mask = padded_batch(lengths, 4, dtype=torch.float32, seed=7)
    encoder = FofeEncoder(4, alpha=alpha, bidirectional=bidirectional)
    assert encoder.get_input_dim() == 4
    assert encoder.get_output_dim() == (8 if bidirectional else 4)
    output = encoder(inputs, mask)
    assert output.shape == (3, encoder.get_output_dim())
    forward = fofe_codes(inputs, mask, alpha)
    backward = fofe_codes(inputs, mask, alpha, reverse=True)
    for row, length in enumerate(lengths):
        assert torch.allclose(output[row, :4], forward[row, length - 1], atol=1e-6)
        assert torch.allclose(output[row, :4].double(), code_of(inputs[row, :length], alpha), atol=1e-5)
        if bidirectional:
            assert torch.allclose(output[row, 4:], backward[row, 0], atol=1e-6)
            assert torch.allclose(output[row, 4:].double(), code_of(inputs[row, :length], alpha, True), atol=1e-5)
    # Padding values do not matter; a missing mask means no padding.
    noisy = inputs + 100.0 * (~mask).unsqueeze(-1)
    assert torch.allclose(encoder(noisy, mask), output, atol=1e-6)
    assert torch.allclose(encoder(inputs[:1]), output[:1], atol=1e-6)


def test_encoder_follows_non_contiguous_masks():
    inputs, _ = padded_batch([6], 3, dtype=torch.float32, seed=8)
    mask = torch.tensor([[0, 1, 0, 1, 1, 0]], dtype=torch.bool)
    output = FofeEncoder(3, alpha=0.5)(inputs, mask)
    assert torch.allclose(output[0, :3], fofe_codes(inputs, mask, 0.5)[0, 4], atol=1e-6)
    assert torch.allclose(output[0, 3:], fofe_codes(inputs, mask, 0.5, reverse=True)[0, 1], atol=1e-6)


def test_encoder_fully_masked_row_gives_zeros():
    inputs, _ = padded_batch([5, 5], 3, dtype=torch.float32, seed=9)
    mask = torch.tensor([[1, 1, 1, 0, 0], [0, 0, 0, 0, 0]], dtype=torch.long)  # long, as TimeDistributed passes it
    for trainable in [False, True]:
        output = FofeEncoder(3, alpha=0.5, trainable_alpha=trainable)(inputs, mask)
        assert torch.isfinite(output).all()
        assert (output[1] == 0).all() and (output[0] != 0).all()


def test_trainable_alpha_is_learned_through_a_logit():
    encoder = FofeEncoder(3, alpha=0.3, trainable_alpha=True)
    assert isinstance(encoder.alpha_logit, torch.nn.Parameter)
    assert [name for name, _ in encoder.named_parameters()] == ["alpha_logit"]
    assert encoder.alpha.item() == pytest.approx(0.3, rel=1e-6)
    inputs, mask = padded_batch([4, 2], 3, dtype=torch.float32, seed=10)
    encoder(inputs, mask).sum().backward()
    grad = encoder.alpha_logit.grad
    assert grad is not None and torch.isfinite(grad) and grad.abs().item() > 1e-4
    # The gradient is d/dlogit of the code sum: (sum over both directions of s alpha^(s-1) x) * alpha (1 - alpha).
    alpha = 0.3
    expected = 0.0
    for row, length in enumerate([4, 2]):
        powers = torch.arange(length - 1, -1, -1, dtype=torch.float64)
        derivative = (powers * alpha ** (powers - 1).clamp(min=0)).unsqueeze(-1) * inputs[row, :length].double()
        reverse_derivative = (powers.flip(0) * alpha ** (powers.flip(0) - 1).clamp(min=0)).unsqueeze(-1)
        expected += derivative.sum() + (reverse_derivative * inputs[row, :length].double()).sum()
    assert grad.item() == pytest.approx(float(expected) * alpha * (1 - alpha), rel=1e-4)
    # A fixed alpha has no parameters.
    assert list(FofeEncoder(3).parameters()) == []


@pytest.mark.parametrize("alpha, trainable", [(0.0, False), (-0.2, False), (1.5, False), (1.0, True), (0.0, True)])
def test_encoder_rejects_alphas_outside_the_range(alpha, trainable):
    with pytest.raises(ConfigurationError):
        FofeEncoder(3, alpha=alpha, trainable_alpha=trainable)


def test_encoder_checks_its_input_dim():
    assert FofeEncoder(3, alpha=1.0).get_output_dim() == 6
    with pytest.raises(ConfigurationError):
        FofeEncoder(3)(torch.zeros(1, 2, 4))


def test_fofe_character_encoder_from_params():
    """The FOFE character encoder of §5.2.2 inside allennlp's TokenCharactersEncoder ("character_encoding")."""
    indexer = TokenCharactersIndexer("token_characters", min_padding_length=1)
    sentences = [["Toronto", "Maple", "Leafs"], ["NHL", "a"]]
    instances = [
        Instance({"tokens": TextField([Token(word) for word in words], {"characters": indexer})}) for words in sentences
    ]
    vocab = Vocabulary.from_instances(instances)
    embedder = TokenEmbedder.from_params(
        vocab=vocab,
        params=Params(
            {
                "type": "character_encoding",
                "embedding": {"embedding_dim": 6, "vocab_namespace": "token_characters"},
                "encoder": {"type": "fofe", "input_dim": 6, "alpha": 0.5, "bidirectional": True},
            }
        ),
    )
    assert isinstance(embedder._encoder._module, FofeEncoder)
    assert embedder.get_output_dim() == 12
    batch = Batch(instances)
    batch.index_instances(vocab)
    characters = batch.as_tensor_dict()["tokens"]["characters"]["token_characters"]  # (2, 3, 7)
    assert characters.shape == (2, 3, 7)
    output = embedder(characters)
    assert output.shape == (2, 3, 12)
    table = embedder._embedding._module.weight.detach().double()
    for row, words in enumerate(sentences):
        for position, word in enumerate(words):
            ids = [vocab.get_token_index(char, "token_characters") for char in word]
            embedded = table[ids]
            assert torch.allclose(output[row, position, :6].double(), code_of(embedded, 0.5), atol=1e-5)
            assert torch.allclose(output[row, position, 6:].double(), code_of(embedded, 0.5, True), atol=1e-5)
    # The padding word of the second sentence (all-zero character mask) encodes to zeros.
    assert (output[1, 2] == 0).all()
    output.sum().backward()
    assert embedder._embedding._module.weight.grad is not None
