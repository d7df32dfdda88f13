"""
Chunk tag schemes (IOB1, BIO, BIOUL) and one span decoder for all of them, with the chunk rules of
the CoNLL `conlleval` script (and `seqeval`'s default): `B-X` always opens a chunk, `I-X` after `O`
or another type opens one, `L-`/`E-` and `U-`/`S-` close one.  Converting a scheme decodes spans and
re-encodes them, so it never invents or drops an entity.
"""

import re
from typing import List, Optional, Sequence, Tuple

TAG_SCHEMES = ("IOB1", "BIO", "BIOUL")

# A typed span: (label, start, end) with `end` exclusive.
TypedSpan = Tuple[str, int, int]

_PREFIXES = {"IOB1": "BIO", "BIO": "BIO", "BIOUL": "BIOULES"}
_TAG_PATTERN = re.compile(r"^([A-Z])-(.+)$")
# BIOES spellings accepted on input.
_CANONICAL_PREFIX = {"E": "L", "S": "U"}


def check_tag_scheme(scheme: str) -> str:
    if scheme not in TAG_SCHEMES:
        raise ValueError(f"unknown tag scheme {scheme!r}; expected one of {', '.join(TAG_SCHEMES)}")
    return scheme


def split_tag(tag: str) -> Tuple[str, Optional[str]]:
    """
    `'B-PER'` -> `('B', 'PER')`; `'O'` -> `('O', None)`; a tag of no scheme (no `X-` prefix) ->
    `('', None)`, which `invalid_tag_reason` refuses and `tags_to_spans` reads as `O`.  E/S are read as L/U.
    """
    if tag == "O":
        return "O", None
    match = _TAG_PATTERN.match(tag)
    if match is None:
        return "", None
    prefix = _CANONICAL_PREFIX.get(match.group(1), match.group(1))
    return prefix, match.group(2)


def invalid_tag_reason(tag: str, scheme: str) -> Optional[str]:
    """Returns why `tag` is not a tag of `scheme`, or `None` if it is one."""
    prefix, _ = split_tag(tag)
    if prefix != "O" and (not prefix or prefix not in _PREFIXES[scheme]):
        allowed = "O or " + "/".join(p for p in _PREFIXES[scheme] if p not in "ES") + "-TYPE"
        return f"tag {tag!r} is not a {scheme} tag (expected {allowed})"
    return None


def chunk_ends(prev_prefix: str, prev_label, prefix: str, label) -> bool:
    """Whether a chunk ends between a tag `(prev_prefix, prev_label)` and the next `(prefix, label)` (conlleval)."""
    if prev_prefix in ("L", "U"):
        return True
    if prev_prefix in ("B", "I") and prefix in ("B", "U", "O"):
        return True
    return prev_prefix != "O" and prev_label != label


def chunk_starts(prev_prefix: str, prev_label, prefix: str, label) -> bool:
    """Whether a chunk starts at `(prefix, label)` after `(prev_prefix, prev_label)` (conlleval)."""
    if prefix in ("B", "U"):
        return True
    if prefix in ("I", "L") and prev_prefix in ("O", "L", "U"):
        return True
    return prefix != "O" and prev_label != label


def tags_to_spans(tags: Sequence[str]) -> List[TypedSpan]:
    """
    Decodes a tag sequence of any of the schemes into typed spans, as conlleval does.

    Tags that are not chunk tags at all (no `X-` prefix) are treated as `O`.
    """
    spans: List[TypedSpan] = []
    prev_prefix, prev_label = "O", None
    start = 0
    for index, tag in enumerate(list(tags) + ["O"]):
        prefix, label = split_tag(tag)
        if not prefix:
            prefix, label = "O", None
        if chunk_ends(prev_prefix, prev_label, prefix, label) and prev_prefix != "O":
            spans.append((prev_label, start, index))
        if chunk_starts(prev_prefix, prev_label, prefix, label):
            start = index
        prev_prefix, prev_label = prefix, label
    return spans


def spans_to_tags(spans: Sequence[TypedSpan], length: int, scheme: str) -> List[str]:
    """Encodes non-overlapping typed spans as a tag sequence of `scheme`."""
    check_tag_scheme(scheme)
    tags = ["O"] * length
    previous_end, previous_label = -1, None
    for label, start, end in sorted(spans, key=lambda span: span[1]):
        if scheme == "BIOUL":
            if end - start == 1:
                tags[start] = f"U-{label}"
            else:
                tags[start] = f"B-{label}"
                tags[start + 1 : end - 1] = [f"I-{label}"] * (end - start - 2)
                tags[end - 1] = f"L-{label}"
        else:
            tags[start:end] = [f"I-{label}"] * (end - start)
            # IOB1 marks a beginning only where a chunk touches a previous one of the same type.
            if scheme == "BIO" or (previous_end == start and previous_label == label):
                tags[start] = f"B-{label}"
        previous_end, previous_label = end, label
    return tags


def convert_tags(tags: Sequence[str], to_scheme: str) -> List[str]:
    """Re-encodes a tag sequence (any scheme) in `to_scheme`, span for span."""
    return spans_to_tags(tags_to_spans(tags), len(tags), to_scheme)
