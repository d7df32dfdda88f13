"""
Partial annotation (docs/partial.md): a sentence's tags with `None` at the tokens the annotator
left open (a `missing_tag`, or an unconfirmed `O`), each marked stretch converted on its own.
"""

from itertools import groupby
from typing import Any, Dict, List, Optional, Sequence

from allennlp.common.checks import ConfigurationError
from allennlp.data import Vocabulary
from allennlp.data.fields import SequenceField, SequenceLabelField
from nerzoo_runtime.tag_scheme import convert_tags, invalid_tag_reason, split_tag

OPEN = -1  # the tag id of an open token in a `PartialTagsField`'s tensor
# The prefixes a type's tags take in each scheme.
SCHEME_PREFIXES = {"IOB1": "BI", "BIO": "BI", "BIOUL": "BILU"}


def is_partial(metadata: Optional[List[Dict[str, Any]]]) -> bool:
    """Whether an instance of a batch leaves a token open (its reader marks it `partial`)."""
    return any(instance.get("partial") for instance in metadata or [])


class PartialTagError(ValueError):
    """A tag that cannot be read; `index` is its token's position in the sentence."""

    def __init__(self, index: int, message: str) -> None:
        super().__init__(message)
        self.index = index


def partial_tags(
    tags: Sequence[str],
    file_scheme: Optional[str],
    scheme: Optional[str],
    missing_tag: Optional[str] = "-",
    o_unconfirmed: bool = False,
) -> List[Optional[str]]:
    """
    The tags of one sentence in `scheme`, `None` where the annotator left the token open.  With
    `file_scheme` `None` the tags are plain labels (POS), read as they are.  Raises
    `PartialTagError` at a tag outside `file_scheme`, and where a marked span is cut by an open
    token: in BIOUL a `B-`/`I-` before one or an `I-`/`L-` after one; in BIO and IOB1 a missing
    marker between `B-X`/`I-X` and `I-X`.
    """
    is_open = [tag == missing_tag or (o_unconfirmed and tag == "O") for tag in tags]
    if file_scheme is None:
        return [None if closed_off else tag for tag, closed_off in zip(tags, is_open)]
    for index, tag in enumerate(tags):
        reason = None if is_open[index] else invalid_tag_reason(tag, file_scheme)
        if reason is not None:
            raise PartialTagError(index, reason)
    prefixes = [None if closed_off else split_tag(tag)[0] for tag, closed_off in zip(tags, is_open)]
    for index in range(1, len(tags)):
        previous, prefix = prefixes[index - 1], prefixes[index]
        if file_scheme == "BIOUL":
            cut = (prefix is None and previous in ("B", "I")) or (previous is None and prefix in ("I", "L"))
        else:
            cut = prefix == "I" and tags[index - 1] == missing_tag and _inside(tags, prefixes, index)
        if cut:
            raise PartialTagError(index, f"a marked span is cut by a token left open ({tags[index]!r})")
    converted: List[Optional[str]] = []
    for closed_off, run in groupby(range(len(tags)), key=is_open.__getitem__):
        stretch = [tags[index] for index in run]
        converted += [None] * len(stretch) if closed_off else convert_tags(stretch, scheme) if scheme else stretch
    return converted


def _inside(tags: Sequence[str], prefixes: List[Optional[str]], index: int) -> bool:
    """Whether the last marked tag before `index` is a `B-X` or `I-X` of the type of `tags[index]`."""
    before = next((k for k in range(index - 1, -1, -1) if prefixes[k] is not None), None)
    return (
        before is not None
        and prefixes[before] in ("B", "I")
        and split_tag(tags[before])[1] == split_tag(tags[index])[1]
    )


class PartialTagsField(SequenceLabelField):
    """
    A `SequenceLabelField` whose labels may be `None` (an open token), indexed as `OPEN` (-1).  A
    sentence without open tokens counts and indexes as a `SequenceLabelField`.  A sentence with some
    also counts `O` and every tag of `tag_scheme` of each type counted so far, once each where the
    vocabulary has not seen them: an open token may take any of them (plain labels: those seen).

    # Parameters

    labels : `List[Optional[str]]`
    sequence_field : `SequenceField`
    label_namespace : `str`, optional (default = `"labels"`)
    tag_scheme : `str`, optional (default = `None`)
        The labels' scheme ("IOB1", "BIO", "BIOUL"), or `None` for plain labels.
    """

    __slots__ = ["tag_scheme"]

    def __init__(
        self,
        labels: List[Optional[str]],
        sequence_field: SequenceField,
        label_namespace: str = "labels",
        tag_scheme: Optional[str] = None,
    ) -> None:
        if not all(label is None or isinstance(label, str) for label in labels):
            raise ConfigurationError(f"partial tags are strings or None, got {labels!r}")
        super().__init__([label or "" for label in labels], sequence_field, label_namespace)
        self.labels = list(labels)
        self.tag_scheme = tag_scheme

    def count_vocab_items(self, counter: Dict[str, Dict[str, int]]) -> None:
        known = [label for label in self.labels if label is not None]
        for label in known:
            counter[self._label_namespace][label] += 1
        if len(known) == len(self.labels) or self.tag_scheme is None:
            return
        types = {split_tag(label)[1] for label in set(counter[self._label_namespace]) | set(known)} - {None}
        implied = {"O"} | {f"{prefix}-{label}" for label in types for prefix in SCHEME_PREFIXES[self.tag_scheme]}
        for label in sorted(implied):
            if counter[self._label_namespace][label] == 0:
                counter[self._label_namespace][label] = 1

    def index(self, vocab: Vocabulary) -> None:
        self._indexed_labels = [
            OPEN if label is None else vocab.get_token_index(label, self._label_namespace) for label in self.labels
        ]

    def empty_field(self) -> "PartialTagsField":
        field = PartialTagsField([], self.sequence_field.empty_field(), self._label_namespace, self.tag_scheme)
        field._indexed_labels = []
        return field

    def human_readable_repr(self) -> List[Optional[str]]:
        return self.labels
