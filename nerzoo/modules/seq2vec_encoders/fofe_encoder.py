import math
from typing import Optional, Union

import torch
from allennlp.common.checks import ConfigurationError
from allennlp.modules.seq2vec_encoders.seq2vec_encoder import Seq2VecEncoder

from nerzoo.modules.fofe.codes import prefix_codes, span_codes


@Seq2VecEncoder.register("fofe")
class FofeEncoder(Seq2VecEncoder):
    """
    The FOFE code of a whole sequence: Mingbin Xu, "Fixed-size Ordinally-Forgetting Encoding and
    Its Applications", MSc thesis, York University, 2017, eq. 3.1 and §5.2.2 (FOFE-NER's character
    features).  For inputs `x_0 .. x_{T-1}` (character embeddings, the projected codes of eq. 4.3)
    the output is the left-to-right code, the last row of `M V` in eq. 4.1,

        z = sum_{s <= L} alpha^(L - s) x_s          (L = the last unmasked position)

    then, when `bidirectional`, the right-to-left code (the characters read backwards)

        z' = sum_{s >= F} alpha^(s - F) x_s         (F = the first unmasked position).

    Masked positions count as zero vectors; a fully masked sequence (a padding word) gives zeros.
    As `{"type": "character_encoding", "embedding": {...}, "encoder": {"type": "fofe", ...}}` it is
    the FOFE character encoder.  Registered as a `Seq2VecEncoder` with name "fofe".

    # Parameters

    input_dim : `int`, required
        Size of `x_t`, the input `(batch_size, num_steps, input_dim)`.
    alpha : `float`, optional (default = `0.5`)
        The forgetting factor, in (0, 1]; `alpha <= 0.5` keeps the one-hot code unique
        (theorem 2), `alpha = 1` is a bag of characters.  In (0, 1) when trainable.
    trainable_alpha : `bool`, optional (default = `False`)
        Learn alpha, stored as a logit (`alpha = sigmoid(logit)`) so that it stays in (0, 1).
    bidirectional : `bool`, optional (default = `True`)
        Concatenate the right-to-left code; the output is `(batch_size, 2 * input_dim)`, else
        `(batch_size, input_dim)`.
    """

    def __init__(
        self,
        input_dim: int,
        alpha: float = 0.5,
        trainable_alpha: bool = False,
        bidirectional: bool = True,
    ) -> None:
        super().__init__()
        if input_dim <= 0:
            raise ConfigurationError(f"FofeEncoder needs input_dim > 0, got {input_dim}.")
        if trainable_alpha and not 0.0 < alpha < 1.0:
            raise ConfigurationError(f"FofeEncoder needs 0 < alpha < 1 with trainable_alpha, got {alpha}.")
        if not 0.0 < alpha <= 1.0:
            raise ConfigurationError(f"FofeEncoder needs 0 < alpha <= 1, got {alpha}.")
        self._input_dim = input_dim
        self._bidirectional = bidirectional
        self._fixed_alpha = float(alpha)
        self.alpha_logit: Optional[torch.nn.Parameter] = None
        if trainable_alpha:
            self.alpha_logit = torch.nn.Parameter(torch.tensor(math.log(alpha / (1.0 - alpha))))

    @property
    def alpha(self) -> Union[float, torch.Tensor]:
        """The forgetting factor: a float, or a 0-d tensor (with its graph) when trainable."""
        return self._fixed_alpha if self.alpha_logit is None else torch.sigmoid(self.alpha_logit)

    def get_input_dim(self) -> int:
        return self._input_dim

    def get_output_dim(self) -> int:
        return self._input_dim * (2 if self._bidirectional else 1)

    def is_bidirectional(self) -> bool:
        return self._bidirectional

    def forward(self, inputs: torch.Tensor, mask: Optional[torch.BoolTensor] = None) -> torch.Tensor:
        """
        # Parameters

        inputs : `torch.Tensor`, `(batch_size, num_steps, input_dim)`
        mask : `torch.BoolTensor`, optional, `(batch_size, num_steps)` (any integer or bool type;
            nonzero is a real position)

        # Returns

        `(batch_size, get_output_dim())`: the left-to-right code, then the right-to-left one.
        """
        batch_size, num_steps, input_dim = inputs.shape
        if input_dim != self._input_dim:
            raise ConfigurationError(f"FofeEncoder was built for input_dim {self._input_dim}, got {input_dim}.")
        mask = inputs.new_ones(batch_size, num_steps, dtype=torch.bool) if mask is None else mask.bool()
        # The code of the span from the first to the last unmasked position (empty for a padding row).
        positions = torch.arange(num_steps, device=inputs.device).unsqueeze(0)
        present = mask.any(dim=1, keepdim=True)
        first = torch.where(mask, positions, num_steps).amin(dim=1, keepdim=True) * present
        end = (torch.where(mask, positions, -1).amax(dim=1, keepdim=True) + 1) * present
        alpha = self.alpha
        codes = [span_codes(prefix_codes(inputs, mask, alpha), first, end, alpha)]
        if self._bidirectional:
            right_to_left = prefix_codes(inputs, mask, alpha, reverse=True)
            codes.append(span_codes(right_to_left, first, end, alpha, reverse=True))
        return torch.cat(codes, dim=-1).squeeze(1)
