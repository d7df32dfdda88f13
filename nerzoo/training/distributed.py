"""
What nerzoo's metrics and callbacks need under distributed training: collectives that work with
gloo (CPU) and NCCL (GPU) alike, and the end of the process group once training is over.

allennlp's `train` command evaluates `evaluate_on_test` on the primary worker alone, after the other
workers have returned, while the process group is still up: the readers would give the primary its
shard of the test set only, and the first collective of a metric (allennlp's `CategoricalAccuracy`
and `Average` all-reduce in every `__call__`, nerzoo's metrics in `get_metric`) would wait for
workers that are gone.  `LeaveProcessGroupAfterTraining`, added to allennlp's default trainer
callbacks when this module is imported, ends the process group on every worker when training ends,
so that the test evaluation that follows runs as one process, exactly as `allennlp evaluate` does.
But the test loader was built in the worker, whose reader read its shard of the test set only (a
reader notes its worker's rank when it is built, and the loader reads at once): `TrainModel.finish`
(the test evaluation) is wrapped here to read the whole test set again first.
"""

import logging
from collections import deque
from typing import Any, Dict, Optional

import torch
import torch.distributed as dist
from allennlp.commands.train import TrainModel
from allennlp.common.util import is_distributed
from allennlp.nn.util import distributed_device
from allennlp.training import gradient_descent_trainer
from allennlp.training.callbacks import TrainerCallback

logger = logging.getLogger(__name__)


def all_gather_rows(tensor: torch.Tensor) -> torch.Tensor:
    """
    The rows of `tensor` `(num_rows, ...)` of every worker, concatenated in rank order; the numbers
    of rows may differ between workers (not the other dimensions, nor the dtype).  `tensor` itself
    outside distributed training.  Every worker must call it, with or without rows.
    """
    if not is_distributed():
        return tensor
    device = distributed_device()
    rows = tensor.to(device)
    world_size = dist.get_world_size()
    sizes = [torch.zeros(1, dtype=torch.long, device=device) for _ in range(world_size)]
    dist.all_gather(sizes, torch.tensor([rows.size(0)], dtype=torch.long, device=device))
    counts = [int(size) for size in sizes]
    padded = rows.new_zeros((max(counts), *rows.shape[1:]))
    padded[: rows.size(0)] = rows
    gathered = [torch.empty_like(padded) for _ in range(world_size)]
    dist.all_gather(gathered, padded)
    return torch.cat([part[:count] for part, count in zip(gathered, counts)]).to(tensor.device)


def maximum_over_workers(value: float) -> float:
    """The largest `value` of all workers (in float64); `value` itself outside distributed training."""
    if not is_distributed():
        return value
    tensor = torch.tensor([value], dtype=torch.float64, device=distributed_device())
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
    return float(tensor.item())


class LeaveProcessGroupAfterTraining(TrainerCallback):
    """
    Ends the distributed process group on every worker when training ends (successfully or not),
    so that what runs after the trainer runs as one process: allennlp's `evaluate_on_test` on the
    primary reads the whole test set and its metrics reduce nothing.

    Not registered: this module adds it to allennlp's `DEFAULT_CALLBACKS`, so every
    `GradientDescentTrainer` built after `nerzoo` is imported gets it (unless the trainer's
    `enable_default_callbacks` is false), after the configured callbacks.  Outside distributed
    training it does nothing.

    The trainer's last collective is the barrier at the end of its last epoch, before `on_end`,
    and its `on_end` calls come after everything else it does, so no worker is left waiting.

    # Parameters

    serialization_dir : `str`, required
        Passed in by the trainer; nothing is written there.
    """

    def on_end(
        self,
        trainer,
        metrics: Optional[Dict[str, Any]] = None,
        epoch: Optional[int] = None,
        is_primary: bool = True,
        **kwargs,
    ) -> None:
        if is_distributed():
            logger.info("Training ended: leaving the distributed process group")
            dist.destroy_process_group()


if LeaveProcessGroupAfterTraining not in gradient_descent_trainer.DEFAULT_CALLBACKS:
    gradient_descent_trainer.DEFAULT_CALLBACKS = (  # type: ignore[assignment]
        *gradient_descent_trainer.DEFAULT_CALLBACKS,
        LeaveProcessGroupAfterTraining,
    )


_finish = TrainModel.finish


def _finish_on_the_whole_test_set(self: TrainModel, metrics: Dict[str, Any]) -> None:
    loader = self.evaluation_data_loader
    reader = getattr(loader, "reader", None)
    sharded = getattr(reader, "_distributed_info", None) is not None and hasattr(loader, "_instances")
    if self.evaluate_on_test and sharded and not is_distributed():
        logger.info("Reading the whole test set for the test evaluation after distributed training")
        reader._set_distributed_info(None)
        loader._instances = None  # type: ignore[union-attr]
        deque(loader.iter_instances(), maxlen=0)  # type: ignore[union-attr]
    _finish(self, metrics)


if TrainModel.finish.__name__ != "_finish_on_the_whole_test_set":
    TrainModel.finish = _finish_on_the_whole_test_set  # type: ignore[method-assign]
