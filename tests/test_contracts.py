"""
Each tagger states what it offers through the Protocols of `nerzoo.contracts`, and the consumers
act on them: the predictor's attention and tag probabilities, the server's tags, the calibration
sites, and the auxiliary losses added to the model's loss.
"""

from typing import Dict

import pytest
import torch
from allennlp.common import Params
from allennlp.common.checks import ConfigurationError
from allennlp.data import DatasetReader, Vocabulary
from allennlp.models import Model
from allennlp.predictors import Predictor

import nerzoo  # noqa: F401
from nerzoo.contracts import AttentionModel, LabelledModel, MemoryAttentionModel, TagProbabilityModel
from nerzoo.modules.auxiliary_loss import (
    AuxiliaryLossCollector,
    AuxiliaryLossSource,
    AuxiliaryLossTerms,
    pop_auxiliary_losses,
)
from nerzoo.modules.crf.calibration import CalibrationSource, calibration_modules
from tests import FIXTURES_ROOT, PROJECT_ROOT

# name: (tag probabilities, attention keys, memory, calibration sites)
EXPECTED = {
    "bilstm_crf": (True, (), False, ["head"]),
    "deptree_ner": (True, ("relative_attention", "global_attention"), False, ["head"]),
    "me_crf": (True, ("memory_attention",), True, ["head"]),
    "me_crf_thread_discourse": (True, ("memory_attention",), True, ["head"]),
    "seq2biseq": (True, (), False, [""]),
    "fofe_ner": (False, (), False, [""]),
}


def _model(name: str) -> Model:
    params = Params.from_file(str(FIXTURES_ROOT / "experiments" / f"{name}_tiny.jsonnet"))
    reader = DatasetReader.from_params(params.pop("dataset_reader"))
    instances = list(reader.read(str(PROJECT_ROOT / params.pop("train_data_path"))))
    return Model.from_params(vocab=Vocabulary.from_instances(instances), params=params.pop("model"))


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_tagger_states_what_it_offers(name):
    tag_probabilities, attention_keys, memory, sites = EXPECTED[name]
    model = _model(name)
    assert isinstance(model, LabelledModel)
    assert isinstance(model, TagProbabilityModel) == tag_probabilities
    if tag_probabilities:
        labels = model.tag_labels()
        assert labels == [model.vocab.get_token_from_index(i, model.label_namespace) for i in range(len(labels))]
    assert (model.attention_keys() if isinstance(model, AttentionModel) else ()) == attention_keys
    assert isinstance(model, MemoryAttentionModel) == memory
    assert sorted(calibration_modules(model)) == sites
    assert all(isinstance(module, CalibrationSource) for module in calibration_modules(model).values())


def test_the_predictor_refuses_tag_probabilities_of_a_span_classifier():
    model = _model("fofe_ner")
    reader = DatasetReader.from_params(
        Params.from_file(str(FIXTURES_ROOT / "experiments" / "fofe_ner_tiny.jsonnet")).pop("dataset_reader")
    )
    with pytest.raises(ConfigurationError, match="no tag probabilities"):
        Predictor.by_name("sequence_tagger")(model, reader, return_tag_probabilities=True)


class _Source(torch.nn.Module):
    """Reports `weight * x.sum()` under "term" at each forward pass."""

    def __init__(self, weight: float) -> None:
        super().__init__()
        self.weight = weight
        self._terms = AuxiliaryLossTerms()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self._terms.add("term", self.weight * x.sum())
        return x

    def pop_auxiliary_losses(self) -> Dict[str, torch.Tensor]:
        return self._terms.pop()


def test_auxiliary_losses_are_summed_over_passes_and_sources_and_handed_over_once():
    model = torch.nn.Sequential(_Source(1.0), torch.nn.Sequential(_Source(10.0)))
    assert all(isinstance(module, AuxiliaryLossSource) for module in (model[0], model[1][0]))
    collector = AuxiliaryLossCollector()
    assert collector.pop(model) == {}
    model(torch.ones(2))
    model(torch.ones(2))
    assert collector.pop(model)["term"].item() == 2 * (1.0 * 2 + 10.0 * 2)
    assert collector.pop(model) == {}
    model(torch.ones(3))
    assert pop_auxiliary_losses(model)["term"].item() == 3 + 30
    with pytest.raises(ValueError, match="scalar"):
        AuxiliaryLossTerms().add("term", torch.ones(2))
