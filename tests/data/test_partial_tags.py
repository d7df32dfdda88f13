import pytest
from allennlp.data import Instance, Vocabulary
from allennlp.data.fields import TextField
from allennlp.data.token_indexers import SingleIdTokenIndexer
from allennlp.data.tokenizers import Token

from nerzoo.data.partial_tags import OPEN, PartialTagError, PartialTagsField, partial_tags


def test_each_marked_stretch_converts_on_its_own():
    tags = ["I-PER", "I-PER", "-", "I-LOC", "O", "-"]
    assert partial_tags(tags, "IOB1", "BIOUL") == ["B-PER", "L-PER", None, "U-LOC", "O", None]
    assert partial_tags(tags, "IOB1", "BIO") == ["B-PER", "I-PER", None, "B-LOC", "O", None]


def test_unconfirmed_o_tags_are_open():
    tags = ["I-PER", "O", "I-PER", "O"]
    assert partial_tags(tags, "IOB1", "BIOUL", o_unconfirmed=True) == ["U-PER", None, "U-PER", None]
    assert partial_tags(tags, "IOB1", "BIOUL") == ["U-PER", "O", "U-PER", "O"]


@pytest.mark.parametrize(
    "tags, scheme, index",
    [
        (["B-PER", "-", "I-PER"], "BIO", 2),
        (["I-PER", "-", "-", "I-PER"], "IOB1", 3),
        (["B-PER", "-", "L-PER"], "BIOUL", 1),
        (["O", "-", "L-PER"], "BIOUL", 2),
        (["O", "X-PER"], "BIO", 1),
    ],
)
def test_a_span_cut_by_an_open_token_or_a_tag_outside_the_scheme_is_an_error_at_its_token(tags, scheme, index):
    with pytest.raises(PartialTagError) as error:
        partial_tags(tags, scheme, "BIOUL")
    assert error.value.index == index


def test_a_span_after_an_open_token_of_another_type_is_read():
    assert partial_tags(["B-LOC", "-", "I-PER"], "BIO", "BIO") == ["B-LOC", None, "B-PER"]


def test_plain_labels_keep_their_values():
    assert partial_tags(["NN", "-", "VB"], None, None) == ["NN", None, "VB"]


def _instance(labels):
    text = TextField([Token(str(index)) for index in range(len(labels))], {"tokens": SingleIdTokenIndexer()})
    return Instance({"tokens": text, "tags": PartialTagsField(labels, text, "labels", "BIOUL")})


def test_open_tokens_index_as_open_and_complete_the_label_namespace():
    full, partial = _instance(["B-PER", "L-PER", "O"]), _instance([None, "U-LOC", None])
    vocab = Vocabulary.from_instances([full, partial])  # the types counted before and in a partial sentence
    labels = set(vocab.get_token_to_index_vocabulary("labels"))
    assert labels == {"O", "B-PER", "L-PER", "I-PER", "U-PER", "B-LOC", "I-LOC", "L-LOC", "U-LOC"}
    partial.index_fields(vocab)
    tensor = partial.as_tensor_dict({"tokens": {"tokens___tokens": 4}, "tags": {"num_tokens": 4}})["tags"]
    assert tensor.tolist() == [OPEN, vocab.get_token_index("U-LOC", "labels"), OPEN, 0]


def test_a_fully_marked_sentence_counts_as_a_sequence_label_field():
    vocab = Vocabulary.from_instances([_instance(["B-PER", "L-PER", "O", "O"])])
    assert vocab.get_token_to_index_vocabulary("labels") == {"O": 0, "B-PER": 1, "L-PER": 2}


def test_open_plain_labels_add_no_tag_to_the_vocabulary():
    text = TextField([Token(word) for word in "a b c".split()], {"tokens": SingleIdTokenIndexer()})
    instance = Instance({"tokens": text, "tags": PartialTagsField(["NN", None, "VB"], text, "labels", None)})
    assert set(Vocabulary.from_instances([instance]).get_token_to_index_vocabulary("labels")) == {"NN", "VB"}
