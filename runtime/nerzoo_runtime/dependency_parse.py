"""
`DependencyParse`: words to the parse inputs of an exported `deptree_ner`, as its dataset reader
makes them at prediction: spaCy tags and parses each word list as it is (no re-tokenising), with the
pipeline the model was trained with (the `spacy` extra and that pipeline installed).
"""

import functools
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy

from nerzoo_runtime.spacy_loading import load_spacy

# Components whose output the parse does not use, switched off while parsing.
UNUSED_COMPONENTS = ("ner", "lemmatizer", "entity_ruler", "entity_linker", "textcat", "textcat_multilabel", "spancat")
Parse = Tuple[List[str], List[str], List[int]]


def parse_words(
    nlp, sentences: Sequence[Sequence[str]], pos_attribute: str, batch_size: Optional[int] = None
) -> List[Parse]:
    """
    Each word list tagged and parsed by the spaCy pipeline `nlp` as it is (a doc of exactly its
    words): its POS tags (`pos_attribute` `"tag"`, fine-grained, or `"pos"`, universal), relation
    labels (`"_"` where spaCy gives none) and heads (1-based, 0 for a root).  Where spaCy splits a
    word list into sentences, it has several roots.
    """
    from spacy.tokens import Doc

    parses = []
    with nlp.select_pipes(disable=[name for name in nlp.pipe_names if name in UNUSED_COMPONENTS]):
        for doc in nlp.pipe((Doc(nlp.vocab, words=list(words)) for words in sentences), batch_size=batch_size):
            tags = [(token.tag_ if pos_attribute == "tag" else token.pos_) or "_" for token in doc]
            labels = [token.dep_ or "_" for token in doc]
            parses.append((tags, labels, [0 if token.head.i == token.i else token.head.i + 1 for token in doc]))
    return parses


def chain_tree(length: int) -> Tuple[List[str], List[int]]:
    """The control tree of `length` words: each word's head is the next word, every relation `"chain"`."""
    return ["chain"] * length, [*range(2, length + 1), 0]


class DependencyParse:
    """
    The graph's inputs `pos_tags` and `dependency_labels` (ids in their vocabularies, the OOV id for
    a tag or relation the training data did not have) and `head_indices` (1-based, 0 for a root),
    all `(batch_size, num_tokens)`, 0 at padding.  With `tree: "chain"` (a control the model was
    trained with) each word's head is the next word and every relation `"chain"`.

    # Parameters

    settings : `Dict[str, Any]`
        Its entry in `tagger.json`'s `indexers`: `spacy_model`, `pos_attribute` (`"tag"` or
        `"pos"`), `tree`, `pos_namespace`, `relation_namespace` and `oov`.
    vocabularies : `Dict[str, List[str]]`
        `vocabularies.json`: the tokens of each namespace, by id.
    """

    def __init__(self, settings: Dict[str, Any], vocabularies: Dict[str, List[str]]) -> None:
        self.spacy_model: str = settings["spacy_model"]
        self.pos_attribute: str = settings["pos_attribute"]
        self.chain = settings["tree"] == "chain"
        self.pos = {tag: index for index, tag in enumerate(vocabularies[settings["pos_namespace"]])}
        self.relations = {label: index for index, label in enumerate(vocabularies[settings["relation_namespace"]])}
        self.oov = (self.pos[settings["oov"]], self.relations[settings["oov"]])

    @functools.cached_property
    def nlp(self):
        """The spaCy pipeline, loaded at the first parse."""
        nlp = load_spacy(self.spacy_model, "deptree_ner parses its input with spaCy")
        if "parser" not in nlp.pipe_names:
            raise ValueError(f"spaCy pipeline {self.spacy_model!r} has no parser")
        return nlp

    def check(self, words: Sequence[str]) -> None:
        """Any words will do."""

    def feeds(self, batch: Sequence[Sequence[str]]) -> Dict[str, numpy.ndarray]:
        shape = (len(batch), max(map(len, batch)))
        feeds = {
            key: numpy.zeros(shape, dtype=numpy.int64) for key in ("pos_tags", "dependency_labels", "head_indices")
        }
        for row, (tags, labels, heads) in enumerate(parse_words(self.nlp, batch, self.pos_attribute)):
            if self.chain:
                labels, heads = chain_tree(len(tags))
            feeds["pos_tags"][row, : len(tags)] = [self.pos.get(tag, self.oov[0]) for tag in tags]
            feeds["dependency_labels"][row, : len(tags)] = [self.relations.get(label, self.oov[1]) for label in labels]
            feeds["head_indices"][row, : len(tags)] = heads
        return feeds
