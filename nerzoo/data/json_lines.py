"""Reading JSON-lines files line by line, for readers that report errors as `path:line`."""

from typing import Any, Callable, Iterator, Optional, Tuple


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
