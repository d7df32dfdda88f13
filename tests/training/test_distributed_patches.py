"""
nerzoo's patches to allennlp are in place once nerzoo is imported, and applying them again changes
nothing.  What they do under distributed training is tested end to end by
tests/test_distributed_configs.py (the test evaluation after two-process training) and
tests/test_end_to_end.py.
"""

import subprocess
import sys

from allennlp.commands.train import TrainModel
from allennlp.training import gradient_descent_trainer

import nerzoo
from nerzoo import patches
from nerzoo.training.distributed import LeaveProcessGroupAfterTraining


def test_importing_nerzoo_applies_every_patch():
    assert nerzoo.patches is patches
    assert patches.applied() == {"default_callbacks": True, "train_model_finish": True}
    assert gradient_descent_trainer.DEFAULT_CALLBACKS[-1] is LeaveProcessGroupAfterTraining


def test_applying_again_changes_nothing():
    callbacks = gradient_descent_trainer.DEFAULT_CALLBACKS
    finish = TrainModel.finish
    patches.apply()
    patches.apply()
    assert gradient_descent_trainer.DEFAULT_CALLBACKS == callbacks
    assert gradient_descent_trainer.DEFAULT_CALLBACKS.count(LeaveProcessGroupAfterTraining) == 1
    assert TrainModel.finish is finish


def test_allennlp_alone_is_unpatched():
    code = (
        "from allennlp.commands.train import TrainModel\n"
        "from allennlp.training import gradient_descent_trainer\n"
        "print([c.__name__ for c in gradient_descent_trainer.DEFAULT_CALLBACKS], TrainModel.finish.__module__)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.split() == ["['ConsoleLoggerCallback']", "allennlp.commands.train"]
