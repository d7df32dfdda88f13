#!/usr/bin/env python
"""
Training and prediction speed on one GPU, in one process: `bilstm_crf` with the recipe's batches
and with the GPU recipe (`bilstm_crf_gpu`), allennlp-models' `crf_tagger` built like it (needs `make
install-bench`, skipped without it) and `deptree_ner` with the recipe's batches and the GPU recipe
(`deptree_ner_gpu`), and the recipes of both with the `cuda_graphs` callback (`bilstm_crf+cuda_graphs`,
`deptree_ner+cuda_graphs`; `bilstm_crf_gpu` has it), each in float32 and with `trainer.use_amp`
(skipped on the CPU), every ratio against a row measured in the same run.

    .venv/bin/python benchmarks/speed/gpu_training.py --data conll2003 --json runs/gpu_training.json
    bash .gpu/run.sh python3 benchmarks/speed/gpu_training.py --data conll2003   # ../shared/gpu/README.md
    .venv/bin/python benchmarks/speed/gpu_training.py --data fixtures --device cpu --epochs 1 \
        --max-sentences 40 --rows bilstm_crf,bilstm_crf_gpu   # smoke test

Each row is built with allennlp's `TrainModel.from_params`.  Training: `--epochs` epochs of the
trainer's `_train_epoch` on the first `--max-sentences` sentences of the train file, timed from the
first batch to the synchronised end of the epoch (no startup, no validation); train sentences/s =
sentences x epochs / their seconds.  Prediction with confidences: the validation words in file order,
in batches of each of `--predict-batch-sizes` (default 64 and 512, as `allennlp predict --batch-size`
gives them), through `Model.forward_on_instances`, as `allennlp predict` runs it (under
`torch.autocast` in the `use_amp` rows), the fastest of `--predict-passes` passes after a warm-up
batch; the ratios compare the first size.  `crf_tagger` gives Viterbi tags only.  `--budget`
(seconds from the start, 450 by default, to end within 8 minutes) skips the rows that would start
later and ends a row's training after an epoch when the next would pass it, and says so.
"""

import argparse
import contextlib
import gc
import importlib
import importlib.util
import json
import os
import sys
import tempfile
import time
import traceback
from typing import Any, Callable, Dict, List, Optional, Tuple

STARTED = time.monotonic()
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]  # crf_tagger_reference, harness

import harness  # noqa: E402

GRAPHED = "+cuda_graphs"
MODELS = (
    "crf_tagger",
    "bilstm_crf",
    "bilstm_crf_gpu",
    "deptree_ner",
    "deptree_ner_gpu",
    "bilstm_crf" + GRAPHED,
    "deptree_ner" + GRAPHED,
)
PRECISIONS = ("float32", "use_amp")
CONFIGS = {
    "bilstm_crf": "training_config/bilstm_crf.jsonnet",
    "bilstm_crf_gpu": "training_config/bilstm_crf_gpu.jsonnet",
    "deptree_ner": "training_config/deptree_ner.jsonnet",
    "deptree_ner_gpu": "training_config/deptree_ner_gpu.jsonnet",
}
CONFIGS.update({model + GRAPHED: CONFIGS[model] for model in ("bilstm_crf", "deptree_ner")})
# A row's own overrides: the recipe with the `cuda_graphs` callback (the GPU recipe of bilstm_crf has it).
ROW_OVERRIDES = {
    model + GRAPHED: {
        "trainer.callbacks": [{"type": "freeze_loaded_data"}, {"type": "fused_optimizer"}, {"type": "cuda_graphs"}]
    }
    for model in ("bilstm_crf", "deptree_ner")
}
GPU_RECIPES = {"bilstm_crf_gpu": "bilstm_crf", "deptree_ner_gpu": "deptree_ner"}
REFERENCE = "crf_tagger float32"


def row_name(model: str, precision: str) -> str:
    return f"{model} {precision}"


def row_params(model: str, overrides: Dict[str, Any], ext_vars: Dict[str, str]) -> Tuple[Any, str]:
    """The row's allennlp params with `overrides`, and what they are."""
    from allennlp.common.params import Params

    if model == "crf_tagger":
        import crf_tagger_reference

        importlib.import_module("allennlp_models.tagging")
        resolved = Params.from_file(CONFIGS["bilstm_crf"], json.dumps(overrides), ext_vars=ext_vars)
        return Params(crf_tagger_reference.reference_config(resolved.as_dict(quiet=True))), (
            "allennlp-models crf_tagger built like training_config/bilstm_crf.jsonnet (crf_tagger_reference.py)"
        )
    config = CONFIGS[model]
    return Params.from_file(config, json.dumps(overrides), ext_vars=ext_vars), config


