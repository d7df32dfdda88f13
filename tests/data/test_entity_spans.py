import json

import pytest
import torch
from allennlp.common import Params
from allennlp.common.checks import ConfigurationError
from allennlp.data import Batch, DatasetReader, Vocabulary
from allennlp.data.dataset_readers.dataset_reader import WorkerInfo
from allennlp.data.fields import AdjacencyField
from nerzoo_runtime.tag_scheme import tags_to_spans

from nerzoo.data.dataset_readers.conll_columns import ColumnFormatError, ConllColumnsReader
from nerzoo.data.dataset_readers.entity_spans import EntitySpansFormatError, EntitySpansReader
from tests import FIXTURES_ROOT

NESTED = FIXTURES_ROOT / "nested"
TRAIN = NESTED / "train.jsonl"
CONLL_FIXTURE = FIXTURES_ROOT / "conll2003" / "train.txt"


@pytest.fixture(scope="module")
def reader():
    return EntitySpansReader(file_format="jsonl")


@pytest.fixture(scope="module")
def train(reader):
    instances = list(reader.read(TRAIN))
    for instance in instances:
        reader.apply_token_indexers(instance)
    return instances


def _raw(path):
    """The sentences straight from the file, entities as `(start, end, type)` tuples."""
    sentences = []
    for line in open(path, encoding="utf-8"):
        if line.strip():
            sentence = json.loads(line)
            sentence["entities"] = [
                (e["start"], e["end"], e["type"]) if isinstance(e, dict) else tuple(e) for e in sentence["entities"]
            ]
            sentences.append(sentence)
    return sentences


def _nested(entities):
    """Pairs of distinct entities where the first lies inside the second."""
    return [(a, b) for a in entities for b in entities if a != b and b[0] <= a[0] and a[1] <= b[1]]


def _write_lines(tmp_path, lines, name="sentences.jsonl"):
    path = tmp_path / name
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


# --------------------------------------------------------------------------------------------------
# Reading the fixtures


@pytest.mark.parametrize("split, count", [("train", 60), ("dev", 20), ("test", 20)])
def test_fixture_counts_and_metadata(reader, split, count):
    path = NESTED / f"{split}.jsonl"
    raw = _raw(path)
    instances = list(reader.read(path))
    assert len(instances) == len(raw) == count
    assert any(_nested(sentence["entities"]) for sentence in raw)
    for line_number, (instance, sentence) in enumerate(zip(instances, raw), start=1):
        metadata = instance["metadata"]
        assert metadata["words"] == sentence["tokens"] == [token.text for token in instance["tokens"]]
        assert 5 <= len(sentence["tokens"]) <= 25
        assert metadata["entities"] == sentence["entities"]
        assert metadata["source"] == f"{path}:{line_number}"
        assert metadata.get("id") == sentence.get("id")
        field = instance["entities"]
        assert isinstance(field, AdjacencyField)
        assert field.indices == [(start, end - 1) for start, end, _ in sentence["entities"]]
        assert field.labels == [label for _, _, label in sentence["entities"]]
        assert field._label_namespace == "labels" and field._padding_value == -1
    assert any("id" in sentence for sentence in raw) and any("id" not in sentence for sentence in raw)


def test_fixtures_are_small_and_varied():
    raw = [sentence for split in ("train", "dev", "test") for sentence in _raw(NESTED / f"{split}.jsonl")]
    assert sum((NESTED / f"{split}.jsonl").stat().st_size for split in ("train", "dev", "test")) < 20_000
    assert {label for sentence in raw for _, _, label in sentence["entities"]} == {"PER", "LOC", "ORG", "MISC"}
    assert any(not sentence["entities"] for sentence in raw)
    # Three levels somewhere: an entity inside one that is itself inside another.
    assert any(
        middle == other
        for sentence in raw
        for _, middle in _nested(sentence["entities"])
        for other, _ in _nested(sentence["entities"])
    )
    assert any('"start"' in line for line in open(NESTED / "dev.jsonl", encoding="utf-8"))


