#!/usr/bin/env python
"""
Training and prediction speed on one device, in one process: `bilstm_crf` and `deptree_ner` with the
recipe's batches and with the GPU recipe (`*_gpu`), the recipes with the `cuda_graphs` callback
(`*+cuda_graphs`), and allennlp-models' `crf_tagger` built like `bilstm_crf` (`make install-bench`),
each in float32 and with `trainer.use_amp` (CUDA only); ratios within the run.

    bash .gpu/run.sh python3 benchmarks/speed/gpu_training.py --data conll2003   # ../shared/gpu/README.md
    .venv/bin/python benchmarks/speed/gpu_training.py --data fixtures --device cpu --epochs 1 --max-sentences 40

How it measures: benchmarks/README.md, "Speed".
"""

import argparse
import contextlib
import gc
import importlib.util
import json
import os
import sys
import tempfile
import time
import traceback
from typing import Any, Dict, List, Optional

STARTED = time.monotonic()
sys.path[:0] = [os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]  # harness

import harness  # noqa: E402

GRAPHED = "+cuda_graphs"  # the recipe with the `cuda_graphs` callback added to its own
RECIPES = ("bilstm_crf", "bilstm_crf_gpu", "deptree_ner", "deptree_ner_gpu")
MODELS = ("crf_tagger", *RECIPES, "bilstm_crf" + GRAPHED, "deptree_ner" + GRAPHED)
PRECISIONS = ("float32", "use_amp")
REFERENCE = "crf_tagger float32"
ALLENNLP_SPELLING = {"fast_character_encoding": "character_encoding", "fast_lstm": "lstm"}


def allennlp_spelled(params: Any, key: str = "") -> Any:
    """`params` with nerzoo's components replaced by the allennlp components they equal."""
    if isinstance(params, list):
        return [allennlp_spelled(value) for value in params]
    if isinstance(params, dict):
        return {name: allennlp_spelled(value, name) for name, value in params.items()}
    return ALLENNLP_SPELLING.get(params, params) if key == "type" else params


def reference_config(resolved: Dict[str, Any]) -> Dict[str, Any]:
    """allennlp-models' `crf_tagger` (BIOUL, constrained) on allennlp's `conll2003` reader, the rest of `resolved`."""
    model, head = resolved["model"], resolved["model"].get("head", {})
    reference = {key: value for key, value in resolved.items() if key not in ("dataset_reader", "model")}
    reference["dataset_reader"] = {"type": "conll2003", "tag_label": "ner", "coding_scheme": "BIOUL"}
    reference["dataset_reader"]["token_indexers"] = allennlp_spelled(resolved["dataset_reader"]["token_indexers"])
    reference["model"] = {"type": "crf_tagger", "label_encoding": "BIOUL", "constrain_crf_decoding": True}
    reference["model"].update(calculate_span_f1=True, dropout=model.get("dropout", 0.5))
    reference["model"]["include_start_end_transitions"] = head.get("include_start_end_transitions", True)
    for key in ("text_field_embedder", "encoder"):
        reference["model"][key] = allennlp_spelled(model[key])
    return reference


def row_params(model: str, overrides: Dict[str, Any], data: str) -> Any:
    """The row's allennlp params on `data` with `overrides`."""
    from allennlp.common.params import Params

    name = model.replace(GRAPHED, "").replace("crf_tagger", "bilstm_crf")
    config = f"training_config/{name}.jsonnet" if data == "fixtures" else f"training_config/{data}/{name}.jsonnet"
    if model.endswith(GRAPHED):
        callbacks = Params.from_file(config).as_dict(quiet=True)["trainer"].get("callbacks", [])
        overrides = {"trainer.callbacks": [*callbacks, {"type": "cuda_graphs"}], **overrides}
    params = Params.from_file(config, json.dumps(overrides))
    if model == "crf_tagger":
        importlib.import_module("allennlp_models.tagging")
        return Params(reference_config(params.as_dict(quiet=True)))
    return params


def prediction_seconds(model, instances: List[Any], size: int, passes: int, sync, amp: bool) -> List[float]:
    """Seconds of each pass of `model.forward_on_instances` over `instances` in batches of `size`, after a warm-up batch."""
    import torch

    batches = harness.batches(instances, size)
    model.eval()
    with torch.autocast("cuda", dtype=torch.float16) if amp else contextlib.nullcontext():
        model.forward_on_instances(batches[0])
        passes_over = {"predict": lambda: [model.forward_on_instances(batch) for batch in batches]}
        return harness.timed_passes(passes_over, passes, synchronize=sync)[0]["predict"]


