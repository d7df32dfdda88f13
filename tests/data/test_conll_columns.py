import pytest
from allennlp.common import Params
from allennlp.common.checks import ConfigurationError
from allennlp.data import DatasetReader
from nerzoo_runtime.tag_scheme import tags_to_spans

from nerzoo.data.dataset_readers.conll_columns import (
    ColumnFormatError,
    ConllColumnsReader,
    parse_held_out_path,
    select_held_out,
)
from tests import FIXTURES_ROOT, SHARED_DATA

CONLL_FIXTURE = FIXTURES_ROOT / "conll2003" / "train.txt"


def _blocks(path):
    """Independent count of (documents, sentences, tokens) straight from the text."""
    documents = sentences = tokens = 0
    in_sentence = False
    for line in open(path, encoding="utf-8"):
        if line.startswith("-DOCSTART-"):
            documents += 1
            in_sentence = False
        elif line.strip():
            tokens += 1
            sentences += not in_sentence
            in_sentence = True
        else:
            in_sentence = False
    return documents, sentences, tokens


def test_sentence_instances_match_the_file():
    reader = ConllColumnsReader(tag_column=3, feature_columns={"pos_tags": 1})
    instances = list(reader.read(CONLL_FIXTURE))
    documents, sentences, tokens = _blocks(CONLL_FIXTURE)
    assert len(instances) == sentences
    assert sum(len(instance["tokens"]) for instance in instances) == tokens
    first = instances[0]
    assert first["metadata"]["words"][:2] == [token.text for token in first["tokens"]][:2]
    assert first["metadata"]["document_id"] == "train.txt:d0"
    assert first["metadata"]["sentence_ids"] == ["train.txt:d0:s0"]
    assert first["metadata"]["source"] == "train.txt:3"
    assert len(first["pos_tags"].labels) == len(first["tokens"])
    assert len({instance["metadata"]["document_id"] for instance in instances}) == documents


def test_document_instances_keep_sentence_boundaries():
    sentence_reader = ConllColumnsReader(tag_column=3)
    document_reader = ConllColumnsReader(tag_column=3, document_level=True)
    sentences = list(sentence_reader.read(CONLL_FIXTURE))
    documents = list(document_reader.read(CONLL_FIXTURE))
    assert len(documents) == _blocks(CONLL_FIXTURE)[0]
    rebuilt = []
    for document in documents:
        words, tags = document["metadata"]["words"], document["tags"].labels
        for start, end in document["metadata"]["sentence_spans"]:
            rebuilt.append((words[start:end], tags[start:end]))
    assert rebuilt == [(s["metadata"]["words"], s["tags"].labels) for s in sentences]


def test_iob1_is_converted_without_changing_entities():
    iob1 = list(ConllColumnsReader(tag_column=3, tag_scheme="IOB1").read(CONLL_FIXTURE))
    for scheme in ("BIO", "BIOUL"):
        converted = list(ConllColumnsReader(tag_column=3, tag_scheme=scheme).read(CONLL_FIXTURE))
        for original, other in zip(iob1, converted):
            assert tags_to_spans(original["tags"].labels) == tags_to_spans(other["tags"].labels)
    # The fixture's one adjacent pair: "Oslo I-LOC Bergen B-LOC" is two entities.
    last = list(ConllColumnsReader(tag_column=3, tag_scheme="BIOUL").read(CONLL_FIXTURE))[-1]
    assert last["tags"].labels[2:4] == ["U-LOC", "U-LOC"]


def test_other_column_layouts():
    chunks = list(ConllColumnsReader(tag_column=2, tag_scheme="BIO").read(FIXTURES_ROOT / "conll2000" / "train.txt"))
    assert chunks and all(tag[0] in "BIO" for instance in chunks for tag in instance["tags"].labels)
    wnut = list(ConllColumnsReader(delimiter="\t", file_tag_scheme="BIO").read(FIXTURES_ROOT / "wnut17" / "train.txt"))
    assert len(wnut) == _blocks(FIXTURES_ROOT / "wnut17" / "train.txt")[1]
    pos = list(ConllColumnsReader(tag_column=1, file_tag_scheme=None).read(CONLL_FIXTURE))
    assert "NNP" in pos[0]["tags"].labels


