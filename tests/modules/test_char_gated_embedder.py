import pytest
import torch
from allennlp.common import Params
from allennlp.common.checks import ConfigurationError
from allennlp.data import Batch, Instance, Token, Vocabulary
from allennlp.data.fields import TextField
from allennlp.data.token_indexers import TokenIndexer
from allennlp.modules.seq2vec_encoders import CnnEncoder, LstmSeq2VecEncoder
from allennlp.modules.text_field_embedders import BasicTextFieldEmbedder
from allennlp.modules.token_embedders import Embedding, TokenEmbedder
from allennlp.nn.util import get_text_field_mask

from nerzoo.data.token_indexers.word_and_characters_indexer import WordAndCharactersIndexer
from nerzoo.modules.auxiliary_loss import pop_auxiliary_losses
from nerzoo.modules.token_embedders.char_gated_embedder import CharGatedEmbedder

WORD_DIM = 4
CHAR_DIM = 3
CHAR_HIDDEN = 2


def make_vocab() -> Vocabulary:
    vocab = Vocabulary()
    vocab.add_tokens_to_namespace(["the", "cat", "sat"], "tokens")
    vocab.add_tokens_to_namespace(list("Thecatsdog"), "token_characters")
    return vocab


def make_embedder(vocab: Vocabulary, **kwargs) -> CharGatedEmbedder:
    torch.manual_seed(0)
    return CharGatedEmbedder(
        vocab=vocab,
        word_embedding=Embedding(embedding_dim=WORD_DIM, num_embeddings=vocab.get_vocab_size("tokens")),
        character_embedding=Embedding(embedding_dim=CHAR_DIM, num_embeddings=vocab.get_vocab_size("token_characters")),
        character_encoder=LstmSeq2VecEncoder(input_size=CHAR_DIM, hidden_size=CHAR_HIDDEN, bidirectional=True),
        **kwargs,
    )


def char_ids(vocab: Vocabulary, word: str, length: int):
    ids = [vocab.get_token_index(c, "token_characters") for c in word]
    return ids + [0] * (length - len(ids))


def sample_input(vocab: Vocabulary):
    """One sentence "the dog cat <pad>": in-vocabulary, OOV, in-vocabulary, padding."""
    words = ["the", "dog", "cat"]
    token_ids = torch.tensor([[vocab.get_token_index(w, "tokens") for w in words] + [0]])
    token_characters = torch.tensor([[char_ids(vocab, w, 3) for w in words] + [[0, 0, 0]]])
    return token_ids, token_characters


# ----------------------------------------------------------------------------------------------
# Indexer
# ----------------------------------------------------------------------------------------------


def test_indexer_ids_and_characters_lowercase_only_on_words():
    vocab = make_vocab()
    tokens = [Token(w) for w in ["The", "cat", "dog"]]
    oov = vocab.get_token_index(vocab._oov_token, "tokens")

    lowered = WordAndCharactersIndexer(lowercase_tokens=True).tokens_to_indices(tokens, vocab)
    assert set(lowered) == {"token_ids", "token_characters"}
    assert lowered["token_ids"] == [
        vocab.get_token_index("the", "tokens"),
        vocab.get_token_index("cat", "tokens"),
        oov,
    ]
    # The characters keep their case: "T" is not "t".
    assert vocab.get_token_index("T", "token_characters") != vocab.get_token_index("t", "token_characters")
    assert lowered["token_characters"] == [
        [vocab.get_token_index(c, "token_characters") for c in word] for word in ["The", "cat", "dog"]
    ]

    cased = WordAndCharactersIndexer().tokens_to_indices(tokens, vocab)
    assert cased["token_ids"][0] == oov  # "The" is not in the (lower-cased) vocabulary
    assert cased["token_characters"] == lowered["token_characters"]