def run_row(model: str, precision: str, overrides: Dict[str, Any], args, work: str) -> Dict[str, Any]:
    """Builds, trains and times one row; its figures."""
    import torch
    from allennlp.commands.train import TrainModel
    from allennlp.common.util import prepare_environment
    from allennlp.data import Instance

    sync = torch.cuda.synchronize if args.cuda_index >= 0 else lambda: None
    overrides = {**overrides, "trainer.cuda_device": args.cuda_index, "trainer.use_amp": precision == "use_amp"}
    params = row_params(model, overrides, args.data)
    row = {"row": f"{model} {precision}", "model": model, "precision": precision}
    prepare_environment(params)
    serialization_dir = os.path.join(work, row["row"].replace(" ", "-"))
    loop = TrainModel.from_params(params=params, serialization_dir=serialization_dir, local_rank=0)
    trainer = loop.trainer
    row["train_sentences"] = sum(1 for _ in trainer.data_loader.iter_instances())
    for callback in trainer._callbacks:
        callback.on_start(trainer, is_primary=True)
    row["epoch_seconds"] = []
    for epoch in range(args.epochs):
        if epoch and time.monotonic() - STARTED + row["epoch_seconds"][-1] > args.budget:
            row["note"] = f"{epoch} of {args.epochs} epochs: the next would pass --budget {args.budget:.0f} s"
            break
        train_epoch = {"epoch": lambda epoch=epoch: trainer._train_epoch(epoch)}
        seconds, metrics = harness.timed_passes(train_epoch, 1, synchronize=sync)
        row["epoch_seconds"] += seconds["epoch"]
        row["train_loss"] = metrics["epoch"]["loss"]
    row["train_sentences_per_second"] = row["train_sentences"] * len(row["epoch_seconds"]) / sum(row["epoch_seconds"])

    # The validation sentences without their gold tags, as a caller has them.
    validation = trainer._validation_data_loader.iter_instances()
    instances = [Instance({key: value for key, value in each.fields.items() if key != "tags"}) for each in validation]
    for instance in instances:
        instance.index_fields(loop.model.vocab)
    speeds = {}
    for size in args.predict_batch_sizes:
        predict = prediction_seconds(loop.model, instances, size, args.predict_passes, sync, precision == "use_amp")
        speeds[size] = len(instances) / min(predict)
    row.update(predict_sentences=len(instances), predict_sentences_per_second_by_batch_size=speeds)
    row.update(predict_sentences_per_second=speeds[args.predict_batch_sizes[0]], status="ok")
    return row


