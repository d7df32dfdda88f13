import itertools
import random
from fractions import Fraction

import pytest
import torch
from nerzoo_runtime.span_decoding import (
    DECODERS,
    ScoredSpan,
    decode_spans,
    highest_first,
    longest_first,
    merge_adjacent_same_type,
)

from nerzoo.modules.fofe.span_decoding import highest_first_mask

S = ScoredSpan


def _boundaries(spans):
    return [(span.start, span.end, span.label) for span in spans]


def _greedy(candidates):
    """Greedy selection, for contrast: best first, drop whatever overlaps a chosen span."""
    chosen = []
    for span in sorted(candidates, key=lambda span: -span.score):
        if all(span.end <= other.start or other.end <= span.start for other in chosen):
            chosen.append(span)
    return sorted(chosen, key=lambda span: span.start)


# Highest-first


def test_highest_first_keeps_the_best_at_every_word():
    candidates = [S(1, 3, "LOC", 0.8), S(0, 2, "PER", 0.9), S(4, 5, "ORG", 0.5)]
    assert highest_first(candidates) == [S(0, 2, "PER", 0.9), S(4, 5, "ORG", 0.5)]


def test_literal_algorithm_4_differs_from_greedy_selection():
    # Word 1: (1, 3) beats (0, 2); word 2: (2, 4) beats (1, 3).  (0, 2) lost to a loser.
    candidates = [S(0, 2, "PER", 0.8), S(1, 3, "LOC", 0.9), S(2, 4, "ORG", 0.95)]
    assert highest_first(candidates) == [S(2, 4, "ORG", 0.95)]
    assert _greedy(candidates) == [S(0, 2, "PER", 0.8), S(2, 4, "ORG", 0.95)]


@pytest.mark.parametrize(
    "candidates, expected",
    [
        # Equal scores: the longer span wins.
        ([S(1, 2, "LOC", 0.5), S(0, 2, "PER", 0.5)], [(0, 2, "PER")]),
        # Equal score and length: the earlier start wins (word 1), and (1, 3) is out.
        ([S(1, 3, "LOC", 0.5), S(0, 2, "PER", 0.5)], [(0, 2, "PER")]),
        # Same boundaries and score: the earlier-listed one wins.
        ([S(0, 2, "PER", 0.5), S(0, 2, "LOC", 0.5)], [(0, 2, "PER")]),
        ([S(0, 2, "LOC", 0.5), S(0, 2, "PER", 0.5)], [(0, 2, "LOC")]),
        # The score comes first: the shorter, later span wins.
        ([S(0, 3, "PER", 0.5), S(2, 3, "LOC", 0.6)], [(2, 3, "LOC")]),
    ],
)
def test_highest_first_tie_breaking(candidates, expected):
    assert _boundaries(highest_first(candidates)) == expected


def test_highest_first_merges_unless_told_not_to():
    candidates = [S(2, 3, "PER", 0.9), S(0, 2, "PER", 0.6), S(1, 3, "LOC", 0.3)]
    assert highest_first(candidates) == [S(0, 3, "PER", 0.9)]
    assert highest_first(candidates, merge_adjacent=False) == [S(0, 2, "PER", 0.6), S(2, 3, "PER", 0.9)]


def test_empty_input():
    assert highest_first([]) == [] and longest_first([]) == [] and merge_adjacent_same_type([]) == []
    assert decode_spans([], ["highest_first"], [0.5]) == []


# Longest-first


def test_longest_first_differs_from_highest_first():
    candidates = [S(0, 4, "ORG", 0.6), S(0, 1, "PER", 0.9), S(2, 4, "LOC", 0.8)]
    # ORG covers 4 words, PER + LOC only 3; but each of them beats ORG on its words.
    assert longest_first(candidates) == [S(0, 4, "ORG", 0.6)]
    assert highest_first(candidates) == [S(0, 1, "PER", 0.9), S(2, 4, "LOC", 0.8)]


def test_longest_first_maximises_coverage_not_span_length():
    # The longest span (0, 3) would leave words 3-4 uncovered: (0, 2) + (2, 5) cover all five.
    candidates = [S(0, 3, "ORG", 0.9), S(0, 2, "PER", 0.1), S(2, 5, "LOC", 0.1)]
    assert longest_first(candidates) == [S(0, 2, "PER", 0.1), S(2, 5, "LOC", 0.1)]


@pytest.mark.parametrize("org_score, expected", [(0.5, [(0, 2, "PER"), (2, 4, "LOC")]), (0.7, [(0, 4, "ORG")])])
def test_longest_first_breaks_coverage_ties_by_total_score(org_score, expected):
    candidates = [S(0, 2, "PER", 0.3), S(2, 4, "LOC", 0.3), S(0, 4, "ORG", org_score)]
    assert _boundaries(longest_first(candidates)) == expected