def synchronize(cuda: bool) -> Callable[[], None]:
    import torch

    return torch.cuda.synchronize if cuda else lambda: None


def prediction_seconds(model, instances: List[Any], size: int, passes: int, cuda: bool, amp: bool) -> List[float]:
    """Seconds of each pass of `model.forward_on_instances` over `instances` in batches of `size`, after a warm-up batch."""
    import torch

    batches = harness.batches(instances, size)
    model.eval()
    with torch.autocast("cuda", dtype=torch.float16) if amp else contextlib.nullcontext():
        model.forward_on_instances(batches[0])
        passes_over = {"predict": lambda: [model.forward_on_instances(batch) for batch in batches]}
        return harness.timed_passes(passes_over, passes, synchronize=synchronize(cuda))[0]["predict"]


def run_row(model: str, precision: str, overrides: Dict[str, Any], args, ext_vars, work: str) -> Dict[str, Any]:
    """Builds, trains and times one row; its figures."""
    from allennlp.commands.train import TrainModel
    from allennlp.common.util import prepare_environment
    from allennlp.data import Instance

    cuda, sync = args.cuda_index >= 0, synchronize(args.cuda_index >= 0)
    overrides = {**overrides, **ROW_OVERRIDES.get(model, {})}
    overrides.update({"trainer.cuda_device": args.cuda_index, "trainer.use_amp": precision == "use_amp"})
    params, described = row_params(model, overrides, ext_vars)
    row = {"row": row_name(model, precision), "model": model, "precision": precision, "config": described}
    prepare_environment(params)
    started = time.perf_counter()
    serialization_dir = os.path.join(work, row["row"].replace(" ", "-"))
    loop = TrainModel.from_params(params=params, serialization_dir=serialization_dir, local_rank=0)
    row["startup_seconds"] = time.perf_counter() - started
    trainer = loop.trainer
    row["train_sentences"] = sum(1 for _ in trainer.data_loader.iter_instances())
    for callback in trainer._callbacks:
        callback.on_start(trainer, is_primary=True)
    row["epoch_seconds"] = []
    for epoch in range(args.epochs):
        if epoch and time.monotonic() - STARTED + row["epoch_seconds"][-1] > args.budget:
            row["note"] = f"{epoch} of {args.epochs} epochs: the next would pass --budget {args.budget:.0f} s"
            break
        seconds, metrics = harness.timed_passes(
            {"epoch": lambda epoch=epoch: trainer._train_epoch(epoch)}, 1, False, sync
        )
        row["epoch_seconds"] += seconds["epoch"]
        row["train_loss"] = metrics["epoch"]["loss"]
    row["train_sentences_per_second"] = row["train_sentences"] * len(row["epoch_seconds"]) / sum(row["epoch_seconds"])

    # The validation sentences without their gold tags, as a caller has them.
    vocab = loop.model.vocab
    instances = []
    for instance in trainer._validation_data_loader.iter_instances():
        words_only = Instance({name: field for name, field in instance.fields.items() if name != "tags"})
        words_only.index_fields(vocab)
        instances.append(words_only)
    row["predict_sentences"] = len(instances)
    row["predict_seconds"], row["predict_sentences_per_second_by_batch_size"] = {}, {}
    for size in args.predict_batch_sizes:
        predict = prediction_seconds(loop.model, instances, size, args.predict_passes, cuda, precision == "use_amp")
        row["predict_seconds"][size] = predict
        row["predict_sentences_per_second_by_batch_size"][size] = len(instances) / min(predict)
    row["predict_sentences_per_second"] = row["predict_sentences_per_second_by_batch_size"][args.predict_batch_sizes[0]]
    row["status"] = "ok"
    return row


