#!/usr/bin/env python
"""
Training and prediction speed of a nerzoo tagger (default `training_config/bilstm_crf.jsonnet`)
against allennlp-models' `crf_tagger` built like it, in one run: the ratios are nerzoo / reference.

    .venv/bin/python benchmarks/speed/crf_tagger_reference.py --data conll2003 --epochs 3 --threads 1
    .venv/bin/python benchmarks/speed/crf_tagger_reference.py --data fixtures --epochs 1   # smoke test

The reference (`make install-bench`): allennlp-models' `crf_tagger` (BIOUL, constrained decoding) on
allennlp's `conll2003` reader, with everything else of the nerzoo config, its faster components spelled
as the allennlp ones they equal (`fast_lstm` as `lstm`, ...).  Both train `--epochs` epochs (patience
off); train sentences/s is sentences x epochs / `training_duration` (validation included).  Both then
predict the validation words (batches of 64, `forward_on_instances`), alternately, the fastest of
three passes after a warm-up batch.  Output: `--output-dir` (default runs/crf_tagger_reference/).
"""

import argparse
import datetime
import importlib.util
import json
import os
import sys
from typing import Any, Dict, List, Tuple

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # benchmarks/: harness

import harness  # noqa: E402

ALLENNLP_SPELLING = {
    "fast_characters": "characters",
    "fast_character_encoding": "character_encoding",
    "fast_lstm": "lstm",
}
BATCH_SIZE = 64


def allennlp_spelled(params: Any) -> Any:
    """`params` with every `type` of nerzoo's faster components replaced by the allennlp component it equals."""
    if isinstance(params, list):
        return [allennlp_spelled(value) for value in params]
    if not isinstance(params, dict):
        return params
    spelled = {key: allennlp_spelled(value) for key, value in params.items()}
    if spelled.get("type") in ALLENNLP_SPELLING:
        spelled["type"] = ALLENNLP_SPELLING[spelled["type"]]
    return spelled


def reference_config(resolved: Dict[str, Any]) -> Dict[str, Any]:
    """allennlp-models' `crf_tagger` and allennlp's `conll2003` reader with everything else of `resolved`."""
    model = resolved["model"]
    reference = {key: value for key, value in resolved.items() if key not in ("dataset_reader", "model")}
    reference["dataset_reader"] = {
        "type": "conll2003",
        "tag_label": "ner",
        "coding_scheme": "BIOUL",
        "token_indexers": allennlp_spelled(resolved["dataset_reader"]["token_indexers"]),
    }
    reference["model"] = {
        "type": "crf_tagger",
        "label_encoding": "BIOUL",
        "constrain_crf_decoding": True,
        "calculate_span_f1": True,
        "include_start_end_transitions": model.get("head", {}).get("include_start_end_transitions", True),
        "dropout": model.get("dropout", 0.5),
        "text_field_embedder": allennlp_spelled(model["text_field_embedder"]),
        "encoder": allennlp_spelled(model["encoder"]),
    }
    return reference


def train(name: str, config: str, overrides: Dict[str, Any], package: str, args, env) -> Dict[str, Any]:
    """`allennlp train` in a subprocess; its archive and the trainer's figures."""
    serialization_dir = os.path.join(args.output_dir, name)
    print(f"=== {name}: training ({serialization_dir}.log)", flush=True)
    archive = harness.train_or_exit(config, serialization_dir, overrides, env, package)
    metrics = harness.read_json(os.path.join(serialization_dir, "metrics.json"))
    return {
        "archive": archive,
        "epochs": metrics["epoch"] + 1,
        "seconds": harness.parse_duration(metrics["training_duration"]),
        "dev_f1": 100 * metrics["best_validation_f1-measure-overall"],
    }


