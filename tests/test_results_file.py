import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests import benchmark_script

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def results():
    return benchmark_script("results.py")


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


def test_runs_add_rows_and_notes_and_leave_the_prose_alone(results, tmp_path):
    results_md = tmp_path / "RESULTS.md"
    results_md.write_text("# Results\n\nHand-written text.\n")
    columns = ["model", "F1"]
    first = {"columns": columns, "rows": [{"model": "a", "F1": "90.00"}], "note": "- first run"}
    results.append_run(str(results_md), "demo", first, "## Demo", "What the columns mean.")
    results.append_run(str(results_md), "demo", {"columns": columns, "rows": [{"model": "b|c"}]})
    text = results_md.read_text()
    assert text.startswith("# Results\n\nHand-written text.\n\n## Demo\n\nWhat the columns mean.\n")
    assert "| a | 90.00 |\n| b\\|c | n/a |\n\nRuns:\n\n- first run\n<!-- /rows: demo -->" in text
    records = [json.loads(line) for line in (tmp_path / "results" / "demo.jsonl").read_text().splitlines()]
    assert [record["rows"][0]["model"] for record in records] == ["a", "b|c"]

    results_md.write_text(text.replace("| a | 90.00 |", "| a | 99.00 |") + "\nMore prose.\n")
    assert results.main(["--results", str(results_md), "--check"]) == 1
    assert results.main(["--results", str(results_md)]) == 0
    assert results_md.read_text() == text + "\nMore prose.\n"


def test_reproduce_knows_a_config_for_every_model_and_the_data_sets_of_data_libsonnet(monkeypatch):
    reproduce = benchmark_script("reproduce.py", monkeypatch)
    assert not [model for model, entry in reproduce.MODELS.items() if not (ROOT / entry["config"]).exists()]
    first_passes = {entry["first_pass"] for entry in reproduce.MODELS.values() if "first_pass" in entry}
    assert first_passes <= set(reproduce.MODELS)
    assert {"fixtures", "conll2003", "uner_ewt", "conll2000_chunking", "conll2000_pos", "ewt_upos"} <= set(
        reproduce.DATASETS
    )


def test_every_run_the_results_quote_is_one_reproduce_knows(monkeypatch):
    reproduce = benchmark_script("reproduce.py", monkeypatch)
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
    unknown = [
        run for run in runs if run.split(":")[0] not in reproduce.MODELS or run.split(":")[1] not in reproduce.DATASETS
    ]
    assert not unknown
