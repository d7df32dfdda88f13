"""
Importing nerzoo changes nothing outside it; what allennlp's training needs for the test evaluation
after distributed training is named by the configs: the `whole_test_set` train loop and the
`leave_process_group` callback.  What they do under distributed training is tested end to end by
tests/test_distributed_configs.py (the test evaluation after two-process training).
"""

import json
import subprocess
import sys
from types import SimpleNamespace

import pytest
from allennlp.commands.train import TrainModel
from allennlp.common.checks import ConfigurationError

import nerzoo  # noqa: F401
from nerzoo.training.callbacks.leave_process_group import LeaveProcessGroupAfterTraining
from nerzoo.training.whole_test_set import WholeTestSetTrainModel
from tests.test_training_configs import CONFIGS, on_fixtures

STATE = (
    "import json, os, torch\n"
    "from allennlp.commands.train import TrainModel\n"
    "from allennlp.training import gradient_descent_trainer\n"
    "def state():\n"
    "    return [dict(os.environ), [c.__name__ for c in gradient_descent_trainer.DEFAULT_CALLBACKS],\n"
    "            TrainModel.finish.__module__, str(torch.get_default_dtype())]\n"
    "before = state()\n"
    "import nerzoo\n"
    "print(json.dumps([before, state()]))\n"
)


def test_importing_nerzoo_changes_nothing_outside_it():
    result = subprocess.run([sys.executable, "-c", STATE], capture_output=True, text=True, check=True)
    before, after = json.loads(result.stdout.splitlines()[-1])
    assert before == after
    assert after[1:] == [["ConsoleLoggerCallback"], "allennlp.commands.train", "torch.float32"]


def test_the_names_are_registered():
    assert TrainModel.resolve_class_name("whole_test_set") == (WholeTestSetTrainModel, "from_partial_objects")
    from allennlp.training.callbacks import TrainerCallback

    assert TrainerCallback.by_name("leave_process_group") is LeaveProcessGroupAfterTraining


@pytest.mark.parametrize("config", CONFIGS, ids=lambda path: path.name)
def test_every_shipped_config_names_them(config):
    params = on_fixtures(config).as_dict(quiet=True)
    assert params["type"] == "whole_test_set"
    assert params["trainer"]["callbacks"][-1] == {"type": "leave_process_group"}


def test_distributed_testing_without_the_callback_is_a_clear_error():
    trainer = SimpleNamespace(_distributed=True, _callbacks=[])
    with pytest.raises(ConfigurationError, match="leave_process_group"):
        WholeTestSetTrainModel("run", None, trainer, evaluation_data_loader=[], evaluate_on_test=True)
    trainer._callbacks = [LeaveProcessGroupAfterTraining("run")]
    WholeTestSetTrainModel("run", None, trainer, evaluation_data_loader=[], evaluate_on_test=True)
    WholeTestSetTrainModel("run", None, SimpleNamespace(_distributed=False, _callbacks=[]), [], evaluate_on_test=True)


def test_the_callback_does_nothing_outside_distributed_training():
    LeaveProcessGroupAfterTraining("run").on_end(trainer=None)
