#!/usr/bin/env python
"""
What the cache of `contextual_word_vectors` saves: epoch times and prediction speed of a tagger
with frozen contextual word vectors (the cache on, and off) against the same tagger with GloVe and
characters only, in one run, like for like.

    .venv/bin/python benchmarks/speed/contextual_speed.py [--model bilstm_crf] [--train-sentences 2000]
        [--dev-sentences 500] [--epochs 3] [--threads 1] [--fine-tune] [--record contextual_speed]

Rows: `training_config/MODEL.jsonnet`; `MODEL_contextual.jsonnet` as is, with `cache_size_mb: 0`,
with a frozen random table as wide as the transformer in its place (the wider layers, vectors for
free), and with `--fine-tune` `train_parameters: true`. Each, with its own optimiser, trains `--epochs`
epochs on the first `--train-sentences` sentences of eng.train and `--dev-sentences` of eng.testa
(CoNLL-2003, GloVe 6B 50d); an epoch's time is the trainer's (training, validation, checkpoint).  Each
archive then tags eng.testb's first `--dev-sentences` sentences four times in one process (batches of
64): the first pass fills the cache, the best later one is shown.  Transformer: TRANSFORMER_MODEL.
"""

import argparse
import json
import os
import sys
import time
from typing import Any, Dict, List, Tuple

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # benchmarks/
import harness  # noqa: E402
import results  # noqa: E402

CONLL = os.path.join(harness.SHARED_DATA, "conll2003")


def first_sentences(source: str, count: int, target: str) -> List[List[str]]:
    """Writes the first `count` sentences of a CoNLL-2003 file to `target`; returns their words."""
    with open(source, encoding="utf-8") as handle:
        blocks = [block.strip("\n") for block in handle.read().split("\n\n")]
    blocks = [block for block in blocks if block and not block.startswith("-DOCSTART-")][:count]
    with open(target, "w", encoding="utf-8") as handle:
        handle.write("".join(block + "\n\n" for block in blocks))
    return [[line.split()[0] for line in block.splitlines()] for block in blocks]


def epoch_seconds(serialization_dir: str) -> List[float]:
    durations, epoch = [], 0
    while os.path.exists(path := os.path.join(serialization_dir, f"metrics_epoch_{epoch}.json")):
        with open(path) as handle:
            durations.append(harness.parse_duration(json.load(handle)["training_duration"]))
        epoch += 1
    return [later - earlier for earlier, later in zip([0.0] + durations, durations)]


def prediction_passes(archive: str, sentences: List[List[str]], threads: int, passes: int = 4) -> List[float]:
    """Seconds of `passes` passes of the archive's predictor over `sentences` in one process."""
    import torch
    from allennlp.predictors import Predictor

    torch.set_num_threads(threads)
    predictor = Predictor.from_path(archive, "sequence_tagger")
    inputs = [{"tokens": words} for words in sentences]
    seconds = []
    for _ in range(passes):
        started = time.perf_counter()
        for start in range(0, len(inputs), 64):
            predictor.predict_batch_json(inputs[start : start + 64])
        seconds.append(time.perf_counter() - started)
    return seconds


WIDTH_CONTROL = """local config = import "%(root)s/training_config/%(model)s_contextual.jsonnet";
local table = { token_indexers+: { transformer: { type: "single_id", lowercase_tokens: true } } };
config + { dataset_reader+: table } + (if std.objectHas(config, "validation_dataset_reader") then { validation_dataset_reader+: table } else {})
+ { model+: { text_field_embedder+: { token_embedders+: { transformer: { type: "embedding", trainable: false,
  embedding_dim: (import "%(root)s/training_config/contextual.libsonnet").dim } } } } }
"""
COLUMNS = ["tagger", "epoch 1", "later epochs (mean)", "epoch vs GloVe"]
COLUMNS += ["predict 1st pass", "predict later (best)", "predict vs GloVe"]


def table(model: str, measured: List[Dict[str, Any]]) -> Tuple[List[str], List[Dict[str, str]]]:
    """The rows of the measured taggers, each against the first (GloVe and characters)."""

    def later_epochs(row: Dict[str, Any]) -> float:
        return sum(row["epochs_s"][1:]) / max(1, len(row["epochs_s"]) - 1)

    reference = measured[0]
    rows = []
    for row in measured:
        cells = [
            f"{model}: {row['label']}",
            f"{row['epochs_s'][0]:.1f} s",
            f"{later_epochs(row):.1f} s",
            f"{later_epochs(row) / later_epochs(reference):.2f}x",
            f"{row['predict_s'][0]:.2f} s",
            f"{min(row['predict_s'][1:]):.2f} s",
            f"{min(row['predict_s'][1:]) / min(reference['predict_s'][1:]):.2f}x",
        ]
        rows.append(dict(zip(COLUMNS, cells)))
    return COLUMNS, rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[1])
    parser.add_argument("--model", default="bilstm_crf", help="MODEL: training_config/MODEL(_contextual).jsonnet")
    parser.add_argument("--train-sentences", type=int, default=2000)
    parser.add_argument("--dev-sentences", type=int, default=500)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--fine-tune", action="store_true", help="add a row fine-tuning the transformer")
    parser.add_argument("--output-root", default=os.path.join(harness.REPO_ROOT, "runs", "contextual_speed"))
    parser.add_argument("--record", metavar="TABLE", default=None, help="add the rows to docs/results/TABLE.jsonl")
    args = parser.parse_args(argv)
    os.makedirs(args.output_root, exist_ok=True)
    train = os.path.join(args.output_root, "train.txt")
    dev = os.path.join(args.output_root, "dev.txt")
    first_sentences(os.path.join(CONLL, "eng.train"), args.train_sentences, train)
    first_sentences(os.path.join(CONLL, "eng.testa"), args.dev_sentences, dev)
    test_words = first_sentences(
        os.path.join(CONLL, "eng.testb"), args.dev_sentences, os.path.join(args.output_root, "test.txt")
    )
    env = dict(
        os.environ, NERZOO_DATA="conll2003", OMP_NUM_THREADS=str(args.threads), MKL_NUM_THREADS=str(args.threads)
    )
    plain = f"training_config/{args.model}.jsonnet"
    contextual = f"training_config/{args.model}_contextual.jsonnet"
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
        if harness.train(config, run_dir, overrides, env):
            raise SystemExit(f"{label}: allennlp train failed, see {run_dir}.log")
        epochs = epoch_seconds(run_dir)
        passes = prediction_passes(os.path.join(run_dir, "model.tar.gz"), test_words, args.threads)
        measured.append({"label": label, "config": config, "epochs_s": epochs, "predict_s": passes})
        print(label, [round(s, 1) for s in epochs], [round(s, 2) for s in passes], flush=True)

    columns, table_rows = table(args.model, measured)
    print(results.markdown_row(columns))
    print("|" + "---|" * len(columns))
    for row in table_rows:
        print(results.markdown_row([row[column] for column in columns]))
    if args.record:
        entry = {
            "command": harness.command_line(__file__, sys.argv[1:] if argv is None else argv),
            "columns": columns,
            "rows": table_rows,
            "results": measured,
            "note": f"{args.train_sentences} train / {args.dev_sentences} dev sentences, {args.threads} thread(s); "
            + harness.machine_description(),
        }
        results.append_run(results.DEFAULT_RESULTS, args.record, entry)
    return 0


if __name__ == "__main__":
    sys.exit(main())