def test_hand_checked_sentence(train):
    instance = train[0]
    metadata = instance["metadata"]
    assert metadata["id"] == "train-001"
    assert metadata["source"] == f"{TRAIN}:1"
    assert (
        metadata["words"]
        == ("John Smith studied at the University of Toronto before joining the Boston Red Sox .").split()
    )
    assert metadata["entities"] == [(0, 2, "PER"), (5, 8, "ORG"), (7, 8, "LOC"), (11, 14, "ORG"), (11, 12, "LOC")]

    vocab = Vocabulary.from_instances(train)
    instance.index_fields(vocab)
    tensor = instance.as_tensor_dict()["entities"]
    assert tensor.shape == (15, 15)
    expected = torch.full((15, 15), -1.0)
    for start, end, label in metadata["entities"]:
        expected[start, end - 1] = vocab.get_token_index(label, "labels")
    assert torch.equal(tensor, expected)
    assert (tensor != -1).sum().item() == 5
    assert set(vocab.get_token_to_index_vocabulary("labels")) == {"PER", "LOC", "ORG", "MISC"}
    assert vocab.get_vocab_size("labels") == 4  # no padding or OOV entry: ids 0..3


# --------------------------------------------------------------------------------------------------
# Batching


def test_batch_of_labelled_sentences_with_and_without_entities(train):
    vocab = Vocabulary.from_instances(train)
    with_entities = train[0]
    without = next(instance for instance in train if not instance["metadata"]["entities"])
    assert len(without["tokens"]) < len(with_entities["tokens"])
    batch = Batch([without, with_entities])
    batch.index_instances(vocab)
    tensors = batch.as_tensor_dict()
    length = len(with_entities["tokens"])
    entities = tensors["entities"]
    assert entities.shape == (2, length, length)
    assert entities.dtype == torch.float32  # AllenNLP's AdjacencyField makes float tensors
    assert entities[0].eq(-1).all()  # no entities, and padding, are -1
    for start, end, label in with_entities["metadata"]["entities"]:
        assert entities[1, start, end - 1].item() == vocab.get_token_index(label, "labels")
    assert entities[1].ne(-1).sum().item() == len(with_entities["metadata"]["entities"])
    assert tensors["tokens"]["tokens"]["tokens"].shape == (2, length)
    assert [metadata["source"] for metadata in tensors["metadata"]] == [
        without["metadata"]["source"],
        with_entities["metadata"]["source"],
    ]


def test_batch_pads_entities_with_minus_one(train):
    vocab = Vocabulary.from_instances(train)
    short = min(train, key=lambda instance: len(instance["tokens"]) - 100 * bool(instance["metadata"]["entities"]))
    long = max(train, key=lambda instance: len(instance["tokens"]))
    short_length, long_length = len(short["tokens"]), len(long["tokens"])
    assert short["metadata"]["entities"] and short_length < long_length
    batch = Batch([short, long])
    batch.index_instances(vocab)
    entities = batch.as_tensor_dict()["entities"]
    assert entities.shape == (2, long_length, long_length)
    assert entities[0, short_length:, :].eq(-1).all() and entities[0, :, short_length:].eq(-1).all()
    for start, end, label in short["metadata"]["entities"]:
        assert entities[0, start, end - 1].item() == vocab.get_token_index(label, "labels")


def test_batch_of_sentences_without_entities_only(reader, train):
    vocab = Vocabulary.from_instances(train)
    empty = [reader.text_to_instance(["It", "rained", "."], []), reader.text_to_instance(["No", "."], [])]
    for instance in empty:
        reader.apply_token_indexers(instance)
    batch = Batch(empty)
    batch.index_instances(vocab)
    entities = batch.as_tensor_dict()["entities"]
    assert entities.shape == (2, 3, 3) and entities.eq(-1).all()


def test_batch_of_unlabelled_sentences(reader, train):
    vocab = Vocabulary.from_instances(train)
    unlabelled = [reader.text_to_instance("Peter met Mei Chen in Oslo .".split()), reader.text_to_instance(["Hi"])]
    for instance in unlabelled:
        reader.apply_token_indexers(instance)
    batch = Batch(unlabelled)
    batch.index_instances(vocab)
    tensors = batch.as_tensor_dict()
    assert set(tensors) == {"tokens", "metadata"}
    assert tensors["tokens"]["tokens"]["tokens"].shape == (2, 7)
    # AllenNLP refuses to batch labelled with unlabelled sentences.
    with pytest.raises(ConfigurationError, match="non-homogeneous"):
        Batch([unlabelled[0], train[0]])


