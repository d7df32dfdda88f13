"""
`FofeNer`'s span scores in the form `allennlp export` traces to ONNX: its forward at prediction over
every fragment of up to `max_span_width` words inside its sentence, the logits laid out per start
and width.  Two parts take sizes from the batch, which a trace would fix, and have their own forms
here: the characters joined into one sequence (a stretch of `num_tokens * (num_characters + 1)`
positions per sentence, zeros after its words) and the CNN's range maximum (scripted: its sparse
table has as many levels as the widest fragment needs).  The FOFE codes trace as they are: either
branch of `prefix_codes` (the traced length's) holds for any length.  Tested against the model's forward.
"""

from typing import Dict, List, Optional, Tuple

import torch
from allennlp.data import TextFieldTensors

from nerzoo.modules.fofe.first_layer import Term
from nerzoo.modules.fofe.span_character_cnn import SpanCharacterCnn, pooled_windows, range_max
from nerzoo.modules.fofe.spans import FlatSpans, enumerate_spans


def gathered_row_sums(terms: List[Term]) -> torch.Tensor:
    """`weighted_row_sums` as gathers: `embedding_bag`, the model's, is a loop over the sums in ONNX (0.75x the speed)."""
    total = None
    for table, rows, weight in terms:
        part = table.index_select(0, rows)
        part = part if weight is None else part * weight.unsqueeze(-1)
        total = part if total is None else total + part
    return total


class ExportedSpanCharacterCnn(torch.nn.Module):
    """
    `SpanCharacterCnn.forward` without its run-time rounding: the stacked kernels stored once, the
    sequence padded by the largest height less one, `range_max` scripted (its loop an ONNX `Loop`).

    # Parameters

    cnn : `SpanCharacterCnn`, required
    """

    def __init__(self, cnn: SpanCharacterCnn) -> None:
        super().__init__()
        self.kernel_sizes = cnn.kernel_sizes
        weight, bias = cnn.stacked_kernels()
        self.register_buffer("weight", weight.detach())
        self.register_buffer("bias", bias.detach())
        self.range_max = torch.jit.script(range_max)

    def forward(self, characters: torch.Tensor, starts: torch.LongTensor, ends: torch.LongTensor) -> torch.Tensor:
        """As `SpanCharacterCnn.forward`: `(batch_size, num_characters, input_dim)`, `(batch_size, num_spans)` offsets."""
        kernels, padding = (self.weight, self.bias), self.weight.size(2) - 1
        return pooled_windows(characters, padding, kernels, self.kernel_sizes, starts, ends, self.range_max)


def join_words(
    character_ids: torch.LongTensor, mask: torch.BoolTensor, separator: int
) -> Tuple[torch.LongTensor, torch.LongTensor, torch.LongTensor]:
    """
    `nerzoo.modules.fofe.span_features.join_words` with a stretch of `num_tokens * (num_characters + 1)`
    positions per sentence: each sentence's words, each followed by `separator`, then zeros.  The
    `(batch * num_tokens * (num_characters + 1),)` ids and each word's offset and length `(batch, num_tokens)`.
    """
    batch_size, num_tokens, word_length = character_ids.shape
    stretch = num_tokens * (word_length + 1)
    present = character_ids > 0
    lengths = present.sum(-1) * mask
    slots = (lengths + 1) * mask
    sentence_starts = torch.arange(batch_size, device=mask.device).unsqueeze(1) * stretch
    offsets = torch.cumsum(slots, 1) - slots + sentence_starts
    flat = character_ids.new_zeros(batch_size * stretch)
    positions = offsets.unsqueeze(-1) + torch.arange(word_length, device=mask.device)
    flat = flat.index_put((positions[present],), character_ids[present])
    flat = flat.index_put(((offsets + lengths)[mask],), torch.full_like(lengths[mask], separator))
    return flat, offsets * mask, lengths


class ExportedFofeNer(torch.nn.Module):
    """
    `model`'s logits of every fragment, `(batch_size, num_tokens, max_span_width, num_classes)`: entry
    `[b, i, w]` scores words `[i, i + w + 1)` of sentence `b` (class 0 is NONE); entries past a
    sentence's end are 0.  In eval mode (no dropout); a second pass is not exported.

    # Parameters

    model : `FofeNer`, required
        Its modules, parameters included, are shared, not copied.
    """

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model
        self.cnn = None if model.character_cnn is None else ExportedSpanCharacterCnn(model.character_cnn)

    def forward(
        self, tokens: TextFieldTensors, mask: torch.BoolTensor, parse: Optional[Dict[str, torch.Tensor]] = None
    ) -> torch.Tensor:
        model, (batch_size, num_tokens) = self.model, mask.shape
        starts, ends, span_mask = enumerate_spans(mask, model.max_span_width)
        spans = FlatSpans.where(span_mask, starts, ends)
        words, characters, cnn_features = model.codes(tokens, mask, spans, join=join_words, cnn=self.cnn)
        alphas = model.alpha, model.character_alpha
        first_layer = model.feedforward.first_layer.from_codes(
            words, characters, mask, spans, *alphas, model.max_span_width, False, cnn_features, gathered_row_sums
        )
        logits = model.output_layer(model.feedforward.from_first_layer(first_layer))  # (num_spans, num_classes)
        scores = logits.new_zeros(batch_size, num_tokens * model.max_span_width, logits.size(-1))
        return scores.index_put((span_mask,), logits).view(batch_size, num_tokens, model.max_span_width, -1)
