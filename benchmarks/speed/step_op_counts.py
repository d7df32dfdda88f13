#!/usr/bin/env python
"""
Step budgets of shipped configs, a row each against `BUDGETS`, counted on the CPU: aten operator
calls of a training step (forward, penalty, backward, clipping, the optimiser step as on CUDA, the
metrics read; the mean over `--steps` batches of 12-16 words) and of a prediction batch with
confidences (about a kernel launch each on a GPU), and where a training step's forward and backward
first read a value back to the host (run on the `meta` device, where any read raises; on a GPU, a
sync).  The CRF runs the config's schedule; `--overrides` sets another.

    .venv/bin/python benchmarks/speed/step_op_counts.py bilstm_crf deptree_ner --data conll2003 --steps 20
"""

import argparse
import itertools
import traceback
from typing import Any, Dict, Optional

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# (config, figure) -> at most this many: the counts on CoNLL-2003 at da597f6 with the accelerators'
# scans; host reads of a training step: none.
BUDGETS = {("bilstm_crf", "training step"): 260, ("bilstm_crf", "prediction batch"): 220}
BUDGETS.update({("deptree_ner", "training step"): 1050, ("deptree_ner", "prediction batch"): 600})
SYNC_FREE = ("bilstm_crf", "bilstm_crf_gpu", "bilstm_crf_pos", "char_gated_tagger_words")
BUDGETS.update({(name, "host reads"): 0 for name in SYNC_FREE})


class OperatorCalls(TorchDispatchMode):
    """Operator calls made inside it; `kernels`: those that are neither views nor reads of a scalar."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = self.kernels = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.calls += 1
        self.kernels += not func.is_view and func.overloadpacket is not torch.ops.aten._local_scalar_dense
        return func(*args, **(kwargs or {}))


def steps_as_on_a_gpu(optimizer) -> None:
    """The optimiser's groups as the trainer steps them on CUDA: `foreach`."""
    optimizers = getattr(optimizer, "optimizers", {"": optimizer}).values()  # a MultiOptimizer's own
    for group in (group for each in optimizers for group in each.param_groups):
        if group.get("foreach") is None and not group.get("fused") and not group.get("differentiable"):
            group["foreach"] = True


def host_read(model, tensors: Dict[str, Any]) -> Optional[str]:
    """Where the training forward and backward first read a value back to the host (None: nowhere), on `meta`."""
    from allennlp.nn import util

    model.to("meta").train()
    try:
        model(**util.move_to_device(tensors, torch.device("meta")))["loss"].backward()
    except NotImplementedError as error:
        if "meta" not in str(error):
            raise
        frames = [frame for frame in traceback.extract_tb(error.__traceback__) if "/nerzoo/" in frame.filename]
        return f"nerzoo/{frames[-1].filename.split('/nerzoo/', 1)[1]}:{frames[-1].lineno}" if frames else "?"
    return None


def count(config_name: str, steps: int, overrides: str = "") -> Dict[str, Any]:
    from allennlp.common.params import Params
    from allennlp.common.util import import_module_and_submodules
    from allennlp.data import Batch, DatasetReader, Vocabulary
    from allennlp.models import Model
    from allennlp.training.optimizers import Optimizer

    import_module_and_submodules("nerzoo")
    config = Params.from_file(f"training_config/{config_name}.jsonnet", overrides).as_dict(quiet=True)
    reader = DatasetReader.from_params(Params(config["dataset_reader"]))
    instances = list(itertools.islice(reader.read(config["validation_data_path"]), 601))
    vocab = Vocabulary.from_instances(instances)
    torch.manual_seed(0)
    model = Model.from_params(vocab=vocab, params=Params(config["model"]))
    size = config["data_loader"].get("batch_sampler", config["data_loader"]).get("batch_size", 32)
    typical = [instance for instance in instances if 12 <= len(instance["tokens"]) <= 16]
    batch = Batch((typical if len(typical) >= size else instances)[:size])
    batch.index_instances(vocab)
    tensors = batch.as_tensor_dict()
    parameters = [[name, parameter] for name, parameter in model.named_parameters() if parameter.requires_grad]
    optimizer = Optimizer.from_params(model_parameters=parameters, params=Params(config["trainer"]["optimizer"]))
    steps_as_on_a_gpu(optimizer)
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
    for _ in range(2):  # warm-up: lazily made state (optimiser moments, cached masks)
        training_step()
    training, prediction = OperatorCalls(), OperatorCalls()
    with training:
        for _ in range(steps):
            training_step()
    model.get_metrics(reset=True)
    model.eval()
    inputs = {key: value for key, value in tensors.items() if key != "tags"}
    with torch.no_grad():
        model.make_output_human_readable(model(**inputs))
        with prediction:
            model.make_output_human_readable(model(**inputs))
    return {
        "config": config_name,
        "batch": len(batch.instances),
        "training step": round(training.calls / steps, 1),
        "training step kernels": round(training.kernels / steps, 1),
        "prediction batch": prediction.calls,
        "prediction batch kernels": prediction.kernels,
        "host reads": host_read(model, tensors),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("configs", nargs="+", help="names of training_config/*.jsonnet")
    parser.add_argument("--steps", type=int, default=50, help="training steps counted (the mean is printed)")
    parser.add_argument("--overrides", default="", help="allennlp overrides (JSON) for every config")
    parser.add_argument("--data", default="fixtures", help="a data set: training_config/DATA/CONFIG.jsonnet")
    args = parser.parse_args()
    torch.set_num_threads(1)
    over = []
    print(f"{'config':<24} {'batch':>5} {'figure':<17} {'measured':>24} {'budget':>7}")
    for name in args.configs:
        row = count(f"{args.data}/{name}".removeprefix("fixtures/"), args.steps, args.overrides)
        for figure in ("training step", "prediction batch", "host reads"):
            budget, value = BUDGETS.get((name, figure)), row[figure]
            if figure == "host reads":
                measured, within = value or 0, value is None
            else:
                measured, within = f"{value} ({row[figure + ' kernels']} kernels)", budget is None or value <= budget
            over += [] if within or budget is None else [f"{name} {figure}"]
            shown, mark = ("", "") if budget is None else (budget, " ok" if within else " OVER")
            print(f"{name:<24} {row['batch']:>5} {figure:<17} {measured:>24} {shown:>7}{mark}")
    print(f"over budget: {', '.join(over)}" if over else "all within budget")


if __name__ == "__main__":
    main()
