"""
spaCy components that tag docs with a nerzoo tagger (`TaggerComponent`, what they share):
"nerzoo_onnx_ner" with a tagger exported by `allennlp export`, without allennlp or torch, and
nerzoo's own "nerzoo_ner" (`nerzoo.spacy_pipeline`) with a trained archive.  The runtime's
`spacy_factories` entry point registers "nerzoo_onnx_ner", so spaCy finds it without an import:
`nlp.add_pipe("nerzoo_onnx_ner", config={"directory": "runs/bilstm_crf/exported"})`.
"""

import functools
import shutil
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

from spacy.language import Language
from spacy.pipeline import Pipe
from spacy.scorer import get_ner_prf
from spacy.tokens import Doc, Span, Token
from spacy.util import minibatch

from nerzoo_runtime.tagger import Tagger

EXISTING_ENTS = ("replace", "keep")
EXTENSIONS = ((Span, "confidence"), (Token, "nerzoo_tag"), (Token, "nerzoo_confidence"))


class TaggerComponent(Pipe):
    """
    Sets `doc.ents`, `Span._.confidence` (each entity's probability, as `allennlp predict` gives
    it), `Token._.nerzoo_tag` and `Token._.nerzoo_confidence` (`None` on whitespace tokens, which
    the model never sees).  A doc's other tokens are one input (`_input`), N docs one prediction
    (`nlp.pipe(texts, batch_size=N)`); an all-whitespace doc gets no entities.  A doc the model
    cannot tag goes to the pipeline's error handler with an error naming it (the other docs of the
    batch are tagged).  `nlp.evaluate` scores `doc.ents`.

    # Parameters

    nlp : `Language`, required
    name : `str`, required
        The component's name in the pipeline.
    source : `Tuple[str, Optional[str]]`, required
        The config's key of what the component tags with, and its value (which it must have).
    batch_size : `int`, required
        Docs per prediction when `pipe` is called without a batch size (`nlp.pipe` passes its own).
    existing_ents : `str`, required
        What to do with entities already on the doc: `"replace"` them with the model's, or `"keep"`
        them and add only the model's entities that cover none of their tokens.
    """

    factory = ""  # the factory's name, in errors
    setup_error = ValueError  # raised for a config the component cannot use

    def __init__(
        self, nlp: Language, name: str, source: Tuple[str, Optional[str]], batch_size: int, existing_ents: str
    ) -> None:
        if not source[1]:
            raise self.setup_error(
                f"{self.factory} needs {source[0]!r}: nlp.add_pipe({self.factory!r}, config={{{source[0]!r}: ...}})"
            )
        if existing_ents not in EXISTING_ENTS:
            raise ValueError(f"existing_ents must be one of {EXISTING_ENTS}, not {existing_ents!r}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, not {batch_size}")
        for owner, attribute in EXTENSIONS:
            if not owner.has_extension(attribute):
                owner.set_extension(attribute, default=None)
        self.vocab = nlp.vocab
        self.name = name
        self.batch_size = batch_size
        self.existing_ents = existing_ents
        self.scorer = get_ner_prf  # entity precision, recall and F1 of `doc.ents`, as spaCy's `ner` scores

    def _predictor(self) -> Callable[[List[Dict[str, Any]]], List[Dict[str, Any]]]:
        """
        The model (loaded at the first call): inputs to one result each, as `allennlp predict` writes
        it (`{"error": ...}` for one it cannot tag).
        """
        raise NotImplementedError

    def _input(self, doc: Doc, kept: List[int]) -> Dict[str, Any]:
        """The `allennlp predict` input of the doc's tokens `kept`."""
        return {"tokens": [doc[index].text for index in kept]}

    def __call__(self, doc: Doc) -> Doc:
        self._tag([doc], self.get_error_handler())
        return doc

    def pipe(self, stream: Iterable[Doc], *, batch_size: Optional[int] = None) -> Iterator[Doc]:
        error_handler = self.get_error_handler()
        for docs in minibatch(stream, size=batch_size or self.batch_size):
            self._tag(docs, error_handler)
            yield from docs

    def _tag(self, docs: Sequence[Doc], error_handler: Callable) -> None:
        """One prediction over `docs` (sorted by length); a doc that fails goes to `error_handler`."""
        predict = self._predictor()
        inputs: Dict[int, Tuple[Dict[str, Any], List[int]]] = {}
        for number, doc in enumerate(docs):
            try:
                kept = [token.i for token in doc if not token.is_space]
                if kept:
                    inputs[number] = (self._input(doc, kept), kept)
                else:
                    self._set(doc, [], {"tags": [], "tag_confidences": [], "spans": []})
            except Exception as error:  # one bad doc costs no other
                error_handler(self.name, self, [doc], self._doc_error(doc, error))
        order = sorted(inputs, key=lambda number: len(inputs[number][1]))
        try:
            results = predict([inputs[number][0] for number in order])
        except Exception:  # find the doc that fails; the others are tagged one at a time
            results = []
            for number in order:
                try:
                    results.append(predict([inputs[number][0]])[0])
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
                error_handler(self.name, self, [doc], self._doc_error(doc, error))

    def _set(self, doc: Doc, kept: List[int], result: Dict[str, Any]) -> None:
        """Writes one result (the model's output over the tokens `kept`) onto the doc."""
        tags, confidences = result["tags"], result["tag_confidences"]
        if len(tags) != len(kept):
            raise ValueError(f"the model gave {len(tags)} tags for {len(kept)} tokens")
        for token in doc:
            token._.nerzoo_tag = token._.nerzoo_confidence = None
        for index, tag, confidence in zip(kept, tags, confidences):
            doc[index]._.nerzoo_tag = tag
            doc[index]._.nerzoo_confidence = confidence
        # A span classifier's (fofe_ner's) spans have a `score` and a nesting `level`: the outermost are the entities.
        found = [
            (
                Span(doc, kept[span["start"]], kept[span["end"] - 1] + 1, label=span["label"]),
                span["confidence"] if "confidence" in span else span.get("score"),
            )
            for span in result["spans"]
            if span.get("level", 1) == 1
        ]
        if self.existing_ents == "replace":
            doc.set_ents([span for span, _ in found], default="outside")
        else:
            taken = {index for entity in doc.ents for index in range(entity.start, entity.end)}
            found = [(span, value) for span, value in found if not taken.intersection(range(span.start, span.end))]
            doc.set_ents([span for span, _ in found], default="unmodified")
        for span, value in found:
            span._.confidence = value

    def _doc_error(self, doc: Doc, error: Exception) -> Exception:
        """`error`, with the doc it comes from named in its message."""
        preview = doc.text[:60] + ("..." if len(doc.text) > 60 else "")
        return ValueError(f"{self.factory} could not tag a doc of {len(doc)} tokens ({preview!r}): {error}")


