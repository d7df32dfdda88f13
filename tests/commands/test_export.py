"""
`allennlp export` of a trained bilstm_crf, tagged by nerzoo_runtime against `allennlp predict` on
the fixtures, at batch sizes and lengths the export never saw; its refusals and its check.
"""

import importlib.metadata
import json
import os
import pathlib
import shutil
import subprocess
import sys
from typing import List

import pytest
from allennlp.common.checks import ConfigurationError
from allennlp.data.token_indexers import SingleIdTokenIndexer
from allennlp.models.archival import load_archive
from nerzoo_runtime import Tagger
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from nerzoo.commands import export, export_check, export_graph
from nerzoo.data.dataset_readers.conll_columns import ConllColumnsReader
from tests import FIXTURES_ROOT, PROJECT_ROOT, allennlp, predict

RAW_TEXTS = ["Peter Blackburn visited Brussels on Monday .", "  Anna Keller flew to Oslo\twith Lena Holm.  "]


@pytest.fixture(scope="module")
def exported(trained_archive, tmp_path_factory):
    output = tmp_path_factory.mktemp("export") / "tagger"
    result = allennlp("export", trained_archive, output, "--include-package", "nerzoo")
    assert json.loads(result.stdout.splitlines()[-1])["check"]["tags_equal"]
    return output


def fixture_sentences():
    """The test fixture's sentences, and one longer than any (a length the export never traced or checked)."""
    reader = ConllColumnsReader(tag_column=3)
    words = [instance["metadata"]["words"] for instance in reader.read(str(FIXTURES_ROOT / "conll2003" / "test.txt"))]
    return words + [([word for sentence in words for word in sentence] * 2)[:150]]


def check_file(path, sentences, texts=()):
    """An `allennlp export --check-file` at `path`: `allennlp predict` lines of the token lists, then of the raw texts."""
    lines = [{"tokens": words} for words in sentences] + [{"sentence": text} for text in texts]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def assert_same(got, expected):
    """Tags and spans exact, confidences within 1e-4."""
    assert len(got) == len(expected)
    for have, want in zip(got, expected):
        assert {key: have[key] for key in ("tokens", "token_offsets", "tags")} == {
            key: want[key] for key in ("tokens", "token_offsets", "tags")
        }
        assert have["tag_confidences"] == pytest.approx(want["tag_confidences"], abs=1e-4)
        assert [span_outline(span) for span in have["spans"]] == [span_outline(span) for span in want["spans"]]
        assert export_check.confidences(have) == pytest.approx(export_check.confidences(want), abs=1e-4)


def span_outline(span):
    """A span without its confidence (a span classifier's: its score)."""
    return {key: value for key, value in span.items() if key not in ("confidence", "score")}


def assert_tags_as_allennlp_predict(archive, output, sentences, path) -> None:
    """The export in `output` tags `sentences` and the raw texts as `allennlp predict` tags them with `archive`, in
    batches of 1, 5 and 64 (lengths the export never saw)."""
    lines = [{"tokens": words} for words in sentences] + [{"sentence": text} for text in RAW_TEXTS]
    expected = predict(archive, lines, path)
    assert sum(len(result["spans"]) for result in expected) > 10
    tagger = Tagger.load(output)
    for batch_size in (1, 5, 64):
        assert_same(tagger.tag(sentences + RAW_TEXTS, batch_size=batch_size), expected)


@pytest.fixture(scope="module")
def predicted(trained_archive, tmp_path_factory):
    """The fixture's sentences and the raw texts, and what `allennlp predict` gives them."""
    sentences = fixture_sentences()
    lines = [{"tokens": words} for words in sentences] + [{"sentence": text} for text in RAW_TEXTS]
    expected = predict(trained_archive, lines, tmp_path_factory.mktemp("predict") / "predictions.jsonl")
    assert sum(len(result["spans"]) for result in expected) > 10
    return sentences, expected


def test_the_export_tags_the_fixtures_as_allennlp_predict_does(exported, predicted):
    sentences, expected = predicted
    tagger = Tagger.load(exported)
    for batch_size in (1, 5, 64):
        assert_same(tagger.tag(sentences + RAW_TEXTS, batch_size=batch_size), expected)
    assert sorted(path.name for path in exported.iterdir()) == [
        "model.onnx",
        "model_card.json",
        "tagger.json",
        "vocabularies.json",
    ]
    card = json.loads((exported / "model_card.json").read_text())
    assert card["model_type"] == "bilstm_crf" and card["config"]["model"]["type"] == "bilstm_crf"
    assert card["metrics"] is not None and card["nerzoo_version"]
    assert card["check"]["tags_equal"] and card["check"]["largest_confidence_difference"] <= 1e-4


