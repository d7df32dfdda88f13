#!/usr/bin/env python
"""
Active learning on CoNLL-2003 (docs/active_learning.md): eng.train is the pool and its gold labels
the annotator; `allennlp select` chooses what to annotate next; `bilstm_crf` trains on what is labelled.

    .venv/bin/python benchmarks/active_learning.py run --strategy mnlp --seed 1 --threads 1 --output-root runs/active
    .venv/bin/python benchmarks/active_learning.py run --strategy mnlp --partial 0.9 --seed 1 --output-root runs/active
    .venv/bin/python benchmarks/active_learning.py run --strategy random_sizes --seed 1 --output-root runs/active
    .venv/bin/python benchmarks/active_learning.py table --output-root runs/active
    .venv/bin/python benchmarks/active_learning.py plot --output-root runs/active --output docs/images/active_learning.png

The protocol (seed set, rounds, partial mode, `random_sizes`, files written, resuming) is in
docs/active_learning.md, "The simulation".  `--data fixtures` runs it on the fixtures (smoke test).
"""

import argparse
import json
import os
import random
import subprocess
import sys
import time
from collections import defaultdict
from typing import Any, Dict, List, Optional

import harness
import partial_annotation
import reproduce
import results

sys.path.insert(0, harness.REPO_ROOT)
from nerzoo_runtime.tag_scheme import spans_to_tags  # noqa: E402

STRATEGIES = ("random", "mnlp", "token_entropy", "expected_errors", "random_sizes")
SIZES = (1, 2, 4, 8, 16, 32, 64, 100)  # random_sizes: % of the pool's words
FULL_DATA_TEST_F1 = 89.92  # bilstm_crf on conll2003, the mean of 3 seeds (docs/RESULTS.md)
CONLL = os.path.join(harness.SHARED_DATA, "conll2003")
FIXTURES = os.path.join(harness.REPO_ROOT, "fixtures", "conll2003")
# name -> the config, a folder and in it the pool (its gold labels the annotator), dev and test;
# `fixtures` for a smoke test
DATA = {
    "conll2003": ("training_config/conll2003/bilstm_crf.jsonnet", CONLL, ("eng.train", "eng.testa", "eng.testb")),
    "fixtures": ("training_config/bilstm_crf.jsonnet", FIXTURES, ("train.txt", "dev.txt", "test.txt")),
}

Labelled = Dict[int, Optional[List[int]]]  # pool index -> its labelled token positions (None: all)


def run_name(args) -> str:
    return args.strategy if args.partial is None else f"{args.strategy}_partial{args.partial:g}"


def labelled_words(labelled: Labelled, pool: List[Any]) -> int:
    return sum(len(pool[index][0]) if positions is None else len(positions) for index, positions in labelled.items())


def write_labelled(path: str, labelled: Labelled, pool: List[Any]) -> None:
    """The labelled sentences in pool order, BIO, `-` on every token not labelled."""
    with open(path, "w", encoding="utf-8") as out:
        for index in sorted(labelled):
            rows, gold = pool[index]
            tags = spans_to_tags(gold, len(rows), "BIO")
            known = set(range(len(rows)) if labelled[index] is None else labelled[index])
            for position, (row, tag) in enumerate(zip(rows, tags)):
                out.write(" ".join(row[:-1] + [tag if position in known else "-"]) + "\n")
            out.write("\n")


def save_labelled(path: str, labelled: Labelled) -> None:
    harness.write_json(path + ".part", [[index, positions] for index, positions in sorted(labelled.items())])
    os.replace(path + ".part", path)


def load_labelled(path: str) -> Labelled:
    return dict(harness.read_json(path))  # [[index, positions], ...]


def widened(asked: List[bool], gold: List[Any]) -> List[int]:
    """The asked positions, each gold entity that one touches added whole."""
    asked = list(asked)
    for _, start, end in gold:
        if any(asked[start:end]):
            asked[start:end] = [True] * (end - start)
    return [position for position, marked in enumerate(asked) if marked]


