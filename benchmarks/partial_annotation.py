#!/usr/bin/env python
"""
Learning from partial annotation on CoNLL-2003 (docs/partial.md): partially annotated copies of
eng.train and eng.testa, built with a fixed seed, and `bilstm_crf` trained on them in each way.

    .venv/bin/python benchmarks/partial_annotation.py build --output-root runs/partial
    .venv/bin/python benchmarks/partial_annotation.py train --threads 1 --output-root runs/partial --runs partial:mayhew:1
    .venv/bin/python benchmarks/partial_annotation.py table --output-root runs/partial

The protocols (`mayhew`, `jie`), the methods of `METHODS` and the columns are in docs/partial.md,
"On CoNLL-2003".  A run is METHOD:PROTOCOL:SEED; it writes `OUTPUT_ROOT/partial_METHOD_PROTOCOL-conll2003-SEED/`
as `reproduce.py` does, plus `clean_dev` / `clean_dev_test` (the epoch best on the whole eng.testa
and its test F1) in its result.json.  `table --record` makes docs/results/partial.jsonl.
"""

import argparse
import functools
import glob
import itertools
import json
import os
import random
import sys
import tempfile
from collections import defaultdict
from typing import Any, Dict, List, Tuple

import harness
import reproduce
import results
from nerzoo_runtime.tag_scheme import spans_to_tags, tags_to_spans

PROTOCOLS = ("mayhew", "jie")
SOURCES = {"train": "eng.train", "dev": "eng.testa", "test": "eng.testb"}
TYPES = ("PER", "LOC", "ORG", "MISC")
CONFIG = "training_config/conll2003/bilstm_crf.jsonnet"
# name -> the files it trains on ("partial" or "as_o") and its head's `open_tokens`.
METHODS: Dict[str, Dict[str, Any]] = {
    "as_o": {"files": "as_o"},
    "partial": {"files": "partial"},
    # CoNLL-2003's training text is 16.7% entity tokens; the margin takes 10-20%.
    "entity_ratio": {"files": "partial", "open_tokens": {"entity_ratio": 0.15}},
    "entity_ratio_10": {"files": "partial", "open_tokens": {"entity_ratio": 0.1}},
    "entity_ratio_20": {"files": "partial", "open_tokens": {"entity_ratio": 0.2}},
    # The whole dev set's share (16.7%) with a narrow margin: the ratio cannot drift to its band's top.
    "entity_ratio_dev": {"files": "partial", "open_tokens": {"entity_ratio": 0.167, "ratio_margin": 0.01}},
    # Jie et al.'s cross-estimation, 2 folds and 3 rounds (`allennlp cross-estimate`), with and without the ratio.
    "cross": {"files": "partial", "cross": True},
    "cross_entity_ratio": {"files": "partial", "cross": True, "open_tokens": {"entity_ratio": 0.15}},
}

Sentence = Tuple[List[List[str]], List[Tuple[str, int, int]]]  # token rows, gold spans


def read_conll(path: str) -> List[Any]:
    """The file as a list of `-DOCSTART-` rows (strings) and sentences (`Sentence`)."""
    items: List[Any] = []
    rows: List[List[str]] = []
    with open(path, encoding="utf-8") as handle:
        for line in list(handle) + [""]:
            if line.strip() and not line.startswith("-DOCSTART-"):
                rows.append(line.split())
                continue
            if rows:
                items.append((rows, tags_to_spans([row[-1] for row in rows])))
                rows = []
            if line.startswith("-DOCSTART-"):
                items.append(line.rstrip("\n"))
    return items


def write_conll(path: str, items: List[Any], marks: Dict[int, List[Tuple[str, int, int]]], open_tag: str) -> None:
    """Writes `items` with the NER column in BIO: the marked spans of each sentence (its index in
    `items`), `open_tag` on every other token; `marks` None writes the gold spans with `O`."""
    with open(path, "w", encoding="utf-8") as out:
        for index, item in enumerate(items):
            if isinstance(item, str):
                out.write(item + "\n\n")
                continue
            rows, gold = item
            spans = gold if marks is None else marks[index]
            tags = spans_to_tags(spans, len(rows), "BIO")
            covered = {position for _, start, end in spans for position in range(start, end)}
            for position, (row, tag) in enumerate(zip(rows, tags)):
                out.write(" ".join(row[:-1] + [tag if position in covered or marks is None else open_tag]) + "\n")
            out.write("\n")


