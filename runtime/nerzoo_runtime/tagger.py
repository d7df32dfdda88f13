"""
`Tagger`: a tagger exported by nerzoo's `allennlp export`, run with onnxruntime and numpy.

An exported directory holds `model.onnx` (token ids to emission scores, `(batch_size, num_tokens,
num_tags)`; for `fofe_ner` span scores, `(batch_size, num_tokens, max_span_width, num_classes)`),
`tagger.json` (how words become the graph's inputs, the labels and tag scheme, the CRF's scores or
the span decoding, the temperatures of the confidences, the tokenizer of raw text),
`vocabularies.json` and `model_card.json`.
"""

import functools
import json
import pathlib
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy

from nerzoo_runtime import chains, crf, span_decoding
from nerzoo_runtime.errors import TaggerInputError
from nerzoo_runtime.inputs import Input, Spans, parsed_document, read_input
from nerzoo_runtime.spacy_loading import load_spacy
from nerzoo_runtime.word_shapes import WordShapes

FORMAT_VERSION = 1


class Tagger:
    """
    # Parameters

    directory : `str` or `pathlib.Path`
        What `allennlp export` wrote.
    spacy_model : `str`, optional (default = the one the export names)
        The spaCy pipeline that tokenises raw text (`"blank:en"`: spaCy's rules, no model).
    threads : `int`, optional (default = onnxruntime's choice)
        onnxruntime's threads within an operator.
    """

    def __init__(self, directory, spacy_model: Optional[str] = None, threads: Optional[int] = None) -> None:
        import onnxruntime

        self.directory = pathlib.Path(directory)
        if not (self.directory / "tagger.json").is_file():
            raise FileNotFoundError(
                f"{self.directory} is not a directory written by `allennlp export` (no tagger.json)"
            )
        settings = json.loads((self.directory / "tagger.json").read_text())
        if settings.get("format_version") != FORMAT_VERSION:
            raise ValueError(
                f"{self.directory} holds export format {settings.get('format_version')}, "
                f"this nerzoo_runtime reads format {FORMAT_VERSION}"
            )
        vocabularies = json.loads((self.directory / "vocabularies.json").read_text())
        self.labels: List[str] = vocabularies[settings["label_namespace"]]
        self.tag_scheme: Optional[str] = settings["tag_scheme"]
        self.indexers = [
            part for entry in settings["indexers"] for part in runtime_indexers(entry, vocabularies, self.directory)
        ]
        self.temperature = settings["temperature"]
        self.transition_temperature = settings["transition_temperature"]
        self.crf = None if settings["crf"] is None else crf.Crf.from_settings(settings["crf"])
        self.crf_per_sentence: bool = settings.get("crf_per_sentence", False)
        self.span_decoding: Optional[Dict[str, Any]] = settings.get("spans")  # fofe_ner's
        self.spacy_model = spacy_model or settings["tokenizer"]["spacy_model"]
        options = onnxruntime.SessionOptions()
        if threads is not None:
            options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1  # operators run one at a time: no second pool
        # Threads that spin between the graph's operators slow the numpy CRF that follows each run.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = onnxruntime.InferenceSession(
            str(self.directory / "model.onnx"), options, providers=["CPUExecutionProvider"]
        )
        self.input_names = {graph_input.name for graph_input in self.session.get_inputs()}

    @classmethod
    def load(cls, directory, spacy_model: Optional[str] = None, threads: Optional[int] = None) -> "Tagger":
        return cls(directory, spacy_model, threads)

    def tag(self, inputs: Sequence[Input], batch_size: int = 64) -> List[Dict[str, Any]]:
        """
        One result per input, in order, as `allennlp predict` gives it: `tokens`, `token_offsets`,
        `tags`, `tag_confidences` and `spans` (`label`, `start`, `end` exclusive, `text`,
        `char_start`, `char_end`, `confidence`; `fofe_ner`'s have `score` and nesting `level`
        instead, nested spans included).  An input is one of `nerzoo_runtime.inputs`; a document is
        one sequence to the model (`me_crf`'s memory spans it), its spans never cross a sentence and
        its result adds `sentences`, each one's `[start, end)` tokens.  An input that cannot be
        tagged gets `{"error": ..., "input": its position}`.  Inputs go `batch_size` at a time, by length.
        """
        if isinstance(inputs, (str, bytes)) or not isinstance(inputs, Sequence):
            raise TypeError(f"tag() takes a list of texts or token lists, got {type(inputs).__name__}")
        results: List[Optional[Dict[str, Any]]] = [None] * len(inputs)
        pending: List[Tuple[int, List[str], Spans, str, Spans]] = []
        for position, item in enumerate(inputs):
            try:
                words, offsets, text, sentences = read_input(
                    item, lambda text: self.nlp.make_doc(text), lambda text: parsed_document(self.nlp, text)
                )
                for indexer in self.indexers:
                    indexer.check(words)
            except TaggerInputError as error:
                results[position] = {"error": f"input {position}: {error}", "input": position}
                continue
            if not words:
                results[position] = {"tokens": [], "token_offsets": [], "tags": [], "tag_confidences": [], "spans": []}
            else:
                pending.append((position, words, offsets, text, sentences))
        # Batches of similar lengths, as allennlp's bucket sampler makes them: less padding to compute.
        pending.sort(key=lambda item: len(item[1]))
        for first in range(0, len(pending), batch_size):
            batch = pending[first : first + batch_size]
            tagged = self._tag_words([item[1] for item in batch], [item[4] for item in batch])
            for (position, words, offsets, text, sentences), (tags, confidences, spans) in zip(batch, tagged):
                results[position] = _formatted(words, offsets, text, tags, confidences, spans)
                if len(sentences) > 1:
                    results[position]["sentences"] = [list(sentence) for sentence in sentences]  # type: ignore
        return results  # type: ignore[return-value]

    @functools.cached_property
    def nlp(self):
        """The spaCy pipeline `spacy_model`, which tokenises raw text (loaded at the first)."""
        return load_spacy(self.spacy_model, "raw text needs spaCy", "or pass spacy_model='blank:en'")

    def logits(self, batch: Sequence[Sequence[str]]) -> Tuple[numpy.ndarray, numpy.ndarray]:
        """The graph's emission scores `(batch_size, num_tokens, num_tags)` for word lists, and their mask."""
        feeds = {name: ids for indexer in self.indexers for name, ids in indexer.feeds(batch).items()}
        feeds = {name: ids for name, ids in feeds.items() if name in self.input_names}  # those the graph reads
        mask = numpy.arange(max(map(len, batch)))[None] < numpy.array([len(words) for words in batch])[:, None]
        (logits,) = self.session.run(["logits"], feeds)
        return logits, mask

    def _tag_words(
        self, batch: Sequence[Sequence[str]], sentences: Optional[Sequence[Spans]] = None
    ) -> List[Tuple[List[str], List[float], List[Tuple]]]:
        """
        Per word list: its tags, their confidences, and its spans `(label, start, end, confidence)`,
        found within each of its `sentences` (default: the whole list).  The CRF runs over each
        sentence where the model was trained so (`crf_per_sentence`), else over each list.  A span
        classifier's spans are decoded over each list: `(label, start, end, score, level)`.
        """
        sentences = sentences or [[(0, len(words))] for words in batch]
        logits, mask = self.logits(batch)
        if self.span_decoding is not None:  # the model reads a document as one sequence, as the predictor gives it
            options = {key: self.span_decoding[key] for key in ("decoding", "thresholds", "merge_adjacent")}
            lengths = [len(words) for words in batch]
            return span_decoding.decode(logits, lengths, self.labels, **options, temperature=self.temperature)
        per_sentence = self.crf is not None and self.crf_per_sentence
        rows, logits, mask = chains.sentence_rows(logits, mask, sentences if per_sentence else None)
        if self.crf is not None:
            scored = chains.crf_scored(self.crf, logits, mask, self.temperature, self.transition_temperature)
        else:
            scored = chains.softmax_scored(logits, mask, self.temperature)
        spans_within = sentences if self.tag_scheme is not None else None
        return chains.tagged(rows, scored, self.labels, spans_within, len(batch))


