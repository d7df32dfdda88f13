"""
A training step that never waits for the device: the model and a fixture batch on PyTorch's `meta`
device, which holds shapes but no data, so anything that reads a value back to the host (`item`,
`tolist`, `nonzero`, boolean indexing, `bool(tensor)`, a copy to the CPU) raises there, as a
device-to-host sync would stall a GPU.
"""

import pytest
import torch
from allennlp.data.batch import Batch
from allennlp.nn import util

from tests import PROJECT_ROOT
from tests.test_training_configs import build_on_fixtures

# The configs whose training step (forward, loss, training metrics, backward) reads nothing back.
SYNC_FREE = [
    "bilstm_crf.jsonnet",
    "bilstm_crf_gpu.jsonnet",
    "bilstm_crf_pos.jsonnet",
    "char_gated_tagger_words.jsonnet",
]


def _training_step_on_meta(config_name: str, decode_in_forward: bool = False) -> torch.Tensor:
    model, instances, vocab = build_on_fixtures(PROJECT_ROOT / "training_config" / config_name)
    if decode_in_forward:  # the training metrics counted in the step, not when they are read
        model.head.training_decode_interval = 1
    batch = Batch(instances)
    batch.index_instances(vocab)
    meta = torch.device("meta")
    model.to(meta).train()
    output = model(**util.move_to_device(batch.as_tensor_dict(), meta))
    output["loss"].backward()
    return output["loss"]


@pytest.mark.parametrize("decode_in_forward", [False, True])
@pytest.mark.parametrize("config_name", SYNC_FREE)
def test_training_step_reads_nothing_back_from_the_device(config_name, decode_in_forward):
    loss = _training_step_on_meta(config_name, decode_in_forward)
    assert loss.device.type == "meta" and loss.shape == ()


def test_the_meta_device_catches_a_read_back(monkeypatch):
    from nerzoo.modules.crf.tag_decoder import TagDecoder

    update = TagDecoder.update_metrics

    def reads_back(self, predicted, *args, **kwargs):
        predicted.tolist()
        return update(self, predicted, *args, **kwargs)

    monkeypatch.setattr(TagDecoder, "update_metrics", reads_back)
    with pytest.raises(NotImplementedError, match="meta"):
        _training_step_on_meta("bilstm_crf.jsonnet", decode_in_forward=True)