def test_indexer_counts_lowercased_words_and_cased_characters():
    indexer = WordAndCharactersIndexer(lowercase_tokens=True)
    instance = Instance({"text": TextField([Token("The"), Token("Cat")], {"tokens": indexer})})
    vocab = Vocabulary.from_instances([instance])
    words = set(vocab.get_token_to_index_vocabulary("tokens"))
    characters = set(vocab.get_token_to_index_vocabulary("token_characters"))
    assert {"the", "cat"} <= words and "The" not in words
    assert characters - {vocab._padding_token, vocab._oov_token} == {"T", "C", "h", "e", "a", "t"}


def test_indexer_from_params_and_distinct_padding_keys():
    indexer = TokenIndexer.from_params(
        Params({"type": "word_and_characters", "lowercase_tokens": True, "character_namespace": "chars"})
    )
    assert isinstance(indexer, WordAndCharactersIndexer)
    vocab = Vocabulary()
    indexed = indexer.tokens_to_indices([Token("ab"), Token("abcde")], vocab)
    lengths = indexer.get_padding_lengths(indexed)
    assert len(lengths) == 3
    assert lengths == {"word__tokens": 2, "characters__token_characters": 2, "characters__num_token_characters": 5}
    assert indexer.get_empty_token_list() == {"token_ids": [], "token_characters": []}


def test_batch_padding_of_two_text_fields():
    indexer = WordAndCharactersIndexer(lowercase_tokens=True)
    sentences = [["Cats", "sat"], ["a", "dog", "barked"]]
    instances = [Instance({"text": TextField([Token(w) for w in s], {"tokens": indexer})}) for s in sentences]
    vocab = Vocabulary.from_instances(instances)
    batch = Batch(instances)
    batch.index_instances(vocab)
    tensors = batch.as_tensor_dict()["text"]["tokens"]
    token_ids, token_characters = tensors["token_ids"], tensors["token_characters"]
    assert token_ids.dtype == torch.long and token_characters.dtype == torch.long
    assert token_ids.shape == (2, 3)
    assert token_characters.shape == (2, 3, 6)  # longest word "barked"

    for row, words in enumerate(sentences):
        for col, word in enumerate(words):
            assert token_ids[row, col] == vocab.get_token_index(word.lower(), "tokens")
            expected = [vocab.get_token_index(c, "token_characters") for c in word]
            assert token_characters[row, col, : len(word)].tolist() == expected
            assert torch.all(token_characters[row, col, len(word) :] == 0)
            assert torch.all(token_characters[row, col, : len(word)] > 0)
    assert token_ids[0, 2] == 0
    assert torch.all(token_characters[0, 2] == 0)
    assert get_text_field_mask({"tokens": tensors}).tolist() == [[True, True, False], [True, True, True]]


def test_min_padding_length_pads_characters():
    indexer = WordAndCharactersIndexer(min_padding_length=5)
    instance = Instance({"text": TextField([Token("ab")], {"tokens": indexer})})
    vocab = Vocabulary.from_instances([instance])
    batch = Batch([instance])
    batch.index_instances(vocab)
    tensors = batch.as_tensor_dict()["text"]["tokens"]
    assert tensors["token_ids"].shape == (1, 1)
    assert tensors["token_characters"].shape == (1, 1, 5)
    assert tensors["token_characters"][0, 0, 2:].tolist() == [0, 0, 0]


# ----------------------------------------------------------------------------------------------
# Embedder
# ----------------------------------------------------------------------------------------------


def test_character_representation_per_word():
    vocab = make_vocab()
    embedder = make_embedder(vocab)
    token_ids, token_characters = sample_input(vocab)
    m = embedder.character_representation(token_characters)
    assert m.shape == (1, 4, WORD_DIM)
    for position, word in enumerate(["the", "dog", "cat"]):
        chars = torch.tensor([char_ids(vocab, word, len(word))])
        encoded = embedder._character_encoder(embedder._character_embedding(chars), chars != 0)
        expected = torch.tanh(embedder._character_projection(encoded))[0]
        assert torch.allclose(m[0, position], expected, atol=1e-6)
    # A padding word gets a zero encoding: m = tanh(b_m).
    assert torch.allclose(m[0, 3], torch.tanh(embedder._character_projection.bias), atol=1e-6)


