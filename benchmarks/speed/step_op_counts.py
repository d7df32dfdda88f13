#!/usr/bin/env python
"""
Aten operator calls per training step and per prediction batch of shipped configs, counted on the CPU
as allennlp's trainer and `allennlp predict` run them: on a GPU a small batch costs about one kernel
launch per call, so these counts predict GPU speed at the recipe's batch size.  The CRF runs the
parallel scans an accelerator runs (`NERZOO_CRF_SCANS=always`; `--cpu-path`: the CPU's step-by-step
recursions, what `../shared/tools/op_count.py` counts).

A training step: forward plus the regularisation penalty, backward, `grad_norm` clipping, the config's
optimiser step as the trainer takes it on CUDA (`steps_as_on_a_gpu`: fused where the config's
`fused_optimizer` callback makes it so, as for the shipped configs' Adam and SGD, else `foreach`),
the metrics read; the mean over `--steps` batches.  A prediction batch: evaluation mode without gold
tags plus `make_output_human_readable`, after one such batch.  Real sentences of 12-16 words at the
config's batch size.  In brackets, the calls that are neither views (no kernel) nor reads of a scalar
to the host.  `--whole-validation N` also counts prediction over the whole validation file in batches
of N (64, 512: as `gpu_training.py` times it), in file order.  `--by-source N` also lists the N source
lines that make the most of a training step's calls: a forward call's line in nerzoo, allennlp or
PyTorch's optimisers and clipping; a backward call's, the line whose operation made the autograd node
that runs it ("backward of ..."; a node made inside PyTorch or by an autograd Function, by its name).

    NERZOO_DATA=conll2003 .venv/bin/python benchmarks/speed/step_op_counts.py bilstm_crf bilstm_crf_gpu deptree_ner
    .venv/bin/python benchmarks/speed/step_op_counts.py bilstm_crf --steps 3   # fixtures: a smoke test
"""

import argparse
import collections
import contextlib
import itertools
import os
import sys
import traceback
from typing import Any, Dict, Optional

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import harness  # noqa: E402

SOURCE_PATHS = ("/nerzoo/", "/allennlp/", "/torch/optim/", "/torch/nn/utils/")


def source_line() -> str:
    """The innermost frame of the caller's stack in nerzoo, allennlp or PyTorch's optimisers and clipping."""
    for frame in reversed(traceback.extract_stack()[:-2]):
        for root in SOURCE_PATHS:
            if root in frame.filename:
                return f"{root.strip('/')}/{frame.filename.split(root, 1)[1]}:{frame.lineno}"
    return "?"


