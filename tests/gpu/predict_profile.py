#!/usr/bin/env python
"""
Where prediction's time goes on a device: a config's model (built on the first 300 sentences of
eng.train, untrained: the cost does not depend on the weights) predicting eng.testa with
confidences through `forward_on_instances`, as `allennlp predict` runs it, in batches of each size.
Sentences per second of the whole call and of its parts measured alone (collation and the move to
the device, the forward pass, `make_output_human_readable`); the slowest Python functions of one
pass (cProfile), and on CUDA the kernels' table of the forward pass under `torch.profiler`, written
to `$OUT/predict_profile_CONFIG_SIZE.txt`. A diagnostic for a lent GPU (tests/gpu/device_checks.sh):

    NERZOO_DATA=conll2003 bash .gpu/run.sh python3 tests/gpu/predict_profile.py bilstm_crf --sizes 64,512
"""

import argparse
import cProfile
import io
import os
import pstats
import sys
import tempfile
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [os.path.join(ROOT, "benchmarks"), os.path.join(ROOT, "benchmarks", "speed")]
import gpu_training  # noqa: E402
import harness  # noqa: E402


def per_second(count: int, run, synchronize) -> float:
    synchronize()
    started = time.perf_counter()
    run()
    synchronize()
    return round(count / (time.perf_counter() - started), 1)


def measure(model, instances, size: int, device: torch.device, synchronize) -> dict:
    """Sentences per second of `forward_on_instances` and, alone, of its parts."""
    from nerzoo.data.fast_collator import FastCollator
    from nerzoo.models.nerzoo_model import tensors_to_device

    batches = harness.batches(instances, size)
    model.forward_on_instances(batches[0])  # warm-up
    count = len(instances)
    whole = max(per_second(count, lambda: [model.forward_on_instances(b) for b in batches], synchronize) for _ in "ab")
    inputs = [tensors_to_device(FastCollator()(batch), device) for batch in batches]
    collate = per_second(count, lambda: [tensors_to_device(FastCollator()(b), device) for b in batches], synchronize)
    with torch.no_grad():
        forward = max(per_second(count, lambda: [model(**batch) for batch in inputs], synchronize) for _ in "ab")
        outputs = [model(**batch) for batch in inputs]
        readable = per_second(
            count, lambda: [model.make_output_human_readable(dict(output)) for output in outputs], synchronize
        )
    return {"whole": whole, "collate": collate, "forward": forward, "readable": readable}


def profile(model, instances, size: int, device: torch.device, synchronize, path: str) -> None:
    """The slowest Python functions of one pass; on CUDA also the forward pass's operators and kernels, to `path`."""
    from nerzoo.data.fast_collator import FastCollator
    from nerzoo.models.nerzoo_model import tensors_to_device

    batches = harness.batches(instances, size)
    profiler = cProfile.Profile()
    profiler.enable()
    for batch in batches:
        model.forward_on_instances(batch)
    synchronize()
    profiler.disable()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(25)
    print(text.getvalue(), flush=True)
    if device.type != "cuda":
        return
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    inputs = [tensors_to_device(FastCollator()(batch), device) for batch in batches]
    with torch.no_grad(), torch_profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as traced:
        for batch in inputs:
            model(**batch)
        synchronize()
    with open(path, "w") as handle:
        handle.write(traced.key_averages().table(sort_by="self_cpu_time_total", row_limit=50))
        handle.write("\n\n" + traced.key_averages().table(sort_by="self_cuda_time_total", row_limit=30))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.strip().split("\n\n")[0])
    parser.add_argument("config", help="a name in training_config/")
    parser.add_argument("--sizes", default="64,512", help="batch sizes, comma-separated")
    args = parser.parse_args()
    os.environ.setdefault("NERZOO_DATA", "conll2003")
    os.chdir(ROOT)
    from allennlp.commands.train import TrainModel
    from allennlp.common.params import Params
    from allennlp.data import Instance

    import nerzoo  # noqa: F401

    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    synchronize = torch.cuda.synchronize if cuda else (lambda: None)
    out = os.environ.get("OUT") or os.path.join(ROOT, "runs", "predict_profile")
    os.makedirs(out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="predict_profile-")
    resolved = Params.from_file(gpu_training.CONFIGS[args.config], ext_vars=dict(os.environ)).as_dict(quiet=True)
    prefix = os.path.join(work, "train_prefix.txt")
    harness.write_prefix(resolved["train_data_path"], 300, prefix)
    overrides = {"train_data_path": prefix, "test_data_path": None, "evaluate_on_test": False}
    overrides["trainer.cuda_device"] = 0 if cuda else -1
    params, _ = gpu_training.row_params(args.config, overrides, dict(os.environ))
    loop = TrainModel.from_params(params=params, serialization_dir=os.path.join(work, "run"), local_rank=0)
    model = loop.model.eval()
    instances = []
    for instance in loop.trainer._validation_data_loader.iter_instances():
        words_only = Instance({name: field for name, field in instance.fields.items() if name != "tags"})
        words_only.index_fields(model.vocab)
        instances.append(words_only)

    name = torch.cuda.get_device_name(device) if cuda else harness.machine_description()
    print(f"{args.config} on {name}, torch {torch.__version__}: {len(instances)} sentences", flush=True)
    figures = {}
    for size in (int(text) for text in args.sizes.split(",")):
        figures[size] = measure(model, instances, size, device, synchronize)
        print(f"batches of {size}, sentences/s: {figures[size]}", flush=True)
        profile(
            model, instances, size, device, synchronize, os.path.join(out, f"predict_profile_{args.config}_{size}.txt")
        )
    harness.write_json(os.path.join(out, f"predict_profile_{args.config}.json"), figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
