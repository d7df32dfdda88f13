from typing import List, Optional

import torch
from allennlp.common.checks import ConfigurationError
from allennlp.modules.seq2seq_encoders.seq2seq_encoder import Seq2SeqEncoder

from nerzoo.modules.variational_dropout import VariationalDropout


@Seq2SeqEncoder.register("residual_stack")
class ResidualStack(Seq2SeqEncoder):
    """
    A stack of `Seq2SeqEncoder`s with the residual connections of Aguilar and Solorio,
    "Dependency-Aware Named Entity Recognition with Relative and Global Attentions" (arXiv preprint,
    2019, https://arxiv.org/abs/1909.05166), section 3.2.4, eq. 4:

        z = LayerNorm(x + Sublayer(x))

    applied after every layer, each with its own `LayerNorm`; a layer that changes the size gets its
    input through a learned `P` (no bias, He et al.'s 2016 projection shortcut):
    `z = LayerNorm(P x + Sublayer(x))`, or `z = Sublayer(x)` with `projected_residual=False`.  The
    paper's residual BiLSTM stack (Table 2, "BLSTM†") is a stack of `lstm` layers.  Variational
    dropout applies to the input of every layer but the first; residual outputs are zero at padding.

    Registered as a `Seq2SeqEncoder` with name "residual_stack".

    # Parameters

    layers : `List[Seq2SeqEncoder]`, required
        Applied in order; each layer's input size must equal the previous layer's output size.
    dropout : `float`, optional (default = `0.0`)
        Variational dropout between consecutive layers.
    residual : `bool`, optional (default = `True`)
        `False` applies every layer plainly (the paper's stacks without residuals, Table 2).
    projected_residual : `bool`, optional (default = `True`)
        A residual connection through `P` for the layers that change the size; `False` applies
        them plainly.
    """

    def __init__(
        self,
        layers: List[Seq2SeqEncoder],
        dropout: float = 0.0,
        residual: bool = True,
        projected_residual: bool = True,
    ) -> None:
        super().__init__()
        if not layers:
            raise ConfigurationError("ResidualStack needs at least one layer.")
        if not 0.0 <= dropout < 1.0:
            raise ConfigurationError(f"ResidualStack needs 0 <= dropout < 1, got {dropout}.")
        for index in range(1, len(layers)):
            previous_dim = layers[index - 1].get_output_dim()
            input_dim = layers[index].get_input_dim()
            if input_dim != previous_dim:
                raise ConfigurationError(
                    f"ResidualStack layer {index} takes inputs of size {input_dim}, "
                    f"but layer {index - 1} outputs vectors of size {previous_dim}."
                )
        self._layers = torch.nn.ModuleList(layers)
        keeps_size = [layer.get_input_dim() == layer.get_output_dim() for layer in layers]
        # One LayerNorm per residual layer, and P for those that change the size, keyed by index.
        self._layer_norms = torch.nn.ModuleDict(
            {
                str(index): torch.nn.LayerNorm(layer.get_output_dim())
                for index, layer in enumerate(layers)
                if residual and (keeps_size[index] or projected_residual)
            }
        )
        self._projections = torch.nn.ModuleDict(
            {
                str(index): torch.nn.Linear(layer.get_input_dim(), layer.get_output_dim(), bias=False)
                for index, layer in enumerate(layers)
                if residual and projected_residual and not keeps_size[index]
            }
        )
        self._dropout = VariationalDropout(dropout) if dropout > 0 else None

    def get_input_dim(self) -> int:
        return self._layers[0].get_input_dim()

    def get_output_dim(self) -> int:
        return self._layers[-1].get_output_dim()

    def is_bidirectional(self) -> bool:
        return self._layers[-1].is_bidirectional()

    def forward(self, inputs: torch.Tensor, mask: Optional[torch.BoolTensor] = None) -> torch.Tensor:
        """
        # Parameters

        inputs : `torch.Tensor`
            `(batch_size, sequence_length, input_dim)`
        mask : `torch.BoolTensor`, optional
            `(batch_size, sequence_length)`, `True` at real tokens.

        # Returns

        `(batch_size, sequence_length, output_dim)`
        """
        mask = inputs.new_ones(inputs.size()[:2], dtype=torch.bool) if mask is None else mask.bool()
        # Shape: (batch_size, sequence_length, 1)
        padding = ~mask.unsqueeze(-1) if len(self._layer_norms) > 0 else None
        output = inputs
        for index, layer in enumerate(self._layers):
            if index > 0 and self._dropout is not None and self.training:  # in evaluation an identity
                output = self._dropout(output)
            # Shape: (batch_size, sequence_length, layer.get_output_dim())
            encoded = layer(output, mask)
            key = str(index)
            if key in self._layer_norms:
                # Eq. 4: z = LayerNorm(x + Sublayer(x)), or LayerNorm(P x + Sublayer(x)).
                shortcut = self._projections[key](output) if key in self._projections else output
                encoded = self._layer_norms[key](shortcut + encoded).masked_fill(padding, 0.0)
            output = encoded
        return output
