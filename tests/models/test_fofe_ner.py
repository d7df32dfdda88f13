import json

import pytest
import torch
from allennlp.common import Lazy, Params
from allennlp.common.checks import ConfigurationError
from allennlp.common.testing import ModelTestCase
from allennlp.data import Batch, DatasetReader, Vocabulary
from allennlp.models import Model
from allennlp.modules import FeedForward

import nerzoo  # noqa: F401
from nerzoo.models.fofe_ner import FofeNer
from tests import FIXTURES_ROOT, PROJECT_ROOT

CONFIG = FIXTURES_ROOT / "experiments" / "fofe_ner_tiny.jsonnet"
DATA = FIXTURES_ROOT / "conll2003" / "train.txt"
NESTED = {
    "dataset_reader.file_format": "jsonl",
    "dataset_reader.conll": None,
    "train_data_path": str(FIXTURES_ROOT / "nested" / "train.jsonl"),
    "validation_data_path": str(FIXTURES_ROOT / "nested" / "dev.jsonl"),
}


def fofe(vectors, alpha, dim=None):
    """Eq. 3.1 step by step; the empty sequence codes to 0."""
    code = torch.zeros(dim if dim is not None else vectors[0].size(0), dtype=torch.float64)
    for vector in vectors:
        code = alpha * code + vector.double()
    return code


