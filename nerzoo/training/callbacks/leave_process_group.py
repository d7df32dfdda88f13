import logging

import torch.distributed as dist
from allennlp.common.util import is_distributed
from allennlp.training.callbacks import TrainerCallback

logger = logging.getLogger(__name__)


@TrainerCallback.register("leave_process_group")
class LeaveProcessGroupAfterTraining(TrainerCallback):
    """
    Ends the distributed process group on every worker when training ends (successfully or not),
    so that what runs after the trainer runs as one process: `evaluate_on_test` on the primary
    (with the `whole_test_set` train loop, `nerzoo.training.whole_test_set`) reads the whole test
    set, and its metrics, which all-reduce under distributed training, reduce nothing.  Outside
    distributed training it does nothing.

    The trainer's last collective is the barrier at the end of its last epoch, before `on_end`, and
    its `on_end` calls come after everything else it does, so no worker is left waiting.  List it
    last among the trainer's callbacks.

    Registered as a `TrainerCallback` with name "leave_process_group": `"trainer": {"callbacks":
    [..., {"type": "leave_process_group"}]}`.

    # Parameters

    serialization_dir : `str`, required
        Passed in by the trainer; nothing is written there.
    """

    def on_end(self, trainer, metrics=None, epoch=None, is_primary: bool = True, **kwargs) -> None:
        if is_distributed():
            logger.info("Training ended: leaving the distributed process group")
            dist.destroy_process_group()