def test_an_int8_export_tags_the_fixtures_much_as_the_float32_one(exported, predicted, trained_archive, tmp_path):
    import onnx

    sentences, _ = predicted
    output = tmp_path / "int8"
    allennlp("export", trained_archive, output, "--quantize", "int8", "--include-package", "nerzoo")
    card = json.loads((output / "model_card.json").read_text())
    assert card["check"]["tags_equal"] and card["quantized"]["type"] == "int8"
    assert "MatMulInteger" in {node.op_type for node in onnx.load(str(output / "model.onnx")).graph.node}
    float32, int8 = (Tagger.load(directory).tag(sentences) for directory in (exported, output))
    pairs = [pair for old, new in zip(float32, int8) for pair in zip(old["tags"], new["tags"])]
    assert sum(a == b for a, b in pairs) >= 0.95 * len(pairs)


def test_a_bad_input_is_an_error_for_it_alone(exported):
    tagger = Tagger.load(exported)
    results = tagger.tag([["Lena", "Holm"], 5, ["Oslo", " "], [], "", None, "Lena Holm ."])
    assert [sorted(result) for result in results] == [
        ["spans", "tag_confidences", "tags", "token_offsets", "tokens"],
        ["error", "input"],
        ["error", "input"],
        ["spans", "tag_confidences", "tags", "token_offsets", "tokens"],
        ["spans", "tag_confidences", "tags", "token_offsets", "tokens"],
        ["error", "input"],
        ["spans", "tag_confidences", "tags", "token_offsets", "tokens"],
    ]
    assert results[1]["error"].startswith("input 1: an input is a text or a list of tokens, got int")
    assert results[2]["error"].startswith("input 2: a token list must hold non-blank strings")
    assert results[3]["tokens"] == results[4]["tokens"] == []
    assert results[0]["tags"] == tagger.tag([["Lena", "Holm"]])[0]["tags"]
    with pytest.raises(TypeError, match="a list of texts or token lists"):
        tagger.tag("Lena Holm .")


def test_the_lines_allennlp_predict_reads_are_inputs_too(exported):
    tagger = Tagger.load(exported)
    words, text = ["Lena", "Holm", "visited", "Oslo", "."], "Lena Holm visited Oslo ."
    plain = tagger.tag([words, text, [words, words]])
    lines = [{"tokens": words}, {"sentence": text}, {"sentences": [words, words]}]
    assert tagger.tag(lines) == plain
    assert plain[2]["sentences"] == [[0, 5], [5, 10]]
    bad = [{"text": text}, {"tokens": [words]}, {"sentences": words}, {"sentence": words}, {"tokens": words, "x": 1}]
    for number, result in enumerate(tagger.tag(bad)):
        assert sorted(result) == ["error", "input"]
        assert result["error"].startswith(f"input {number}: "), result


def test_tagging_token_lists_imports_neither_allennlp_nor_torch(exported):
    program = (
        "import json, sys\n"
        "from nerzoo_runtime import Tagger\n"
        f"results = Tagger.load({str(exported)!r}).tag([['Peter', 'Blackburn', 'visited', 'Brussels', '.']])\n"
        "print(json.dumps({'results': results, 'imported': [m for m in ('allennlp', 'torch') if m in sys.modules]}))\n"
    )
    run = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=300, check=True)
    found = json.loads(run.stdout)
    assert found["imported"] == []
    assert found["results"] == Tagger.load(exported).tag([["Peter", "Blackburn", "visited", "Brussels", "."]])


def installed_dependencies(distribution: str = "nerzoo-runtime") -> List[str]:
    """`name==version`, as installed here, of what `distribution` needs without extras, and what those need."""
    pending, versions = [distribution], {}
    while pending:
        name = canonicalize_name(pending.pop())
        if name not in versions:
            versions[name] = importlib.metadata.version(name)
            requirements = map(Requirement, importlib.metadata.requires(name) or [])
            pending += [
                needed.name for needed in requirements if not needed.marker or needed.marker.evaluate({"extra": ""})
            ]
    return [f"{name}=={version}" for name, version in versions.items() if name != distribution]