class TestFofeNer(ModelTestCase):
    def setup_method(self):
        super().setup_method()
        self.set_up_model(CONFIG, DATA)

    def test_can_train_save_and_load(self):
        self.ensure_model_can_train_save_and_load(self.param_file)

    def test_can_train_save_and_load_on_nested_entities(self):
        self.ensure_model_can_train_save_and_load(self.param_file, overrides=json.dumps(NESTED))

    def _batch(self, count=6):
        batch = Batch(self.instances[:count])
        batch.index_instances(self.vocab)
        return batch.as_tensor_dict()

    def _spans(self, tensors):
        mask = tensors["tokens"]["tokens"]["tokens"] > 0
        starts, ends, span_mask = self.model._enumerate_spans(mask)
        return mask, starts, ends, span_mask

    @staticmethod
    def _flat(starts, ends, span_mask):
        """The spans of `span_mask` as flat `(span_batch, starts, ends)`."""
        span_batch, column = span_mask.nonzero(as_tuple=True)
        return span_batch, starts[span_batch, column], ends[span_batch, column]

    def test_span_features_equal_the_recursion_on_each_span(self):
        model = self.model.eval()
        tensors = self._batch()
        mask, starts, ends, span_mask = self._spans(tensors)
        span_batch, flat_starts, flat_ends = self._flat(starts, ends, span_mask)
        with torch.no_grad():
            features = model._span_features(tensors["tokens"], mask, span_batch, flat_starts, flat_ends, None).double()
            words = {name: embedder(**tensors["tokens"][name]) for name, embedder in model.word_embedders.items()}
            character_ids = tensors["tokens"]["token_characters"]["token_characters"]
            separator = model.character_embedding.num_embeddings - 1
            alpha, beta = model.alpha, model.character_alpha
            assert len(span_batch) == int(span_mask.sum()) and len(set(span_batch.tolist())) == mask.size(0)
            for index, (sentence, start, end) in enumerate(
                zip(span_batch.tolist(), flat_starts.tolist(), flat_ends.tolist())
            ):
                length = int(mask[sentence].sum())
                expected = []
                for embedded in words.values():
                    vectors = list(embedded[sentence, :length])
                    dim = embedded.size(-1)
                    expected += [
                        torch.stack(vectors[start:end]).double().sum(0),
                        fofe(vectors[:end], alpha, dim),
                        fofe(vectors[:start], alpha, dim),
                        fofe(vectors[start:][::-1], alpha, dim),
                        fofe(vectors[end:][::-1], alpha, dim),
                    ]
                ids = []
                for word in range(start, end):
                    if word > start:
                        ids.append(separator)
                    ids += [int(i) for i in character_ids[sentence, word] if i > 0]
                ids = torch.tensor(ids)
                characters = list(model.character_embedding(ids))
                expected += [fofe(characters, beta), fofe(characters[::-1], beta)]
                fragment = model.cnn_character_embedding(ids).t().unsqueeze(0)
                for kernel_size, convolution in zip(model.character_cnn.kernel_sizes, model.character_cnn.convolutions):
                    if fragment.size(-1) >= kernel_size:
                        expected.append(torch.relu(convolution(fragment)).max(-1).values.view(-1).double())
                    else:
                        expected.append(torch.zeros(convolution.out_channels, dtype=torch.float64))
                torch.testing.assert_close(features[index], torch.cat(expected), rtol=1e-4, atol=1e-5)

    def test_first_layer_from_position_tables_equals_the_layer_on_the_features(self):
        model = self.model.eval().double()
        tensors = self._batch()
        mask, starts, ends, span_mask = self._spans(tensors)
        span_batch, flat_starts, flat_ends = self._flat(starts, ends, span_mask)
        first_layer = model.feedforward._linear_layers[0]
        for trial in range(3):
            if trial:  # other weights: random, with some ties and zeros
                torch.manual_seed(trial)
                with torch.no_grad():
                    for parameter in model.parameters():
                        parameter.copy_(
                            torch.randint(-2, 3, parameter.shape).double() / 2
                            + torch.randn(parameter.shape) * (trial - 1)
                        )
            with torch.no_grad():
                features = model._span_features(tensors["tokens"], mask, span_batch, flat_starts, flat_ends, None)
                expected = first_layer(features)
                fast = model._first_layer(tensors["tokens"], mask, span_batch, flat_starts, flat_ends, None)
                torch.testing.assert_close(fast, expected, rtol=1e-10, atol=1e-10)
                torch.testing.assert_close(model._feedforward_from_first_layer(fast), model.feedforward(features))
        # A subset of the spans, in another order.
        order = torch.randperm(len(span_batch))[:40]
        with torch.no_grad():
            features = model._span_features(
                tensors["tokens"], mask, span_batch[order], flat_starts[order], flat_ends[order], None
            )
            fast = model._first_layer(
                tensors["tokens"], mask, span_batch[order], flat_starts[order], flat_ends[order], None
            )
        torch.testing.assert_close(fast, first_layer(features), rtol=1e-10, atol=1e-10)

    def test_second_pass_contexts_see_first_pass_entities_as_type_tokens(self):
        first = self.model.eval()
        second = FofeNer(
            self.vocab,
            word_embedders={"tokens": first.word_embedders["tokens"]},
            feedforward=Lazy(FeedForward, Params({"num_layers": 1, "hidden_dims": 4, "activations": "relu"})),
            max_span_width=first.max_span_width,
            characters=None,
            first_pass=first,
        ).eval()
        tensors = self._batch(4)
        mask, starts, ends, span_mask = self._spans(tensors)
        length = int(mask[0].sum())
        assert length >= 6
        # First-pass entities of sentence 0, by hand: [1, 3) type 0 and [4, 5) type 1.
        entities = [(1, 3, 0), (4, 5, 1)]
        in_entity = torch.zeros_like(mask)
        entity_start = torch.arange(mask.size(1)).repeat(mask.size(0), 1)
        entity_end = entity_start + 1
        entity_type = torch.zeros_like(entity_start)
        for start, end, label in entities:
            in_entity[0, start:end] = True
            entity_start[0, start:end] = start
            entity_end[0, start:end] = end
            entity_type[0, start:end] = label
        substitutions = {"in_entity": in_entity, "start": entity_start, "end": entity_end, "type": entity_type}
        span_batch, flat_starts, flat_ends = self._flat(starts, ends, span_mask)
        with torch.no_grad():
            features = second._span_features(
                tensors["tokens"], mask, span_batch, flat_starts, flat_ends, substitutions
            ).double()
            embedded = list(second.word_embedders["tokens"](**tensors["tokens"]["tokens"])[0, :length])
            types = second.type_embeddings["tokens"].weight
        alpha, dim = second.alpha, embedded[0].size(0)

        def left_units(boundary):
            units, position = [], 0
            while position < boundary:
                entity = next((e for e in entities if e[0] == position), None)
                if entity is not None and entity[1] <= boundary:
                    units.append(types[entity[2]])
                    position = entity[1]
                else:
                    units.append(embedded[position])
                    position += 1
            return units

        def right_units(boundary):
            units, position = [], length
            while position > boundary:
                entity = next((e for e in entities if e[1] == position), None)
                if entity is not None and entity[0] >= boundary:
                    units.append(types[entity[2]])
                    position = entity[0]
                else:
                    units.append(embedded[position - 1])
                    position -= 1
            return units  # already right to left

        for index in (span_batch == 0).nonzero().view(-1).tolist():
            start, end = int(flat_starts[index]), int(flat_ends[index])
            fragment = embedded[start:end]
            expected = [
                torch.stack(fragment).double().sum(0),
                fofe(left_units(start) + fragment, alpha, dim),
                fofe(left_units(start), alpha, dim),
                fofe(right_units(end) + fragment[::-1], alpha, dim),
                fofe(right_units(end), alpha, dim),
            ]
            torch.testing.assert_close(
                features[index], torch.cat(expected), rtol=1e-4, atol=1e-5, msg=f"span {start}-{end}"
            )
        with torch.no_grad():  # the same features through the first layer, computed without building them
            fast = second._first_layer(tensors["tokens"], mask, span_batch, flat_starts, flat_ends, substitutions)
            torch.testing.assert_close(fast, second.feedforward._linear_layers[0](features.float()))

    def test_sampling_keeps_entities_and_negatives_at_their_rates(self):
        model = self.model
        model.overlap_sample_rate, model.disjoint_sample_rate = 0.36, 0.09
        tensors = self._batch(16)
        mask, starts, ends, span_mask = self._spans(tensors)
        gold = model._gold_classes(tensors["entities"], starts, ends, span_mask)
        entity_sets = [{(s, e) for s, e, _ in m["entities"]} for m in tensors["metadata"]]
        exact = torch.zeros_like(span_mask)
        overlapping = torch.zeros_like(span_mask)
        for sentence, spans in enumerate(entity_sets):
            for column in span_mask[sentence].nonzero().view(-1).tolist():
                start, end = int(starts[sentence, column]), int(ends[sentence, column])
                exact[sentence, column] = (start, end) in spans
                overlapping[sentence, column] = (start, end) not in spans and any(
                    s < end and start < e for s, e in spans
                )
        disjoint = span_mask & ~exact & ~overlapping
        assert torch.equal(gold > 0, exact)
        assert overlapping.sum() > 100 and disjoint.sum() > 100
        draws = 400
        kept = torch.zeros(span_mask.shape)
        torch.manual_seed(0)
        for _ in range(draws):
            kept += (span_mask & model._sample(gold, tensors["entities"], starts, ends, mask)).float()
        rate = kept / draws
        assert torch.equal(rate[exact], torch.ones(int(exact.sum())))
        assert rate[overlapping].mean().item() == pytest.approx(0.36, abs=0.01)
        assert rate[disjoint].mean().item() == pytest.approx(0.09, abs=0.005)

    def test_training_scores_only_sampled_spans_and_evaluation_scores_all(self):
        tensors = self._batch(8)
        self.model.train()
        trained = self.model(**tensors)
        self.model.eval()
        evaluated = self.model(**tensors)
        assert trained["span_mask"].sum() < evaluated["span_mask"].sum()
        assert evaluated["span_mask"].sum() == self._spans(tensors)[3].sum()

    def test_evaluation_scores_every_span_in_order_as_in_a_batch_of_one(self):
        self.model.eval()
        tensors = self._batch(6)
        mask, starts, ends, span_mask = self._spans(tensors)
        with torch.no_grad():
            output = self.model(**tensors)
            for sentence in range(6):
                scored = output["span_mask"][sentence]
                assert torch.equal(output["span_starts"][sentence][scored], starts[sentence][span_mask[sentence]])
                assert torch.equal(output["span_ends"][sentence][scored], ends[sentence][span_mask[sentence]])
                assert not output["class_probabilities"][sentence][~scored].any()
                single = Batch(self.instances[sentence : sentence + 1])
                single.index_instances(self.vocab)
                alone = self.model(**single.as_tensor_dict())
                torch.testing.assert_close(
                    output["class_probabilities"][sentence][scored],
                    alone["class_probabilities"][0][alone["span_mask"][0]],
                )

    def test_decoding_and_readable_output(self):
        self.model.eval()
        output = self.model.make_output_human_readable(self.model(**self._batch(4)))
        assert len(output["spans"]) == 4
        for spans in output["spans"]:
            for span in spans:
                assert set(span) == {"start", "end", "label", "score", "level"}
                assert span["level"] in (1, 2) and 0.3 <= span["score"] <= 1.0

    def test_bad_configurations_raise(self):
        params = Params.from_file(str(CONFIG))
        for key, value in [
            ("decoding", ["highest_first"]),
            ("decoding", ["best_first", "longest_first"]),
            ("alpha", 1.0),
            ("overlap_sample_rate", 1.5),
            ("max_span_width", 0),
        ]:
            model_params = params.duplicate()["model"]
            model_params[key] = value
            with pytest.raises(ConfigurationError):
                Model.from_params(vocab=self.vocab, params=model_params)

    def test_first_pass_must_share_the_vocabulary(self):
        other = Vocabulary.from_instances(self.instances[:3])
        first = Model.from_params(vocab=other, params=Params.from_file(str(CONFIG))["model"])
        model_params = Params.from_file(str(CONFIG))["model"]
        with pytest.raises(ConfigurationError, match="from_files"):
            Model.from_params(vocab=self.vocab, params=model_params, first_pass=first)


