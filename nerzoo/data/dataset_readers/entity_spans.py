import json
from itertools import groupby
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import torch
from allennlp.common.checks import ConfigurationError
from allennlp.common.file_utils import cached_path
from allennlp.data.dataset_readers.dataset_reader import DatasetReader
from allennlp.data.fields import AdjacencyField, Field, MetadataField, TextField
from allennlp.data.instance import Instance
from allennlp.data.token_indexers import SingleIdTokenIndexer, TokenIndexer
from allennlp.data.tokenizers import Token
from nerzoo_runtime.tag_scheme import tags_to_spans

from nerzoo.data.dataset_readers.conll_columns import ColumnFormatError, ConllColumnsReader
from nerzoo.data.json_lines import is_int, json_object, numbered_lines, type_name

FILE_FORMATS = ("conll", "jsonl")
# Value of the `entities` matrix wherever no entity starts and ends (and in the padding of a batch).
NO_ENTITY = -1
# Its value at the fragments a partially annotated sentence leaves open (and in that sentence's padding).
UNKNOWN_ENTITY = -2
# The `ConllColumnsReader` options that `conll` may set (an instance is one sentence without feature fields).
CONLL_OPTIONS = ("tag_column", "file_tag_scheme", "tag_scheme", "delimiter", "missing_tag", "o_unconfirmed")
NO_SOURCE = "<input>"

_ENTITY_KEYS = {"start", "end", "type"}
# One gold entity: token offsets `start`, `end` (end exclusive) and its type.
EntitySpan = Tuple[int, int, str]


class EntitySpansFormatError(ColumnFormatError):
    """
    Malformed entity-span input; the message reads `"path:line: problem"` (just `"path: problem"`
    when no line applies, `"<input>: problem"` for `text_to_instance` input without a `source`).
    """

    def __init__(self, where: str, message: str, line: Optional[int] = None) -> None:
        super().__init__(where, line, message)


def _check_words(words: Any, where: str) -> List[str]:
    if words is None:
        raise EntitySpansFormatError(where, "missing 'tokens'")
    if isinstance(words, str) or not isinstance(words, (list, tuple)):
        raise EntitySpansFormatError(where, f"'tokens' must be a list of strings, got {type_name(words)}")
    if not words:
        raise EntitySpansFormatError(where, "'tokens' is empty")
    for position, word in enumerate(words):
        if not isinstance(word, str):
            raise EntitySpansFormatError(where, f"tokens[{position}] must be a string, got {type_name(word)} {word!r}")
        if not word.strip():
            raise EntitySpansFormatError(where, f"tokens[{position}] is empty or only whitespace: {word!r}")
    return list(words)


def _entity_parts(entity: Any, where: str, position: int) -> Tuple[Any, Any, Any]:
    """`(start, end, type)` of a `[start, end, type]` list or a `{"start", "end", "type"}` object."""
    if isinstance(entity, dict):
        keys = set(entity)
        if keys != _ENTITY_KEYS:
            missing = sorted(_ENTITY_KEYS - keys)
            unknown = sorted(keys - _ENTITY_KEYS)
            problems = [f"missing {missing}"] if missing else []
            problems += [f"unknown keys {unknown}"] if unknown else []
            raise EntitySpansFormatError(
                where,
                f"entities[{position}] {json.dumps(entity, default=repr)} must have exactly the keys "
                f"'start', 'end' and 'type' ({'; '.join(problems)})",
            )
        return entity["start"], entity["end"], entity["type"]
    if isinstance(entity, (list, tuple)) and len(entity) == 3:
        return entity[0], entity[1], entity[2]
    raise EntitySpansFormatError(
        where,
        f'entities[{position}] must be [start, end, type] or {{"start": .., "end": .., "type": ..}}, got {entity!r}',
    )