@pytest.mark.parametrize(
    "content, line, message",
    [
        ("Peter NNP I-NP I-PER\nvisited VBD I-VP\n", 2, "expected 4 columns"),
        ("-DOCSTART- -X- -X- O\n\nPeter NNP I-NP I-PER\n\nBonn NNP I-NP X-LOC\n", 5, "not a IOB1 tag"),
        ("Peter NNP I-NP PER\n", 1, "not a IOB1 tag"),
        ("", None, "no token lines"),
        ("-DOCSTART- -X- -X- O\n\n", None, "no token lines"),
    ],
)
def test_malformed_files_name_file_and_line(tmp_path, content, line, message):
    path = tmp_path / "bad.txt"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ColumnFormatError) as error:
        list(ConllColumnsReader(tag_column=3).read(path))
    where = f"{path}:{line}" if line else str(path)
    assert str(error.value).startswith(where + ":")
    assert message in str(error.value)


def test_non_utf8_line_is_named(tmp_path):
    path = tmp_path / "latin1.txt"
    path.write_bytes("Peter NNP I-NP I-PER\n".encode() + "Zürich NNP I-NP I-LOC\n".encode("latin-1"))
    with pytest.raises(ColumnFormatError, match=f"^{path}:2: not valid UTF-8"):
        list(ConllColumnsReader(tag_column=3).read(path))


def test_tag_column_out_of_range(tmp_path):
    path = tmp_path / "two.txt"
    path.write_text("Peter B-PER\n", encoding="utf-8")
    with pytest.raises(ColumnFormatError, match="tag_column is column 3"):
        list(ConllColumnsReader(tag_column=3).read(path))


CONLL2003 = SHARED_DATA / "conll2003"


@pytest.mark.skipif(not CONLL2003.exists(), reason="../shared/data/conll2003 is not present")
@pytest.mark.parametrize(
    "name, documents, sentences, tokens, entities",
    [
        ("eng.train", 946, 14041, 203621, 23499),
        ("eng.testa", 216, 3250, 51362, 5942),
        ("eng.testb", 231, 3453, 46435, 5648),
    ],
)
def test_real_conll2003_counts(name, documents, sentences, tokens, entities):
    reader = ConllColumnsReader(tag_column=3, tag_scheme="BIOUL", document_level=True)
    read = list(reader.read(CONLL2003 / name))
    assert len(read) == documents
    assert sum(len(instance["metadata"]["sentence_spans"]) for instance in read) == sentences
    assert sum(len(instance["tokens"]) for instance in read) == tokens
    assert sum(len(tags_to_spans(instance["tags"].labels)) for instance in read) == entities


# --------------------------------------------------------------------------------------------------
# Segments (Seq2Biseq training regime)

# A 5-token sentence (lines 3-7 of the file) and a 2-token one (lines 9-10), tags in BIO.
SEGMENT_FILE = (
    "-DOCSTART- -X- O\n"
    "\n"
    "Ines NNP B-NP\n"
    "Duarte NNP I-NP\n"
    "saw VBD B-VP\n"
    "the DT B-NP\n"
    "dog NN I-NP\n"
    "\n"
    "It PRP B-NP\n"
    "rained VBD B-VP\n"
)


def _segment_reader(**kwargs):
    return ConllColumnsReader(
        tag_column=2, feature_columns={"pos_tags": 1}, file_tag_scheme="BIO", tag_scheme="BIOUL", **kwargs
    )


def test_segments_are_overlapping_windows_shifted_by_one(tmp_path):
    path = tmp_path / "segments.txt"
    path.write_text(SEGMENT_FILE, encoding="utf-8")
    instances = list(_segment_reader(segment_length=3).read(path))
    assert len(instances) == 3 + 1
    words = [[token.text for token in instance["tokens"]] for instance in instances]
    assert words == [
        ["Ines", "Duarte", "saw"],
        ["Duarte", "saw", "the"],
        ["saw", "the", "dog"],
        ["It", "rained"],  # at most segment_length tokens: the whole sentence
    ]
    # BIOUL conversion on the whole sentence (B-NP L-NP U-VP B-NP L-NP), then cut: the second window
    # starts with the L- of "Ines Duarte" and ends with the B- of "the dog".
    assert [instance["tags"].labels for instance in instances] == [
        ["B-NP", "L-NP", "U-VP"],
        ["L-NP", "U-VP", "B-NP"],
        ["U-VP", "B-NP", "L-NP"],
        ["U-NP", "U-VP"],
    ]
    assert instances[1]["pos_tags"].labels == ["NNP", "VBD", "DT"]
    metadata = [instance["metadata"].metadata for instance in instances]
    assert [m["segment_start"] for m in metadata] == [0, 1, 2, 0]
    assert [m["source"] for m in metadata] == ["segments.txt:3", "segments.txt:4", "segments.txt:5", "segments.txt:9"]
    assert [m["sentence_ids"] for m in metadata] == [["segments.txt:d0:s0"]] * 3 + [["segments.txt:d0:s1"]]
    assert [m["sentence_spans"] for m in metadata] == [[(0, 3)]] * 3 + [[(0, 2)]]
    assert all(m["document_id"] == "segments.txt:d0" for m in metadata)
    assert metadata[2]["words"] == ["saw", "the", "dog"]


