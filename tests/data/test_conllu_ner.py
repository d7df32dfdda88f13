from collections import Counter, defaultdict

import pytest
from allennlp.common import Params
from allennlp.common.checks import ConfigurationError
from allennlp.data import Batch, DatasetReader, Vocabulary
from nerzoo_runtime.tag_scheme import convert_tags, tags_to_spans

from nerzoo.data.dataset_readers.conll_columns import ColumnFormatError
from nerzoo.data.dataset_readers.conllu_ner import ConlluNerReader
from nerzoo.data.dependency_trees import InvalidTreeError, validate_heads
from nerzoo.data.partial_tags import OPEN, PartialTagsField
from tests import FIXTURES_ROOT, SHARED_DATA

UD = FIXTURES_ROOT / "ud"
NER_MISC = UD / "ner_misc.conllu"


def _conllu_counts(path):
    """Independent count of (sentences, basic-tree words) straight from the text."""
    sentences = words = 0
    for line in open(path, encoding="utf-8"):
        if line.startswith("# sent_id"):
            sentences += 1
        elif line.strip() and not line.startswith("#") and line.split("\t")[0].isdigit():
            words += 1
    return sentences, words


def _by_id(instances):
    return {instance["metadata"]["sentence_id"]: instance for instance in instances}


# --------------------------------------------------------------------------------------------------
# validate_heads


def test_validate_heads_counts_roots():
    assert validate_heads([2, 0, 2], "s") == 1
    assert validate_heads([0, 1, 1, 0, 4], "s") == 2
    assert validate_heads([0], "s") == 1


@pytest.mark.parametrize(
    "heads, message",
    [
        ([2, 3, 2, 0], "tokens 2 -> 3 -> 2 form a cycle"),
        ([2, 1], "no root"),
        ([0, 2, 1], "token 2 is its own head"),
        ([0, 5, 1], "token 2 has head 5, outside 0..3"),
        ([0, -1], "token 2 has head -1"),
        ([0, "1"], "not an integer"),
        ([], "no tokens"),
    ],
)
def test_validate_heads_rejects_non_trees(heads, message):
    with pytest.raises(InvalidTreeError) as error:
        validate_heads(heads, "where.conllu:7 (sent_id = x)")
    assert str(error.value).startswith("where.conllu:7 (sent_id = x): invalid dependency tree")
    assert message in str(error.value)


def test_validate_heads_is_linear_on_long_chains():
    # A 200k-token chain (each token headed by the next) is checked without quadratic work.
    n = 200_000
    assert validate_heads(list(range(2, n + 1)) + [0], "chain") == 1


# --------------------------------------------------------------------------------------------------
# NER in MISC


def test_misc_ner_fields_and_values():
    instances = list(ConlluNerReader().read(NER_MISC))
    sentences, words = _conllu_counts(NER_MISC)
    assert len(instances) == sentences == 14
    assert sum(len(instance["tokens"]) for instance in instances) == words
    first = instances[0]
    assert set(first.fields) == {"tokens", "pos_tags", "dependency_labels", "head_indices", "tags", "metadata"}
    assert [token.text for token in first["tokens"]] == ["Maria", "Lopez", "visited", "Lisbon", "last", "week", "."]
    assert first["head_indices"].labels == [3, 1, 0, 3, 6, 3, 3]
    assert first["pos_tags"].labels == ["PROPN", "PROPN", "VERB", "PROPN", "ADJ", "NOUN", "PUNCT"]
    assert first["pos_tags"]._label_namespace == "pos"
    assert first["dependency_labels"].labels == ["nsubj", "flat", "root", "obj", "amod", "obl:tmod", "punct"]
    assert first["dependency_labels"]._label_namespace == "dependency_relations"
    assert first["tags"].labels == ["B-PER", "L-PER", "O", "U-LOC", "O", "O", "O"]
    metadata = first["metadata"].metadata
    assert metadata["sentence_id"] == "travel-0001"
    assert metadata["document_id"] == "nerzoo-travel"
    assert metadata["source"] == "ner_misc.conllu:4"
    assert metadata["num_roots"] == 1
    assert metadata["sentence_spans"] == [(0, 7)]
    assert metadata["words"] == [token.text for token in first["tokens"]]
    by_id = _by_id(instances)
    assert by_id["offices-0001"]["metadata"]["document_id"] == "nerzoo-offices"
    assert by_id["offices-0005"]["tags"].labels[:3] == ["B-ORG", "I-ORG", "L-ORG"]
    spans = Counter(span[0] for instance in instances for span in tags_to_spans(instance["tags"].labels))
    assert spans == {"PER": 11, "LOC": 10, "ORG": 8}