def test_longest_first_final_tie_break_prefers_the_best_candidate_whatever_the_order():
    # Same coverage (4) and total (1.0): the subset holding the preferred candidate, ORG, wins.
    candidates = [S(0, 2, "PER", 0.5), S(2, 4, "LOC", 0.5), S(0, 4, "ORG", 1.0)]
    for permutation in itertools.permutations(candidates):
        assert longest_first(permutation) == [S(0, 4, "ORG", 1.0)]
    # All scores equal: {A, B} and {C, D} both cover 4 words for 1.0.  B and C are the longest;
    # C starts earlier, so it is the preferred candidate and {C, D} wins.
    candidates = [S(0, 1, "A", 0.5), S(1, 4, "B", 0.5), S(0, 3, "C", 0.5), S(3, 4, "D", 0.5)]
    for permutation in itertools.permutations(candidates):
        assert _boundaries(longest_first(permutation)) == [(0, 3, "C"), (3, 4, "D")]


def test_longest_first_keeps_gaps_and_merges():
    candidates = [S(5, 6, "PER", 0.4), S(0, 1, "PER", 0.2), S(1, 3, "PER", 0.3)]
    assert longest_first(candidates) == [S(0, 3, "PER", 0.3), S(5, 6, "PER", 0.4)]
    assert longest_first(candidates, merge_adjacent=False) == sorted(candidates, key=lambda span: span.start)


# Merging


@pytest.mark.parametrize(
    "spans, expected",
    [
        ([S(2, 3, "PER", 0.9), S(0, 2, "PER", 0.6)], [S(0, 3, "PER", 0.9)]),  # adjacent, same type
        ([S(0, 2, "PER", 0.6), S(2, 3, "LOC", 0.9)], [S(0, 2, "PER", 0.6), S(2, 3, "LOC", 0.9)]),  # other type
        ([S(0, 2, "PER", 0.6), S(3, 4, "PER", 0.9)], [S(0, 2, "PER", 0.6), S(3, 4, "PER", 0.9)]),  # gap
        ([S(0, 1, "PER", 0.2), S(1, 2, "PER", 0.7), S(2, 4, "PER", 0.4)], [S(0, 4, "PER", 0.7)]),  # a run
    ],
)
def test_merge_adjacent_same_type(spans, expected):
    assert merge_adjacent_same_type(spans) == expected


def test_merging_overlapping_spans_is_an_error():
    with pytest.raises(ValueError, match="overlapping"):
        merge_adjacent_same_type([S(0, 2, "PER", 0.6), S(1, 3, "PER", 0.9)])


def test_empty_spans_are_rejected():
    with pytest.raises(ValueError, match="start < end"):
        S(2, 2, "PER", 0.5)


# Thresholds and nesting


def test_thresholds_are_inclusive_and_can_change_the_winner():
    candidates = [S(0, 4, "ORG", 0.4), S(0, 2, "PER", 0.9), S(2, 3, "LOC", 0.8)]

    def decoded(threshold):
        return _boundaries(span for span, _ in decode_spans(candidates, ["longest_first"], [threshold]))

    assert decoded(0.4) == [(0, 4, "ORG")]
    assert decoded(0.5) == [(0, 2, "PER"), (2, 3, "LOC")]
    assert decoded(0.85) == [(0, 2, "PER")]
    assert decoded(0.95) == []


THESIS_EXAMPLE = [S(1, 3, "PER", 0.7), S(2, 4, "LOC", 0.8), S(0, 4, "ORG", 0.9)]


def test_thesis_nested_example():
    assert decode_spans(THESIS_EXAMPLE, ["highest_first"] * 2, [0.0, 0.0]) == [
        (S(0, 4, "ORG", 0.9), 1),
        (S(2, 4, "LOC", 0.8), 2),
    ]
    assert decode_spans(THESIS_EXAMPLE, ["highest_first"], [0.0]) == [(S(0, 4, "ORG", 0.9), 1)]
    # The second threshold applies inside ORG only: 0.75 cuts PER, 0.85 LOC too.
    assert decode_spans(THESIS_EXAMPLE, ["highest_first"] * 2, [0.0, 0.75]) == [
        (S(0, 4, "ORG", 0.9), 1),
        (S(2, 4, "LOC", 0.8), 2),
    ]
    assert decode_spans(THESIS_EXAMPLE, ["highest_first"] * 2, [0.0, 0.85]) == [(S(0, 4, "ORG", 0.9), 1)]


NESTED = [S(0, 6, "ORG", 0.9), S(0, 4, "LOC", 0.4), S(0, 2, "PER", 0.8), S(2, 3, "GPE", 0.7)]


