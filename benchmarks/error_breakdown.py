#!/usr/bin/env python
"""
Where the errors are: span F1 (precision / recall) of trained NER archives on a test set, by group of
sentences, one column per archive.

    .venv/bin/python benchmarks/error_breakdown.py --data conll2003 deptree_ner=RUN_DIR bilstm_crf=ARCHIVE

The groups (disjoint, all-caps first), NAME=PATH and the predictions saved next to each archive are in
benchmarks/README.md, "Where the errors are". Spans match exactly (type and boundaries), micro-averaged.
"""

import argparse
import json
import logging
import os
import sys
from typing import Dict, List, Tuple

import harness
from allennlp.models.archival import load_archive
from nerzoo_runtime.tag_scheme import tags_to_spans

# data set -> its test file under ../shared/data (training_config/data.libsonnet).
DATA = {"conll2003": "conll2003/eng.testb", "uner_ewt": "uner_english_ewt/en_ewt-ud-test.iob2"}
GROUPS = ["all-caps", "verbless", "rest", "all"]


def file_pos(data: str, test_file: str) -> List[Tuple[List[str], List[str]]]:
    """The words and the file's own POS tags of every test sentence, in order."""
    if data == "conll2003":
        return list(zip(harness.read_sentences(test_file), harness.read_sentences(test_file, column=1)))
    from nerzoo.data.dataset_readers.conllu_ner import ConlluNerReader

    treebank = os.path.join(harness.SHARED_DATA, "ud_english_ewt", "r2.9", "*.conllu")
    reader = ConlluNerReader(treebank=treebank, drop_entity_types=["OTH", "O"], file_tag_scheme="BIO")
    return [(i["metadata"]["words"], list(i["pos_tags"].labels)) for i in reader.read(test_file)]


def features(words: List[str], pos_tags: List[str]) -> Dict[str, bool]:
    """What puts a sentence in a group: all in capitals (two words with a letter at least), and a verb."""
    lettered = [word for word in words if any(char.isalpha() for char in word)]
    all_caps = len(lettered) >= 2 and not any(char.islower() for word in words for char in word)
    return {"all_caps": all_caps, "has_verb": any(tag.startswith("VB") or tag in ("VERB", "AUX") for tag in pos_tags)}


def predict(archive_file: str, data: str, test_file: str) -> List[Dict]:
    """One record per test sentence: words, gold and predicted tags (BIOUL), and its features."""
    archive = load_archive(archive_file)
    model, instances = archive.model.eval(), list(archive.validation_dataset_reader.read(test_file))
    pos = file_pos(data, test_file)
    if len(pos) != len(instances):
        raise SystemExit(f"{archive_file}: its reader reads {len(instances)} sentences, the POS reader {len(pos)}")
    outputs = [output for batch in harness.batches(instances, 64) for output in model.forward_on_instances(batch)]
    records = []
    for index, (instance, output) in enumerate(zip(instances, outputs)):
        words = list(instance["metadata"]["words"])
        if pos[index][0] != words:
            raise SystemExit(f"{archive_file}: its reader and the POS reader disagree on the words of sentence {index}")
        gold, predicted = list(instance["tags"].labels), list(output["tags"])
        records.append({"words": words, "gold": gold, "predicted": predicted, **features(words, pos[index][1])})
    return records


def scores(records: List[Dict]) -> Dict[str, Dict[str, float]]:
    """Per group: sentences, gold spans, and span precision, recall and F1."""
    counts = {name: [0, 0, 0, 0] for name in GROUPS}  # sentences, gold, predicted, correct
    for record in records:
        gold, predicted = set(tags_to_spans(record["gold"])), set(tags_to_spans(record["predicted"]))
        group = "all-caps" if record["all_caps"] else "rest" if record["has_verb"] else "verbless"
        for name in (group, "all"):
            counts[name] = [a + b for a, b in zip(counts[name], (1, len(gold), len(predicted), len(gold & predicted)))]
    result = {}
    for name, (sentences, gold, predicted, correct) in counts.items():
        precision, recall = correct / max(predicted, 1), correct / max(gold, 1)
        f1 = 2 * correct / max(gold + predicted, 1)
        result[name] = {"sentences": sentences, "gold_spans": gold, "precision": precision, "recall": recall, "f1": f1}
    return result


