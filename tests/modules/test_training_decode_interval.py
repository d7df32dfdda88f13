"""
`TagHead`'s `training_decode_interval`: training batches decoded together when the metrics are read
give the epoch the same metrics as decoding each batch in its forward pass, for sentence-level
instances (bilstm_crf) and for documents scored sentence by sentence (me_crf, `crf_per_sentence`).
"""

import json

import pytest
import torch
from allennlp.common import Params
from allennlp.data import Batch, DatasetReader, Vocabulary
from allennlp.models import Model

from tests import PROJECT_ROOT
from tests.test_training_configs import on_fixtures

CONFIGS = ["bilstm_crf.jsonnet", "me_crf_conll2003.jsonnet"]


def _model_and_batches(config_name: str, interval: int):
    params = on_fixtures(
        PROJECT_ROOT / "training_config" / config_name, json.dumps({"model.head.training_decode_interval": interval})
    )
    reader = DatasetReader.from_params(params.pop("dataset_reader"))
    instances = list(reader.read(params.pop("train_data_path")))[:12]
    vocab = Vocabulary.from_params(params.pop("vocabulary", Params({})), instances=instances)
    torch.manual_seed(0)
    model = Model.from_params(vocab=vocab, params=params.pop("model"))
    # Batches of different lengths, so that the pending ones are padded to the longest.
    batches = []
    for start in range(0, len(instances), 3):
        batch = Batch(instances[start : start + 3])
        batch.index_instances(vocab)
        batches.append(batch.as_tensor_dict())
    return model, batches


def _epoch(model, batches):
    """Training forward passes (the same dropout masks in every run), the metrics read after each."""
    model.train()
    torch.manual_seed(1)
    progress, losses = [], []
    for batch in batches:
        output = model(**batch)
        losses.append(float(output["loss"].detach()))
        progress.append(model.get_metrics())
    return losses, progress, model.get_metrics(reset=True)


@pytest.mark.parametrize("config_name", CONFIGS)
def test_deferred_decoding_gives_the_same_epoch_metrics(config_name):
    model, batches = _model_and_batches(config_name, 1)
    losses, progress, metrics = _epoch(model, batches)
    deferred_model, batches = _model_and_batches(config_name, 3)
    deferred_losses, deferred_progress, deferred_metrics = _epoch(deferred_model, batches)

    assert deferred_losses == pytest.approx(losses, rel=1e-6)
    assert deferred_metrics == pytest.approx(metrics) and metrics["accuracy"] > 0
    # Read after every batch, the deferred metrics catch up every third batch.
    assert deferred_progress[2] == pytest.approx(progress[2])
    assert deferred_progress[0] != pytest.approx(progress[0])
    # Nothing is left pending for the next epoch or for evaluation.
    deferred_model.eval()
    assert deferred_model.get_metrics(reset=True)["accuracy"] == 0.0


def test_an_evaluation_pass_first_counts_the_pending_training_batches():
    def train_then_evaluate(interval: int):
        model, batches = _model_and_batches("bilstm_crf.jsonnet", interval)
        model.train()
        torch.manual_seed(1)
        model(**batches[0])
        model.eval()
        with torch.no_grad():
            model(**batches[1])
        return model.get_metrics(reset=True)

    assert train_then_evaluate(10) == pytest.approx(train_then_evaluate(1))


def test_reads_between_decodings_do_not_read_the_device_again(monkeypatch):
    from nerzoo.modules.crf.tag_decoder import TagDecoder

    reads = []
    read = TagDecoder.get_metrics

    def counted_read(self, reset=False):
        reads.append(reset)
        return read(self, reset)

    monkeypatch.setattr(TagDecoder, "get_metrics", counted_read)
    model, batches = _model_and_batches("bilstm_crf.jsonnet", 2)
    model.train()
    progress = []
    for batch in batches:
        model(**batch)
        progress.append(model.get_metrics())
    # Counted at the second and fourth batch: read then, and at the first (nothing read before).
    assert len(reads) == 3
    assert progress[2] == progress[1] != progress[0]
    assert progress[3] == read(model.head.decoder) and progress[3]["accuracy"] > 0
    model.get_metrics(reset=True)
    assert model.get_metrics() == read(model.head.decoder) and reads[-2:] == [True, False]
