from typing import Any, Dict, Optional

import transformers
from allennlp.common.checks import ConfigurationError
from allennlp.data import Vocabulary
from allennlp.data.token_indexers import PretrainedTransformerMismatchedIndexer, TokenIndexer

from nerzoo.transformer_models import local_model_directory


@TokenIndexer.register("contextual_word_pieces")
class ContextualWordPiecesIndexer(PretrainedTransformerMismatchedIndexer):
    """
    allennlp's `pretrained_transformer_mismatched` indexer (each word split into the word pieces of a
    Hugging Face tokenizer, with the offsets of its first and last piece; the input of
    `contextual_word_vectors`), whose `model_name` may name a model nerzoo keeps on disk
    (`nerzoo.transformer_models.local_model_directory`): nothing is downloaded.

    Registered as a `TokenIndexer` with name "contextual_word_pieces".

    # Parameters

    model_name, namespace, max_length, tokenizer_kwargs
        As for allennlp's `pretrained_transformer_mismatched`.
    cache_size : `int`, optional
        Accepted so that configs naming it load; unused.
    """

    def __init__(
        self,
        model_name: str,
        namespace: str = "tags",
        max_length: Optional[int] = None,
        tokenizer_kwargs: Optional[Dict[str, Any]] = None,
        cache_size: int = 0,
        **kwargs,
    ) -> None:
        super().__init__(local_model_directory(model_name), namespace, max_length, tokenizer_kwargs, **kwargs)

    def export_settings(self, vocab: Vocabulary) -> Dict[str, Any]:
        """
        What `nerzoo_runtime.word_pieces` needs to split words as this indexer does (`allennlp
        export`); raises what it lacks: a fast tokenizer (its `tokenizer.json`, `save_tokenizer`),
        type ids all 0.  Longer sentences than the transformer's `max_length` are folded into
        segments, which the graph does not do: the runtime refuses them.
        """
        tokenizer = self._allennlp_tokenizer
        start, end = tokenizer.single_sequence_start_tokens, tokenizer.single_sequence_end_tokens
        if not self._tokenizer.is_fast:
            raise ConfigurationError("its word pieces come from a slow tokenizer; the runtime reads a fast one's")
        if tokenizer.single_sequence_token_type_id or any(token.type_id for token in start + end):
            raise ConfigurationError("its word pieces have type ids other than 0")
        max_length = self._matched_indexer._max_length
        if max_length is None:
            max_length = transformers.AutoConfig.from_pretrained(self._tokenizer.name_or_path).max_position_embeddings
        return {
            "type": "contextual_word_pieces",
            "start_ids": [token.text_id for token in start],
            "end_ids": [token.text_id for token in end],
            "pad_id": self._tokenizer.pad_token_id or 0,
            "max_length": max_length,
        }

    def save_tokenizer(self, path: str) -> None:
        """Writes the fast tokenizer's `tokenizer.json` at `path`, which `nerzoo_runtime.word_pieces` reads."""
        self._tokenizer.backend_tokenizer.save(path)
