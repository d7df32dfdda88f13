"""
`nerzoo-tag EXPORT INPUT... --output DIR`: a tagger exported by `allennlp export` over a corpus, in this process.

Inputs are files, globs and directories (their files, hidden and `_` ones left out): JSON lines as
`allennlp predict` reads them (`.jsonl`, `.json`), plain text (`.txt`, a sentence a line, or a document
with `--documents`; blank lines are skipped) and Parquet (`.parquet`, its `--text-column` or
`--tokens-column`; the `parquet` extra).  Each input file becomes shards of `--shard-lines` lines (Parquet
rows), `DIR/<its path from the inputs' common folder>-<hash of its absolute path>-<index>.jsonl` (or
`.parquet`).  A record is what `allennlp predict` writes for its input plus `source`, `{"file", "line"}`
(from 1) or `{"file", "row"}` (from 0); an input that cannot be tagged is `{"source", "error": "FILE:LINE:
why"}`.  A shard is written to `NAME.part` and renamed when complete, and a run skips the shards that
exist, so the same command again finishes what an interrupted run left.  `_manifest.json`, written last,
lists the shards and their records.  With `--ray` the shards are tagged on Ray Data (`ray_tagging.py`).
"""

import argparse
import glob
import hashlib
import importlib
import itertools
import json
import os
import pathlib
import re
import sys
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy

from nerzoo_runtime.tagger import Tagger

PARQUET_EXTRA = "pip install 'nerzoo-runtime[parquet]'"
RAY_EXTRA = "pip install 'nerzoo-runtime[ray]'"
MANIFEST = "_manifest.json"
# One input: where it is, what the tagger reads, or why it cannot be read.
Item = Tuple[Dict[str, Any], Any, Optional[str]]
# One shard to write: its input `file`, its `shard` name, and where it starts, `offset` (a byte, or a
# Parquet row) and `first` (the number of its first line, or its first row).
Plan = Dict[str, Any]


class UsageError(Exception):
    """A command that cannot run: one line, exit code 2, nothing written."""


def pyarrow_module(name: str = "pyarrow"):
    """`pyarrow` or one of its modules; without it, a `UsageError` naming the extra."""
    try:
        return importlib.import_module(name)
    except ImportError:
        raise UsageError(f"Parquet needs pyarrow: {PARQUET_EXTRA}") from None


def input_files(patterns: Sequence[str], output: pathlib.Path) -> List[pathlib.Path]:
    """The absolute paths of the files that `patterns` name, sorted; none under `output`."""
    files = set()
    for pattern in patterns:
        matched = sorted(glob.glob(pattern, recursive=True)) if any(c in pattern for c in "*?[") else [pattern]
        matched = [pathlib.Path(os.path.abspath(path)) for path in matched if os.path.exists(path)]
        if not matched:
            raise UsageError(f"no file matches {pattern}")
        for path in matched:
            if path.is_dir():
                inside = [part for part in path.rglob("*") if part.is_file()]
                files.update(part for part in inside if not re.search(r"(^|/)[._]", str(part.relative_to(path))))
            else:
                files.add(path)
    files = {path for path in files if output.resolve() not in path.resolve().parents}
    if not files:
        raise UsageError(f"no input file in {' '.join(patterns)}")
    for path in files:
        if path.suffix.lower() not in READERS:
            raise UsageError(f"{path}: unknown suffix {path.suffix!r}, nerzoo-tag reads {', '.join(READERS)}")
    return sorted(files)


def shard_stems(files: Sequence[pathlib.Path]) -> Dict[pathlib.Path, str]:
    """Each file's shards' names: its path from the files' common folder, sanitised, and a hash of its absolute path."""
    root = os.path.commonpath([path.parent for path in files])
    stems = {}
    for path in files:
        name = re.sub(r"[^A-Za-z0-9._-]+", "_", str(path.relative_to(root).with_suffix("")))
        stems[path] = f"{name}-{hashlib.sha1(str(path).encode()).hexdigest()[:8]}"
    return stems


