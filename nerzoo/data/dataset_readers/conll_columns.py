import json
import os
import re
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, TypeVar

from allennlp.common.checks import ConfigurationError
from allennlp.common.file_utils import cached_path
from allennlp.data.dataset_readers.dataset_reader import DatasetReader
from allennlp.data.fields import Field, MetadataField, SequenceLabelField, TextField
from allennlp.data.instance import Instance
from allennlp.data.token_indexers import SingleIdTokenIndexer, TokenIndexer
from allennlp.data.tokenizers import Token
from nerzoo_runtime.tag_scheme import check_tag_scheme

from nerzoo.data.partial_tags import PartialTagError, PartialTagsField, partial_tags

DOCSTART = "-DOCSTART-"
T = TypeVar("T")


class ColumnFormatError(ConfigurationError):
    """Malformed column file; the message names the file and line."""

    def __init__(self, path: str, line: Optional[int], message: str) -> None:
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {message}")


def decoded_lines(path: str, name: str) -> Iterator[Tuple[int, str]]:
    """Each line of a UTF-8 file, without its line break, with its 1-based number."""
    with open(path, "rb") as handle:
        for line_number, raw_line in enumerate(handle, start=1):
            try:
                line = raw_line.decode("utf-8")
            except UnicodeDecodeError as error:
                raise ColumnFormatError(name, line_number, f"not valid UTF-8 ({error.reason})") from None
            yield line_number, line.rstrip("\r\n")


HELD_OUT_KEYS = ("held_out", "without_held_out")
_URL_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def parse_held_out_path(file_path) -> Tuple[str, Optional[Tuple[str, int]]]:
    """
    Splits a data path `<file>?held_out=<n>` or `<file>?without_held_out=<n>` into the file and the
    selection `(key, n)`, or with `=<n>:<j>` `(key, n, j)`; a path without one gives `(path, None)`.
    Raises `ConfigurationError`, naming the path, on an unknown key, an `n` that is not an integer
    of at least 2 or a `j` not below it.  In a URL only these two keys are taken: any other query
    string belongs to the URL.
    """
    path = str(file_path)
    base, separator, query = path.rpartition("?")
    if not separator:
        return path, None
    key, equals, value = query.partition("=")
    if _URL_SCHEME.match(path) and key not in HELD_OUT_KEYS:
        return path, None
    if not equals or key not in HELD_OUT_KEYS:
        raise ConfigurationError(
            f"{path}: unknown data path selection {query!r}; expected '<file>?held_out=<n>' or "
            f"'<file>?without_held_out=<n>'"
        )
    numbers = re.fullmatch(r"([0-9]+)(?::([0-9]+))?", value)
    if not numbers or int(numbers[1]) < 2 or (numbers[2] is not None and int(numbers[2]) >= int(numbers[1])):
        raise ConfigurationError(f"{path}: {key} must be an integer of at least 2, not {value!r} (or n:j, j < n)")
    if not base:
        raise ConfigurationError(f"{path}: no file before '?{query}'")
    return base, (key, *(int(number) for number in numbers.groups() if number is not None))


def select_held_out(sentences: Iterable[T], key: str, n: int, j: Optional[int] = None) -> Iterator[T]:
    """The items of index `i % n == j` (default `n - 1`) for `key` "held_out", the others for "without_held_out"."""
    keep_held_out = key == "held_out"
    for index, sentence in enumerate(sentences):
        if (index % n == (n - 1 if j is None else j)) == keep_held_out:
            yield sentence


def _file_stem(sentence_id: str) -> str:
    """`'train.txt:d0:s3'` -> `'train.txt'` (a file name may itself hold a colon)."""
    return sentence_id.rsplit(":", 2)[0]