def test_gate_values_and_combination_by_hand():
    vocab = make_vocab()
    embedder = make_embedder(vocab, cosine_loss_weight=0.0)
    torch.manual_seed(1)
    x = torch.randn(2, 3, WORD_DIM) * 3
    m = torch.tanh(torch.randn(2, 3, WORD_DIM))
    output, gate = embedder.combine(x, m)
    assert gate is not None and gate.shape == (2, 3, WORD_DIM)
    assert torch.all(gate > 0) and torch.all(gate < 1)

    w1, w2, w3 = embedder._gate_word.weight, embedder._gate_character.weight, embedder._gate_output.weight
    b2, b3 = embedder._gate_character.bias, embedder._gate_output.bias
    assert embedder._gate_word.bias is None
    z = torch.sigmoid(torch.tanh(x @ w1.T + m @ w2.T + b2) @ w3.T + b3)
    assert torch.allclose(gate, z, atol=1e-6)
    assert torch.allclose(output, z * x + (1 - z) * m, atol=1e-6)
    assert embedder.get_output_dim() == WORD_DIM

    # forward = combine(word embedding, character representation)
    token_ids, token_characters = sample_input(vocab)
    expected, _ = embedder.combine(
        embedder._word_embedding(token_ids), embedder.character_representation(token_characters)
    )
    assert torch.allclose(embedder(token_ids, token_characters), expected, atol=1e-6)
    assert pop_auxiliary_losses(embedder) == {}  # cosine_loss_weight = 0 reports nothing


def test_cosine_loss_zero_on_oov_and_padding_only():
    vocab = make_vocab()
    embedder = make_embedder(vocab)
    oov = vocab.get_token_index(vocab._oov_token, "tokens")
    token_ids = torch.tensor([[oov, oov, 0], [oov, 0, 0]])
    token_characters = torch.tensor(
        [
            [char_ids(vocab, "dog", 3), char_ids(vocab, "cog", 3), [0, 0, 0]],
            [char_ids(vocab, "do", 3), [0, 0, 0], [0, 0, 0]],
        ]
    )
    embedder(token_ids, token_characters)
    losses = pop_auxiliary_losses(embedder)
    assert set(losses) == {"char_cosine"}
    assert losses["char_cosine"].item() == 0.0


def test_cosine_loss_by_hand_on_mixed_input():
    vocab = make_vocab()
    embedder = make_embedder(vocab, cosine_loss_weight=0.5)
    token_ids, token_characters = sample_input(vocab)
    embedder(token_ids, token_characters)
    loss = pop_auxiliary_losses(embedder)["char_cosine"]
    assert loss.dtype == torch.float32 and loss.dim() == 0

    x = embedder._word_embedding.weight[token_ids[0]]
    m = embedder.character_representation(token_characters)[0]
    expected = 0.0
    for position in (0, 2):  # "the" and "cat"; "dog" is OOV and position 3 is padding
        cosine = torch.dot(m[position], x[position]) / (m[position].norm() * x[position].norm())
        expected += 1.0 - cosine.item()
    assert loss.item() == pytest.approx(0.5 * expected, rel=1e-5)
    assert loss.item() > 0


