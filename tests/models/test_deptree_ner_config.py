"""
The shipped training_config/deptree_ner.jsonnet, built on the fixtures: what it trains is the
paper's model with residuals everywhere, a global attention that learns, the loss of footnote 4 and
the l2 term of eq. 6 without the LayerNorms.
"""

import pytest
import torch
from allennlp.common import Params
from allennlp.data import Batch, DatasetReader, Vocabulary
from allennlp.models import Model
from allennlp.nn.util import get_final_encoder_states, get_text_field_mask

import nerzoo  # noqa: F401
from nerzoo.modules.seq2seq_encoders.fast_lstm import FastLstm
from nerzoo.modules.seq2seq_encoders.global_attention import GlobalAttention
from tests import PROJECT_ROOT

CONFIG = PROJECT_ROOT / "training_config" / "deptree_ner.jsonnet"


@pytest.fixture(scope="module")
def built():
    params = Params.from_file(str(CONFIG))
    reader = DatasetReader.from_params(params.pop("dataset_reader"))
    instances = list(reader.read(str(PROJECT_ROOT / params.pop("train_data_path"))))
    vocab = Vocabulary.from_params(params.pop("vocabulary"), instances=instances)
    torch.manual_seed(0)
    model = Model.from_params(vocab=vocab, params=params.pop("model"))
    batch = Batch(instances[:6])
    batch.index_instances(vocab)
    return model, batch.as_tensor_dict()


def test_every_encoder_layer_is_residual(built, monkeypatch):
    model, _ = built
    model.eval()
    # With every LSTM of the semantic stack giving zeros, its input still reaches its output
    # through the residual connection of every layer (a layer without one would give a constant).
    lstms = [module for module in model.semantic_encoder.modules() if isinstance(module, FastLstm)]
    assert len(lstms) == 2
    for lstm in lstms:
        monkeypatch.setattr(
            lstm, "forward", lambda inputs, mask, lstm=lstm: inputs.new_zeros(*inputs.shape[:2], lstm.get_output_dim())
        )
    mask = torch.ones(2, 5, dtype=torch.bool)
    with torch.no_grad():
        output = model.semantic_encoder(torch.randn(2, 5, model.semantic_encoder.get_input_dim()), mask)
    assert output.std(dim=(0, 1)).min() > 1e-3
    tree_layers = model.syntactic_encoder.layers
    assert all(layer.layer_norm is not None for layer in tree_layers)
    assert tree_layers[0].residual_projection is not None  # 150 -> 100


def test_global_attention_query_reaches_the_loss(built, monkeypatch):
    model, batch = built
    model.eval()
    attention = model.global_attention
    assert isinstance(attention, GlobalAttention)
    seen = {}
    attend = attention.attend

    def spy(inputs, mask, query):
        query.retain_grad()
        seen["query"] = query
        return attend(inputs, mask, query)

    monkeypatch.setattr(attention, "attend", spy)
    model.zero_grad()
    model(**batch)["loss"].backward()
    # In "context" mode the query steers what every word receives ("scale" gives it almost no gradient).
    assert seen["query"].grad.abs().max() > 1e-4
    for name, parameter in attention.named_parameters():
        assert parameter.grad is not None and parameter.grad.abs().max() > 1e-4, name


def test_global_attention_query_is_tree_root_then_lstm_final_state(built, monkeypatch):
    model, batch = built
    model.eval()
    seen = {}
    attend = model.global_attention.attend

    def spy(inputs, mask, query):
        seen["query"] = query
        return attend(inputs, mask, query)

    monkeypatch.setattr(model.global_attention, "attend", spy)
    with torch.no_grad():
        model(**batch)
        tokens = batch["tokens"]
        mask = get_text_field_mask(tokens)
        embedded = torch.cat(
            [
                model.text_field_embedder(tokens),
                model.pos_tag_embedding(batch["pos_tags"]),
                model.dependency_label_embedding(batch["dependency_labels"]),
            ],
            dim=-1,
        )
        root = model.syntactic_encoder.encode(embedded, mask, batch["head_indices"]).root
        final = get_final_encoder_states(model.semantic_encoder(embedded, mask), mask, bidirectional=True)
    tree_dim = root.size(-1)
    torch.testing.assert_close(seen["query"][:, :tree_dim], root)
    torch.testing.assert_close(seen["query"][:, tree_dim:], final)


def test_loss_is_the_mean_over_the_sentences_of_a_batch(built):
    model, batch = built
    model.eval()
    with torch.no_grad():
        output = model(**batch)
        nll = -model.head.crf(output["logits"], batch["tags"], output["mask"])  # allennlp: summed
    batch_size = batch["tags"].size(0)
    torch.testing.assert_close(output["loss"], nll / batch_size)


def test_l2_covers_encoders_and_attentions_but_not_layer_norms(built):
    model, _ = built
    components = ("semantic_encoder", "syntactic_encoder", "relative_attention", "global_attention")
    covered, layer_norms = [], []
    for name, parameter in model.named_parameters():
        if name.split(".")[0] in components:
            (layer_norms if "layer_norm" in name else covered).append(parameter)
    assert layer_norms and covered
    expected = 1e-5 * sum(parameter.pow(2).sum() for parameter in covered)
    torch.testing.assert_close(model.get_regularization_penalty(), expected)
