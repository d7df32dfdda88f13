"""Collectives for nerzoo's metrics under distributed training that work with gloo (CPU) and NCCL (GPU) alike."""

import torch
import torch.distributed as dist
from allennlp.common.util import is_distributed
from allennlp.nn.util import distributed_device


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
