"""
`WordPieces`: words to the word-piece inputs of an exported graph with a transformer inside it, as
nerzoo's `contextual_word_pieces` indexer (allennlp's `pretrained_transformer_mismatched`) makes
them, with Hugging Face's `tokenizers` (the `contextual` extra; no torch, no transformers).
"""

import pathlib
from typing import Any, Dict, List, Sequence

import numpy

from nerzoo_runtime.errors import TaggerInputError


class WordPieces:
    """
    Each word is split alone into the word pieces of the transformer's tokenizer (the
    `tokenizer_file` the export saved), and a sentence's pieces go between the tokenizer's start
    and end pieces.  The graph's inputs, named `{name}.{key}`:

    - `token_ids`, `(batch_size, num_word_pieces)`: the pieces' ids, `pad_id` after the end;
    - `mask`, `(batch_size, num_tokens)`: true at words;
    - `offsets`, `(batch_size, num_tokens, 2)`: a word's first and last piece, `(-1, -1)` for a
      word without pieces (a control character: its vector is zeros), `(0, 0)` at padding;
    - `wordpiece_mask`, `(batch_size, num_word_pieces)`: true at pieces.

    allennlp folds a sentence of more than `max_length` pieces (start and end included) into
    segments; the graph does not, and `check` refuses such a sentence.

    # Parameters

    settings : `Dict[str, Any]`
        The indexer's entry in `tagger.json`.
    directory : `pathlib.Path`
        The exported directory, which holds the tokenizer file.
    """

    def __init__(self, settings: Dict[str, Any], directory: pathlib.Path) -> None:
        try:
            from tokenizers import Tokenizer
        except ImportError:
            raise ImportError(
                "this export's contextual word vectors need Hugging Face's tokenizers: "
                "pip install 'nerzoo-runtime[contextual]'"
            ) from None
        self.name: str = settings["name"]
        self.tokenizer = Tokenizer.from_file(str(directory / settings["tokenizer_file"]))
        self.tokenizer.no_truncation()
        self.tokenizer.no_padding()
        self.start_ids: List[int] = settings["start_ids"]
        self.end_ids: List[int] = settings["end_ids"]
        self.pad_id: int = settings["pad_id"]
        self.max_length: int = settings["max_length"]

    def pieces(self, words: Sequence[str]) -> List[List[int]]:
        """The word-piece ids of each word, without start or end pieces."""
        return [encoding.ids for encoding in self.tokenizer.encode_batch(list(words), add_special_tokens=False)]

    def check(self, words: Sequence[str]) -> None:
        """Raises `TaggerInputError` for a sentence longer than `max_length` word pieces."""
        length = len(self.start_ids) + sum(map(len, self.pieces(words))) + len(self.end_ids)
        if length > self.max_length:
            raise TaggerInputError(
                f"its {length} word pieces (start and end included) are more than the transformer's "
                f"max_length of {self.max_length}, which an export does not fold into segments: split it"
            )

    def feeds(self, batch: Sequence[Sequence[str]]) -> Dict[str, numpy.ndarray]:
        rows = []
        for words in batch:
            ids, offsets = list(self.start_ids), []
            for pieces in self.pieces(words):
                offsets.append((len(ids), len(ids) + len(pieces) - 1) if pieces else (-1, -1))
                ids.extend(pieces)
            rows.append((ids + self.end_ids, offsets))
        num_pieces = max(len(ids) for ids, _ in rows)
        num_words = max(len(offsets) for _, offsets in rows)
        inputs = {
            "token_ids": numpy.full((len(batch), num_pieces), self.pad_id, dtype=numpy.int64),
            "mask": numpy.zeros((len(batch), num_words), dtype=bool),
            "offsets": numpy.zeros((len(batch), num_words, 2), dtype=numpy.int64),
            "wordpiece_mask": numpy.zeros((len(batch), num_pieces), dtype=bool),
        }
        for row, (ids, offsets) in enumerate(rows):
            inputs["token_ids"][row, : len(ids)] = ids
            inputs["mask"][row, : len(offsets)] = True
            inputs["offsets"][row, : len(offsets)] = offsets
            inputs["wordpiece_mask"][row, : len(ids)] = True
        return {f"{self.name}.{key}": value for key, value in inputs.items()}