def test_multiword_tokens_and_empty_nodes_are_skipped():
    by_id = _by_id(ConlluNerReader().read(NER_MISC))
    multiword = by_id["travel-0002"]
    assert multiword["metadata"]["words"] == ["Tomas", "does", "n't", "work", "for", "Brightwell", "Labs", "."]
    assert multiword["head_indices"].labels == [4, 4, 4, 0, 7, 7, 4, 4]
    ellipsis = by_id["travel-0003"]
    assert ellipsis["metadata"]["words"] == ["Anna", "flew", "to", "Oslo", "and", "Peter", "to", "Rome", "."]
    assert ellipsis["dependency_labels"].labels[7] == "orphan"
    assert by_id["offices-0004"]["metadata"]["words"][:2] == ["I", "'m"]


def test_multi_root_sentences_are_kept_and_counted():
    by_id = _by_id(ConlluNerReader().read(NER_MISC))
    two_roots = by_id["travel-0004"]
    assert two_roots["metadata"]["num_roots"] == 2
    assert two_roots["head_indices"].labels == [0, 1, 1, 0, 4, 7, 4, 4]
    assert sum(instance["metadata"]["num_roots"] > 1 for instance in by_id.values()) == 1


def test_tensors_and_vocabulary():
    reader = ConlluNerReader()
    instances = list(reader.read(NER_MISC))
    vocab = Vocabulary.from_instances(instances)
    assert "PROPN" in vocab.get_token_to_index_vocabulary("pos")
    assert "nsubj" in vocab.get_token_to_index_vocabulary("dependency_relations")
    assert "U-LOC" in vocab.get_token_to_index_vocabulary("labels")
    assert "head_index_tags" not in vocab.get_namespaces()  # integer heads are not indexed
    for instance in instances:
        reader.apply_token_indexers(instance)
    batch = Batch(instances[:3])
    batch.index_instances(vocab)
    tensors = batch.as_tensor_dict()
    heads = tensors["head_indices"]
    assert heads.shape == (3, 9)
    assert heads[0].tolist() == [3, 1, 0, 3, 6, 3, 3, 0, 0]  # padded with 0
    assert tensors["tokens"]["tokens"]["tokens"].shape == (3, 9)


def test_other_options():
    xpos = list(ConlluNerReader(pos_column="xpos", tag_scheme="BIO").read(NER_MISC))
    assert xpos[0]["pos_tags"].labels[:3] == ["NNP", "NNP", "VBD"]
    assert xpos[0]["tags"].labels[:4] == ["B-PER", "I-PER", "O", "B-LOC"]
    dropped = list(ConlluNerReader(drop_entity_types=["ORG"]).read(NER_MISC))
    assert not any(tag.endswith("ORG") for instance in dropped for tag in instance["tags"].labels)
    named = list(ConlluNerReader(label_namespace="ner_labels").read(NER_MISC))
    assert named[0]["tags"]._label_namespace == "ner_labels"


def test_a_chain_tree_in_place_of_the_parse():
    parsed = list(ConlluNerReader().read(NER_MISC))
    chained = list(ConlluNerReader(tree="chain").read(NER_MISC))
    for tree, chain in zip(parsed, chained):
        length = len(tree["tokens"])
        assert chain["head_indices"].labels == [*range(2, length + 1), 0]
        assert chain["dependency_labels"].labels == ["chain"] * length
        assert chain["pos_tags"].labels == tree["pos_tags"].labels
        assert chain["tags"].labels == tree["tags"].labels
    served = ConlluNerReader(tree="chain").text_to_instance(["a", "b", "c"], ["X"] * 3, ["dep"] * 3, [0, 1, 1])
    assert served["head_indices"].labels == [2, 3, 0]
    with pytest.raises(ConfigurationError, match="tree must be"):
        ConlluNerReader(tree="linear")


def test_ner_column():
    instances = list(ConlluNerReader(ner_column=10).read(UD / "ner_column.conllu"))
    assert len(instances) == 3
    assert instances[0]["tags"].labels == ["B-PER", "L-PER", "O", "B-ORG", "L-ORG", "O", "U-LOC", "O"]
    assert instances[1]["metadata"]["words"] == ["She", "'s", "back", "in", "Quito", "."]  # multiword skipped
    assert instances[1]["head_indices"].labels == [5, 5, 5, 5, 0, 5]
    assert instances[2]["tags"].labels == ["O", "O", "O"]
    with pytest.raises(ConfigurationError, match="ner_column must index a column after"):
        ConlluNerReader(ner_column=9)