class Indexer:
    """
    Words to one input of the graph, as the allennlp token indexer it was exported from:
    `single_id` (a word's id, `(batch_size, num_tokens)`) or `characters` (its characters' ids,
    `(batch_size, num_tokens, num_characters)`, at least `min_padding_length` wide); 0 pads, and a
    word or character outside the vocabulary gets the id of `oov`.
    """

    def __init__(self, settings: Dict[str, Any], vocabulary: List[str]) -> None:
        self.name: str = settings["name"]
        self.type: str = settings["type"]
        self.lowercase: bool = settings["lowercase"]
        self.min_padding_length: int = settings.get("min_padding_length", 0)
        self.index = {token: index for index, token in enumerate(vocabulary)}
        self.oov = self.index[settings["oov"]]

    def ids(self, batch: Sequence[Sequence[str]]) -> numpy.ndarray:
        length = max(map(len, batch))
        if self.type == "single_id":
            ids = numpy.zeros((len(batch), length), dtype=numpy.int64)
            for row, words in enumerate(batch):
                ids[row, : len(words)] = [self.index.get(self._cased(word), self.oov) for word in words]
            return ids
        width = max([self.min_padding_length] + [len(word) for words in batch for word in words])
        ids = numpy.zeros((len(batch), length, width), dtype=numpy.int64)
        for row, words in enumerate(batch):
            for column, word in enumerate(words):
                ids[row, column, : len(word)] = [self.index.get(character, self.oov) for character in self._cased(word)]
        return ids

    def check(self, words: Sequence[str]) -> None:
        """Any words will do."""

    def feeds(self, batch: Sequence[Sequence[str]]) -> Dict[str, numpy.ndarray]:
        return {self.name: self.ids(batch)}

    def _cased(self, text: str) -> str:
        return text.lower() if self.lowercase else text


