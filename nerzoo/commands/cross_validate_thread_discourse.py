import argparse
import json
import logging
import math
import os
import random
import shutil
import sys
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

from allennlp.commands.subcommand import Subcommand
from allennlp.common import Params
from allennlp.common.checks import ConfigurationError

from nerzoo.metrics.span_set_f1 import ratio

logger = logging.getLogger(__name__)

# The metrics gathered per fold and summarised (those of `ThreadDiscourseF1`).
TASKS = ("link", "da", "joint")
SCORES = tuple(f"{task}_{kind}" for task in TASKS for kind in ("precision", "recall", "f1"))
SUMMARY_FILE = "cross_validation.json"


def stratified_thread_folds(thread_lengths: Sequence[int], num_folds: int, seed: int = 13) -> List[List[int]]:
    """
    Per fold, the sorted indices of its test threads (`thread_lengths[i]` posts in thread `i`): the
    threads, shuffled by `random.Random(seed)` to break ties and sorted longest first, dealt to the
    folds in serpentine order (`0, 1, .., k-1`, then `k-1, .., 0`, ...), one from each band of `k`.
    """
    if num_folds < 2:
        raise ConfigurationError(f"cross-validation needs at least 2 folds, got {num_folds}")
    if num_folds > len(thread_lengths):
        raise ConfigurationError(
            f"{num_folds} folds but only {len(thread_lengths)} threads: every fold needs at least one thread"
        )
    order = list(range(len(thread_lengths)))
    random.Random(seed).shuffle(order)
    order.sort(key=lambda index: -thread_lengths[index])
    folds: List[List[int]] = [[] for _ in range(num_folds)]
    for rank, index in enumerate(order):
        sweep, offset = divmod(rank, num_folds)
        folds[offset if sweep % 2 == 0 else num_folds - 1 - offset].append(index)
    return [sorted(fold) for fold in folds]


class ThreadLine(NamedTuple):
    """One thread of the data file: its line, its number of posts, its gold items per task in `TASKS`."""

    line: str
    num_posts: int
    gold: Dict[str, int]


def read_thread_lines(path: str) -> Tuple[List[ThreadLine], List[str]]:
    """
    The threads of a labelled `thread_discourse` JSON-lines file and the sorted dialogue acts used;
    only what splitting and counting need is checked here, the reader checks the rest when training.
    """
    if not os.path.isfile(path):
        raise ConfigurationError(f"data file not found: {path}")
    threads, acts = [], set()
    with open(path, encoding="utf-8-sig") as handle:
        for line_number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            where = f"{path}:{line_number}"
            try:
                thread = json.loads(line)
            except json.JSONDecodeError as error:
                raise ConfigurationError(f"{where}: invalid JSON ({error.msg})") from None
            posts = thread.get("posts") if isinstance(thread, dict) else None
            if not isinstance(posts, list) or not posts:
                raise ConfigurationError(f"{where}: expected a thread object with a non-empty 'posts' list")
            gold = {"link": 0, "da": 0, "joint": 0}
            for post in posts:
                links = post.get("links") if isinstance(post, dict) else None
                post_acts = post.get("dialogue_acts") if isinstance(post, dict) else None
                if not isinstance(links, list) or not isinstance(post_acts, list):
                    raise ConfigurationError(
                        f"{where}: cross-validation needs labelled threads ('links' and 'dialogue_acts' "
                        "lists in every post)"
                    )
                try:
                    gold["link"] += len(set(links))
                    gold["da"] += len(set(post_acts))
                    gold["joint"] += len(set(zip(links, post_acts)))
                except TypeError:  # unhashable values: let the reader say what is wrong
                    raise ConfigurationError(f"{where}: malformed 'links' or 'dialogue_acts' in {post}") from None
                acts.update(act for act in post_acts if isinstance(act, str))
            threads.append(ThreadLine(line if line.endswith("\n") else line + "\n", len(posts), gold))
    if not threads:
        raise ConfigurationError(f"{path} holds no threads")
    return threads, sorted(acts)


def fold_params(
    config_file: str, overrides: str, train_path: str, dialogue_acts: List[str], cuda_device: Optional[int] = None
) -> Params:
    """The config of one fold: trained on `train_path` only, all `dialogue_acts` in its label vocabulary."""
    try:
        params = Params.from_file(config_file, overrides)
    except (ValueError, RuntimeError) as error:  # jsonnet and override errors
        raise ConfigurationError(f"cannot read {config_file} with overrides {overrides!r}: {error}") from None
    config: Dict[str, Any] = params.as_dict(quiet=True)
    config["train_data_path"] = train_path
    for key in ("validation_data_path", "test_data_path"):
        config.pop(key, None)
    config["evaluate_on_test"] = False
    namespace = config.get("dataset_reader", {}).get("label_namespace", "labels")
    tokens_to_add = config.setdefault("vocabulary", {}).setdefault("tokens_to_add", {})
    tokens_to_add[namespace] = sorted(set(tokens_to_add.get(namespace, [])) | set(dialogue_acts))
    if cuda_device is not None:
        config.setdefault("trainer", {})["cuda_device"] = cuda_device
    return Params(config)


