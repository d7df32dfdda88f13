import copy

import pytest
import torch
from allennlp.common import Params
from allennlp.common.checks import ConfigurationError
from allennlp.common.testing import ModelTestCase
from allennlp.data import DatasetReader, Vocabulary
from allennlp.data.batch import Batch
from allennlp.models import Model
from allennlp.nn.util import get_text_field_mask, sequence_cross_entropy_with_logits

import nerzoo  # noqa: F401
from nerzoo.models.seq2biseq import gather_steps, reversal_index
from tests import FIXTURES_ROOT, PROJECT_ROOT

CONFIG = FIXTURES_ROOT / "experiments" / "seq2biseq_tiny.jsonnet"
DATA = FIXTURES_ROOT / "conll2003" / "dev.txt"
TRAIN = FIXTURES_ROOT / "conll2003" / "train.txt"


class TestSeq2Biseq(ModelTestCase):
    def setup_method(self):
        super().setup_method()
        self.set_up_model(CONFIG, DATA)

    def test_can_train_save_and_load(self):
        self.ensure_model_can_train_save_and_load(self.param_file)

    def test_batch_predictions_are_consistent(self):
        self.ensure_batch_predictions_are_consistent(keys_to_ignore=["spans", "tag_confidences"])

    def test_teacher_forcing_equals_step_by_step_decoding_fed_the_gold_labels(self):
        # The batched path (each decoder GRU over the whole sequence) against the slow reference:
        # one step at a time, each step reading the gold label.  Rows of different lengths.
        torch.manual_seed(1)
        self.model.eval()
        tensors = self.dataset.as_tensor_dict()
        mask = get_text_field_mask(tensors["tokens"])
        assert len(set(mask.sum(1).tolist())) > 1
        lexical = self.model.encoder(self.model.text_field_embedder(tensors["tokens"]), mask)
        forced = self.model.teacher_forced(lexical, mask, tensors["tags"])
        reference = self.model.decode(lexical, mask, forced_tags=tensors["tags"])
        for batched, stepped in zip(forced, reference):
            assert torch.allclose(batched[mask], stepped[mask], atol=1e-5)

    def test_open_tokens_are_out_of_the_loss_and_the_decoders_read_their_own_choice_there(self):
        self.model.train()  # the output's logits are then those of the loss
        for module in self.model.modules():
            if isinstance(module, torch.nn.Dropout):
                module.p = 0.0
        tensors = self.dataset.as_tensor_dict()
        mask = get_text_field_mask(tensors["tokens"])
        tags = tensors["tags"].clone()
        tags[:, 1] = -1  # the second token of every sentence left open
        metadata = [dict(instance, partial=True) for instance in tensors["metadata"]]
        output = self.model(tokens=tensors["tokens"], tags=tags, metadata=metadata)
        marked, gold = mask & (tags >= 0), tags.clamp_min(0)
        expected = [
            sequence_cross_entropy_with_logits(output[key], gold, marked, average="token")
            for key in ("logits", "backward_logits")
        ]
        torch.testing.assert_close(output["loss"], 0.5 * (expected[0] + expected[1]))
        lexical = self.model.encoder(self.model.text_field_embedder(tensors["tokens"]), mask)
        stepped = self.model.decode(lexical, mask, forced_tags=tags)
        assert torch.allclose(output["logits"][mask], stepped[0][mask], atol=1e-6)

    def test_backward_decoder_reads_the_label_on_the_right(self):
        # Changing the gold label of the last word changes nothing at the last word and everything
        # before it for the backward decoder; for the forward decoder the last word alone changes.
        self.model.eval()
        tensors = self.dataset.as_tensor_dict()
        mask = get_text_field_mask(tensors["tokens"])
        lexical = self.model.encoder(self.model.text_field_embedder(tensors["tokens"]), mask)
        tags = tensors["tags"]
        row = 0
        last = int(mask[row].sum()) - 1
        changed = tags.clone()
        changed[row, last] = (tags[row, last] + 1) % self.model.num_tags
        forward_a, backward_a = self.model.teacher_forced(lexical, mask, tags)
        forward_b, backward_b = self.model.teacher_forced(lexical, mask, changed)
        assert torch.equal(backward_a[row, last], backward_b[row, last])
        assert not torch.allclose(backward_a[row, :last], backward_b[row, :last])
        # The forward decoder sees the backward states, which changed before `last`...
        assert not torch.allclose(forward_a[row, :last], forward_b[row, :last])
        # ... and at `last` only through its own input e_{last-1}, unchanged, and <-h_e_last, unchanged.
        assert torch.allclose(forward_a[row, last], forward_b[row, last])
        # The other rows are untouched.
        assert torch.equal(backward_a[1:], backward_b[1:]) and torch.equal(forward_a[1:], forward_b[1:])

    def test_outputs_are_human_readable(self):
        self.model.eval()
        output = self.model.make_output_human_readable(self.model(**self.dataset.as_tensor_dict()))
        for tags, spans, confidences, words in zip(
            output["tags"], output["spans"], output["tag_confidences"], output["words"]
        ):
            assert len(tags) == len(words) == len(confidences)
            assert all(0.0 < span["confidence"] <= 1.0 for span in spans)
            for span in spans:
                assert tags[span["start"]] == "B-" + span["label"] or tags[span["start"]] == "I-" + span["label"]
        mask = output["mask"]
        assert torch.allclose(output["tag_probabilities"].sum(-1)[mask], torch.ones(int(mask.sum())), atol=1e-5)

    def test_metrics(self):
        self.model.eval()
        self.model(**self.dataset.as_tensor_dict())
        metrics = self.model.get_metrics(reset=True)
        assert {"accuracy", "backward_accuracy", "f1-measure-overall", "concept_error_rate"} <= set(metrics)

    def test_mismatched_dimensions_raise(self):
        params = Params.from_file(self.param_file).duplicate()
        params["model"]["encoder"]["input_size"] = 13
        with pytest.raises(ConfigurationError, match="text field embedding dim"):
            Model.from_params(vocab=self.vocab, params=params.pop("model"))

    def test_negative_backward_loss_weight_raises(self):
        params = Params.from_file(self.param_file).duplicate()
        params["model"]["backward_loss_weight"] = -1.0
        with pytest.raises(ConfigurationError, match="backward_loss_weight"):
            Model.from_params(vocab=self.vocab, params=params.pop("model"))

    def test_without_lexical_decoders_the_decoders_read_labels_only(self):
        params = Params.from_file(self.param_file).duplicate()
        params["model"]["lexical_decoders"] = False
        model = Model.from_params(vocab=self.vocab, params=params.pop("model"))
        assert model.backward_decoder.input_size == 6 == model.forward_decoder.input_size
        output = model(**self.dataset.as_tensor_dict())
        output["loss"].backward()


