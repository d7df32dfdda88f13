import pytest
import torch
from allennlp.common import Params
from allennlp.common.checks import ConfigurationError
from allennlp.data import Vocabulary
from allennlp.modules.token_embedders import Embedding, TokenEmbedder

from nerzoo.modules.token_embedders.word_dropout import WordDropout


def make_vocab() -> Vocabulary:
    vocab = Vocabulary()
    vocab.add_tokens_to_namespace([f"w{i}" for i in range(20)], "tokens")
    return vocab


def make_embedder(rate: float) -> WordDropout:
    vocab = make_vocab()
    torch.manual_seed(0)
    return TokenEmbedder.from_params(
        Params({"type": "word_dropout", "rate": rate, "embedder": {"type": "embedding", "embedding_dim": 3}}),
        vocab=vocab,
    )


def ids(batch_size: int = 64, num_tokens: int = 50) -> torch.LongTensor:
    # Real ids 2..21, the last ten slots of every row padding.
    tokens = torch.randint(2, 22, (batch_size, num_tokens))
    tokens[:, -10:] = 0
    return tokens


def test_evaluation_is_the_wrapped_embedder():
    embedder = make_embedder(0.5).eval()
    tokens = ids()
    assert embedder.get_output_dim() == 3
    assert torch.equal(embedder(tokens), embedder.embedder(tokens))


def test_training_replaces_real_tokens_by_the_unknown_word_at_the_rate():
    embedder = make_embedder(0.25).train()
    unknown = embedder.embedder.weight[1]
    torch.manual_seed(1)
    tokens = ids()
    output = embedder(tokens)
    real = tokens != 0
    kept = (output == embedder.embedder(tokens)).all(dim=-1)
    replaced = (output == unknown).all(dim=-1) & ~kept
    assert embedder.oov_index == 1
    assert torch.all(kept | replaced)
    assert not replaced[~real].any()
    assert abs(replaced[real].float().mean().item() - 0.25) < 0.02


def test_the_unknown_word_is_trained_only_through_dropped_tokens():
    embedder = make_embedder(0.2)
    tokens = ids()
    embedder.eval()
    embedder(tokens).sum().backward()
    assert embedder.embedder.weight.grad[1].abs().sum() == 0
    embedder.zero_grad()
    embedder.train()
    embedder(tokens).sum().backward()
    assert embedder.embedder.weight.grad[1].abs().sum() > 0


def test_zero_rate_trains_as_the_wrapped_embedder():
    embedder = make_embedder(0.0).train()
    tokens = ids()
    assert torch.equal(embedder(tokens), embedder.embedder(tokens))


@pytest.mark.parametrize("rate", [-0.1, 1.0])
def test_rate_outside_its_range_is_a_configuration_error(rate):
    with pytest.raises(ConfigurationError, match="rate"):
        make_embedder(rate)


def test_namespace_without_unknown_word_is_a_configuration_error():
    vocab = make_vocab()
    with pytest.raises(ConfigurationError, match="labels"):
        WordDropout(vocab, Embedding(embedding_dim=3, num_embeddings=4), rate=0.1, vocab_namespace="labels")
