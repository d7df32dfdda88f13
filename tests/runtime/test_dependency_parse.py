"""
nerzoo_runtime's `DependencyParse` (the parse inputs of an exported deptree_ner) against the tensors
nerzoo's dependency reader gives the model at prediction: spaCy trees and chain trees, POS tags as
spaCy's `tag` and `pos`, tags and relations the vocabulary lacks.
"""

import numpy
import pytest
from allennlp.data import Vocabulary
from allennlp.data.batch import Batch
from nerzoo_runtime.dependency_parse import DependencyParse

from nerzoo.data.dataset_readers.spacy_parsed_conll import SpacyParsedConllReader
from nerzoo.data.dependency_trees import DEPENDENCY_NAMESPACE, POS_NAMESPACE
from tests import FIXTURES_ROOT

SENTENCES = [
    ["Peter", "Blackburn", "visited", "Brussels", "on", "Monday", "."],
    ["Oslo"],
    ["Anna", "Keller", ",", "who", "never", "flew", ",", "said", "“", "Zürich", "”", "was", "XYZZY", "!!"],
]


@pytest.mark.parametrize("tree, pos_attribute", [("parse", "tag"), ("parse", "pos"), ("chain", "tag")])
def test_the_runtime_parses_words_as_the_reader_does(tree, pos_attribute):
    reader = SpacyParsedConllReader(tag_column=3, tree=tree, pos_attribute=pos_attribute)
    # A vocabulary of the fixture's first sentences: some of the tags and relations above are outside it.
    vocab = Vocabulary.from_instances(list(reader.read(str(FIXTURES_ROOT / "conll2003" / "dev.txt")))[:3])
    instances = [reader.text_to_instance(words) for words in SENTENCES]
    for instance in instances:
        reader.apply_token_indexers(instance)
    batch = Batch(instances)
    batch.index_instances(vocab)
    expected = batch.as_tensor_dict()
    vocabularies = {
        space: [vocab.get_token_from_index(i, space) for i in range(vocab.get_vocab_size(space))]
        for space in (POS_NAMESPACE, DEPENDENCY_NAMESPACE)
    }
    settings = {
        "spacy_model": reader.parser.spacy_model,
        "pos_attribute": pos_attribute,
        "tree": tree,
        "pos_namespace": POS_NAMESPACE,
        "relation_namespace": DEPENDENCY_NAMESPACE,
        "oov": vocab._oov_token,
    }
    feeds = DependencyParse(settings, vocabularies).feeds(SENTENCES)
    assert sorted(feeds) == ["dependency_labels", "head_indices", "pos_tags"]
    for key, values in feeds.items():
        assert values.dtype == numpy.int64
        numpy.testing.assert_array_equal(values, expected[key].numpy(), err_msg=key)
    assert (feeds["pos_tags"] == 1).any()  # an OOV tag, as the reader indexes it
