import json

import torch
from allennlp.common import Params
from allennlp.common.testing import ModelTestCase

import nerzoo  # noqa: F401
from tests import FIXTURES_ROOT
from tests.tiny_transformer import tiny_bert_overrides

CONFIG = FIXTURES_ROOT / "experiments" / "bilstm_crf_contextual_tiny.jsonnet"
DATA = FIXTURES_ROOT / "conll2003" / "dev.txt"


class TestContextualBiLstmCrf(ModelTestCase):
    """bilstm_crf with contextual word vectors from the tests' tiny BERT (tests/tiny_transformer.py)."""

    def setup_method(self):
        super().setup_method()
        # The config as allennlp reads it with -o: the tiny BERT, as wide as the bundled model.
        params = Params.from_file(str(CONFIG)).as_dict(quiet=True)
        config = self.TEST_DIR / "bilstm_crf_contextual_tiny.json"
        config.write_text(json.dumps(Params.from_file(str(CONFIG), tiny_bert_overrides(params)).as_dict(quiet=True)))
        self.set_up_model(config, DATA)

    def test_can_train_save_and_load(self):
        # The loaded model starts with an empty cache: its outputs equal the trained model's.
        self.ensure_model_can_train_save_and_load(self.param_file)

    def test_batch_predictions_are_consistent(self):
        self.ensure_batch_predictions_are_consistent(keys_to_ignore=["spans", "tag_confidences"])

    def test_the_mix_trains_and_the_transformer_stays_frozen(self):
        embedder = self.model.text_field_embedder._token_embedders["transformer"]
        transformer = {name: p.clone() for name, p in embedder._matched_embedder.transformer_model.named_parameters()}
        optimizer = torch.optim.Adam([p for p in self.model.parameters() if p.requires_grad], lr=0.05)
        mix = [p.clone() for p in embedder.scalar_mix.parameters()]
        self.model.train()
        for _ in range(2):
            optimizer.zero_grad()
            self.model(**self.dataset.as_tensor_dict())["loss"].backward()
            optimizer.step()
        assert embedder.cache_info["sentences"] == len(self.instances)
        assert any(not torch.equal(a, b) for a, b in zip(mix, embedder.scalar_mix.parameters()))
        for name, parameter in embedder._matched_embedder.transformer_model.named_parameters():
            assert torch.equal(parameter, transformer[name]), name
