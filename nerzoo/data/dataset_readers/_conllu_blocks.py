"""The sentence blocks of a UD-style file (CoNLL-U, Universal NER `.iob2`), for `conllu_ner`."""

from typing import Iterator, List, NamedTuple, Optional, Tuple

from nerzoo.data.dataset_readers.conll_columns import ColumnFormatError, decoded_lines


class ConlluBlock(NamedTuple):
    """The lines of one sentence: its comments, token rows `(line, columns)` and document."""

    first_line: int
    sentence_id: Optional[str]
    document_id: Optional[str]
    rows: List[Tuple[int, List[str]]]


def conllu_blocks(path: str, name: str) -> Iterator[ConlluBlock]:
    """Splits a UD-style file into sentences: comment lines, tab-separated rows, blank lines."""
    rows: List[Tuple[int, List[str]]] = []
    sentence_id: Optional[str] = None
    document_id: Optional[str] = None
    first_line = 0
    for line_number, line in decoded_lines(path, name):
        if not line.strip():
            if rows:
                yield ConlluBlock(first_line, sentence_id, document_id, rows)
            elif sentence_id is not None:
                raise ColumnFormatError(name, line_number, f"sentence {sentence_id} has no token lines")
            rows, sentence_id = [], None
            continue
        if line.startswith("#"):
            key, _, value = line[1:].partition("=")
            key, value = key.strip(), value.strip()
            if key in ("sent_id", "newdoc id", "newdoc"):
                if rows:
                    raise ColumnFormatError(
                        name, line_number, "a new sentence starts without a blank line after the previous one"
                    )
                if key == "sent_id":
                    sentence_id = value
                else:
                    document_id = value or None
            continue
        if not rows:
            first_line = line_number
        rows.append((line_number, line.split("\t")))
    if rows:
        yield ConlluBlock(first_line, sentence_id, document_id, rows)