def test_segments_of_every_length_rebuild_the_sentences():
    sentences = list(ConllColumnsReader(tag_column=3).read(CONLL_FIXTURE))
    for length in (1, 2, 4, 10, 1000):
        segments = list(ConllColumnsReader(tag_column=3, segment_length=length).read(CONLL_FIXTURE))
        expected = sum(max(len(s["tokens"]) - length, 0) + 1 for s in sentences)
        assert len(segments) == expected
        by_sentence = {}
        for segment in segments:
            metadata = segment["metadata"]
            by_sentence.setdefault(metadata["sentence_ids"][0], []).append(segment)
        for sentence in sentences:
            windows = by_sentence[sentence["metadata"]["sentence_ids"][0]]
            words, tags = sentence["metadata"]["words"], sentence["tags"].labels
            assert [w["metadata"]["segment_start"] for w in windows] == list(range(len(windows)))
            for window in windows:
                start = window["metadata"]["segment_start"]
                size = min(length, len(words))
                assert window["metadata"]["words"] == words[start : start + size]
                assert window["tags"].labels == tags[start : start + size]


def test_segments_build_from_params():
    reader = DatasetReader.from_params(Params({"type": "conll_columns", "tag_column": 3, "segment_length": 10}))
    assert isinstance(reader, ConllColumnsReader) and reader.segment_length == 10


@pytest.mark.parametrize("length", [0, -3, 2.5, True])
def test_bad_segment_length(length):
    with pytest.raises(ConfigurationError, match="segment_length must be a positive integer"):
        ConllColumnsReader(segment_length=length)


def test_segments_are_not_for_documents():
    with pytest.raises(ConfigurationError, match="cannot be used with document_level"):
        ConllColumnsReader(segment_length=10, document_level=True)


# --------------------------------------------------------------------------------------------------
# Held-out sentences selected by the data path

CONLL2000_FIXTURE = FIXTURES_ROOT / "conll2000" / "train.txt"


def _sentences(instances):
    return [
        (instance["metadata"]["sentence_ids"][0], instance["metadata"]["source"], instance["metadata"]["words"])
        for instance in instances
    ]


@pytest.mark.parametrize("n", [2, 3, 5])
def test_held_out_partitions_the_sentences(n):
    reader = ConllColumnsReader(tag_column=2, tag_scheme="BIO")
    everything = _sentences(reader.read(CONLL2000_FIXTURE))
    held_out = _sentences(reader.read(f"{CONLL2000_FIXTURE}?held_out={n}"))
    rest = _sentences(reader.read(f"{CONLL2000_FIXTURE}?without_held_out={n}"))
    assert held_out == [sentence for i, sentence in enumerate(everything) if i % n == n - 1]
    assert rest == [sentence for i, sentence in enumerate(everything) if i % n != n - 1]
    assert held_out and not set(map(str, held_out)) & set(map(str, rest))
    assert sorted(held_out + rest) == sorted(everything)
    assert len(held_out) == len(everything) // n


def test_held_out_counts_sentences_across_documents(tmp_path):
    path = tmp_path / "docs.txt"
    path.write_text(
        "-DOCSTART- -X- O\n\na B-NP\n\nb B-NP\n\n-DOCSTART- -X- O\n\nc B-NP\n\nd B-NP\n\ne B-NP\n",
        encoding="utf-8",
    )
    reader = ConllColumnsReader(file_tag_scheme="BIO")
    held_out = _sentences(reader.read(f"{path}?held_out=2"))
    assert held_out == [("docs.txt:d0:s1", "docs.txt:5", ["b"]), ("docs.txt:d1:s1", "docs.txt:11", ["d"])]
    rest = [words for _, _, words in _sentences(reader.read(f"{path}?without_held_out=2"))]
    assert rest == [["a"], ["c"], ["e"]]


