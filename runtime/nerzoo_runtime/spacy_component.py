"""
The spaCy component "nerzoo_onnx_ner": tags docs with a tagger exported by `allennlp export`, as
nerzoo's own "nerzoo_ner" tags them with its archive, without allennlp or torch.

The runtime's `spacy_factories` entry point registers it, so spaCy finds it without an import:
`nlp.add_pipe("nerzoo_onnx_ner", config={"directory": "runs/bilstm_crf/exported"})`.
"""

import functools
import shutil
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Union

from spacy.language import Language
from spacy.pipeline import Pipe
from spacy.scorer import get_ner_prf
from spacy.tokens import Doc, Span, Token
from spacy.training import Example
from spacy.util import minibatch

from nerzoo_runtime.tagger import Tagger

EXISTING_ENTS = ("replace", "keep")
EXTENSIONS = ((Span, "confidence"), (Token, "nerzoo_tag"), (Token, "nerzoo_confidence"))


class NerzooOnnxTagger(Pipe):
    """
    Tags spaCy docs with an exported nerzoo tagger (`nerzoo_runtime.Tagger`): sets `doc.ents` (the
    model's labels), `Span._.confidence` (each entity's probability), `Token._.nerzoo_tag` and
    `Token._.nerzoo_confidence` (the model's tag and its posterior; `None` on whitespace tokens,
    which the model never sees), as "nerzoo_ner" sets them.

    Each doc's tokens (whitespace tokens left out) are tagged as one token list, so a doc gets what
    `allennlp predict` gives for `{"tokens": [...]}`.  `nlp.pipe(texts, batch_size=N)` runs one
    forward pass per N docs.  An empty (or all-whitespace) doc gets no entities.  A doc the model
    cannot tag goes to the pipeline's error handler (`nlp.set_error_handler`) with an error naming
    it; a handler that returns leaves that doc untagged and the other docs of the batch tagged.

    The directory is loaded when the component first tags a doc (or on `from_disk`).  `nlp.to_disk`
    copies it into the component's folder, and `spacy.load(path)` tags with that copy.

    # Parameters

    nlp : `Language`, required
    name : `str`, required
        The component's name in the pipeline.
    directory : `str`, required
        What `allennlp export` wrote.
    batch_size : `int`, optional (default = `64`)
        Docs per forward pass when `pipe` is called without a batch size (`nlp.pipe` passes its own).
    existing_ents : `str`, optional (default = `"replace"`)
        What to do with entities already on the doc: `"replace"` them with the model's, or `"keep"`
        them and add only the model's entities that cover none of their tokens.
    threads : `int`, optional (default = onnxruntime's choice)
        onnxruntime's threads within an operator.
    """

    def __init__(
        self,
        nlp: Language,
        name: str,
        directory: Optional[str],
        batch_size: int = 64,
        existing_ents: str = "replace",
        threads: Optional[int] = None,
    ) -> None:
        if not directory:
            raise ValueError(
                'nerzoo_onnx_ner needs a directory: nlp.add_pipe("nerzoo_onnx_ner", config={"directory": "..."})'
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
        self.directory = str(directory)
        self.batch_size = batch_size
        self.existing_ents = existing_ents
        self.threads = threads

    @functools.cached_property
    def tagger(self) -> Tagger:
        """The exported tagger (loaded on first use)."""
        return _load(self.directory, self.threads)

    def __call__(self, doc: Doc) -> Doc:
        self._tag([doc], self.get_error_handler())
        return doc

    def pipe(self, stream: Iterable[Doc], *, batch_size: Optional[int] = None) -> Iterator[Doc]:
        error_handler = self.get_error_handler()
        for docs in minibatch(stream, size=batch_size or self.batch_size):
            self._tag(docs, error_handler)
            yield from docs

    def _tag(self, docs: Sequence[Doc], error_handler: Callable) -> None:
        """One forward pass over `docs`; a doc that fails goes to `error_handler`."""
        tagger = self.tagger
        kept = [[token.i for token in doc if not token.is_space] for doc in docs]
        words = [[doc[index].text for index in indices] for doc, indices in zip(docs, kept)]
        try:
            results = tagger.tag(words, batch_size=len(docs))
        except Exception:  # find the doc that fails; the others are tagged one at a time
            results = []
            for one in words:
                try:
                    results.extend(tagger.tag([one]))
                except Exception as error:
                    results.append({"error": f"{type(error).__name__}: {error}"})
        for doc, indices, result in zip(docs, kept, results):
            try:
                if "error" in result:
                    raise ValueError(result["error"])
                self._set(doc, indices, result)
            except Exception as error:  # one bad doc costs no other
                error_handler(self.name, self, [doc], _doc_error(doc, error))

    def _set(self, doc: Doc, kept: List[int], result: Dict[str, Any]) -> None:
        """Writes one result (the tagger's output over the tokens `kept`) onto the doc."""
        for token in doc:
            token._.nerzoo_tag = token._.nerzoo_confidence = None
        for index, tag, confidence in zip(kept, result["tags"], result["tag_confidences"]):
            doc[index]._.nerzoo_tag = tag
            doc[index]._.nerzoo_confidence = confidence
        # A span classifier's (fofe_ner's) spans have a `score` and a nesting `level`: the outermost are the entities.
        found = [
            (
                Span(doc, kept[span["start"]], kept[span["end"] - 1] + 1, label=span["label"]),
                span["confidence"] if "confidence" in span else span["score"],
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

    def score(self, examples: Iterable[Example], **kwargs) -> Dict[str, Any]:
        """Entity precision, recall and F1 of `doc.ents` (`ents_p`, `ents_r`, `ents_f`, `ents_per_type`)."""
        return get_ner_prf(examples)

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


def _doc_error(doc: Doc, error: Exception) -> Exception:
    """`error`, with the doc it comes from named in its message."""
    preview = doc.text[:60] + ("..." if len(doc.text) > 60 else "")
    return ValueError(f"nerzoo_onnx_ner could not tag a doc of {len(doc)} tokens ({preview!r}): {error}")


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
