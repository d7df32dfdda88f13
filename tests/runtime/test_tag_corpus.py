"""
`nerzoo-tag`: the exported fixture tagger over files of JSON lines, text and Parquet, against
`Tagger.tag` in this process; bad lines, shard names, re-runs and the command's errors.
"""

import json
import os
import pathlib
import subprocess
import sys

import pytest
from nerzoo_runtime.tag_corpus import line_starts, main
from nerzoo_runtime.tagger import Tagger

from tests import FIXTURES_ROOT

RAW_TEXTS = ["Peter Blackburn visited Brussels on Monday .", "  Anna Keller flew to Oslo\twith Lena Holm.  "]
DOCUMENTS = ["Peter Blackburn visited Brussels. Anna Keller stayed in Oslo.", "Lena Holm works for Norvik Bank ."]


@pytest.fixture(scope="module")
def tagger(exported):
    return Tagger.load(exported)


def fixture_sentences():
    """The token lists of the test fixture."""
    sentences, words = [], []
    for line in (FIXTURES_ROOT / "conll2003" / "test.txt").read_text().splitlines() + [""]:
        if line.strip() and not line.startswith("-DOCSTART-"):
            words.append(line.split()[0])
        elif words:
            sentences.append(words)
            words = []
    return sentences


def records(output: pathlib.Path):
    """The records of the shards in `output`, shard by shard in name order."""
    return [json.loads(line) for shard in sorted(output.glob("*.jsonl")) for line in shard.read_text().splitlines()]


def tag(exported, inputs, output, *options):
    assert main([str(exported), *map(str, inputs), "--output", str(output), *options]) == 0
    return records(output)


def without_source(record):
    return {key: value for key, value in record.items() if key != "source"}