def test_reversal_index_reverses_within_lengths_and_is_an_involution():
    mask = torch.tensor([[True, True, True, False, False], [True] * 5, [True, False, False, False, False]])
    index = reversal_index(mask)
    assert index.tolist() == [[2, 1, 0, 3, 4], [4, 3, 2, 1, 0], [0, 1, 2, 3, 4]]
    values = torch.randn(3, 5, 2)
    assert torch.equal(gather_steps(gather_steps(values, index), index), values)


def _model_and_batch(seed: int = 0, backward_loss_weight: float = 0.0, data=TRAIN, num_instances=None):
    params = Params.from_file(str(CONFIG))
    reader_params = params.pop("dataset_reader")
    instances = list(DatasetReader.from_params(reader_params).read(str(data)))[:num_instances]
    vocab = Vocabulary.from_instances(instances)
    torch.manual_seed(seed)
    model_params = params.pop("model")
    model_params["backward_loss_weight"] = backward_loss_weight
    model_params["dropout"] = 0.0
    model = Model.from_params(vocab=vocab, params=model_params)
    batch = Batch(instances)
    batch.index_instances(vocab)
    return model, batch.as_tensor_dict()


def _backward_decoder_names(model) -> set:
    return {name for name, _ in model.named_parameters() if name.startswith(("backward_decoder.", "backward_output."))}