@pytest.mark.parametrize(
    "algorithms, thresholds, inner",
    [
        # Inside ORG, highest-first: PER beats LOC at word 0, GPE at word 2.
        (["highest_first", "highest_first"], [0.0, 0.0], [(0, 2, "PER"), (2, 3, "GPE")]),
        # Longest-first: LOC covers 4 words, PER + GPE 3.
        (["highest_first", "longest_first"], [0.0, 0.0], [(0, 4, "LOC")]),
        (["highest_first", "longest_first"], [0.0, 0.5], [(0, 2, "PER"), (2, 3, "GPE")]),
        (["highest_first", "longest_first"], [0.0, 0.75], [(0, 2, "PER")]),
        (["highest_first", "longest_first"], [0.0, 0.95], []),
    ],
)
def test_per_level_algorithms_and_thresholds(algorithms, thresholds, inner):
    decoded = decode_spans(NESTED, algorithms, thresholds)
    assert decoded[0] == (NESTED[0], 1)
    assert [level for _, level in decoded[1:]] == [2] * len(inner)
    assert _boundaries(span for span, _ in decoded[1:]) == inner


@pytest.mark.parametrize(
    "outer_threshold, expected",
    [
        (0.0, [(0, 6, "ORG", 1), (0, 2, "PER", 2), (2, 3, "GPE", 2)]),
        # Without ORG, LOC covers the most words at level 1.
        (0.35, [(0, 4, "LOC", 1), (0, 2, "PER", 2), (2, 3, "GPE", 2)]),
    ],
)
def test_longest_first_at_the_outer_level(outer_threshold, expected):
    candidates = [S(0, 6, "ORG", 0.3)] + NESTED[1:]
    decoded = decode_spans(candidates, ["longest_first", "highest_first"], [outer_threshold, 0.0])
    assert [(span.start, span.end, span.label, level) for span, level in decoded] == expected


def test_three_levels_in_order_outer_before_inner():
    candidates = [
        S(7, 8, "LOC", 0.5),
        S(3, 4, "MISC", 0.6),
        S(2, 4, "PER", 0.7),
        S(1, 5, "LOC", 0.8),
        S(0, 6, "ORG", 0.9),
        S(7, 9, "PER", 0.85),
    ]
    expected = [
        ((0, 6, "ORG"), 1),
        ((1, 5, "LOC"), 2),
        ((2, 4, "PER"), 3),
        ((7, 9, "PER"), 1),
        ((7, 8, "LOC"), 2),
    ]

    def decoded(depth):
        pairs = decode_spans(candidates, ["highest_first"] * depth, [0.0] * depth)
        return [((span.start, span.end, span.label), level) for span, level in pairs]

    assert decoded(3) == expected
    assert decoded(4) == expected[:3] + [((3, 4, "MISC"), 4)] + expected[3:]
    two_levels = decode_spans(candidates, ["highest_first"] * 2, [0.0] * 2)
    assert [level for _, level in two_levels] == [1, 2, 1, 2]


def test_a_merged_entity_is_not_repeated_inside_itself():
    candidates = [S(0, 2, "PER", 0.9), S(2, 4, "PER", 0.8)]
    # Level 2 re-merges the parts into (0, 4): dropped, as it repeats level 1.
    assert decode_spans(candidates, ["highest_first"] * 2, [0.0, 0.0]) == [(S(0, 4, "PER", 0.9), 1)]
    assert decode_spans(candidates, ["highest_first"] * 2, [0.0, 0.0], merge_adjacent=False) == [
        (S(0, 2, "PER", 0.9), 1),
        (S(2, 4, "PER", 0.8), 1),
    ]
    # A part that does not merge again inside is found at level 2.
    assert decode_spans(candidates, ["highest_first"] * 2, [0.0, 0.85]) == [
        (S(0, 4, "PER", 0.9), 1),
        (S(0, 2, "PER", 0.9), 2),
    ]


def test_decode_spans_checks_its_arguments():
    with pytest.raises(ValueError, match="2 algorithms, 1 thresholds"):
        decode_spans(THESIS_EXAMPLE, ["highest_first", "longest_first"], [0.5])
    with pytest.raises(ValueError, match="unknown decoding algorithm 'best_first'"):
        decode_spans(THESIS_EXAMPLE, ["highest_first", "best_first"], [0.5, 0.5])
    with pytest.raises(ValueError, match="at least one"):
        decode_spans(THESIS_EXAMPLE, [], [])


def test_decoders_registry():
    assert DECODERS == {"highest_first": highest_first, "longest_first": longest_first}


# The tensor form