def line_starts(path: pathlib.Path, every: int, block_size: int = 1 << 24) -> Iterator[Tuple[int, int]]:
    """`(byte offset, line number)` of lines 1 + every, 1 + 2 every, ... of `path`, while it has them."""
    with open(path, "rb") as file:
        size, newlines = os.fstat(file.fileno()).st_size, 0
        while block := file.read(block_size):
            ends = numpy.flatnonzero(numpy.frombuffer(block, numpy.uint8) == ord("\n"))
            numbers = newlines + 1 + numpy.arange(len(ends))  # of the newline, counted from 1
            last = numbers % every == 0  # newlines that end a shard
            starts = ends[last] + file.tell() - len(block) + 1
            for offset, line in zip(starts.tolist(), (numbers[last] + 1).tolist()):
                if offset < size:
                    yield offset, line
            newlines += len(ends)


def plans(files: Sequence[pathlib.Path], args) -> List[Plan]:
    """The shards of `files`, every `args.shard_lines` lines (Parquet rows) a shard, in order."""
    found = []
    for path, stem in shard_stems(files).items():
        if path.suffix.lower() == ".parquet":
            rows = pyarrow_module("pyarrow.parquet").ParquetFile(path).metadata.num_rows
            starts: Iterator[Tuple[int, int]] = ((row, row) for row in range(0, rows, args.shard_lines))
        else:
            starts = itertools.chain([(0, 1)] if path.stat().st_size else [], line_starts(path, args.shard_lines))
        for index, (offset, first) in enumerate(starts):
            shard = f"{stem}-{index:05d}.{args.format}"
            found.append({"file": str(path), "shard": shard, "offset": offset, "first": first})
    return found


def lines(plan: Plan, count: int) -> Iterator[Tuple[int, Optional[str], Optional[str]]]:
    """`(number, text without its line end, None)` of each non-blank line of the shard, `(number, None, why)`
    of one not UTF-8."""
    with open(plan["file"], "rb") as file:
        file.seek(plan["offset"])
        for number, raw in zip(range(plan["first"], plan["first"] + count), file):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                yield number, None, f"not UTF-8: {error}"
                continue
            if text.strip():
                yield number, text.rstrip("\r\n"), None


def json_items(plan: Plan, args) -> Iterator[Item]:
    for number, text, error in lines(plan, args.shard_lines):
        item = None
        if error is None:
            try:
                item = json.loads(text)
            except json.JSONDecodeError as bad:
                error = f"not JSON: {bad}"
            else:
                if not isinstance(item, dict):
                    error, item = f"a line is an object as allennlp predict reads it, got {text[:200]}", None
        yield {"file": plan["file"], "line": number}, item, error


def text_items(plan: Plan, args) -> Iterator[Item]:
    key = "document" if args.documents else "sentence"
    for number, text, error in lines(plan, args.shard_lines):
        yield {"file": plan["file"], "line": number}, None if error else {key: text}, error


def parquet_items(plan: Plan, args) -> Iterator[Item]:
    column = args.tokens_column or args.text_column
    key = "tokens" if args.tokens_column else "document" if args.documents else "sentence"
    table = pyarrow_module("pyarrow.parquet").ParquetFile(plan["file"])
    sizes = [table.metadata.row_group(group).num_rows for group in range(table.num_row_groups)]
    begins = [0, *itertools.accumulate(sizes)]
    start, stop = plan["offset"], plan["offset"] + args.shard_lines
    groups = [group for group, size in enumerate(sizes) if begins[group] < stop and begins[group] + size > start]
    values = table.read_row_groups(groups, columns=[column]).column(0)
    for row, value in enumerate(values.slice(start - begins[groups[0]], args.shard_lines).to_pylist(), start):
        yield {"file": plan["file"], "row": row}, {key: value}, None


READERS = {".jsonl": json_items, ".json": json_items, ".txt": text_items, ".parquet": parquet_items}