def _gradients(model, tensors) -> dict:
    model.zero_grad()
    model(**tensors)["loss"].backward()
    return {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


def test_two_optimisers_equal_one_optimiser_on_the_restricted_sum():
    # Seq2Biseq_2-opt (§4.3): one SGD-with-momentum optimiser steps the backward decoder (GRU_bw, W_bw)
    # on its own NLL and another steps every parameter on eq. 8, with the same learning rate and
    # momentum.  That moves the parameters exactly as one optimiser on the model's loss with
    # backward_loss_weight = 1 (default scope "backward_decoder").
    two, tensors = _model_and_batch(seed=3, num_instances=16)
    two.double()  # float64: the two ways add the same gradients in a different order
    one = copy.deepcopy(two)
    one.backward_loss_weight = 1.0
    names = [name for name, _ in two.named_parameters()]
    backward_names = _backward_decoder_names(two)
    assert backward_names and len(backward_names) < len(names)
    backward_parameters = [p for name, p in two.named_parameters() if name in backward_names]
    backward_optimiser = torch.optim.SGD(backward_parameters, lr=0.1, momentum=0.9)
    main_optimiser = torch.optim.SGD(two.parameters(), lr=0.1, momentum=0.9)
    summed_optimiser = torch.optim.SGD(one.parameters(), lr=0.1, momentum=0.9)
    two.train()
    one.train()
    for _ in range(4):
        # Both gradients at the same point, then both steps.
        main_loss = two(**tensors)["loss"]
        main_gradients = torch.autograd.grad(main_loss, list(two.parameters()), allow_unused=True)
        mask = get_text_field_mask(tensors["tokens"])
        lexical = two.encoder(two.text_field_embedder(tensors["tokens"]), mask)
        _, backward_logits = two.teacher_forced(lexical, mask, tensors["tags"])
        backward_loss = sequence_cross_entropy_with_logits(backward_logits, tensors["tags"], mask, average="token")
        backward_gradients = torch.autograd.grad(backward_loss, backward_parameters)
        main_optimiser.zero_grad()
        for parameter, gradient in zip(two.parameters(), main_gradients):
            parameter.grad = None if gradient is None else gradient.clone()
        main_optimiser.step()
        backward_optimiser.zero_grad()
        for parameter, gradient in zip(backward_parameters, backward_gradients):
            parameter.grad = gradient.clone()
        backward_optimiser.step()

        summed_optimiser.zero_grad()
        one(**tensors)["loss"].backward()
        summed_optimiser.step()
    for name, a, b in zip(names, two.parameters(), one.parameters()):
        assert torch.allclose(a, b, atol=1e-9), name
    # And the two-optimiser run differs from eq. 8 alone (the extra loss matters).
    plain, _ = _model_and_batch(seed=3, num_instances=16)
    plain.double()
    plain_optimiser = torch.optim.SGD(plain.parameters(), lr=0.1, momentum=0.9)
    plain.train()
    for _ in range(4):
        plain_optimiser.zero_grad()
        plain(**tensors)["loss"].backward()
        plain_optimiser.step()
    assert not all(torch.allclose(a, b, atol=1e-5) for a, b in zip(plain.parameters(), two.parameters()))


@pytest.mark.parametrize("scope", ["backward_decoder", "all"])
def test_the_extra_backward_loss_reaches_only_its_scope(scope):
    model, tensors = _model_and_batch(seed=5, num_instances=16)
    model.double()
    model.train()
    plain = _gradients(model, tensors)
    model.backward_loss_weight = 1.0
    model.backward_loss_scope = scope
    output = model(**tensors)
    weighted = _gradients(model, tensors)
    backward_names = _backward_decoder_names(model)
    for name, gradient in plain.items():
        changed = not torch.allclose(gradient, weighted[name], atol=1e-12)
        if name in backward_names:
            assert changed, name
        elif scope == "backward_decoder":
            assert not changed, name
    if scope == "all":
        assert not torch.allclose(plain["encoder._module.weight_ih_l0"], weighted["encoder._module.weight_ih_l0"])
    # The loss value is eq. 8 plus the extra term in both scopes.
    mask = get_text_field_mask(tensors["tokens"])
    backward_nll = sequence_cross_entropy_with_logits(output["backward_logits"], tensors["tags"], mask, average="token")
    forward_nll = sequence_cross_entropy_with_logits(output["logits"], tensors["tags"], mask, average="token")
    assert torch.allclose(output["loss"], 0.5 * forward_nll + 1.5 * backward_nll)


def test_unknown_backward_loss_scope_raises():
    params = Params.from_file(str(CONFIG))
    params["model"]["backward_loss_scope"] = "encoder"
    reader = DatasetReader.from_params(params.pop("dataset_reader"))
    vocab = Vocabulary.from_instances(reader.read(str(DATA)))
    with pytest.raises(ConfigurationError, match="backward_loss_scope"):
        Model.from_params(vocab=vocab, params=params.pop("model"))


def test_dropout_covers_embeddings_words_labels_and_both_decoders():
    # §4.2: dropout on the embeddings and the output of the hidden layers.  Each place dropout
    # acts on is seen as the shape of the tensor it drops, in training.
    model, tensors = _model_and_batch(seed=0, num_instances=4)
    model.train()
    shapes = []
    model.dropout.register_forward_hook(lambda module, inputs, output: shapes.append(tuple(inputs[0].shape[-1:])))
    model(**tensors)
    label_dim = model.label_embedding.embedding_dim
    decoder_dim = model.backward_decoder.hidden_size
    assert shapes.count((model.text_field_embedder.get_output_dim(),)) == 1
    assert shapes.count((model.encoder.get_output_dim(),)) == 1
    assert shapes.count((label_dim,)) == 2  # the labels each decoder reads
    assert shapes.count((decoder_dim,)) == 2  # each decoder's states


def test_teacher_forcing_and_decoding_agree_once_the_model_is_perfect():
    # Train on a few fixture sentences until teacher-forced argmaxes equal the gold labels
    # everywhere; then decoding from its own predictions must give the gold labels and the same
    # logits (by induction over positions, the decoders read the same inputs).
    model, tensors = _model_and_batch(seed=0, data=DATA)
    optimiser = torch.optim.Adam(model.parameters(), lr=0.02)
    mask = get_text_field_mask(tensors["tokens"])
    tags = tensors["tags"]
    perfect = False
    for _ in range(300):
        model.train()
        optimiser.zero_grad()
        model(**tensors)["loss"].backward()
        optimiser.step()
        model.eval()
        with torch.no_grad():
            lexical = model.encoder(model.text_field_embedder(tensors["tokens"]), mask)
            forced_forward, forced_backward = model.teacher_forced(lexical, mask, tags)
        if torch.equal(forced_forward.argmax(-1)[mask], tags[mask]) and torch.equal(
            forced_backward.argmax(-1)[mask], tags[mask]
        ):
            perfect = True
            break
    assert perfect, "the tiny model did not fit the fixture"
    model.get_metrics(reset=True)  # forget the training steps' metrics
    with torch.no_grad():
        decoded_forward, decoded_backward = model.decode(lexical, mask)
        output = model(**tensors)
    assert torch.equal(decoded_forward.argmax(-1)[mask], tags[mask])
    assert torch.allclose(decoded_forward[mask], forced_forward[mask], atol=1e-5)
    assert torch.allclose(decoded_backward[mask], forced_backward[mask], atol=1e-5)
    assert model.get_metrics(reset=True)["accuracy"] == 1.0
    assert output["tags"] == [row[row_mask].tolist() for row, row_mask in zip(tags, mask)]


@pytest.mark.parametrize("config", ["seq2biseq.jsonnet", "seq2biseq_pos.jsonnet"])
def test_shipped_configs_keep_the_two_optimiser_variant_exact(config):
    # Two SGD optimisers equal one on the restricted sum only if nothing rescales the summed
    # gradient: no clipping (the paper clips nothing), and the extra loss scoped to the decoder.
    params = Params.from_file(str(PROJECT_ROOT / "training_config" / config), '{"model.backward_loss_weight": 1.0}')
    settings = params.as_dict(quiet=True)
    assert settings["trainer"].get("grad_norm") is None
    assert settings["trainer"].get("grad_clipping") is None
    assert settings["model"].get("backward_loss_scope", "backward_decoder") == "backward_decoder"
