import logging
import os
from collections import deque
from typing import Any, Dict

import torch.distributed as dist
from allennlp.commands.train import TrainModel
from allennlp.common.checks import ConfigurationError
from allennlp.common.util import is_distributed, is_global_primary

from nerzoo.training.callbacks.leave_process_group import LeaveProcessGroupAfterTraining

logger = logging.getLogger(__name__)


@TrainModel.register("whole_test_set", constructor="from_partial_objects")
class WholeTestSetTrainModel(TrainModel):
    """
    allennlp's `TrainModel` whose `evaluate_on_test` after distributed training gives what
    `allennlp evaluate` gives on the archive: allennlp's own evaluates the primary's shard of the
    test set only.  Here the primary reads the whole test set again, and the trainer must end the
    process group on every worker (the `leave_process_group` callback, last in `trainer.callbacks`).

    On several nodes allennlp's trainer saves and archives on the first worker of every node, so each
    node needs its own serialization directory (a shared one is refused before training); only the
    first node (global rank 0) evaluates the test set and writes `metrics.json`.  Every node's
    archive holds the same weights (the workers' gradients are averaged).

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
        self.global_primary = True

    def run(self) -> Dict[str, Any]:
        # Read before training: the process group ends with it.
        self.global_primary = is_global_primary()
        if is_distributed():
            refuse_a_shared_directory(self.serialization_dir)
        return super().run()

    def finish(self, metrics: Dict[str, Any]) -> None:
        # allennlp finishes on the first worker of each node.
        if not self.global_primary:
            logger.info("A node after the first: the first node (--node-rank 0) writes the test metrics")
            return
        loader = self.evaluation_data_loader
        reader = getattr(loader, "reader", None)
        sharded = getattr(reader, "_distributed_info", None) is not None and hasattr(loader, "_instances")
        if self.evaluate_on_test and sharded and not is_distributed():
            logger.info("Reading the whole test set for the test evaluation after distributed training")
            reader._set_distributed_info(None)
            loader._instances = None  # type: ignore[union-attr]
            deque(loader.iter_instances(), maxlen=0)  # type: ignore[union-attr]
        super().finish(metrics)


def refuse_a_shared_directory(serialization_dir: str) -> None:
    """
    Raises on every worker when a node after the first sees the first worker's serialization
    directory: each node's trainer would write the same files there.  allennlp numbers the workers
    node by node, `ALLENNLP_PROCS_PER_NODE` to a node.
    """
    rank, world_size = dist.get_rank(), dist.get_world_size()
    node = rank // int(os.environ.get("ALLENNLP_PROCS_PER_NODE", world_size))
    mark = os.path.join(serialization_dir, ".first_worker")
    if rank == 0:
        open(mark, "w").close()
    dist.barrier()
    shared = [False] * world_size
    dist.all_gather_object(shared, node > 0 and os.path.exists(mark))
    if rank == 0:
        os.remove(mark)
    if any(shared):
        raise ConfigurationError(
            f"{serialization_dir} is the first node's serialization directory too: "
            "give each node its own (allennlp train -s), as on machines that share no disk"
        )