def _random_batch(rng, batch_size, num_spans, sequence_length):
    starts = torch.randint(0, sequence_length, (batch_size, num_spans), generator=rng)
    widths = torch.randint(1, 8, (batch_size, num_spans), generator=rng)
    ends = torch.minimum(starts + widths, torch.tensor(sequence_length))
    # Coarse scores so that ties are frequent.
    scores = torch.randint(0, 5, (batch_size, num_spans), generator=rng).float() / 4
    candidate_mask = torch.rand(batch_size, num_spans, generator=rng) < 0.7
    # Padding entries carry junk.
    junk = torch.rand(batch_size, num_spans, generator=rng) < 0.3
    starts = starts.masked_fill(~candidate_mask & junk, -1)
    ends = ends.masked_fill(~candidate_mask & junk, -1)
    scores = scores.masked_fill(~candidate_mask & junk, float("nan"))
    return scores, starts, ends, candidate_mask


def test_highest_first_mask_agrees_with_highest_first():
    rng = torch.Generator().manual_seed(0)
    compared = removed = tied = 0
    for trial in range(300):
        batch_size, num_spans, sequence_length = 4, 1 + trial % 24, 1 + trial % 13
        scores, starts, ends, candidate_mask = _random_batch(rng, batch_size, num_spans, sequence_length)
        kept = highest_first_mask(scores, starts, ends, candidate_mask, sequence_length)
        assert kept.shape == (batch_size, num_spans) and kept.dtype == torch.bool
        for row in range(batch_size):
            positions = [index for index in range(num_spans) if candidate_mask[row, index]]
            candidates = [
                S(int(starts[row, index]), int(ends[row, index]), f"T{index}", float(scores[row, index]))
                for index in positions
            ]
            expected = {span.label for span in highest_first(candidates, merge_adjacent=False)}
            assert {f"T{index}" for index in range(num_spans) if kept[row, index]} == expected
            compared += 1
            removed += len(candidates) - len(expected)
            tied += len(candidates) - len({span.score for span in candidates})
    assert compared == 1200 and removed > 1000 and tied > 1000  # the cases are not trivial


def test_highest_first_mask_tie_breaking_by_hand():
    # Row 0: same score, the longer wins.  Row 1: same score and length, earlier start.
    # Row 2: identical spans, the earlier position.  Row 3: the masked best removes nothing.
    scores = torch.tensor([[0.5, 0.5], [0.5, 0.5], [0.5, 0.5], [0.9, 0.1]])
    starts = torch.tensor([[1, 0], [1, 0], [0, 0], [0, 0]])
    ends = torch.tensor([[2, 2], [3, 2], [2, 2], [2, 2]])
    mask = torch.tensor([[True, True], [True, True], [True, True], [False, True]])
    kept = highest_first_mask(scores, starts, ends, mask, 3)
    assert kept.tolist() == [[False, True], [False, True], [True, False], [False, True]]


# Longest-first against brute force


def _brute_force_longest_first(candidates):
    """Every non-overlapping subset; the best by (coverage, exact total, preferred candidate)."""
    preference = sorted(
        range(len(candidates)),
        key=lambda i: (candidates[i].score, candidates[i].length, -candidates[i].start, -i),
    )
    weight = {position: 2**rank for rank, position in enumerate(preference)}
    best_key, best_subset = None, None
    for size in range(len(candidates) + 1):
        for subset in itertools.combinations(range(len(candidates)), size):
            words = [word for i in subset for word in range(candidates[i].start, candidates[i].end)]
            if len(words) != len(set(words)):
                continue
            key = (len(words), sum(Fraction(candidates[i].score) for i in subset), sum(weight[i] for i in subset))
            if best_key is None or key > best_key:
                best_key, best_subset = key, subset
    return best_key[0], sorted((candidates[i] for i in best_subset), key=lambda span: span.start)


def test_longest_first_agrees_with_brute_force():
    rng = random.Random(11)
    coverage_ties = 0
    for _ in range(400):
        length = rng.randint(1, 9)
        candidates = []
        for _ in range(rng.randint(0, 9)):
            start = rng.randrange(length)
            end = rng.randint(start + 1, min(length, start + 4))
            candidates.append(S(start, end, rng.choice("AB"), rng.choice([0.25, 0.5, 0.75, 1.0])))
        coverage, expected = _brute_force_longest_first(candidates)
        decoded = longest_first(candidates, merge_adjacent=False)
        assert sum(span.length for span in decoded) == coverage
        assert decoded == expected
        assert longest_first(candidates) == merge_adjacent_same_type(expected)
        # How often did something beyond coverage decide?
        best_coverage_subsets = 0
        for size in range(len(candidates) + 1):
            for subset in itertools.combinations(candidates, size):
                words = [word for span in subset for word in range(span.start, span.end)]
                best_coverage_subsets += len(words) == len(set(words)) == coverage
        coverage_ties += best_coverage_subsets > 1
    assert coverage_ties > 100