def summarise(fold_metrics: List[Dict[str, float]]) -> Dict[str, Dict[str, float]]:
    """Mean and sample standard deviation (n - 1; 0 for one fold) of each score over the folds."""
    summary: Dict[str, Dict[str, float]] = {"mean": {}, "std": {}}
    for name in SCORES:
        values = [float(metrics[name]) for metrics in fold_metrics]
        mean = math.fsum(values) / len(values)
        variance = math.fsum((value - mean) ** 2 for value in values) / (len(values) - 1) if len(values) > 1 else 0.0
        summary["mean"][name] = mean
        summary["std"][name] = math.sqrt(variance)
    return summary


def pooled_scores(per_fold: List[Dict[str, Any]], gold_items: List[Dict[str, int]]) -> Dict[str, float]:
    """
    Micro-averaged scores over all posts of the test folds: one link and one DA predicted per post, so
    a fold's true positives are `precision * test_posts` (exact after rounding); gold items from the data.
    """
    scores: Dict[str, float] = {}
    for task in TASKS:
        true_positives = sum(round(fold[f"{task}_precision"] * fold["test_posts"]) for fold in per_fold)
        predicted = sum(fold["test_posts"] for fold in per_fold)
        gold = sum(items[task] for items in gold_items)
        scores[f"{task}_precision"] = precision = ratio(true_positives, predicted)
        scores[f"{task}_recall"] = recall = ratio(true_positives, gold)
        scores[f"{task}_f1"] = ratio(2 * precision * recall, precision + recall)
    return scores


@Subcommand.register("cross-validate-thread-discourse")
class CrossValidateThreadDiscourse(Subcommand):
    """
    `allennlp cross-validate-thread-discourse CONFIG DATA.jsonl --folds 10 -s OUT [--seed 13] [-o OVERRIDES]` runs
    k-fold cross-validation of a thread discourse model (`me_crf_thread_discourse`) over a `thread_discourse`
    file, the protocol of Liu, Baldwin & Cohn (2017, §4.3): 10 folds, "stratifying at the thread
    level": whole threads go to folds, balanced by thread length (`stratified_thread_folds`).

    Fold `k` (1-based) trains on the other folds' threads (`OUT/fold-k/train.jsonl`) into
    `OUT/fold-k/model/` for the config's epochs, with no validation data, and evaluates the final
    model on its own threads (`test.jsonl`) into `metrics.json`.  `OUT/cross_validation.json` holds
    the per-fold link/DA/joint precision, recall and F1, their mean and sample standard deviation and
    `pooled` (micro-averaged over all posts); a table is printed.  Every fold's label vocabulary holds
    all dialogue acts of DATA; words come from the training folds only.

    Registered as a `Subcommand` with name "cross-validate-thread-discourse".
    """

    def add_subparser(self, parser: argparse._SubParsersAction) -> argparse.ArgumentParser:
        subparser = parser.add_parser(
            self.name, description=self.__doc__, help="k-fold cross-validation over forum threads."
        )
        subparser.add_argument(
            "param_path", help="training config (e.g. training_config/me_crf_thread_discourse.jsonnet)"
        )
        subparser.add_argument("data_file", help="labelled thread_discourse JSON lines, split into the folds")
        subparser.add_argument("--folds", type=int, default=10, help="number of folds (default 10)")
        subparser.add_argument("-s", "--serialization-dir", required=True, help="output directory")
        subparser.add_argument("--seed", type=int, default=13, help="seed of the fold split's tie-breaking")
        subparser.add_argument("-o", "--overrides", default="", help="JSON overrides of the config, as for train")
        subparser.add_argument("-f", "--force", action="store_true", help="remove the output directory first")
        subparser.add_argument(
            "--cuda-device", type=int, default=None, help="device to train and evaluate on (default: the config's)"
        )
        subparser.set_defaults(func=_cross_validate_thread_discourse)
        return subparser


def _cross_validate_thread_discourse(args: argparse.Namespace) -> None:
    try:
        cross_validate_thread_discourse(
            args.param_path,
            args.data_file,
            args.serialization_dir,
            num_folds=args.folds,
            seed=args.seed,
            overrides=args.overrides,
            force=args.force,
            cuda_device=args.cuda_device,
            include_package=getattr(args, "include_package", None),
        )
    except ConfigurationError as error:
        sys.exit(f"error: {error}")


