"""
allennlp's own components under the names that nerzoo configs and archives may give them: the same
parameters, tensors and state-dict keys.

- `collate_fn: {type: "fast"}`: allennlp's default collation (`allennlp`).
- token indexer `fast_characters` (or `batched_characters`): allennlp's `characters`.
"""

from allennlp.data.data_loaders.data_collator import DataCollator, DefaultDataCollator
from allennlp.data.token_indexers import TokenCharactersIndexer, TokenIndexer

DataCollator.register("fast")(DefaultDataCollator)
TokenIndexer.register("fast_characters")(TokenCharactersIndexer)
TokenIndexer.register("batched_characters")(TokenCharactersIndexer)
