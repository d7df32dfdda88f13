"""
The runtime's spaCy component `nerzoo_onnx_ner` against nerzoo's `nerzoo_ner` on the same trained
bilstm_crf: the same entities, confidences and token tags, batched or not, without allennlp.
"""

import json
import shutil
import subprocess
import sys

import pytest
import spacy
from nerzoo_runtime.tagger import Tagger
from spacy.tokens import Doc, Span

from nerzoo.commands import export
from nerzoo.data.dataset_readers.conll_columns import ConllColumnsReader
from tests import FIXTURES_ROOT, PROJECT_ROOT


@pytest.fixture(scope="module")
def exported(trained_archive, tmp_path_factory):
    directory = tmp_path_factory.mktemp("export") / "tagger"
    export.export_archive(str(trained_archive), str(directory), spacy_model="blank:en")
    return directory


@pytest.fixture(scope="module")
def pipelines(trained_archive, exported):
    """`pipelines(**config)`: blank English pipelines with `nerzoo_ner` and with `nerzoo_onnx_ner`."""

    def make(**config):
        archive, onnx = spacy.blank("en"), spacy.blank("en")
        archive.add_pipe("nerzoo_ner", config={"archive": str(trained_archive), **config})
        onnx.add_pipe("nerzoo_onnx_ner", config={"directory": str(exported), **config})
        return archive, onnx

    return make


def docs(nlp):
    """The test fixture's sentences, a doc with whitespace tokens, an empty and an all-whitespace doc."""
    reader = ConllColumnsReader(tag_column=3)
    words = [instance["metadata"]["words"] for instance in reader.read(str(FIXTURES_ROOT / "conll2003" / "test.txt"))]
    made = [Doc(nlp.vocab, words=sentence) for sentence in words]
    return made + [nlp.make_doc(text) for text in ("Peter  Blackburn \n visited Brussels .", "", "   \n  ")]


def tagged(doc):
    """What a component set: entities with confidences, and every token's tag and confidence."""
    entities = [(entity.start, entity.end, entity.label_, entity._.confidence) for entity in doc.ents]
    return entities, [(token._.nerzoo_tag, token._.nerzoo_confidence) for token in doc]


def assert_same(got, expected):
    """Entities, labels and tags exact; confidences within 1e-4."""
    assert len(got) == len(expected)
    for (entities, tokens), (expected_entities, expected_tokens) in zip(got, expected):
        assert [entity[:3] for entity in entities] == [entity[:3] for entity in expected_entities]
        assert [entity[3] for entity in entities] == pytest.approx(
            [entity[3] for entity in expected_entities], abs=1e-4
        )
        assert [tag for tag, _ in tokens] == [tag for tag, _ in expected_tokens]
        assert [value for _, value in tokens] == pytest.approx([value for _, value in expected_tokens], abs=1e-4)


def test_it_tags_docs_as_nerzoo_ner_does_at_any_batch_size(pipelines):
    archive, onnx = pipelines()
    expected = [tagged(doc) for doc in archive.pipe(docs(archive), batch_size=4)]
    assert sum(len(entities) for entities, _ in expected) > 10
    for batch_size in (1, 4):
        assert_same([tagged(doc) for doc in onnx.pipe(docs(onnx), batch_size=batch_size)], expected)
    whitespace, empty, blank = [tagged(onnx(doc)) for doc in docs(onnx)[-3:]]
    assert [tag for tag, _ in whitespace[1]].count(None) == 2 and whitespace[0]
    assert empty == ([], []) and blank == ([], [(None, None)])