def ratios(rows: Dict[str, Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Each row against crf_tagger float32; use_amp against float32; a GPU recipe, or cuda_graphs, against the recipe."""
    pairs = [(name, REFERENCE, "against crf_tagger float32") for name in rows if name != REFERENCE]
    for model in MODELS:
        eager = model.removesuffix("_gpu").removesuffix(GRAPHED)
        what = "cuda_graphs / eager" if model.endswith(GRAPHED) else "GPU recipe / recipe batches"
        pairs.append((f"{model} use_amp", f"{model} float32", "use_amp / float32"))
        pairs += [(f"{model} {p}", f"{eager} {p}", what) for p in PRECISIONS if eager != model]
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


def print_table(results: Dict[str, Any]) -> None:
    against = {ratio["row"]: ratio for ratio in results["ratios"] if ratio["against"] == REFERENCE}
    sizes = results["predict_batch_sizes"]
    print(f"\n{'row':32s} {'epochs (s)':>14s} {'train sent/s':>12s}", end="")
    print("".join(f" {f'predict/s, {size}':>17s}" for size in sizes) + "  against crf_tagger: train, predict")
    for row in results["rows"]:
        if row["status"] != "ok":
            print(f"{row['row']:32s} {row['status']}: {row['message']}")
            continue
        epochs = ", ".join(f"{seconds:.1f}" for seconds in row["epoch_seconds"])
        ratio = against.get(row["row"])
        print(
            f"{row['row']:32s} {epochs:>14s} {row['train_sentences_per_second']:12.1f}"
            + "".join(f" {row['predict_sentences_per_second_by_batch_size'][size]:17.1f}" for size in sizes)
            + (f"  {ratio['train']:.2f}x, {ratio['predict']:.2f}x" if ratio else "")
            + (f"  ({row['note']})" if "note" in row else "")
        )
    for ratio in (ratio for ratio in results["ratios"] if ratio["against"] != REFERENCE):
        print(f"{ratio['row']} / {ratio['against']}: training {ratio['train']:.2f}x, predict {ratio['predict']:.2f}x")


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].strip())
    parser.add_argument("--data", default="conll2003", help="a data set of training_config/data.libsonnet")
    parser.add_argument("--device", default=None, help="cuda, cuda:N or cpu (default: cuda where there is one)")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--max-sentences", type=int, default=5000, help="train on the train file's first N sentences")
    parser.add_argument("--rows", default=",".join(MODELS), help=f"comma-separated: {', '.join(MODELS)}")
    parser.add_argument("--precisions", default=",".join(PRECISIONS), help="float32, use_amp or both")
    parser.add_argument("--predict-passes", type=int, default=2, help="at least 1; the fastest counts")
    parser.add_argument("--predict-batch-sizes", default=[64, 512], type=lambda text: list(map(int, text.split(","))))
    parser.add_argument("--budget", type=float, default=450.0, help="seconds from the start; see the docstring")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--overrides", default="{}", help="allennlp overrides (JSON) for every row")
    parser.add_argument("--json", default=None, metavar="OUT", help="write the results to OUT")
    args = parser.parse_args(argv)
    models, precisions = [m for m in args.rows.split(",") if m], [p for p in args.precisions.split(",") if p]
    if unknown := sorted(set(models) - set(MODELS)) + sorted(set(precisions) - set(PRECISIONS)):
        parser.error(f"unknown rows or precisions: {', '.join(unknown)}")
    if args.predict_passes < 1 or args.epochs < 1 or min(args.predict_batch_sizes, default=0) < 1:
        parser.error("--epochs, --predict-passes and each of --predict-batch-sizes must be at least 1")

    import torch
    from allennlp.common import logging as common_logging

    import nerzoo  # noqa: F401

    harness.set_threads(args.threads)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    args.cuda_index = -1 if device == "cpu" else int(device.partition(":")[2] or 0)
    if args.cuda_index >= 0:
        torch.cuda.set_device(args.cuda_index)  # what synchronize waits for
    args.json = args.json and os.path.abspath(args.json)
    os.chdir(harness.REPO_ROOT)  # the configs' data paths are relative to it
    common_logging.FILE_FRIENDLY_LOGGING = True  # a progress line every 2 s
    results = measure(args, models, precisions)
    results.update(command=harness.command_line(__file__, argv), wall_seconds=time.monotonic() - STARTED)
    print_table(results)
    print(f"{results['command']}; {results['device']}; wall time {results['wall_seconds']:.0f} s")
    print(f"train: {results['train_data']} ({args.epochs} epochs, no validation); predict: {results['predict_data']}")
    if args.json:
        os.makedirs(os.path.dirname(args.json), exist_ok=True)
        harness.write_json(args.json, results)
    # The reference failing (crf_tagger under use_amp: a NaN loss) is reported, not an error.
    return 1 if any(row["status"] == "failed" and row["model"] != "crf_tagger" for row in results["rows"]) else 0


def measure(args, models: List[str], precisions: List[str]) -> Dict[str, Any]:
    """The rows of `models` x `precisions`, and the ratios between them."""
    import torch

    described = {"torch": torch.__version__, "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version()}
    cpu = "CPU: " + harness.machine_description()
    described["device"] = torch.cuda.get_device_name(args.cuda_index) if args.cuda_index >= 0 else cpu
    results: Dict[str, Any] = {**described, "data": args.data, "predict_batch_sizes": args.predict_batch_sizes}
    print(f"device: {results['device']}; torch {results['torch']}, CUDA {results['cuda']}, cuDNN {results['cudnn']}")
    rows: Dict[str, Dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="gpu_training-") as work:
        resolved = row_params("bilstm_crf", {}, args.data).as_dict(quiet=True)
        train_path, prefix = resolved["train_data_path"], os.path.join(work, "train_prefix.txt")
        overrides: Dict[str, Any] = {"trainer.num_epochs": args.epochs, "trainer.patience": None}
        overrides.update({"test_data_path": None, "evaluate_on_test": False, **json.loads(args.overrides)})
        overrides["train_data_path"] = prefix  # all of it where it has fewer sentences
        words = harness.write_prefix(train_path, args.max_sentences, prefix)
        results["train_data"] = f"the first {len(words)} sentences of {train_path}"
        results["predict_data"] = resolved["validation_data_path"]
        for model, precision in ((model, precision) for model in models for precision in precisions):
            name, skipped = f"{model} {precision}", None
            if precision == "use_amp" and args.cuda_index < 0:
                skipped = "allennlp's use_amp needs a CUDA device"
            elif model == "crf_tagger" and importlib.util.find_spec("allennlp_models") is None:
                skipped = "allennlp-models is not installed: run `make install-bench`"
            elif time.monotonic() - STARTED > args.budget:
                skipped = f"--budget {args.budget:.0f} s reached"
            rows[name] = {"row": name, "model": model, "precision": precision}
            print(f"=== {name}" + (f": skipped, {skipped}" if skipped else ""), flush=True)
            if skipped:
                rows[name].update(status="skipped", message=skipped)
                continue
            try:
                rows[name] = run_row(model, precision, overrides, args, work)
            except Exception as error:  # one failing row leaves the others measured
                traceback.print_exc()
                message = f"{type(error).__name__}: {(str(error).splitlines() or [''])[0]}"
                rows[name].update(status="failed", message=message)
            gc.collect()
            if args.cuda_index >= 0:
                torch.cuda.empty_cache()
    results.update(rows=list(rows.values()), ratios=ratios(rows))
    return results


if __name__ == "__main__":
    sys.exit(main())