class NerzooOnnxTagger(TaggerComponent):
    """
    Tags spaCy docs with an exported nerzoo tagger (`nerzoo_runtime.Tagger`), as "nerzoo_ner" tags
    them with its archive (`TaggerComponent`).

    The directory is loaded when the component first tags a doc (or on `from_disk`).  `nlp.to_disk`
    copies it into the component's folder, and `spacy.load(path)` tags with that copy.

    # Parameters

    nlp : `Language`, required
    name : `str`, required
    directory : `str`, required
        What `allennlp export` wrote.
    batch_size : `int`, optional (default = `64`)
    existing_ents : `str`, optional (default = `"replace"`)
    threads : `int`, optional (default = onnxruntime's choice)
        onnxruntime's threads within an operator.
    """

    factory = "nerzoo_onnx_ner"

    def __init__(
        self,
        nlp: Language,
        name: str,
        directory: Optional[str],
        batch_size: int = 64,
        existing_ents: str = "replace",
        threads: Optional[int] = None,
    ) -> None:
        super().__init__(nlp, name, ("directory", directory), batch_size, existing_ents)
        self.directory = str(directory)
        self.threads = threads

    @functools.cached_property
    def tagger(self) -> Tagger:
        """The exported tagger (loaded on first use)."""
        return _load(self.directory, self.threads)

    def _predictor(self) -> Callable[[List[Dict[str, Any]]], List[Dict[str, Any]]]:
        tagger = self.tagger
        return lambda inputs: tagger.tag(inputs, batch_size=len(inputs))

    def to_disk(self, path: Union[str, Path], *, exclude: Iterable[str] = ()) -> None:
        """Copies the exported directory into `path`."""
        source, path = Path(self.directory), Path(path)
        if not (source / "tagger.json").is_file():
            raise ValueError(
                f"cannot save {self.name!r}: {self.directory!r} is not a directory written by allennlp export"
            )
        if source.resolve() != path.resolve():
            shutil.copytree(source, path, dirs_exist_ok=True)

    def from_disk(self, path: Union[str, Path], *, exclude: Iterable[str] = ()) -> "NerzooOnnxTagger":
        """Tags with the exported directory saved in `path`."""
        self.directory = str(path)
        self.tagger = _load(self.directory, self.threads)
        return self


def _load(directory: str, threads: Optional[int]) -> Tagger:
    """`Tagger.load(directory)`, or one error naming the directory."""
    try:
        return Tagger.load(directory, threads=threads)
    except Exception as error:
        raise ValueError(f"nerzoo_onnx_ner cannot load {directory!r}: {type(error).__name__}: {error}") from None


@Language.factory(
    "nerzoo_onnx_ner",
    assigns=["doc.ents", "token.ent_iob", "token.ent_type", "span._.confidence", "token._.nerzoo_tag"],
    default_config={"directory": None, "batch_size": 64, "existing_ents": "replace", "threads": None},
    default_score_weights={"ents_f": 1.0, "ents_p": 0.0, "ents_r": 0.0, "ents_per_type": None},
)
def make_nerzoo_onnx_ner(
    nlp: Language,
    name: str,
    directory: Optional[str],
    batch_size: int,
    existing_ents: str,
    threads: Optional[int],
) -> NerzooOnnxTagger:
    return NerzooOnnxTagger(nlp, name, directory, batch_size, existing_ents, threads)
