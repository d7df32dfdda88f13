"""
`compile_modules`: the embedder and encoder of the shipped configs traced by `torch.compile`
(dynamo's `eager` backend: the traced graphs run as captured, so results can be compared exactly),
the training step's losses and gradients the same as uncompiled, the state dict untouched; in
`make test-slow` inductor's code, and a whole `allennlp` training with the callback scoring what
the same run without it scores.
"""

import copy
import json
from types import SimpleNamespace

import pytest
import torch
from allennlp.commands.train import train_model
from allennlp.common import Params
from allennlp.common.checks import ConfigurationError
from allennlp.data.batch import Batch
from torch._dynamo.utils import counters

from nerzoo.training.callbacks.compile_modules import CompileModules
from tests import FIXTURES_ROOT, PROJECT_ROOT
from tests.test_training_configs import build_on_fixtures


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    counters.clear()
    allow_rnn = torch._dynamo.config.allow_rnn
    yield
    torch._dynamo.config.allow_rnn = allow_rnn
    torch._dynamo.reset()


def _step(model, tensors, seed):
    torch.manual_seed(seed)
    model.zero_grad(set_to_none=True)
    loss = model(**tensors)["loss"]
    loss.backward()
    return loss.detach(), {name: parameter.grad for name, parameter in model.named_parameters()}


@pytest.mark.parametrize(
    "config,backend",
    [
        ("bilstm_crf.jsonnet", "eager"),
        ("bilstm_crf_gpu.jsonnet", "eager"),
        # Compiled to C++ by inductor (about 30 s): the gradients agree to float rounding.
        pytest.param("bilstm_crf.jsonnet", "inductor", marks=pytest.mark.slow),
    ],
)
def test_the_embedder_and_encoder_compile_whole_and_train_as_before(config, backend):
    model, instances, vocab = build_on_fixtures(PROJECT_ROOT / "training_config" / config)
    batch = Batch(instances)
    batch.index_instances(vocab)
    tensors = batch.as_tensor_dict()
    compiled = copy.deepcopy(model)
    keys = list(compiled.state_dict())
    # fullgraph: a graph break raises.
    CompileModules("unused", backend=backend, fullgraph=True).on_start(SimpleNamespace(model=compiled))
    assert list(compiled.state_dict()) == keys
    model.train()
    compiled.train()
    for seed in (1, 2):  # a second step runs the graphs already compiled
        loss, gradients = _step(model, tensors, seed)
        compiled_loss, compiled_gradients = _step(compiled, tensors, seed)
        assert counters["stats"]["unique_graphs"] == 2  # the embedder's and the encoder's
        tolerance = {} if backend == "eager" else {"atol": 1e-5, "rtol": 1e-4}
        torch.testing.assert_close(compiled_loss, loss, **tolerance)
        assert compiled_gradients.keys() == gradients.keys()
        for name, gradient in gradients.items():
            torch.testing.assert_close(compiled_gradients[name], gradient, msg=name, **tolerance)


def test_an_unknown_submodule_or_none_is_a_clear_error():
    model, _, _ = build_on_fixtures(PROJECT_ROOT / "training_config" / "bilstm_crf.jsonnet")
    with pytest.raises(ConfigurationError, match="no submodule 'decoder'"):
        CompileModules("unused", modules=["decoder"]).on_start(SimpleNamespace(model=model))
    with pytest.raises(ConfigurationError, match="at least one"):
        CompileModules("unused", modules=[])


@pytest.mark.slow
def test_training_with_the_callback_scores_what_training_without_it_scores(tmp_path):
    def trained(name, callbacks):
        params = Params.from_file(
            str(FIXTURES_ROOT / "experiments" / "bilstm_crf_tiny.jsonnet"),
            json.dumps({"trainer.num_epochs": 2, "trainer.callbacks": callbacks}),
        )
        train_model(params, str(tmp_path / name), include_package=["nerzoo"])
        return json.loads((tmp_path / name / "metrics.json").read_text())

    plain = trained("plain", [])
    assert not counters["stats"]["unique_graphs"]
    compiled = trained("compiled", [{"type": "compile_modules", "backend": "eager"}])
    assert counters["stats"]["unique_graphs"] >= 2
    for key in ("best_validation_f1-measure-overall", "best_validation_loss", "training_loss"):
        assert compiled[key] == pytest.approx(plain[key], rel=1e-5), key
