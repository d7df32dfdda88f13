from typing import Optional

import torch
from allennlp.common.checks import ConfigurationError
from allennlp.modules import FeedForward
from allennlp.modules.seq2seq_encoders import GruSeq2SeqEncoder
from allennlp.modules.seq2vec_encoders.seq2vec_encoder import Seq2VecEncoder
from allennlp.nn import Activation


@Seq2VecEncoder.register("summed_gru")
class SummedGruEncoder(Seq2VecEncoder):
    """
    The character-level word representation of Seq2Biseq: Marco Dinarelli and Loïc Grobol, "Seq2Biseq:
    Bidirectional Output-wise Recurrent Neural Networks for Sequence Modelling", CICLing 2019,
    https://arxiv.org/abs/1904.04733, §3.1, eq. 1:

        (h_c(c_1), .., h_c(c_n)) = GRU_c(S_c(w))
        h_c(w) = FFNN(sum_j h_c(c_j))

    Every hidden state of the character GRU is summed, not only the last one, and a feed-forward
    net extracts features from the sum.  `GRU_c` is bidirectional in the paper's notation (an
    unmarked GRU); the states of both directions are concatenated before the sum.  Used as the
    `encoder` of AllenNLP's `character_encoding` TokenEmbedder.

    Masked positions add nothing; a fully masked sequence (a padding word) gives `FFNN(0)`.

    Registered as a `Seq2VecEncoder` with name "summed_gru".

    # Parameters

    input_dim : `int`, required
        Size of the character embeddings, input `(batch_size, num_characters, input_dim)`.
    hidden_dim : `int`, required
        Hidden size of the GRU (per direction).
    bidirectional : `bool`, optional (default = `True`)
    output_dim : `int`, optional (default = the GRU's output size)
        Size of every feed-forward layer, so the output is `(batch_size, output_dim)`.
    num_layers : `int`, optional (default = `1`)
        Feed-forward layers.
    activation : `str`, optional (default = `"relu"`)
    """

    def __init__(
        self,
        input_dim: int,
        hidden_dim: int,
        bidirectional: bool = True,
        output_dim: Optional[int] = None,
        num_layers: int = 1,
        activation: str = "relu",
    ) -> None:
        super().__init__()
        if input_dim <= 0 or hidden_dim <= 0 or num_layers < 1:
            raise ConfigurationError(
                f"summed_gru needs positive sizes and at least one layer (input_dim {input_dim}, "
                f"hidden_dim {hidden_dim}, num_layers {num_layers})"
            )
        self.gru = GruSeq2SeqEncoder(input_dim, hidden_dim, bidirectional=bidirectional)
        gru_dim = self.gru.get_output_dim()
        self._output_dim = output_dim or gru_dim
        self.feedforward = FeedForward(gru_dim, num_layers, self._output_dim, Activation.by_name(activation)())

    def get_input_dim(self) -> int:
        return self.gru.get_input_dim()

    def get_output_dim(self) -> int:
        return self._output_dim

    def forward(self, inputs: torch.Tensor, mask: torch.BoolTensor) -> torch.Tensor:
        """`(batch_size, num_steps, input_dim)`, mask `(batch_size, num_steps)` -> `(batch_size, output_dim)`."""
        # The wrapper packs the sequences and returns zeros at masked positions.
        states = self.gru(inputs, mask)  # (batch_size, num_steps, gru_dim)
        summed = (states * mask.unsqueeze(-1)).sum(dim=1)
        return self.feedforward(summed)
