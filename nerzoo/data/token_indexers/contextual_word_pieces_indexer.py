from typing import Any, Dict, Optional

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
