import gzip
import json
import os

import pytest
from allennlp.common import Params
from allennlp.common.checks import ConfigurationError
from allennlp.data import DatasetReader, Vocabulary

from nerzoo.data.dataset_readers.conll_columns import ColumnFormatError, ConllColumnsReader
from nerzoo.data.dataset_readers.spacy_parsed_conll import SpacyParsedConllReader
from nerzoo.data.dependency_trees import (
    InvalidTreeError,
    SpacyDependencyParser,
    default_cache_directory,
    validate_heads,
)
from tests import FIXTURES_ROOT

DEV = FIXTURES_ROOT / "conll2003" / "dev.txt"


@pytest.fixture
def cache(tmp_path):
    return tmp_path / "cache"


@pytest.fixture
def pipeline_calls(monkeypatch):
    """Counts the sentences handed to spaCy."""
    calls = []
    original = SpacyDependencyParser._run_pipeline

    def counting(self, sentences):
        calls.append(len(sentences))
        return original(self, sentences)

    monkeypatch.setattr(SpacyDependencyParser, "_run_pipeline", counting)
    return calls


def _forbid_parsing(monkeypatch):
    def fail(self, sentences):
        raise AssertionError("spaCy was called although the parses are cached")

    monkeypatch.setattr(SpacyDependencyParser, "_run_pipeline", fail)


def _cache_files(cache):
    return sorted(os.listdir(cache)) if cache.exists() else []


def test_tokens_tags_and_trees(cache):
    instances = list(SpacyParsedConllReader(tag_column=3, cache_directory=str(cache)).read(DEV))
    plain = list(ConllColumnsReader(tag_column=3, feature_columns={"pos_tags": 1}).read(DEV))
    assert len(instances) == len(plain) == 16
    for instance, reference in zip(instances, plain):
        # The file's tokens, never re-tokenised by spaCy.
        assert instance["metadata"]["words"] == reference["metadata"]["words"]
        assert [token.text for token in instance["tokens"]] == reference["metadata"]["words"]
        assert instance["tags"].labels == reference["tags"].labels  # BIOUL from IOB1
        heads = instance["head_indices"].labels
        assert len(heads) == len(instance["pos_tags"].labels) == len(instance["dependency_labels"].labels)
        assert validate_heads(heads, "test") == instance["metadata"]["num_roots"]
        roots = [label for label, head in zip(instance["dependency_labels"].labels, heads) if head == 0]
        assert roots == ["ROOT"] * len(roots)
        assert instance["metadata"]["sentence_id"] == reference["metadata"]["sentence_ids"][0]
        assert instance["metadata"]["document_id"] == reference["metadata"]["document_id"]
        assert instance["metadata"]["source"] == reference["metadata"]["source"]
        assert instance["metadata"]["sentence_spans"] == [(0, len(heads))]
    first = instances[0]
    assert first["tags"].labels == ["B-PER", "L-PER", "O", "B-PER", "L-PER", "O", "O", "U-LOC", "O"]
    assert first["pos_tags"].labels[:2] == ["NNP", "NNP"]  # spaCy's fine-grained tags
    assert first["dependency_labels"].labels[5] == "ROOT"  # "met"
    assert first["head_indices"].labels[5] == 0
    vocab = Vocabulary.from_instances(instances)
    assert vocab.get_vocab_size("dependency_relations") > 5 and vocab.get_vocab_size("labels") > 1


def test_pos_column_and_pos_attribute(cache):
    from_file = list(SpacyParsedConllReader(tag_column=3, pos_column=1, cache_directory=str(cache)).read(DEV))
    plain = list(ConllColumnsReader(tag_column=3, feature_columns={"pos_tags": 1}).read(DEV))
    assert [i["pos_tags"].labels for i in from_file] == [i["pos_tags"].labels for i in plain]
    upos = list(SpacyParsedConllReader(tag_column=3, pos_attribute="pos", cache_directory=str(cache)).read(DEV))
    assert upos[0]["pos_tags"].labels[:2] == ["PROPN", "PROPN"]
    # Tag sets are part of the cache key: "tag" and "pos" parses are two cache files.
    assert len(_cache_files(cache)) == 2


