"""
What nerzoo's metrics and callbacks need under distributed training: collectives that work with
gloo (CPU) and NCCL (GPU) alike, and the end of the process group once training is over (which
`nerzoo.patches` adds to every trainer, and says why).
"""

import logging
from typing import Any, Dict, Optional

import torch
import torch.distributed as dist
from allennlp.common.util import is_distributed
from allennlp.nn.util import distributed_device
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


class LeaveProcessGroupAfterTraining(TrainerCallback):
    """
    Ends the distributed process group on every worker when training ends (successfully or not),
    so that what runs after the trainer runs as one process: allennlp's `evaluate_on_test` on the
    primary reads the whole test set and its metrics reduce nothing.

    Not registered: `nerzoo.patches` adds it to allennlp's `DEFAULT_CALLBACKS`, so every
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