def test_held_out_before_segments(tmp_path):
    path = tmp_path / "segments.txt"
    path.write_text(SEGMENT_FILE, encoding="utf-8")
    reader = _segment_reader(segment_length=3)
    assert [i["metadata"]["words"] for i in reader.read(f"{path}?held_out=2")] == [["It", "rained"]]
    assert len(list(reader.read(f"{path}?without_held_out=2"))) == 3


@pytest.mark.parametrize(
    "suffix, message",
    [
        ("?dev=9", "unknown data path selection 'dev=9'"),
        ("?held_out", "unknown data path selection 'held_out'"),
        ("?held_out=1", "held_out must be an integer of at least 2, not '1'"),
        ("?without_held_out=0", "without_held_out must be an integer of at least 2, not '0'"),
        ("?held_out=x", "held_out must be an integer of at least 2, not 'x'"),
        ("?held_out=", "held_out must be an integer of at least 2, not ''"),
        ("?held_out=-3", "held_out must be an integer of at least 2, not '-3'"),
    ],
)
def test_bad_held_out_paths_are_named(suffix, message):
    path = f"{CONLL2000_FIXTURE}{suffix}"
    with pytest.raises(ConfigurationError) as error:
        list(ConllColumnsReader(tag_column=2).read(path))
    assert str(error.value).startswith(f"{path}: ")
    assert message in str(error.value)


def test_held_out_is_not_for_documents():
    path = f"{CONLL2000_FIXTURE}?held_out=3"
    with pytest.raises(ConfigurationError, match="cannot be used with document_level"):
        list(ConllColumnsReader(tag_column=2, document_level=True).read(path))


def test_parse_held_out_path():
    assert parse_held_out_path("data/train.txt") == ("data/train.txt", None)
    assert parse_held_out_path("data/train.txt?held_out=9") == ("data/train.txt", ("held_out", 9))
    assert parse_held_out_path("a?b/train.txt?without_held_out=12") == ("a?b/train.txt", ("without_held_out", 12))
    # A URL keeps its own query string; only the selection keys are taken from it.
    assert parse_held_out_path("https://host/train.txt?dl=1") == ("https://host/train.txt?dl=1", None)
    assert parse_held_out_path("https://host/train.txt?held_out=4") == ("https://host/train.txt", ("held_out", 4))
    assert list(select_held_out(range(10), "held_out", 4)) == [3, 7]
    assert list(select_held_out(range(10), "without_held_out", 4)) == [0, 1, 2, 4, 5, 6, 8, 9]


CONLL2000 = SHARED_DATA / "conll2000"


@pytest.mark.skipif(not CONLL2000.exists(), reason="../shared/data/conll2000 is not present")
def test_real_conll2000_dev_carved_out_of_train():
    reader = ConllColumnsReader(tag_column=2, tag_scheme="BIO")
    train = CONLL2000 / "train.txt"
    held_out = list(reader.read(f"{train}?held_out=9"))
    rest = list(reader.read(f"{train}?without_held_out=9"))
    assert (len(held_out), len(rest)) == (992, 7944)
    assert held_out[0]["metadata"]["sentence_ids"] == ["train.txt:d0:s8"]
    assert held_out[0]["metadata"]["source"] == "train.txt:269"


def test_a_held_out_remainder_selects_one_fold_of_n():
    assert parse_held_out_path("train.txt?held_out=3:0") == ("train.txt", ("held_out", 3, 0))
    folds = [list(select_held_out(range(7), "held_out", 3, j)) for j in range(3)]
    assert folds == [[0, 3, 6], [1, 4], [2, 5]] and list(select_held_out(range(7), "held_out", 3)) == [2, 5]
    assert list(select_held_out(range(7), "without_held_out", 3, 0)) == [1, 2, 4, 5]
    with pytest.raises(ConfigurationError, match="n:j, j < n"):
        parse_held_out_path("train.txt?held_out=3:3")
