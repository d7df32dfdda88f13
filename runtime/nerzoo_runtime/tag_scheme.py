"""
Entity spans from a tag sequence of any chunk scheme (IOB1, BIO, BIOUL), by the chunk rules of
conlleval, as nerzoo decodes them: `B-X` always opens a chunk, `I-X` (or `L-X`) opens one after `O`,
after `L-`/`U-` or after another type; `L-`/`U-` close one, as do `O`, `B-` and `U-` after it.
Tags without an `X-` prefix count as `O`; `E-`/`S-` are read as `L-`/`U-`.
"""

import re
from typing import List, Optional, Sequence, Tuple

_TAG = re.compile(r"^([A-Z])-(.+)$")
_CANONICAL_PREFIX = {"E": "L", "S": "U"}


def split_tag(tag: str) -> Tuple[str, Optional[str]]:
    """`'B-PER'` -> `('B', 'PER')`; `'O'` and tags of no scheme -> `('O', None)`."""
    match = _TAG.match(tag)
    if match is None:
        return "O", None
    return _CANONICAL_PREFIX.get(match.group(1), match.group(1)), match.group(2)


def chunk_ends(previous_prefix: str, previous_label, prefix: str, label) -> bool:
    """Whether a chunk holding the previous tag ends before the current one."""
    if previous_prefix in ("L", "U"):
        return True
    if previous_prefix in ("B", "I") and prefix in ("B", "U", "O"):
        return True
    return previous_prefix != "O" and previous_label != label


def chunk_starts(previous_prefix: str, previous_label, prefix: str, label) -> bool:
    """Whether a chunk starts at the current tag."""
    if prefix in ("B", "U"):
        return True
    if prefix in ("I", "L") and previous_prefix in ("O", "L", "U"):
        return True
    return prefix != "O" and previous_label != label


def tags_to_spans(tags: Sequence[str]) -> List[Tuple[str, int, int]]:
    """`(label, start, end)` of every chunk of `tags`, `end` exclusive."""
    spans = []
    previous_prefix, previous_label, start = "O", None, 0
    for index, tag in enumerate([*tags, "O"]):
        prefix, label = split_tag(tag)
        if previous_prefix != "O" and chunk_ends(previous_prefix, previous_label, prefix, label):
            spans.append((previous_label, start, index))
        if chunk_starts(previous_prefix, previous_label, prefix, label):
            start = index
        previous_prefix, previous_label = prefix, label
    return spans
