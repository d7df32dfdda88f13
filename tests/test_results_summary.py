"""
The summary of docs/RESULTS.md is computed from its records, and the README quotes it: each summary
row's means, ranges and seed count equal those of the per-seed rows in `docs/results/*.jsonl`, every
baseline figure is such a mean, and every score in the README's table is the summary's.
"""

import json
import re
import statistics
from typing import Dict, List, Tuple

import pytest

from tests import PROJECT_ROOT

RESULTS = (PROJECT_ROOT / "docs" / "RESULTS.md").read_text()
README = (PROJECT_ROOT / "README.md").read_text()
README_DATA = {
    "CoNLL-2003": "conll2003",
    "UNER EWT": "uner_ewt",
    "WNUT-17": "wnut17",
    "CoNLL-2000 chunking": "conll2000_chunking",
    "CoNLL-2000 POS": "conll2000_pos",
    "UD English-EWT UPOS": "ewt_upos",
}


def _table(text: str, heading: str) -> List[List[str]]:
    """The rows of the first table after `heading` (header and rule left out)."""
    section = text.split(heading, 1)[1].splitlines()
    start = next(index for index, line in enumerate(section) if line.startswith("|"))
    end = next((index for index in range(start, len(section)) if not section[index].startswith("|")), len(section))
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in section[start + 2 : end]]


def _records() -> Dict[Tuple[str, str], List[Dict[str, str]]]:
    groups: Dict[Tuple[str, str], List[Dict[str, str]]] = {}
    for path in sorted((PROJECT_ROOT / "docs" / "results").glob("*.jsonl")):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            for row in record["rows"]:
                if {"model", "data", "dev", "test"} <= set(row):
                    groups.setdefault((row["model"], row["data"]), []).append(row)
    return groups


def _mean_and_range(values: List[float]) -> str:
    mean = f"{statistics.mean(values):.2f}"
    return mean if len(values) == 1 else f"{mean} ({min(values):.2f}-{max(values):.2f})"


SUMMARY = _table(RESULTS, "## Summary")
GROUPS = _records()


def test_the_summary_has_a_row_per_model_and_data_set():
    assert len(SUMMARY) >= 10
    assert len({(row[1], row[2]) for row in SUMMARY}) == len(SUMMARY)


@pytest.mark.parametrize("row", SUMMARY, ids=lambda row: f"{row[1]}-{row[2]}")
def test_summary_row_equals_its_records(row):
    _, model, data, dev, test, seeds, baseline, _ = row
    runs = GROUPS[(model, data)]
    assert len(runs) == int(seeds)
    assert [run["seed"] for run in runs] == sorted({run["seed"] for run in runs}, key=int)
    assert dev == _mean_and_range([float(run["dev"]) for run in runs])
    assert test == _mean_and_range([float(run["test"]) for run in runs])
    means = {
        f"{statistics.mean(float(run[key]) for run in group):.2f}"
        for group in GROUPS.values()
        for key in ("dev", "test")
    }
    for figure in re.findall(r"\d+\.\d\d", baseline):
        assert figure in means, f"baseline figure {figure} of {model} on {data} is no mean of the records"


def test_the_readme_quotes_the_summary():
    summary = {(row[1], row[2]): (row[3].split()[0], row[4].split()[0], row[5], row[6]) for row in SUMMARY}
    readme_rows = _table(README, "## Models and their scores")
    assert len(readme_rows) == len(summary)
    previous_model = None
    for model_cell, _, data, scores, seeds, baseline in readme_rows:
        model = re.search(r"`([\w]+)`", model_cell)[1] if model_cell else previous_model
        previous_model = model
        dev, test, summary_seeds, summary_baseline = summary[(model, README_DATA[data])]
        assert scores == f"{dev} / {test}" and seeds == summary_seeds, (model, data)
        assert re.findall(r"\d+\.\d\d", baseline) == re.findall(r"\d+\.\d\d", summary_baseline), (model, data)
