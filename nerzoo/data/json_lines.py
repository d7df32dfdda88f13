"""Reading JSON-lines files line by line, for readers that report errors as `path:line`."""

import json
from typing import Any, Callable, Dict, Iterator, Optional, Tuple


def type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def numbered_lines(
    path: str, make_error: Callable[[Optional[int], str], Exception], empty_message: str
) -> Iterator[Tuple[int, str]]:
    """
    The non-blank lines of a UTF-8 file (a byte-order mark allowed) with their 1-based numbers.

    `make_error(line_number, message)` builds the exception raised for a line that is not UTF-8,
    and `make_error(None, empty_message)` the one for a file without a non-blank line.
    """
    any_line = False
    with open(path, "rb") as handle:
        for line_number, raw_line in enumerate(handle, start=1):
            try:
                line = raw_line.decode("utf-8-sig" if line_number == 1 else "utf-8")
            except UnicodeDecodeError as error:
                raise make_error(line_number, f"not valid UTF-8 ({error.reason})") from None
            if line.strip():
                any_line = True
                yield line_number, line
    if not any_line:
        raise make_error(None, empty_message)


def json_object(
    line: str, where: str, error: Callable[[str, str], Exception], expected: str, id_key: str
) -> Tuple[Dict[str, Any], Optional[str]]:
    """
    `line` as a JSON object (one with `expected`) and its optional string `id_key`; anything else
    raises `error(where, message)`.
    """
    try:
        value = json.loads(line)
    except json.JSONDecodeError as decode_error:
        raise error(where, f"invalid JSON ({decode_error.msg} at column {decode_error.colno})") from None
    if not isinstance(value, dict):
        raise error(where, f"expected a JSON object with {expected}, got {type_name(value)}")
    identifier = value.get(id_key)
    if identifier is not None and not isinstance(identifier, str):
        raise error(where, f"'{id_key}' must be a string, got {identifier!r}")
    return value, identifier
