#!/usr/bin/env python
"""
Where a training step's time goes on a device: the host's cost of one operator call, then for each
config, milliseconds per batch of collation, a forward pass without gradients, forward and
backward, a whole step (penalty, clipping, optimiser), the same with the CRF's scans off, and the
trainer's epoch; on CUDA also the kernels' time and launches per batch, from one profiled epoch
whose tables go to `$OUT/profile_CONFIG.txt`. A diagnostic for a lent GPU (tests/gpu/device_checks.sh):

    NERZOO_DATA=conll2003 bash .gpu/run.sh python3 tests/gpu/step_profile.py bilstm_crf deptree_ner
"""

import argparse
import json
import os
import sys
import tempfile
import time
from typing import Callable, Dict
from unittest import mock

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [os.path.join(ROOT, "benchmarks")]
import harness  # noqa: E402


def milliseconds(run: Callable[[], object], count: int, synchronize: Callable[[], None]) -> float:
    synchronize()
    started = time.perf_counter()
    run()
    synchronize()
    return (time.perf_counter() - started) * 1000 / count


def call_microseconds(device: torch.device, synchronize, calls: int = 3000) -> float:
    """Host microseconds of one in-place add on a 16-element tensor (about one kernel launch on CUDA)."""
    tensor = torch.zeros(16, device=device)
    return milliseconds(lambda: [tensor.add_(1) for _ in range(calls)], calls, synchronize) * 1000


def profile(config: str, prefix: str, device: torch.device, out: str, synchronize) -> Dict[str, float]:
    from allennlp.commands.train import TrainModel
    from allennlp.common.params import Params
    from allennlp.nn import util
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    from nerzoo.modules.crf import chain_scans

    cuda = device.type == "cuda"
    overrides = {
        "train_data_path": prefix,
        "validation_data_path": prefix,
        "test_data_path": None,
        "evaluate_on_test": False,
        "trainer.cuda_device": (device.index or 0) if cuda else -1,
        "trainer.num_epochs": 1,
    }
    path = os.path.join(ROOT, "training_config", f"{config}.jsonnet")
    params = Params.from_file(path, json.dumps(overrides), ext_vars=dict(os.environ))
    loop = TrainModel.from_params(params=params, serialization_dir=tempfile.mkdtemp(), local_rank=0)
    trainer, model = loop.trainer, loop.model
    batches: list = []
    collating = milliseconds(lambda: batches.extend(trainer.data_loader), 1, synchronize)
    count = len(batches)
    figures = {"batches": count, "collate": collating / count}
    batches = [util.move_to_device(batch, device) for batch in batches]
    trained = [parameter for parameter in model.parameters() if parameter.requires_grad]

    def loss(batch):
        penalty = model.get_regularization_penalty()
        output = model(**batch)["loss"]
        return output if penalty is None else output + penalty

    def step(batch):
        trainer.optimizer.zero_grad(set_to_none=True)
        loss(batch).backward()
        torch.nn.utils.clip_grad_norm_(trained, trainer._grad_norm or 1e9)
        trainer.optimizer.step()

    def forward():
        with torch.no_grad():
            for batch in batches:
                model(**batch)

    model.train()
    for batch in batches[:5]:
        step(batch)
    figures["forward, no gradients"] = milliseconds(forward, count, synchronize)
    figures["forward and backward"] = milliseconds(
        lambda: [loss(batch).backward() for batch in batches], count, synchronize
    )
    figures["step"] = milliseconds(lambda: [step(batch) for batch in batches], count, synchronize)
    with mock.patch.dict(os.environ, {chain_scans.SCANS_VARIABLE: "never"}):
        figures["step, scans off"] = milliseconds(lambda: [step(batch) for batch in batches], count, synchronize)
    for callback in trainer._callbacks:
        callback.on_start(trainer, is_primary=True)
    trainer._train_epoch(0)
    figures["trainer's epoch"] = milliseconds(lambda: trainer._train_epoch(1), count, synchronize)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with torch_profile(activities=activities) as profiler:
        trainer._train_epoch(2)
        synchronize()
    averages = profiler.key_averages()
    with open(os.path.join(out, f"profile_{config}.txt"), "w") as handle:
        handle.write(averages.table(sort_by="self_cpu_time_total", row_limit=60))
        if cuda:
            handle.write("\n\n" + averages.table(sort_by="self_cuda_time_total", row_limit=30))
    if cuda:
        figures["kernels"] = sum(event.self_device_time_total for event in averages) / 1000 / count
        launches = ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC")
        figures["launches"] = sum(event.count for event in averages if event.key in launches) / count
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.strip().split("\n\n")[0])
    parser.add_argument("configs", nargs="+", help="names in training_config/")
    parser.add_argument("--sentences", type=int, default=1000, help="the train file's first N sentences")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    import nerzoo  # noqa: F401

    device = torch.device(args.device)
    synchronize = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    out = os.environ.get("OUT") or os.path.join(ROOT, "runs", "step_profile")
    os.makedirs(out, exist_ok=True)
    os.environ.setdefault("NERZOO_DATA", "conll2003")
    os.chdir(ROOT)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else harness.machine_description()
    print(f"{name}, torch {torch.__version__}", flush=True)
    print(
        f"one call: {call_microseconds(device, synchronize):.1f} us on {device}, "
        f"{call_microseconds(torch.device('cpu'), lambda: None):.1f} us on the CPU",
        flush=True,
    )
    prefix = os.path.join(tempfile.mkdtemp(), "train_prefix.txt")
    harness.write_prefix(os.path.join(harness.SHARED_DATA, "conll2003", "eng.train"), args.sentences, prefix)
    for config in args.configs:
        figures = profile(config, prefix, device, out, synchronize)
        print(config + ": " + ", ".join(f"{key} {value:.2f}" for key, value in figures.items()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
