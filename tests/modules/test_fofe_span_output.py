import pytest
import torch
from nerzoo_runtime.span_decoding import ScoredSpan

from nerzoo.modules.fofe.span_output import candidate_spans, confidence_as_score, spans_to_tags


def test_candidates_are_the_spans_whose_best_class_is_an_entity_above_the_threshold():
    probabilities = torch.tensor([[[0.2, 0.7, 0.1], [0.6, 0.3, 0.1], [0.1, 0.4, 0.5], [0.0, 1.0, 0.0]]])
    starts, ends = torch.tensor([[0, 1, 1, 2]]), torch.tensor([[1, 2, 3, 3]])
    span_mask = torch.tensor([[True, True, True, False]])
    confidences = probabilities / 2
    found = candidate_spans(probabilities, starts, ends, span_mask, ["PER", "LOC"], 0.45, confidences)
    assert [[(s.start, s.end, s.label) for s in spans] for spans in found] == [[(0, 1, "PER"), (1, 3, "LOC")]]
    assert [(s.score, s.confidence) for s in found[0]] == [pytest.approx((0.7, 0.35)), pytest.approx((0.5, 0.25))]
    assert confidence_as_score(found[0][0]).score == found[0][0].confidence
    alone = candidate_spans(probabilities, starts, ends, span_mask, ["PER", "LOC"], 0.6)
    assert [(s.start, s.end, s.label) for s in alone[0]] == [(0, 1, "PER")]
    assert alone[0][0].confidence == alone[0][0].score  # without confidences, the probabilities
    unsure = ScoredSpan(0, 1, "PER", 0.7)
    assert confidence_as_score(unsure) == unsure


def test_tags_of_the_outermost_spans_with_their_confidences():
    starts, ends = torch.tensor([[0, 1, 2, 0]]), torch.tensor([[1, 2, 4, 2]])
    span_mask = torch.tensor([[True, True, True, False]])
    none_probabilities = torch.tensor([[0.9, 0.8, 0.1, 0.0]])
    decoded = [[(ScoredSpan(2, 4, "ORG", 0.7), 1), (ScoredSpan(3, 4, "LOC", 0.6), 2)]]
    tags, confidences = spans_to_tags(decoded, [5], starts, ends, span_mask, none_probabilities)
    assert tags == [["O", "O", "B-ORG", "I-ORG", "O"]]
    assert confidences == [[torch.tensor(0.9).item(), torch.tensor(0.8).item(), 0.7, 0.7, 1.0]]