def test_second_pass_keeps_the_first_pass_and_interpolates_its_probabilities():
    params = Params.from_file(str(CONFIG))
    reader_params, model_params = params["dataset_reader"], params["model"]
    instances = list(DatasetReader.from_params(reader_params.duplicate()).read(str(DATA)))[:6]
    vocab = Vocabulary.from_instances(instances)
    first = Model.from_params(vocab=vocab, params=model_params.duplicate()).eval()
    weights = {name: value.clone() for name, value in first.state_dict().items()}
    second_params = model_params.duplicate()
    # The shipped config's initializer matches the first pass's layers too (first_pass.feedforward...).
    second_params["initializer"] = {
        "regexes": [["feedforward.*weight|output_layer.weight", {"type": "xavier_uniform"}]]
    }
    second_params["interpolation"] = 1.0
    second = Model.from_params(vocab=vocab, params=second_params, first_pass=first).eval()
    for name, value in second.first_pass.state_dict().items():
        assert torch.equal(value, weights[name]), name
    assert not any(parameter.requires_grad for parameter in second.first_pass.parameters())
    second.train()
    assert not second.first_pass.training and second.feedforward.training
    second.eval()
    batch = Batch(instances)
    batch.index_instances(vocab)
    tensors = batch.as_tensor_dict()
    mask = tensors["tokens"]["tokens"]["tokens"] > 0
    starts, ends, span_mask = first._enumerate_spans(mask)
    span_batch, column = span_mask.nonzero(as_tuple=True)
    with torch.no_grad():
        first_output = first(**tensors)
        expected = first_output["class_probabilities"]
        torch.testing.assert_close(second(**tensors)["class_probabilities"], expected)
        second.interpolation = 0.25
        substitutions = second._first_pass_entities(
            expected, first_output["span_starts"], first_output["span_ends"], first_output["span_mask"], mask
        )
        features = second._span_features(
            tensors["tokens"], mask, span_batch, starts[span_batch, column], ends[span_batch, column], substitutions
        )
        alone = second.output_layer(second.feedforward(features)).softmax(-1)
        output = second(**tensors)
        assert torch.equal(output["span_mask"], first_output["span_mask"])
        interpolated = output["class_probabilities"][output["span_mask"]]
        torch.testing.assert_close(interpolated, 0.25 * expected[first_output["span_mask"]] + 0.75 * alone)