def _check_entities(entities: Any, num_tokens: int, where: str) -> List[EntitySpan]:
    if isinstance(entities, (str, dict)) or not isinstance(entities, (list, tuple)):
        raise EntitySpansFormatError(where, f"'entities' must be a list of entities, got {type_name(entities)}")
    checked: List[EntitySpan] = []
    first_seen: Dict[Tuple[int, int], int] = {}
    for position, entity in enumerate(entities):
        start, end, label = _entity_parts(entity, where, position)
        shown = f"entities[{position}] [{start!r}, {end!r}, {label!r}]"
        if not is_int(start) or not is_int(end):
            raise EntitySpansFormatError(where, f"{shown}: start and end must be integers")
        if not isinstance(label, str):
            raise EntitySpansFormatError(where, f"{shown}: the type must be a string, got {type_name(label)}")
        if not label.strip():
            raise EntitySpansFormatError(where, f"{shown}: the type is empty")
        if start >= end:
            raise EntitySpansFormatError(where, f"{shown}: start must be less than end (offsets are end-exclusive)")
        if start < 0 or end > num_tokens:
            raise EntitySpansFormatError(
                where,
                f"{shown}: out of range for a sentence of {num_tokens} tokens (0 <= start < end <= {num_tokens})",
            )
        if (start, end) in first_seen:
            raise EntitySpansFormatError(
                where,
                f"{shown}: the span ({start}, {end}) is already entities[{first_seen[(start, end)]}]; "
                "a span may have only one type",
            )
        first_seen[(start, end)] = position
        checked.append((start, end, label))
    return checked


def _check_empty(empty: Any, entities: List[EntitySpan], num_tokens: int, where: str) -> List[Tuple[int, int]]:
    if not isinstance(empty, (list, tuple)):
        raise EntitySpansFormatError(where, f"'empty' must be a list of [start, end] stretches, got {type_name(empty)}")
    for position, stretch in enumerate(empty):
        shown = f"empty[{position}] {stretch!r}"
        if not isinstance(stretch, (list, tuple)) or len(stretch) != 2 or not all(map(is_int, stretch)):
            raise EntitySpansFormatError(where, f"{shown} must be [start, end] with integer offsets")
        start, end = stretch
        if not 0 <= start < end <= num_tokens:
            raise EntitySpansFormatError(where, f"{shown}: out of range (0 <= start < end <= {num_tokens})")
        clash = next((entity for entity in entities if entity[0] < end and start < entity[1]), None)
        if clash is not None:
            raise EntitySpansFormatError(where, f"{shown} overlaps the entity {list(clash)}")
    return [(start, end) for start, end in empty]


class EntitiesField(AdjacencyField):
    """
    An `AdjacencyField` of a sentence's `(start, end, type)` entities, `NO_ENTITY` elsewhere; in a
    sentence annotated in part (`empty` not `None`) `UNKNOWN_ENTITY` elsewhere but at the fragments
    inside its `empty` stretches (`(start, end)`, end exclusive).  One class for both: a batch
    holds one class per field.
    """

    __slots__ = ["empty"]

    def __init__(
        self,
        entities: List[EntitySpan],
        tokens: TextField,
        label_namespace: str,
        empty: Optional[List[Tuple[int, int]]],
    ) -> None:
        indices, labels = [(start, end - 1) for start, end, _ in entities], [label for _, _, label in entities]
        padding_value = NO_ENTITY if empty is None else UNKNOWN_ENTITY
        super().__init__(indices, tokens, labels, label_namespace, padding_value)
        self.empty = empty or []

    def as_tensor(self, padding_lengths: Dict[str, int]) -> torch.Tensor:
        tensor = super().as_tensor(padding_lengths)
        for start, end in self.empty:
            firsts, lasts = torch.triu_indices(end - start, end - start)
            tensor[firsts + start, lasts + start] = NO_ENTITY
        return tensor