# --------------------------------------------------------------------------------------------------
# CoNLL input


def test_conll_entities_are_the_spans_of_the_tags():
    # fixtures/conll2003/train.txt is IOB1 (one B-LOC, where two LOCs touch), NER in column 3.
    spans_reader = EntitySpansReader(conll={"tag_column": 3, "file_tag_scheme": "IOB1"})
    columns_reader = ConllColumnsReader(tag_column=3, file_tag_scheme="IOB1")
    read = list(spans_reader.read(CONLL_FIXTURE))
    tagged = list(columns_reader.read(CONLL_FIXTURE))
    assert len(read) == len(tagged) > 0
    total = 0
    for instance, reference in zip(read, tagged):
        expected = [(start, end, label) for label, start, end in tags_to_spans(reference["tags"].labels)]
        assert instance["metadata"]["words"] == reference["metadata"]["words"]
        assert instance["metadata"]["entities"] == expected
        assert instance["entities"].indices == [(start, end - 1) for start, end, _ in expected]
        assert instance["entities"].labels == [label for _, _, label in expected]
        assert instance["metadata"]["id"] == reference["metadata"]["sentence_ids"][0]
        assert instance["metadata"]["source"].rsplit(":", 1)[1] == reference["metadata"]["source"].rsplit(":", 1)[1]
        total += len(expected)
    assert total > 50
    assert read[0]["metadata"]["source"] == f"{CONLL_FIXTURE}:3"
    assert read[0]["metadata"]["entities"] == [(0, 2, "ORG"), (9, 10, "LOC")]
    # The adjacent pair "Oslo I-LOC Bergen B-LOC" is two entities.
    assert read[-1]["metadata"]["entities"][:2] == [(2, 3, "LOC"), (3, 4, "LOC")]
    # The output scheme of the inner reader makes no difference to the spans.
    bio = list(EntitySpansReader(conll={"tag_column": 3, "tag_scheme": "BIO"}).read(CONLL_FIXTURE))
    assert [i["metadata"]["entities"] for i in bio] == [i["metadata"]["entities"] for i in read]


