import pytest
from allennlp.common.checks import ConfigurationError
from spacy.tokens import Doc, DocBin, Span
from spacy.vocab import Vocab

from nerzoo.data.dataset_readers.spacy_docbin import SpacyDocBinReader


def _docbin(path):
    vocab = Vocab()
    whole = Doc(vocab, words=["Anna", "Keller", "visited", "Oslo", "."], sent_starts=[True, False, False, False, False])
    whole.set_ents([Span(whole, 0, 2, "PER"), Span(whole, 3, 4, "LOC")], default="outside")
    partial = Doc(vocab, words=["Lena", "Holm", "met", "Ravi", "in", "Porto", "."])
    # As Prodigy writes an answer: a span accepted, a token confirmed outside, the rest missing.
    partial.set_ents([Span(partial, 5, 6, "LOC")], outside=[partial[2:3]], default="missing")
    DocBin(docs=[whole, partial]).to_disk(path)


def test_missing_entity_annotation_is_open_and_the_rest_converts(tmp_path):
    _docbin(tmp_path / "train.spacy")
    instances = list(SpacyDocBinReader().read(str(tmp_path / "train.spacy")))
    assert [instance["tags"].labels for instance in instances] == [
        ["B-PER", "L-PER", "O", "U-LOC", "O"],
        [None, None, "O", None, None, "U-LOC", None],
    ]
    assert "partial" not in instances[0]["metadata"] and instances[1]["metadata"]["partial"]
    assert instances[1]["metadata"]["source"].endswith("train.spacy:doc1:s0")


def test_unconfirmed_outside_tokens_and_a_file_that_is_no_docbin(tmp_path):
    _docbin(tmp_path / "train.spacy")
    reader = SpacyDocBinReader(tag_scheme="BIO", o_unconfirmed=True)
    assert list(reader.read(str(tmp_path / "train.spacy")))[0]["tags"].labels == ["B-PER", "I-PER", None, "B-LOC", None]
    (tmp_path / "bad.spacy").write_text("not a docbin")
    with pytest.raises(ConfigurationError, match="bad.spacy: not a spaCy DocBin"):
        list(SpacyDocBinReader().read(str(tmp_path / "bad.spacy")))


def test_predictors_build_instances_as_from_conll_columns():
    instance = SpacyDocBinReader().text_to_instance(["Anna", "left"], metadata={"source": "input"})
    assert instance["metadata"]["words"] == ["Anna", "left"] and instance["metadata"]["source"] == "input"
    assert "tags" not in instance
