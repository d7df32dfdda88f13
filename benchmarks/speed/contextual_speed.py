#!/usr/bin/env python
"""
What the cache of `contextual_word_vectors` saves: epoch times and prediction speed of a tagger
with frozen contextual word vectors (the cache on, and off) against the same tagger with GloVe and
characters only, in one run, like for like.

    .venv/bin/python benchmarks/speed/contextual_speed.py [--model bilstm_crf] [--train-sentences 2000]
        [--dev-sentences 500] [--epochs 3] [--threads 1] [--fine-tune]

How it measures: benchmarks/README.md, "Speed".
"""

import argparse
import os
import sys
from typing import Any, Dict, List, Tuple

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # benchmarks/
import harness  # noqa: E402
import results  # noqa: E402

CONLL = os.path.join(harness.SHARED_DATA, "conll2003")


def epoch_seconds(serialization_dir: str) -> List[float]:
    durations, epoch = [], 0
    while os.path.exists(path := os.path.join(serialization_dir, f"metrics_epoch_{epoch}.json")):
        durations.append(harness.parse_duration(harness.read_json(path)["training_duration"]))
        epoch += 1
    return [later - earlier for earlier, later in zip([0.0] + durations, durations)]


def prediction_passes(archive: str, sentences: List[List[str]], threads: int, passes: int = 4) -> List[float]:
    """Seconds of `passes` passes of the archive's predictor over `sentences` in one process."""
    from allennlp.predictors import Predictor

    harness.set_threads(threads)
    predictor = Predictor.from_path(archive, "sequence_tagger")
    batches = harness.batches([{"tokens": words} for words in sentences], 64)
    run = {"predict": lambda: [predictor.predict_batch_json(batch) for batch in batches]}
    return harness.timed_passes(run, passes)[0]["predict"]


WIDTH_CONTROL = """local config = import "%(root)s/training_config/conll2003/%(model)s_contextual.jsonnet";
local table = { token_indexers+: { transformer: { type: "single_id", lowercase_tokens: true } } };
config + { dataset_reader+: table } + (if std.objectHas(config, "validation_dataset_reader") then { validation_dataset_reader+: table } else {})
+ { model+: { text_field_embedder+: { token_embedders+: { transformer: { type: "embedding", trainable: false,
  embedding_dim: (import "%(root)s/training_config/contextual.libsonnet").dim } } } } }
"""
COLUMNS = ["tagger", "epoch 1", "later epochs (mean)", "epoch vs GloVe"]
COLUMNS += ["predict 1st pass", "predict later (best)", "predict vs GloVe"]


def table(model: str, measured: List[Dict[str, Any]]) -> Tuple[List[str], List[Dict[str, str]]]:
    """The rows of the measured taggers, each against the first (GloVe and characters)."""
    later = [sum(row["epochs_s"][1:]) / max(1, len(row["epochs_s"]) - 1) for row in measured]
    best = [min(row["predict_s"][1:]) for row in measured]
    rows = []
    for row, epochs, predict in zip(measured, later, best):
        cells = [f"{model}: {row['label']}", f"{row['epochs_s'][0]:.1f} s", f"{epochs:.1f} s"]
        cells += [f"{epochs / later[0]:.2f}x", f"{row['predict_s'][0]:.2f} s", f"{predict:.2f} s"]
        cells.append(f"{predict / best[0]:.2f}x")
        rows.append(dict(zip(COLUMNS, cells)))
    return COLUMNS, rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[1])
    parser.add_argument("--model", default="bilstm_crf", help="MODEL: training_config/MODEL(_contextual).jsonnet")
    parser.add_argument("--train-sentences", type=int, default=2000)
    parser.add_argument("--dev-sentences", type=int, default=500)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--fine-tune", action="store_true", help="add a row fine-tuning the transformer")
    parser.add_argument("--output-root", default=os.path.join(harness.REPO_ROOT, "runs", "contextual_speed"))
    args = parser.parse_args(argv)
    os.makedirs(args.output_root, exist_ok=True)
    train, dev, test = (os.path.join(args.output_root, f"{split}.txt") for split in ("train", "dev", "test"))
    harness.write_prefix(os.path.join(CONLL, "eng.train"), args.train_sentences, train, documents=False)
    harness.write_prefix(os.path.join(CONLL, "eng.testa"), args.dev_sentences, dev, documents=False)
    test_words = harness.write_prefix(os.path.join(CONLL, "eng.testb"), args.dev_sentences, test, documents=False)
    env = harness.thread_env(args.threads)
    plain = f"training_config/conll2003/{args.model}.jsonnet"
    contextual = f"training_config/conll2003/{args.model}_contextual.jsonnet"
    transformer = "model.text_field_embedder.token_embedders.transformer"
    # The contextual tagger with its vectors free: a frozen random table of the transformer's width.
    width = os.path.abspath(os.path.join(args.output_root, "width_control.jsonnet"))
    with open(width, "w") as handle:
        handle.write(WIDTH_CONTROL % {"root": harness.REPO_ROOT, "model": args.model})
    rows = [
        ("GloVe + characters", plain, {}),
        ("+ contextual, cached", contextual, {}),
        ("+ contextual, no cache", contextual, {f"{transformer}.cache_size_mb": 0}),
        ("+ a frozen table as wide, no transformer", width, {}),
    ]
    if args.fine_tune:
        rows.append(("+ contextual, fine-tuned", contextual, {f"{transformer}.train_parameters": True}))
    measured: List[Dict[str, Any]] = []
    for label, config, extra in rows:
        overrides = {"train_data_path": train, "validation_data_path": dev, "test_data_path": None, **extra}
        overrides.update({"evaluate_on_test": False, "trainer.num_epochs": args.epochs, "trainer.patience": None})
        run_dir = os.path.join(args.output_root, label.replace(" ", "_").replace(",", "").replace("+", "plus"))
        archive = harness.train_or_exit(config, run_dir, overrides, env)
        epochs = epoch_seconds(run_dir)
        passes = prediction_passes(archive, test_words, args.threads)
        measured.append({"label": label, "config": config, "epochs_s": epochs, "predict_s": passes})
        print(label, [round(s, 1) for s in epochs], [round(s, 2) for s in passes], flush=True)

    print("\n".join(results.markdown_table(*table(args.model, measured))))
    print(f"{harness.command_line(__file__, argv)}; {harness.machine_description()}")


if __name__ == "__main__":
    main()
