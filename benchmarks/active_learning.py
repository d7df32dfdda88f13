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
import bisect
import glob
import itertools
import json
import os
import random
from collections import defaultdict
from typing import Any, Dict, List, Optional

import harness
import partial_annotation
import reproduce
import results
from nerzoo_runtime.tag_scheme import spans_to_tags

STRATEGIES = ("random", "mnlp", "token_entropy", "expected_errors", "random_sizes")
SIZES = (1, 2, 4, 8, 16, 32, 64, 100)  # random_sizes: % of the pool's words
FULL_DATA_TEST_F1 = 89.92  # bilstm_crf on conll2003, the mean of 3 seeds (docs/RESULTS.md)
# name -> a folder and in it the pool (its gold labels the annotator), dev and test; `fixtures` for a smoke test
DATA = {
    "conll2003": (os.path.join(harness.SHARED_DATA, "conll2003"), ("eng.train", "eng.testa", "eng.testb")),
    "fixtures": (os.path.join(harness.REPO_ROOT, "fixtures", "conll2003"), ("train.txt", "dev.txt", "test.txt")),
}

Labelled = Dict[int, Optional[List[int]]]  # pool index -> its labelled token positions (None: all)


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
    command = ["select", archive, candidates, "--budget", str(args.round_words), "--output", chosen]
    command += ["--strategy", args.strategy, "--seed", str(args.seed)]
    command += [] if args.partial is None else ["--partial", str(args.partial)]
    if harness.allennlp(command, os.path.join(folder, "select.log"), args.env):
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
    """`bilstm_crf` trained on the labelled set by `reproduce.run` in `folder`; the round's record."""
    train_file = os.path.join(folder, "train.bio")
    write_labelled(train_file, labelled, pool)
    dev, test = (os.path.join(args.data_dir, f"{split}.bio") for split in ("dev", "test"))
    overrides = partial_annotation.bio_overrides(train_file, dev, test)
    if args.partial is not None:
        overrides["model.head.open_tokens"] = {"entity_ratio": 0.15}
    reproduce.MODELS[args.name] = {"config": "bilstm_crf", "overrides": overrides}
    result = reproduce.run(args.name, args.data, args.seed, args, run_dir=folder)
    if result["returncode"] != 0:
        raise SystemExit(f"allennlp train failed, see {folder}/train.log")
    for path in glob.glob(os.path.join(folder, "model", "*.th")):  # model.tar.gz keeps the best weights
        os.remove(path)
    return {key: result[key] for key in ("dev", "test", "epochs", "best_epoch")}


def read_pool(args) -> List[Any]:
    """The pool's sentences (token rows, gold spans); dev and test in BIO in OUTPUT_ROOT/data/DATA/, once."""
    source, (pool_file, *evaluated) = DATA[args.data]
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
    words = list(itertools.accumulate(len(pool[index][0]) for index in order))
    return [dict.fromkeys(order[: bisect.bisect_left(words, pool_words * share / 100) + 1]) for share in SIZES]


def run(args) -> None:
    pool = read_pool(args)
    pool_words = sum(len(rows) for rows, _ in pool)
    args.env = harness.thread_env(args.threads)
    args.round_words = max(1, round(pool_words * args.round_share / 100))
    run_dir = os.path.join(args.output_root, f"{args.name}-{args.seed}")
    settings = {"name": args.name, "strategy": args.strategy, "partial": args.partial, "seed": args.seed}
    settings.update(data=args.data, pool_sentences=len(pool), pool_words=pool_words, round_words=args.round_words)
    settings.update(seed_share=args.seed_share, patience=args.patience, max_epochs=args.max_epochs)
    curve_path = os.path.join(run_dir, "curve.json")
    curve = harness.read_json(curve_path) if os.path.exists(curve_path) else dict(settings, rounds=[])
    if changed := {key: curve.get(key) for key in settings if curve.get(key) != settings[key]}:
        raise SystemExit(f"{curve_path} was run with other settings ({changed}); use another --output-root")
    curve["cap"] = args.cap  # a higher cap goes on with the run
    order = list(range(len(pool)))
    random.Random(args.seed).shuffle(order)
    plans = growing_sizes(order, pool, pool_words) if args.strategy == "random_sizes" else []
    labelled: Labelled = dict.fromkeys(order[: max(1, round(len(pool) * args.seed_share / 100))])
    for number in itertools.count():
        folder = os.path.join(run_dir, f"round-{number:02d}")
        os.makedirs(folder, exist_ok=True)
        labelled = plans[number] if plans else labelled
        saved = os.path.join(folder, "labelled.json")
        labelled = dict(harness.read_json(saved)) if os.path.exists(saved) else labelled
        harness.write_json(saved + ".part", [[index, positions] for index, positions in sorted(labelled.items())])
        os.replace(saved + ".part", saved)
        words = sum(
            len(pool[index][0]) if positions is None else len(positions) for index, positions in labelled.items()
        )
        if number == len(curve["rounds"]):  # rounds 0, 1, ... in order
            record = {"round": number, "words": words, "share": 100 * words / pool_words, "sentences": len(labelled)}
            curve["rounds"].append(dict(record, **train_round(args, folder, labelled, pool)))
            harness.write_json(curve_path, curve)
        record = curve["rounds"][number]
        shown = f"{record['words']} words ({record['share']:.2f}%), dev {record['dev']:.2f}, test {record['test']:.2f}"
        print(f"{args.name} seed {args.seed} round {number}: {shown}, {record['epochs']} epochs", flush=True)
        capped = words >= pool_words * args.cap / 100 or len(labelled) == len(pool)
        if (number + 1 == len(plans)) if plans else capped:
            break
        following = os.path.join(run_dir, f"round-{number + 1:02d}")
        if not plans and not os.path.exists(os.path.join(following, "labelled.json")):
            os.makedirs(following, exist_ok=True)
            labelled = select(args, os.path.join(folder, "model", "model.tar.gz"), labelled, pool, following)


