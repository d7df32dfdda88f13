import logging

import torch.distributed as dist
from allennlp.common.util import is_distributed
from allennlp.training.callbacks import TrainerCallback

logger = logging.getLogger(__name__)


@TrainerCallback.register("leave_process_group")
class LeaveProcessGroupAfterTraining(TrainerCallback):
    """
    Ends the distributed process group on every worker when training ends, so that what runs after
    the trainer (`evaluate_on_test` with the `whole_test_set` train loop) runs as one process whose
    metrics reduce nothing.  The trainer's last collective comes before `on_end`, so no worker is
    left waiting.  List it last among the trainer's callbacks.

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