def test_file_without_ner_gives_instances_without_tags():
    instances = list(ConlluNerReader().read(UD / "uner_treebank.conllu"))
    assert len(instances) == 4
    assert all("tags" not in instance.fields for instance in instances)
    assert instances[1]["metadata"]["words"] == ["They", "did", "n't", "like", "the", "Danish", "food", "."]


def test_builds_from_params():
    reader = DatasetReader.from_params(Params({"type": "conllu_ner", "pos_column": "xpos"}))
    assert isinstance(reader, ConlluNerReader)
    assert len(list(reader.read(NER_MISC))) == 14


# --------------------------------------------------------------------------------------------------
# Universal NER files joined with a treebank by sent_id


def test_uner_join_by_sent_id_keeps_the_ner_file_order():
    reader = ConlluNerReader(treebank=str(UD / "uner_treebank.conllu"), drop_entity_types=["OTH", "O"])
    instances = list(reader.read(UD / "uner_sample.iob2"))
    assert [instance["metadata"]["sentence_id"] for instance in instances] == [
        "uner-demo-b-0001",
        "uner-demo-a-0002",
        "uner-demo-a-0001",
        "uner-demo-b-0002",
    ]
    trees = _by_id(ConlluNerReader().read(UD / "uner_treebank.conllu"))
    for instance in instances:
        tree = trees[instance["metadata"]["sentence_id"]]
        assert instance["metadata"]["words"] == tree["metadata"]["words"]
        assert instance["head_indices"].labels == tree["head_indices"].labels
        assert instance["dependency_labels"].labels == tree["dependency_labels"].labels
        assert instance["metadata"]["document_id"] == tree["metadata"]["document_id"]
    elena = instances[2]
    assert elena["tags"].labels == ["B-PER", "L-PER", "O", "O", "B-ORG", "L-ORG", "O", "U-LOC", "O"]  # 3-column row
    assert elena["metadata"]["source"] == "uner_sample.iob2:26"
    assert elena["metadata"]["tree_source"] == "uner_treebank.conllu:4"
    assert instances[1]["tags"].labels == ["O"] * 8  # B-OTH and the spurious B-O dropped
    assert instances[0]["tags"].labels == ["O", "O", "U-PER", "O", "B-ORG", "L-ORG", "O"]


def test_uner_join_keeps_other_types_unless_dropped():
    reader = ConlluNerReader(treebank=str(UD / "uner_tree*.conllu"))  # a glob
    instances = _by_id(reader.read(UD / "uner_sample.iob2"))
    assert instances["uner-demo-a-0002"]["tags"].labels[5] == "U-OTH"
    assert instances["uner-demo-a-0002"]["tags"].labels[7] == "U-O"
    index = reader.treebank_index()
    assert reader.treebank_index() is index  # built once per reader
    list(reader.read(UD / "uner_sample.iob2"))
    assert reader.treebank_index() is index


def _write_iob2(path, sentence_id, words_tags, extra_columns=True):
    lines = [f"# sent_id = {sentence_id}"]
    for index, (word, tag) in enumerate(words_tags, start=1):
        lines.append(f"{index}\t{word}\t{tag}" + ("\t-\t-" if extra_columns else ""))
    path.write_text("\n".join(lines) + "\n\n", encoding="utf-8")


def test_uner_word_mismatch_names_both_files_and_the_sentence(tmp_path):
    path = tmp_path / "changed.iob2"
    _write_iob2(path, "uner-demo-b-0002", [("Thank", "O"), ("!", "O")])
    reader = ConlluNerReader(treebank=str(UD / "uner_treebank.conllu"))
    with pytest.raises(ConfigurationError) as error:
        list(reader.read(path))
    message = str(error.value)
    assert message.startswith(f"{path}:2:")
    assert "uner-demo-b-0002" in message and "uner_treebank.conllu:39" in message
    assert "'Thank' vs 'Thanks'" in message


def test_uner_missing_sent_id(tmp_path):
    path = tmp_path / "unknown.iob2"
    _write_iob2(path, "no-such-sentence", [("Thanks", "O"), ("!", "O")])
    with pytest.raises(ConfigurationError, match="sent_id 'no-such-sentence' is not in the treebank"):
        list(ConlluNerReader(treebank=str(UD / "uner_treebank.conllu")).read(path))
    with pytest.raises(ConfigurationError, match="matches no file"):
        list(ConlluNerReader(treebank=str(tmp_path / "none*.conllu")).read(path))


