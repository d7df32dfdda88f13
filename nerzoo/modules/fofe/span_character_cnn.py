"""
A character CNN over every span of a sentence at once (FOFE-NER's "Char CNN of word fragment").
"""

from typing import Sequence

import torch
from allennlp.common.checks import ConfigurationError


def range_max(values: torch.Tensor, starts: torch.LongTensor, ends: torch.LongTensor) -> torch.Tensor:
    """
    `max(values[b, starts[b, s] : ends[b, s]])` for every query, 0 for an empty range.

    A sparse table (level k holds the maxima of the windows of 2^k positions starting at each
    position), built over the batch laid end to end, answers each query with two row lookups
    inside its own range.

    # Parameters

    values : `(batch_size, length, channels)`, non-negative (ReLU outputs; 0 is the empty maximum)
    starts, ends : `(batch_size, num_queries)`, `ends` exclusive, `0 <= starts`, `ends <= length`

    # Returns

    `(batch_size, num_queries, channels)`
    """
    batch_size, length, channels = values.shape
    widths = (ends - starts).clamp(min=0)
    max_width = int(widths.max()) if widths.numel() else 0
    if max_width == 0 or length == 0:
        return values.new_zeros(batch_size, starts.size(1), channels)
    num_rows = batch_size * length
    table = _sparse_table(values.reshape(num_rows, channels), max_width.bit_length())
    # floor(log2(width)) in integers: the number of levels k >= 1 with 2^k <= width.
    level = sum((widths >= 2**k).long() for k in range(1, max_width.bit_length()))
    row_offsets = torch.arange(batch_size, device=values.device).unsqueeze(1) * length + level * num_rows
    left = (row_offsets + starts.clamp(max=length - 1)).view(-1)
    right = (row_offsets + (ends - 2**level).clamp(min=0, max=length - 1)).view(-1)
    result = torch.maximum(table.index_select(0, left), table.index_select(0, right))
    result = result.view(batch_size, -1, channels)
    return result * (widths > 0).unsqueeze(-1).to(result.dtype)


def _sparse_table(rows: torch.Tensor, num_levels: int) -> torch.Tensor:
    """
    `(num_levels * num_rows, channels)`: level k (rows `k * num_rows` on) holds at row p the maximum
    of `rows[p : p + 2^k]` (cut short at the end).
    """
    num_rows = rows.size(0)
    levels = [rows]
    for level in range(1, num_levels):
        shift = min(2 ** (level - 1), num_rows)
        previous = levels[-1]
        levels.append(torch.cat([torch.maximum(previous[:-shift], previous[shift:]), previous[num_rows - shift :]]))
    return torch.cat(levels)


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

    def forward(self, characters: torch.Tensor, starts: torch.LongTensor, ends: torch.LongTensor) -> torch.Tensor:
        """
        characters : `(batch_size, num_characters, input_dim)`, padding zeroed
        starts, ends : `(batch_size, num_spans)` character offsets of the fragments, `ends` exclusive

        Returns `(batch_size, num_spans, output_dim)`.
        """
        # All kernel heights as one convolution, each kernel zero-padded to the largest height; the
        # sequence zero-padded to a multiple of _LENGTH_QUANTUM so that batches share a few shapes.
        largest = max(self.kernel_sizes)
        num_characters = characters.size(1)
        padded_length = -(-(num_characters + largest - 1) // _LENGTH_QUANTUM) * _LENGTH_QUANTUM
        channels_first = torch.nn.functional.pad(characters.transpose(1, 2), (0, padded_length - num_characters))
        weight = torch.cat(
            [torch.nn.functional.pad(conv.weight, (0, largest - conv.kernel_size[0])) for conv in self.convolutions]
        )
        bias = torch.cat([conv.bias for conv in self.convolutions])
        # Shape: (batch_size, padded_length - largest + 1, output_dim), the first num_characters real.
        windows = torch.relu(torch.nn.functional.conv1d(channels_first, weight, bias)).transpose(1, 2)
        pooled = []
        for kernel_size, maps in zip(self.kernel_sizes, windows.split(self.convolutions[0].out_channels, dim=-1)):
            # Windows of height h start at [char_start, char_end - h]; none when the fragment is shorter.
            pooled.append(range_max(maps, starts, (ends - kernel_size + 1).clamp(max=num_characters)))
        return torch.cat(pooled, dim=-1)


# Sequence lengths are rounded up to a multiple of this (see SpanCharacterCnn.forward).
_LENGTH_QUANTUM = 256
