"""
`nerzoo-tag --ray`: the shards of a corpus tagged on Ray Data, by actors that each load the tagger once.

The driver plans the shards (`tag_corpus.plans`) and makes each missing one a row of a dataset;
`map_batches` hands the rows to a pool of `--workers` actors of `--worker-cpus` CPUs each (onnxruntime's
intra-op threads: `--threads`, or those CPUs rounded up).  An actor reads its shard's lines from the
shared file system, tags them and writes the shard by atomic rename.  A killed actor is restarted and
its shard redone (`MAX_RESTARTS`, `MAX_TASK_RETRIES`): a shard's name depends only on its input, so a
shard written twice is written whole, once.  Ray's progress bars show the job.
"""

import argparse
import json
import logging
import math
import warnings
from typing import Any, Dict, List, Optional, Sequence

from nerzoo_runtime.tag_corpus import Plan, write_planned
from nerzoo_runtime.tagger import Tagger

# Bounded, so an input that kills its actor every time ends the job (the shards done are kept).
MAX_RESTARTS = 3
MAX_TASK_RETRIES = 3


class ShardWriter:
    """
    A Ray Data actor: the tagger, loaded once; each batch of planned shards written.

    # Parameters

    settings : `Dict[str, Any]`
        The command's arguments (`vars(args)`), `threads` set.
    """

    def __init__(self, settings: Dict[str, Any]) -> None:
        self.args = argparse.Namespace(**settings)
        self.tagger = Tagger.load(self.args.export, self.args.spacy_model, self.args.threads)

    def __call__(self, batch: Dict[str, Any]) -> Dict[str, List[Any]]:
        plans = [json.loads(plan) for plan in batch["plan"]]
        records = [write_planned(self.tagger, plan, self.args) for plan in plans]  # -1: it existed already
        return {"shard": [plan["shard"] for plan in plans], "records": [-1 if n is None else n for n in records]}


def connect(address: str) -> bool:
    """Ray, joined or started for `--ray ADDRESS`; True when this call started it (and must end it)."""
    import ray

    if ray.is_initialized():  # a caller's own cluster
        return False
    if address == "local":  # a new cluster of this machine alone (`tag_corpus` keeps it on 127.0.0.1)
        ray.init(address="local", include_dashboard=False, logging_level=logging.WARNING)
    else:
        ray.init(address=address, logging_level=logging.WARNING)
    return True


def write_shards(plans: Sequence[Plan], args) -> Dict[str, Optional[int]]:
    """
    Writes the shards of `plans` on Ray Data: each one's records (None where it existed already).  A
    failed job is a `RuntimeError` saying what to do.
    """
    if not plans:
        return {}
    import ray
    import ray.data

    started = connect(args.ray)
    settings = dict(vars(args), threads=args.threads or math.ceil(args.worker_cpus))
    try:
        rows = ray.data.from_items([{"plan": json.dumps(plan)} for plan in plans], override_num_blocks=len(plans))
        with warnings.catch_warnings():  # Ray 2.60 has no named parameter for these two yet
            warnings.filterwarnings(
                "ignore", "`ray_remote_args` is deprecated", ray.util.annotations.RayDeprecationWarning
            )
            written = rows.map_batches(
                ShardWriter,
                fn_constructor_args=(settings,),
                batch_size=1,
                compute=ray.data.ActorPoolStrategy(size=args.workers),
                num_cpus=args.worker_cpus,
                max_restarts=MAX_RESTARTS,
                max_task_retries=MAX_TASK_RETRIES,
            )
        done = {row["shard"]: None if row["records"] < 0 else int(row["records"]) for row in written.iter_rows()}
    except ray.exceptions.RayError as error:
        message = str(error).strip().splitlines()[-1]
        raise RuntimeError(f"the Ray job failed ({message}); run the command again to finish its shards") from None
    finally:
        if started:
            ray.shutdown()
    if lost := sorted({plan["shard"] for plan in plans} - done.keys()):
        raise RuntimeError(f"the Ray job did not write {len(lost)} shards ({lost[0]}, ...): run the command again")
    return done