def test_uner_duplicate_sent_ids_in_treebank(tmp_path):
    copy = tmp_path / "copy.conllu"
    copy.write_bytes((UD / "uner_treebank.conllu").read_bytes())
    (tmp_path / "copy2.conllu").write_bytes(copy.read_bytes())
    reader = ConlluNerReader(treebank=str(tmp_path / "*.conllu"))
    with pytest.raises(ConfigurationError, match="also occurs at"):
        list(reader.read(UD / "uner_sample.iob2"))


def test_uner_bad_row(tmp_path):
    path = tmp_path / "bad.iob2"
    path.write_text("# sent_id = uner-demo-b-0002\n1\tThanks\tO\t-\n2\t!\tO\t-\t-\n", encoding="utf-8")
    with pytest.raises(ColumnFormatError, match=f"^{path}:2: expected 5 tab-separated columns"):
        list(ConlluNerReader(treebank=str(UD / "uner_treebank.conllu")).read(path))


# --------------------------------------------------------------------------------------------------
# Bad input


@pytest.mark.parametrize(
    "fixture, sentence_id, line, message",
    [
        ("invalid_cycle.conllu", "cycle-0002", 11, "tokens 5 -> 4 -> 5 form a cycle"),
        ("invalid_head_range.conllu", "range-0001", 3, "token 3 has head 9, outside 0..4"),
    ],
)
def test_invalid_tree_fixtures(fixture, sentence_id, line, message):
    with pytest.raises(InvalidTreeError) as error:
        list(ConlluNerReader().read(UD / fixture))
    text = str(error.value)
    assert text.startswith(f"{UD / fixture}:{line} (sent_id = {sentence_id}): invalid dependency tree")
    assert message in text


ROW = "{id}\t{form}\t_\tPROPN\tNNP\t_\t{head}\t{rel}\t_\t{misc}"


def _sentence(*rows, sentence_id="bad-0001"):
    return f"# sent_id = {sentence_id}\n" + "\n".join(rows) + "\n\n"


def test_self_loop_is_an_invalid_tree(tmp_path):
    path = tmp_path / "loop.conllu"
    path.write_text(
        _sentence(
            ROW.format(id=1, form="Ada", head=1, rel="nsubj", misc="NER=B-PER"),
            ROW.format(id=2, form="sings", head=0, rel="root", misc="NER=O"),
            sentence_id="loop-0001",
        ),
        encoding="utf-8",
    )
    with pytest.raises(InvalidTreeError, match=r"loop\.conllu:2 \(sent_id = loop-0001\).*token 1 is its own head"):
        list(ConlluNerReader().read(path))


GOOD = ROW.format(id=1, form="Ada", head=0, rel="root", misc="NER=B-PER")


@pytest.mark.parametrize(
    "content, line, message",
    [
        (_sentence(GOOD, "2\tsings\t_\tVERB\tVBZ\t_\t1\tdep\t_"), 3, "expected 10 tab-separated columns"),
        (_sentence("1 Ada _ PROPN NNP _ 0 root _ NER=B-PER"), 2, "expected at least 10 tab-separated columns"),
        (_sentence(GOOD, ROW.format(id=2, form="x", head="_", rel="dep", misc="NER=O")), 3, "HEAD '_' is not"),
        (_sentence(GOOD, ROW.format(id=3, form="x", head=1, rel="dep", misc="NER=O")), 3, "out of sequence"),
        (_sentence(GOOD, ROW.format(id="x", form="x", head=1, rel="dep", misc="NER=O")), 3, "is not a token ID"),
        (_sentence(GOOD, ROW.format(id=2, form="x", head=1, rel="dep", misc="NER=X-PER")), 3, "not a BIO tag"),
        ("# sent_id = empty\n\n", 2, "has no token lines"),
        ("# just a comment\n", None, "no token lines"),
    ],
)
def test_malformed_conllu_names_file_and_line(tmp_path, content, line, message):
    path = tmp_path / "bad.conllu"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ColumnFormatError) as error:
        list(ConlluNerReader().read(path))
    where = f"{path}:{line}" if line else str(path)
    assert str(error.value).startswith(where + ":")
    assert message in str(error.value)


def test_ner_column_missing_on_a_line(tmp_path):
    path = tmp_path / "short.conllu"
    path.write_text(_sentence(GOOD + "\tB-PER", GOOD.replace("1\tAda", "2\tx")), encoding="utf-8")
    with pytest.raises(ColumnFormatError, match=f"^{path}:3: expected 11 tab-separated columns"):
        list(ConlluNerReader(ner_column=10).read(path))


# --------------------------------------------------------------------------------------------------
# Partial annotation: tokens left open


