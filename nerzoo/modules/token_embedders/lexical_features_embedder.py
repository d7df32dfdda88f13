from typing import Optional

import torch
from allennlp.common.checks import ConfigurationError
from allennlp.modules.token_embedders.token_embedder import TokenEmbedder

from nerzoo.data.token_indexers.lexical_features_indexer import FEATURE_NAMES


@TokenEmbedder.register("lexical_features")
class LexicalFeaturesEmbedder(TokenEmbedder):
    """
    Embeds the six binary lexical features `Φ_l(x_t)` of Liu, Baldwin and Cohn, "Capturing
    Long-range Contextual Dependencies with Memory-enhanced Conditional Random Fields" (IJCNLP
    2017, https://aclanthology.org/I17-1056), section 5.2, given by the "lexical_features"
    token indexer.  In a `BasicTextFieldEmbedder` beside a word embedding, its output is
    concatenated with the word vector, as in the paper.

    With `embedding_dim = None` (the paper's setting) the features are returned unchanged as
    floats.  With an `embedding_dim`, they go through a learned linear map `W Φ_l(x_t)` without a
    bias: the encoder that reads the embeddings has its own input bias, and padding rows (all
    zero) stay zero.

    Registered as a `TokenEmbedder` with name "lexical_features".

    # Parameters

    embedding_dim : `int`, optional (default = `None`)
        The size of the projected features; `None` for no projection (output size 6).

    # Input

    features : `torch.LongTensor`
        Shape `(batch_size, num_tokens, 6)`, 0/1 values.

    # Output

    `torch.FloatTensor` of shape `(batch_size, num_tokens, get_output_dim())`.
    """

    def __init__(self, embedding_dim: Optional[int] = None) -> None:
        super().__init__()
        if embedding_dim is not None and embedding_dim <= 0:
            raise ConfigurationError(f"LexicalFeaturesEmbedder needs embedding_dim > 0 or None, got {embedding_dim}.")
        self._output_dim = len(FEATURE_NAMES) if embedding_dim is None else embedding_dim
        self._projection = None
        if embedding_dim is not None:
            self._projection = torch.nn.Linear(len(FEATURE_NAMES), embedding_dim, bias=False)

    def get_output_dim(self) -> int:
        return self._output_dim

    def forward(self, features: torch.LongTensor) -> torch.Tensor:
        if self._projection is None:
            return features.float()
        return self._projection(features.to(self._projection.weight.dtype))
