"""`fast_character_encoding` against allennlp's `character_encoding`, which it must equal on real tokens."""

import pytest
import torch
from allennlp.common import Params
from allennlp.modules.token_embedders import TokenCharactersEncoder, TokenEmbedder

from nerzoo.modules.token_embedders.fast_character_encoding import FastCharacterEncoder
from tests.cuda_autocast import cuda_float16_autocast

ENCODERS = {
    "cnn": {"type": "cnn", "embedding_dim": 6, "num_filters": 7, "ngram_filter_sizes": [2, 3]},
    "cnn, one height": {"type": "cnn", "embedding_dim": 6, "num_filters": 7, "ngram_filter_sizes": [3]},
    "cnn, tanh and projection": {
        "type": "cnn",
        "embedding_dim": 6,
        "num_filters": 3,
        "ngram_filter_sizes": [1, 4],
        "conv_layer_activation": "tanh",
        "output_dim": 5,
    },
    "lstm": {"type": "lstm", "input_size": 6, "hidden_size": 4, "bidirectional": True},
}


def _pair(encoder):
    def params(name):
        return Params(
            {"type": name, "embedding": {"embedding_dim": 6, "num_embeddings": 30}, "encoder": dict(ENCODERS[encoder])}
        )

    reference = TokenEmbedder.from_params(params("character_encoding"))
    packed = TokenEmbedder.from_params(params("fast_character_encoding"))
    assert isinstance(packed, FastCharacterEncoder) and type(reference) is TokenCharactersEncoder
    packed.load_state_dict(reference.state_dict())
    return reference, packed


def _characters():
    generator = torch.Generator().manual_seed(0)
    characters = torch.randint(1, 30, (3, 5, 6), generator=generator)
    lengths = torch.tensor([[6, 2, 4, 1, 3], [5, 3, 0, 0, 0], [1, 0, 0, 0, 0]])
    return characters * (torch.arange(6) < lengths.unsqueeze(-1)), lengths > 0


@pytest.mark.parametrize("encoder", sorted(ENCODERS))
def test_real_tokens_equal_character_encoding_and_padding_is_zero(encoder):
    reference, packed = _pair(encoder)
    characters, tokens = _characters()
    expected = reference(characters)
    output = packed(characters)
    assert output.shape == expected.shape == (3, 5, packed.get_output_dim())
    assert torch.allclose(output[tokens], expected[tokens], atol=1e-6)
    assert not output[~tokens].any()
    # The same gradients reach the parameters through the real tokens.
    weights = torch.randn(expected.shape) * tokens.unsqueeze(-1)
    (expected * weights).sum().backward()
    (output * weights).sum().backward()
    for (name, got), (_, wanted) in zip(packed.named_parameters(), reference.named_parameters()):
        assert torch.allclose(got.grad, wanted.grad, atol=1e-5), name


@pytest.mark.parametrize("encoder", sorted(name for name in ENCODERS if name.startswith("cnn")))
def test_prediction_encodes_the_real_tokens_as_training_does(encoder):
    _, packed = _pair(encoder)
    characters, _ = _characters()
    for batch in (characters, characters[2:, 1:]):  # the second batch has no real token
        readable = packed(batch).detach()
        # A convolution over fewer words may round differently on another CPU: equal up to float32 rounding.
        for no_grad in (torch.no_grad, torch.inference_mode):
            with no_grad():
                fast = packed(batch)
            torch.testing.assert_close(fast, readable, rtol=1e-6, atol=1e-6)
            assert not fast[(batch == 0).all(dim=-1)].any()


def test_archives_are_interchangeable():
    reference, packed = _pair("cnn")
    assert list(packed.state_dict()) == list(reference.state_dict())


AUTOCASTS = {
    "CPU autocast": lambda: torch.autocast("cpu", dtype=torch.float16),
    "CUDA autocast (emulated)": cuda_float16_autocast,
}


@pytest.mark.parametrize("autocast", sorted(AUTOCASTS))
def test_float16_autocast_gives_short_words_0_as_float32_does(autocast):
    # Words shorter than a filter (1 to 3 characters against a width of 4) get 0 there, as in float32.
    reference, packed = _pair("cnn, tanh and projection")
    characters, tokens = _characters()
    expected = reference(characters)
    with AUTOCASTS[autocast]():
        output = packed(characters)
    assert torch.allclose(output[tokens].float(), expected[tokens], atol=1e-2)
    assert not output[~tokens].any()


def test_float64_gives_the_float32_vectors():
    reference, packed = _pair("cnn, tanh and projection")
    characters, tokens = _characters()
    expected = reference(characters)
    output = packed.double()(characters)
    assert output.dtype == torch.float64 and torch.isfinite(output).all()
    assert torch.allclose(output[tokens].float(), expected[tokens], atol=1e-6)
