import pytest

from nerzoo.data.dataset_readers.conll_columns import ColumnFormatError, ConllColumnsReader
from nerzoo.data.tag_schemes import tags_to_spans
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
    [("eng.train", 946, 14041, 203621, 23499), ("eng.testa", 216, 3250, 51362, 5942), ("eng.testb", 231, 3453, 46435, 5648)],
)
def test_real_conll2003_counts(name, documents, sentences, tokens, entities):
    reader = ConllColumnsReader(tag_column=3, tag_scheme="BIOUL", document_level=True)
    read = list(reader.read(CONLL2003 / name))
    assert len(read) == documents
    assert sum(len(instance["metadata"]["sentence_spans"]) for instance in read) == sentences
    assert sum(len(instance["tokens"]) for instance in read) == tokens
    assert sum(len(tags_to_spans(instance["tags"].labels)) for instance in read) == entities
