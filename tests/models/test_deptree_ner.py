import pytest
import torch
from allennlp.common import Params
from allennlp.common.checks import ConfigurationError
from allennlp.common.testing import ModelTestCase
from allennlp.models import Model
from allennlp.nn.util import get_final_encoder_states

import nerzoo  # noqa: F401
from tests import FIXTURES_ROOT

CONFIG = FIXTURES_ROOT / "experiments" / "deptree_ner_tiny.jsonnet"
DATA = FIXTURES_ROOT / "conll2003" / "dev.txt"

# Table 2 of the paper: each ablation as the overrides a user would pass with -o.
ABLATIONS = {
    "tlstm_only": {"model.semantic_encoder": None},
    "blstm_only": {"model.syntactic_encoder": None},
    "no_relative_attention": {"model.relative_attention": None},
    "no_global_attention": {"model.global_attention": None},
    "no_attention": {"model.relative_attention": None, "model.global_attention": None},
    "no_pos": {"model.pos_tag_dim": 0, "model.semantic_encoder.layers.0.input_size": 30},
    "no_dep": {"model.dependency_label_dim": 0, "model.semantic_encoder.layers.0.input_size": 30},
    "no_residuals": {
        "model.semantic_encoder.residual": False,
        "model.syntactic_encoder.residual": False,
        "model.relative_attention.residual": False,
        "model.global_attention.residual": False,
        "model.global_attention.mode": "scale",
    },
}


class TestDeptreeNer(ModelTestCase):
    def setup_method(self):
        super().setup_method()
        self.set_up_model(CONFIG, DATA)

    def test_can_train_save_and_load(self):
        self.ensure_model_can_train_save_and_load(self.param_file)

    def test_batch_predictions_are_consistent(self):
        self.ensure_batch_predictions_are_consistent(keys_to_ignore=["spans", "tag_confidences"])

    def test_attention_outputs(self):
        self.model.eval()
        output = self.model(**self.dataset.as_tensor_dict())
        mask = output["mask"]
        relative, global_weights = output["relative_attention"], output["global_attention"]
        batch_size, num_tokens = mask.shape
        assert relative.shape == (batch_size, num_tokens, num_tokens)
        assert global_weights.shape == (batch_size, num_tokens)
        lengths = mask.sum(-1)
        row_sums = relative.sum(-1)
        for row, length in enumerate(lengths.tolist()):
            if length > 1:
                assert torch.allclose(row_sums[row, :length], torch.ones(length), atol=1e-5)
            assert torch.all(relative[row].diagonal() == 0)
            assert torch.allclose(global_weights[row, :length].sum(), torch.tensor(1.0), atol=1e-5)
            assert torch.all(global_weights[row, length:] == 0)

    def test_l2_penalty_covers_encoders_and_attention_only(self):
        penalty = self.model.get_regularization_penalty()
        expected = 1e-5 * sum(
            parameter.pow(2).sum()
            for name, parameter in self.model.named_parameters()
            if name.split(".")[0] in {"semantic_encoder", "syntactic_encoder", "relative_attention", "global_attention"}
            and "layer_norm" not in name
        )
        assert penalty is not None and torch.allclose(penalty, expected)

    @pytest.mark.parametrize("name", sorted(ABLATIONS))
    def test_ablation_builds_and_learns(self, name):
        params = Params.from_file(str(self.param_file), params_overrides=ABLATIONS[name])
        model = Model.from_params(vocab=self.vocab, params=params.pop("model"))
        if name == "tlstm_only":
            assert model.semantic_encoder is None
        if name == "blstm_only":
            assert model.syntactic_encoder is None
        if name == "no_pos":
            assert model.pos_tag_embedding is None
        if name == "no_residuals":
            assert not any(isinstance(module, torch.nn.LayerNorm) for module in model.modules())
        optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
        batch = self.dataset.as_tensor_dict()
        losses = []
        for _ in range(3):
            optimizer.zero_grad()
            loss = model(**batch)["loss"]
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        assert losses[-1] < losses[0]

    def test_needs_an_encoder(self):
        params = Params.from_file(
            str(self.param_file),
            params_overrides={"model.semantic_encoder": None, "model.syntactic_encoder": None},
        )
        with pytest.raises(ConfigurationError, match="semantic_encoder, a syntactic_encoder"):
            Model.from_params(vocab=self.vocab, params=params.pop("model"))

    def test_mismatched_dimensions_raise(self):
        params = Params.from_file(str(self.param_file), params_overrides={"model.pos_tag_dim": 5})
        with pytest.raises(ConfigurationError, match="semantic_encoder input dim"):
            Model.from_params(vocab=self.vocab, params=params.pop("model"))

    @pytest.mark.parametrize("bidirectional", [True, False])
    def test_final_states_are_allennlps(self, bidirectional):
        overrides = {}
        if not bidirectional:
            overrides = {f"model.semantic_encoder.layers.{index}.bidirectional": False for index in (0, 1)}
            overrides["model.semantic_encoder.layers.1.input_size"] = 8
        params = Params.from_file(str(self.param_file), params_overrides=overrides)
        model = Model.from_params(vocab=self.vocab, params=params.pop("model"))
        assert model.semantic_encoder.is_bidirectional() is bidirectional
        dim = model.semantic_encoder.get_output_dim()
        encoded = torch.randn(4, 6, dim)
        mask = torch.arange(6).unsqueeze(0) < torch.tensor([[6], [1], [3], [5]])
        expected = get_final_encoder_states(encoded, mask, bidirectional)
        assert torch.equal(model._final_states(encoded, mask), expected)