def prediction_seconds(archives: Dict[str, str], data_path: str, passes: int = 3) -> Tuple[Dict[str, List[float]], int]:
    """Seconds of each pass of each archive over the sentences of `data_path` (the archives alternating), sentences."""
    from allennlp.common.util import import_module_and_submodules
    from allennlp.data.tokenizers import Token
    from allennlp.models.archival import load_archive

    for package in ("nerzoo", "allennlp_models.tagging"):
        import_module_and_submodules(package)
    batches, models = {}, {}
    for name, path in archives.items():
        archive = load_archive(path, cuda_device=-1)
        reader, models[name] = archive.dataset_reader, archive.model.eval()
        words = [[token.text for token in instance["tokens"].tokens] for instance in reader.read(data_path)]
        # The words only, as a caller has them (no gold tags: no loss or metrics while timing).
        instances = [reader.text_to_instance(w if name == "nerzoo" else [Token(word) for word in w]) for w in words]
        for instance in instances:
            reader.apply_token_indexers(instance)
        batches[name] = harness.batches(instances, BATCH_SIZE)
        models[name].forward_on_instances(batches[name][0])  # warm-up
    runs = {
        name: lambda name=name: [models[name].forward_on_instances(batch) for batch in batches[name]]
        for name in archives
    }
    return harness.timed_passes(runs, passes)[0], len(instances)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].strip())
    parser.add_argument("--config", default="training_config/bilstm_crf.jsonnet", help="the nerzoo tagger")
    parser.add_argument("--data", default="conll2003", help="a data set of training_config/data.libsonnet")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch threads of every process")
    parser.add_argument("--output-dir", default=None)
    args = parser.parse_args()
    if importlib.util.find_spec("allennlp_models") is None:
        raise SystemExit("the reference crf_tagger needs allennlp-models: run `make install-bench`")
    started = datetime.datetime.now()
    args.output_dir = args.output_dir or os.path.join(
        harness.REPO_ROOT, f"runs/crf_tagger_reference/{started:%Y%m%d-%H%M%S}"
    )
    os.makedirs(args.output_dir, exist_ok=True)
    env = harness.thread_env(args.threads, NERZOO_DATA=args.data)
    import torch
    from allennlp.common.params import Params

    torch.set_num_threads(args.threads)
    overrides = {"trainer.num_epochs": args.epochs, "trainer.patience": None, "test_data_path": None}
    config = os.path.join(harness.REPO_ROOT, args.config)
    resolved = Params.from_file(config, json.dumps(overrides), ext_vars=env).as_dict(quiet=True)
    reference = os.path.join(args.output_dir, "crf_tagger.json")
    with open(reference, "w") as handle:
        json.dump(reference_config(resolved), handle, indent=2)

    trained = {
        "nerzoo": train("nerzoo", config, overrides, "nerzoo", args, env),
        "reference": train("reference", reference, {}, "allennlp_models.tagging", args, env),
    }
    train_sentences = len(harness.read_sentences(os.path.join(harness.REPO_ROOT, resolved["train_data_path"])))
    dev = os.path.join(harness.REPO_ROOT, resolved["validation_data_path"])
    predict, dev_sentences = prediction_seconds({name: run["archive"] for name, run in trained.items()}, dev)
    print(f"\n{args.config} vs crf_tagger on {args.data}: {train_sentences} train, {dev_sentences} dev sentences")
    print("model      epochs  trainer s  train sent/s  predict sent/s  dev F1")
    for name, run in trained.items():
        run["train_sentences_per_second"] = train_sentences * run["epochs"] / run["seconds"]
        run["predict_sentences_per_second"] = dev_sentences / min(predict[name])
        print(
            f"{name:10s} {run['epochs']:6d} {run['seconds']:10.1f} {run['train_sentences_per_second']:13.1f} "
            f"{run['predict_sentences_per_second']:15.1f} {run['dev_f1']:7.2f}"
        )
    nerzoo, ref = (trained[name] for name in ("nerzoo", "reference"))
    ratios = [nerzoo[key] / ref[key] for key in ("train_sentences_per_second", "predict_sentences_per_second")]
    print(f"nerzoo / reference: training {ratios[0]:.2f}x, prediction {ratios[1]:.2f}x")
    print(f"{harness.command_line(__file__)}; {harness.machine_description()}")
    results = {"runs": trained, "predict_seconds": predict, "train_sentences": train_sentences}
    harness.write_json(os.path.join(args.output_dir, "results.json"), results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