def cross_validate_thread_discourse(
    config_file: str,
    data_file: str,
    output_dir: str,
    num_folds: int = 10,
    seed: int = 13,
    overrides: str = "",
    force: bool = False,
    cuda_device: Optional[int] = None,
    include_package: Optional[Sequence[str]] = None,
) -> Dict[str, Any]:
    """Runs the cross-validation described in `CrossValidateThreadDiscourse`; returns what it writes to `cross_validation.json`."""
    from allennlp.commands.evaluate import evaluate_from_archive
    from allennlp.commands.train import train_model

    if not os.path.isfile(config_file):
        raise ConfigurationError(f"config file not found: {config_file}")
    threads, acts = read_thread_lines(data_file)
    folds = stratified_thread_folds([thread.num_posts for thread in threads], num_folds, seed)
    if os.path.exists(output_dir) and os.listdir(output_dir):
        if not force:
            raise ConfigurationError(f"output directory {output_dir} is not empty (use --force to replace it)")
        shutil.rmtree(output_dir)
    os.makedirs(output_dir, exist_ok=True)

    per_fold: List[Dict[str, Any]] = []
    gold_items: List[Dict[str, int]] = []
    for fold_number, test_threads in enumerate(folds, start=1):
        fold_dir = os.path.join(output_dir, f"fold-{fold_number}")
        os.makedirs(fold_dir)
        test_set = set(test_threads)
        train_path = os.path.join(fold_dir, "train.jsonl")
        test_path = os.path.join(fold_dir, "test.jsonl")
        with open(train_path, "w", encoding="utf-8") as handle:
            handle.writelines(thread.line for index, thread in enumerate(threads) if index not in test_set)
        with open(test_path, "w", encoding="utf-8") as handle:
            handle.writelines(threads[index].line for index in test_threads)

        logger.info(
            "cross-validate-thread-discourse: fold %d of %d, %d test threads", fold_number, num_folds, len(test_threads)
        )
        params = fold_params(config_file, overrides, train_path, acts, cuda_device)
        model_dir = os.path.join(fold_dir, "model")
        evaluation_device = params.get("trainer", {}).get("cuda_device", -1) if cuda_device is None else cuda_device
        train_model(params, model_dir, include_package=list(include_package or []))
        metrics = evaluate_from_archive(
            os.path.join(model_dir, "model.tar.gz"),
            test_path,
            metrics_output_file=os.path.join(fold_dir, "metrics.json"),
            cuda_device=evaluation_device if isinstance(evaluation_device, int) else -1,
        )
        missing = [name for name in SCORES if name not in metrics]
        if missing:
            raise ConfigurationError(
                f"the model reports no {', '.join(missing)}: cross-validate-thread-discourse needs a thread discourse "
                "model (me_crf_thread_discourse)"
            )
        per_fold.append(
            {
                "fold": fold_number,
                "train_threads": len(threads) - len(test_threads),
                "test_threads": len(test_threads),
                "test_posts": sum(threads[index].num_posts for index in test_threads),
                **{name: float(metrics[name]) for name in SCORES},
            }
        )
        gold_items.append({task: sum(threads[index].gold[task] for index in test_threads) for task in TASKS})

    result = {
        "config": config_file,
        "data": data_file,
        "folds": num_folds,
        "seed": seed,
        "overrides": overrides,
        "per_fold": per_fold,
        **summarise(per_fold),
        "pooled": pooled_scores(per_fold, gold_items),
    }
    with open(os.path.join(output_dir, SUMMARY_FILE), "w", encoding="utf-8") as handle:
        json.dump(result, handle, indent=2)
    print(format_table(result))
    return result


def format_table(result: Dict[str, Any]) -> str:
    """The per-fold F1 scores and their mean +- std, as a plain-text table."""
    header = f"{'fold':>5} {'train':>6} {'test':>5} {'posts':>6} {'link F1':>15} {'DA F1':>15} {'joint F1':>15}"
    rows = [header, "-" * len(header)]
    for fold in result["per_fold"]:
        rows.append(
            f"{fold['fold']:>5} {fold['train_threads']:>6} {fold['test_threads']:>5} {fold['test_posts']:>6} "
            f"{fold['link_f1']:>15.4f} {fold['da_f1']:>15.4f} {fold['joint_f1']:>15.4f}"
        )
    rows.append("-" * len(header))
    mean, std = result["mean"], result["std"]
    scores = " ".join(f"{mean[name]:>7.4f} ± {std[name]:.4f}".rjust(15) for name in ("link_f1", "da_f1", "joint_f1"))
    rows.append(f"{'mean ± std':>26} {scores}")
    pooled = " ".join(f"{result['pooled'][name]:>15.4f}" for name in ("link_f1", "da_f1", "joint_f1"))
    rows.append(f"{'pooled (micro)':>26} {pooled}")
    return "\n".join(rows)