def test_records_are_the_taggers_results_with_their_source(exported, tagger, tmp_path):
    sentences = fixture_sentences()
    corpus = tmp_path / "corpus"
    (corpus / "news").mkdir(parents=True)
    lines = [{"tokens": words} for words in sentences] + [{"sentence": RAW_TEXTS[0]}, {"sentences": sentences[:2]}]
    (corpus / "news" / "a.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    (corpus / "b.txt").write_text(f"{RAW_TEXTS[0]}\n\n   \n{RAW_TEXTS[1]}\r\n")
    got = tag(exported, [corpus], tmp_path / "out", "--shard-lines", "7", "--batch-size", "5")
    text_lines = [1, 4]
    assert [record["source"] for record in got] == [
        {"file": str(corpus / "b.txt"), "line": line} for line in text_lines
    ] + [{"file": str(corpus / "news" / "a.jsonl"), "line": line} for line in range(1, len(lines) + 1)]
    assert [without_source(record) for record in got] == tagger.tag(RAW_TEXTS) + tagger.tag(lines)
    shards = sorted(path.name for path in (tmp_path / "out").glob("*.jsonl"))
    assert len(shards) == 1 + -(-len(lines) // 7) and shards[0].startswith("b-") and shards[1].startswith("news_a-")
    manifest = json.loads((tmp_path / "out" / "_manifest.json").read_text())
    assert manifest["records"] == len(got) and sorted(manifest["shards"]) == shards

    (corpus / "b.txt").write_text("\n".join(DOCUMENTS) + "\n")
    got = tag(exported, [corpus / "*.txt"], tmp_path / "documents", "--documents")
    assert [without_source(record) for record in got] == tagger.tag([{"document": text} for text in DOCUMENTS])
    assert got[0]["sentences"] == [[0, 5], [5, 11]]


@pytest.mark.parametrize("text", [b"", b"a\n", b"a\n\nbb\nc", b"a\nb\n\n\nccc\nd\ne\n", b"\n" * 9 + b"x"])
def test_shards_start_where_counting_lines_says(text, tmp_path):
    path = tmp_path / "lines.txt"
    path.write_bytes(text)
    offsets = [0, *(index + 1 for index, byte in enumerate(text) if byte == ord("\n"))]
    for every, block_size in [(1, 1), (2, 3), (3, 5), (4, 1 << 24)]:
        expected = [
            (offsets[line - 1], line)
            for line in range(1 + every, len(offsets) + 1, every)
            if offsets[line - 1] < len(text)
        ]
        assert list(line_starts(path, every, block_size)) == expected


def test_a_bad_line_is_an_error_record_and_the_others_are_tagged(exported, tagger, tmp_path):
    good = [{"tokens": ["Lena", "Holm", "visited", "Oslo", "."]}, {"sentence": RAW_TEXTS[1]}]
    bad = ["{not json", "[1, 2]", json.dumps({"text": "Oslo"}), json.dumps({"tokens": ["Oslo", " "]})]
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(
        b"\n".join(
            [json.dumps(good[0]).encode(), *(line.encode() for line in bad), b"\xff\xfe", json.dumps(good[1]).encode()]
        )
    )
    got = tag(exported, [path], tmp_path / "out", "--shard-lines", "3")
    assert [record["source"]["line"] for record in got] == list(range(1, 8))
    assert [without_source(got[0]), without_source(got[6])] == tagger.tag(good)
    errors = [record["error"] for record in got[1:6]]
    assert all(sorted(record) == ["error", "source"] for record in got[1:6])
    assert [error.split(": ")[0] for error in errors] == [f"{path}:{line}" for line in range(2, 7)]
    assert errors[0].startswith(f"{path}:2: not JSON") and errors[4].startswith(f"{path}:6: not UTF-8")
    assert "non-blank strings" in errors[3]


def test_shard_names_are_stable_and_a_rerun_redoes_only_the_missing_shards(exported, tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    sentences = fixture_sentences()
    (corpus / "a.jsonl").write_text("".join(json.dumps({"tokens": words}) + "\n" for words in sentences))
    (corpus / "b.txt").write_text("\n".join(RAW_TEXTS * 5) + "\n")
    first = tag(exported, [corpus / "b.txt", corpus / "a.jsonl"], tmp_path / "one", "--shard-lines", "4")
    assert tag(exported, [corpus], tmp_path / "two", "--shard-lines", "4") == first
    output = tmp_path / "one"
    shards = sorted(output.glob("*.jsonl"))
    assert [path.name for path in shards] == sorted(path.name for path in (tmp_path / "two").glob("*.jsonl"))
    contents = {path.name: path.read_bytes() for path in shards}
    shards[1].unlink()  # a shard lost, and one whose writing stopped before its rename
    shards[3].rename(shards[3].with_name(shards[3].name + ".part"))
    os.truncate(shards[3].with_name(shards[3].name + ".part"), 10)
    times = {path.name: path.stat().st_mtime_ns for path in shards if path.exists()}
    assert tag(exported, [corpus], output, "--shard-lines", "4") == first
    assert {path.name: path.read_bytes() for path in sorted(output.glob("*.jsonl"))} == contents
    assert {name: (output / name).stat().st_mtime_ns for name in times} == times
    assert sorted(path.name for path in output.iterdir()) == sorted([*contents, "_manifest.json"])


def test_the_console_script_tags_as_main_does(exported, tmp_path):
    path = tmp_path / "texts.txt"
    path.write_text("\n".join(RAW_TEXTS) + "\n")
    script = pathlib.Path(sys.executable).parent / "nerzoo-tag"
    run = subprocess.run(
        [script, exported, path, "--output", tmp_path / "script", "--threads", "1"], capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout == f"nerzoo-tag: 2 records in 1 shards in {tmp_path / 'script'}\n"
    assert records(tmp_path / "script") == tag(exported, [path], tmp_path / "main")
    program = (
        "import sys\nfrom nerzoo_runtime.tag_corpus import main\nassert main(sys.argv[1:]) == 0\n"
        "assert not {'pyarrow', 'ray'} & set(sys.modules), 'a run of text loads pyarrow or ray'\n"
    )
    run = subprocess.run([sys.executable, "-c", program, exported, path, "--output", tmp_path / "plain"])
    assert run.returncode == 0


def one_line_error(capsys, argv, output):
    assert main([*map(str, argv), "--output", str(output)]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and error.startswith("nerzoo-tag: error: ")
    assert not output.exists()
    return error


def test_a_command_that_cannot_run_is_one_error_and_writes_nothing(exported, tmp_path, capsys):
    path = tmp_path / "texts.txt"
    path.write_text(RAW_TEXTS[0] + "\n")
    (tmp_path / "notes.csv").write_text("a,b\n")
    output = tmp_path / "out"
    assert "no tagger.json" in one_line_error(capsys, [tmp_path, path], output)
    assert "no file matches" in one_line_error(capsys, [exported, tmp_path / "*.jsonl"], output)
    assert "unknown suffix '.csv'" in one_line_error(capsys, [exported, tmp_path], output)
    assert "spaCy pipeline 'nothing_here'" in one_line_error(
        capsys, [exported, path, "--spacy-model", "nothing_here"], output
    )
    for option in ("--shard-lines", "--threads"):
        assert "must be positive" in one_line_error(capsys, [exported, path, option, "0"], output)


def test_without_pyarrow_parquet_is_one_error_naming_the_extra(exported, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow fails
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    (tmp_path / "texts.parquet").write_bytes(b"PAR1")
    error = one_line_error(capsys, [exported, tmp_path / "texts.parquet", "--text-column", "text"], tmp_path / "out")
    assert error == "nerzoo-tag: error: Parquet needs pyarrow: pip install 'nerzoo-runtime[parquet]'\n"
    (tmp_path / "texts.txt").write_text(RAW_TEXTS[0] + "\n")
    error = one_line_error(capsys, [exported, tmp_path / "texts.txt", "--format", "parquet"], tmp_path / "out")
    assert "nerzoo-runtime[parquet]" in error


def test_without_ray_the_ray_option_is_one_error_naming_the_extra(exported, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray fails
    monkeypatch.setitem(sys.modules, "ray.data", None)
    (tmp_path / "texts.txt").write_text(RAW_TEXTS[0] + "\n")
    error = one_line_error(capsys, [exported, tmp_path / "texts.txt", "--ray", "local"], tmp_path / "out")
    assert error == "nerzoo-tag: error: --ray needs Ray Data: pip install 'nerzoo-runtime[ray]'\n"
    assert "--workers" in one_line_error(capsys, [exported, tmp_path / "texts.txt", "--workers", "0"], tmp_path / "out")


@pytest.mark.extras
def test_parquet_columns_in_and_parquet_shards_out(exported, tagger, tmp_path, capsys):
    pyarrow = pytest.importorskip("pyarrow")
    from pyarrow import parquet

    sentences = fixture_sentences()[:9]
    texts = RAW_TEXTS * 3 + [None]
    table = pyarrow.table({"text": texts + [None] * (len(sentences) - len(texts)), "words": sentences})
    parquet.write_table(table, tmp_path / "corpus.parquet", row_group_size=4)
    got = tag(
        exported, [tmp_path / "corpus.parquet"], tmp_path / "tokens", "--tokens-column", "words", "--shard-lines", "4"
    )
    assert [record["source"] for record in got] == [
        {"file": str(tmp_path / "corpus.parquet"), "row": row} for row in range(9)
    ]
    assert [without_source(record) for record in got] == tagger.tag(sentences)

    options = ["--text-column", "text", "--format", "parquet", "--shard-lines", "5"]
    assert main([str(exported), str(tmp_path / "corpus.parquet"), "--output", str(tmp_path / "texts"), *options]) == 0
    shards = sorted((tmp_path / "texts").glob("*.parquet"))
    assert len(shards) == 2
    rows = [row for shard in shards for row in parquet.read_table(shard).to_pylist()]
    assert [row["source"]["row"] for row in rows] == list(range(9))
    assert all(
        row["error"].startswith(f"{tmp_path / 'corpus.parquet'}: row {row['source']['row']}: ") for row in rows[6:]
    )
    expected = tagger.tag(texts[:6])
    for row, result in zip(rows, expected):
        assert {key: row[key] for key in result} == result and row["error"] is None

    missing = [exported, tmp_path / "corpus.parquet", "--text-column", "body"]
    assert "has no column 'body'" in one_line_error(capsys, missing, tmp_path / "out")
    assert "one of --text-column" in one_line_error(capsys, missing[:2], tmp_path / "out")
    (tmp_path / "broken.parquet").write_bytes(b"PAR1")
    broken = [exported, tmp_path / "broken.parquet", "--text-column", "text"]
    assert "broken.parquet is not a Parquet file" in one_line_error(capsys, broken, tmp_path / "out")
