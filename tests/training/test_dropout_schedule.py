from types import SimpleNamespace

import pytest
import torch
from allennlp.common.checks import ConfigurationError
from allennlp.modules import FeedForward, InputVariationalDropout

from nerzoo.training.callbacks.dropout_schedule import DropoutSchedule


def _trainer(num_epochs=4):
    model = torch.nn.ModuleDict(
        {
            "feedforward": FeedForward(4, 2, 4, torch.nn.ReLU(), dropout=0.4),
            "embedding_dropout": InputVariationalDropout(0.4),
            "linear": torch.nn.Linear(4, 2),
        }
    )
    return SimpleNamespace(model=model, _num_epochs=num_epochs)


def _rates(model):
    return sorted({round(module.p, 6) for module in model.modules() if isinstance(module, torch.nn.Dropout)})


def test_rates_move_linearly_from_start_to_end_over_the_epochs():
    trainer = _trainer(num_epochs=4)
    schedule = DropoutSchedule("unused", start=0.4, end=0.1)
    schedule.on_start(trainer)
    seen = [_rates(trainer.model)]
    for epoch in range(3):
        schedule.on_epoch(trainer, metrics={}, epoch=epoch)
        seen.append(_rates(trainer.model))
    assert seen == [[0.4], [0.3], [0.2], [0.1]]
    schedule.on_epoch(trainer, metrics={}, epoch=3)  # past the last epoch: stays at the end rate
    assert _rates(trainer.model) == [0.1]


def test_module_pattern_and_resumed_state():
    trainer = _trainer(num_epochs=3)
    schedule = DropoutSchedule("unused", start=0.5, end=0.0, modules="^feedforward")
    schedule.load_state_dict({"epochs_completed": 1})
    schedule.on_start(trainer)
    assert trainer.model["embedding_dropout"].p == 0.4
    assert all(layer.p == pytest.approx(0.25) for layer in trainer.model["feedforward"]._dropout)
    assert schedule.state_dict() == {"epochs_completed": 1}


def test_bad_settings_raise():
    with pytest.raises(ConfigurationError):
        DropoutSchedule("unused", start=1.0)
    with pytest.raises(ConfigurationError, match="no torch.nn.Dropout"):
        DropoutSchedule("unused", modules="^nothing").on_start(_trainer())