def test_conll_errors_come_from_the_column_reader(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_text("Peter NNP I-NP I-PER\n\nBonn NNP I-NP X-LOC\n", encoding="utf-8")
    with pytest.raises(ColumnFormatError, match=f"^{path}:3: tag 'X-LOC' is not a IOB1 tag"):
        list(EntitySpansReader(conll={"tag_column": 3}).read(path))
    path.write_text("", encoding="utf-8")
    with pytest.raises(ColumnFormatError, match=f"^{path}: the file holds no token lines"):
        list(EntitySpansReader(conll={"tag_column": 3}).read(path))


@pytest.mark.parametrize(
    "options, message",
    [
        ({"file_format": "xml"}, "file_format must be one of 'conll', 'jsonl'"),
        ({"conll": {"document_level": True}}, r"unsupported 'conll' option\(s\) \['document_level'\]"),
        ({"conll": {"label_namespace": "x"}}, "options of entity_spans itself"),
        ({"conll": {"file_tag_scheme": None}}, "file_tag_scheme may not be None"),
        ({"conll": {"file_tag_scheme": "IOB2"}}, "unknown tag scheme 'IOB2'"),
        ({"file_format": "jsonl", "conll": {"tag_column": 3}}, "apply only to file_format 'conll'"),
    ],
)
def test_bad_options(options, message):
    with pytest.raises(ConfigurationError, match=message):
        EntitySpansReader(**options)


# --------------------------------------------------------------------------------------------------
# Validation

GOOD = json.dumps(
    {
        "tokens": ["Anna", "Chen", "visited", "the", "University", "of", "Oslo"],
        "entities": [[0, 2, "PER"], [4, 7, "ORG"], [6, 7, "LOC"]],
    }
)


def _sentence(**changes):
    sentence = {"tokens": ["The", "University", "of", "Oslo", "opened"], "entities": [[1, 4, "ORG"], [3, 4, "LOC"]]}
    sentence.update(changes)
    return json.dumps(sentence)


BAD_LINES = [
    ('{"tokens": ["a", "b"', ": invalid JSON"),
    ('["The", "cat"]', ": expected a JSON object with 'tokens', got list"),
    (json.dumps({"entities": []}), ": missing 'tokens'"),
    (_sentence(tokens=[]), ": 'tokens' is empty"),
    (_sentence(tokens="The University of Oslo opened"), ": 'tokens' must be a list of strings, got str"),
    (_sentence(tokens=["The", "University", 7, "Oslo", "opened"]), ": tokens[2] must be a string, got int 7"),
    (_sentence(tokens=["The", "University", "", "Oslo", "opened"]), ": tokens[2] is empty or only whitespace"),
    (_sentence(id=3), ": 'id' must be a string, got 3"),
    (_sentence(entities={"start": 1, "end": 4, "type": "ORG"}), ": 'entities' must be a list of entities, got dict"),
    (_sentence(entities=[[1, 4]]), ": entities[0] must be [start, end, type]"),
    (_sentence(entities=[[1, 4, "ORG"], "LOC"]), ": entities[1] must be [start, end, type]"),
    (
        _sentence(entities=[{"start": 1, "end": 4, "label": "ORG"}]),
        ': entities[0] {"start": 1, "end": 4, "label": "ORG"} must have exactly the keys \'start\', \'end\' and \'type\' '
        "(missing ['type']; unknown keys ['label'])",
    ),
    (_sentence(entities=[[1, "4", "ORG"]]), ": entities[0] [1, '4', 'ORG']: start and end must be integers"),
    (_sentence(entities=[[True, 4, "ORG"]]), ": entities[0] [True, 4, 'ORG']: start and end must be integers"),
    (_sentence(entities=[[1, 4, 5]]), ": entities[0] [1, 4, 5]: the type must be a string, got int"),
    (_sentence(entities=[[1, 4, "ORG"], [3, 4, " "]]), ": entities[1] [3, 4, ' ']: the type is empty"),
    (
        _sentence(entities=[{"start": 3, "end": 3, "type": "LOC"}]),
        ": entities[0] [3, 3, 'LOC']: start must be less than end (offsets are end-exclusive)",
    ),
    (_sentence(entities=[[4, 2, "LOC"]]), ": entities[0] [4, 2, 'LOC']: start must be less than end"),
    (
        _sentence(entities=[[1, 4, "ORG"], [3, 6, "LOC"]]),
        ": entities[1] [3, 6, 'LOC']: out of range for a sentence of 5 tokens (0 <= start < end <= 5)",
    ),
    (_sentence(entities=[[-1, 2, "ORG"]]), ": entities[0] [-1, 2, 'ORG']: out of range for a sentence of 5 tokens"),
    (
        _sentence(entities=[[1, 4, "ORG"], [3, 4, "LOC"], [1, 4, "MISC"]]),
        ": entities[2] [1, 4, 'MISC']: the span (1, 4) is already entities[0]; a span may have only one type",
    ),
    (
        _sentence(entities=[[1, 4, "ORG"], {"start": 1, "end": 4, "type": "ORG"}]),
        ": entities[1] [1, 4, 'ORG']: the span (1, 4) is already entities[0]",
    ),
    (_sentence(complete="no"), ": 'complete' must be true or false, got 'no'"),
    (_sentence(complete=None), ": 'complete' must be true or false, got None"),
    (_sentence(empty=[[0, 1]]), ": 'empty' needs \"complete\": false"),
    (_sentence(complete=False, empty={"start": 0}), ": 'empty' must be a list of [start, end] stretches, got dict"),
    (_sentence(complete=False, empty=[[0]]), ": empty[0] [0] must be [start, end] with integer offsets"),
    (_sentence(complete=False, empty=[[0, "1"]]), ": empty[0] [0, '1'] must be [start, end] with integer offsets"),
    (_sentence(complete=False, empty=[[0, 1], [4, 6]]), ": empty[1] [4, 6]: out of range (0 <= start < end <= 5)"),
    (_sentence(complete=False, empty=[[1, 1]]), ": empty[0] [1, 1]: out of range (0 <= start < end <= 5)"),
    (_sentence(complete=False, empty=[[0, 2]]), ": empty[0] [0, 2] overlaps the entity [1, 4, 'ORG']"),
]


@pytest.mark.parametrize("line, message", BAD_LINES, ids=[message for _, message in BAD_LINES])
def test_validation_errors_name_file_and_line(reader, tmp_path, line, message):
    path = _write_lines(tmp_path, [GOOD, "", line, GOOD])
    read = []
    with pytest.raises(EntitySpansFormatError) as error:
        for instance in reader.read(path):
            read.append(instance)
    assert isinstance(error.value, ConfigurationError)
    assert str(error.value).startswith(f"{path}:3: ")
    assert message in str(error.value)
    assert len(read) == 1  # the good sentence on line 1; blank lines are skipped


# --------------------------------------------------------------------------------------------------
# Partial annotation


def _matrix(instance, vocab, length=None):
    field = instance["entities"]
    field.index(vocab)
    return field.as_tensor({"num_tokens": length or field.sequence_field.sequence_length()})


def test_a_sentence_annotated_in_part(reader, tmp_path):
    partial = _sentence(complete=False, empty=[[0, 1], [4, 5], [4, 5]])
    path = _write_lines(tmp_path, [_sentence(complete=True), partial, _sentence(complete=False)])
    complete, instance, bare = reader.read(path)
    assert "partial" not in complete["metadata"] and complete["entities"]._padding_value == -1
    assert instance["metadata"]["partial"] and instance["metadata"]["empty"] == [(0, 1), (4, 5), (4, 5)]
    assert instance["metadata"]["entities"] == [(1, 4, "ORG"), (3, 4, "LOC")]
    assert bare["metadata"]["empty"] == []
    vocab = Vocabulary.from_instances([complete, instance])
    org, loc = (vocab.get_token_index(label, "labels") for label in ("ORG", "LOC"))
    expected = torch.full((7, 7), -2.0)
    expected[1, 3], expected[3, 3], expected[0, 0], expected[4, 4] = org, loc, -1, -1
    assert torch.equal(_matrix(instance, vocab, 7), expected)
    assert torch.equal(_matrix(bare, vocab) >= -1, _matrix(complete, vocab) >= 0)


def test_known_empty_stretches_are_every_fragment_inside_them(reader):
    words = "a b c d e f g".split()
    instance = reader.text_to_instance(words, [(3, 4, "LOC")], None, False, [(0, 3), (4, 7)])
    reader.apply_token_indexers(instance)
    vocab = Vocabulary.from_instances([instance])
    matrix = _matrix(instance, vocab)
    loc = vocab.get_token_index("LOC", "labels")
    for start in range(7):
        for end in range(start + 1, 8):
            inside = end <= 3 or 4 <= start
            assert matrix[start, end - 1] == (-1 if inside else loc if (start, end) == (3, 4) else -2)


def test_batch_pads_each_sentence_with_its_own_value(reader, train):
    partial = reader.text_to_instance(["Oslo", "is", "cold"], [(0, 1, "LOC")], {}, False, [(1, 3)])
    reader.apply_token_indexers(partial)
    vocab = Vocabulary.from_instances(train)
    batch = Batch([train[0], partial])
    batch.index_instances(vocab)
    entities = batch.as_tensor_dict()["entities"]
    length = len(train[0]["tokens"])
    assert entities.shape == (2, length, length)
    assert (entities[0] >= -1).all() and (entities[1, 3:] == -2).all() and (entities[1, :, 3:] == -2).all()
    assert entities[1, 0, 0] == vocab.get_token_index("LOC", "labels") and entities[1, 1, 2] == -1


def test_conll_with_missing_tags(tmp_path):
    path = tmp_path / "partial.txt"
    lines = [
        "Peter NNP I-NP I-PER", "Blackburn NNP I-NP I-PER", "visited VBD I-VP -", "the DT I-NP O",
        "old JJ I-NP O", "city NN I-NP -", "of IN I-PP O", "Bonn NNP I-NP I-LOC", "",
        "Bonn NNP I-NP I-LOC", "won VBD I-VP O", "",
    ]  # fmt: skip
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    partial, full = EntitySpansReader(conll={"tag_column": 3}).read(path)
    assert partial["metadata"]["entities"] == [(0, 2, "PER"), (7, 8, "LOC")]
    assert partial["metadata"]["empty"] == [(3, 5), (6, 7)] and partial["metadata"]["partial"]
    assert partial["entities"]._padding_value == -2
    # A fully annotated sentence reads as in a file without missing tags.
    metadata = {
        "words": ["Bonn", "won"],
        "source": f"{path}:10",
        "entities": [(0, 1, "LOC")],
        "id": "partial.txt:d0:s1",
    }
    assert full["metadata"].metadata == metadata and full["entities"]._padding_value == -1


def test_conll_missing_tag_and_unconfirmed_o_options(tmp_path):
    path = tmp_path / "partial.txt"
    path.write_text("Peter NNP I-NP I-PER\nvisited VBD I-VP ?\nBonn NNP I-NP O\n", encoding="utf-8")
    (instance,) = EntitySpansReader(conll={"tag_column": 3, "missing_tag": "?"}).read(path)
    assert instance["metadata"]["entities"] == [(0, 1, "PER")] and instance["metadata"]["empty"] == [(2, 3)]
    (instance,) = EntitySpansReader(conll={"tag_column": 3, "missing_tag": "?", "o_unconfirmed": True}).read(path)
    assert instance["metadata"]["entities"] == [(0, 1, "PER")] and instance["metadata"]["empty"] == []
    path.write_text("Peter NNP I-NP B-PER\nvisited VBD I-VP -\nBonn NNP I-NP I-PER\n", encoding="utf-8")
    with pytest.raises(ColumnFormatError, match=f"^{path}:3: a marked span is cut by a token left open"):
        list(EntitySpansReader(conll={"tag_column": 3, "file_tag_scheme": "BIO"}).read(path))


def test_invalid_overlap_range_fixture(reader):
    path = NESTED / "invalid_overlap_range.jsonl"
    message = (
        f"^{path}:2: entities\\[1\\] \\[3, 7, 'LOC'\\]: out of range for a sentence of 6 tokens "
        r"\(0 <= start < end <= 6\)$"
    )
    with pytest.raises(EntitySpansFormatError, match=message):
        list(reader.read(path))


def test_non_utf8_and_empty_files(reader, tmp_path):
    bad_utf8 = tmp_path / "latin1.jsonl"
    bad_utf8.write_bytes(GOOD.encode() + b"\n" + '{"tokens": ["Z\xfcrich"]}'.encode("latin-1") + b"\n")
    with pytest.raises(EntitySpansFormatError, match=f"^{bad_utf8}:2: not valid UTF-8"):
        list(reader.read(bad_utf8))
    for content in ("", "\n  \n"):
        empty = tmp_path / "empty.jsonl"
        empty.write_text(content, encoding="utf-8")
        with pytest.raises(EntitySpansFormatError, match=f"^{empty}: the file holds no sentences$"):
            list(reader.read(empty))


def test_byte_order_mark_and_unlabelled_lines(reader, tmp_path):
    path = tmp_path / "bom.jsonl"
    lines = [GOOD, json.dumps({"tokens": ["Hello", "Oslo"], "entities": None}), json.dumps({"tokens": ["Hi"]})]
    path.write_bytes(b"\xef\xbb\xbf" + "\n".join(lines).encode("utf-8"))
    first, second, third = reader.read(path)
    assert first["metadata"]["entities"] == [(0, 2, "PER"), (4, 7, "ORG"), (6, 7, "LOC")]
    for instance in (second, third):
        assert "entities" not in instance.fields and "entities" not in instance["metadata"]
    assert third["metadata"]["source"] == f"{path}:3"


# --------------------------------------------------------------------------------------------------
# text_to_instance, options


def test_text_to_instance_without_entities_and_with_extra_metadata(reader):
    words = ["Peter", "Blackburn", "visited", "Brussels", "."]
    metadata = {
        "text": "Peter Blackburn visited Brussels .",
        "offsets": [(0, 5), (6, 15), (16, 23), (24, 32), (33, 34)],
    }
    instance = reader.text_to_instance(words, metadata=metadata)
    assert set(instance.fields) == {"tokens", "metadata"}
    assert instance["metadata"].metadata == {"words": words, "source": None, **metadata}
    assert instance["tokens"]._token_indexers is None  # set by apply_token_indexers, as in predictors
    reader.apply_token_indexers(instance)
    assert instance["tokens"].token_indexers is reader._token_indexers
    vocab = Vocabulary.from_instances([instance])
    instance.index_fields(vocab)
    assert instance.as_tensor_dict()["tokens"]["tokens"]["tokens"].shape == (5,)


def test_text_to_instance_with_entities(reader, train):
    words = train[0]["metadata"]["words"]
    entities = [(0, 2, "PER"), (5, 8, "ORG"), (7, 8, "LOC"), (11, 14, "ORG"), (11, 12, "LOC")]
    instance = reader.text_to_instance(words, entities, {"id": "mine"})
    assert instance["metadata"].metadata == {"words": words, "source": None, "entities": entities, "id": "mine"}
    assert instance["entities"].indices == train[0]["entities"].indices
    assert instance["entities"].labels == train[0]["entities"].labels
    empty = reader.text_to_instance(words, [])
    assert empty["entities"].indices == [] and empty["metadata"]["entities"] == []


def test_text_to_instance_errors(reader):
    with pytest.raises(EntitySpansFormatError, match=r"^<input>: entities\[0\] \[0, 9, 'PER'\]: out of range"):
        reader.text_to_instance(["Anna", "Chen"], [(0, 9, "PER")])
    with pytest.raises(EntitySpansFormatError, match=r"^x\.jsonl:4: 'tokens' is empty"):
        reader.text_to_instance([], metadata={"source": "x.jsonl:4"})
    with pytest.raises(EntitySpansFormatError, match=r"the span \(0, 2\) is already entities\[0\]"):
        reader.text_to_instance(["Anna", "Chen"], [(0, 2, "PER"), (0, 2, "ORG")])


def test_from_params_token_indexers_and_label_namespace():
    reader = DatasetReader.from_params(
        Params(
            {
                "type": "entity_spans",
                "file_format": "jsonl",
                "label_namespace": "entity_labels",
                "token_indexers": {"chars": {"type": "characters", "min_padding_length": 3}},
            }
        )
    )
    assert isinstance(reader, EntitySpansReader)
    instances = list(reader.read(TRAIN))
    for instance in instances:
        reader.apply_token_indexers(instance)
    vocab = Vocabulary.from_instances(instances)
    assert vocab.get_vocab_size("entity_labels") == 4
    batch = Batch(instances[:3])
    batch.index_instances(vocab)
    tensors = batch.as_tensor_dict()
    assert set(tensors["tokens"]) == {"chars"}
    conll = DatasetReader.from_params(Params({"type": "entity_spans", "conll": {"tag_column": 3}}))
    assert conll._conll_reader.tag_column == 3 and conll._conll_reader.file_tag_scheme == "IOB1"


def test_max_instances_and_worker_sharding():
    raw = _raw(TRAIN)
    assert len(list(EntitySpansReader(file_format="jsonl", max_instances=7).read(TRAIN))) == 7
    for file_format, path in (("jsonl", TRAIN), ("conll", CONLL_FIXTURE)):
        everything = [
            i["metadata"]["source"] for i in EntitySpansReader(file_format=file_format, conll=None).read(path)
        ]
        shards = []
        for worker in range(2):
            reader = EntitySpansReader(file_format=file_format)
            reader._set_worker_info(WorkerInfo(2, worker))
            shards.append([instance["metadata"]["source"] for instance in reader.read(path)])
        assert shards[0] == everything[0::2] and shards[1] == everything[1::2]
    assert len(everything) > 0 and len(raw) == 60