def mayhew_marks(items: List[Any], rng: random.Random) -> Dict[int, List[Tuple[str, int, int]]]:
    """Surface forms unmarked until recall is 50%, then random spans until precision is 90%."""
    sentences = {index: item for index, item in enumerate(items) if not isinstance(item, str)}
    mentions = defaultdict(list)
    for index, (rows, gold) in sentences.items():
        for span in gold:
            mentions[" ".join(row[0] for row in rows[span[1] : span[2]])].append((index, span))
    total = sum(len(found) for found in mentions.values())
    kept = total
    removed = set()
    for form in sorted(mentions, key=lambda form: rng.random()):
        if kept <= total // 2:
            break
        removed.update(mentions[form])
        kept -= len(mentions[form])
    marks = {index: [span for span in gold if (index, span) not in removed] for index, (_, gold) in sentences.items()}
    wanted = round(kept / 0.9) - kept
    indices = sorted(sentences)
    while wanted > 0:
        index = rng.choice(indices)
        length = len(sentences[index][0])
        width = rng.randint(1, 3)
        if width > length:
            continue
        start = rng.randrange(length - width + 1)
        if any(start < end and begin < start + width for _, begin, end in marks[index]):
            continue
        marks[index].append((rng.choice(TYPES), start, start + width))
        wanted -= 1
    return marks


def jie_marks(items: List[Any], rng: random.Random) -> Dict[int, List[Tuple[str, int, int]]]:
    """Each entity kept with probability 0.5."""
    sentences = {index: item for index, item in enumerate(items) if not isinstance(item, str)}
    return {index: [span for span in gold if rng.random() < 0.5] for index, (_, gold) in sentences.items()}


def bio_overrides(train: str, dev: str, test: str) -> Dict[str, Any]:
    """The overrides that train on `train`, choose the epoch on `dev` and score `test`: CoNLL files in BIO."""
    paths = {"train_data_path": train, "validation_data_path": dev, "test_data_path": test}
    return {"dataset_reader.file_tag_scheme": "BIO", **{key: os.path.abspath(path) for key, path in paths.items()}}


def build(args) -> None:
    for protocol in PROTOCOLS:
        folder = os.path.join(args.output_root, "data", protocol)
        os.makedirs(folder, exist_ok=True)
        for split, name in SOURCES.items():
            items = read_conll(os.path.join(harness.SHARED_DATA, "conll2003", name))
            if split != "train":
                write_conll(os.path.join(folder, f"{split}.bio"), items, None, "O")
            if split == "test":
                continue
            rng = random.Random(f"{args.seed}:{protocol}:{split}")
            marks = (mayhew_marks if protocol == "mayhew" else jie_marks)(items, rng)
            for files, open_tag in (("partial", "-"), ("as_o", "O")):
                write_conll(os.path.join(folder, f"{split}.{files}"), items, marks, open_tag)
            gold = {(index, span) for index, item in enumerate(items) if not isinstance(item, str) for span in item[1]}
            marked = {(index, span) for index, spans in marks.items() for span in spans}
            print(
                f"{protocol} {split}: {len(gold)} entities, {len(marked)} marked, "
                f"recall {len(gold & marked) / len(gold):.3f}, precision {len(gold & marked) / len(marked):.3f}"
            )


def train(args) -> None:
    for spec in filter(None, ",".join(args.runs).split(",")):
        method, protocol, seed = spec.split(":")
        files = METHODS[method]["files"]
        folder = os.path.join(args.output_root, "data", protocol)
        if not os.path.exists(os.path.join(folder, "test.bio")):
            raise SystemExit(f"no {folder}/test.bio: run `build` first")
        train_file, dev_file = (os.path.join(folder, f"{split}.{files}") for split in ("train", "dev"))
        overrides = bio_overrides(train_file, dev_file, os.path.join(folder, "test.bio"))
        if "open_tokens" in METHODS[method]:
            overrides["model.head.open_tokens"] = METHODS[method]["open_tokens"]
        name = f"partial_{method}_{protocol}"
        reproduce.MODELS[name] = {"config": "bilstm_crf", "overrides": overrides}
        cross = METHODS[method].get("cross", False)
        if not cross:  # every epoch's weights, for the clean-dev choice
            overrides["trainer.checkpointer"] = {"keep_most_recent_by_count": None}
        args.overrides = {}
        result = reproduce.run(name, "conll2003", int(seed), args, *([cross_estimate] if cross else []))
        run_dir = os.path.join(args.output_root, f"{name}-conll2003-{seed}")
        if result["returncode"] == 0:
            model_dir = os.path.join(run_dir, "model")
            if cross:  # the final model alone: its dev F1 on the whole dev set
                clean = {"clean_dev": evaluate_f1(model_dir, os.path.join(folder, "dev.bio"), "best.th")}
                result.update(clean, clean_dev_test=result["test"], clean_dev_epoch=result["best_epoch"])
            else:
                result.update(clean_dev_choice(model_dir, folder))
            harness.write_json(os.path.join(run_dir, "result.json"), result)
        print(reproduce.table([dict(result, label=f"{method} ({protocol})")]), flush=True)


def cross_estimate(config: str, directory: str, overrides: Dict[str, Any], env=None, log=None) -> int:
    """`harness.train` as `allennlp cross-estimate`: its rounds beside `directory`, its final model in it."""
    command = ["cross-estimate", config, "-s", os.path.dirname(directory), "--folds", "2", "--rounds", "3"]
    return harness.allennlp(command + ["-o", json.dumps(overrides)], log or f"{directory}.log", env)