def test_cosine_loss_gives_no_gradient_to_word_embeddings():
    vocab = make_vocab()
    embedder = make_embedder(vocab)
    token_ids, token_characters = sample_input(vocab)
    embedder(token_ids, token_characters)
    pop_auxiliary_losses(embedder)["char_cosine"].backward()
    word_grad = embedder._word_embedding.weight.grad
    assert word_grad is None or torch.all(word_grad == 0)
    for name in ("_character_embedding", "_character_encoder", "_character_projection"):
        grads = [p.grad for p in getattr(embedder, name).parameters()]
        assert all(g is not None for g in grads), name
        assert any(torch.any(g != 0) for g in grads), name

    embedder.zero_grad()
    embedder(token_ids, token_characters).sum().backward()
    pop_auxiliary_losses(embedder)
    word_grad = embedder._word_embedding.weight.grad
    assert word_grad is not None
    for token_id in token_ids[0, :3].tolist():
        assert torch.any(word_grad[token_id] != 0)


def test_concatenate_mode():
    vocab = make_vocab()
    embedder = make_embedder(vocab, combination="concatenate", cosine_loss_weight=0.0)
    assert embedder.get_output_dim() == 2 * WORD_DIM
    assert embedder._gate_word is None and embedder._gate_character is None and embedder._gate_output is None
    token_ids, token_characters = sample_input(vocab)
    output = embedder(token_ids, token_characters)
    assert output.shape == (1, 4, 2 * WORD_DIM)
    x = embedder._word_embedding(token_ids)
    m = embedder.character_representation(token_characters)
    assert torch.allclose(output, torch.cat([x, m], dim=-1), atol=1e-6)
    combined, gate = embedder.combine(x, m)
    assert gate is None and torch.allclose(combined, output, atol=1e-6)


def test_from_params_in_basic_text_field_embedder_end_to_end():
    indexers = {"tokens": TokenIndexer.from_params(Params({"type": "word_and_characters", "lowercase_tokens": True}))}
    sentences = [["The", "cat", "sat"], ["A", "dog"]]
    instances = [Instance({"text": TextField([Token(w) for w in s], indexers)}) for s in sentences]
    vocab = Vocabulary.from_instances(instances)
    batch = Batch(instances)
    batch.index_instances(vocab)
    text = batch.as_tensor_dict()["text"]

    torch.manual_seed(0)
    embedder = TokenEmbedder.from_params(
        Params(
            {
                "type": "char_gated",
                "word_embedding": {"embedding_dim": WORD_DIM},
                "character_embedding": {"embedding_dim": CHAR_DIM, "vocab_namespace": "token_characters"},
                "character_encoder": {
                    "type": "lstm",
                    "input_size": CHAR_DIM,
                    "hidden_size": CHAR_HIDDEN,
                    "bidirectional": True,
                },
                "dropout": 0.1,
            }
        ),
        vocab=vocab,
    )
    assert isinstance(embedder, CharGatedEmbedder)
    assert embedder._word_embedding.num_embeddings == vocab.get_vocab_size("tokens")
    assert embedder._character_embedding.num_embeddings == vocab.get_vocab_size("token_characters")
    assert embedder._oov_index == vocab.get_token_index(vocab._oov_token, "tokens")

    text_field_embedder = BasicTextFieldEmbedder({"tokens": embedder})
    assert text_field_embedder.get_output_dim() == WORD_DIM
    embedded = text_field_embedder(text)
    assert embedded.shape == (2, 3, WORD_DIM)
    assert torch.all(torch.isfinite(embedded))
    assert get_text_field_mask(text).tolist() == [[True, True, True], [True, True, False]]
    losses = pop_auxiliary_losses(text_field_embedder)
    assert set(losses) == {"char_cosine"}
    assert torch.isfinite(losses["char_cosine"]) and losses["char_cosine"].item() > 0


def test_configuration_errors():
    vocab = make_vocab()
    with pytest.raises(ConfigurationError):
        CharGatedEmbedder(
            vocab=vocab,
            word_embedding=Embedding(embedding_dim=WORD_DIM, num_embeddings=5),
            character_embedding=Embedding(embedding_dim=CHAR_DIM, num_embeddings=5),
            character_encoder=LstmSeq2VecEncoder(input_size=CHAR_DIM + 2, hidden_size=2, bidirectional=True),
        )
    with pytest.raises(ConfigurationError):
        make_embedder(vocab, combination="sum")
    with pytest.raises(ConfigurationError):
        make_embedder(vocab, cosine_loss_weight=-1.0)