def runtime_indexers(
    settings: Dict[str, Any], vocabularies: Dict[str, List[str]], directory: pathlib.Path
) -> List[Any]:
    """
    The runtime indexers of one entry of `tagger.json`'s `indexers`; nerzoo's `word_and_characters`
    is two: `NAME.token_ids` (lower-cased if the indexer was) and `NAME.token_characters` (in their own case).
    """
    if settings["type"] == "word_and_characters":
        name, oov = settings["name"], settings["oov"]
        words = {"name": f"{name}.token_ids", "type": "single_id", "lowercase": settings["lowercase"], "oov": oov}
        characters = {"name": f"{name}.token_characters", "type": "characters", "lowercase": False, "oov": oov}
        characters["min_padding_length"] = settings["min_padding_length"]
        namespaces = settings["namespace"], settings["character_namespace"]
        return [Indexer(part, vocabularies[key]) for part, key in zip((words, characters), namespaces)]
    if settings["type"] == "contextual_word_pieces":
        from nerzoo_runtime.word_pieces import WordPieces  # its `tokenizers` is the `contextual` extra

        return [WordPieces(settings, directory)]
    if settings["type"] == "lexical_features":
        return [WordShapes(settings)]
    if settings["type"] == "dependency_parse":  # spaCy is the `spacy` extra
        from nerzoo_runtime.dependency_parse import DependencyParse

        return [DependencyParse(settings, vocabularies)]
    return [Indexer(settings, vocabularies[settings["namespace"]])]


def _formatted(words, offsets, text, tags, confidences, spans) -> Dict[str, Any]:
    """One result as nerzoo's `sequence_tagger` predictor writes it (confidences to 6 places)."""
    return {
        "tokens": list(words),
        "token_offsets": [[start, end] for start, end in offsets],
        "tags": tags,
        "tag_confidences": [round(value, 6) for value in confidences],
        "spans": [_formatted_span(span, offsets, text) for span in spans],
    }


def _formatted_span(span: Tuple, offsets: Spans, text: str) -> Dict[str, Any]:
    """`(label, start, end, confidence)`, or a span classifier's `(label, start, end, score, level)`, as the predictor writes it."""
    label, start, end = span[:3]
    char_start, char_end = offsets[start][0], offsets[end - 1][1]
    entry = {"label": label, "start": start, "end": end, "text": text[char_start:char_end]}
    entry.update(char_start=char_start, char_end=char_end)
    if len(span) == 4:
        entry["confidence"] = round(span[3], 6)
    else:
        entry.update(score=round(span[3], 6), level=span[4])
    return entry