def test_a_chain_tree_in_place_of_the_parse(cache):
    parsed = list(SpacyParsedConllReader(tag_column=3, cache_directory=str(cache)).read(DEV))
    chained = list(SpacyParsedConllReader(tag_column=3, cache_directory=str(cache), tree="chain").read(DEV))
    for tree, chain in zip(parsed, chained):
        length = len(tree["tokens"])
        assert chain["head_indices"].labels == [*range(2, length + 1), 0]
        assert chain["dependency_labels"].labels == ["chain"] * length
        assert chain["pos_tags"].labels == tree["pos_tags"].labels  # spaCy's tags kept


def test_second_read_hits_the_cache(cache, monkeypatch, pipeline_calls):
    reader = SpacyParsedConllReader(tag_column=3, cache_directory=str(cache))
    first = list(reader.read(DEV))
    assert pipeline_calls == [16]
    assert len(_cache_files(cache)) == 1 and _cache_files(cache)[0].endswith(".json.gz")
    _forbid_parsing(monkeypatch)
    again = list(reader.read(DEV))
    fresh = list(SpacyParsedConllReader(tag_column=3, cache_directory=str(cache)).read(DEV))  # a later run
    for instances in (again, fresh):
        assert [i["head_indices"].labels for i in instances] == [i["head_indices"].labels for i in first]
        assert [i["dependency_labels"].labels for i in instances] == [i["dependency_labels"].labels for i in first]


def test_changed_file_content_misses_the_cache(cache, tmp_path, pipeline_calls):
    copy = tmp_path / "dev.txt"
    copy.write_bytes(DEV.read_bytes())
    reader = SpacyParsedConllReader(tag_column=3, cache_directory=str(cache))
    list(reader.read(copy))
    list(reader.read(copy))
    assert pipeline_calls == [16]
    copy.write_bytes(DEV.read_bytes().replace(b"Valletta", b"Mdina"))
    changed = list(reader.read(copy))
    assert pipeline_calls == [16, 16]
    assert "Mdina" in changed[0]["metadata"]["words"]
    assert len(_cache_files(cache)) == 2


@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty", "wrong_length"])
def test_corrupt_cache_file_is_ignored_and_rewritten(cache, pipeline_calls, damage):
    reader = SpacyParsedConllReader(tag_column=3, cache_directory=str(cache))
    expected = [i["head_indices"].labels for i in reader.read(DEV)]
    (name,) = _cache_files(cache)
    path = cache / name
    if damage == "truncate":
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    elif damage == "garbage":
        path.write_bytes(b"not gzip at all")
    elif damage == "empty":
        path.write_bytes(b"")
    else:
        content = json.loads(gzip.decompress(path.read_bytes()))
        content["parses"].pop()  # parses that do not fit the file's sentences
        path.write_bytes(gzip.compress(json.dumps(content).encode("utf-8")))
    recovered = [i["head_indices"].labels for i in reader.read(DEV)]
    assert recovered == expected
    assert pipeline_calls == [16, 16]
    list(reader.read(DEV))  # the rewritten cache file is used
    assert pipeline_calls == [16, 16]
    assert _cache_files(cache) == [name]


def test_failed_cache_write_leaves_no_partial_file(cache, monkeypatch):
    def interrupted(source, destination):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", interrupted)
    instances = list(SpacyParsedConllReader(tag_column=3, cache_directory=str(cache)).read(DEV))
    assert len(instances) == 16
    assert _cache_files(cache) == []


def test_default_cache_directory(monkeypatch, tmp_path):
    monkeypatch.setenv("NERZOO_CACHE", str(tmp_path / "somewhere"))
    assert default_cache_directory() == str(tmp_path / "somewhere" / "spacy_parses")
    assert SpacyDependencyParser().cache_directory == str(tmp_path / "somewhere" / "spacy_parses")
    monkeypatch.delenv("NERZOO_CACHE")
    assert default_cache_directory() == os.path.expanduser(os.path.join("~", ".cache", "nerzoo", "spacy_parses"))


