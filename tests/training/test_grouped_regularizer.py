"""`GroupedRegularizerApplicator` against allennlp's `RegularizerApplicator`: the same penalty and gradients."""

import pytest
import torch
from allennlp.common import Params
from allennlp.data import Vocabulary
from allennlp.models import Model
from allennlp.nn.regularizers import L1Regularizer, L2Regularizer, RegularizerApplicator

from nerzoo.training.grouped_regularizer import GroupedRegularizerApplicator


def _module() -> torch.nn.Module:
    torch.manual_seed(0)
    module = torch.nn.ModuleDict(
        {
            "encoder": torch.nn.LSTM(4, 3, bidirectional=True),
            "norm": torch.nn.LayerNorm(6),
            "projection": torch.nn.Linear(6, 5),
            "embedding": torch.nn.Embedding(7, 4),
            "frozen": torch.nn.Linear(2, 2),
        }
    )
    module["frozen"].requires_grad_(False)
    return module


REGEXES = [
    ("norm", L1Regularizer(alpha=0.3)),  # first match wins: the LayerNorm is l1 only
    ("^(encoder|norm|projection|frozen)", L2Regularizer(alpha=0.05)),
    ("embedding", L2Regularizer(alpha=0.2)),
]


def _penalty_and_gradients(applicator, module):
    module.zero_grad()
    penalty = applicator(module)
    penalty.backward()
    return penalty.detach(), {name: p.grad for name, p in module.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_penalty_and_its_gradients_equal_allennlps(dtype):
    module = _module().to(dtype)
    expected, expected_grads = _penalty_and_gradients(RegularizerApplicator(REGEXES), module)
    grouped = GroupedRegularizerApplicator.of(RegularizerApplicator(REGEXES))
    assert isinstance(grouped, GroupedRegularizerApplicator)
    for _ in range(2):  # the second call reads the cached matches
        got, got_grads = _penalty_and_gradients(grouped, module)
        torch.testing.assert_close(got, expected)
        assert got_grads.keys() == expected_grads.keys() and "frozen.weight" not in got_grads
        for name, gradient in expected_grads.items():
            torch.testing.assert_close(got_grads[name], gradient)


def test_nerzoo_models_apply_their_regularizer_grouped():
    vocab = Vocabulary()
    vocab.add_tokens_to_namespace(["O", "B-PER"], "labels")
    params = Params(
        {
            "type": "bilstm_crf",
            "text_field_embedder": {"token_embedders": {"tokens": {"type": "embedding", "embedding_dim": 4}}},
            "encoder": {"type": "lstm", "input_size": 4, "hidden_size": 3, "bidirectional": True},
            "regularizer": {"regexes": [["encoder", {"type": "l2", "alpha": 0.01}]]},
        }
    )
    model = Model.from_params(vocab=vocab, params=params)
    assert isinstance(model._regularizer, GroupedRegularizerApplicator)
    penalty = model.get_regularization_penalty()
    expected = sum(0.01 * p.pow(2).sum() for name, p in model.named_parameters() if "encoder" in name)
    torch.testing.assert_close(penalty, expected)
