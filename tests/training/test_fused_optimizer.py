"""
`use_fused_steps` and the `fused_optimizer` callback on the CPU: a switched optimizer steps as the
unswitched one does (up to rounding), from fresh or existing state; what it must not switch stays as
it was; on the CPU the callback changes nothing.
"""

import copy
import logging
import types

import pytest
import torch
from allennlp.common import Params
from allennlp.training.optimizers import Optimizer

from nerzoo.training.callbacks.fused_optimizer import FusedOptimizer, use_fused_steps
from tests.training.fused_optimizer_runs import (
    OPTIMIZERS,
    Net,
    RecordSteps,
    check_switched_steps_equal_the_unswitched,
    model_and_optimizer,
    optimizer_step,
    tiny_trainer,
)


@pytest.mark.parametrize("switch_at", [0, 2], ids=["from_the_start", "from_existing_state"])
@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_switched_steps_equal_the_unswitched_ones(name, switch_at):
    check_switched_steps_equal_the_unswitched(name, switch_at, torch.device("cpu"))


def _groups(optimizer):
    return [{key: value for key, value in group.items() if key != "params"} for group in optimizer.param_groups]


@pytest.mark.parametrize(
    "config, groups, options, why",
    [
        pytest.param({"type": "adagrad", "lr": 0.05}, {}, {}, "no fused step", id="adagrad"),
        pytest.param({"type": "rmsprop", "lr": 0.05}, {}, {}, "no fused step", id="rmsprop"),
        pytest.param(OPTIMIZERS["adam"], {"foreach": True}, {}, "foreach=True", id="foreach"),
        pytest.param(OPTIMIZERS["adam"], {"foreach": False}, {}, "foreach=False", id="for_loop"),
        pytest.param(OPTIMIZERS["sgd"], {"fused": False}, {}, "fused=False", id="unfused"),
        pytest.param(OPTIMIZERS["adam"], {"differentiable": True}, {}, "differentiable", id="differentiable"),
        pytest.param(OPTIMIZERS["adam"], {}, {"device_types": ("cuda",)}, "float32 on cpu", id="cuda_only"),
        pytest.param({**OPTIMIZERS["sgd_momentum"], "dampening": 0.1}, {}, {}, "dampening", id="dampening"),
        pytest.param(OPTIMIZERS["sgd_momentum"], {}, {"sparse_gradients": True}, "sparse", id="sparse"),
    ],
)
def test_what_it_must_not_switch_stays_as_it_was(config, groups, options, why):
    model, optimizer = model_and_optimizer(config, "cpu", **groups)
    if options.get("sparse_gradients"):  # as an embedding with `sparse=True` gives them
        options = {"sparse_gradients": list(model.first.parameters())}
    optimizer_step(model, optimizer, 0)
    before, state = _groups(optimizer), copy.deepcopy(optimizer.state_dict()["state"])
    lines = use_fused_steps(optimizer, **options)
    assert any(why in line and "left as it is" in line for line in lines), lines
    if groups:  # a group of its own: the rest is another group, switched
        assert _groups(optimizer)[0] == before[0] and optimizer.param_groups[1]["fused"] is True
        return
    assert _groups(optimizer) == before and all(group.get("fused") is not True for group in optimizer.param_groups)
    after = optimizer.state_dict()["state"]
    assert after.keys() == state.keys()
    for key, values in state.items():
        assert after[key].keys() == values.keys()
        for name, value in values.items():
            assert torch.equal(torch.as_tensor(after[key][name]), torch.as_tensor(value)), (key, name)


def test_only_the_groups_that_ask_nothing_are_switched():
    model, optimizer = model_and_optimizer(OPTIMIZERS["adam"], "cpu", foreach=True)
    lines = use_fused_steps(optimizer)
    assert [group["fused"] for group in optimizer.param_groups] == [None, True], lines
    assert [group["foreach"] for group in optimizer.param_groups] == [True, False], lines


def test_each_optimizer_of_a_multi_optimizer():
    model = Net()
    params = Params(
        {
            "type": "multi",
            "optimizers": {"default": OPTIMIZERS["adam"], "slow": {"type": "adagrad", "lr": 0.01}},
            "parameter_groups": [[["^second"], {"optimizer_name": "slow"}]],
        }
    )
    optimizer = Optimizer.from_params(model_parameters=list(model.named_parameters()), params=params)
    lines = use_fused_steps(optimizer)
    assert optimizer.optimizers["default"].param_groups[0]["fused"] is True
    assert optimizer.optimizers["slow"].param_groups[0].get("fused") is None
    assert len(lines) == 2 and lines[0].startswith("default: ") and "left as it is" in lines[1], lines
    optimizer_step(model, optimizer, 0)


def test_the_callback_leaves_a_cpu_trainer_alone(caplog):
    model, optimizer = model_and_optimizer(OPTIMIZERS["adam"], "cpu")
    optimizer_step(model, optimizer, 0)
    before, state = _groups(optimizer), copy.deepcopy(optimizer.state_dict()["state"])
    trainer = types.SimpleNamespace(model=model, optimizer=optimizer, cuda_device=torch.device("cpu"))
    caplog.set_level(logging.INFO, logger="nerzoo.training.callbacks.fused_optimizer")
    FusedOptimizer("unused").on_start(trainer)
    assert _groups(optimizer) == before and optimizer.param_groups[0]["fused"] is None
    assert all(
        torch.equal(torch.as_tensor(value), torch.as_tensor(optimizer.state_dict()["state"][key][name]))
        for key, values in state.items()
        for name, value in values.items()
    )
    assert "not on a CUDA device" in caplog.text


def test_a_cpu_training_with_it_gives_the_same_parameters(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="nerzoo.training.callbacks.fused_optimizer")
    trained = {}
    for run, callbacks in (("with", ["fused_optimizer", "test_record_optimizer_steps"]), ("without", [])):
        trainer = tiny_trainer(tmp_path / run, callbacks, num_epochs=2)
        trainer.train()
        trained[run] = dict(trainer.model.named_parameters())
    record = RecordSteps.runs[-1]
    assert len(record.groups) == 8 and all(groups == [(None, None)] for groups in record.groups)
    assert record.counters == {("cpu", torch.float32)} and record.steps == 8
    assert "fused_optimizer: the model is not on a CUDA device" in caplog.text
    for name, parameter in trained["with"].items():
        assert torch.equal(parameter, trained["without"][name]), name
