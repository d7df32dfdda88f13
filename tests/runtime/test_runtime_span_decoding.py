"""
nerzoo_runtime's numpy span decoding against `fofe_ner`'s own: the prediction-time steps of
`FofeNer.forward` (span enumeration, softmax with and without temperature, the scored spans laid out
row by row) and `FofeNer.make_output_human_readable` (candidates, nested decoding, confidences as
scores, BIO tags), run on the same float32 logits.
"""

import numpy
import pytest
import torch
from nerzoo_runtime import span_decoding

from nerzoo.models.fofe_ner import FofeNer
from nerzoo.modules.fofe import spans as fofe_spans

SETTINGS = [
    (["highest_first"], [0.5]),
    (["longest_first"], [0.5]),
    (["longest_first"], [0.2]),
    (["highest_first", "highest_first"], [0.5, 0.3]),
    (["longest_first", "highest_first"], [0.5, 0.3]),
    (["highest_first", "longest_first"], [0.3, 0.2]),
    (["longest_first", "longest_first"], [0.25, 0.4]),
    (["highest_first"] * 3, [0.3, 0.2, 0.1]),
]
SEEDS = range(12)


class _Head:
    """What `FofeNer.make_output_human_readable` reads of the model: its decoding settings and methods."""

    decode = FofeNer.decode
    _decode_output = FofeNer._decode_output
    make_output_human_readable = FofeNer.make_output_human_readable

    def __init__(self, entity_types, decoding, thresholds, merge_adjacent, temperature):
        self.entity_types, self.decoding, self.thresholds = entity_types, decoding, thresholds
        self.merge_adjacent, self.temperature = merge_adjacent, temperature


def _case(seed):
    """
    Logits `(batch_size, num_tokens, max_span_width, num_classes)`, lengths and entity types.  One
    seed in three rounds the logits to a grid, one in three also draws every span's row from three:
    equal probabilities across spans, so ties to break.
    """
    rng = numpy.random.default_rng(seed)
    batch_size, max_width, num_types = rng.integers(3, 6), rng.integers(1, 5), rng.integers(2, 5)
    lengths = [1] + [int(length) for length in rng.integers(1, 13, batch_size - 1)]
    logits = rng.normal(size=(batch_size, max(lengths), max_width, num_types + 1)) * 2
    logits[..., 1:] += rng.uniform(0.5, 2.5)  # many candidates above the thresholds
    if seed % 3:
        step = (0.5, 1.0, 1.5)[seed % 9 // 3]
        logits = numpy.round(logits / step) * step
    if seed % 3 == 2:
        logits = logits[0, 0, rng.integers(0, min(3, max_width), logits.shape[:3])]
    return logits.astype(numpy.float32), lengths, [f"T{index}" for index in range(num_types)]


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    """The reference's tensors are tiny: more threads only wait on each other."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _model_output(logits, lengths, entity_types, decoding, thresholds, merge_adjacent, temperature):
    """`make_output_human_readable` of what `FofeNer.forward` gives in evaluation (no first pass)."""
    batch_size, num_tokens, max_width, num_classes = logits.shape
    mask = torch.arange(num_tokens).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)
    starts, ends, span_mask = fofe_spans.enumerate_spans(mask, max_width)
    spans = fofe_spans.FlatSpans.where(span_mask, starts, ends)
    scored = torch.from_numpy(logits).reshape(batch_size, num_tokens * max_width, num_classes)[span_mask]
    probabilities = torch.softmax(scored, dim=-1)
    confidences = probabilities if temperature == 1.0 else torch.softmax(scored / temperature, dim=-1)
    scored_mask = fofe_spans.row_prefix_mask(span_mask.sum(1))
    output = {
        "class_probabilities": fofe_spans.scatter_rows(probabilities, scored_mask),
        "class_confidences": fofe_spans.scatter_rows(confidences, scored_mask),
        "span_starts": fofe_spans.scatter_rows(spans.starts, scored_mask),
        "span_ends": fofe_spans.scatter_rows(spans.ends, scored_mask),
        "span_mask": scored_mask,
        "words": [["w"] * length for length in lengths],
    }
    head = _Head(entity_types, decoding, thresholds, merge_adjacent, temperature)
    return head.make_output_human_readable(output)


@pytest.mark.parametrize("temperature", [1.0, 1.7])
@pytest.mark.parametrize("merge_adjacent", [True, False])
@pytest.mark.parametrize("decoding, thresholds", SETTINGS)
def test_decode_is_the_models(decoding, thresholds, merge_adjacent, temperature):
    for seed in SEEDS:
        logits, lengths, entity_types = _case(seed)
        expected = _model_output(logits, lengths, entity_types, decoding, thresholds, merge_adjacent, temperature)
        decoded = span_decoding.decode(
            logits, lengths, entity_types, decoding, thresholds, merge_adjacent=merge_adjacent, temperature=temperature
        )
        assert len(decoded) == len(lengths)
        for row, (tags, tag_confidences, spans) in enumerate(decoded):
            model_spans = [
                (span["label"], span["start"], span["end"], span["score"], span["level"])
                for span in expected["spans"][row]
            ]
            assert tags == expected["tags"][row], (seed, row)
            assert tag_confidences == pytest.approx(expected["tag_confidences"][row], abs=1e-6, rel=0)
            assert [span[:3] + span[4:] for span in spans] == [span[:3] + span[4:] for span in model_spans], (seed, row)
            assert [span[3] for span in spans] == pytest.approx([span[3] for span in model_spans], abs=1e-6, rel=0)
            assert all(isinstance(value, float) for value in tag_confidences + [span[3] for span in spans])


def test_the_cases_hold_ties_merges_and_nesting():
    """The random cases above exercise what can go wrong: tied scores, merged entities, nested levels."""
    ties = merges = nested = 0
    for seed in SEEDS:
        logits, lengths, entity_types = _case(seed)
        max_width = logits.shape[2]
        output = _model_output(logits, lengths, entity_types, ["highest_first"] * 2, [0.5, 0.3], True, 1.0)
        probabilities = output["class_probabilities"].max(-1).values
        for row, spans in enumerate(output["spans"]):
            real = probabilities[row][output["span_mask"][row]].tolist()
            ties += len(real) - len(set(real))
            merges += sum(span["end"] - span["start"] > max_width for span in spans)
            nested += sum(span["level"] > 1 for span in spans)
    assert ties > 20 and merges > 0 and nested > 0, (ties, merges, nested)


def test_ties_are_the_models_to_the_last_bit():
    """
    float32 softmax is not invariant to the order of the classes: the model's probability of T0 is
    one bit lower for span [0, 2) (NONE, T0, T1 scored -2, 0, -1) than for span [1, 2) (-1, 0, -2),
    so at word 1 span [1, 2) wins, where exact ties would keep the longer span [0, 2).
    """
    logits = numpy.array([[[[2, 0, 0], [-2, 0, -1]], [[-1, 0, -2], [0, 9, 0]]]], dtype=numpy.float32)
    expected = _model_output(logits, [2], ["T0", "T1"], ["highest_first"], [0.5], True, 1.0)
    ((tags, _, spans),) = span_decoding.decode(logits, [2], ["T0", "T1"], ["highest_first"], [0.5])
    assert tags == expected["tags"][0]
    assert [span[:3] for span in spans] == [
        (span["label"], span["start"], span["end"]) for span in expected["spans"][0]
    ]
