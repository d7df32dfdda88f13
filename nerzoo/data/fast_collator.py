import itertools
from typing import Any, Dict, List, Optional, Sequence

import numpy
import torch
from allennlp.data import Batch, Instance
from allennlp.data.data_loaders.data_collator import DataCollator
from allennlp.data.fields import MetadataField, SequenceLabelField, TextField
from allennlp.data.token_indexers import SingleIdTokenIndexer

from nerzoo.data.token_indexers.fast_characters_indexer import FastCharactersIndexer
from nerzoo.data.token_indexers.lexical_features_indexer import FEATURE_NAMES, LexicalFeaturesIndexer
from nerzoo.data.token_indexers.word_and_characters_indexer import WordAndCharactersIndexer


@DataCollator.register("fast")
class FastCollator(DataCollator):
    """
    allennlp's `default` collation (`Batch(instances).as_tensor_dict()`) for the fields of tagging
    data, one padded array per tensor instead of one tensor per instance and field, then joined.

    On a GPU the host's tensorising, not the device, bounds prediction and small-batch training:
    `Batch` takes 25-45 µs a CoNLL-2003 sentence on a two-core EPYC, this a third to a fifth of
    that (docs/RESULTS.md, speed).  The same tensors (values, dtypes, shapes,
    padding) for `TextField`s whose indexers are `single_id`, `fast_characters`,
    `lexical_features` or `word_and_characters`, `SequenceLabelField`s and `MetadataField`s; a
    batch with any other field, or instances that differ in their fields, goes through `Batch` as
    before.  The instances must be indexed, as a data loader's are.  A `MetadataField`'s values come as
    a `BatchMetadata` (equal to `Batch`'s list), which allennlp's `move_to_device` does not walk.

    Registered as a `DataCollator` with name "fast": `data_loader: {collate_fn: {type: "fast"}}`.
    """

    def __call__(self, instances: List[Instance]) -> Dict[str, object]:
        tensors = collate(instances)
        return tensors if tensors is not None else Batch(instances).as_tensor_dict()


class BatchMetadata(Sequence):
    """
    A batch's `MetadataField` values, in instance order: a sequence equal to the list `Batch` gives.
    allennlp's `nn.util.move_to_device`, which the trainer and `evaluate` call on every batch, walks
    lists and dicts item by item: a call per word of the metadata, about 800 for 32 CoNLL-2003
    sentences (9-10 us a sentence on a two-core EPYC; docs/RESULTS.md, speed).  It
    passes this through whole.
    """

    __slots__ = ("_values",)

    def __init__(self, values: List[Any]) -> None:
        self._values = values

    def __getitem__(self, index):
        return self._values[index]

    def __len__(self) -> int:
        return len(self._values)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (BatchMetadata, list)):
            return list(self._values) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"BatchMetadata({self._values!r})"


def collate(instances: Sequence[Instance]) -> Optional[Dict[str, object]]:
    """The batch's tensors, or `None` when a field is not one of those handled here."""
    if not instances:
        return None
    first = instances[0].fields
    if any(instance.fields.keys() != first.keys() for instance in instances):
        return None
    tensors: Dict[str, object] = {}
    for name, field in first.items():
        fields = [instance.fields[name] for instance in instances]
        kind = type(field)
        if any(type(other) is not kind for other in fields):
            return None
        if kind is MetadataField:
            tensors[name] = BatchMetadata([other.metadata for other in fields])
        elif kind is SequenceLabelField:
            labels = [other._indexed_labels for other in fields]
            width = max(other.sequence_field.sequence_length() for other in fields)
            if any(values is None or len(values) > width for values in labels):
                return None  # not indexed, or more labels than tokens: Batch's own handling
            tensors[name] = torch.from_numpy(_padded_rows(labels, width))
        elif kind is TextField:
            text = _text_tensors(fields)
            if text is None:
                return None
            tensors[name] = text
        else:
            return None
    return tensors


def _text_tensors(fields: List[TextField]) -> Optional[Dict[str, Dict[str, torch.Tensor]]]:
    indexers = fields[0]._token_indexers
    if indexers is None or any(other._token_indexers != indexers for other in fields):
        return None  # allennlp's Batch raises its own error for fields without indexers
    if any(other._indexed_tokens is None for other in fields):
        return None
    tensors: Dict[str, Dict[str, torch.Tensor]] = {}
    for indexer_name, indexer in indexers.items():
        indexed = [other._indexed_tokens[indexer_name] for other in fields]
        minimum = indexer._token_min_padding_length
        if type(indexer) is SingleIdTokenIndexer:
            key, padded = "tokens", _padded_rows([item["tokens"] for item in indexed], minimum)
        elif type(indexer) is FastCharactersIndexer:
            words = [item["token_characters"] for item in indexed]
            key, padded = "token_characters", _padded_tokens(words, minimum, indexer._min_padding_length)
        elif type(indexer) is LexicalFeaturesIndexer:
            features = [item["features"] for item in indexed]
            key, padded = "features", _padded_tokens(features, minimum, len(FEATURE_NAMES))
        elif type(indexer) is WordAndCharactersIndexer:
            words = [item["token_characters"] for item in indexed]
            width = indexer._character_indexer._min_padding_length
            tensors[indexer_name] = {
                "token_ids": torch.from_numpy(_padded_rows([item["token_ids"] for item in indexed], minimum)),
                "token_characters": torch.from_numpy(_padded_tokens(words, minimum, width)),
            }
            continue
        else:
            return None
        tensors[indexer_name] = {key: torch.from_numpy(padded)}
    return tensors


def _padded_tokens(sentences: List[List[List[int]]], min_tokens: int, min_width: int) -> numpy.ndarray:
    """
    `(batch_size, num_tokens, width)`: each token's ids (characters, features) then zeros, as the
    `fast_characters` and `lexical_features` indexers pad one instance.
    """
    rows = _padded_rows(list(itertools.chain.from_iterable(sentences)), min_width)
    counts = numpy.fromiter((len(tokens) for tokens in sentences), dtype=numpy.int64, count=len(sentences))
    num_tokens = max(int(counts.max()), min_tokens)
    padded = numpy.zeros((len(sentences), num_tokens, rows.shape[1]), dtype=numpy.int64)
    padded[numpy.arange(num_tokens) < counts[:, None]] = rows
    return padded


def _padded_rows(rows: List[List[int]], min_width: int) -> numpy.ndarray:
    """`(len(rows), width)` int64, each row's values then zeros; `width`: the longest row, at least `min_width`."""
    lengths = numpy.fromiter((len(row) for row in rows), dtype=numpy.int64, count=len(rows))
    width = max(int(lengths.max(initial=0)), min_width)
    padded = numpy.zeros((len(rows), width), dtype=numpy.int64)
    values = numpy.fromiter(itertools.chain.from_iterable(rows), dtype=numpy.int64, count=int(lengths.sum()))
    padded[numpy.arange(width) < lengths[:, None]] = values
    return padded
