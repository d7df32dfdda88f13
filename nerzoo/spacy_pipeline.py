"""
nerzoo taggers as a spaCy pipeline component: `nlp.add_pipe("nerzoo_ner", config={"archive": ...})`.

The factory is registered in the top-level module `nerzoo_spacy_factory` (setup.cfg's
`spacy_factories` entry point, so spaCy finds it without an import), which imports this module only
when a pipeline adds the component.
"""

import functools
import inspect
import os
import shutil
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

from allennlp.common.checks import ConfigurationError
from allennlp.data import DatasetReader
from allennlp.models.archival import load_archive
from allennlp.predictors.predictor import Predictor
from spacy.language import Language
from spacy.pipeline import Pipe
from spacy.scorer import get_ner_prf
from spacy.tokens import Doc, Span, Token
from spacy.training import Example
from spacy.util import minibatch

import nerzoo  # noqa: F401  (registers the models, readers and predictors an archive names)
import nerzoo_spacy_factory  # noqa: F401  (the factory, where nerzoo is on the path but not installed)
from nerzoo.data.dataset_readers.conll_columns import ConllColumnsReader
from nerzoo.data.dataset_readers.conllu_ner import ConlluNerReader
from nerzoo.data.dataset_readers.spacy_parsed_conll import SpacyParsedConllReader
from nerzoo.predictors.sequence_tagger import SequenceTaggerPredictor

EXISTING_ENTS = ("replace", "keep")
ARCHIVE_FILE = "model.tar.gz"

for _owner, _name in ((Span, "confidence"), (Token, "nerzoo_tag"), (Token, "nerzoo_confidence")):
    if not _owner.has_extension(_name):
        _owner.set_extension(_name, default=None)


