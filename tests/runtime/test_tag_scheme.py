import random

import pytest
from nerzoo_runtime import tag_scheme
from nerzoo_runtime.tag_scheme import convert_tags, invalid_tag_reason, spans_to_tags, split_tag, tags_to_spans


@pytest.mark.parametrize(
    "tags, spans",
    [
        # IOB1: I- opens a chunk after O; B- only between touching chunks of one type.
        (["I-PER", "I-PER", "O", "I-LOC", "B-LOC"], [("PER", 0, 2), ("LOC", 3, 4), ("LOC", 4, 5)]),
        # BIO
        (["B-PER", "I-PER", "B-PER", "O", "B-ORG"], [("PER", 0, 2), ("PER", 2, 3), ("ORG", 4, 5)]),
        # BIOUL and its BIOES spelling
        (["B-ORG", "I-ORG", "L-ORG", "U-LOC", "O"], [("ORG", 0, 3), ("LOC", 3, 4)]),
        (["B-ORG", "E-ORG", "S-LOC"], [("ORG", 0, 2), ("LOC", 2, 3)]),
        # conlleval's lenient cases: a type change inside a chunk, an I- after L-.
        (["B-PER", "I-LOC", "I-LOC"], [("PER", 0, 1), ("LOC", 1, 3)]),
        (["B-PER", "L-PER", "I-PER"], [("PER", 0, 2), ("PER", 2, 3)]),
        ([], []),
    ],
)
def test_tags_to_spans_follows_conlleval(tags, spans):
    assert tags_to_spans(tags) == spans


@pytest.mark.parametrize("scheme", ["IOB1", "BIO", "BIOUL"])
def test_conversion_round_trips_spans(scheme):
    rng = random.Random(0)
    for _ in range(200):
        length, spans, position = rng.randint(1, 12), [], 0
        while position < length:
            width = rng.randint(1, 3)
            if rng.random() < 0.5 and position + width <= length:
                spans.append((rng.choice("AB"), position, position + width))
            position += width
        tags = spans_to_tags(spans, length, scheme)
        assert tags_to_spans(tags) == spans
        for other in ("IOB1", "BIO", "BIOUL"):
            assert tags_to_spans(convert_tags(tags, other)) == spans


def test_iob1_to_bioul_and_bio():
    iob1 = ["I-LOC", "B-LOC", "I-LOC", "O", "I-PER"]
    assert convert_tags(iob1, "BIO") == ["B-LOC", "B-LOC", "I-LOC", "O", "B-PER"]
    assert convert_tags(iob1, "BIOUL") == ["U-LOC", "B-LOC", "L-LOC", "O", "U-PER"]


@pytest.mark.parametrize(
    "tag, scheme, valid",
    [
        ("O", "IOB1", True),
        ("I-PER", "BIO", True),
        ("L-PER", "BIO", False),
        ("U-PER", "BIOUL", True),
        ("E-PER", "BIOUL", True),
        ("PER", "IOB1", False),
        ("NNP", "BIO", False),
        ("B-", "BIO", False),
    ],
)
def test_invalid_tag_reason(tag, scheme, valid):
    assert (invalid_tag_reason(tag, scheme) is None) == valid


@pytest.mark.parametrize(
    "tag, parts",
    [("B-PER", ("B", "PER")), ("E-LOC", ("L", "LOC")), ("S-ORG", ("U", "ORG")), ("O", ("O", None))]
    + [(tag, ("", None)) for tag in ("PER", "o", "", "b-PER", "-PER", "B-")],
)
def test_split_tag_gives_an_empty_prefix_to_a_tag_of_no_scheme(tag, parts):
    assert split_tag(tag) == parts


@pytest.mark.parametrize("tag", ["PER", "MISC", "b-PER"])
def test_a_tag_of_no_scheme_is_refused_by_every_scheme_and_decoded_as_o(tag):
    for scheme in ("IOB1", "BIO", "BIOUL"):
        assert invalid_tag_reason(tag, scheme) is not None
    assert (
        tags_to_spans(["B-PER", tag, "I-PER"])
        == tags_to_spans(["B-PER", "O", "I-PER"])
        == [("PER", 0, 1), ("PER", 2, 3)]
    )


def test_nerzoo_reads_tags_with_the_runtime_functions():
    from nerzoo.data import partial_tags
    from nerzoo.data.dataset_readers import conllu_ner
    from nerzoo.metrics import concept_error_rate, conll_span_f1

    assert partial_tags.invalid_tag_reason is tag_scheme.invalid_tag_reason
    assert partial_tags.split_tag is conllu_ner.split_tag is tag_scheme.split_tag
    assert conll_span_f1.tags_to_spans is concept_error_rate.tags_to_spans is tag_scheme.tags_to_spans