@DatasetReader.register("conll_columns")
class ConllColumnsReader(DatasetReader):
    """
    Reads CoNLL-style column files: one token a line, columns separated by whitespace (or by
    `delimiter`), a blank line between sentences, and optional `-DOCSTART-` lines opening documents:
    CoNLL-2003 (`word POS chunk NER`), CoNLL-2000, CoNLL-2002 and WNUT-17 (`word<TAB>tag`).

    Registered as a `DatasetReader` with name "conll_columns".

    Each instance is a sentence, or with `document_level` a whole document (its sentences
    concatenated, for models with document memory such as ME-CRF), with the fields

    - `tokens` : `TextField` of the words;
    - `tags` : the tag column, in namespace `label_namespace`, when present: a `PartialTagsField`
      whose open tokens (`missing_tag`, and with `o_unconfirmed` every `O`) take any tag the
      marked ones allow (docs/partial.md), or with neither a `SequenceLabelField`;
    - one `SequenceLabelField` per entry of `feature_columns` (e.g. `{"pos_tags": 1}`), in a namespace
      of the same name;
    - `metadata` : `words`, `document_id`, `sentence_ids`, `sentence_spans` (token offsets
      `(start, end)` of each sentence, end exclusive), `source` (`path:line` of the first token),
      and `partial` (true) where a token is open.

    **Segments.**  With `segment_length` a sentence of `N > segment_length` tokens gives the
    `N - segment_length + 1` windows `[i, i + segment_length)` instead (a shorter one gives itself):
    Seq2Biseq's training regime (Dinarelli and Grobol, 2019, §4.2-4.3).  Tags are converted on the
    whole sentence, then cut (a window may start with `I-`/`L-`).  A segment's metadata adds
    `segment_start` (its offset in its sentence); `source` is its own first token's line.  Meant
    for the training reader only: give the trainer a `validation_dataset_reader` without it.

    **Held-out sentences.**  The data path may select a fixed subset of a file's sentences, e.g. a
    development set carved out of a training file (CoNLL-2000 has none):

    - `<file>?held_out=<n>` reads every `n`-th sentence: those whose 0-based index `i` over the
      whole file (across `-DOCSTART-` documents) has `i % n == n - 1`;
    - `<file>?without_held_out=<n>` reads all the others, in order.

    `n` is an integer of at least 2; `=<n>:<j>` takes `i % n == j` instead (a fold).  The whole file is still read and checked, ids and `source`
    are the full file's, and the selection comes before segmenting and sharding.  Not available
    with `document_level`.  In a URL (`scheme://...`) only these two keys are taken.

    # Parameters

    token_indexers : `Dict[str, TokenIndexer]`, optional (default = `{"tokens": SingleIdTokenIndexer()}`)
    tag_column : `int`, optional (default = `-1`)
        Column holding the labels (negative counts from the end): 3 for CoNLL-2003 NER, 2 for its
        chunks, 1 for POS.
    feature_columns : `Dict[str, int]`, optional (default = `{}`)
        Further columns to keep as label fields, keyed by field (and vocabulary namespace) name.
    file_tag_scheme : `str`, optional (default = `"IOB1"`)
        The scheme of the tag column in the file: "IOB1" (original CoNLL-2003/2000), "BIO" (CoNLL-2002,
        WNUT-17) or "BIOUL" (BIOES spellings are accepted).  `None` reads plain labels (POS tags)
        without checking or converting them.
    tag_scheme : `str`, optional (default = `"BIOUL"`)
        The scheme the tags are converted to.  Ignored when `file_tag_scheme` is `None`.
    label_namespace : `str`, optional (default = `"labels"`)
    missing_tag : `str`, optional (default = `"-"`)
        The tag of a token the annotator left open (spaCy's `-`); `None`: no tag is.
    o_unconfirmed : `bool`, optional (default = `False`)
        The file's `O` tags are unconfirmed: read them as open too, so a file with some entities
        marked is partial as it is.
    open_weights : `str`, optional (default = `None`)
        A weights file of `allennlp cross-estimate`: each sentence it names (by sentence id) gets
        its tokens' tag probabilities as `open_weights` in its metadata, which weigh the open
        tokens' tags in the loss.
    document_level : `bool`, optional (default = `False`)
        Emit one instance per document instead of one per sentence.  Without any `-DOCSTART-` line a
        file is one document.
    delimiter : `str`, optional (default = `None`)
        Column separator; `None` splits on any run of whitespace.
    segment_length : `int`, optional (default = `None`)
        Cut sentences into overlapping segments of this many tokens (see above; 10 or 15 in
        Seq2Biseq).  `None` reads whole sentences.  Not available with `document_level`.
    """

    def __init__(
        self,
        token_indexers: Optional[Dict[str, TokenIndexer]] = None,
        tag_column: int = -1,
        feature_columns: Optional[Dict[str, int]] = None,
        file_tag_scheme: Optional[str] = "IOB1",
        tag_scheme: str = "BIOUL",
        label_namespace: str = "labels",
        missing_tag: Optional[str] = "-",
        o_unconfirmed: bool = False,
        open_weights: Optional[str] = None,
        document_level: bool = False,
        delimiter: Optional[str] = None,
        segment_length: Optional[int] = None,
        **kwargs,
    ) -> None:
        super().__init__(manual_distributed_sharding=True, manual_multiprocess_sharding=True, **kwargs)
        self._token_indexers = token_indexers or {"tokens": SingleIdTokenIndexer()}
        self.tag_column = tag_column
        self.feature_columns = dict(feature_columns or {})
        if "tokens" in self.feature_columns or "tags" in self.feature_columns:
            raise ConfigurationError("feature_columns may not be named 'tokens' or 'tags'")
        self.file_tag_scheme = None if file_tag_scheme is None else check_tag_scheme(file_tag_scheme)
        self.tag_scheme = check_tag_scheme(tag_scheme)
        self.label_namespace = label_namespace
        self.missing_tag = missing_tag
        self.o_unconfirmed = o_unconfirmed
        self.reads_partial = missing_tag is not None or o_unconfirmed  # whether a token may be open
        self.open_weights = open_weights
        self.document_level = document_level
        self.delimiter = delimiter
        if segment_length is not None:
            if isinstance(segment_length, bool) or not isinstance(segment_length, int) or segment_length < 1:
                raise ConfigurationError(f"segment_length must be a positive integer, not {segment_length!r}")
            if document_level:
                raise ConfigurationError("segment_length cuts sentences and cannot be used with document_level")
        self.segment_length = segment_length

    def _read(self, file_path: str) -> Iterable[Instance]:
        name, selection = parse_held_out_path(file_path)
        if selection is not None and self.document_level:
            raise ConfigurationError(
                f"{file_path}: '?{selection[0]}=' selects sentences and cannot be used with document_level"
            )
        path = cached_path(name)
        documents = self.read_documents(path, display_name=name)
        weights = {}
        if self.open_weights is not None:
            with open(cached_path(self.open_weights), encoding="utf-8") as lines:
                weights = {row["id"]: row["tags"] for row in map(json.loads, lines)}
        if self.document_level:
            for document_id, sentences in self.shard_iterable(documents):
                yield self._to_instance(document_id, sentences, weights)
            return
        units: Iterable = ((document_id, sentence) for document_id, sentences in documents for sentence in sentences)
        if selection is not None:
            units = select_held_out(units, *selection)
        for document_id, sentence in self.shard_iterable(units):
            if self.segment_length is None:
                yield self._to_instance(document_id, [sentence], weights)
            else:
                yield from self._segment_instances(document_id, sentence)

    def read_documents(
        self, path: str, display_name: Optional[str] = None
    ) -> Iterator[Tuple[str, List[Tuple[str, int, List[List[str]]]]]]:
        """
        Yields `(document_id, sentences)` with each sentence `(sentence_id, first_line, rows)`.
        Every line is checked; the first bad one raises `ColumnFormatError` naming file and line.
        """
        name = display_name or path
        stem = os.path.basename(name)
        num_columns: Optional[int] = None
        document_index = -1
        sentences: List[Tuple[str, int, List[List[str]]]] = []
        rows: List[List[str]] = []  # of the sentence being read
        first_line = 0

        def close_sentence():
            nonlocal rows
            if rows:
                try:
                    self.sentence_columns(rows)
                except PartialTagError as error:
                    raise ColumnFormatError(name, first_line + error.index, str(error)) from None
                sentence_id = f"{stem}:d{max(document_index, 0)}:s{len(sentences)}"
                sentences.append((sentence_id, first_line, rows))
                rows = []

        for line_number, stripped in decoded_lines(path, name):
            if not stripped.strip():
                close_sentence()
                continue
            columns = stripped.split(self.delimiter)
            if columns[0] == DOCSTART:
                close_sentence()
                if sentences:
                    yield f"{stem}:d{max(document_index, 0)}", sentences
                sentences = []
                document_index += 1
                continue
            if num_columns is None:
                num_columns = len(columns)
                self._check_columns(name, line_number, num_columns)
            elif len(columns) != num_columns:
                raise ColumnFormatError(
                    name,
                    line_number,
                    f"expected {num_columns} columns (as on the first token line) but found "
                    f"{len(columns)}: {stripped!r}",
                )
            if not rows:
                first_line = line_number
            rows.append(columns)
        close_sentence()
        if sentences:
            yield f"{stem}:d{max(document_index, 0)}", sentences
        if num_columns is None:
            raise ColumnFormatError(name, None, "the file holds no token lines")

    def _check_columns(self, name: str, line_number: int, num_columns: int) -> None:
        for field_name, column in [("tag_column", self.tag_column), *self.feature_columns.items()]:
            if not -num_columns <= column < num_columns:
                raise ColumnFormatError(
                    name,
                    line_number,
                    f"{field_name} is column {column} but the line has only {num_columns} columns",
                )
        if num_columns < 2:
            raise ColumnFormatError(name, line_number, "expected a word and at least one label column")

    def sentence_columns(self, rows: List[List[str]]) -> Tuple[List[str], List[Optional[str]], Dict[str, List[str]]]:
        """
        The words, the tags (in `tag_scheme`, `None` where open) and the feature columns of one
        sentence; `PartialTagError` at a tag that cannot be read.
        """
        words = [row[0] for row in rows]
        tags: List[Optional[str]] = [row[self.tag_column] for row in rows]
        # Converted sentence by sentence: entities never cross a sentence boundary.
        tags = partial_tags(tags, self.file_tag_scheme, self.tag_scheme, self.missing_tag, self.o_unconfirmed)
        features = {name: [row[column] for row in rows] for name, column in self.feature_columns.items()}
        return words, tags, features

    def _to_instance(self, document_id: str, sentences, weights: Dict[str, List]) -> Instance:
        words: List[str] = []
        tags: List[str] = []
        features: Dict[str, List[str]] = {name: [] for name in self.feature_columns}
        sentence_spans: List[Tuple[int, int]] = []
        for _, _, rows in sentences:
            sentence_words, sentence_tags, sentence_features = self.sentence_columns(rows)
            sentence_spans.append((len(words), len(words) + len(sentence_words)))
            words.extend(sentence_words)
            tags.extend(sentence_tags)
            for name, values in sentence_features.items():
                features[name].extend(values)
        first_id, first_line, _ = sentences[0]
        metadata = {
            "document_id": document_id,
            "sentence_ids": [sentence_id for sentence_id, _, _ in sentences],
            "sentence_spans": sentence_spans,
            "source": f"{_file_stem(first_id)}:{first_line}",
        }
        found = [weights.get(sentence_id) or [None] * len(rows) for sentence_id, _, rows in sentences]
        if any(any(sentence) for sentence in found):
            metadata["open_weights"] = [token for sentence in found for token in sentence]
        return self.text_to_instance(words, tags, features, metadata)

    def _segment_instances(self, document_id: str, sentence) -> Iterator[Instance]:
        """The overlapping `segment_length`-token windows of one sentence (or the whole sentence)."""
        assert self.segment_length is not None
        sentence_id, first_line, rows = sentence
        words, tags, features = self.sentence_columns(rows)
        length = min(self.segment_length, len(words))
        stem = _file_stem(sentence_id)
        for start in range(len(words) - length + 1):
            end = start + length
            metadata = {
                "document_id": document_id,
                "sentence_ids": [sentence_id],
                "sentence_spans": [(0, length)],
                # A sentence's token lines are consecutive, so token `k` is on line `first_line + k`.
                "source": f"{stem}:{first_line + start}",
                "segment_start": start,
            }
            yield self.text_to_instance(
                words[start:end],
                tags[start:end],
                {name: values[start:end] for name, values in features.items()},
                metadata,
            )

    def text_to_instance(  # type: ignore
        self,
        words: Sequence[str],
        tags: Optional[Sequence[str]] = None,
        features: Optional[Dict[str, Sequence[str]]] = None,
        metadata: Optional[Dict] = None,
    ) -> Instance:
        """
        Builds an instance from pre-tokenised words; `tags` are already in `tag_scheme`.  Predictors
        call it with words alone.
        """
        if not words:
            raise ConfigurationError("cannot build an instance from an empty token list")
        text_field = TextField([Token(word) for word in words])
        fields: Dict[str, Field] = {"tokens": text_field}
        for name, values in (features or {}).items():
            fields[name] = SequenceLabelField(list(values), text_field, label_namespace=name)
        full_metadata = {
            "words": list(words),
            "document_id": None,
            "sentence_ids": [None],
            "sentence_spans": [(0, len(words))],
        }
        if tags is not None and self.reads_partial:
            scheme = self.tag_scheme if self.file_tag_scheme is not None else None
            fields["tags"] = PartialTagsField(list(tags), text_field, self.label_namespace, scheme)
            full_metadata.update({"partial": True} if None in tags else {})
        elif tags is not None:
            fields["tags"] = SequenceLabelField(list(tags), text_field, self.label_namespace)
        full_metadata.update(metadata or {})
        fields["metadata"] = MetadataField(full_metadata)
        return Instance(fields)

    def apply_token_indexers(self, instance: Instance) -> None:
        instance["tokens"].token_indexers = self._token_indexers  # type: ignore
