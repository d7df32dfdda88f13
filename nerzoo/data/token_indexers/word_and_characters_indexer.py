import warnings
from typing import Any, Dict, List, Optional

import torch
from allennlp.data.token_indexers.single_id_token_indexer import SingleIdTokenIndexer
from allennlp.data.token_indexers.token_characters_indexer import TokenCharactersIndexer
from allennlp.data.token_indexers.token_indexer import IndexedTokenList, TokenIndexer
from allennlp.data.tokenizers import Token
from allennlp.data.vocabulary import Vocabulary

from nerzoo.data.token_indexers.allennlp_export_settings import single_id_settings, token_characters_settings


@TokenIndexer.register("word_and_characters")
class WordAndCharactersIndexer(TokenIndexer):
    """
    Each token's word id (allennlp's `SingleIdTokenIndexer`) and character ids
    (`TokenCharactersIndexer`, original case), together for the "char_gated" embedder
    (`CharGatedEmbedder`; Rei, Crichton and Pyysalo, COLING 2016), which combines both vectors of a
    token and whose cosine loss needs to know the out-of-vocabulary words: an allennlp
    `TokenEmbedder` receives the tensors of one indexer only.

    Output keys, the arguments of `CharGatedEmbedder.forward`:

    - "token_ids": `LongTensor` of shape `(num_tokens,)`, batched `(batch_size, num_tokens)`;
      0 at padding positions, so `get_text_field_mask` takes the mask from it (the tensor with the
      fewest dimensions).
    - "token_characters": `LongTensor` of shape `(num_tokens, num_characters)`, batched
      `(batch_size, num_tokens, num_characters)`; 0 at padding characters and padding tokens.

    The padding lengths of the two parts have their own prefixes (`word__`, `characters__`).

    Registered as a `TokenIndexer` with name "word_and_characters".

    # Parameters

    namespace : `str`, optional (default = `"tokens"`)
        Vocabulary namespace of the word ids.
    lowercase_tokens : `bool`, optional (default = `False`)
        Lower-case the word before looking up its id.  Applies to the word id only; the characters
        keep their case.
    character_namespace : `str`, optional (default = `"token_characters"`)
        Vocabulary namespace of the character ids.
    min_padding_length : `int`, optional (default = `0`)
        Minimum characters per word after padding, as in `TokenCharactersIndexer` (with a
        `CnnEncoder`, its largest n-gram filter size).
    token_min_padding_length : `int`, optional (default = `0`)
        See `TokenIndexer`; applied to both parts.
    """

    def __init__(
        self,
        namespace: str = "tokens",
        lowercase_tokens: bool = False,
        character_namespace: str = "token_characters",
        min_padding_length: int = 0,
        token_min_padding_length: int = 0,
    ) -> None:
        super().__init__(token_min_padding_length)
        self._word_indexer = SingleIdTokenIndexer(
            namespace=namespace,
            lowercase_tokens=lowercase_tokens,
            token_min_padding_length=token_min_padding_length,
        )
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*min_padding_length.*", category=UserWarning)
            self._character_indexer = TokenCharactersIndexer(
                namespace=character_namespace,
                min_padding_length=min_padding_length,
                token_min_padding_length=token_min_padding_length,
            )

    def count_vocab_items(self, token: Token, counter: Dict[str, Dict[str, int]]):
        self._word_indexer.count_vocab_items(token, counter)
        self._character_indexer.count_vocab_items(token, counter)

    def _parts(self):
        """`(output key, key inside the part, padding-length prefix, indexer)` of the two parts."""
        return (
            ("token_ids", "tokens", "word__", self._word_indexer),
            ("token_characters", "token_characters", "characters__", self._character_indexer),
        )

    def tokens_to_indices(self, tokens: List[Token], vocabulary: Vocabulary) -> IndexedTokenList:
        return {key: indexer.tokens_to_indices(tokens, vocabulary)[inner] for key, inner, _, indexer in self._parts()}

    def get_empty_token_list(self) -> IndexedTokenList:
        return {key: indexer.get_empty_token_list()[inner] for key, inner, _, indexer in self._parts()}

    def get_padding_lengths(self, indexed_tokens: IndexedTokenList) -> Dict[str, int]:
        return {
            prefix + name: length
            for key, inner, prefix, indexer in self._parts()
            for name, length in indexer.get_padding_lengths({inner: indexed_tokens[key]}).items()
        }

    def as_padded_tensor_dict(
        self, tokens: IndexedTokenList, padding_lengths: Dict[str, int]
    ) -> Dict[str, torch.Tensor]:
        tensors = {}
        for key, inner, prefix, indexer in self._parts():
            lengths = {
                name[len(prefix) :]: length for name, length in padding_lengths.items() if name.startswith(prefix)
            }
            tensors[key] = indexer.as_padded_tensor_dict({inner: tokens[key]}, lengths)[inner]
        return tensors

    def export_settings(self, vocab: Vocabulary) -> Optional[Dict[str, Any]]:
        """What nerzoo_runtime's `word_and_characters` indexer needs to index as this one does (`allennlp export`)."""
        words = single_id_settings(self._word_indexer, vocab)
        characters = token_characters_settings(self._character_indexer, vocab)
        if words is None or characters is None:
            return None
        settings = {"type": "word_and_characters", "namespace": words["namespace"], "lowercase": words["lowercase"]}
        settings.update(
            character_namespace=characters["namespace"], min_padding_length=characters["min_padding_length"]
        )
        return {**settings, "oov": words["oov"]}
