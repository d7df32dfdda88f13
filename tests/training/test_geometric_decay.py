import pytest
import torch
from allennlp.common import Lazy, Params
from allennlp.common.checks import ConfigurationError
from allennlp.training.learning_rate_schedulers import LearningRateScheduler

import nerzoo  # noqa: F401
from nerzoo.training.callbacks.dropout_schedule import DropoutSchedule
from tests import PROJECT_ROOT


def epoch_rates(scheduler_params: dict, num_epochs: int, lr: float = 0.128):
    """The rate of every epoch, built and stepped as allennlp's trainer does."""
    parameter = torch.nn.Parameter(torch.zeros(2))
    optimizer = torch.optim.SGD([parameter], lr=lr)
    scheduler = Lazy(LearningRateScheduler, Params(dict(scheduler_params))).construct(
        optimizer=optimizer, num_epochs=num_epochs, num_steps_per_epoch=3
    )
    rates = []
    for _ in range(num_epochs):
        rates.append(optimizer.param_groups[0]["lr"])
        for _step in range(3):
            optimizer.step()
            scheduler.step_batch()
        scheduler.step(0.0)
    return rates


@pytest.mark.parametrize("num_epochs", [2, 5, 30])
def test_rate_falls_by_one_factor_per_epoch_to_the_final_fraction(num_epochs):
    rates = epoch_rates({"type": "geometric_decay", "final_factor": 1 / 16}, num_epochs)
    assert rates[0] == pytest.approx(0.128)
    assert rates[-1] == pytest.approx(0.128 / 16)
    ratios = [later / earlier for earlier, later in zip(rates, rates[1:])]
    assert ratios == pytest.approx([ratios[0]] * len(ratios))


def test_one_epoch_keeps_the_rate():
    assert epoch_rates({"type": "geometric_decay"}, 1) == [pytest.approx(0.128)]


def test_bad_final_factor_raises():
    with pytest.raises(ConfigurationError, match="final_factor"):
        epoch_rates({"type": "geometric_decay", "final_factor": 0.0}, 3)


@pytest.mark.parametrize("config", ["fofe_ner.jsonnet", "fofe_ner_second_pass.jsonnet"])
@pytest.mark.parametrize("num_epochs", [7, 100])
def test_fofe_schedules_follow_the_trainers_epochs(config, num_epochs, monkeypatch):
    # §5.5.1: the rate ends at 1/16 of its start and dropout at 0.1, however many epochs are run.
    monkeypatch.setenv("FOFE_FIRST_PASS", "unused.tar.gz")
    params = Params.from_file(str(PROJECT_ROOT / "training_config" / config), f'{{"trainer.num_epochs": {num_epochs}}}')
    trainer = params.as_dict(quiet=True)["trainer"]
    lr = trainer["optimizer"]["lr"]
    rates = epoch_rates(trainer["learning_rate_scheduler"], trainer["num_epochs"], lr=lr)
    assert rates[-1] == pytest.approx(lr / 16)
    (dropout,) = [callback for callback in trainer["callbacks"] if callback["type"] == "dropout_schedule"]
    schedule = DropoutSchedule("unused", **{key: value for key, value in dropout.items() if key != "type"})
    schedule.num_epochs = schedule.num_epochs or trainer["num_epochs"]
    assert schedule.rate(trainer["num_epochs"] - 1) == pytest.approx(0.1)