def _second_pass(cache_size: int):
    params = Params.from_file(str(CONFIG))
    reader_params, model_params = params["dataset_reader"], params["model"]
    instances = list(DatasetReader.from_params(reader_params.duplicate()).read(str(DATA)))[:10]
    vocab = Vocabulary.from_instances(instances)
    torch.manual_seed(0)
    first = Model.from_params(vocab=vocab, params=model_params.duplicate()).eval()
    second_params = model_params.duplicate()
    second_params["first_pass_cache_size"] = cache_size
    second = Model.from_params(vocab=vocab, params=second_params, first_pass=first)
    return second, instances, vocab


def _tensors(instances, vocab):
    batch = Batch(instances)
    batch.index_instances(vocab)
    return batch.as_tensor_dict()


def test_second_pass_runs_the_first_pass_once_per_sentence_with_the_same_results():
    cached, instances, vocab = _second_pass(cache_size=1000)
    uncached, _, _ = _second_pass(cache_size=0)
    uncached.load_state_dict(cached.state_dict())
    rows = []
    cached.first_pass.register_forward_hook(lambda module, inputs, output: rows.append(output["span_mask"].size(0)))
    # Batches of different make-up and padding: each sentence is first seen in one, then in another.
    groupings = [[instances[:4], instances[4:]], [instances[::2], instances[1::2]], [instances]]
    for epoch, grouping in enumerate(groupings):
        for group in grouping:
            tensors = _tensors(group, vocab)
            for model in (cached, uncached):
                model.train()
            torch.manual_seed(epoch)
            loss_cached = cached(**tensors)["loss"]
            torch.manual_seed(epoch)
            loss_uncached = uncached(**tensors)["loss"]
            torch.testing.assert_close(loss_cached, loss_uncached)
            for model in (cached, uncached):
                model.eval()
            with torch.no_grad():
                a, b = cached(**tensors), uncached(**tensors)
            assert torch.equal(a["span_mask"], b["span_mask"])
            torch.testing.assert_close(
                a["class_probabilities"][a["span_mask"]], b["class_probabilities"][b["span_mask"]]
            )
    assert sum(rows) == len(instances)