def _rows(*misc):
    """A sentence of one word per MISC value, each headed by the first."""
    return [ROW.format(id=i, form=f"w{i}", head=0 if i == 1 else 1, rel="dep", misc=m) for i, m in enumerate(misc, 1)]


def _read(tmp_path, *sentences, **options):
    path = tmp_path / "partial.conllu"
    path.write_text("".join(_sentence(*rows, sentence_id=f"p-{i}") for i, rows in enumerate(sentences)), "utf-8")
    return path, list(ConlluNerReader(**options).read(path))


def _vocab_counts(instances):
    counter = defaultdict(Counter)
    for instance in instances:
        instance.count_vocab_items(counter)
    return {namespace: dict(counts) for namespace, counts in counter.items()}


@pytest.mark.parametrize(
    "fixture, options",
    [
        ("ner_misc.conllu", {}),
        ("ner_misc.conllu", {"tag_scheme": "BIO", "drop_entity_types": ["ORG"]}),
        ("ner_column.conllu", {"ner_column": 10}),
        ("uner_sample.iob2", {"treebank": str(UD / "uner_treebank.conllu"), "drop_entity_types": ["OTH", "O"]}),
        ("uner_sample.iob2", {"treebank": str(UD / "uner_treebank.conllu"), "tag_scheme": "IOB1"}),
    ],
)
def test_fully_annotated_files_read_as_with_no_open_tag(fixture, options):
    partial = list(ConlluNerReader(**options).read(UD / fixture))
    plain = list(ConlluNerReader(missing_tag=None, **options).read(UD / fixture))
    assert all(isinstance(instance["tags"], PartialTagsField) for instance in partial)
    assert not any(isinstance(instance["tags"], PartialTagsField) for instance in plain)
    assert [instance["tags"].labels for instance in partial] == [instance["tags"].labels for instance in plain]
    assert not any("partial" in instance["metadata"] for instance in partial)
    assert _vocab_counts(partial) == _vocab_counts(plain)
    # Against an independent conversion of the file's own tags.
    if fixture == "ner_misc.conllu" and not options:
        file_tags = [[m.split("|")[0][4:] for m in sentence] for sentence in _column_by_sentence(NER_MISC, 9)]
        assert [instance["tags"].labels for instance in partial] == [convert_tags(t, "BIOUL") for t in file_tags]


def test_a_dash_and_a_missing_ner_are_open(tmp_path):
    sentences = [_rows("NER=B-PER", "NER=I-PER", "NER=-", "NER=O"), _rows("_", "NER=B-LOC", "SpaceAfter=No")]
    _, instances = _read(tmp_path, *sentences)
    assert instances[0]["tags"].labels == ["B-PER", "L-PER", None, "O"]
    assert instances[1]["tags"].labels == [None, "U-LOC", None]
    assert all(instance["metadata"]["partial"] for instance in instances)
    vocab = Vocabulary.from_instances(instances)
    assert {"B-LOC", "I-LOC", "L-LOC", "U-PER", "I-PER"} <= set(vocab.get_token_to_index_vocabulary("labels"))
    batch = Batch(instances)
    batch.index_instances(vocab)
    tags = batch.as_tensor_dict()["tags"]
    assert tags[0, 2].item() == OPEN and tags[1, 0].item() == OPEN and tags[1, 2].item() == OPEN
    assert tags[0, 0].item() == vocab.get_token_index("B-PER", "labels")
    # A marker of one's own, and no marker at all.
    _, star = _read(tmp_path, _rows("NER=B-PER", "NER=*", "SpaceAfter=No"), missing_tag="*")
    assert star[0]["tags"].labels == ["U-PER", None, None] and star[0]["metadata"]["partial"]
    path, _ = _read(tmp_path, _rows("NER=B-PER", "NER=-"))
    with pytest.raises(ColumnFormatError, match=f"^{path}:3: tag '-' is not a BIO tag"):
        list(ConlluNerReader(missing_tag=None).read(path))


@pytest.mark.parametrize(
    "sentences, line, message",
    [
        ([_rows("NER=B-PER", "SpaceAfter=No")], 3, "no NER=<tag> in MISC, although earlier tokens have one"),
        ([_rows("_", "NER=O")], 3, "NER=O) but the file's first token has none"),
    ],
)
def test_without_missing_tag_every_token_carries_ner(tmp_path, sentences, line, message):
    path, instances = _read(tmp_path, *sentences)
    assert instances[0]["metadata"]["partial"]  # with the default, the token is open
    with pytest.raises(ColumnFormatError, match=f"^{path}:{line}: .*every token must carry a tag") as error:
        list(ConlluNerReader(missing_tag=None).read(path))
    assert message in str(error.value)


