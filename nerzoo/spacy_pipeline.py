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
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple, Union

from allennlp.common.checks import ConfigurationError
from allennlp.data import DatasetReader
from allennlp.models.archival import load_archive
from allennlp.predictors.predictor import Predictor
from nerzoo_runtime.spacy_component import TaggerComponent
from spacy.language import Language
from spacy.tokens import Doc

import nerzoo  # noqa: F401  (registers the models, readers and predictors an archive names)
from nerzoo.data.dataset_readers.conll_columns import ConllColumnsReader
from nerzoo.data.dataset_readers.conllu_ner import ConlluNerReader
from nerzoo.data.dataset_readers.spacy_parsed_conll import SpacyParsedConllReader
from nerzoo.predictors.sequence_tagger import SequenceTaggerPredictor

ARCHIVE_FILE = "model.tar.gz"


class NerzooTagger(TaggerComponent):
    """
    Tags spaCy docs with a trained nerzoo tagger (`nerzoo_runtime.spacy_component.TaggerComponent`:
    `doc.ents`, `Span._.confidence`, `Token._.nerzoo_tag` and `Token._.nerzoo_confidence`, calibrated
    archives included).  Created by the factory "nerzoo_ner": `nlp.add_pipe("nerzoo_ner",
    config={"archive": "runs/bilstm_crf/model.tar.gz"})`.

    The archive's own `sequence_tagger` Predictor and dataset reader build the instances from the
    doc's tokens (whitespace tokens left out), so a doc gets what `allennlp predict` gives for
    `{"tokens": [...]}`, tagged as one sequence, except that:

    - `me_crf` (a document-level reader) reads the doc's sentences when it has sentence boundaries;
    - `deptree_ner` (a reader that takes trees) reads the pipeline's own parse when the doc is parsed
      (put the component after the parser), else parses the tokens with the archive's spaCy pipeline.

    The archive is loaded when the component first tags a doc.  `nlp.to_disk` copies it into the
    component's folder (`<path>/<name>/model.tar.gz`), which `spacy.load(path)` tags with.

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
        `"replace"` the doc's entities with nerzoo's, or `"keep"` them and add only nerzoo's entities
        that cover none of their tokens.
    """

    factory = "nerzoo_ner"
    setup_error = ConfigurationError

    def __init__(
        self,
        nlp: Language,
        name: str,
        archive: Optional[str],
        cuda_device: int = -1,
        batch_size: int = 64,
        existing_ents: str = "replace",
    ) -> None:
        super().__init__(nlp, name, ("archive", archive), batch_size, existing_ents)
        self.archive = str(archive)
        self.cuda_device = cuda_device

    @functools.cached_property
    def _loaded(self) -> Tuple[SequenceTaggerPredictor, DatasetReader]:
        """The archive's `sequence_tagger` Predictor and the dataset reader it builds instances with."""
        return load_tagger(self.archive, self.cuda_device)

    def _predictor(self) -> Callable[[List[Dict[str, Any]]], List[Dict[str, Any]]]:
        return self._loaded[0].predict_batch_json

    def _input(self, doc: Doc, kept: List[int]) -> Dict[str, Any]:
        """The `allennlp predict` input of the doc's tokens `kept` (its tree or sentences where the reader reads them)."""
        reader = self._loaded[1]
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
        self.archive = str(Path(path) / ARCHIVE_FILE)
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
    return Predictor.from_archive(loaded, "sequence_tagger", frozen=True), loaded.validation_dataset_reader


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