@pytest.mark.parametrize("existing_ents", ["replace", "keep"])
def test_existing_entities_are_replaced_or_kept_as_nerzoo_ner_does(pipelines, existing_ents):
    words = "Peter Blackburn visited Brussels on Monday with Anna Keller .".split()
    results = []
    for nlp in pipelines(existing_ents=existing_ents):
        doc = Doc(nlp.vocab, words=words)
        doc.ents = [Span(doc, 0, 1, label="PERSON"), Span(doc, 5, 6, label="DATE")]
        results.append(tagged(nlp(doc)))
    assert_same([results[1]], [results[0]])
    kept = [(start, end, label) for start, end, label, _ in results[1][0] if label in ("PERSON", "DATE")]
    assert kept == ([(0, 1, "PERSON"), (5, 6, "DATE")] if existing_ents == "keep" else [])


def test_a_doc_it_cannot_tag_goes_to_the_error_handler_alone(pipelines, monkeypatch):
    _, nlp = pipelines()
    texts = ["Peter Blackburn visited Brussels .", "this doc has BOOM in it", "EU rejects German call ."]
    expected = [tagged(nlp(text)) for text in (texts[0], texts[2])]
    original = Tagger._tag_words

    def fails_on_boom(self, batch, *sentences):
        if any("BOOM" in words for words in batch):
            raise RuntimeError("the model failed")
        return original(self, batch, *sentences)

    monkeypatch.setattr(Tagger, "_tag_words", fails_on_boom)
    with pytest.raises(ValueError, match="nerzoo_onnx_ner could not tag a doc of 6 tokens.*BOOM.*the model failed"):
        list(nlp.pipe(texts))
    errors = []
    nlp.set_error_handler(lambda name, component, docs, error: errors.append((name, docs[0].text)))
    found = list(nlp.pipe(texts, batch_size=3))
    assert_same([tagged(found[0]), tagged(found[2])], expected)
    assert found[1].ents == () and found[1][0]._.nerzoo_tag is None
    assert errors == [("nerzoo_onnx_ner", texts[1])]


def test_a_bad_directory_or_config_is_one_clear_error(tmp_path):
    nlp = spacy.blank("en")
    nlp.add_pipe("nerzoo_onnx_ner", config={"directory": str(tmp_path)})
    with pytest.raises(ValueError, match="nerzoo_onnx_ner cannot load .*not a directory written by `allennlp export`"):
        nlp("Peter visited Brussels .")
    with pytest.raises(ValueError, match="nerzoo_onnx_ner needs .directory."):
        spacy.blank("en").add_pipe("nerzoo_onnx_ner")
    with pytest.raises(ValueError, match="existing_ents"):
        spacy.blank("en").add_pipe("nerzoo_onnx_ner", config={"directory": str(tmp_path), "existing_ents": "merge"})


def test_to_disk_then_spacy_load_gives_the_same_entities(exported, tmp_path):
    directory = shutil.copytree(exported, tmp_path / "copy")
    nlp = spacy.blank("en")
    nlp.add_pipe("nerzoo_onnx_ner", config={"directory": str(directory)})
    texts = ["Peter Blackburn visited Brussels on Monday .", "EU rejects German call to boycott British lamb ."]
    before = [tagged(doc) for doc in nlp.pipe(texts)]
    nlp.to_disk(tmp_path / "pipeline")
    shutil.rmtree(directory)  # the export travels with the pipeline
    assert_same([tagged(doc) for doc in spacy.load(tmp_path / "pipeline").pipe(texts)], before)
    assert any(entities for entities, _ in before)


def test_a_new_interpreter_tags_without_importing_allennlp(exported):
    program = (
        "import json, sys, spacy\n"
        "nlp = spacy.blank('en')\n"
        f"nlp.add_pipe('nerzoo_onnx_ner', config={{'directory': {str(exported)!r}}})\n"
        "doc = nlp('Peter Blackburn visited Brussels .')\n"
        "entities = [(e.start, e.end, e.label_) for e in doc.ents]\n"
        "print(json.dumps({'entities': entities, 'imported': [m for m in ('allennlp', 'nerzoo') if m in sys.modules]}))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=300, cwd=PROJECT_ROOT, check=True
    )
    found = json.loads(run.stdout)
    assert found["imported"] == [] and found["entities"]