def ratios(rows: Dict[str, Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Each measured row against crf_tagger float32, use_amp against float32, the GPU recipe against the recipe's batches."""
    pairs = [(name, REFERENCE, "against crf_tagger float32") for name in rows if name != REFERENCE]
    pairs += [
        (row_name(model, "use_amp"), row_name(model, "float32"), "use_amp / float32")
        for model in MODELS
        if row_name(model, "use_amp") in rows
    ]
    pairs += [
        (row_name(recipe, precision), row_name(model, precision), "GPU recipe / recipe batches")
        for recipe, model in GPU_RECIPES.items()
        for precision in PRECISIONS
    ]
    pairs += [
        (row_name(model, precision), row_name(model[: -len(GRAPHED)], precision), "cuda_graphs / eager")
        for model in ROW_OVERRIDES
        for precision in PRECISIONS
    ]
    speed = {name: row for name, row in rows.items() if row.get("status") == "ok"}
    return [
        {"row": name, "against": against, "what": what}
        | {
            key: speed[name][f"{key}_sentences_per_second"] / speed[against][f"{key}_sentences_per_second"]
            for key in ("train", "predict")
        }
        for name, against, what in pairs
        if name in speed and against in speed
    ]


def device_description(cuda_index: int) -> Dict[str, Any]:
    import torch

    described = {"torch": torch.__version__, "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version()}
    cpu = "CPU: " + harness.machine_description()
    return {**described, "device": torch.cuda.get_device_name(cuda_index) if cuda_index >= 0 else cpu}


def print_table(results: Dict[str, Any]) -> None:
    against = {ratio["row"]: ratio for ratio in results["ratios"] if ratio["against"] == REFERENCE}
    sizes = results["predict_batch_sizes"]
    predict_columns = "".join(f" {f'predict/s, {size}':>17s}" for size in sizes)
    print(f"\n{'row':26s} {'train sent':>10s} {'epochs (s)':>14s} {'train sent/s':>12s}{predict_columns}", end="")
    print(f" {'train vs crf_tagger':>19s} {'predict vs crf_tagger':>21s}")
    for row in results["rows"]:
        if row["status"] != "ok":
            print(f"{row['row']:26s} {row['status']}: {row['message']}")
            continue
        epochs = ", ".join(f"{seconds:.1f}" for seconds in row["epoch_seconds"])
        ratio = against.get(row["row"])
        cells = [f"{ratio[key]:.2f}x" if ratio else "n/a" for key in ("train", "predict")]
        print(
            f"{row['row']:26s} {row['train_sentences']:10d} {epochs:>14s} {row['train_sentences_per_second']:12.1f}"
            + "".join(f" {row['predict_sentences_per_second_by_batch_size'][size]:17.1f}" for size in sizes)
            + f" {cells[0]:>19s} {cells[1]:>21s}"
            + (f"  ({row['note']})" if "note" in row else "")
        )
    for ratio in results["ratios"]:
        if ratio["against"] != REFERENCE:
            print(
                f"{ratio['row']} / {ratio['against']} ({ratio['what']}): "
                f"training {ratio['train']:.2f}x, prediction {ratio['predict']:.2f}x"
            )


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].strip())
    parser.add_argument("--data", default="conll2003", help="a data set of training_config/data.libsonnet")
    parser.add_argument("--device", default=None, help="cuda, cuda:N or cpu (default: cuda where there is one)")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--max-sentences", type=int, default=5000, help="train on the train file's first N sentences")
    parser.add_argument("--rows", default=",".join(MODELS), help=f"models, comma-separated: {', '.join(MODELS)}")
    parser.add_argument("--precisions", default=",".join(PRECISIONS), help="float32, use_amp or both")
    parser.add_argument("--predict-passes", type=int, default=2, help="at least 1; the fastest counts")
    parser.add_argument(
        "--predict-batch-sizes", default=[64, 512], type=lambda text: [int(size) for size in text.split(",")]
    )
    parser.add_argument("--budget", type=float, default=450.0, help="seconds from the start; see the docstring")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--overrides", default="{}", help="allennlp overrides (JSON) for every row")
    parser.add_argument("--json", default=None, metavar="OUT", help="write the results to OUT")
    args = parser.parse_args(argv)
    models = [model for model in args.rows.split(",") if model]
    precisions = [precision for precision in args.precisions.split(",") if precision]
    unknown = sorted(set(models) - set(MODELS)) + sorted(set(precisions) - set(PRECISIONS))
    if unknown:
        parser.error(f"unknown rows or precisions: {', '.join(unknown)}")
    if args.predict_passes < 1 or args.epochs < 1 or min(args.predict_batch_sizes, default=0) < 1:
        parser.error("--epochs, --predict-passes and each of --predict-batch-sizes must be at least 1")

    import torch
    from allennlp.common import logging as common_logging

    import nerzoo  # noqa: F401

    harness.set_threads(args.threads or None)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    args.cuda_index = -1 if device == "cpu" else int(device.partition(":")[2] or 0)
    if args.cuda_index >= 0:
        torch.cuda.set_device(args.cuda_index)  # what synchronize() waits for
    args.json = args.json and os.path.abspath(args.json)
    cwd, file_friendly = os.getcwd(), common_logging.FILE_FRIENDLY_LOGGING
    try:
        os.chdir(harness.REPO_ROOT)  # the configs' data paths are relative to it
        common_logging.FILE_FRIENDLY_LOGGING = True  # a progress line every 2 s, as --file-friendly-logging
        results = measure(args, models, precisions)
    finally:
        os.chdir(cwd)
        common_logging.FILE_FRIENDLY_LOGGING = file_friendly
    results["command"] = harness.command_line(__file__, argv)
    results["wall_seconds"] = time.monotonic() - STARTED
    print_table(results)
    print(f"{results['command']}; {results['device']}, torch {results['torch']}, CUDA {results['cuda']}")
    print(
        f"train: {results['train_data']} ({args.epochs} epoch{'s' if args.epochs > 1 else ''}, no validation); predict: {results['predict_data']}"
    )
    print(f"wall time {results['wall_seconds']:.0f} s")
    if args.json:
        os.makedirs(os.path.dirname(args.json), exist_ok=True)
        harness.write_json(args.json, results)
    failed = [row for row in results["rows"] if row["status"] == "failed"]
    if failed:
        print(f"failed: {', '.join(row['row'] for row in failed)}")
    # The reference failing (allennlp-models' crf_tagger under use_amp: a NaN loss) is reported, not an error.
    return 1 if any(row["model"] != "crf_tagger" for row in failed) else 0


def measure(args, models: List[str], precisions: List[str]) -> Dict[str, Any]:
    """The rows of `models` x `precisions`, and the ratios between them."""
    import torch
    from allennlp.common.params import Params

    ext_vars = {**os.environ, "NERZOO_DATA": args.data}
    results: Dict[str, Any] = {**device_description(args.cuda_index), "data": args.data, "epochs": args.epochs}
    results["predict_batch_sizes"] = args.predict_batch_sizes
    print(f"device: {results['device']}; torch {results['torch']}, CUDA {results['cuda']}, cuDNN {results['cudnn']}")
    rows: Dict[str, Dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="gpu_training-") as work:
        resolved = Params.from_file(CONFIGS["bilstm_crf"], ext_vars=ext_vars).as_dict(quiet=True)
        train_path = resolved["train_data_path"]
        overrides: Dict[str, Any] = {
            "trainer.num_epochs": args.epochs,
            "trainer.patience": None,
            "test_data_path": None,
            "evaluate_on_test": False,
            **json.loads(args.overrides),
        }
        prefix = os.path.join(work, "train_prefix.txt")
        words = harness.write_prefix(train_path, args.max_sentences, prefix) if args.max_sentences else []
        if args.max_sentences and len(words) == args.max_sentences:
            overrides["train_data_path"] = prefix
            results["train_data"] = f"the first {args.max_sentences} sentences of {train_path}"
        else:
            results["train_data"] = train_path
        results["predict_data"] = resolved["validation_data_path"]
        print(f"training on {results['train_data']}; predicting {results['predict_data']}")

        for model in models:
            for precision in precisions:
                name = row_name(model, precision)
                skipped = None
                if precision == "use_amp" and args.cuda_index < 0:
                    skipped = "allennlp's use_amp needs a CUDA device"
                elif model == "crf_tagger" and importlib.util.find_spec("allennlp_models") is None:
                    skipped = "allennlp-models is not installed: run `make install-bench`"
                elif time.monotonic() - STARTED > args.budget:
                    skipped = f"--budget {args.budget:.0f} s reached"
                described = {"row": name, "model": model, "precision": precision}
                if skipped:
                    rows[name] = {**described, "status": "skipped", "message": skipped}
                    print(f"=== {name}: skipped, {skipped}", flush=True)
                    continue
                print(f"=== {name}", flush=True)
                try:
                    rows[name] = row = run_row(model, precision, overrides, args, ext_vars, work)
                    print(
                        f"{name}: {row['train_sentences']} sentences, epochs "
                        f"{[round(seconds, 2) for seconds in row['epoch_seconds']]} s (startup "
                        f"{row['startup_seconds']:.1f} s), {row['train_sentences_per_second']:.1f} train sentences/s, "
                        f"{row['predict_sentences_per_second']:.1f} predict sentences/s",
                        flush=True,
                    )
                except Exception as error:  # one failing row leaves the others measured
                    traceback.print_exc()
                    message = f"{type(error).__name__}: {(str(error).splitlines() or [''])[0]}"
                    rows[name] = {**described, "status": "failed", "message": message}
                gc.collect()
                if args.cuda_index >= 0:
                    torch.cuda.empty_cache()
    results["rows"] = list(rows.values())
    results["ratios"] = ratios(rows)
    return results


if __name__ == "__main__":
    sys.exit(main())
