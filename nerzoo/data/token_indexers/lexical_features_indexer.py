import unicodedata
from typing import Dict, List

import torch
from allennlp.data.token_indexers.token_indexer import IndexedTokenList, TokenIndexer
from allennlp.data.tokenizers import Token
from allennlp.data.vocabulary import Vocabulary

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


@TokenIndexer.register("lexical_features")
class LexicalFeaturesIndexer(TokenIndexer):
    """
    Represents each token by the six binary word-shape features of `word_shape_features`
    (Liu, Baldwin and Cohn, "Capturing Long-range Contextual Dependencies with Memory-enhanced
    Conditional Random Fields", IJCNLP 2017, https://aclanthology.org/I17-1056, section 5.2),
    computed from `token.text` as written, so they keep the case information that a lower-cased
    word embedding drops.  No vocabulary is needed.

    The output key is "features", the argument of `LexicalFeaturesEmbedder.forward`; as a tensor
    it is a `LongTensor` of shape `(num_tokens, 6)`, with rows of zeros for padding.

    Use it beside a word indexer (e.g. "single_id") in the same `TextField`: a real word such as
    "1996" also has all-zero features, so this indexer alone cannot tell words from padding, and
    `allennlp.nn.util.get_text_field_mask` should take the mask from the other indexer (it uses
    the tensor with the fewest dimensions).

    Registered as a `TokenIndexer` with name "lexical_features".

    # Parameters

    token_min_padding_length : `int`, optional (default = `0`)
        See `TokenIndexer`.
    """

    def count_vocab_items(self, token: Token, counter: Dict[str, Dict[str, int]]):
        pass

    def tokens_to_indices(self, tokens: List[Token], vocabulary: Vocabulary) -> IndexedTokenList:
        return {"features": [word_shape_features(token.text or "") for token in tokens]}

    def get_empty_token_list(self) -> IndexedTokenList:
        return {"features": []}

    def as_padded_tensor_dict(
        self, tokens: IndexedTokenList, padding_lengths: Dict[str, int]
    ) -> Dict[str, torch.Tensor]:
        num_tokens = padding_lengths["features"]
        features = tokens["features"][:num_tokens]
        tensor = torch.zeros(num_tokens, len(FEATURE_NAMES), dtype=torch.long)
        if features:
            tensor[: len(features)] = torch.tensor(features, dtype=torch.long)
        return {"features": tensor}

    def export_settings(self, vocab: Vocabulary) -> Dict[str, str]:
        """What nerzoo_runtime's `lexical_features` indexer needs (`allennlp export`): nothing but its key."""
        return {"type": "lexical_features", "key": "features"}
