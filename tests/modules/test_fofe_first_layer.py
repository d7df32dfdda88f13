import pytest
import torch
from allennlp.common.checks import ConfigurationError
from allennlp.modules import FeedForward
from allennlp.nn import Activation

from nerzoo.modules.fofe.first_layer import FofeFeedForward, window_sums
from nerzoo.modules.fofe.span_features import span_features
from nerzoo.modules.fofe.spans import FlatSpans
from tests.modules.fofe_ner_batch import first_pass_entities_by_hand, fofe_batch


def _layer_and_features(batch, spans, entities=None, type_embedding=None):
    """The fast first layer and the features it stands for, of the model of `batch`."""
    model = batch.model
    words, characters = batch.codes(entities, type_embedding)
    if entities is not None:
        characters = None
    cnn = None if characters is None else batch.cnn_features(characters, spans)
    alphas = model.alpha, model.character_alpha
    features = span_features(words, characters, spans, *alphas, cnn)
    fast = model.feedforward.first_layer.from_codes(
        words, characters, batch.mask, spans, *alphas, model.max_span_width, entities is not None, cnn
    )
    return fast, features


def test_first_layer_from_position_tables_equals_the_layer_on_the_features():
    batch = fofe_batch()
    model = batch.model.double()
    first_layer = model.feedforward.first_layer
    for trial in range(3):
        if trial:  # other weights: random, with some ties and zeros
            torch.manual_seed(trial)
            with torch.no_grad():
                for parameter in model.parameters():
                    parameter.copy_(
                        torch.randint(-2, 3, parameter.shape).double() / 2 + torch.randn(parameter.shape) * (trial - 1)
                    )
        with torch.no_grad():
            fast, features = _layer_and_features(batch, batch.spans)
            torch.testing.assert_close(fast, first_layer(features), rtol=1e-10, atol=1e-10)
            torch.testing.assert_close(model.feedforward.from_first_layer(fast), model.feedforward(features))
    # A subset of the spans, in another order.
    order = torch.randperm(len(batch.spans.batch))[:40]
    with torch.no_grad():
        fast, features = _layer_and_features(batch, FlatSpans(*(values[order] for values in batch.spans)))
    torch.testing.assert_close(fast, first_layer(features), rtol=1e-10, atol=1e-10)


def test_first_layer_from_position_tables_with_first_pass_entities_in_the_contexts():
    batch = fofe_batch(4)
    model = batch.model
    dim = next(iter(model.word_embedders.values())).get_output_dim()
    types = torch.nn.Embedding(len(model.entity_types), dim)
    # A layer over one vocabulary's word features only.
    layer = type(model.feedforward.first_layer)(5 * dim, 7)
    model.feedforward.first_layer = layer
    with torch.no_grad():
        fast, features = _layer_and_features(batch, batch.spans, first_pass_entities_by_hand(batch.mask), types)
        torch.testing.assert_close(fast, layer(features))


def test_window_sums():
    values = torch.arange(8.0).view(4, 2)
    sums = window_sums(values, 3).view(3, 4, 2)
    for width in range(1, 4):
        for row in range(4):
            torch.testing.assert_close(sums[width - 1, row], values[row : row + width].sum(0))


@pytest.mark.parametrize("num_layers", [1, 3])
def test_feedforward_is_allennlps_and_loads_its_state_dict(num_layers):
    dims, activations, dropout = [6, 5, 4][:num_layers], [Activation.by_name("relu")()] * num_layers, 0.2
    torch.manual_seed(0)
    allennlps = FeedForward(10, num_layers, dims, activations, dropout)
    torch.manual_seed(0)
    ours = FofeFeedForward(10, num_layers, dims, activations, dropout)
    # The same initial weights from the same seed, one layer after the other.
    assert [p.tolist() for p in ours.parameters()] == [p.tolist() for p in allennlps.parameters()]
    assert (ours.get_input_dim(), ours.get_output_dim()) == (allennlps.get_input_dim(), allennlps.get_output_dim())
    torch.manual_seed(1)
    reloaded = FofeFeedForward(10, num_layers, dims, activations, dropout)
    reloaded.load_state_dict(allennlps.state_dict())  # strict: every key mapped
    inputs = torch.randn(3, 10)
    for module in (allennlps, reloaded):
        module.eval()
    torch.testing.assert_close(reloaded(inputs), allennlps(inputs), rtol=0, atol=0)
    reloaded.train()
    allennlps.train()
    torch.manual_seed(2)
    trained = reloaded(inputs)
    torch.manual_seed(2)
    torch.testing.assert_close(trained, allennlps(inputs), rtol=0, atol=0)


def test_feedforward_checks_its_layers():
    with pytest.raises(ConfigurationError):
        FofeFeedForward(10, 2, [6], Activation.by_name("relu")())
    with pytest.raises(ConfigurationError):
        FofeFeedForward(10, 0, 6, Activation.by_name("relu")())