def check_parquet(files: Sequence[pathlib.Path], args) -> None:
    """Parquet inputs need pyarrow and exactly one of the columns, in each file."""
    tables = [path for path in files if path.suffix.lower() == ".parquet"]
    if args.format == "parquet" or tables:
        pyarrow_module()
    if tables and bool(args.text_column) == bool(args.tokens_column):
        raise UsageError("Parquet inputs need one of --text-column and --tokens-column")
    column = args.text_column or args.tokens_column
    for path in tables:
        try:
            names = pyarrow_module("pyarrow.parquet").read_schema(path).names
        except (OSError, ValueError) as error:  # pyarrow's ArrowInvalid is a ValueError
            raise UsageError(f"{path} is not a Parquet file: {error}") from None
        if column not in names:
            raise UsageError(f"{path} has no column {column!r}")


def tagged(tagger: Tagger, items: Sequence[Item], batch_size: int) -> List[Dict[str, Any]]:
    """The records of `items`, in order: the tagger's results with their `source`, or errors naming file and line."""
    results = iter(tagger.tag([item for _, item, error in items if error is None], batch_size))
    records = []
    for source, _, error in items:
        result = {"error": error} if error else next(results)
        if "error" in result:
            why = error or result["error"].split(": ", 1)[-1]  # the tagger's is "input N: why"
            where = (
                f"{source['file']}:{source['line']}" if "line" in source else f"{source['file']}: row {source['row']}"
            )
            result = {"error": f"{where}: {why}"}
        records.append({**result, "source": source})
    return records


def parquet_table(records: Sequence[Dict[str, Any]], tagger: Tagger):
    """`records` as an Arrow table, in one schema for every shard of `tagger`'s (absent fields null)."""
    pa = pyarrow_module()
    spans = [("label", pa.string()), ("start", pa.int64()), ("end", pa.int64()), ("text", pa.string())]
    spans += [("char_start", pa.int64()), ("char_end", pa.int64())]
    if tagger.span_decoding is None:
        spans.append(("confidence", pa.float64()))
    else:
        spans += [("score", pa.float64()), ("level", pa.int64())]
    pairs = pa.list_(pa.list_(pa.int64()))
    schema = pa.schema(
        [
            ("source", pa.struct([("file", pa.string()), ("line", pa.int64()), ("row", pa.int64())])),
            ("error", pa.string()),
            ("tokens", pa.list_(pa.string())),
            ("token_offsets", pairs),
            ("tags", pa.list_(pa.string())),
            ("tag_confidences", pa.list_(pa.float64())),
            ("spans", pa.list_(pa.struct(spans))),
            ("sentences", pairs),
        ]
    )
    return pa.Table.from_pylist(list(records), schema=schema)


def write_shard(path: pathlib.Path, records: Sequence[Dict[str, Any]], tagger: Tagger) -> None:
    """`records` into `path`, through `path.part`: a shard that exists is complete."""
    part = path.with_name(path.name + ".part")
    if path.suffix == ".parquet":
        pyarrow_module("pyarrow.parquet").write_table(parquet_table(records, tagger), part)
    else:
        with open(part, "w", encoding="utf-8") as file:
            file.writelines(json.dumps(record, ensure_ascii=False) + "\n" for record in records)
            file.flush()
            os.fsync(file.fileno())
    os.replace(part, path)


def write_planned(tagger: Tagger, plan: Plan, args) -> Optional[int]:
    """The shard of `plan` and the number of its records, unless it exists (None)."""
    shard = pathlib.Path(args.output) / plan["shard"]
    if shard.exists():
        return None
    items = list(READERS[pathlib.Path(plan["file"]).suffix.lower()](plan, args))
    write_shard(shard, tagged(tagger, items, args.batch_size), tagger)
    return len(items)


def shard_records(path: pathlib.Path) -> int:
    """The records of a shard that a run before this one wrote."""
    if path.suffix == ".parquet":
        return pyarrow_module("pyarrow.parquet").ParquetFile(path).metadata.num_rows
    with open(path, "rb") as file:
        return sum(block.count(b"\n") for block in iter(lambda: file.read(1 << 24), b""))


