"""
The fixed-size features of FOFE-NER's fragments: Xu (2017), "Fixed-size Ordinally-Forgetting
Encoding and Its Applications", MSc thesis, York University, §5.2 (second pass: §5.4).

For each word vocabulary (`WordCodes`), a fragment `x_i .. x_{j-1}` has five features: its bag of
words, and the FOFE codes (eq. 3.1, projected form eq. 4.3) of the left context including and
excluding the fragment (`x_0 .. x_{j-1}`, `x_0 .. x_{i-1}`) and of the right context, read right to
left, including and excluding it.  Its characters (`CharacterCodes`: the words joined by a
separator) give two more, their left-to-right and right-to-left FOFE, and a character CNN.

All of them are prefix codes of the sentence (`nerzoo.modules.fofe.codes`) read at the fragment's two
ends, so the features of any set of spans (`FlatSpans`) are gathers, without a loop over spans.
"""

from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

import torch
from allennlp.nn.util import batched_index_select

from nerzoo.modules.fofe.codes import prefix_codes, span_codes
from nerzoo.modules.fofe.spans import FlatSpans


def uniform_embedding(num_embeddings: int, dim: int) -> torch.nn.Embedding:
    """An embedding initialised uniformly in [-1, 1] (§5.5.1), row 0 (padding) zero."""
    embedding = torch.nn.Embedding(num_embeddings, dim, padding_idx=0)
    with torch.no_grad():
        embedding.weight.uniform_(-1.0, 1.0)
        embedding.weight[0].zero_()
    return embedding


def gather_positions(values: torch.Tensor, span_batch: torch.LongTensor, positions: torch.LongTensor) -> torch.Tensor:
    """`values[span_batch[k], positions[k]]` for every k: `(batch, length, dim)` -> `(num_spans, dim)`."""
    batch_size, length, dim = values.shape
    return values.reshape(batch_size * length, dim).index_select(0, span_batch * length + positions)


class WordCodes(NamedTuple):
    """
    One word vocabulary's embedded words `(batch, num_tokens, dim)` and the prefix codes its five
    features are read from, each `(batch, num_tokens + 1, dim)`: running sums (alpha = 1, the bag of
    words), left-to-right and right-to-left codes, and the left and right context codes (the same
    two, or those of the sentence with the first pass's entities substituted, §5.4).
    """

    embedded: torch.Tensor
    sums: torch.Tensor
    left: torch.Tensor
    right: torch.Tensor
    left_context: torch.Tensor
    right_context: torch.Tensor


def word_codes(
    embedded: torch.Tensor,
    mask: torch.BoolTensor,
    alpha: float,
    entities: Optional[Dict[str, torch.Tensor]] = None,
    type_embedding: Optional[torch.nn.Embedding] = None,
) -> WordCodes:
    """
    # Parameters

    embedded : `(batch, num_tokens, dim)`, zero at padding
    mask : `(batch, num_tokens)`
    alpha : `float`, the forgetting factor
    entities : `Dict[str, torch.Tensor]`, optional
        The first pass's entities as per-token tensors (`nerzoo.modules.fofe.second_pass`); with
        them the contexts are `substituted_contexts`.
    type_embedding : `torch.nn.Embedding`, optional
        One vector per entity type, required with `entities`.
    """
    left = prefix_codes(embedded, mask, alpha)
    right = prefix_codes(embedded, mask, alpha, reverse=True)
    sums = prefix_codes(embedded, mask, 1.0)
    left_context, right_context = left, right
    if entities is not None:
        left_context, right_context = substituted_contexts(embedded, mask, left, right, alpha, entities, type_embedding)
    return WordCodes(embedded, sums, left, right, left_context, right_context)