def evaluate_f1(serialization_dir: str, data: str, weights: str) -> float:
    with tempfile.NamedTemporaryFile(suffix=".json") as output:
        command = ["evaluate", os.path.join(serialization_dir, "model.tar.gz"), data, "--output-file", output.name]
        if harness.allennlp(command + ["--weights-file", os.path.join(serialization_dir, weights)], os.devnull):
            raise SystemExit(f"allennlp evaluate of {serialization_dir} ({weights}) on {data} failed")
        return 100 * harness.read_json(output.name)["f1-measure-overall"]


def clean_dev_choice(serialization_dir: str, folder: str) -> Dict[str, Any]:
    """The epoch best on the whole dev set and its test F1; the epochs' weights are deleted."""
    epochs = sorted(glob.glob(os.path.join(serialization_dir, "model_state_e*_b0.th")), key=os.path.getmtime)
    scores = [evaluate_f1(serialization_dir, os.path.join(folder, "dev.bio"), weights) for weights in epochs]
    best = max(range(len(epochs)), key=scores.__getitem__)
    test = evaluate_f1(serialization_dir, os.path.join(folder, "test.bio"), epochs[best])
    for path in glob.glob(os.path.join(serialization_dir, "*_state_e*.th")):
        os.remove(path)
    return {"clean_dev": scores[best], "clean_dev_test": test, "clean_dev_epoch": best + 1}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[1])
    parser.add_argument("command", choices=("build", "train", "table"))
    parser.add_argument("--output-root", default=os.path.join(harness.REPO_ROOT, "runs", "partial"))
    parser.add_argument("--seed", type=int, default=0, help="the seed of the perturbation")
    parser.add_argument("--runs", nargs="+", default=[], help="METHOD:PROTOCOL:SEED")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--patience", type=int, default=5)
    parser.add_argument("--max-epochs", type=int, default=50)
    parser.add_argument("--record", action="store_true", help="table: its rows become docs/results/partial.jsonl")
    args = parser.parse_args()
    {"build": build, "train": train, "table": table}[args.command](args)


def table(args) -> None:
    """Every run, then a row per method and protocol over its seeds (`--record`: docs/results/partial.jsonl)."""
    runs = []
    for folder in sorted(os.listdir(args.output_root)):
        if os.path.exists(path := os.path.join(args.output_root, folder, "result.json")):
            metrics = harness.read_json(os.path.join(args.output_root, folder, "model", "metrics.json"))
            runs.append(
                dict(
                    harness.read_json(path),
                    **{key: 100 * metrics[f"test_{key}-overall"] for key in ("precision", "recall")},
                )
            )
    print(reproduce.table(runs))
    columns = [
        "protocol",
        "method",
        "seeds",
        "perturbed dev F1",
        "test P / R",
        "test F1",
        "whole dev F1",
        "whole-dev choice: test F1",
    ]
    rows = []
    for (protocol, method), group in itertools.groupby(sorted(runs, key=run_key), key=run_key):
        group = list(group)

        mean = functools.partial(seed_mean, group)
        cells = [protocol, method, ",".join(str(run["seed"]) for run in group), mean("dev")]
        cells += [
            f"{mean('precision').split()[0]} / {mean('recall').split()[0]}",
            mean("test"),
            mean("clean_dev"),
            mean("clean_dev_test"),
        ]
        rows.append(dict(zip(columns, cells)))
    print("\n".join(results.markdown_table(columns, rows)))
    if args.record:  # one record: the rows of 3 seeds or more; every row is in docs/partial.md
        rows = [row for row in rows if len(row["seeds"].split(",")) >= 3]
        path = os.path.join(results.rows_dir(results.DEFAULT_RESULTS), "partial.jsonl")
        if os.path.exists(path):
            os.remove(path)
        command = " ".join(["benchmarks/partial_annotation.py", *sys.argv[1:]])
        results.append_run(results.DEFAULT_RESULTS, "partial", {"columns": columns, "rows": rows, "command": command})


def seed_mean(runs: List[Dict[str, Any]], key: str) -> str:
    """The mean of `key` over `runs`, with its range when there are several; "n/a" where none has it."""
    values = [run[key] for run in runs if key in run]
    if not values:
        return "n/a"
    spread = f" ({min(values):.2f}-{max(values):.2f})" if len(values) > 1 else ""
    return f"{sum(values) / len(values):.2f}{spread}"


def run_key(run: Dict[str, Any]) -> Tuple[str, str]:
    """(protocol, method) of a run named `partial_METHOD_PROTOCOL`."""
    method, protocol = run["model"][len("partial_") :].rsplit("_", 1)
    return protocol, method


if __name__ == "__main__":
    main()
