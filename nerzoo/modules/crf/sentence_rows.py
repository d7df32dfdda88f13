"""
The sentences inside document-level instances laid out as rows of their own, so that a CRF can
score each sentence apart while the encoder below it reads the whole document.
"""

from typing import List, Sequence, Tuple

import torch


class SentenceRows:
    """
    Index tensors mapping `(batch_size, num_steps, ...)` document tensors to `(num_sentences,
    max_sentence_length, ...)` sentence tensors and back.

    # Parameters

    sentence_spans : `Sequence[Sequence[Tuple[int, int]]]`
        Per instance, `(start, end)` (end exclusive) of each of its sentences; empty sentences are
        skipped.
    num_steps : `int`
        Padded length of the document tensors.
    device : `torch.device`
    """

    def __init__(self, sentence_spans: Sequence[Sequence[Tuple[int, int]]], num_steps: int, device) -> None:
        rows: List[int] = []
        starts: List[int] = []
        lengths: List[int] = []
        for row, spans in enumerate(sentence_spans):
            for start, end in spans:
                if end > start:
                    rows.append(row)
                    starts.append(start)
                    lengths.append(end - start)
        longest = max(lengths, default=0)
        offsets = torch.arange(longest, device=device).unsqueeze(0)
        length_tensor = torch.tensor(lengths, dtype=torch.long, device=device).unsqueeze(1)
        self.mask = offsets < length_tensor  # (num_sentences, longest)
        self.rows = torch.tensor(rows, dtype=torch.long, device=device).unsqueeze(1).expand(-1, longest)
        start_tensor = torch.tensor(starts, dtype=torch.long, device=device).unsqueeze(1)
        self.positions = (start_tensor + offsets).clamp(max=max(num_steps - 1, 0))
        self.num_steps = num_steps

    def gather(self, values: torch.Tensor) -> torch.Tensor:
        """`(batch_size, num_steps, ...)` to `(num_sentences, longest, ...)`; padding holds copies."""
        return values[self.rows, self.positions]

    def scatter(self, values: torch.Tensor, batch_size: int) -> torch.Tensor:
        """`(num_sentences, longest, ...)` back to `(batch_size, num_steps, ...)`, zeros elsewhere."""
        output = values.new_zeros((batch_size, self.num_steps) + tuple(values.shape[2:]))
        output[self.rows[self.mask], self.positions[self.mask]] = values[self.mask]
        return output