class NodeSources(TorchFunctionMode):
    """Records, for each autograd node a torch function makes, the source line that called it."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: Dict[int, str] = {}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        for tensor in result if isinstance(result, (tuple, list)) else [result]:
            node = getattr(tensor, "grad_fn", None) if isinstance(tensor, torch.Tensor) else None
            if node is not None:
                self.lines.setdefault(node._sequence_nr(), source_line())
        return result


class OperatorCalls(TorchDispatchMode):
    """Operator calls, by operator, and with `nodes` (active around it) by source line too."""

    def __init__(self, nodes: Optional[NodeSources] = None) -> None:
        super().__init__()
        self.calls = self.kernels = 0  # kernels: calls that are neither views nor host reads
        self.by_operator: collections.Counter = collections.Counter()
        self.nodes, self.by_source = nodes, collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.calls += 1
        self.kernels += not func.is_view and func.overloadpacket is not torch.ops.aten._local_scalar_dense
        self.by_operator[str(func.overloadpacket)] += 1
        if self.nodes is not None:
            node = torch._C._current_autograd_node()
            made_by = None if node is None else self.nodes.lines.get(node._sequence_nr(), type(node).__name__)
            self.by_source[source_line() if node is None else f"backward of {made_by}"] += 1
        return func(*args, **(kwargs or {}))


def steps_as_on_a_gpu(optimizer, fused: bool) -> None:
    """
    The optimizer's step as the trainer takes it on CUDA: with `fused` (the config's callbacks have
    `fused_optimizer`, as every shipped config's do) fused where `use_fused_steps` switches a group
    (Adam, AdamW, SGD; on the CPU too), else PyTorch's default on CUDA, `foreach`.
    """
    from nerzoo.training.callbacks.fused_optimizer import use_fused_steps

    if fused:
        use_fused_steps(optimizer)
    optimizers = getattr(optimizer, "optimizers", {"": optimizer}).values()  # a MultiOptimizer's own
    for group in (group for each in optimizers for group in each.param_groups):
        if group.get("foreach") is None and not group.get("fused") and not group.get("differentiable"):
            group["foreach"] = True


def count(
    config_name: str, steps: int, batch_size: int = 0, whole_validation: int = 0, by_source: int = 0
) -> Dict[str, Any]:
    from allennlp.common.params import Params
    from allennlp.common.util import import_module_and_submodules
    from allennlp.data import Batch, DatasetReader, Vocabulary
    from allennlp.models import Model
    from allennlp.training.optimizers import Optimizer

    import_module_and_submodules("nerzoo")
    config = Params.from_file(f"training_config/{config_name}.jsonnet", ext_vars=dict(os.environ)).as_dict(quiet=True)
    reader = DatasetReader.from_params(Params(config["dataset_reader"]))
    instances = list(itertools.islice(reader.read(config["validation_data_path"]), None if whole_validation else 601))
    vocab = Vocabulary.from_instances(instances)
    torch.manual_seed(0)
    model = Model.from_params(vocab=vocab, params=Params(config["model"]))
    loader = config["data_loader"].get("batch_sampler", config["data_loader"])
    size = batch_size or loader.get("batch_size", 32)
    typical = [instance for instance in instances if 12 <= len(instance["tokens"]) <= 16]
    if len(typical) < size:
        typical = instances
    batch = Batch(typical[:size])
    batch.index_instances(vocab)
    tensors = batch.as_tensor_dict()
    parameters = [[name, parameter] for name, parameter in model.named_parameters() if parameter.requires_grad]
    optimizer = Optimizer.from_params(model_parameters=parameters, params=Params(config["trainer"]["optimizer"]))
    callbacks = [callback["type"] for callback in config["trainer"].get("callbacks", [])]
    steps_as_on_a_gpu(optimizer, fused="fused_optimizer" in callbacks)
    grad_norm = config["trainer"].get("grad_norm")

    def training_step() -> None:
        optimizer.zero_grad()
        loss = model(**tensors)["loss"]
        penalty = model.get_regularization_penalty()  # as the trainer adds it
        (loss if penalty is None else loss + penalty).backward()
        if grad_norm:
            torch.nn.utils.clip_grad_norm_([parameter for _, parameter in parameters], grad_norm)
        optimizer.step()
        model.get_metrics()

    model.train()
    for _ in range(2):  # warm-up (lazily made state: optimiser moments, cached masks)
        training_step()
    model.get_metrics(reset=True)
    nodes = NodeSources() if by_source else None
    training = OperatorCalls(nodes)
    with nodes or contextlib.nullcontext(), training:
        for _ in range(steps):
            training_step()
    model.get_metrics(reset=True)
    model.eval()
    inputs = {key: value for key, value in tensors.items() if key != "tags"}
    prediction = OperatorCalls()
    with torch.no_grad():
        model.make_output_human_readable(model(**inputs))  # warm-up, as for training
        with prediction:
            model.make_output_human_readable(model(**inputs))
    validation: Dict[str, int] = {}
    if whole_validation:  # in file order, as gpu_training.py predicts
        whole = OperatorCalls()
        step = whole_validation
        batches = [Batch(instances[start : start + step]) for start in range(0, len(instances), step)]
        with torch.no_grad():
            for batch in batches:
                batch.index_instances(vocab)
                inputs = {key: value for key, value in batch.as_tensor_dict().items() if key != "tags"}
                with whole:
                    model.make_output_human_readable(model(**inputs))
        validation["validation_batch_size"] = step
        validation["validation_batches"] = len(batches)
        validation["validation_batch"] = round(whole.calls / len(batches))
        validation["validation_batch_kernels"] = round(whole.kernels / len(batches))
    return {
        **validation,
        "config": config_name,
        "batch": len(typical[:size]),
        "training_step": round(training.calls / steps, 1),
        "training_step_kernels": round(training.kernels / steps, 1),
        "prediction_batch": prediction.calls,
        "prediction_batch_kernels": prediction.kernels,
        "top_training_operators": [
            (name, round(calls / steps, 1)) for name, calls in training.by_operator.most_common(6)
        ],
        "training_step_by_source": [
            (source, round(calls / steps, 1)) for source, calls in training.by_source.most_common(by_source)
        ],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("configs", nargs="+", help="names of training_config/*.jsonnet")
    parser.add_argument("--steps", type=int, default=50, help="training steps counted (the mean is printed)")
    parser.add_argument("--batch-size", type=int, default=0, help="default: the config's")
    parser.add_argument("--json", help="also write the rows here")
    parser.add_argument("--cpu-path", action="store_true", help="count the CPU's CRF recursions, not the scans")
    parser.add_argument(
        "--whole-validation", type=int, default=0, metavar="N", help="also: prediction over the validation file"
    )
    parser.add_argument(
        "--by-source", type=int, default=0, metavar="N", help="also: the N source lines of the most training calls"
    )
    args = parser.parse_args()
    os.environ["NERZOO_CRF_SCANS"] = "accelerators" if args.cpu_path else "always"
    torch.set_num_threads(1)
    rows = [count(name, args.steps, args.batch_size, args.whole_validation, args.by_source) for name in args.configs]
    print(f"{'config':<24} {'batch':>5} {'training step':>14} {'prediction batch':>17}   (without views, host reads)")
    for row in rows:
        print(
            f"{row['config']:<24} {row['batch']:>5} {row['training_step']:>14} {row['prediction_batch']:>17}"
            f"   ({row['training_step_kernels']}, {row['prediction_batch_kernels']})"
        )
        if "validation_batch" in row:
            print(
                f"  the validation file, {row['validation_batches']} prediction batches of "
                f"{row['validation_batch_size']}: "
                f"{row['validation_batch']} calls a batch ({row['validation_batch_kernels']})"
            )
        for source, calls in row["training_step_by_source"]:
            print(f"  {calls:>8} {source}")
    if args.json:
        harness.write_json(args.json, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