def mean_curves(output_root: str) -> Dict[str, List[Dict[str, Any]]]:
    """The runs' curves (curve.json under `output_root`) by run name, over its seeds by round, to the last
    round every seed has: the mean share, dev and test F1 over the seeds, test's range, the seeds."""
    rounds: Dict[str, Dict[int, List[Dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for folder in sorted(os.listdir(output_root)):
        if os.path.exists(path := os.path.join(output_root, folder, "curve.json")):
            curve = harness.read_json(path)
            for record in curve["rounds"]:
                rounds[curve["name"]][record["round"]].append(record)
    curves = defaultdict(list)
    for name, by_round in rounds.items():
        for number, found in sorted(by_round.items()):
            if len(found) < len(by_round[0]):  # a seed stopped earlier
                break
            tests = [record["test"] for record in found]
            means = {key: sum(record[key] for record in found) / len(found) for key in ("share", "dev", "test")}
            curves[name].append({"round": number, "runs": len(found), "low": min(tests), "high": max(tests), **means})
    return dict(curves)


def reached(points: List[Dict[str, Any]], target: float) -> Optional[float]:
    """The first mean share of the words at which the mean test F1 reaches `target`, or None."""
    return next((point["share"] for point in points if point["test"] >= target), None)


def table(args) -> None:
    curves = mean_curves(args.output_root)
    columns = ["strategy", "round", "seeds", "% of words", "dev F1", "test F1 (range)"]
    rows = []
    for name, points in curves.items():
        for point in points:
            spread = f" ({point['low']:.2f}-{point['high']:.2f})" if point["runs"] > 1 else ""
            cells = [name, point["round"], point["runs"], f"{point['share']:.2f}", f"{point['dev']:.2f}"]
            rows.append(dict(zip(columns, cells + [f"{point['test']:.2f}{spread}"])))
    print("\n".join(results.markdown_table(columns, rows)))
    print(f"\nTarget: test F1 {args.target:.2f}")
    shares = {name: reached(points, args.target) for name, points in curves.items()}
    baseline = shares.get("random") or shares.get("random_sizes")
    randoms = {"random", "random_sizes"} & curves.keys()
    for name, points in curves.items():
        if shares[name] is None:
            best = max(points, key=lambda point: point["test"])
            print(f"{name}: not reached (best {best['test']:.2f} at {best['share']:.2f}% of the words)")
            continue
        versus = ", random does not reach it" if randoms and name not in randoms else ""
        versus = f", {baseline / shares[name]:.1f}x fewer words than random" if baseline and versus else versus
        print(f"{name}: reached at {shares[name]:.2f}% of the words{versus}")


def plot(args) -> None:
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7, 4.5))
    axes = figure.subplots()
    for name, points in mean_curves(args.output_root).items():
        seeds = max(point["runs"] for point in points)
        shares, tests = [point["share"] for point in points], [point["test"] for point in points]
        (line,) = axes.plot(shares, tests, marker=".", label=f"{name} ({seeds} seed{'s' * (seeds > 1)})")
        if seeds > 1:
            lows, highs = [point["low"] for point in points], [point["high"] for point in points]
            axes.fill_between(shares, lows, highs, color=line.get_color(), alpha=0.2)
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
    args.overrides = {}  # reproduce.run's
    args.name = args.strategy if args.partial is None else f"{args.strategy}_partial{args.partial:g}"
    args.output = args.output or os.path.join(args.output_root, "active_learning.png")
    if args.partial is not None and args.strategy == "random_sizes":
        parser.error("--partial needs a selection strategy, not random_sizes")
    {"run": run, "table": table, "plot": plot}[args.command](args)


if __name__ == "__main__":
    main()
