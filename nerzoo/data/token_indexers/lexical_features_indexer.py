from typing import Dict, List

import torch
from allennlp.data.token_indexers.token_indexer import IndexedTokenList, TokenIndexer
from allennlp.data.tokenizers import Token
from allennlp.data.vocabulary import Vocabulary
from nerzoo_runtime.word_shapes import FEATURE_NAMES, word_shape_features


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
