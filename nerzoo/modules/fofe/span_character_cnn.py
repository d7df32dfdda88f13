"""
A character CNN over every span of a sentence at once (FOFE-NER's "Char CNN of word fragment").
"""

from typing import Callable, Sequence, Tuple

import torch
from allennlp.common.checks import ConfigurationError

# Sequence lengths are rounded up to a multiple of this, so that batches share a few shapes.
_LENGTH_QUANTUM = 256


def range_max(values: torch.Tensor, starts: torch.Tensor, ends: torch.Tensor) -> torch.Tensor:
    """
    `max(values[b, starts[b, s] : ends[b, s]])` for every query, 0 for an empty range.

    A sparse table (level k holds at row p the maximum of rows `p .. p + 2^k - 1`, cut short at the
    end), built over the batch laid end to end, answers each query with two row lookups inside its
    own range.  TorchScript can compile it: the export scripts it, so that the number of levels
    follows the widest query.

    # Parameters

    values : `(batch_size, length, channels)`, `length >= 1`, non-negative (ReLU outputs; 0 is the empty maximum)
    starts, ends : `(batch_size, num_queries)`, `ends` exclusive, `0 <= starts`, `ends <= length`

    # Returns

    `(batch_size, num_queries, channels)`
    """
    batch_size, length, channels = values.size(0), values.size(1), values.size(2)
    widths = (ends - starts).clamp(min=0)
    max_width = int(widths.max()) if widths.numel() > 0 else 0
    num_rows = batch_size * length
    level_rows = values.reshape(num_rows, channels)
    levels, window = [level_rows], 1
    while 2 * window <= max_width:
        shift = min(window, num_rows)
        maxima = torch.maximum(level_rows[: num_rows - shift], level_rows[shift:])
        level_rows = torch.cat([maxima, level_rows[num_rows - shift :]])
        levels.append(level_rows)
        window = 2 * window
    table = torch.cat(levels)
    # Per query floor(log2(width)) and 2 ** that.
    level, windows = torch.zeros_like(widths), torch.ones_like(widths)
    for _ in range(1, len(levels)):
        wider = widths >= 2 * windows
        level, windows = level + wider.long(), torch.where(wider, 2 * windows, windows)
    row_offsets = torch.arange(batch_size, device=values.device).unsqueeze(1) * length + level * num_rows
    left = (row_offsets + starts.clamp(max=length - 1)).view(-1)
    right = (row_offsets + (ends - windows).clamp(min=0, max=length - 1)).view(-1)
    result = torch.maximum(table.index_select(0, left), table.index_select(0, right))
    result = result.view(batch_size, starts.size(1), channels)
    return result * (widths > 0).unsqueeze(-1).to(result.dtype)


def pooled_windows(
    characters: torch.Tensor,
    padding: int,
    kernels: Tuple[torch.Tensor, torch.Tensor],
    kernel_sizes: Sequence[int],
    starts: torch.LongTensor,
    ends: torch.LongTensor,
    maximum: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor] = range_max,
) -> torch.Tensor:
    """
    One convolution with the stacked `kernels` (`SpanCharacterCnn.stacked_kernels`) over `characters`
    `(batch_size, num_characters, input_dim)` zero-padded by `padding` positions, ReLU'd and, per
    kernel height, max-pooled over the windows inside each fragment: `(batch_size, num_spans, output_dim)`.
    """
    num_characters = characters.size(1)
    channels_first = torch.nn.functional.pad(characters.transpose(1, 2), (0, padding))
    windows = torch.relu(torch.nn.functional.conv1d(channels_first, *kernels)).transpose(1, 2)
    pooled = []
    for kernel_size, maps in zip(kernel_sizes, windows.split(kernels[0].size(0) // len(kernel_sizes), dim=-1)):
        # Windows of height h start at [char_start, char_end - h]; none when the fragment is shorter.
        pooled.append(maximum(maps, starts, (ends - kernel_size + 1).clamp(max=num_characters)))
    return torch.cat(pooled, dim=-1)


class SpanCharacterCnn(torch.nn.Module):
    """
    Character CNN of word fragments, Xu (2017), "Fixed-size Ordinally-Forgetting Encoding and Its
    Applications", MSc thesis, York University, §2.2.2 (eq. 2.10-2.11) and §5.5.1: for each kernel
    height h, `num_filters` feature maps sweep the fragment's characters; each map is ReLU'd and
    max-pooled over the windows that lie inside the fragment.

    The convolution runs once over the sentence's character sequence; a span's pooled value is the
    maximum over the window positions `[char_start, char_end - h]`, read from a sparse table, so the
    result equals running the CNN on each fragment alone (a fragment shorter than h gives 0).

    # Parameters

    input_dim : `int`, required
        Character embedding size.
    num_filters : `int`, optional (default = `16`)
        Feature maps per kernel height (the thesis' kernel depth 16).
    kernel_sizes : `Sequence[int]`, optional (default = `(2, ..., 9)`)

    Output dim: `num_filters * len(kernel_sizes)`.
    """

    def __init__(
        self, input_dim: int, num_filters: int = 16, kernel_sizes: Sequence[int] = tuple(range(2, 10))
    ) -> None:
        super().__init__()
        if num_filters < 1 or not kernel_sizes or min(kernel_sizes) < 1:
            raise ConfigurationError(f"need num_filters >= 1 and kernel sizes >= 1, got {num_filters}, {kernel_sizes}")
        self.kernel_sizes = list(kernel_sizes)
        self.convolutions = torch.nn.ModuleList(
            torch.nn.Conv1d(input_dim, num_filters, kernel_size) for kernel_size in self.kernel_sizes
        )
        self._output_dim = num_filters * len(self.kernel_sizes)

    def get_output_dim(self) -> int:
        return self._output_dim

    def stacked_kernels(self) -> Tuple[torch.Tensor, torch.Tensor]:
        """All kernel heights as one convolution's weight and bias, each kernel zero-padded to the largest height."""
        largest = max(self.kernel_sizes)
        weights = [
            torch.nn.functional.pad(conv.weight, (0, largest - conv.kernel_size[0])) for conv in self.convolutions
        ]
        return torch.cat(weights), torch.cat([conv.bias for conv in self.convolutions])

    def forward(self, characters: torch.Tensor, starts: torch.LongTensor, ends: torch.LongTensor) -> torch.Tensor:
        """
        characters : `(batch_size, num_characters, input_dim)`, padding zeroed
        starts, ends : `(batch_size, num_spans)` character offsets of the fragments, `ends` exclusive

        Returns `(batch_size, num_spans, output_dim)`.
        """
        num_characters, largest = characters.size(1), max(self.kernel_sizes)
        padded_length = -(-(num_characters + largest - 1) // _LENGTH_QUANTUM) * _LENGTH_QUANTUM
        return pooled_windows(
            characters, padded_length - num_characters, self.stacked_kernels(), self.kernel_sizes, starts, ends
        )
