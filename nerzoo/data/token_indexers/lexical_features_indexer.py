from typing import Dict, List

import torch
from allennlp.data.token_indexers.token_indexer import IndexedTokenList, TokenIndexer
from allennlp.data.tokenizers import Token
from allennlp.data.vocabulary import Vocabulary
from nerzoo_runtime.word_shapes import FEATURE_NAMES, word_shape_features


@TokenIndexer.register("lexical_features")
class LexicalFeaturesIndexer(TokenIndexer):
    """
    Each token's six binary word-shape features (`word_shape_features`; Liu, Baldwin and Cohn,
    IJCNLP 2017, §5.2), from `token.text` as written, so they keep the case a lower-cased word
    embedding drops.  Output key "features", `(num_tokens, 6)` longs, zeros at padding.  Use it
    beside a word indexer, from which `get_text_field_mask` takes the mask ("1996" has all-zero
    features too).

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