class NerzooTagger(Pipe):
    """
    Tags spaCy docs with a trained nerzoo tagger: sets `doc.ents` (the model's labels),
    `Span._.confidence` (each entity's probability, the number `allennlp predict` gives, calibrated
    archives included), `Token._.nerzoo_tag` and `Token._.nerzoo_confidence` (the model's tag and
    its posterior; `None` on whitespace tokens, which the model never sees).

    Created by the factory "nerzoo_ner": `nlp.add_pipe("nerzoo_ner", config={"archive":
    "runs/bilstm_crf/model.tar.gz"})`.

    The archive's own `sequence_tagger` Predictor and dataset reader build the instances from the
    doc's tokens (whitespace tokens left out), so a doc gets what `allennlp predict` gives for
    `{"tokens": [...]}`, tagged as one sequence, except that:

    - `me_crf` (a document-level reader) reads the doc's sentences when it has sentence boundaries;
    - `deptree_ner` (a reader that takes trees) reads the pipeline's own parse when the doc is parsed
      (put the component after the parser), else parses the tokens with the archive's spaCy pipeline.

    `nlp.pipe(texts, batch_size=N)` runs one forward pass per N docs.  An empty (or all-whitespace)
    doc gets no entities without a forward pass.  A doc the model cannot tag goes to the pipeline's
    error handler (`nlp.set_error_handler`) with an error naming it; a handler that returns leaves
    that doc untagged and the other docs of the batch tagged.

    The archive is loaded when the component first tags a doc (or on `from_disk`).  `nlp.to_disk`
    copies the archive into the component's folder (`<path>/<name>/model.tar.gz`), and
    `spacy.load(path)` tags with that copy, whether or not the `archive` path still exists.

    `nlp.evaluate` scores `doc.ents` (`ents_p`, `ents_r`, `ents_f`, `ents_per_type`).

    # Parameters

    nlp : `Language`, required
    name : `str`, required
        The component's name in the pipeline.
    archive : `str`, required
        A nerzoo tagger's `model.tar.gz` (as `allennlp train` writes it, or `allennlp calibrate`).
    cuda_device : `int`, optional (default = `-1`)
        The GPU to run the model on; -1 is the CPU.
    batch_size : `int`, optional (default = `64`)
        Docs per forward pass when `pipe` is called without a batch size (`nlp.pipe` passes its own).
    existing_ents : `str`, optional (default = `"replace"`)
        What to do with entities already on the doc: `"replace"` them with nerzoo's, or `"keep"` them
        and add only nerzoo's entities that cover none of their tokens.
    """

    def __init__(
        self,
        nlp: Language,
        name: str,
        archive: Optional[str],
        cuda_device: int = -1,
        batch_size: int = 64,
        existing_ents: str = "replace",
    ) -> None:
        if not archive:
            raise ConfigurationError(
                'nerzoo_ner needs an archive: nlp.add_pipe("nerzoo_ner", config={"archive": "..."})'
            )
        if existing_ents not in EXISTING_ENTS:
            raise ValueError(f"existing_ents must be one of {EXISTING_ENTS}, not {existing_ents!r}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, not {batch_size}")
        self.vocab = nlp.vocab
        self.name = name
        self.archive = str(archive)
        self.cuda_device = cuda_device
        self.batch_size = batch_size
        self.existing_ents = existing_ents

    @functools.cached_property
    def _loaded(self) -> Tuple[SequenceTaggerPredictor, DatasetReader]:
        return load_tagger(self.archive, self.cuda_device)

    @property
    def predictor(self) -> SequenceTaggerPredictor:
        """The archive's `sequence_tagger` Predictor (loads the archive on first use)."""
        return self._loaded[0]

    @property
    def dataset_reader(self) -> DatasetReader:
        """The archive's (validation) dataset reader, which the Predictor builds instances with."""
        return self._loaded[1]

    def __call__(self, doc: Doc) -> Doc:
        self._tag([doc], self.get_error_handler())
        return doc

    def pipe(self, stream: Iterable[Doc], *, batch_size: Optional[int] = None) -> Iterator[Doc]:
        error_handler = self.get_error_handler()
        for docs in minibatch(stream, size=batch_size or self.batch_size):
            self._tag(docs, error_handler)
            yield from docs

    def _tag(self, docs: Sequence[Doc], error_handler: Callable) -> None:
        """One forward pass over `docs` (sorted by length); a doc that fails goes to `error_handler`."""
        predictor = self.predictor
        inputs: Dict[int, Tuple[Dict[str, Any], List[int]]] = {}
        for number, doc in enumerate(docs):
            try:
                kept = [token.i for token in doc if not token.is_space]
                if kept:
                    inputs[number] = (self._input(doc, kept), kept)
                else:
                    self._set(doc, [], {"tags": [], "tag_confidences": [], "spans": []})
            except Exception as error:  # one bad doc costs no other
                error_handler(self.name, self, [doc], _doc_error(doc, error))
        order = sorted(inputs, key=lambda number: len(inputs[number][1]))
        try:
            results = predictor.predict_batch_json([inputs[number][0] for number in order])
        except Exception:  # find the doc that fails; the others are tagged one at a time
            results = []
            for number in order:
                try:
                    results.append(predictor.predict_batch_json([inputs[number][0]])[0])
                except Exception as error:
                    results.append({"error": error})
        for number, result in zip(order, results):
            doc = docs[number]
            try:
                if "error" in result:
                    error = result["error"]
                    raise error if isinstance(error, Exception) else ValueError(error)
                self._set(doc, inputs[number][1], result)
            except Exception as error:
                error_handler(self.name, self, [doc], _doc_error(doc, error))

    def _input(self, doc: Doc, kept: List[int]) -> Dict[str, Any]:
        """The `allennlp predict` input of the doc's tokens `kept` (its tree or sentences where the reader reads them)."""
        reader = self.dataset_reader
        # A reader of whole documents (`me_crf`) gets the doc's sentences.
        if isinstance(reader, ConllColumnsReader) and reader.document_level and doc.has_annotation("SENT_START"):
            position = {index: place for place, index in enumerate(kept)}
            sentences = [
                [doc[index].text for index in range(sent.start, sent.end) if index in position] for sent in doc.sents
            ]
            return {"sentences": [sentence for sentence in sentences if sentence]}
        result: Dict[str, Any] = {"tokens": [doc[index].text for index in kept]}
        pos_attribute = _tree_pos_attribute(reader)
        if pos_attribute is not None and doc.has_annotation("DEP"):
            result.update(_tree(doc, kept, pos_attribute))
        return result

    def _set(self, doc: Doc, kept: List[int], result: Dict[str, Any]) -> None:
        """Writes one result (the Predictor's output over the tokens `kept`) onto the doc."""
        tags, confidences = result["tags"], result["tag_confidences"]
        if len(tags) != len(kept):
            raise ValueError(f"the model gave {len(tags)} tags for {len(kept)} tokens")
        for token in doc:
            token._.nerzoo_tag = token._.nerzoo_confidence = None
        for index, tag, confidence in zip(kept, tags, confidences):
            doc[index]._.nerzoo_tag = tag
            doc[index]._.nerzoo_confidence = confidence
        # The CRF taggers and seq2biseq give `confidence`, span classifiers (fofe_ner) `score` and a nesting
        # `level`: the outermost are the entities.
        outermost = [found for found in result["spans"] if found.get("level", 1) == 1]
        spans = [
            Span(doc, kept[found["start"]], kept[found["end"] - 1] + 1, label=found["label"]) for found in outermost
        ]
        confidences = [found["confidence"] if "confidence" in found else found.get("score") for found in outermost]
        if self.existing_ents == "replace":
            chosen = list(zip(spans, confidences))
            doc.set_ents(spans, default="outside")
        else:
            taken = {index for entity in doc.ents for index in range(entity.start, entity.end)}
            chosen = [
                (span, value)
                for span, value in zip(spans, confidences)
                if not taken.intersection(range(span.start, span.end))
            ]
            doc.set_ents([span for span, _ in chosen], default="unmodified")
        for span, value in chosen:
            span._.confidence = value

    def score(self, examples: Iterable[Example], **kwargs) -> Dict[str, Any]:
        """Entity precision, recall and F1 of `doc.ents` (`ents_p`, `ents_r`, `ents_f`, `ents_per_type`)."""
        return get_ner_prf(examples)

    def to_disk(self, path: Union[str, Path], *, exclude: Iterable[str] = ()) -> None:
        """Copies the archive to `path/model.tar.gz`."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        source = Path(self.archive)
        if not source.is_file():
            raise ConfigurationError(f"cannot save {self.name!r}: its archive {self.archive!r} does not exist")
        if source.resolve() != (path / ARCHIVE_FILE).resolve():
            shutil.copyfile(source, path / ARCHIVE_FILE)

    def from_disk(self, path: Union[str, Path], *, exclude: Iterable[str] = ()) -> "NerzooTagger":
        """Tags with the archive saved in `path` (`path/model.tar.gz`)."""
        archive = Path(path) / ARCHIVE_FILE
        if not archive.is_file():
            raise ConfigurationError(f"{path} has no {ARCHIVE_FILE}: it was not saved by a {self.name!r} component")
        self.archive = str(archive)
        self._loaded = load_tagger(self.archive, self.cuda_device)
        return self


def load_tagger(archive: str, cuda_device: int = -1) -> Tuple[SequenceTaggerPredictor, DatasetReader]:
    """
    The `sequence_tagger` Predictor of a nerzoo tagger's archive and the dataset reader it builds
    instances with.  A missing file, a file that is not an archive and an archive of a model that is
    not a tagger each raise one `ConfigurationError` naming the archive.
    """
    if not os.path.isfile(archive):
        raise ConfigurationError(f"nerzoo_ner: archive {archive!r} does not exist (a model.tar.gz from allennlp train)")
    try:
        loaded = load_archive(archive, cuda_device=cuda_device)
    except Exception as error:
        raise ConfigurationError(
            f"nerzoo_ner: {archive!r} is not an AllenNLP model archive that loads: {type(error).__name__}: {error}"
        ) from None
    default = type(loaded.model).default_predictor
    if default != "sequence_tagger":
        raise ConfigurationError(
            f"nerzoo_ner: {archive!r} holds a {type(loaded.model).__name__} (predictor {default!r}), not a "
            f"tagger: the component needs a model whose predictor is 'sequence_tagger'"
        )
    predictor = Predictor.from_archive(loaded, "sequence_tagger", frozen=True)
    assert isinstance(predictor, SequenceTaggerPredictor)
    return predictor, loaded.validation_dataset_reader


def _tree_pos_attribute(reader: DatasetReader) -> Optional[str]:
    """The spaCy token attribute of the POS tags a tree reader reads (`"tag"` or `"pos"`); `None` without trees."""
    if "head_indices" not in inspect.signature(reader.text_to_instance).parameters:
        return None
    if isinstance(reader, SpacyParsedConllReader):
        return reader.parser.pos_attribute
    if isinstance(reader, ConlluNerReader):
        return "pos" if reader.pos_column == "upos" else "tag"
    return "tag"


def _tree(doc: Doc, kept: List[int], pos_attribute: str) -> Dict[str, List]:
    """The doc's parse over the tokens `kept`: POS tags, labels, heads (1-based, 0 = root)."""
    position = {index: place for place, index in enumerate(kept)}
    heads = []
    for index in kept:
        head, seen = doc[index].head.i, {index}
        while head not in position and head not in seen:  # a whitespace head: its own head instead
            seen.add(head)
            head = doc[head].head.i
        heads.append(0 if head == index or head not in position else position[head] + 1)
    return {
        "pos_tags": [(doc[index].tag_ if pos_attribute == "tag" else doc[index].pos_) or "_" for index in kept],
        "dependency_labels": [doc[index].dep_ or "_" for index in kept],
        "head_indices": heads,
    }


def _doc_error(doc: Doc, error: Exception) -> Exception:
    """`error`, with the doc it comes from named in its message."""
    preview = doc.text[:60] + ("..." if len(doc.text) > 60 else "")
    return ValueError(f"nerzoo_ner could not tag a doc of {len(doc)} tokens ({preview!r}): {error}")