def test_parser_keeps_tokens_and_gives_one_tree_per_sentence():
    parser = SpacyDependencyParser()
    sentences = [
        ["Anna", "met", "Karl", ".", "They", "left", "for", "New", "York", "."],  # spaCy may split it
        ["U.S.-based", "firm", "hired", "Jo"],
        ["Hi"],
    ]
    parses = parser.parse(sentences)
    assert len(parses) == 3
    for words, (pos_tags, labels, heads) in zip(sentences, parses):
        assert len(pos_tags) == len(labels) == len(heads) == len(words)
        roots = validate_heads(heads, "test")
        assert labels.count("ROOT") == roots
    assert parses[2].heads == [0]
    assert parser.parse([]) == []
    with pytest.raises(ConfigurationError, match="has no words"):
        parser.parse([["a"], []])


def test_pipeline_without_parser_is_refused():
    with pytest.raises(ConfigurationError, match="has no 'parser' component"):
        SpacyDependencyParser("blank:en").parse([["Hello"]])
    with pytest.raises(ConfigurationError, match="pos_attribute must be one of"):
        SpacyDependencyParser(pos_attribute="upos")


def test_text_to_instance(cache, monkeypatch):
    reader = SpacyParsedConllReader(tag_column=3, cache_directory=str(cache))
    words = ["Karl", "Ostrom", "visited", "Valletta", "."]
    parsed = reader.text_to_instance(words, metadata={"text": "Karl Ostrom visited Valletta .", "offsets": []})
    assert [token.text for token in parsed["tokens"]] == words
    assert "tags" not in parsed.fields
    assert parsed["metadata"]["text"].startswith("Karl")
    assert validate_heads(parsed["head_indices"].labels, "test") == parsed["metadata"]["num_roots"]
    assert _cache_files(cache) == []  # text_to_instance never caches
    _forbid_parsing(monkeypatch)
    given = reader.text_to_instance(
        words,
        pos_tags=["NNP", "NNP", "VBD", "NNP", "."],
        dependency_labels=["compound", "nsubj", "ROOT", "dobj", "punct"],
        head_indices=[2, 3, 0, 3, 3],
        tags=["B-PER", "L-PER", "O", "U-LOC", "O"],
    )
    assert given["head_indices"].labels == [2, 3, 0, 3, 3]
    assert given["tags"].labels == ["B-PER", "L-PER", "O", "U-LOC", "O"]
    reader.apply_token_indexers(given)
    assert given["tokens"].token_indexers is reader._token_indexers
    with pytest.raises(InvalidTreeError, match="^input: .*form a cycle"):
        reader.text_to_instance(words, ["X"] * 5, ["dep"] * 5, [2, 1, 0, 3, 3])
    with pytest.raises(ConfigurationError, match="empty token list"):
        reader.text_to_instance([])


def test_malformed_column_file_names_file_and_line(tmp_path, cache):
    path = tmp_path / "bad.txt"
    path.write_text("Peter NNP I-NP I-PER\nvisited VBD I-VP\n", encoding="utf-8")
    with pytest.raises(ColumnFormatError, match=f"^{path}:2: expected 4 columns"):
        list(SpacyParsedConllReader(tag_column=3, cache_directory=str(cache)).read(path))
    path.write_text("Peter I-PER\n", encoding="utf-8")
    with pytest.raises(ColumnFormatError, match=f"^{path}:1: pos_tags is column 3"):
        list(SpacyParsedConllReader(tag_column=1, pos_column=3, cache_directory=str(cache)).read(path))


def test_builds_from_params(cache):
    reader = DatasetReader.from_params(
        Params({"type": "spacy_parsed_conll", "tag_column": 3, "cache_directory": str(cache)})
    )
    assert isinstance(reader, SpacyParsedConllReader)
    assert len(list(reader.read(DEV))) == 16