def archive_path(path: str) -> str:
    for candidate in (path, os.path.join(path, "model", "model.tar.gz"), os.path.join(path, "model.tar.gz")):
        if os.path.isfile(candidate):
            return os.path.abspath(candidate)
    raise SystemExit(f"{path}: no archive there (a model.tar.gz, or a run directory with model/model.tar.gz)")


def saved_or_predicted(archive_file: str, data: str, test_file: str) -> Tuple[str, List[Dict]]:
    """The saved predictions next to the archive, made and saved first when there are none."""
    saved = os.path.join(os.path.dirname(archive_file), f"predictions-{data}-test.jsonl")
    if not os.path.isfile(saved):
        print(f"predicting with {archive_file}", file=sys.stderr, flush=True)
        with open(saved + ".tmp", "w") as handle:
            handle.writelines(json.dumps(record) + "\n" for record in predict(archive_file, data, test_file))
        os.replace(saved + ".tmp", saved)
    with open(saved) as handle:
        return saved, [json.loads(line) for line in handle]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].strip())
    parser.add_argument("--data", required=True, choices=sorted(DATA))
    parser.add_argument("archives", nargs="+", metavar="NAME=PATH")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", metavar="FILE", help="also write the numbers to FILE")
    args = parser.parse_args()
    archives = {name: archive_path(path) for name, path in harness.named(parser, args.archives, "an archive").items()}
    test_file = os.path.join(harness.SHARED_DATA, DATA[args.data])
    if not os.path.isfile(test_file):
        raise SystemExit(f"{args.data}: its test file {test_file} is not there")
    harness.set_threads(args.threads)
    logging.getLogger("allennlp").setLevel(logging.ERROR)
    json_file = args.json and os.path.abspath(args.json)
    os.chdir(harness.REPO_ROOT)  # the archives' readers name the treebank relative to the repository root

    results, sentences = {}, None
    for name, archive_file in archives.items():
        saved, records = saved_or_predicted(archive_file, args.data, test_file)
        if sentences is not None and [record["words"] for record in records] != sentences:
            raise SystemExit(f"{saved}: other sentences than the first archive's predictions (stale? delete it)")
        sentences = [record["words"] for record in records]
        metrics_file = os.path.join(os.path.dirname(archive_file), "metrics.json")
        metrics = harness.read_json(metrics_file) if os.path.isfile(metrics_file) else {}
        reported = metrics.get("test_f1-measure-overall")
        results[name] = {"predictions": saved, "groups": scores(records), "metrics_json_f1": reported}

    counts = next(iter(results.values()))["groups"]
    print(f"{args.data} test: span F1 (precision / recall) in %; groups disjoint, all-caps before verbless\n")
    print("| group | sentences | gold spans | " + " | ".join(results) + " |")
    print("|---" * (3 + len(results)) + "|")
    for name in GROUPS:
        row, total = counts[name], counts["all"]
        cells = [f"{row[key]} ({100 * row[key] / max(total[key], 1):.1f}%)" for key in ("sentences", "gold_spans")]
        for score in (result["groups"][name] for result in results.values()):
            cells.append(f"{100 * score['f1']:.2f} ({100 * score['precision']:.1f} / {100 * score['recall']:.1f})")
        print(f"| {name} | " + " | ".join(cells) + " |")
    checks = []  # the `all` F1 against the archive's own test F1: equal within 0.01 points, or DIFFERS
    for result in results.values():
        reported, f1 = result["metrics_json_f1"], result["groups"]["all"]["f1"]
        differs = reported is not None and abs(reported - f1) > 1e-4
        checks.append("none" if reported is None else f"{100 * reported:.2f}" + " DIFFERS" * differs)
    print("| test F1 in metrics.json | | | " + " | ".join(checks) + " |")
    if json_file:
        harness.write_json(json_file, {"data": args.data, "archives": results})


if __name__ == "__main__":
    main()
