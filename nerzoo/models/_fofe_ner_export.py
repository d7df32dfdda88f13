"""
`FofeNer`'s span scores in the form `allennlp export` traces to ONNX: its forward at prediction (the
first layer from the codes, the feed-forward net, over every fragment of up to `max_span_width` words
inside its sentence), the logits laid out per start and width.  Two parts take sizes from the batch,
which a trace would fix, and have their own forms here: the characters joined into one sequence (each
sentence gets a stretch of `num_tokens * (num_characters + 1)` positions, zeros after its words, so
the sequence's size comes from the input's shape), and the CNN's range maximum, whose sparse table has
as many levels as the widest fragment needs (a scripted loop, an ONNX `Loop`).  The FOFE codes trace
as they are: `prefix_codes` takes its branch from the traced length (the words' one matrix product,
eq. 4.1, of the run's own length; the characters' blocks, longer than a block when traced), and both
branches hold for any length.  Tested against the model's forward.
"""

from typing import Dict, List, Optional, Tuple

import torch
from allennlp.data import TextFieldTensors

from nerzoo.modules.fofe.first_layer import Term
from nerzoo.modules.fofe.span_character_cnn import SpanCharacterCnn
from nerzoo.modules.fofe.span_features import character_codes, word_codes
from nerzoo.modules.fofe.spans import FlatSpans, enumerate_spans


@torch.jit.script
def _range_max(values: torch.Tensor, starts: torch.Tensor, ends: torch.Tensor) -> torch.Tensor:
    """`range_max` of `nerzoo.modules.fofe.span_character_cnn` (same arguments, same sparse table), scripted."""
    batch_size, length, channels = values.size(0), values.size(1), values.size(2)
    widths = (ends - starts).clamp(min=0)
    max_width = int(widths.max())
    num_rows = batch_size * length
    # Level k holds at row p the maximum of rows p .. p + 2^k - 1 (cut short at the end); at least level 0.
    level_rows = values.reshape(num_rows, channels)
    levels, window, num_levels = [level_rows], 1, 1
    while 2 * window <= max_width:
        shift = min(window, num_rows)
        maxima = torch.maximum(level_rows[: num_rows - shift], level_rows[shift:])
        level_rows = torch.cat([maxima, level_rows[num_rows - shift :]])
        levels.append(level_rows)
        window, num_levels = 2 * window, num_levels + 1
    table = torch.cat(levels)
    # Per query floor(log2(width)) and 2 ** that.
    level, windows = torch.zeros_like(widths), torch.ones_like(widths)
    for _ in range(1, num_levels):
        wider = widths >= 2 * windows
        level, windows = level + wider.long(), torch.where(wider, 2 * windows, windows)
    row_offsets = torch.arange(batch_size, device=values.device).unsqueeze(1) * length + level * num_rows
    left = (row_offsets + starts.clamp(max=length - 1)).view(-1)
    right = (row_offsets + (ends - windows).clamp(min=0, max=length - 1)).view(-1)
    result = torch.maximum(table.index_select(0, left), table.index_select(0, right)).view(batch_size, -1, channels)
    return result * (widths > 0).unsqueeze(-1).to(result.dtype)


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
    `SpanCharacterCnn.forward` without its run-time padding: the kernels, zero-padded to the largest
    height, stored once; the sequence padded by that height less one; the range maximum scripted.

    # Parameters

    cnn : `SpanCharacterCnn`, required
    """

    def __init__(self, cnn: SpanCharacterCnn) -> None:
        super().__init__()
        self.kernel_sizes = cnn.kernel_sizes
        self.num_filters = cnn.convolutions[0].out_channels
        largest = max(self.kernel_sizes)
        weights = [
            torch.nn.functional.pad(conv.weight, (0, largest - conv.kernel_size[0])) for conv in cnn.convolutions
        ]
        self.register_buffer("weight", torch.cat(weights).detach())
        self.register_buffer("bias", torch.cat([conv.bias for conv in cnn.convolutions]).detach())

    def forward(self, characters: torch.Tensor, starts: torch.LongTensor, ends: torch.LongTensor) -> torch.Tensor:
        """As `SpanCharacterCnn.forward`: `(batch_size, num_characters, input_dim)`, `(batch_size, num_spans)` offsets."""
        num_characters = characters.size(1)
        padded = torch.nn.functional.pad(characters.transpose(1, 2), (0, self.weight.size(2) - 1))
        windows = torch.relu(torch.nn.functional.conv1d(padded, self.weight, self.bias)).transpose(1, 2)
        pooled = []
        for kernel_size, maps in zip(self.kernel_sizes, windows.split(self.num_filters, dim=-1)):
            pooled.append(_range_max(maps, starts, (ends - kernel_size + 1).clamp(max=num_characters)))
        return torch.cat(pooled, dim=-1)


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
        if model.first_pass is not None:
            raise ValueError("a second pass (fofe_ner with a first_pass) has no exported form")
        self.model = model
        self.cnn = None if model.character_cnn is None else ExportedSpanCharacterCnn(model.character_cnn)

    def forward(
        self, tokens: TextFieldTensors, mask: torch.BoolTensor, parse: Optional[Dict[str, torch.Tensor]] = None
    ) -> torch.Tensor:
        model, (batch_size, num_tokens) = self.model, mask.shape
        starts, ends, span_mask = enumerate_spans(mask, model.max_span_width)
        spans = FlatSpans.where(span_mask, starts, ends)
        words = [
            word_codes(embedder(**tokens[name]) * mask.unsqueeze(-1), mask, model.alpha)
            for name, embedder in model.word_embedders.items()
        ]
        characters, cnn_features = None, None
        if model.character_embedding is not None:
            character_ids = tokens[model.characters]["token_characters"]
            embedding, alpha = model.character_embedding, model.character_alpha
            characters = character_codes(character_ids, mask, embedding, alpha, join=join_words)
            if self.cnn is not None:
                offsets = characters.span_offsets(spans)
                cnn_features = characters.cnn_features(model.cnn_character_embedding, self.cnn, *offsets)
        alphas = model.alpha, model.character_alpha
        first_layer = model.feedforward.first_layer.from_codes(
            words, characters, mask, spans, *alphas, model.max_span_width, False, cnn_features, gathered_row_sums
        )
        logits = model.output_layer(model.feedforward.from_first_layer(first_layer))  # (num_spans, num_classes)
        scores = logits.new_zeros(batch_size, num_tokens * model.max_span_width, logits.size(-1))
        return scores.index_put((span_mask,), logits).view(batch_size, num_tokens, model.max_span_width, -1)