@pytest.mark.parametrize(
    "sentences, line, message",
    [
        ([_rows("NER=O", "NER=-"), _rows("_", "SpaceAfter=No")], 6, "no NER=<tag> in MISC, although earlier sentences"),
        ([_rows("_", "_"), _rows("_", "NER=B-PER")], 7, "(NER=B-PER) but the file's first sentence has none"),
    ],
)
def test_a_sentence_without_any_ner_in_an_annotated_file(tmp_path, sentences, line, message):
    path = tmp_path / "mixed.conllu"
    path.write_text("".join(_sentence(*rows, sentence_id=f"m-{i}") for i, rows in enumerate(sentences)), "utf-8")
    with pytest.raises(ColumnFormatError, match=f"^{path}:{line}: .*every sentence must carry a tag") as error:
        list(ConlluNerReader().read(path))
    assert message in str(error.value)


def test_a_file_without_ner_stays_prediction_input(tmp_path):
    _, instances = _read(tmp_path, _rows("_", "SpaceAfter=No"), _rows("_"), o_unconfirmed=True)
    assert all("tags" not in instance.fields and "partial" not in instance["metadata"] for instance in instances)


def test_o_unconfirmed(tmp_path):
    sentence = _rows("NER=B-PER", "NER=I-PER", "NER=O", "NER=B-LOC", "NER=-")
    _, instances = _read(tmp_path, sentence, o_unconfirmed=True)
    assert instances[0]["tags"].labels == ["B-PER", "L-PER", None, "U-LOC", None]
    _, confirmed = _read(tmp_path, sentence)
    assert confirmed[0]["tags"].labels == ["B-PER", "L-PER", "O", "U-LOC", None]
    _, full = _read(tmp_path, _rows("NER=B-PER", "NER=O"), missing_tag=None, o_unconfirmed=True)
    assert full[0]["tags"].labels == ["U-PER", None] and full[0]["metadata"]["partial"]
    uner = ConlluNerReader(treebank=str(UD / "uner_treebank.conllu"), o_unconfirmed=True, drop_entity_types=["OTH"])
    by_id = _by_id(uner.read(UD / "uner_sample.iob2"))
    assert by_id["uner-demo-a-0002"]["tags"].labels == [None] * 5 + ["O", None, "U-O"]  # a dropped type is O
    with pytest.raises(ConfigurationError, match="o_unconfirmed reads NER tags"):
        ConlluNerReader(tag_source="upos", o_unconfirmed=True)
    assert not ConlluNerReader(tag_source="upos").reads_partial


@pytest.mark.parametrize(
    "misc, scheme, line",
    [
        (("NER=B-PER", "NER=-", "NER=I-PER"), "BIO", 7),
        (("NER=O", "NER=B-ORG", "SpaceAfter=No", "NER=I-ORG"), "BIO", 8),
        (("NER=B-PER", "NER=-"), "BIOUL", 6),
        (("NER=-", "NER=L-PER"), "BIOUL", 6),
    ],
)
def test_a_span_cut_by_an_open_token_names_file_and_line(tmp_path, misc, scheme, line):
    path = tmp_path / "cut.conllu"
    path.write_text(_sentence(*_rows("NER=O")) + _sentence(*_rows(*misc)), encoding="utf-8")
    with pytest.raises(ColumnFormatError, match=f"^{path}:{line}: a marked span is cut by a token left open"):
        list(ConlluNerReader(file_tag_scheme=scheme).read(path))


def test_partial_uner_file_names_its_line(tmp_path):
    treebank = str(UD / "uner_treebank.conllu")
    path = tmp_path / "partial.iob2"
    _write_iob2(path, "uner-demo-b-0002", [("Thanks", "-"), ("!", "O")])
    (instance,) = ConlluNerReader(treebank=treebank).read(path)
    assert instance["tags"].labels == [None, "O"] and instance["metadata"]["partial"]
    _write_iob2(path, "uner-demo-b-0002", [("Thanks", "B-PER"), ("!", "X-PER")])
    with pytest.raises(ColumnFormatError, match=f"^{path}:3: tag 'X-PER' is not a BIO tag"):
        list(ConlluNerReader(treebank=treebank).read(path))


def test_text_to_instance_with_open_tags():
    reader = ConlluNerReader()
    parse = {"pos_tags": ["PROPN", "VERB"], "dependency_labels": ["nsubj", "root"], "head_indices": [2, 0]}
    instance = reader.text_to_instance(["Ada", "sings"], tags=["U-PER", None], **parse)
    assert isinstance(instance["tags"], PartialTagsField) and instance["metadata"]["partial"]


