import logging
from collections import deque
from typing import Any, Dict

from allennlp.commands.train import TrainModel
from allennlp.common.checks import ConfigurationError
from allennlp.common.util import is_distributed

from nerzoo.training.callbacks.leave_process_group import LeaveProcessGroupAfterTraining

logger = logging.getLogger(__name__)


@TrainModel.register("whole_test_set", constructor="from_partial_objects")
class WholeTestSetTrainModel(TrainModel):
    """
    allennlp's `TrainModel` whose `evaluate_on_test` after distributed training gives what
    `allennlp evaluate` gives on the archive: allennlp's own evaluates the primary's shard of the
    test set only.  Here the primary reads the whole test set again, and the trainer must end the
    process group on every worker (the `leave_process_group` callback, last in `trainer.callbacks`).

    Registered as a `TrainModel` with name "whole_test_set" (the config's top-level `type`).
    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        trainer = self.trainer
        callbacks = getattr(trainer, "_callbacks", [])
        if (
            self.evaluate_on_test
            and self.evaluation_data_loader is not None
            and getattr(trainer, "_distributed", False)
            and not any(isinstance(callback, LeaveProcessGroupAfterTraining) for callback in callbacks)
        ):
            raise ConfigurationError(
                "evaluate_on_test after distributed training needs the trainer callback "
                '{"type": "leave_process_group"} (last in trainer.callbacks)'
            )

    def finish(self, metrics: Dict[str, Any]) -> None:
        loader = self.evaluation_data_loader
        reader = getattr(loader, "reader", None)
        sharded = getattr(reader, "_distributed_info", None) is not None and hasattr(loader, "_instances")
        if self.evaluate_on_test and sharded and not is_distributed():
            logger.info("Reading the whole test set for the test evaluation after distributed training")
            reader._set_distributed_info(None)
            loader._instances = None  # type: ignore[union-attr]
            deque(loader.iter_instances(), maxlen=0)  # type: ignore[union-attr]
        super().finish(metrics)
