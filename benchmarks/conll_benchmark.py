#!/usr/bin/env python
"""
Trains and evaluates, in one run on CoNLL-2003 with a fixed budget each, a nerzoo config (the main
model, `--config`, bilstm_crf by default), the reference allennlp-models `crf_tagger` built with the
same embedder, encoder, dropout, token indexers, vocabulary and trainer, twice (with random batches,
as a `crf_tagger` config batches, and with the main config's bucketed batches, so that the gain of
nerzoo's code and the gain of bucketing can be told apart), and any `--extra` nerzoo configs; times
prediction of the test set for each, and adds one row per model to the CoNLL-2003 table of docs/RESULTS.md with its
ratios to the references and to the main model.

Run from anywhere (it works in the repository root):

    .venv/bin/python benchmarks/conll_benchmark.py --epochs 15
    .venv/bin/python benchmarks/conll_benchmark.py --epochs 15 \
        --extra deptree_ner=training_config/deptree_ner.jsonnet --max-epochs deptree_ner=3 \
        --extra fofe_ner=training_config/fofe_ner.jsonnet --max-epochs fofe_ner=3

See benchmarks/README.md for what is measured and how.

Helper mode, used by the script itself in a subprocess (one per archive):

    .venv/bin/python benchmarks/conll_benchmark.py --measure-predict ARCHIVE --kind nerzoo \
        --test FILE --predict-output OUT.json

The training, evaluation and timing engine is `harness.py`; the rows go to
docs/results/conll2003_benchmark.jsonl and the table of docs/RESULTS.md is rendered from them
(`results.py`).
"""

import argparse
import datetime
import importlib.util
import json
import logging
import os
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

import harness
import results
from harness import PYTHON, REPO_ROOT, absolute, display_path, fmt, format_seconds, ratio, run_logged

TABLE = "conll2003_benchmark"

DEFAULT_CONFIG = "training_config/bilstm_crf.jsonnet"
DEFAULT_TRAIN = "../shared/data/conll2003/eng.train"
DEFAULT_DEV = "../shared/data/conll2003/eng.testa"
DEFAULT_TEST = "../shared/data/conll2003/eng.testb"
DEFAULT_GLOVE = "../shared/data/embeddings_glove6b50d_filtered/glove.6B.50d.filtered.txt.gz"
DEFAULT_RESULTS = "docs/RESULTS.md"