# --------------------------------------------------------------------------------------------------
# text_to_instance


def test_text_to_instance_with_a_given_parse():
    reader = ConlluNerReader()
    instance = reader.text_to_instance(
        ["Ada", "sings", "."],
        pos_tags=["PROPN", "VERB", "PUNCT"],
        dependency_labels=["nsubj", "root", "punct"],
        head_indices=[2, 0, 2],
        tags=["U-PER", "O", "O"],
        metadata={"text": "Ada sings.", "offsets": [(0, 3), (4, 9), (9, 10)]},
    )
    assert instance["head_indices"].labels == [2, 0, 2]
    assert instance["tags"].labels == ["U-PER", "O", "O"]
    metadata = instance["metadata"].metadata
    assert metadata["text"] == "Ada sings." and metadata["num_roots"] == 1 and metadata["sentence_id"] is None
    reader.apply_token_indexers(instance)
    assert instance["tokens"].token_indexers is reader._token_indexers


def test_text_to_instance_rejects_bad_input():
    reader = ConlluNerReader()
    with pytest.raises(InvalidTreeError, match="^input: invalid dependency tree: token 1 is its own head"):
        reader.text_to_instance(["a", "b"], ["X", "X"], ["dep", "root"], [1, 0])
    with pytest.raises(ConfigurationError, match="all of pos_tags, dependency_labels and head_indices"):
        reader.text_to_instance(["a", "b"], pos_tags=["X", "X"])
    with pytest.raises(ConfigurationError, match="head_indices has 1 entries for 2 words"):
        reader.text_to_instance(["a", "b"], ["X", "X"], ["dep", "root"], [0])
    with pytest.raises(ConfigurationError, match="empty token list"):
        reader.text_to_instance([])


def test_text_to_instance_parses_raw_words_with_spacy():
    reader = ConlluNerReader()
    words = ["Maria", "Lopez", "visited", "Lisbon", "."]
    instance = reader.text_to_instance(words, metadata={"text": "Maria Lopez visited Lisbon."})
    assert [token.text for token in instance["tokens"]] == words
    assert instance["pos_tags"].labels[0] == "PROPN"  # UPOS, as pos_column is "upos"
    assert validate_heads(instance["head_indices"].labels, "test") == instance["metadata"]["num_roots"] >= 1
    assert "tags" not in instance.fields
    xpos = ConlluNerReader(pos_column="xpos").text_to_instance(words)
    assert xpos["pos_tags"].labels[0] == "NNP"


# --------------------------------------------------------------------------------------------------
# Real data

UNER = SHARED_DATA / "uner_english_ewt"
EWT = SHARED_DATA / "ud_english_ewt" / "r2.9"


@pytest.mark.skipif(not (UNER.exists() and EWT.exists()), reason="../shared/data UNER / UD EWT r2.9 not present")
def test_real_uner_dev_joined_with_ewt_r29():
    reader = ConlluNerReader(treebank=str(EWT / "*.conllu"))
    instances = list(reader.read(UNER / "en_ewt-ud-dev.iob2"))
    assert len(instances) == 2001
    assert sum(len(instance["tokens"]) for instance in instances) == 25149
    spans = Counter(span[0] for instance in instances for span in tags_to_spans(instance["tags"].labels))
    assert spans == {"LOC": 399, "ORG": 224, "PER": 343}
    assert all(instance["metadata"]["num_roots"] >= 1 for instance in instances)
    assert instances[0]["metadata"]["sentence_id"] == "answers-20070404104007AAY1Chs_ans-0001"


# --------------------------------------------------------------------------------------------------
# tag_source: POS columns as the tags


def _column_by_sentence(path, index):
    """Independent read of one CoNLL-U column (basic-tree words only), sentence by sentence."""
    sentences, current = [], []
    for line in open(path, encoding="utf-8"):
        line = line.rstrip("\n")
        if not line.strip():
            if current:
                sentences.append(current)
            current = []
        elif not line.startswith("#") and line.split("\t")[0].isdigit():
            current.append(line.split("\t")[index])
    if current:
        sentences.append(current)
    return sentences


