import json

import pytest
import torch
from allennlp.common import Params
from allennlp.common.checks import ConfigurationError
from allennlp.common.testing import ModelTestCase
from allennlp.data import Batch
from allennlp.models import Model

import nerzoo  # noqa: F401
from nerzoo.predictors.thread_discourse import ThreadDiscoursePredictor
from tests import FIXTURES_ROOT

CONFIG = FIXTURES_ROOT / "experiments" / "me_crf_thread_discourse_tiny.jsonnet"
DATA = FIXTURES_ROOT / "thread_discourse" / "dev.jsonl"
TRAIN = FIXTURES_ROOT / "thread_discourse" / "train.jsonl"


class TestMeCrfThreads(ModelTestCase):
    def setup_method(self):
        super().setup_method()
        self.set_up_model(CONFIG, DATA)

    def _model(self, **model_overrides) -> Model:
        params = Params.from_file(str(CONFIG)).duplicate()
        for key, value in model_overrides.items():
            params["model"][key] = value
        torch.manual_seed(0)
        return Model.from_params(vocab=self.vocab, params=params.pop("model"))

    def _batch(self, instances=None):
        batch = Batch(instances or self.instances)
        batch.index_instances(self.vocab)
        return batch.as_tensor_dict()

    def test_can_train_save_and_load(self):
        self.ensure_model_can_train_save_and_load(self.param_file)

    def test_memnet_baseline_trains(self):
        # MEMNET (eq. 13): the same memory layer, a per-post softmax instead of the CRF.
        self.ensure_model_can_train_save_and_load(self.param_file, overrides=json.dumps({"model.head.use_crf": False}))

    def test_batch_predictions_are_consistent(self):
        self.ensure_batch_predictions_are_consistent()

    def test_loss_is_the_weighted_sum_of_the_da_and_link_losses(self):
        model = self._model(alpha=0.3).eval()
        tensors = self._batch()
        output = model(**tensors)
        tags, links, mask = tensors["tags"], tensors["links"], output["mask"]
        # L_DA: the negative CRF log-likelihood of the most recent links' DAs, summed over threads.
        da_loss = -model.head.crf(output["logits"], tags, mask)
        # L_LNK by hand from the band-form attention: the column whose memory position is the gold
        # link's (post l is memory position l - 1; the head m_0 is position -1).
        weights, positions = output["memory_attention"][:, -1], output["memory_key_positions"]
        link_loss = torch.tensor(0.0)
        for thread, metadata in enumerate(tensors["metadata"]):
            for row in range(metadata["num_posts"]):
                column = (positions[thread, row] == links[thread, row] - 1).nonzero().item()
                link_loss = link_loss - torch.log(weights[thread, row, column])
        assert output["da_loss"].item() == pytest.approx(da_loss.item(), rel=1e-5)
        assert output["link_loss"].item() == pytest.approx(link_loss.item(), rel=1e-5)
        assert output["loss"].item() == pytest.approx(0.3 * da_loss.item() + 0.7 * link_loss.item(), rel=1e-5)

    def test_link_loss_alone_reaches_the_attention_parameters(self):
        model = self._model(alpha=0.0, dropout=0.0)
        output = model(**self._batch())
        assert output["loss"].item() == pytest.approx(output["link_loss"].item())
        output["loss"].backward()
        reached = {
            name
            for name, parameter in model.named_parameters()
            if parameter.grad is not None and parameter.grad.abs().sum() > 0
        }
        for prefix in (
            "memory.input_memory.gru",
            "memory.input_memory.projection",
            "title_encoder",
            "text_encoder",
            "structural_projection",
            "punctuation_projection",
        ):
            assert any(name.startswith(prefix) for name in reached), prefix
        # Nothing of the DA side: no gradient reaches the tag projection or the CRF.
        assert not any(name.startswith("head.") for name in reached)

    def test_alpha_one_takes_nothing_from_the_link_term(self):
        model = self._model(alpha=1.0, dropout=0.0)
        output = model(**self._batch())
        parameters = [parameter for name, parameter in model.named_parameters() if name.startswith("memory.")]
        from_loss = torch.autograd.grad(output["loss"], parameters, retain_graph=True)
        from_da = torch.autograd.grad(output["da_loss"], parameters, retain_graph=True)
        from_link = torch.autograd.grad(output["link_loss"], parameters, retain_graph=True)
        for total, da in zip(from_loss, from_da):
            assert torch.equal(total, da)
        # Not vacuous: the link loss on its own would move these parameters.
        assert any(gradient.abs().sum() > 0 for gradient in from_link)

    def test_predicted_links_precede_their_posts(self):
        model = self._model().eval()
        instances = self.instances + list(self._reader().read(TRAIN))
        output = model.make_output_human_readable(model(**self._batch(instances)))
        for links, probabilities, instance in zip(output["links"], output["link_probabilities"], instances):
            num_posts = instance["metadata"]["num_posts"]
            assert len(links) == len(probabilities) == num_posts
            for post, (link, candidates) in enumerate(zip(links, probabilities), start=1):
                assert 0 <= link < post
                assert len(candidates) == post and sum(candidates) == pytest.approx(1.0, abs=1e-5)
                assert link == max(range(post), key=candidates.__getitem__)

    def _reader(self):
        from allennlp.data import DatasetReader

        return DatasetReader.from_params(Params.from_file(str(CONFIG)).pop("dataset_reader"))

    def test_evaluation_uses_all_gold_links(self):
        instances = list(self._reader().read(TRAIN))
        model = self._model().eval()
        model(**self._batch(instances))
        counts = model.discourse_f1.counts
        all_links = sum(len(links) for instance in instances for links in instance["metadata"]["gold_links"])
        num_posts = sum(instance["metadata"]["num_posts"] for instance in instances)
        assert all_links > num_posts  # the training fixtures have multi-link posts
        assert counts["link"]["gold"] == counts["joint"]["gold"] == all_links
        assert counts["link"]["predicted"] == num_posts
        metrics = model.get_metrics(reset=True)
        assert {"link_f1", "da_f1", "joint_f1", "accuracy", "da_loss", "link_loss"} <= set(metrics)
        assert {"link_precision", "link_recall", "joint_precision", "da_recall"} <= set(metrics)

    def test_memory_must_see_the_head_and_earlier_posts_only(self):
        memory = {"hidden_dim": 7, "tie_memories": True, "null_memory": True, "include_self": False}
        for wrong, message in (
            ({"include_self": True}, "include_self must be false"),
            ({"null_memory": False}, "null_memory must be true"),
            ({"causal": False}, "causal must be true"),
        ):
            with pytest.raises(ConfigurationError, match=message):
                self._model(memory={**memory, **wrong})
        with pytest.raises(ConfigurationError, match="link_hop 1 is out of range"):
            self._model(link_hop=1)
        with pytest.raises(ConfigurationError, match="alpha"):
            self._model(alpha=1.5)

    def test_mismatched_dimensions_raise(self):
        encoder = {"type": "gru", "input_size": 5, "hidden_size": 5, "bidirectional": True}
        with pytest.raises(ConfigurationError, match="title_encoder input dim"):
            self._model(title_encoder=encoder)

    def test_predictor_per_post_output_and_bad_input(self):
        model = self._model().eval()
        predictor = ThreadDiscoursePredictor(model, self._reader(), return_attention=True)
        thread = json.loads(DATA.read_text().splitlines()[1])
        result = predictor.predict_json(thread)  # labels present: ignored
        assert result["thread_id"] == thread["thread_id"]
        assert [post["post"] for post in result["posts"]] == list(range(1, len(thread["posts"]) + 1))
        labels = set(self.vocab.get_token_to_index_vocabulary("labels"))
        for entry, post in zip(result["posts"], thread["posts"]):
            assert entry["title"] == post["title"]
            assert 0 <= entry["link"] < entry["post"]
            assert len(entry["link_probabilities"]) == entry["post"]
            assert entry["dialogue_act"] in labels
            assert set(entry["dialogue_act_probabilities"]) == labels
            assert sum(entry["dialogue_act_probabilities"].values()) == pytest.approx(1.0, abs=1e-4)
            # One hop; its dense attention is the link distribution.
            assert entry["memory_attention"] == [pytest.approx(entry["link_probabilities"], abs=1e-5)]
        unlabelled = {
            "posts": [
                {key: value for key, value in post.items() if key not in ("links", "dialogue_acts")}
                for post in thread["posts"]
            ]
        }
        assert [entry["link"] for entry in predictor.predict_json(unlabelled)["posts"]] == [
            entry["link"] for entry in result["posts"]
        ]
        for bad, message in (
            ({"thread_id": "x"}, "has no 'posts'"),
            ({"posts": []}, "'posts' is empty"),
            ({"posts": [{"title": "no text"}]}, "missing 'text'"),
            ([1, 2], "must be a JSON object"),
        ):
            with pytest.raises(ConfigurationError, match=message):
                predictor.predict_json(bad)