def tag_corpus(args) -> Dict[str, Any]:
    """Tags `args.inputs` into shards in `args.output`, those not there yet; returns the manifest."""
    output = pathlib.Path(args.output)
    files = input_files(args.inputs, output)
    check_parquet(files, args)
    if args.ray:
        if args.ray == "local":  # read as Ray loads: its loopback address, nothing reported, and workers at
            # this command's priority, as in this process (Ray's default, nice 15, yields to every other job)
            os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
            os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
            os.environ.setdefault("RAY_worker_niceness", "0")
        try:
            importlib.import_module("ray.data")
        except ImportError:
            raise UsageError(f"--ray needs Ray Data: {RAY_EXTRA}") from None
    try:
        tagger = Tagger.load(args.export, args.spacy_model, args.threads)
        if any(path.suffix.lower() == ".txt" for path in files) or args.text_column:
            _ = tagger.nlp  # raw text needs spaCy's pipeline: a missing one stops the run before it starts
    except (OSError, ValueError, ImportError) as error:
        raise UsageError(str(error)) from None
    planned = plans(files, args)
    output.mkdir(parents=True, exist_ok=True)
    (output / MANIFEST).unlink(missing_ok=True)
    missing = [plan for plan in planned if not (output / plan["shard"]).exists()]
    if args.ray:
        from nerzoo_runtime import ray_tagging

        written = ray_tagging.write_shards(missing, args)
    else:
        from tqdm import tqdm

        written = {
            plan["shard"]: write_planned(tagger, plan, args)
            for plan in tqdm(missing, unit=" shards", disable=None, file=sys.stderr)
        }
    counted = {plan["shard"]: written.get(plan["shard"]) for plan in planned}  # None: an earlier run's shard
    shards = {name: shard_records(output / name) if count is None else count for name, count in counted.items()}
    manifest = {"export": os.path.abspath(args.export), "records": sum(shards.values()), "shards": shards}
    (output / (MANIFEST + ".part")).write_text(json.dumps(manifest, indent=1) + "\n")
    os.replace(output / (MANIFEST + ".part"), output / MANIFEST)
    return manifest


def parser() -> argparse.ArgumentParser:
    made = argparse.ArgumentParser(
        prog="nerzoo-tag", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    made.add_argument("export", metavar="EXPORT", help="the directory `allennlp export` wrote")
    made.add_argument("inputs", nargs="+", metavar="INPUT", help="files, globs or directories")
    made.add_argument("--output", required=True, help="the directory of the shards")
    made.add_argument("--batch-size", type=int, default=64, help="inputs the model runs at once")
    made.add_argument("--threads", type=int, help="onnxruntime's threads within an operator")
    made.add_argument("--spacy-model", help="the spaCy pipeline of raw text (default: the export's)")
    made.add_argument(
        "--documents", action="store_true", help="a line of text, or a --text-column value, is a document"
    )
    made.add_argument("--text-column", help="Parquet inputs: the column of raw texts")
    made.add_argument("--tokens-column", help="Parquet inputs: the column of token lists")
    made.add_argument("--shard-lines", type=int, default=10000, help="input lines (Parquet rows) per output shard")
    made.add_argument("--format", choices=("jsonl", "parquet"), default="jsonl", help="of the shards")
    ray = made.add_argument_group("Ray Data (the `ray` extra)")
    ray.add_argument(
        "--ray",
        metavar="auto|ADDRESS|local",
        help="tag on a Ray cluster: the running one, one at ADDRESS, or a new local one",
    )
    ray.add_argument("--workers", type=int, default=1, help="actors, each loading the tagger once")
    ray.add_argument(
        "--worker-cpus",
        type=float,
        default=1.0,
        help="CPUs an actor reserves (fractions allowed); its threads by default",
    )
    return made


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parser().parse_args(argv)
    try:
        if min(args.batch_size, args.shard_lines, args.workers, 1 if args.threads is None else args.threads) < 1:
            raise UsageError("--batch-size, --shard-lines, --workers and --threads must be positive")
        if args.worker_cpus <= 0:
            raise UsageError("--worker-cpus must be positive")
        manifest = tag_corpus(args)
    except UsageError as error:
        print(f"nerzoo-tag: error: {error}", file=sys.stderr)
        return 2
    except (ImportError, OSError, RuntimeError) as error:  # what raw text needs, the disk, or a Ray job
        print(f"nerzoo-tag: error: {error}", file=sys.stderr)
        return 1
    print(f"nerzoo-tag: {manifest['records']} records in {len(manifest['shards'])} shards in {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