def substituted_contexts(
    embedded: torch.Tensor,
    mask: torch.BoolTensor,
    left: torch.Tensor,
    right: torch.Tensor,
    alpha: float,
    entities: Dict[str, torch.Tensor],
    type_embedding: torch.nn.Embedding,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """
    Context codes at every boundary `i` of the sentence in which each first-pass entity is one
    type token (§5.4).  An entity cut by the boundary keeps its words on the context's side (it is
    not outside the fragment); its other words belong to the fragment.  With `U`/`V` the codes of
    the substituted sequence and `a`/`b` the start/end of the entity cut at `i` (`a = b = i` if
    none): left(i) = α^(i-a) U[units before a] + (P[i] - α^(i-a) P[a]), and symmetrically on the right.

    # Parameters

    embedded : `(batch, num_tokens, dim)`; mask : `(batch, num_tokens)`
    left, right : `(batch, num_tokens + 1, dim)`, the prefix codes of `embedded`
    entities : per-token `in_entity`, `start`, `end`, `type`, each `(batch, num_tokens)`
    type_embedding : `torch.nn.Embedding`, `(num_types, dim)`

    # Returns

    The left and right context codes, each `(batch, num_tokens + 1, dim)`.
    """
    batch_size, num_tokens = mask.shape
    in_entity, entity_start = entities["in_entity"], entities["start"]
    positions = torch.arange(num_tokens, device=mask.device).unsqueeze(0)
    interior = in_entity & (entity_start < positions)  # token continues an entity
    first_word = in_entity & ~interior
    is_unit = mask & ~interior
    units_before = torch.nn.functional.pad(torch.cumsum(is_unit.long(), dim=1), (1, 0))  # (batch, T + 1)
    unit_values = torch.where(first_word.unsqueeze(-1), type_embedding(entities["type"]), embedded)
    unit_values = unit_values * is_unit.unsqueeze(-1)
    batch_index = torch.arange(batch_size, device=mask.device).unsqueeze(1).expand(-1, num_tokens)
    units = embedded.new_zeros(embedded.shape).index_put(
        (batch_index[is_unit], units_before[:, :-1][is_unit]), unit_values[is_unit]
    )
    unit_mask = positions < units_before[:, -1:]
    unit_left = prefix_codes(units, unit_mask, alpha)
    unit_right = prefix_codes(units, unit_mask, alpha, reverse=True)

    boundaries = torch.arange(num_tokens + 1, device=mask.device).unsqueeze(0).expand(batch_size, -1)
    cut = torch.nn.functional.pad(interior, (0, 1))
    cut_start = torch.where(cut, torch.nn.functional.pad(entity_start, (0, 1)), boundaries)
    cut_end = torch.where(cut, torch.nn.functional.pad(entities["end"], (0, 1)), boundaries)

    left_decay = alpha ** (boundaries - cut_start).unsqueeze(-1).float()
    left_context = left_decay * batched_index_select(unit_left, units_before.gather(1, cut_start)) + (
        left - left_decay * batched_index_select(left, cut_start)
    )
    right_decay = alpha ** (cut_end - boundaries).unsqueeze(-1).float()
    right_context = right_decay * batched_index_select(unit_right, units_before.gather(1, cut_end)) + (
        right - right_decay * batched_index_select(right, cut_end)
    )
    return left_context, right_context


class CharacterCodes(NamedTuple):
    """
    The batch's characters end to end, without padding: every word of every sentence, in order,
    each followed by the separator.  A fragment's code is a difference of two prefix codes, so the
    characters of other sentences cancel out.

    `flat_ids` `(num_characters,)`; `token_offsets`, `token_lengths` `(batch, num_tokens)`: where each
    word's characters are (0 for padding); `left`, `right` `(num_characters + 1, character_dim)`:
    prefix codes.
    """

    flat_ids: torch.LongTensor
    token_offsets: torch.LongTensor
    token_lengths: torch.LongTensor
    left: torch.Tensor
    right: torch.Tensor

    def span_offsets(self, spans: FlatSpans) -> Tuple[torch.LongTensor, torch.LongTensor]:
        """Character offsets (end exclusive) of the word spans: each `(num_spans,)`."""
        span_batch, starts, ends = spans
        character_starts = self.token_offsets[span_batch, starts]
        last_word = (ends - 1).clamp(min=0)
        character_ends = torch.maximum(
            self.token_offsets[span_batch, last_word] + self.token_lengths[span_batch, last_word], character_starts
        )
        return character_starts, character_ends

    def cnn_features(
        self,
        embedding: torch.nn.Embedding,
        cnn: torch.nn.Module,
        character_starts: torch.LongTensor,
        character_ends: torch.LongTensor,
    ) -> torch.Tensor:
        """`(num_spans, cnn_dim)`: the character CNN (a `SpanCharacterCnn`, or its exported form) of each fragment's characters."""
        # A fragment's windows lie inside it, so the CNN runs once over all the characters.
        embedded = embedding(self.flat_ids).unsqueeze(0)
        return cnn(embedded, character_starts.unsqueeze(0), character_ends.unsqueeze(0))[0]


def character_codes(
    character_ids: torch.LongTensor,
    mask: torch.BoolTensor,
    embedding: torch.nn.Embedding,
    alpha: float,
    join: Optional[Callable[..., Tuple[torch.LongTensor, torch.LongTensor, torch.LongTensor]]] = None,
) -> CharacterCodes:
    """
    # Parameters

    character_ids : `(batch, num_tokens, num_characters)`, 0 for padding
    mask : `(batch, num_tokens)`
    embedding : `torch.nn.Embedding`, its last row is the separator
    alpha : `float`, the characters' forgetting factor
    join : optional (default = `join_words`), lays the words' characters end to end
    """
    flat_ids, token_offsets, token_lengths = (join or join_words)(character_ids, mask, embedding.num_embeddings - 1)
    embedded = embedding(flat_ids).unsqueeze(0)
    left, right = prefix_codes(embedded, None, alpha)[0], prefix_codes(embedded, None, alpha, reverse=True)[0]
    return CharacterCodes(flat_ids, token_offsets, token_lengths, left, right)


def join_words(
    character_ids: torch.LongTensor, mask: torch.BoolTensor, separator: int
) -> Tuple[torch.LongTensor, torch.LongTensor, torch.LongTensor]:
    """
    The batch's characters as one sequence without padding, each word followed by `separator`:
    the `(num_characters,)` ids and each word's offset and length `(batch, num_tokens)`.
    """
    word_length = character_ids.size(-1)
    lengths = (character_ids > 0).sum(-1) * mask
    slots = (lengths + 1) * mask  # the word and its separator
    offsets = (torch.cumsum(slots.reshape(-1), 0) - slots.reshape(-1)).view(mask.shape)
    flat = character_ids.new_zeros(max(int(slots.sum()), 1))
    positions = offsets.unsqueeze(-1) + torch.arange(word_length, device=mask.device)
    present = character_ids > 0
    flat[positions[present]] = character_ids[present]
    flat[(offsets + lengths)[mask]] = separator
    return flat, offsets * mask, lengths


def span_features(
    words: Sequence[WordCodes],
    characters: Optional[CharacterCodes],
    spans: FlatSpans,
    alpha: float,
    character_alpha: float,
    cnn_features: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """
    The features of the spans, in this order: per word vocabulary the bag of words, left context
    including and excluding the fragment, right context including and excluding it; then the
    left-to-right and right-to-left character codes; then `cnn_features` `(num_spans, cnn_dim)`.

    # Returns

    `(num_spans, feature_dim)`
    """
    span_batch, starts, ends = spans
    features: List[torch.Tensor] = []
    decay = alpha ** (ends - starts).unsqueeze(-1).float()
    for codes in words:
        fragment_left = span_codes(codes.left, starts, ends, alpha, span_batch=span_batch)
        fragment_right = span_codes(codes.right, starts, ends, alpha, reverse=True, span_batch=span_batch)
        left_excluding = gather_positions(codes.left_context, span_batch, starts)
        right_excluding = gather_positions(codes.right_context, span_batch, ends)
        features += [
            span_codes(codes.sums, starts, ends, 1.0, span_batch=span_batch),
            decay * left_excluding + fragment_left,
            left_excluding,
            decay * right_excluding + fragment_right,
            right_excluding,
        ]
    if characters is not None:
        character_starts, character_ends = characters.span_offsets(spans)
        starts_, ends_ = character_starts.unsqueeze(0), character_ends.unsqueeze(0)
        features += [
            span_codes(characters.left.unsqueeze(0), starts_, ends_, character_alpha)[0],
            span_codes(characters.right.unsqueeze(0), starts_, ends_, character_alpha, reverse=True)[0],
        ]
    if cnn_features is not None:
        features.append(cnn_features)
    return torch.cat(features, dim=-1)
