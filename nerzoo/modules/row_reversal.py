"""Each row of a right-padded batch reversed within its own length, the padding left where it is."""

import torch


def reversal_index(mask: torch.BoolTensor) -> torch.LongTensor:
    """
    `(batch_size, num_steps)` indices that reverse every row within its length and leave the padding
    where it is: row `[a b c _ _]` gathered with it gives `[c b a _ _]`.  The map is its own inverse.
    """
    steps = torch.arange(mask.size(1), device=mask.device).unsqueeze(0)
    lengths = mask.long().sum(dim=1, keepdim=True)
    return torch.where(steps < lengths, lengths - 1 - steps, steps)


def gather_steps(values: torch.Tensor, index: torch.LongTensor) -> torch.Tensor:
    """`values[b, index[b, t]]` for `(batch_size, num_steps, dim)` values."""
    return values.gather(1, index.unsqueeze(-1).expand(-1, -1, values.size(-1)))
