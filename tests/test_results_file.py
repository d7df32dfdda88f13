import ast
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_results_md_is_what_its_records_render():
    run = subprocess.run([sys.executable, "benchmarks/results.py", "--check"], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


def test_every_table_block_has_records_and_every_record_file_a_block():
    text = (ROOT / "docs" / "RESULTS.md").read_text()
    blocks = {line[len("<!-- rows: ") : -len(" -->")] for line in text.splitlines() if line.startswith("<!-- rows: ")}
    files = {path.stem for path in (ROOT / "docs" / "results").glob("*.jsonl")}
    assert blocks == files
    for path in (ROOT / "docs" / "results").glob("*.jsonl"):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            assert record["table"] == path.stem
            assert all(set(row) <= set(record["columns"]) for row in record["rows"])


def _reproduce_knows():
    """The models of benchmarks/reproduce.py, from the message it gives a run it does not know, and the
    data sets with configs (training_config/DATASET/)."""
    run = subprocess.run(
        [sys.executable, "benchmarks/reproduce.py", "--runs", "?:?:0"], cwd=ROOT, capture_output=True, text=True
    )
    models = set(ast.literal_eval(re.search(r"models (\[.*?\])", run.stderr).group(1)))
    return models, {path.name for path in (ROOT / "training_config").iterdir() if path.is_dir()}


def test_every_run_the_results_quote_is_one_reproduce_knows():
    models, datasets = _reproduce_knows()
    assert {"conll2003", "uner_ewt", "conll2000_chunking", "conll2000_pos", "ewt_upos"} <= datasets
    text = (ROOT / "docs" / "RESULTS.md").read_text()
    quoted = []
    for tail in re.findall(r"--runs (.*)", text):
        words = []
        for word in tail.replace("`", " ").split():
            if word.startswith(("-", "#", "|")):
                break
            words.append(word)
        quoted.append(" ".join(words))
    assert len(quoted) >= 20
    runs = []
    for argument in quoted:
        expanded = subprocess.run(
            ["bash", "-c", f"printf '%s\\n' {argument}"], capture_output=True, text=True, check=True
        )
        runs += [run for line in expanded.stdout.split() for run in line.split(",") if run]
    unknown = [run for run in runs if run.split(":")[0] not in models or run.split(":")[1] not in datasets]
    assert not unknown
