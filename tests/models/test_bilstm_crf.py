import pytest
import torch
from allennlp.common import Params
from allennlp.common.checks import ConfigurationError
from allennlp.common.testing import ModelTestCase
from allennlp.data import Vocabulary
from allennlp.data.batch import Batch
from allennlp.models import Model
from allennlp.modules.token_embedders import Embedding, TokenEmbedder

import nerzoo  # noqa: F401
from nerzoo.data.dataset_readers.conll_columns import ConllColumnsReader
from nerzoo.modules.auxiliary_loss import AuxiliaryLossSource, AuxiliaryLossTerms
from tests import FIXTURES_ROOT

CONFIG = FIXTURES_ROOT / "experiments" / "bilstm_crf_tiny.jsonnet"
DATA = FIXTURES_ROOT / "conll2003" / "dev.txt"


class TestBiLstmCrf(ModelTestCase):
    def setup_method(self):
        super().setup_method()
        self.set_up_model(CONFIG, DATA)

    def test_can_train_save_and_load(self):
        self.ensure_model_can_train_save_and_load(self.param_file)

    def test_batch_predictions_are_consistent(self):
        self.ensure_batch_predictions_are_consistent(keys_to_ignore=["spans", "tag_confidences"])

    def test_outputs_are_human_readable_with_spans_and_confidences(self):
        self.model.eval()
        output = self.model.make_output_human_readable(self.model(**self.dataset.as_tensor_dict()))
        for tags, spans, confidences, words in zip(
            output["tags"], output["spans"], output["tag_confidences"], output["words"]
        ):
            assert len(tags) == len(words) == len(confidences)
            assert all(tag == "O" or tag[1] == "-" for tag in tags)
            assert all(0.0 < span["confidence"] <= 1.0 for span in spans)
        probabilities = output["tag_probabilities"]
        mask = output["mask"]
        assert probabilities.dtype == torch.float64  # forward-backward in float64
        assert torch.allclose(probabilities.sum(-1)[mask], probabilities.new_ones(int(mask.sum())), atol=1e-12)

    def test_mismatched_dimensions_raise(self):
        params = Params.from_file(self.param_file).duplicate()
        params["model"]["encoder"]["input_size"] = 59
        with pytest.raises(ConfigurationError, match="text field embedding dim"):
            Model.from_params(vocab=self.vocab, params=params.pop("model"))


@TokenEmbedder.register("test_penalised_embedding")
class _PenalisedEmbedding(Embedding):
    """An `AuxiliaryLossSource`: reports `penalty_weight * mean squared embedding`, kept in `last_penalty`."""

    def __init__(self, penalty_weight: float = 0.5, **kwargs) -> None:
        super().__init__(**kwargs)
        self.penalty_weight = penalty_weight
        self.last_penalty = None
        self._terms = AuxiliaryLossTerms()

    def forward(self, tokens):
        embedded = super().forward(tokens)
        self.last_penalty = self.penalty_weight * embedded.pow(2).mean()
        self._terms.add("penalty", self.last_penalty)
        return embedded

    def pop_auxiliary_losses(self):
        return self._terms.pop()


def _penalised_model(vocab: Vocabulary, penalty_weight: float) -> Model:
    embedder = {"type": "test_penalised_embedding", "embedding_dim": 6, "penalty_weight": penalty_weight}
    params = Params(
        {
            "type": "bilstm_crf",
            "text_field_embedder": {"token_embedders": {"tokens": embedder}},
            "encoder": {"type": "lstm", "input_size": 6, "hidden_size": 4, "bidirectional": True},
        }
    )
    return Model.from_params(vocab=vocab, params=params)


def test_auxiliary_losses_reach_the_total_and_the_metrics():
    reader = ConllColumnsReader(tag_column=3)
    instances = list(reader.read(DATA))
    vocab = Vocabulary.from_instances(instances)
    torch.manual_seed(0)
    model = _penalised_model(vocab, penalty_weight=0.5)
    unpenalised = _penalised_model(vocab, penalty_weight=0.0)
    unpenalised.load_state_dict(model.state_dict())
    (embedder,) = [module for module in model.modules() if isinstance(module, AuxiliaryLossSource)]
    batch = Batch(instances[:4])
    batch.index_instances(vocab)
    tensors = batch.as_tensor_dict()

    loss = model(**tensors)["loss"]
    penalty = embedder.last_penalty.item()
    assert penalty > 0
    assert loss.item() == pytest.approx(unpenalised(**tensors)["loss"].item() + penalty, rel=1e-5)
    assert model.get_metrics()["penalty_loss"] == pytest.approx(penalty, rel=1e-5)
    assert unpenalised.get_metrics()["penalty_loss"] == 0.0
    # Collected once: a second forward pass does not count the first one's term again.
    assert model(**tensors)["loss"].item() == pytest.approx(loss.item(), rel=1e-5)


def test_document_spans_stay_inside_sentences():
    from nerzoo.modules.crf.tag_head import TagHead

    vocab = Vocabulary()
    for tag in ["O", "B-PER", "I-PER", "L-PER", "U-PER"]:
        vocab.add_token_to_namespace(tag, "labels")
    head = TagHead(vocab, input_dim=5).eval()
    # Weights as an archive holds them: the projection passes the encoding through as tag scores,
    # and every transition scores 0 (the scheme's constraints still apply).
    weights = head.state_dict()
    weights["tag_projection._module.weight"] = torch.eye(5)
    weights["tag_projection._module.bias"] = torch.zeros(5)
    for key in ("crf.transitions", "crf.start_transitions", "crf.end_transitions"):
        weights[key] = torch.zeros_like(weights[key])
    head.load_state_dict(weights)
    index = vocab.get_token_to_index_vocabulary("labels")
    # Scores that want B-PER at the last token of sentence one and L-PER at the first of sentence two.
    encoded = torch.full((1, 4, 5), -5.0)
    for position, tag in enumerate(["O", "B-PER", "L-PER", "O"]):
        encoded[0, position, index[tag]] = 5.0
    mask = torch.ones(1, 4, dtype=torch.bool)
    output = head.make_output_human_readable(head(encoded, mask, metadata=[{"sentence_spans": [(0, 2), (2, 4)]}]))
    assert output["tags"] == [["O", "B-PER", "L-PER", "O"]]
    assert [(span["start"], span["end"]) for span in output["spans"][0]] == [(1, 2), (2, 3)]
    whole = head.make_output_human_readable(head(encoded, mask))
    assert whole["tags"] == [["O", "B-PER", "L-PER", "O"]]
    assert [(span["start"], span["end"]) for span in whole["spans"][0]] == [(1, 3)]