PREDICT_BATCH_SIZE = 64
PREDICT_REPEATS = 3
REFERENCE = "reference"
BUCKETED_REFERENCE = "reference_bucketed"
REFERENCE_LABEL = "allennlp-models crf_tagger (reference)"
BUCKETED_REFERENCE_LABEL = "allennlp-models crf_tagger (reference, bucketed batches as nerzoo's config)"
SECTION_HEADING = "## CoNLL-2003 English NER: nerzoo models and the reference crf_tagger, random and bucketed batches"
TABLE_HEADER = [
    "date",
    "model",
    "config",
    "batches (train/dev size)",
    "data (train/dev/test sentences)",
    "epochs run (best)",
    "train wall time (trainer)",
    "train sent/s",
    "vs ref",
    "vs bucketed ref",
    "dev F1",
    "test F1",
    "predict sent/s",
    "predict vs ref",
    "predict vs main",
]
SECTION_INTRO = """Written by `benchmarks/conll_benchmark.py` (see `benchmarks/README.md`). One run trains, one after
the other: the main nerzoo model (`--config`, `training_config/bilstm_crf.jsonnet` by default); the
allennlp-models reference `crf_tagger` with the same embedder, encoder, dropout, token indexers,
vocabulary and trainer, once with random batches of the main config's sizes (as a `crf_tagger`
config batches; "ref") and once with the main config's own batches, bucketed by length ("bucketed
ref"); then the `--extra` nerzoo configs. Columns:

- **date**: local start time of the run; the run's note (command line, machine, load) has the same time.
- **model**: the row's model; "main" is the first nerzoo row.
- **config**: the nerzoo config and its reader, or the generated reference config (in the run's output folder).
- **batches (train/dev size)**: how the training batches are formed (the `bucket` batch sampler and its
  sorting keys, or random batches) and the training / validation batch sizes.
- **data**: train/dev/test files and their sentence counts (`-DOCSTART-` lines skipped).
- **epochs run (best)**: epochs trained (patience or the time budget may stop training early) and, in
  brackets, the epoch (counted from 1) whose weights were kept; "num_epochs capped at N" when
  `--max-epochs` gave the model fewer epochs than `--epochs` (enough for a speed figure, not for F1).
- **train wall time (trainer)**: wall time of the whole `allennlp train` process and, in brackets, the
  trainer's own `training_duration`.
- **train sent/s**: train sentences x epochs run / `training_duration` seconds (the validation pass
  after every epoch included).
- **vs ref**: train sent/s divided by the reference's with random batches: code and batching gains together.
- **vs bucketed ref**: train sent/s divided by the reference's with the main config's bucketed batches:
  the code's gain alone (the bucketed reference's own "vs ref" is the batching's gain alone).
- **dev F1 / test F1**: span F1 x 100 (`f1-measure-overall` from `allennlp evaluate` on the archive).
- **predict sent/s**: in-process batched prediction (batch size 64, file order) of all test sentences,
  timed after loading the archive and reading the file (fastest of three passes): nerzoo models
  through their `sequence_tagger` predictor (`predict_batch_instance`, with posteriors and confidences),
  the reference through `Model.forward_on_instances` (which applies `make_output_human_readable`).
- **predict vs ref / predict vs main**: predict sent/s divided by the reference's (random batches) or
  by the main nerzoo model's.
"""


def random_batches(loader: Dict[str, Any], shuffle: bool) -> Dict[str, Any]:
    """
    A data loader's params with its batch sampler, if any, replaced by plain batches of the sampler's
    size (`shuffle`: random batches, else file order); a loader without a batch sampler is returned as it is.
    """
    loader = dict(loader)
    sampler = loader.pop("batch_sampler", None)
    if sampler is None:
        return loader
    return dict(loader, batch_size=sampler["batch_size"], shuffle=shuffle)


def validation_loader(resolved: Dict[str, Any]) -> Dict[str, Any]:
    """The validation data loader's params of a config (AllenNLP falls back on the training loader's)."""
    return resolved.get("validation_data_loader") or resolved["data_loader"]


def batches_cell(resolved: Dict[str, Any]) -> str:
    """The "batches" cell: the training batches' kind and the training / validation batch sizes."""

    def size(loader: Dict[str, Any]) -> Any:
        return (loader.get("batch_sampler") or loader).get("batch_size", "?")

    train = resolved["data_loader"]
    sampler = train.get("batch_sampler")
    if sampler is None:
        kind = "random" if train.get("shuffle", True) else "file order"
    elif sampler.get("type") == "bucket":
        keys = ", ".join(sampler.get("sorting_keys") or ["guessed"])
        kind = f"bucketed by {keys}"
    else:
        kind = f"{sampler.get('type')} sampler"
    return f"{kind}, {size(train)}/{size(validation_loader(resolved))}"


def allennlp_embedder(embedder: Dict[str, Any]) -> Dict[str, Any]:
    """The embedder config with nerzoo's `fast_character_encoding` spelled as allennlp's
    `character_encoding`: the same module on every real token, so the reference can build it."""
    embedders = {
        name: dict(params, type="character_encoding") if params.get("type") == "fast_character_encoding" else params
        for name, params in embedder.get("token_embedders", {}).items()
    }
    return dict(embedder, token_embedders=embedders) if embedders else embedder