def test_an_environment_of_the_runtime_alone_tags_the_fixtures_as_allennlp_predict_does(exported, predicted, tmp_path):
    """A new venv with nerzoo_runtime and its locked dependencies only, from uv's cache (`make install` fills it)."""
    sentences, expected = predicted
    source = shutil.copytree(
        PROJECT_ROOT / "runtime", tmp_path / "runtime", ignore=shutil.ignore_patterns("*.egg-info")
    )
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", tmp_path / "venv"], check=True)
    python = tmp_path / "venv" / "bin" / "python"
    uv = pathlib.Path(sys.executable).parent / "uv"
    # No resolution (offline, uv would want metadata its cache may lack): this venv's versions of the runtime's dependencies.
    install = [uv, "pip", "install", "--python", python, "--offline", "--no-deps", source, *installed_dependencies()]
    subprocess.run(install, check=True, capture_output=True, timeout=300)
    (tmp_path / "sentences.json").write_text(json.dumps(sentences))
    program = (
        "import json, sys\n"
        "from nerzoo_runtime import Tagger\n"
        "sentences = json.load(open(sys.argv[2]))\n"
        "print(json.dumps(Tagger.load(sys.argv[1]).tag(sentences, batch_size=8)))\n"
        "import importlib.util\n"
        "assert not any(importlib.util.find_spec(name) for name in ('allennlp', 'torch', 'nerzoo')), 'not a fresh venv'\n"
    )
    # Run from tmp_path, where no nerzoo package is on the path.
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    run = subprocess.run(
        [python, "-c", program, exported, tmp_path / "sentences.json"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env=environment,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert_same(json.loads(run.stdout), expected[: len(sentences)])


def test_an_indexer_without_an_exported_form_is_named(trained_archive):
    archive = load_archive(str(trained_archive))
    archive.validation_dataset_reader._token_indexers["tokens"] = SingleIdTokenIndexer(start_tokens=["@@START@@"])
    with pytest.raises(
        ConfigurationError, match="its token indexer 'tokens' \\(SingleIdTokenIndexer\\) has no exported form"
    ):
        export_graph.exported_indexers(archive, export.traced_scores(archive))


def test_an_export_that_differs_from_its_archive_stops_and_writes_nothing(trained_archive, tmp_path, monkeypatch):
    forward = export_graph.TaggerGraph.forward

    def shifted(self, *ids):
        logits = forward(self, *ids)
        return logits + (logits.new_tensor(range(logits.size(-1))) == 0) * 3.0

    monkeypatch.setattr(export_graph.TaggerGraph, "forward", shifted)
    with pytest.raises(
        ConfigurationError, match="the exported model differs from the archive, nothing was written: check input 0"
    ):
        export.export_archive(str(trained_archive), str(tmp_path / "out"))
    assert list(tmp_path.iterdir()) == []


def test_an_output_directory_with_files_is_refused(trained_archive, tmp_path):
    (tmp_path / "kept.txt").write_text("mine")
    with pytest.raises(ConfigurationError, match="exists and is not an empty directory"):
        export.export_archive(str(trained_archive), str(tmp_path))
    assert [path.name for path in tmp_path.iterdir()] == ["kept.txt"]


@pytest.mark.parametrize("content", [b"not an archive\n", None])
def test_a_file_that_is_not_an_archive_is_one_error_naming_it(content, tmp_path):
    path = tmp_path / "model.tar.gz"
    archive = (FIXTURES_ROOT / "archives" / "bilstm_crf_tiny.tar.gz").read_bytes()
    path.write_bytes(content if content is not None else archive[: len(archive) // 2])  # None: a truncated archive
    with pytest.raises(ConfigurationError, match=f"^{path} is not an archive of a nerzoo tagger: [^\n]+$"):
        export.export_archive(str(path), str(tmp_path / "out"))
    assert sorted(child.name for child in tmp_path.iterdir()) == ["model.tar.gz"]


def test_without_onnx_the_error_names_the_extra(tmp_path, monkeypatch):
    monkeypatch.setattr(export.importlib.util, "find_spec", lambda name: None if name == "onnx" else object())
    with pytest.raises(ConfigurationError, match=r"^the export needs onnx: pip install nerzoo\[onnx\]$"):
        export.export_archive(str(FIXTURES_ROOT / "archives" / "bilstm_crf_tiny.tar.gz"), str(tmp_path / "out"))


def test_the_fixture_archive_with_allennlps_packed_lstm_exports_and_passes_its_check(tmp_path):
    card = export.export_archive(
        str(FIXTURES_ROOT / "archives" / "bilstm_crf_tiny.tar.gz"), str(tmp_path / "out"), spacy_model="blank:en"
    )
    assert card["config"]["model"]["encoder"]["type"] == "lstm"
    assert card["check"]["tags_equal"] and card["check"]["largest_confidence_difference"] <= 1e-4