def test_padding_words_give_finite_outputs_and_gradients():
    vocab = make_vocab()
    embedder = make_embedder(vocab)
    token_ids, token_characters = sample_input(vocab)
    # A second sentence made only of padding, and a batch made only of padding.
    token_ids = torch.cat([token_ids, torch.zeros_like(token_ids)])
    token_characters = torch.cat([token_characters, torch.zeros_like(token_characters)])
    output = embedder(token_ids, token_characters)
    loss = pop_auxiliary_losses(embedder)["char_cosine"]
    assert torch.all(torch.isfinite(output)) and torch.isfinite(loss)
    (output.sum() + loss).backward()
    for name, parameter in embedder.named_parameters():
        assert parameter.grad is None or torch.all(torch.isfinite(parameter.grad)), name

    only_padding = embedder(torch.zeros(2, 3, dtype=torch.long), torch.zeros(2, 3, 4, dtype=torch.long))
    assert only_padding.shape == (2, 3, WORD_DIM) and torch.all(torch.isfinite(only_padding))
    assert pop_auxiliary_losses(embedder)["char_cosine"].item() == 0.0


def bf16_lstm_unsupported() -> str:
    """Why a bf16 LSTM cannot run on this CPU under autocast, or "" when it can.

    oneDNN has no bf16 LSTM without AVX-512 (AVX2-only CPUs raise a RuntimeError)."""
    lstm = torch.nn.LSTM(input_size=2, hidden_size=2, batch_first=True)
    try:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            lstm(torch.zeros(1, 2, 2))
    except RuntimeError as error:
        return f"no bf16 LSTM kernel on this CPU: {str(error).splitlines()[0]}"
    return ""


def check_cosine_loss_under_autocast(embedder, vocab):
    token_ids, token_characters = sample_input(vocab)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        # The character representation really is bf16 here, so the loss has something to upcast.
        characters = embedder.character_representation(token_characters)
        assert characters.dtype == torch.bfloat16
        embedder(token_ids, token_characters)
    loss = pop_auxiliary_losses(embedder)["char_cosine"]
    assert loss.dtype == torch.float32 and torch.isfinite(loss)
    # By hand, in float32, from the bf16 characters: "the" and "cat" ("dog" is OOV, then padding).
    x = embedder._word_embedding.weight[token_ids[0]]
    m = characters[0].float()
    cosines = [torch.dot(m[t], x[t]) / (m[t].norm() * x[t].norm()) for t in (0, 2)]
    assert loss.item() == pytest.approx(sum(1.0 - cosine.item() for cosine in cosines), rel=1e-5)


def test_cosine_loss_is_float32_under_autocast():
    reason = bf16_lstm_unsupported()
    if reason:
        pytest.skip(reason)
    vocab = make_vocab()
    check_cosine_loss_under_autocast(make_embedder(vocab), vocab)


def test_cosine_loss_is_float32_under_autocast_with_a_cnn_character_encoder():
    # Runs on every CPU: the CNN has float32 kernels under autocast, the projection a bf16 one.
    vocab = make_vocab()
    torch.manual_seed(0)
    embedder = CharGatedEmbedder(
        vocab=vocab,
        word_embedding=Embedding(embedding_dim=WORD_DIM, num_embeddings=vocab.get_vocab_size("tokens")),
        character_embedding=Embedding(embedding_dim=CHAR_DIM, num_embeddings=vocab.get_vocab_size("token_characters")),
        character_encoder=CnnEncoder(embedding_dim=CHAR_DIM, num_filters=2, ngram_filter_sizes=(2,)),
    )
    check_cosine_loss_under_autocast(embedder, vocab)