def test_second_pass_cache_holds_at_most_its_size():
    second, instances, vocab = _second_pass(cache_size=3)
    second.eval()
    with torch.no_grad():
        second(**_tensors(instances, vocab))
    assert len(second._first_pass_cache) == 3


def test_shipped_vocabulary_comes_from_training_data_with_a_trained_oov_vector(tmp_path):
    # A word found only in the test file must not get its own (untrained, random) row; words seen
    # once in training map to the OOV token, whose vector is then trained.
    from collections import Counter

    from allennlp.training.util import make_vocab_from_params

    test_file = tmp_path / "test.txt"
    test_file.write_text("-DOCSTART- -X- -X- O\n\nQwzxvk NNP B-NP B-PER\nvisited VBD B-VP O\n\n")
    overrides = json.dumps({"test_data_path": str(test_file), "validation_data_path": str(test_file)})
    params = Params.from_file(str(PROJECT_ROOT / "training_config" / "fofe_ner.jsonnet"), overrides)
    vocab = make_vocab_from_params(params, str(tmp_path / "run"))
    for namespace in ("tokens", "lowercase_tokens"):
        tokens = vocab.get_token_to_index_vocabulary(namespace)
        assert "Qwzxvk" not in tokens and "qwzxvk" not in tokens
    counts = Counter(
        line.split()[0]
        for line in (FIXTURES_ROOT / "conll2003" / "train.txt").read_text().splitlines()
        if line.strip() and not line.startswith("-DOCSTART-")
    )
    singletons = [word for word, count in counts.items() if count == 1]
    assert singletons
    unknown = vocab.get_token_index(vocab._oov_token, "tokens")
    assert all(vocab.get_token_index(word, "tokens") == unknown for word in singletons)
    assert all(vocab.get_token_index(word, "tokens") != unknown for word, count in counts.items() if count > 1)