def select(args, archive: str, labelled: Labelled, pool: List[Any], folder: str) -> Labelled:
    """`allennlp select` over the sentences not yet chosen; the labelled set with the chosen added."""
    rest = [index for index in range(len(pool)) if index not in labelled]
    candidates, chosen = os.path.join(folder, "pool.jsonl"), os.path.join(folder, "chosen.jsonl")
    with open(candidates, "w", encoding="utf-8") as out:
        out.writelines(json.dumps({"tokens": [row[0] for row in pool[index][0]]}) + "\n" for index in rest)
    command = [harness.ALLENNLP, "select", archive, candidates, "--budget", str(args.round_words), "--output", chosen]
    command += ["--strategy", args.strategy, "--seed", str(args.seed), "--include-package", "nerzoo"]
    command += [] if args.partial is None else ["--partial", str(args.partial)]
    with open(os.path.join(folder, "select.log"), "w") as log:
        if subprocess.call(command, cwd=harness.REPO_ROOT, stdout=log, stderr=subprocess.STDOUT, env=args.env):
            raise SystemExit(f"allennlp select failed, see {folder}/select.log")
    grown = dict(labelled)
    with open(chosen, encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            index = rest[int(record["source"].rsplit(":", 1)[1]) - 1]  # POOL:LINE
            rows, gold = pool[index]
            assert record["tokens"] == [row[0] for row in rows], f"{chosen}: {record['source']}: other tokens"
            grown[index] = None if args.partial is None else widened([tag != "-" for tag in record["tags"]], gold)
    return grown


def train_round(args, folder: str, labelled: Labelled, pool: List[Any]) -> Dict[str, Any]:
    """`allennlp train` on the labelled set, as `reproduce.run` trains (its result.json); the round's record."""
    train_file = os.path.join(folder, "train.bio")
    write_labelled(train_file, labelled, pool)
    model: Dict[str, Any] = {
        "overrides": {
            "dataset_reader.file_tag_scheme": "BIO",
            "train_data_path": os.path.abspath(train_file),
            "validation_data_path": os.path.abspath(os.path.join(args.data_dir, "dev.bio")),
            "test_data_path": os.path.abspath(os.path.join(args.data_dir, "test.bio")),
            **({} if args.partial is None else {"model.head.open_tokens": {"entity_ratio": 0.15}}),
        }
    }
    serialization_dir, log = os.path.join(folder, "model"), os.path.join(folder, "train.log")
    started = time.time()
    overrides = reproduce.overrides_for(model, args, args.seed)
    returncode = harness.train(args.config, serialization_dir, overrides, args.env, log=log)
    result: Dict[str, Any] = {"config": args.config, "overrides": overrides, "returncode": returncode}
    result.update(seed=args.seed, threads=args.threads, wall_s=round(time.time() - started))
    if returncode == 0:
        metrics = harness.read_json(os.path.join(serialization_dir, "metrics.json"))
        result.update(epochs=metrics["epoch"] + 1, best_epoch=metrics["best_epoch"] + 1)
        result["dev"] = 100 * metrics["best_validation_f1-measure-overall"]
        result["test"] = 100 * metrics["test_f1-measure-overall"]
        for name in os.listdir(serialization_dir):  # model.tar.gz keeps the best weights
            if name.endswith(".th"):
                os.remove(os.path.join(serialization_dir, name))
    harness.write_json(os.path.join(folder, "result.json"), result)
    if returncode != 0:
        raise SystemExit(f"allennlp train failed, see {folder}/train.log")
    return {key: result[key] for key in ("dev", "test", "epochs", "best_epoch")}


def read_pool(args) -> List[Any]:
    """The pool's sentences (token rows, gold spans); dev and test in BIO in OUTPUT_ROOT/data/DATA/, once."""
    args.config, source, (pool_file, *evaluated) = DATA[args.data]
    args.data_dir = os.path.join(args.output_root, "data", args.data)
    os.makedirs(args.data_dir, exist_ok=True)
    for split, name in zip(("dev", "test"), evaluated):
        if not os.path.exists(path := os.path.join(args.data_dir, f"{split}.bio")):
            items = partial_annotation.read_conll(os.path.join(source, name))
            partial_annotation.write_conll(path + ".part", items, None, "O")
            os.replace(path + ".part", path)
    items = partial_annotation.read_conll(os.path.join(source, pool_file))
    return [item for item in items if not isinstance(item, str)]


def growing_sizes(order: List[int], pool: List[Any], pool_words: int) -> List[Labelled]:
    """random_sizes: for each of SIZES, the shortest start of `order` that holds that % of the pool's words."""
    plans = []
    for share in SIZES:
        count, words = 0, 0
        while count < len(order) and words < pool_words * share / 100:
            words, count = words + len(pool[order[count]][0]), count + 1
        plans.append(dict.fromkeys(order[:count]))
    return plans


def run(args) -> None:
    pool = read_pool(args)
    pool_words = sum(len(rows) for rows, _ in pool)
    args.env = harness.thread_env(args.threads)
    args.round_words = max(1, round(pool_words * args.round_share / 100))
    run_dir = os.path.join(args.output_root, f"{run_name(args)}-{args.seed}")
    os.makedirs(run_dir, exist_ok=True)
    settings = {"name": run_name(args), "strategy": args.strategy, "partial": args.partial, "seed": args.seed}
    settings.update(data=args.data, pool_sentences=len(pool), pool_words=pool_words, round_words=args.round_words)
    settings.update(seed_share=args.seed_share, patience=args.patience, max_epochs=args.max_epochs)
    curve_path = os.path.join(run_dir, "curve.json")
    curve = harness.read_json(curve_path) if os.path.exists(curve_path) else dict(settings, rounds=[])
    if changed := {key: curve.get(key) for key in settings if curve.get(key) != settings[key]}:
        raise SystemExit(f"{curve_path} was run with other settings ({changed}); use another --output-root")
    curve["cap"] = args.cap  # a higher cap goes on with the run
    done = {record["round"]: record for record in curve["rounds"]}
    order = list(range(len(pool)))
    random.Random(args.seed).shuffle(order)
    plans = growing_sizes(order, pool, pool_words) if args.strategy == "random_sizes" else []
    labelled: Labelled = dict.fromkeys(order[: max(1, round(len(pool) * args.seed_share / 100))])
    cap_words = pool_words * args.cap / 100
    number = 0
    while True:
        folder = os.path.join(run_dir, f"round-{number:02d}")
        os.makedirs(folder, exist_ok=True)
        if args.strategy == "random_sizes":
            labelled = plans[number]
        saved = os.path.join(folder, "labelled.json")
        labelled = load_labelled(saved) if os.path.exists(saved) else labelled
        save_labelled(saved, labelled)
        words = labelled_words(labelled, pool)
        if number not in done:
            record = {"round": number, "words": words, "share": 100 * words / pool_words, "sentences": len(labelled)}
            done[number] = dict(record, **train_round(args, folder, labelled, pool))
            curve["rounds"] = [done[key] for key in sorted(done)]
            harness.write_json(curve_path, curve)
        print(format_record(run_name(args), args.seed, done[number]), flush=True)
        if args.strategy == "random_sizes":
            if number + 1 == len(SIZES):
                break
        elif words >= cap_words or len(labelled) == len(pool):
            break
        else:
            following = os.path.join(run_dir, f"round-{number + 1:02d}")
            if not os.path.exists(os.path.join(following, "labelled.json")):
                os.makedirs(following, exist_ok=True)
                labelled = select(args, os.path.join(folder, "model", "model.tar.gz"), labelled, pool, following)
        number += 1


def format_record(name: str, seed: int, record: Dict[str, Any]) -> str:
    return (
        f"{name} seed {seed} round {record['round']}: {record['words']} words ({record['share']:.2f}%), "
        f"dev {record['dev']:.2f}, test {record['test']:.2f}, {record['epochs']} epochs"
    )


def read_curves(output_root: str) -> Dict[str, List[Dict[str, Any]]]:
    """Every run's curve.json under `output_root`, by run name."""
    curves = defaultdict(list)
    for folder in sorted(os.listdir(output_root)):
        if os.path.exists(path := os.path.join(output_root, folder, "curve.json")):
            curve = harness.read_json(path)
            curves[curve["name"]].append(curve)
    return dict(curves)


def mean_curve(curves: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """By round: the mean share, dev and test F1 over the runs that have the round, test's range, the runs."""
    by_round = defaultdict(list)
    for curve in curves:
        for record in curve["rounds"]:
            by_round[record["round"]].append(record)
    points = []
    for number, found in sorted(by_round.items()):
        tests = [record["test"] for record in found]
        point = {"round": number, "runs": len(found), "low": min(tests), "high": max(tests)}
        points.append(
            point | {key: sum(record[key] for record in found) / len(found) for key in ("share", "dev", "test")}
        )
    return points


def reached(points: List[Dict[str, Any]], target: float) -> Optional[float]:
    """The first mean share of the words at which the mean test F1 reaches `target`, or None."""
    return next((point["share"] for point in points if point["test"] >= target), None)


def table(args) -> None:
    curves = read_curves(args.output_root)
    columns = ["strategy", "round", "seeds", "% of words", "dev F1", "test F1 (range)"]
    rows = []
    for name, runs in curves.items():
        for point in mean_curve(runs):
            spread = f" ({point['low']:.2f}-{point['high']:.2f})" if point["runs"] > 1 else ""
            cells = [name, str(point["round"]), str(point["runs"]), f"{point['share']:.2f}"]
            rows.append(dict(zip(columns, cells + [f"{point['dev']:.2f}", f"{point['test']:.2f}{spread}"])))
    print("\n".join(results.markdown_table(columns, rows)))
    print(f"\nTarget: test F1 {args.target:.2f}")
    shares = {name: reached(mean_curve(runs), args.target) for name, runs in curves.items()}
    baseline = shares.get("random") or shares.get("random_sizes")
    randoms = [name for name in curves if name in ("random", "random_sizes")]
    for name, runs in curves.items():
        points = mean_curve(runs)
        if shares[name] is None:
            best = max(points, key=lambda point: point["test"])
            print(f"{name}: not reached (best {best['test']:.2f} at {best['share']:.2f}% of the words)")
            continue
        versus = "" if name in randoms or not randoms else ", random does not reach it"
        versus = f", {baseline / shares[name]:.1f}x fewer words than random" if baseline and versus else versus
        print(f"{name}: reached at {shares[name]:.2f}% of the words{versus}")


def plot(args) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as pyplot
    except ImportError as error:
        raise SystemExit("plot needs matplotlib, which this environment lacks: `table` prints the curves") from error
    figure, axes = pyplot.subplots(figsize=(7, 4.5))
    for name, runs in read_curves(args.output_root).items():
        points = mean_curve(runs)
        shares = [point["share"] for point in points]
        line = axes.plot(
            shares,
            [point["test"] for point in points],
            marker=".",
            label=f"{name} ({len(runs)} seed{'s' * (len(runs) > 1)})",
        )
        if len(runs) > 1:
            lows, highs = [point["low"] for point in points], [point["high"] for point in points]
            axes.fill_between(shares, lows, highs, color=line[0].get_color(), alpha=0.2)
    axes.axhline(args.target, color="grey", linestyle="--", linewidth=1, label=f"target {args.target:.2f}")
    axes.set_xscale("log")
    axes.set_xticks(SIZES, [str(size) for size in SIZES])
    axes.set_xlabel("% of the pool's words annotated (log scale)")
    axes.set_ylabel("test F1")
    axes.legend(fontsize="small")
    axes.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(args.output, dpi=120)
    print(f"plot -> {args.output}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[1])
    parser.add_argument("command", choices=("run", "table", "plot"))
    parser.add_argument("--output-root", default=os.path.join(harness.REPO_ROOT, "runs", "active"))
    parser.add_argument("--strategy", choices=STRATEGIES, default="mnlp")
    parser.add_argument("--partial", type=float, metavar="THRESHOLD", help="select --partial THRESHOLD")
    parser.add_argument("--seed", type=int, default=1, help="the seed set, selection's ties and training")
    parser.add_argument("--data", choices=sorted(DATA), default="conll2003")
    parser.add_argument("--seed-share", type=float, default=1.0, help="%% of the pool's sentences labelled first")
    parser.add_argument("--round-share", type=float, default=2.0, help="%% of the pool's words selected a round")
    parser.add_argument("--cap", type=float, default=30.0, help="stop at this %% of the pool's words labelled")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--patience", type=int, default=5)
    parser.add_argument("--max-epochs", type=int, default=50)
    parser.add_argument("--target", type=float, default=0.99 * FULL_DATA_TEST_F1, help="test F1 the table looks for")
    parser.add_argument("--output", help="plot: the PNG (default OUTPUT_ROOT/active_learning.png)")
    args = parser.parse_args()
    args.overrides = {}  # reproduce.overrides_for's
    if args.partial is not None and args.strategy == "random_sizes":
        parser.error("--partial needs a selection strategy, not random_sizes")
    if args.command == "run":
        run(args)
    elif args.command == "table":
        table(args)
    else:
        args.output = args.output or os.path.join(args.output_root, "active_learning.png")
        plot(args)


if __name__ == "__main__":
    main()