def allennlp_indexers(indexers: Optional[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """The token indexers with nerzoo's `fast_characters` spelled as allennlp's `characters`
    (the same ids and tensors), so the reference pads as allennlp does."""
    if indexers is None:
        return None
    return {
        name: dict(params, type="characters") if params.get("type") == "fast_characters" else params
        for name, params in indexers.items()
    }


def allennlp_encoder(encoder: Dict[str, Any]) -> Dict[str, Any]:
    """The encoder config with nerzoo's `fast_lstm` spelled as allennlp's `lstm` (the same
    parameters and outputs at real tokens, run on packed sequences), so the reference runs allennlp's."""
    return dict(encoder, type="lstm") if encoder.get("type") == "fast_lstm" else encoder


def reference_config(
    resolved: Dict[str, Any], args, bucketed: bool = False, num_epochs: Optional[int] = None
) -> Dict[str, Any]:
    """
    The allennlp-models `crf_tagger` + `conll2003` reader, with the embedder, encoder, dropout, token
    indexers, vocabulary and trainer of the (overridden) nerzoo config `resolved`.  With `bucketed`
    it also takes the config's data loaders as they are; without, random training batches and
    validation batches in file order, of the config's batch sizes.  `num_epochs`: the trainer's,
    when not the config's.
    """
    model = resolved["model"]
    head = model.get("head") or {}
    reader = resolved["dataset_reader"]
    tag_scheme = head.get("tag_scheme", "BIOUL")
    if tag_scheme != "BIOUL":
        print(f"  note: nerzoo head uses {tag_scheme}; the reference uses BIOUL (its reader only converts to BIOUL)")
    data_loader, validation_data_loader = resolved["data_loader"], validation_loader(resolved)
    if not bucketed:
        data_loader = random_batches(data_loader, shuffle=True)
        validation_data_loader = random_batches(validation_data_loader, shuffle=False)
    trainer = dict(resolved["trainer"])
    if num_epochs is not None:
        trainer["num_epochs"] = num_epochs
    return {
        "dataset_reader": {
            "type": "conll2003",
            "tag_label": "ner",
            "coding_scheme": "BIOUL",
            "token_indexers": allennlp_indexers(reader.get("token_indexers"))
            or {
                "tokens": {"type": "single_id", "lowercase_tokens": True},
                "token_characters": {"type": "characters", "min_padding_length": 3},
            },
        },
        "train_data_path": args.train,
        "validation_data_path": args.dev,
        "evaluate_on_test": False,
        "vocabulary": resolved["vocabulary"],
        "model": {
            "type": "crf_tagger",
            "label_encoding": "BIOUL",
            "constrain_crf_decoding": True,
            "calculate_span_f1": True,
            "include_start_end_transitions": head.get("include_start_end_transitions", True),
            "dropout": model.get("dropout", 0.5),
            "text_field_embedder": allennlp_embedder(model["text_field_embedder"]),
            "encoder": allennlp_encoder(model["encoder"]),
        },
        "data_loader": data_loader,
        "validation_data_loader": validation_data_loader,
        "trainer": trainer,
    }


def train_and_measure(
    name: str,
    kind: str,
    config_path: str,
    overrides: Optional[Dict[str, Any]],
    include_package: str,
    run_dir: str,
    args,
) -> Dict[str, Any]:
    """`train_and_evaluate` on dev and test, then the in-process prediction timing."""
    result = harness.train_and_evaluate(
        name, config_path, overrides, include_package, run_dir, args.max_minutes, {"dev": args.dev, "test": args.test}
    )
    result["kind"] = kind
    if "archive" not in result:
        return result
    archive = result["archive"]

    output_file = os.path.join(run_dir, f"{name}.predict_timing.json")
    command = [PYTHON, os.path.abspath(__file__), "--measure-predict", archive, "--kind", kind]
    command += ["--test", args.test, "--predict-output", output_file]
    print(f"=== {name}: timing prediction on test", flush=True)
    run = run_logged(command, os.path.join(run_dir, f"{name}.predict_timing.log"), 3600)
    if run["returncode"] == 0 and os.path.exists(output_file):
        with open(output_file) as handle:
            timing = json.load(handle)
        result["predict_sentences_per_second"] = timing["sentences_per_second"]
        result["predict_seconds"] = timing["seconds"]
    else:
        result.setdefault("error", "prediction timing failed")
    return result


def measure_predict(archive_path: str, kind: str, test_path: str, output_path: str) -> None:
    """Helper mode: time batched prediction of every test sentence with the archived model."""
    import torch
    from allennlp.common.util import import_module_and_submodules
    from allennlp.data.tokenizers import Token
    from allennlp.models.archival import load_archive

    import_module_and_submodules("nerzoo" if kind == "nerzoo" else "allennlp_models.tagging")
    archive = load_archive(archive_path, cuda_device=-1)
    reader = archive.dataset_reader
    model = archive.model
    model.eval()

    # Read the file with the archive's own reader, then rebuild each sentence without its gold tags,
    # as a caller with raw tokens would (so no loss or metrics are computed while timing).
    read = list(reader.read(test_path))
    sentences = [[token.text for token in instance["tokens"].tokens] for instance in read]
    if kind == "nerzoo":
        from allennlp.predictors import Predictor

        predictor = Predictor.from_archive(archive, "sequence_tagger")
        if "head_indices" in read[0].fields:
            # Dependency readers: the tree read with the file (parsed once, cached), not parsed again.
            instances = [
                reader.text_to_instance(
                    words,
                    instance["pos_tags"].labels,
                    instance["dependency_labels"].labels,
                    instance["head_indices"].labels,
                )
                for words, instance in zip(sentences, read)
            ]
        else:
            instances = [reader.text_to_instance(words) for words in sentences]

        def predict(batch):
            return predictor.predict_batch_instance(batch)

    else:
        instances = [reader.text_to_instance([Token(word) for word in words]) for words in sentences]

        def predict(batch):
            # forward_on_instances runs forward and then make_output_human_readable (tag strings).
            return model.forward_on_instances(batch)

    for instance in instances:
        reader.apply_token_indexers(instance)
    batches = [instances[start : start + PREDICT_BATCH_SIZE] for start in range(0, len(instances), PREDICT_BATCH_SIZE)]
    predict(batches[0])  # warm-up, not timed
    # The whole test set is predicted PREDICT_REPEATS times; the fastest pass counts (the least
    # disturbed by other processes).
    passes = []
    for _ in range(PREDICT_REPEATS):
        start = time.perf_counter()
        num_predicted = 0
        for batch in batches:
            num_predicted += len(predict(batch))
        passes.append(time.perf_counter() - start)
    seconds = min(passes)
    result = {
        "archive": archive_path,
        "kind": kind,
        "sentences": num_predicted,
        "tokens": sum(len(words) for words in sentences),
        "batch_size": PREDICT_BATCH_SIZE,
        "seconds": seconds,
        "seconds_per_pass": passes,
        "sentences_per_second": num_predicted / seconds,
        "torch_threads": torch.get_num_threads(),
    }
    with open(output_path, "w") as handle:
        json.dump(result, handle, indent=2)
    print(json.dumps(result, indent=2))


def result_row(
    result: Dict[str, Any], by_name: Dict[str, Dict[str, Any]], main_name: str, common: Dict[str, Any]
) -> List[str]:
    """
    One table row; `by_name`: every result of the run by name (the references' and the main model's
    rates are the denominators of the ratios), `main_name`: the main nerzoo model's name.
    """

    def versus(key: str, other: str, itself: str) -> str:
        if result["name"] == other:
            return f"1.00x ({itself})" if result.get(key) else "n/a"
        if other not in by_name:
            return "n/a"
        return ratio(result.get(key), by_name[other].get(key))

    train, predict = "train_sentences_per_second", "predict_sentences_per_second"
    model = result["label"]
    if result.get("error"):
        model += f" (ERROR: {result['error']})"
    return [
        common["date"],
        model,
        result["config_display"],
        result.get("batches", "n/a"),
        common["data"],
        *harness.epochs_and_wall_cells(result),
        fmt(result.get(train), 1),
        versus(train, REFERENCE, "ref"),
        versus(train, BUCKETED_REFERENCE, "bucketed ref"),
        fmt(result.get("dev_f1")),
        fmt(result.get("test_f1")),
        fmt(result.get(predict), 1),
        versus(predict, REFERENCE, "ref"),
        versus(predict, main_name, "main"),
    ]


# --------------------------------------------------------------------------------------------------
# Main


def named_values(values: List[str], option: str) -> Dict[str, str]:
    """`["NAME=VALUE", ...]` of a repeated option as a dict (in order); a missing `=` or a repeated NAME is an error."""
    named: Dict[str, str] = {}
    for value in values:
        name, separator, rest = value.partition("=")
        if not separator or not name or not rest:
            raise ValueError(f"{option} expects NAME=VALUE, got {value!r}")
        if name in named:
            raise ValueError(f"{option} names {name} twice")
        named[name] = rest
    return named


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Train and evaluate nerzoo configs and the allennlp-models crf_tagger reference (random and "
        "bucketed batches) on CoNLL-2003 in one run; add the rows to docs/results/ and docs/RESULTS.md."
    )
    parser.add_argument("--config", default=DEFAULT_CONFIG, help="the main nerzoo training config (jsonnet)")
    parser.add_argument("--train", default=None, help=f"train file (default {DEFAULT_TRAIN})")
    parser.add_argument("--dev", default=None, help=f"validation file (default {DEFAULT_DEV})")
    parser.add_argument("--test", default=None, help=f"test file (default {DEFAULT_TEST})")
    parser.add_argument("--glove", default=None, help=f"pretrained embeddings (default {DEFAULT_GLOVE})")
    parser.add_argument(
        "--epochs", type=int, default=15, help="trainer.num_epochs of every model (patience stays as in the configs)"
    )
    parser.add_argument(
        "--max-epochs",
        action="append",
        default=[],
        metavar="NAME=N",
        help="cap one model's trainer.num_epochs at N (repeatable); names: the main config's file stem "
        f"(bilstm_crf by default), {REFERENCE}, {BUCKETED_REFERENCE} and the --extra names",
    )
    parser.add_argument(
        "--extra",
        action="append",
        default=[],
        metavar="NAME=CONFIG",
        help="another nerzoo config trained and measured in the same run, after the references (repeatable)",
    )
    parser.add_argument(
        "--max-minutes",
        type=float,
        default=60.0,
        help="training budget per model: training stops after the epoch whose successor would overrun it; "
        "the process is killed at 1.25 x budget + 5 min",
    )
    parser.add_argument("--no-reference", action="store_true", help="skip both allennlp-models crf_tagger trainings")
    parser.add_argument(
        "--no-bucketed-reference",
        action="store_true",
        help="skip the crf_tagger with the main config's bucketed batches",
    )
    parser.add_argument("--output-dir", default=None, help="default runs/benchmarks/<timestamp>")
    parser.add_argument(
        "--results",
        default=DEFAULT_RESULTS,
        help="results file whose table is rendered (the rows go to results/ beside it)",
    )
    parser.add_argument(
        "--label", default=None, help="row name of the main nerzoo model (default: nerzoo <config stem>)"
    )
    parser.add_argument("--measure-predict", metavar="ARCHIVE", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--kind", choices=["nerzoo", "reference"], default="nerzoo", help=argparse.SUPPRESS)
    parser.add_argument("--predict-output", default=None, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def config_stem(path: str) -> str:
    return os.path.splitext(os.path.basename(path))[0]


def main(argv: Optional[List[str]] = None) -> int:
    logging.basicConfig(level=logging.WARNING)
    raw_argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(raw_argv)
    if args.measure_predict:
        measure_predict(
            absolute(args.measure_predict), args.kind, absolute(args.test or DEFAULT_TEST), args.predict_output
        )
        return 0

    # User paths are relative to the current directory, defaults to the repository root.
    def resolve(value: Optional[str], default: str) -> str:
        return absolute(value) if value is not None else os.path.normpath(os.path.join(REPO_ROOT, default))

    args.config = absolute(args.config) if args.config != DEFAULT_CONFIG else os.path.join(REPO_ROOT, DEFAULT_CONFIG)
    args.train = resolve(args.train, DEFAULT_TRAIN)
    args.dev = resolve(args.dev, DEFAULT_DEV)
    args.test = resolve(args.test, DEFAULT_TEST)
    args.glove = resolve(args.glove, DEFAULT_GLOVE)
    args.results = (
        absolute(args.results) if args.results != DEFAULT_RESULTS else os.path.join(REPO_ROOT, DEFAULT_RESULTS)
    )
    main_name = config_stem(args.config)
    try:
        extras = {name: absolute(path) for name, path in named_values(args.extra, "--extra").items()}
        caps = {name: int(value) for name, value in named_values(args.max_epochs, "--max-epochs").items()}
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    names = [main_name, REFERENCE, BUCKETED_REFERENCE]
    clashes = [name for name in extras if name in names]
    unknown = [name for name in caps if name not in names and name not in extras]
    if clashes or unknown or any(cap < 1 for cap in caps.values()):
        print(
            f"error: --extra names already taken {clashes}, --max-epochs unknown names {unknown} (or a cap "
            f"below 1); the names are {names + list(extras)}",
            file=sys.stderr,
        )
        return 2
    for path in (args.config, args.train, args.dev, args.test, args.glove, *extras.values()):
        if not os.path.exists(path):
            print(f"error: {path} does not exist", file=sys.stderr)
            return 2
    started = datetime.datetime.now()
    load_before = os.getloadavg()
    if load_before[0] > 1.0:
        print(
            f"warning: 1-minute load average is {load_before[0]:.2f}; other processes will slow the timings", flush=True
        )
    run_dir = absolute(args.output_dir) or os.path.join(
        REPO_ROOT, "runs", "benchmarks", started.strftime("%Y%m%d-%H%M%S")
    )
    os.makedirs(run_dir, exist_ok=True)
    os.chdir(REPO_ROOT)  # .allennlp_plugins and the nerzoo package are found from here

    from allennlp.common.params import Params

    counts = {
        split: harness.count_sentences(path)
        for split, path in (("train", args.train), ("dev", args.dev), ("test", args.test))
    }
    print(f"sentences: {counts}", flush=True)

    def epochs_of(name: str) -> Tuple[int, Optional[int]]:
        """The model's num_epochs and, when --max-epochs lowered it, the cap."""
        cap = caps.get(name)
        return (cap, cap) if cap is not None and cap < args.epochs else (args.epochs, None)

    def nerzoo_model(name: str, config: str, label: str) -> Dict[str, Any]:
        """A nerzoo model of the run: its overrides (written to the run folder) and resolved config."""
        num_epochs, cap = epochs_of(name)
        config_params = Params.from_file(config).as_dict(quiet=True)
        overrides = harness.benchmark_overrides(
            config_params, argparse.Namespace(**dict(vars(args), epochs=num_epochs))
        )
        with open(os.path.join(run_dir, f"{name}.overrides.json"), "w") as handle:
            json.dump(overrides, handle, indent=2)
        resolved = Params.from_file(config, json.dumps(overrides)).as_dict(quiet=True)
        return {
            "name": name,
            "kind": "nerzoo",
            "label": label,
            "config": config,
            "overrides": overrides,
            "cap": cap,
            "package": "nerzoo",
            "resolved": resolved,
            "config_display": f"{display_path(config)}; {harness.reader_description(resolved)}",
        }

    main_model = nerzoo_model(main_name, args.config, args.label or f"nerzoo {main_name}")
    models = [main_model]
    references = [] if args.no_reference else [(REFERENCE, REFERENCE_LABEL, False)]
    if references and importlib.util.find_spec("allennlp_models") is None:
        print(
            "error: the reference crf_tagger needs allennlp-models: run `make install-bench` (or pass --no-reference)",
            file=sys.stderr,
        )
        return 2
    bucketing = "batch_sampler" in main_model["resolved"]["data_loader"]
    if not args.no_reference and not args.no_bucketed_reference:
        if bucketing:
            references.append((BUCKETED_REFERENCE, BUCKETED_REFERENCE_LABEL, True))
        else:
            print(f"  note: {display_path(args.config)} has no batch sampler; no bucketed reference", flush=True)
    for name, label, bucketed in references:
        num_epochs, cap = epochs_of(name)
        config = reference_config(main_model["resolved"], args, bucketed=bucketed, num_epochs=num_epochs)
        path = os.path.join(run_dir, f"{name}_crf_tagger.json")
        with open(path, "w") as handle:
            json.dump(config, handle, indent=2)
        models.append(
            {
                "name": name,
                "kind": "reference",
                "label": label,
                "config": path,
                "overrides": None,
                "cap": cap,
                "package": "allennlp_models.tagging",
                "resolved": config,
                "config_display": f"generated: {display_path(path)}",
            }
        )
    for name, config in extras.items():
        models.append(nerzoo_model(name, config, f"nerzoo {name}"))

    measured: List[Dict[str, Any]] = []
    for model in models:
        result = train_and_measure(
            model["name"], model["kind"], model["config"], model["overrides"], model["package"], run_dir, args
        )
        result.update(
            label=model["label"],
            config_display=model["config_display"],
            batches=batches_cell(model["resolved"]),
            epochs_cap=model["cap"],
        )
        result["train_sentences_per_second"] = harness.train_sentences_per_second(result, counts["train"])
        measured.append(result)

    common = {
        "date": started.strftime("%Y-%m-%d %H:%M"),
        "data": f"{os.path.basename(args.train)}/{os.path.basename(args.dev)}/{os.path.basename(args.test)} "
        f"({counts['train']}/{counts['dev']}/{counts['test']})",
    }
    by_name = {result["name"]: result for result in measured}
    rows = [result_row(result, by_name, main_name, common) for result in measured]

    capped = ", ".join(f"{model['name']} {model['cap']}" for model in models if model["cap"] is not None)
    command = harness.command_line(__file__, raw_argv)
    note = (
        f"- {common['date']}: `{command}` (run from the repository root; output in "
        f"`{display_path(run_dir)}`). Machine: {harness.machine_description()}. Budget {args.max_minutes:g} min "
        f"per model, `trainer.num_epochs` {args.epochs}{f' (capped: {capped})' if capped else ''}. Load average "
        f"(1/5/15 min) at start {harness.loads_text(load_before)}, at end {harness.loads_text(os.getloadavg())}."
    )
    for result in measured:
        note += (
            f" {result['label']}: training process CPU time {format_seconds(result.get('train_cpu_seconds'))}, "
            f"mean 1-min load during training {fmt(result.get('train_mean_load'))}."
        )
    record = {
        "started": common["date"],
        "command": command,
        "columns": TABLE_HEADER,
        "rows": [dict(zip(TABLE_HEADER, row)) for row in rows],
        "results": measured,
        "note": note,
    }
    results.append_run(args.results, TABLE, record, SECTION_HEADING, SECTION_INTRO)

    print("\n=== Summary")
    for result, row in zip(measured, rows):
        print(f"{result['label']}:")
        for name, cell in zip(TABLE_HEADER, row):
            print(f"  {name:32s} {cell}")
        print(f"  {'train CPU time':32s} {format_seconds(result.get('train_cpu_seconds'))}")
        print(f"  {'mean load during training':32s} {fmt(result.get('train_mean_load'))}")
        print(f"  {'model archive':32s} {result.get('archive', 'n/a')}")
    print(f"\nrows added to {results.rows_dir(args.results)}/{TABLE}.jsonl and {args.results}\nrun folder: {run_dir}")
    return 1 if any(result.get("error") for result in measured) else 0


if __name__ == "__main__":
    sys.exit(main())
