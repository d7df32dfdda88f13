import os
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from allennlp.common.checks import ConfigurationError
from allennlp.common.file_utils import cached_path
from allennlp.data.dataset_readers.dataset_reader import DatasetReader
from allennlp.data.fields import Field, MetadataField, SequenceLabelField, TextField
from allennlp.data.instance import Instance
from allennlp.data.token_indexers import SingleIdTokenIndexer, TokenIndexer
from allennlp.data.tokenizers import Token

from nerzoo.data.tag_schemes import check_tag_scheme, convert_tags, invalid_tag_reason

DOCSTART = "-DOCSTART-"


class ColumnFormatError(ConfigurationError):
    """Malformed column file; the message names the file and line."""

    def __init__(self, path: str, line: Optional[int], message: str) -> None:
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {message}")


@DatasetReader.register("conll_columns")
class ConllColumnsReader(DatasetReader):
    """
    Reads CoNLL-style column files: one token a line, columns separated by whitespace (or by
    `delimiter`), a blank line between sentences, and optional `-DOCSTART-` lines opening documents.
    The same reader covers CoNLL-2003 (`word POS chunk NER`), CoNLL-2000 (`word POS chunk`),
    CoNLL-2002 (`word [POS] NER`) and WNUT-17 (`word<TAB>tag`).

    Registered as a `DatasetReader` with name "conll_columns".

    Each instance is a sentence, or with `document_level` a whole document (all its sentences
    concatenated; their boundaries are kept in the metadata, for models with document memory such as
    ME-CRF).  Instances have the fields

    - `tokens` : `TextField` of the words;
    - `tags` : `SequenceLabelField` of the tag column, in namespace `label_namespace`, when present;
    - one `SequenceLabelField` per entry of `feature_columns` (e.g. `{"pos_tags": 1}`), in a namespace
      of the same name;
    - `metadata` : `words`, `document_id`, `sentence_ids`, `sentence_spans` (token offsets
      `(start, end)` of each sentence, end exclusive), `source` (`path:line` of the first token).

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
    document_level : `bool`, optional (default = `False`)
        Emit one instance per document instead of one per sentence.  Without any `-DOCSTART-` line a
        file is one document.
    delimiter : `str`, optional (default = `None`)
        Column separator; `None` splits on any run of whitespace.
    """

    def __init__(
        self,
        token_indexers: Optional[Dict[str, TokenIndexer]] = None,
        tag_column: int = -1,
        feature_columns: Optional[Dict[str, int]] = None,
        file_tag_scheme: Optional[str] = "IOB1",
        tag_scheme: str = "BIOUL",
        label_namespace: str = "labels",
        document_level: bool = False,
        delimiter: Optional[str] = None,
        **kwargs,
    ) -> None:
        super().__init__(
            manual_distributed_sharding=True, manual_multiprocess_sharding=True, **kwargs
        )
        self._token_indexers = token_indexers or {"tokens": SingleIdTokenIndexer()}
        self.tag_column = tag_column
        self.feature_columns = dict(feature_columns or {})
        if "tokens" in self.feature_columns or "tags" in self.feature_columns:
            raise ConfigurationError("feature_columns may not be named 'tokens' or 'tags'")
        self.file_tag_scheme = None if file_tag_scheme is None else check_tag_scheme(file_tag_scheme)
        self.tag_scheme = check_tag_scheme(tag_scheme)
        self.label_namespace = label_namespace
        self.document_level = document_level
        self.delimiter = delimiter

    # ----------------------------------------------------------------------------------------------
    # Parsing

    def _read(self, file_path: str) -> Iterable[Instance]:
        path = cached_path(file_path)
        documents = self.read_documents(path, display_name=str(file_path))
        units: Iterable = documents
        if not self.document_level:
            units = ((document_id, [sentence]) for document_id, sentences in documents for sentence in sentences)
        for document_id, sentences in self.shard_iterable(units):
            yield self._to_instance(document_id, sentences)

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
        any_token = False

        def close_sentence():
            nonlocal rows
            if rows:
                sentence_id = f"{stem}:d{max(document_index, 0)}:s{len(sentences)}"
                sentences.append((sentence_id, first_line, rows))
                rows = []

        with open(path, "rb") as handle:
            for line_number, raw_line in enumerate(handle, start=1):
                try:
                    line = raw_line.decode("utf-8")
                except UnicodeDecodeError as error:
                    raise ColumnFormatError(name, line_number, f"not valid UTF-8 ({error.reason})") from None
                stripped = line.rstrip("\r\n")
                if not stripped.strip():
                    close_sentence()
                    continue
                columns = (
                    stripped.split(self.delimiter)
                    if self.delimiter is not None
                    else stripped.split()
                )
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
                if self.file_tag_scheme is not None:
                    reason = invalid_tag_reason(columns[self.tag_column], self.file_tag_scheme)
                    if reason is not None:
                        raise ColumnFormatError(name, line_number, reason)
                if not rows:
                    first_line = line_number
                rows.append(columns)
                any_token = True
        close_sentence()
        if sentences:
            yield f"{stem}:d{max(document_index, 0)}", sentences
        if not any_token:
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

    def _to_instance(self, document_id: str, sentences) -> Instance:
        words: List[str] = []
        tags: List[str] = []
        features: Dict[str, List[str]] = {name: [] for name in self.feature_columns}
        sentence_spans: List[Tuple[int, int]] = []
        for _, _, rows in sentences:
            start = len(words)
            words.extend(row[0] for row in rows)
            sentence_tags = [row[self.tag_column] for row in rows]
            if self.file_tag_scheme is not None:
                # Convert sentence by sentence: entities never cross a sentence boundary.
                sentence_tags = convert_tags(sentence_tags, self.tag_scheme)
            tags.extend(sentence_tags)
            for name, column in self.feature_columns.items():
                features[name].extend(row[column] for row in rows)
            sentence_spans.append((start, len(words)))
        first_id, first_line, _ = sentences[0]
        metadata = {
            "document_id": document_id,
            "sentence_ids": [sentence_id for sentence_id, _, _ in sentences],
            "sentence_spans": sentence_spans,
            "source": f"{first_id.split(':')[0]}:{first_line}",
        }
        return self.text_to_instance(words, tags, features, metadata)

    # ----------------------------------------------------------------------------------------------
    # Instances

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
        if tags is not None:
            fields["tags"] = SequenceLabelField(list(tags), text_field, self.label_namespace)
        full_metadata = {
            "words": list(words),
            "document_id": None,
            "sentence_ids": [None],
            "sentence_spans": [(0, len(words))],
        }
        full_metadata.update(metadata or {})
        fields["metadata"] = MetadataField(full_metadata)
        return Instance(fields)

    def apply_token_indexers(self, instance: Instance) -> None:
        instance["tokens"].token_indexers = self._token_indexers  # type: ignore
