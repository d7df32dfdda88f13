#!/usr/bin/env python
"""
Benchmark results as JSON lines, and the tables of docs/RESULTS.md rendered from them.

A run appends one record to `docs/results/<table>.jsonl`: `columns` and `rows`, optionally `results`,
`note` (markdown under the table), `command`, `started`.  Each table of docs/RESULTS.md is the block
between `<!-- rows: TABLE -->` and `<!-- /rows: TABLE -->`: the columns of the last record, every
record's rows, then "Runs:" and the notes.

    .venv/bin/python benchmarks/results.py            re-renders docs/RESULTS.md from docs/results/
    .venv/bin/python benchmarks/results.py --check    exits 1 when docs/RESULTS.md differs from them
"""

import argparse
import difflib
import json
import os
import re
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_RESULTS = os.path.join(REPO_ROOT, "docs", "RESULTS.md")
BLOCK = re.compile(r"^<!-- rows: (?P<table>[\w.-]+) -->\n.*?^<!-- /rows: (?P=table) -->$", re.MULTILINE | re.DOTALL)


def rows_dir(results_path: str) -> str:
    """The folder of the JSON-lines files: `results/` beside the results file."""
    return os.path.join(os.path.dirname(os.path.abspath(results_path)), "results")


def read_records(results_path: str, table: str) -> List[Dict[str, Any]]:
    path = os.path.join(rows_dir(results_path), f"{table}.jsonl")
    lines = Path(path).read_text(encoding="utf-8").split("\n") if os.path.exists(path) else []
    return [json.loads(line) for line in lines if line.strip()]


def markdown_row(cells: List[str]) -> str:
    return "| " + " | ".join(str(cell).replace("|", "\\|") for cell in cells) + " |"


def markdown_table(columns: List[str], rows: List[Dict[str, str]]) -> List[str]:
    """The lines of a markdown table of `rows` (by column, "n/a" where one is missing)."""
    lines = [markdown_row(columns), "|" + "---|" * len(columns)]
    return lines + [markdown_row([row.get(column, "n/a") for column in columns]) for row in rows]


def render_block(table: str, records: List[Dict[str, Any]]) -> str:
    """The generated block of `table` (markers included) from its records."""
    lines = [f"<!-- rows: {table} -->"]
    if records:
        lines += markdown_table(records[-1]["columns"], [row for record in records for row in record["rows"]])
        notes = [record["note"].rstrip("\n") for record in records if record.get("note")]
        lines += ["", "Runs:"] if notes else []
        lines += [line for note in notes for line in ("", note)]
    lines.append(f"<!-- /rows: {table} -->")
    return "\n".join(lines)


def rendered(results_path: str, text: str) -> str:
    """`text` (the results file's content) with every block rendered from its records."""
    return BLOCK.sub(lambda match: render_block(match["table"], read_records(results_path, match["table"])), text)


def write_atomically(path: str, text: str) -> None:
    Path(f"{path}.tmp").write_text(text, encoding="utf-8")
    os.replace(f"{path}.tmp", path)


def append_run(results_path: str, table: str, record: Dict[str, Any]) -> None:
    """
    Appends `record` (with at least "columns" and "rows") to the table's JSON-lines file and re-renders
    the results file. A table the results file does not show yet gets a section `## TABLE` at its end;
    a missing results file is created.
    """
    record = {"table": table, **record}
    os.makedirs(rows_dir(results_path), exist_ok=True)
    with open(os.path.join(rows_dir(results_path), f"{table}.jsonl"), "a", encoding="utf-8") as handle:
        handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    text = Path(results_path).read_text(encoding="utf-8") if os.path.exists(results_path) else ""
    if f"<!-- rows: {table} -->" not in text:
        section = f"## {table}\n\n<!-- rows: {table} -->\n<!-- /rows: {table} -->\n"
        text = (text.rstrip("\n") + "\n\n" if text.strip() else "# Results\n\n") + section
    write_atomically(results_path, rendered(results_path, text))


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].strip())
    parser.add_argument("--results", default=DEFAULT_RESULTS, help="the results file (default: docs/RESULTS.md)")
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 when the file is out of date")
    args = parser.parse_args(argv)
    text = Path(args.results).read_text(encoding="utf-8")
    new_text = rendered(args.results, text)
    if new_text == text or not args.check:
        if new_text != text:
            write_atomically(args.results, new_text)
        return 0
    diff = difflib.unified_diff(text.splitlines(), new_text.splitlines(), args.results, "rendered", lineterm="")
    print("\n".join(list(diff)[:40]), file=sys.stderr)
    print(f"{args.results} is out of date: run benchmarks/results.py", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