@DatasetReader.register("entity_spans")
class EntitySpansReader(DatasetReader):
    """
    Reads sentences annotated with entity spans that may nest or overlap, for span-based NER
    models such as FOFE-NER (Mingbin Xu, "Fixed-size Ordinally-Forgetting Encoding and Its
    Applications", MSc thesis, York University, 2017, section 5), which classify candidate spans of
    a sentence instead of tagging its tokens, so that "University of Toronto" can be an ORG while
    its "Toronto" is a LOC.

    Registered as a `DatasetReader` with name "entity_spans".

    Two input formats:

    - `"jsonl"`: JSON lines, UTF-8, one sentence per line (blank lines are skipped):

          {"tokens": ["The", "University", "of", "Toronto", "won"],
           "entities": [[1, 4, "ORG"], [3, 4, "LOC"]], "id": "s1"}

      (on one line in the file).

      `tokens` is a non-empty list of non-empty strings.  Each entity is `[start, end, type]` or
      `{"start": 1, "end": 4, "type": "ORG"}`, with token offsets, `end` exclusive
      (`0 <= start < end <= len(tokens)`) and a non-empty type.  Entities may nest or overlap, but
      no two may share both start and end (a span has one type).  `entities` may be `[]` (a
      sentence without entities); absent or `null` it marks an unlabelled sentence (prediction
      input).  `id` (a string) is optional; other keys are ignored.

      A sentence annotated in part says `"complete": false` (default `true`: every fragment
      that is not an entity is known not to be one): its tokens outside the listed entities are
      unknown but for the stretches of `"empty": [[start, end], ...]` (end exclusive, default
      `[]`), whose tokens are known to lie outside every entity.  A stretch may not overlap an
      entity; `empty` needs `"complete": false`.
    - `"conll"`: the column files of `ConllColumnsReader` (CoNLL-2003 and the like), which parses
      them (with the same checks and error messages); `conll` holds its options.  The entities
      are the spans of each sentence's tag column, decoded as `conlleval` does
      (`nerzoo_runtime.tag_scheme.tags_to_spans`), so they never nest.  Each sentence is an instance.
      A sentence with open tokens (`missing_tag`, or `O` with `o_unconfirmed`) is not complete;
      its empty stretches are the maximal runs of marked `O` tokens.

    The first problem in a file raises `EntitySpansFormatError` (a `ConfigurationError`) with a
    message `"path:line: ..."`; CoNLL files raise `ColumnFormatError` in the same form.

    Each sentence of T tokens is an instance with the fields

    - `tokens` : `TextField` of the words;
    - `entities` (labelled sentences only) : `EntitiesField`, an `AdjacencyField` over `tokens`
      with an edge `(start, end - 1)` labelled with each entity's type (in `label_namespace`): a float `(T, T)`
      matrix of `-1` but for the type id at `[start, end - 1]` of each entity.  AllenNLP does not
      batch labelled sentences together with unlabelled ones.  In a sentence that is not complete
      the matrix is `-2` but at its entities and at the fragments inside its empty stretches (`-1`);
    - `metadata` : `words`, `entities` (labelled sentences only: the gold `(start, end, type)`
      tuples, end exclusive, in file order), `source` (`path:line` of the sentence; `None` for
      `text_to_instance` input), `id` (when the line gives one; the sentence id, e.g.
      `"train.txt:d0:s3"`, for CoNLL input), `partial` (true) and `empty` (the stretches) for a
      sentence that is not complete, and whatever else `text_to_instance` is given.

    # Parameters

    token_indexers : `Dict[str, TokenIndexer]`, optional (default = `{"tokens": SingleIdTokenIndexer()}`)
    file_format : `str`, optional (default = `"conll"`)
        `"conll"` or `"jsonl"`, as above.
    conll : `Dict[str, Any]`, optional (default = `None`)
        Options of the `ConllColumnsReader` that parses `"conll"` files, e.g.
        `{"tag_column": 3, "file_tag_scheme": "IOB1"}` for CoNLL-2003; only `tag_column`,
        `file_tag_scheme` (not `None`: entities need chunk tags), `tag_scheme`, `delimiter`,
        `missing_tag` and `o_unconfirmed` are accepted.  Not allowed with `"jsonl"`.
    label_namespace : `str`, optional (default = `"labels"`)
        Vocabulary namespace of the entity types.
    """

    def __init__(
        self,
        token_indexers: Optional[Dict[str, TokenIndexer]] = None,
        file_format: str = "conll",
        conll: Optional[Dict[str, Any]] = None,
        label_namespace: str = "labels",
        **kwargs,
    ) -> None:
        super().__init__(manual_distributed_sharding=True, manual_multiprocess_sharding=True, **kwargs)
        if file_format not in FILE_FORMATS:
            raise ConfigurationError(
                f"file_format must be one of {', '.join(map(repr, FILE_FORMATS))}, not {file_format!r}"
            )
        self._token_indexers = token_indexers or {"tokens": SingleIdTokenIndexer()}
        self.file_format = file_format
        self.label_namespace = label_namespace
        self._conll_reader: Optional[ConllColumnsReader] = None
        if file_format == "conll":
            self._conll_reader = self._make_conll_reader(dict(conll or {}))
        elif conll:
            raise ConfigurationError("'conll' options apply only to file_format 'conll', not 'jsonl'")

    @staticmethod
    def _make_conll_reader(options: Dict[str, Any]) -> ConllColumnsReader:
        unknown = sorted(set(options) - set(CONLL_OPTIONS))
        if unknown:
            raise ConfigurationError(
                f"unsupported 'conll' option(s) {unknown}; entity_spans accepts only {list(CONLL_OPTIONS)} "
                "(token_indexers and label_namespace are options of entity_spans itself)"
            )
        if "file_tag_scheme" in options and options["file_tag_scheme"] is None:
            raise ConfigurationError("'conll': file_tag_scheme may not be None: entity spans are read from chunk tags")
        try:
            return ConllColumnsReader(**options)
        except (TypeError, ValueError) as error:
            raise ConfigurationError(f"invalid 'conll' options {options}: {error}") from None

    def _read(self, file_path: str) -> Iterable[Instance]:
        name = str(file_path)
        path = cached_path(file_path)
        if self.file_format == "jsonl":
            lines = numbered_lines(
                path, lambda line, message: EntitySpansFormatError(name, message, line), "the file holds no sentences"
            )
            for line_number, line in self.shard_iterable(lines):
                where = f"{name}:{line_number}"
                sentence, sentence_id = json_object(line, where, EntitySpansFormatError, "'tokens'", "id")
                metadata: Dict[str, Any] = {"source": where}
                if sentence_id is not None:
                    metadata["id"] = sentence_id
                partial = sentence.get("complete", True), sentence.get("empty", [])
                yield self.text_to_instance(sentence.get("tokens"), sentence.get("entities"), metadata, *partial)
        else:
            yield from self._read_conll(path, name)

    def _read_conll(self, path: str, name: str) -> Iterator[Instance]:
        reader = self._conll_reader
        assert reader is not None
        sentences = (
            sentence for _, document in reader.read_documents(path, display_name=name) for sentence in document
        )
        for sentence_id, first_line, rows in self.shard_iterable(sentences):
            # `read_documents` checked the tags; each stretch of marked tags is whole in `tag_scheme`.
            words, tags, _ = reader.sentence_columns(rows)
            entities = [(start, end, label) for label, start, end in tags_to_spans([tag or "O" for tag in tags])]
            complete, empty, position = None not in tags, [], 0
            for is_o, run in groupby(tags, key=lambda tag: tag == "O"):
                length = len(list(run))
                empty += [(position, position + length)] if is_o and not complete else []
                position += length
            metadata = {"source": f"{name}:{first_line}", "id": sentence_id}
            yield self.text_to_instance(words, entities, metadata, complete, empty)

    def text_to_instance(  # type: ignore
        self,
        words: Sequence[str],
        entities: Optional[Sequence[Tuple[int, int, str]]] = None,
        metadata: Optional[Dict] = None,
        complete: Any = True,
        empty: Any = (),
    ) -> Instance:
        """
        Builds the instance of one pre-tokenised sentence; `entities` are `(start, end, type)` with
        `end` exclusive (`None` for an unlabelled sentence, `[]` for one without entities), and
        `complete`, `empty` as in the JSON lines.  Predictors call it with words alone.  Entries of
        `metadata` are added to (or override) the instance metadata; its `source`, when given,
        prefixes validation errors.
        """
        extra = dict(metadata or {})
        where = extra.get("source") or NO_SOURCE
        checked_words = _check_words(words, where)
        checked_entities = None if entities is None else _check_entities(entities, len(checked_words), where)
        if not isinstance(complete, bool):
            raise EntitySpansFormatError(where, f"'complete' must be true or false, got {complete!r}")
        if complete and empty:
            raise EntitySpansFormatError(where, "'empty' needs \"complete\": false")
        text_field = TextField([Token(word) for word in checked_words])
        fields: Dict[str, Field] = {"tokens": text_field}
        full_metadata: Dict[str, Any] = {"words": checked_words, "source": None}
        if checked_entities is not None:
            checked_empty = None if complete else _check_empty(empty, checked_entities, len(checked_words), where)
            fields["entities"] = EntitiesField(checked_entities, text_field, self.label_namespace, checked_empty)
            full_metadata["entities"] = checked_entities
            full_metadata.update({} if complete else {"partial": True, "empty": checked_empty})
        full_metadata.update(extra)
        fields["metadata"] = MetadataField(full_metadata)
        return Instance(fields)

    def apply_token_indexers(self, instance: Instance) -> None:
        instance["tokens"].token_indexers = self._token_indexers  # type: ignore
