"""Runs a metric in two gloo processes, each on its half of the data, as distributed training does."""

from pathlib import Path
from typing import Any, Callable, Dict, Sequence

import torch.distributed as dist
import torch.multiprocessing as mp


def _metric_worker(rank: int, world_size: int, init_file: Path, make_metric: Callable, inputs: Sequence, queue) -> None:
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world_size)
    metric = make_metric()
    metric(*(part[rank::world_size] for part in inputs))
    queue.put((rank, metric.get_metric()))
    dist.barrier()
    dist.destroy_process_group()


def _defining_module(make_metric: Callable) -> str:
    """The module that defines `make_metric` (or the class a `functools.partial` wraps)."""
    return getattr(make_metric, "func", make_metric).__module__


def metric_in_two_processes(make_metric: Callable, inputs: Sequence, init_file: Path) -> Dict[int, Dict[str, Any]]:
    """
    `make_metric()` (picklable) in two worker processes; process `r` is called with
    `part[r::2]` of every argument list in `inputs`.  Returns `{rank: get_metric()}`.
    """
    # A fork server imports the metrics' modules once per test process; each pair of workers is forked
    # from it instead of importing allennlp anew (a spawned worker takes seconds to start).
    context = mp.get_context("forkserver")
    context.set_forkserver_preload(["tests.distributed", _defining_module(make_metric)])
    queue = context.Queue()
    processes = [
        context.Process(target=_metric_worker, args=(rank, 2, init_file, make_metric, inputs, queue))
        for rank in range(2)
    ]
    for process in processes:
        process.start()
    results = dict(queue.get(timeout=300) for _ in processes)
    for process in processes:
        process.join(timeout=60)
        assert process.exitcode == 0
    return results
