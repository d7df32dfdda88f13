"""
The word-shape features of nerzoo's `lexical_features` indexer, and `WordShapes`, the runtime's
indexer of them.
"""

import unicodedata
from typing import Any, Dict, List, Sequence

import numpy

FEATURE_NAMES = [
    "starts_with_capital",
    "all_capitals",
    "all_lower_case",
    "non_initial_capital",
    "letters_and_digits",
    "has_punctuation",
]


def word_shape_features(word: str) -> List[int]:
    """
    The six binary lexical features of Liu, Baldwin and Cohn (2017), section 5.2, after Huang et
    al. (2015), as 0/1 ints in the order of `FEATURE_NAMES`.  A "capital" is a character `c` with
    `c.isupper()`, a "lower-case letter" one with `c.islower()`, a letter one with `c.isalpha()`,
    a digit one with `c.isdigit()`, and punctuation one whose Unicode category is `P*` (so `,` `.`
    `-` `'` `%` are punctuation, but symbols such as `$` `+` `<` `|` `~`, category `S*`, are not).

    1. starts_with_capital: the first character is a capital ("Peter", "A", "U.S.", "McDonald",
       not "3M", "iPhone", "'Twas").
    2. all_capitals: every character is a capital ("EU", "A"; not "U.S.", "3M", "B-52").
    3. all_lower_case: every character is a lower-case letter ("the"; not "e-mail", "1st").
    4. non_initial_capital: some character after the first is a capital ("McDonald", "iPhone",
       "EU", "U.S.", "3M"; not "A", "Peter", "B-52").
    5. letters_and_digits: at least one letter and at least one digit ("3M", "B-52", "1st"; not
       "1996").
    6. has_punctuation: at least one punctuation character (",", "--", "U.S.", "B-52", "don't").

    The empty word has every feature 0, and so does a word such as "1996" or "$" that none of the
    six describes.  Letters without case (e.g. CJK) are neither capitals nor lower-case.
    """
    if not word:
        return [0] * len(FEATURE_NAMES)
    has_letter = any(char.isalpha() for char in word)
    has_digit = any(char.isdigit() for char in word)
    return [
        int(word[0].isupper()),
        int(all(char.isupper() for char in word)),
        int(all(char.islower() for char in word)),
        int(any(char.isupper() for char in word[1:])),
        int(has_letter and has_digit),
        int(any(unicodedata.category(char).startswith("P") for char in word)),
    ]


class WordShapes:
    """
    Words to the `(batch_size, num_tokens, 6)` input of nerzoo's `lexical_features` indexer: each
    word's `word_shape_features` (0 pads).
    """

    def __init__(self, settings: Dict[str, Any]) -> None:
        self.name: str = settings["name"]

    def check(self, words: Sequence[str]) -> None:
        """Any words will do."""

    def feeds(self, batch: Sequence[Sequence[str]]) -> Dict[str, numpy.ndarray]:
        features = numpy.zeros((len(batch), max(map(len, batch)), 6), dtype=numpy.int64)
        for row, words in enumerate(batch):
            for column, word in enumerate(words):
                features[row, column] = word_shape_features(word)
        return {self.name: features}
