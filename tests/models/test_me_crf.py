import pytest
import torch
from allennlp.common import Params
from allennlp.common.checks import ConfigurationError
from allennlp.common.testing import ModelTestCase
from allennlp.models import Model

import nerzoo  # noqa: F401
from nerzoo.metrics.conll_span_f1 import ConllSpanF1
from tests import FIXTURES_ROOT

CONFIG = FIXTURES_ROOT / "experiments" / "me_crf_tiny.jsonnet"
DATA = FIXTURES_ROOT / "conll2003" / "train.txt"


class TestMeCrf(ModelTestCase):
    def setup_method(self):
        super().setup_method()
        self.set_up_model(CONFIG, DATA)

    def test_can_train_save_and_load(self):
        self.ensure_model_can_train_save_and_load(self.param_file)

    def test_per_sentence_crf_trains(self):
        self.ensure_model_can_train_save_and_load(self.param_file, overrides='{"model.head.crf_per_sentence": true}')

    def test_memorynet_variant_trains(self):
        self.ensure_model_can_train_save_and_load(self.param_file, overrides='{"model.head.use_crf": false}')

    def test_instances_are_documents_scored_sentence_by_sentence(self):
        documents = self.instances
        assert len(documents) == 25
        assert any(len(instance["metadata"]["sentence_spans"]) > 1 for instance in documents)
        self.model.eval()
        self.model.get_metrics(reset=True)
        output = self.model(**self.dataset.as_tensor_dict())
        metrics = self.model.get_metrics(reset=True)
        # The same predictions, cut into sentences by hand, scored by a fresh metric.
        reference = ConllSpanF1.from_vocab(self.vocab, "labels")
        predicted, gold = [], []
        for instance, path in zip(documents, output["tags"]):
            labels = [self.vocab.get_token_from_index(tag, "labels") for tag in path]
            for start, end in instance["metadata"]["sentence_spans"]:
                predicted.append(labels[start:end])
                gold.append(list(instance["tags"].labels[start:end]))
        reference(predicted, gold)
        assert metrics["f1-measure-overall"] == pytest.approx(reference.get_metric()["f1-measure-overall"])

    def test_attention_reaches_across_sentences_but_not_ahead(self):
        self.model.eval()
        output = self.model(**self.dataset.as_tensor_dict())
        weights, positions = output["memory_attention"], output["memory_key_positions"]
        num_tokens = weights.size(2)
        steps = torch.arange(num_tokens).view(1, 1, -1, 1)
        assert torch.all(weights[(positions.unsqueeze(1) > steps).expand_as(weights)] == 0)
        mask = output["mask"]
        assert torch.allclose(weights.sum(-1).transpose(1, 2)[mask], torch.ones(int(mask.sum()), 2), atol=1e-5)
        # A word in a later sentence attends to words of earlier sentences (window 40).
        row = max(range(len(self.instances)), key=lambda index: len(self.instances[index]["tokens"]))
        first_end = self.instances[row]["metadata"]["sentence_spans"][0][1]
        later = first_end + 5
        earlier_columns = (positions[row, later] < first_end) & (positions[row, later] >= 0)
        assert weights[row, 0, later][earlier_columns].sum() > 0

    def test_mismatched_memory_options_raise(self):
        params = Params.from_file(self.param_file).duplicate()
        params["model"]["memory"]["window"] = 0
        with pytest.raises(ConfigurationError, match="window"):
            Model.from_params(vocab=self.vocab, params=params.pop("model"))


def test_draw_memory_numbers_the_columns_of_a_windowed_model(tmp_path):
    """With a window, the first block's band reaches before the document: no head column, no shift."""
    from nerzoo.commands.draw_memory import NULL_LABEL, draw

    test = TestMeCrf()
    test.setup_method()
    model = test.model.eval()
    assert model.memory.window == 40 and not model.memory.null_memory
    instance = max(test.instances, key=lambda instance: len(instance["tokens"]))
    words = instance["metadata"]["words"]
    assert len(words) > 40
    output = model.forward_on_instance(instance)
    output.update(words=words, sentence_spans=instance["metadata"]["sentence_spans"])
    ticks = draw(output, str(tmp_path / "memory.png"), -1, (30, 45), 0.02, null_memory=False)
    assert ticks and (tmp_path / "memory.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for tick in ticks:
        label, position = tick.rsplit(" ", 1)
        assert label != NULL_LABEL and words[int(position)].startswith(label.rstrip("\u2026"))