@pytest.mark.parametrize("fixture", ["ner_misc.conllu", "ner_column.conllu", "uner_treebank.conllu"])
@pytest.mark.parametrize("tag_source, column", [("upos", 3), ("xpos", 4)])
def test_tag_source_reads_a_pos_column_as_plain_tags(fixture, tag_source, column):
    instances = list(ConlluNerReader(tag_source=tag_source).read(UD / fixture))
    assert [instance["tags"].labels for instance in instances] == _column_by_sentence(UD / fixture, column)
    assert all(instance["tags"]._label_namespace == "labels" for instance in instances)
    forms = _column_by_sentence(UD / fixture, 1)
    assert [instance["metadata"]["words"] for instance in instances] == forms


def test_tag_source_upos_values_and_fields():
    instances = list(ConlluNerReader(tag_source="upos").read(NER_MISC))
    assert instances[0]["tags"].labels == ["PROPN", "PROPN", "VERB", "PROPN", "ADJ", "NOUN", "PUNCT"]
    # The POS input would be the answer: it is left out when it is the predicted column.
    assert all("pos_tags" not in instance.fields for instance in instances)
    assert {"tokens", "dependency_labels", "head_indices", "tags", "metadata"} <= set(instances[0].fields)
    other = list(ConlluNerReader(tag_source="upos", pos_column="xpos").read(NER_MISC))
    assert other[0]["pos_tags"].labels[:3] == ["NNP", "NNP", "VBD"]
    assert other[0]["tags"].labels[:3] == ["PROPN", "PROPN", "VERB"]
    xpos = list(ConlluNerReader(tag_source="xpos", label_namespace="pos_labels").read(NER_MISC))
    assert xpos[0]["tags"].labels[:3] == ["NNP", "NNP", "VBD"]
    assert xpos[0]["tags"]._label_namespace == "pos_labels"
    assert xpos[0]["pos_tags"].labels[:3] == ["PROPN", "PROPN", "VERB"]  # pos_column "upos"
    vocab = Vocabulary.from_instances(instances)
    assert "PROPN" in vocab.get_token_to_index_vocabulary("labels")
    assert "pos" not in vocab.get_namespaces()


def test_tag_source_in_text_to_instance():
    reader = ConlluNerReader(tag_source="upos")
    instance = reader.text_to_instance(
        ["Ada", "sings"], ["PROPN", "VERB"], ["nsubj", "root"], [2, 0], tags=["PROPN", "VERB"]
    )
    assert instance["tags"].labels == ["PROPN", "VERB"]
    assert "pos_tags" not in instance.fields
    kept = ConlluNerReader(tag_source="xpos").text_to_instance(
        ["Ada", "sings"], ["PROPN", "VERB"], ["nsubj", "root"], [2, 0]
    )
    assert kept["pos_tags"].labels == ["PROPN", "VERB"] and "tags" not in kept.fields


def test_tag_source_builds_from_params():
    reader = DatasetReader.from_params(Params({"type": "conllu_ner", "tag_source": "upos"}))
    assert isinstance(reader, ConlluNerReader) and reader.tag_source == "upos"


def test_bad_tag_source():
    with pytest.raises(ConfigurationError, match="tag_source must be one of 'ner', 'upos', 'xpos', not 'UPOS'"):
        ConlluNerReader(tag_source="UPOS")
    for option in ({"ner_column": 10}, {"drop_entity_types": ["OTH"]}, {"treebank": str(UD / "*.conllu")}):
        name = next(iter(option))
        message = f"{name} reads NER tags and cannot be used with tag_source 'xpos'"
        with pytest.raises(ConfigurationError, match=message):
            ConlluNerReader(tag_source="xpos", **option)


def test_tag_source_needs_a_tag_on_every_word(tmp_path):
    path = tmp_path / "no_xpos.conllu"
    path.write_text(_sentence(GOOD, "2\tsings\t_\tVERB\t_\t_\t1\tdep\t_\t_"), encoding="utf-8")
    assert len(list(ConlluNerReader(tag_source="upos").read(path))) == 1
    with pytest.raises(ColumnFormatError, match=f"^{path}:3: word 2 has no XPOS tag"):
        list(ConlluNerReader(tag_source="xpos").read(path))


EWT_216 = SHARED_DATA / "ud_english_ewt" / "r2.16"


@pytest.mark.skipif(not EWT_216.exists(), reason="../shared/data/ud_english_ewt/r2.16 is not present")
def test_real_ewt_dev_upos():
    path = EWT_216 / "en_ewt-ud-dev.conllu"
    instances = list(ConlluNerReader(tag_source="upos").read(path))
    assert [instance["tags"].labels for instance in instances] == _column_by_sentence(path, 3)
    assert sum(len(instance["tokens"]) for instance in instances) == 25147
    assert len({tag for instance in instances for tag in instance["tags"].labels}) == 17
