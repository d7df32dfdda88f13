from typing import Any, Dict, List, Optional, Tuple

from allennlp.common.checks import ConfigurationError
from allennlp.data import Token, Vocabulary
from allennlp.data.token_indexers import PretrainedTransformerMismatchedIndexer, TokenIndexer
from allennlp.data.token_indexers.token_indexer import IndexedTokenList

from nerzoo.transformer_models import local_model_directory


@TokenIndexer.register("contextual_word_pieces")
class ContextualWordPiecesIndexer(PretrainedTransformerMismatchedIndexer):
    """
    allennlp's `pretrained_transformer_mismatched` indexer (each word split into the word pieces of a
    Hugging Face tokenizer, with the offsets of its first and last piece; the input of
    `contextual_word_vectors`), with each distinct word tokenised once.

    allennlp tokenises every word of every sentence through the Hugging Face tokenizer, one call per
    word, which makes indexing the costliest step of predicting with a frozen, cached transformer.
    A word's pieces do not depend on its neighbours (allennlp tokenises the words one by one), so
    here they are kept per word string and reused.  The memo holds at most `cache_size` words and
    then stops growing; a word costs a few hundred bytes.  Same parameters, ids, offsets and
    tensors as `pretrained_transformer_mismatched`, so the two are interchangeable in a config.

    Registered as a `TokenIndexer` with name "contextual_word_pieces".

    # Parameters

    model_name, namespace, max_length, tokenizer_kwargs
        As for allennlp's `pretrained_transformer_mismatched`.
    cache_size : `int`, optional (default = `200000`)
        Most distinct words whose pieces are kept; 0 turns the memo off.
    """

    def __init__(
        self,
        model_name: str,
        namespace: str = "tags",
        max_length: Optional[int] = None,
        tokenizer_kwargs: Optional[Dict[str, Any]] = None,
        cache_size: int = 200000,
        **kwargs,
    ) -> None:
        model_name = local_model_directory(model_name)
        if cache_size < 0:
            raise ConfigurationError(f"cache_size must be >= 0, got {cache_size}")
        super().__init__(model_name, namespace, max_length, tokenizer_kwargs, **kwargs)
        self.cache_size = cache_size
        # word -> (its pieces, without type ids; None for a word with no piece)
        self._pieces: Dict[str, Optional[List[Token]]] = {}

    def _word_pieces(self, word: str) -> Optional[List[Token]]:
        pieces = self._pieces.get(word, False)
        if pieces is False:
            tokens, offsets = self._allennlp_tokenizer._intra_word_tokenize([word])
            pieces = tokens if offsets[0] is not None else None
            if len(self._pieces) < self.cache_size:
                self._pieces[word] = pieces
        return pieces  # type: ignore[return-value]

    def tokens_to_indices(self, tokens: List[Token], vocabulary: Vocabulary) -> IndexedTokenList:
        self._matched_indexer._add_encoding_to_vocabulary_if_needed(vocabulary)
        tokenizer = self._allennlp_tokenizer
        start = len(tokenizer.single_sequence_start_tokens)
        pieces: List[Token] = []
        # A word with no piece gets (-1, -1), as in allennlp: its vector is zeros.
        offsets: List[Tuple[int, int]] = []
        for token in tokens:
            word_pieces = self._word_pieces(token.ensure_text())
            if word_pieces is None:
                offsets.append((-1, -1))
                continue
            offsets.append((start + len(pieces), start + len(pieces) + len(word_pieces) - 1))
            pieces.extend(word_pieces)
        wordpieces = tokenizer.add_special_tokens(pieces)
        output: IndexedTokenList = {
            "token_ids": [t.text_id for t in wordpieces],
            "mask": [True] * len(tokens),
            "type_ids": [t.type_id for t in wordpieces],
            "offsets": offsets,
            "wordpiece_mask": [True] * len(wordpieces),
        }
        return self._matched_indexer._postprocess_output(output)
