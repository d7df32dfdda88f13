import pytest
import torch

from nerzoo.modules.fofe.spans import (
    enumerate_spans,
    gold_span_classes,
    row_prefix_mask,
    sample_spans,
    scatter_rows,
)
from tests.modules.fofe_ner_batch import fofe_batch


def test_enumeration_yields_every_span_up_to_the_maximum_width_once():
    lengths = [5, 1, 3, 0]
    mask = torch.arange(5).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)
    for max_width in (1, 3, 7):
        starts, ends, span_mask = enumerate_spans(mask, max_width)
        assert starts.shape == ends.shape == span_mask.shape == (4, 5 * max_width)
        for sentence, length in enumerate(lengths):
            found = list(
                zip(starts[sentence][span_mask[sentence]].tolist(), ends[sentence][span_mask[sentence]].tolist())
            )
            expected = [(i, j) for i in range(length) for j in range(i + 1, min(i + max_width, length) + 1)]
            assert found == expected
        assert (ends <= 5).all() and (starts < ends).all()


def test_gold_classes_are_one_plus_the_type_at_the_entity_boundaries():
    entities = torch.full((1, 4, 4), -1)
    entities[0, 0, 1] = 2  # [0, 2) type 2
    entities[0, 3, 3] = 0  # [3, 4) type 0
    mask = torch.ones(1, 4, dtype=torch.bool)
    starts, ends, span_mask = enumerate_spans(mask, 2)
    gold = gold_span_classes(entities, starts, ends, span_mask)
    classes = {
        (s, e): c for s, e, c, m in zip(starts[0].tolist(), ends[0].tolist(), gold[0].tolist(), span_mask[0]) if m
    }
    assert classes == {(0, 1): 0, (0, 2): 3, (1, 2): 0, (1, 3): 0, (2, 3): 0, (2, 4): 0, (3, 4): 1}
    assert not gold[~span_mask].any()


def test_sampling_keeps_entities_and_negatives_at_their_rates():
    batch = fofe_batch(16)
    entities, starts, ends, span_mask = batch.tensors["entities"].long(), batch.starts, batch.ends, batch.span_mask
    gold = gold_span_classes(entities, starts, ends, span_mask)
    entity_sets = [{(s, e) for s, e, _ in m["entities"]} for m in batch.metadata]
    exact = torch.zeros_like(span_mask)
    overlapping = torch.zeros_like(span_mask)
    for sentence, spans in enumerate(entity_sets):
        for column in span_mask[sentence].nonzero().view(-1).tolist():
            start, end = int(starts[sentence, column]), int(ends[sentence, column])
            exact[sentence, column] = (start, end) in spans
            overlapping[sentence, column] = (start, end) not in spans and any(s < end and start < e for s, e in spans)
    disjoint = span_mask & ~exact & ~overlapping
    assert torch.equal(gold > 0, exact)
    assert overlapping.sum() > 100 and disjoint.sum() > 100
    draws = 400
    kept = torch.zeros(span_mask.shape)
    torch.manual_seed(0)
    for _ in range(draws):
        kept += (span_mask & sample_spans(gold, entities, starts, ends, batch.mask, 0.36, 0.09)).float()
    rate = kept / draws
    assert torch.equal(rate[exact], torch.ones(int(exact.sum())))
    assert rate[overlapping].mean().item() == pytest.approx(0.36, abs=0.01)
    assert rate[disjoint].mean().item() == pytest.approx(0.09, abs=0.005)


def test_sampling_at_rates_zero_and_one_keeps_only_entities_or_everything():
    batch = fofe_batch(8)
    entities = batch.tensors["entities"].long()
    gold = gold_span_classes(entities, batch.starts, batch.ends, batch.span_mask)
    args = gold, entities, batch.starts, batch.ends, batch.mask
    assert torch.equal(batch.span_mask & sample_spans(*args, 0.0, 0.0), gold > 0)
    assert torch.equal(batch.span_mask & sample_spans(*args, 1.0, 1.0), batch.span_mask)


def test_flat_values_are_laid_out_row_by_row():
    mask = row_prefix_mask(torch.tensor([2, 0, 3]))
    assert mask.tolist() == [[True, True, False], [False, False, False], [True, True, True]]
    assert row_prefix_mask(torch.tensor([0, 0])).shape == (2, 1)
    rows = scatter_rows(torch.arange(1, 6).unsqueeze(-1), mask)
    assert rows.squeeze(-1).tolist() == [[1, 2, 0], [0, 0, 0], [3, 4, 5]]
