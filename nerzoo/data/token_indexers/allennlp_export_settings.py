"""
What `nerzoo_runtime` needs to index words as allennlp's `single_id` and `characters` indexers do
(`allennlp export`): each class is read here, in one function; nerzoo's own indexers say it
themselves (`export_settings(vocab)`).  `None`: the runtime has no such indexing (start or end
tokens, a byte encoding, a token feature other than the text).
"""

from typing import Any, Dict, Optional

from allennlp.data import Vocabulary
from allennlp.data.token_indexers import SingleIdTokenIndexer, TokenCharactersIndexer, TokenIndexer


def oov_token(vocab: Vocabulary) -> str:
    """The token `vocab` gives a word it lacks."""
    return vocab._oov_token


def single_id_settings(indexer: SingleIdTokenIndexer, vocab: Vocabulary) -> Optional[Dict[str, Any]]:
    """A word's id, lower-cased or not, as `nerzoo_runtime`'s `single_id` indexer gives it."""
    if not indexer.namespace or indexer._feature_name != "text" or indexer._start_tokens or indexer._end_tokens:
        return None
    settings = {"type": "single_id", "key": "tokens", "namespace": indexer.namespace}
    return {**settings, "lowercase": indexer.lowercase_tokens, "oov": oov_token(vocab)}


def token_characters_settings(indexer: TokenCharactersIndexer, vocab: Vocabulary) -> Optional[Dict[str, Any]]:
    """A word's characters' ids, as `nerzoo_runtime`'s `characters` indexer gives them."""
    characters = indexer._character_tokenizer
    extras = [indexer._start_tokens, indexer._end_tokens, characters._start_tokens, characters._end_tokens]
    if any(extras) or characters._byte_encoding:
        return None
    settings = {"type": "characters", "key": "token_characters", "namespace": indexer._namespace}
    settings.update(lowercase=characters._lowercase_characters, min_padding_length=indexer._min_padding_length)
    return {**settings, "oov": oov_token(vocab)}


ADAPTERS = {SingleIdTokenIndexer: single_id_settings, TokenCharactersIndexer: token_characters_settings}


def runtime_settings(indexer: TokenIndexer, vocab: Vocabulary) -> Optional[Dict[str, Any]]:
    """What the runtime needs of `indexer`: its own `export_settings`, or the adapter of its allennlp class."""
    if hasattr(indexer, "export_settings"):
        return indexer.export_settings(vocab)
    adapter = ADAPTERS.get(type(indexer))
    return None if adapter is None else adapter(indexer, vocab)
