import json

import pytest
import torch
from allennlp.common import Lazy, Params
from allennlp.common.checks import ConfigurationError
from allennlp.common.testing import ModelTestCase
from allennlp.data import Batch, DatasetReader, Vocabulary
from allennlp.models import Model

import nerzoo  # noqa: F401
from nerzoo.models.fofe_ner import FofeNer
from nerzoo.modules.fofe.first_layer import FofeFeedForward
from nerzoo.modules.fofe.second_pass import first_pass_entities
from nerzoo.modules.fofe.spans import FlatSpans, enumerate_spans
from tests import FIXTURES_ROOT, PROJECT_ROOT

CONFIG = FIXTURES_ROOT / "experiments" / "fofe_ner_tiny.jsonnet"
DATA = FIXTURES_ROOT / "conll2003" / "train.txt"
NESTED = {
    "dataset_reader.file_format": "jsonl",
    "dataset_reader.conll": None,
    "train_data_path": str(FIXTURES_ROOT / "nested" / "train.jsonl"),
    "validation_data_path": str(FIXTURES_ROOT / "nested" / "dev.jsonl"),
}


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
        starts, ends, span_mask = enumerate_spans(mask, self.model.max_span_width)
        return mask, starts, ends, span_mask

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

    def test_one_vocabulary_without_characters_and_one_layer_scores_as_its_features_say(self):
        first = self.model.eval()
        second = FofeNer(
            self.vocab,
            word_embedders={"tokens": first.word_embedders["tokens"]},
            feedforward=Lazy(FofeFeedForward, Params({"num_layers": 1, "hidden_dims": 4, "activations": "relu"})),
            max_span_width=first.max_span_width,
            characters=None,
            first_pass=first,
        ).eval()
        tensors = self._batch(4)
        with torch.no_grad():
            output = second(**tensors)
            first_output = first(**tensors)
            mask, starts, ends, span_mask = self._spans(tensors)
            spans = FlatSpans.where(span_mask, starts, ends)
            entities = first_pass_entities(
                first_output["class_probabilities"],
                first_output["span_starts"],
                first_output["span_ends"],
                first_output["span_mask"],
                mask,
                second.thresholds[0],
            )
            alone = second.output_layer(
                second.feedforward(second.span_features(tensors["tokens"], mask, spans, entities))
            )
        expected = 0.5 * first_output["class_probabilities"][first_output["span_mask"]] + 0.5 * alone.softmax(-1)
        torch.testing.assert_close(output["class_probabilities"][output["span_mask"]], expected)

    def _partial_batch(self):
        """Three sentences annotated in part (every other stretch outside their entities known empty), one whole."""
        reader = DatasetReader.from_params(Params.from_file(str(CONFIG))["dataset_reader"])
        sentences = []
        for number, instance in enumerate(self.instances[:4]):
            words, entities = instance["metadata"]["words"], instance["metadata"]["entities"]
            covered = {k for start, end, _ in entities for k in range(start, end)}
            runs = [(k, k + 1) for k in range(len(words)) if k not in covered]
            empty = [run for k, run in enumerate(runs) if k % 2 == 0]
            partial = reader.text_to_instance(words, entities, None, number == 3, [] if number == 3 else empty)
            reader.apply_token_indexers(partial)
            sentences.append((words, entities, None if number == 3 else empty, partial))
        batch = Batch([partial for *_, partial in sentences])
        batch.index_instances(self.vocab)
        return sentences, batch.as_tensor_dict()

    def _known_classes(self, sentences):
        """Brute force: `{(sentence, start, end): class}` of every fragment the annotation fixes."""
        known = {}
        for number, (words, entities, empty, _) in enumerate(sentences):
            types = {(start, end): label for start, end, label in entities}
            for start in range(len(words)):
                for end in range(start + 1, min(start + self.model.max_span_width, len(words)) + 1):
                    if (start, end) in types:
                        known[number, start, end] = 1 + self.vocab.get_token_index(types[start, end], "labels")
                    elif empty is None or any(a <= start and end <= b for a, b in empty):
                        known[number, start, end] = 0
        return known

    @staticmethod
    def _scored(output):
        mask = output["span_mask"]
        return [
            (b, int(s), int(e))
            for b in range(mask.size(0))
            for s, e in zip(output["span_starts"][b][mask[b]], output["span_ends"][b][mask[b]])
        ]

    def test_the_loss_of_partial_annotation_is_over_the_fragments_it_fixes(self):
        sentences, tensors = self._partial_batch()
        known = self._known_classes(sentences)
        self.model.eval()
        with torch.no_grad():
            output = self.model(**tensors)
        scored = self._scored(output)
        assert len(known) < len(scored)
        logits = output["class_logits"][output["span_mask"]]
        rows = [k for k, span in enumerate(scored) if span in known]
        expected = torch.nn.functional.cross_entropy(logits[rows], torch.tensor([known[scored[k]] for k in rows]))
        torch.testing.assert_close(output["loss"], expected)

        def loss_with_logits_raised_at(span):
            """The loss with the logit of class 1 raised at `span`."""
            bump = torch.zeros_like(logits)
            bump[scored.index(span), 1] = 5.0
            hook = self.model.output_layer.register_forward_hook(lambda module, inputs, out: out + bump)
            with torch.no_grad():
                loss = self.model(**tensors)["loss"]
            hook.remove()
            return loss

        unknown = next(span for span in scored if span not in known)
        empty = next(span for span in scored if span[0] < 3 and known.get(span) == 0)
        assert torch.equal(loss_with_logits_raised_at(unknown), output["loss"])
        assert not torch.equal(loss_with_logits_raised_at(empty), output["loss"])

    def test_training_samples_only_the_fragments_partial_annotation_fixes(self):
        sentences, tensors = self._partial_batch()
        known = self._known_classes(sentences)
        self.model.train()
        self.model.overlap_sample_rate = self.model.disjoint_sample_rate = 1.0
        assert set(self._scored(self.model(**tensors))) == set(known)
        self.model.overlap_sample_rate = self.model.disjoint_sample_rate = 0.0
        assert set(self._scored(self.model(**tensors))) == {span for span, label in known.items() if label > 0}

    def test_evaluation_on_partial_annotation_counts_only_the_spans_it_fixes(self):
        sentences, tensors = self._partial_batch()
        entity_type = self.model.entity_types[0]
        bump = torch.zeros(len(self.model.entity_types) + 1)
        bump[1] = 5.0  # every fragment predicted as the first type, so predictions fall in open stretches too
        hook = self.model.output_layer.register_forward_hook(lambda module, inputs, out: out + bump)
        self.model.eval()
        self.model.get_metrics(reset=True)
        with torch.no_grad():
            output = self.model.make_output_human_readable(self.model(**tensors))
        hook.remove()
        expected = {"tp": 0, "fp": 0, "fn": 0}
        open_predictions = 0
        for (_, entities, empty, _), spans in zip(sentences, output["spans"]):
            gold = {(start, end, label) for start, end, label in entities}
            predicted = set()
            for span in spans:
                inside = empty is None or any(a <= span["start"] and span["end"] <= b for a, b in empty)
                if inside or (span["start"], span["end"]) in {(start, end) for start, end, _ in entities}:
                    predicted.add((span["start"], span["end"], span["label"]))
                else:
                    open_predictions += 1
            expected["tp"] += len(predicted & gold)
            expected["fp"] += len(predicted - gold)
            expected["fn"] += len(gold - predicted)
        assert open_predictions and expected["fp"]
        counts = self.model.span_f1.counts
        totals = {key: sum(by_type[key] for by_type in counts.values()) for key in expected}
        assert totals == expected and counts[entity_type]["fp"] == expected["fp"]

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
    starts, ends, span_mask = enumerate_spans(mask, first.max_span_width)
    spans = FlatSpans.where(span_mask, starts, ends)
    with torch.no_grad():
        first_output = first(**tensors)
        expected = first_output["class_probabilities"]
        torch.testing.assert_close(second(**tensors)["class_probabilities"], expected)
        second.interpolation = 0.25
        substitutions = first_pass_entities(
            expected,
            first_output["span_starts"],
            first_output["span_ends"],
            first_output["span_mask"],
            mask,
            second.thresholds[0],
        )
        features = second.span_features(tensors["tokens"], mask, spans, substitutions)
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
    assert len(second.first_pass_cache) == 3


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
