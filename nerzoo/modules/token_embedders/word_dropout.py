import torch
from allennlp.common.checks import ConfigurationError
from allennlp.data import Vocabulary
from allennlp.modules.token_embedders import TokenEmbedder


@TokenEmbedder.register("word_dropout")
class WordDropout(TokenEmbedder):
    """
    Word dropout: while training, each real token's id is replaced by the out-of-vocabulary id with
    probability `rate` before the wrapped embedder sees it.  Lample et al. (2016),
    https://aclanthology.org/N16-1030, replace the training set's singletons so, with probability
    0.5; this replaces any word.  The unknown word's vector is trained on words the model has seen,
    and the tagger learns to lean on its other inputs (characters, contextual vectors) where a word
    is unknown, as rare and unseen test words are.  In evaluation it is the wrapped embedder.

    Registered as a `TokenEmbedder` with name "word_dropout".

    # Parameters

    vocab : `Vocabulary`
        Gives the out-of-vocabulary id of `vocab_namespace`.
    embedder : `TokenEmbedder`, required
        Embeds `(batch_size, num_tokens)` ids of `vocab_namespace`, e.g. an `embedding`.
    rate : `float`, required
        Probability of replacing a token, in [0, 1).
    vocab_namespace : `str`, optional (default = `"tokens"`)
    """

    def __init__(
        self, vocab: Vocabulary, embedder: TokenEmbedder, rate: float, vocab_namespace: str = "tokens"
    ) -> None:
        super().__init__()
        if not 0.0 <= rate < 1.0:
            raise ConfigurationError(f"word_dropout: rate must be in [0, 1), got {rate}")
        oov_index = vocab.get_token_to_index_vocabulary(vocab_namespace).get(vocab._oov_token)
        if oov_index is None:
            raise ConfigurationError(f"word_dropout: namespace {vocab_namespace!r} has no unknown-word id")
        self.embedder = embedder
        self.rate = rate
        self.oov_index = oov_index

    def get_output_dim(self) -> int:
        return self.embedder.get_output_dim()

    def forward(self, tokens: torch.LongTensor, **kwargs) -> torch.Tensor:
        """`(batch_size, num_tokens)` ids -> the wrapped embedder's `(batch_size, num_tokens, dim)`."""
        if self.training and self.rate > 0:
            # Padding (id 0) stays padding.
            dropped = (torch.rand(tokens.shape, device=tokens.device) < self.rate) & (tokens != 0)
            tokens = tokens.masked_fill(dropped, self.oov_index)
        return self.embedder(tokens, **kwargs)
