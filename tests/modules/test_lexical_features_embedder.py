import pytest
import torch
from allennlp.common import Params
from allennlp.common.checks import ConfigurationError
from allennlp.data import Batch, Instance, Token, Vocabulary
from allennlp.data.fields import TextField
from allennlp.data.token_indexers import SingleIdTokenIndexer
from allennlp.modules.text_field_embedders import BasicTextFieldEmbedder
from allennlp.modules.token_embedders import Embedding, TokenEmbedder
from allennlp.nn.util import get_text_field_mask

from nerzoo.data.token_indexers.lexical_features_indexer import LexicalFeaturesIndexer, word_shape_features
from nerzoo.modules.token_embedders.lexical_features_embedder import LexicalFeaturesEmbedder

WORD_DIM = 4


def test_text_field_through_batch_and_basic_text_field_embedder():
    indexers = {"tokens": SingleIdTokenIndexer(lowercase_tokens=True), "shape": LexicalFeaturesIndexer()}
    sentences = [["EU", "rejects", "German", "call", "in", "1996", "."], ["Peter", "McDonald"]]
    instances = [Instance({"text": TextField([Token(w) for w in words], indexers)}) for words in sentences]
    vocab = Vocabulary.from_instances(instances)
    batch = Batch(instances)
    batch.index_instances(vocab)
    text = batch.as_tensor_dict()["text"]
    assert text["shape"]["features"].shape == (2, 7, 6)

    embedder = BasicTextFieldEmbedder(
        {
            "tokens": Embedding(embedding_dim=WORD_DIM, num_embeddings=vocab.get_vocab_size("tokens")),
            "shape": TokenEmbedder.from_params(Params({"type": "lexical_features"})),
        }
    )
    assert embedder.get_output_dim() == WORD_DIM + 6
    embedded = embedder(text)
    assert embedded.shape == (2, 7, WORD_DIM + 6)
    # Keys are concatenated in sorted order: "shape" (features) first, then "tokens".
    features = embedded[..., :6]
    for row, words in enumerate(sentences):
        assert features[row, : len(words)].tolist() == [word_shape_features(w) for w in words]
    assert torch.all(features[1, 2:] == 0)
    # The mask comes from the single_id tensor, so the all-zero features of "1996" stay unmasked.
    mask = get_text_field_mask(text)
    assert mask.tolist() == [[True] * 7, [True] * 2 + [False] * 5]


def test_projected_embedder():
    embedder = TokenEmbedder.from_params(Params({"type": "lexical_features", "embedding_dim": 3}))
    assert isinstance(embedder, LexicalFeaturesEmbedder)
    assert embedder.get_output_dim() == 3
    assert sum(p.numel() for p in embedder.parameters()) == 6 * 3
    features = torch.tensor([[[1, 1, 0, 1, 0, 0], [0] * 6]])
    output = embedder(features)
    assert output.shape == (1, 2, 3)
    assert torch.all(output[0, 1] == 0)  # no bias: padding stays zero
    assert torch.allclose(output[0, 0], embedder._projection.weight[:, [0, 1, 3]].sum(dim=1))


def test_unprojected_embedder():
    embedder = LexicalFeaturesEmbedder()
    assert embedder.get_output_dim() == 6 and not list(embedder.parameters())
    output = embedder(torch.tensor([[[0, 0, 1, 0, 0, 0]]]))
    assert output.dtype == torch.float32 and output.tolist() == [[[0.0, 0.0, 1.0, 0.0, 0.0, 0.0]]]


def test_embedding_dim_must_be_positive():
    with pytest.raises(ConfigurationError):
        LexicalFeaturesEmbedder(embedding_dim=0)
