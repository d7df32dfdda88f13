"""
The first layer of FOFE-NER's feed-forward net computed from per-word-position tables, without
building the span features: Xu (2017), "Fixed-size Ordinally-Forgetting Encoding and Its
Applications", MSc thesis, York University, §5.2 (features) and §5.3 (the network).

Every FOFE feature of a span `[i, j)` (`nerzoo.modules.fofe.span_features`) is a prefix code read
at `i` or `j`, or a difference of two, the one at the far end times a decay (`alpha^(j - i)` for
words, `alpha^(number of characters)` for characters), e.g. the left context including the
fragment `alpha^(j-i) L[i] + (L[j] - alpha^(j-i) L[i]) = L[j]`.  The layer being linear, its weights
are applied once per word position to the codes read there, giving tables of rows for span starts
and ends (and for their decayed parts), and each span is a weighted sum of a few rows, gathered and
summed in one `embedding_bag`.  The bag of words is a row of window sums of projected words (not
a difference of running sums, which would lose digits).  Only the CNN features are projected per span.
"""

import itertools
from typing import Callable, List, Optional, Sequence, Tuple, Union

import torch
from allennlp.common import FromParams
from allennlp.common.checks import ConfigurationError
from allennlp.modules import FeedForward
from allennlp.nn import Activation

from nerzoo.modules.fofe.codes import alpha_powers
from nerzoo.modules.fofe.span_features import CharacterCodes, WordCodes, gather_positions
from nerzoo.modules.fofe.spans import FlatSpans

# A table `(num_rows, dim)`, the row of it each sum reads `(num_sums,)`, and that row's weight `(num_sums,)` (`None`: 1).
Term = Tuple[torch.Tensor, torch.LongTensor, Optional[torch.Tensor]]


def projected(blocks: List[Tuple[torch.Tensor, torch.Tensor]]) -> torch.Tensor:
    """
    `sum_k codes_k @ weight_k.T` in one product, `(num_rows, out_dim)`: code blocks `(num_rows, dim_k)`
    and the weight blocks `(out_dim, dim_k)` they meet.
    """
    return torch.cat([codes for codes, _ in blocks], dim=-1) @ torch.cat([weight for _, weight in blocks], dim=1).t()


class FactoredFirstLayer(torch.nn.Linear):
    """
    A `torch.nn.Linear` over the concatenated span features (`forward`), which can also be computed
    from the prefix codes the features are read from (`from_codes`), equal up to rounding.

    # Parameters

    in_features : `int`, the span feature size
    out_features : `int`, the first hidden layer's size
    """

    def from_codes(
        self,
        words: Sequence[WordCodes],
        characters: Optional[CharacterCodes],
        mask: torch.BoolTensor,
        spans: FlatSpans,
        alpha: float,
        character_alpha: float,
        max_span_width: int,
        substituted: bool = False,
        cnn_features: Optional[torch.Tensor] = None,
        row_sums: Optional[Callable[[List[Term]], torch.Tensor]] = None,
    ) -> torch.Tensor:
        """
        The layer on `span_features(words, characters, spans, alpha, character_alpha, cnn_features)`,
        `(num_spans, out_features)`.

        # Parameters

        words, characters : the codes of the batch (`characters` may be `None`)
        mask : `(batch, num_tokens)`
        spans : `FlatSpans` of at most `max_span_width` words
        substituted : `bool`, true when the context codes differ from the left and right codes
        cnn_features : `(num_spans, cnn_dim)`, optional
        row_sums : optional (default = `weighted_row_sums`), sums the rows of the tables per span
        """
        span_batch, starts, ends = spans
        sizes = [codes.embedded.size(-1) for codes in words for _ in range(5)]
        if characters is not None:
            sizes += [characters.left.size(-1)] * 2
        if cnn_features is not None:
            sizes.append(cnn_features.size(-1))
        blocks = iter(self.weight.split(sizes, dim=1))
        # Every word position `p` of the batch is a row: as a span start `i = p` and as a span end
        # `j = p + 1` (the spans are never empty).
        word_batch, word_position = mask.nonzero(as_tuple=True)
        num_words = word_batch.size(0)
        row_of_word = (torch.cumsum(mask.reshape(-1).long(), 0) - 1).view(mask.shape)
        start_rows = row_of_word[span_batch, starts]
        end_rows = row_of_word[span_batch, ends - 1]
        widths = ends - starts

        # Per table, (codes, weight block) pairs.
        bag, start, end, word_decayed_start, word_decayed_end = [], [], [], [], []
        character_decayed_start, character_decayed_end = [], []
        at_start, at_end = word_position, word_position + 1
        for codes in words:
            bag_of_words, left_including, left_excluding, right_including, right_excluding = (
                next(blocks) for _ in range(5)
            )
            # bag: the words i..j-1; left including L[j] + decay (L'[i] - L[i]); left excluding L'[i];
            # right including R[i] + decay (R'[j] - R[j]); right excluding R'[j]  (L', R': contexts).
            bag.append((codes.embedded[word_batch, word_position], bag_of_words))
            start.append((gather_positions(codes.left_context, word_batch, at_start), left_excluding))
            start.append((gather_positions(codes.right, word_batch, at_start), right_including))
            end.append((gather_positions(codes.left, word_batch, at_end), left_including))
            end.append((gather_positions(codes.right_context, word_batch, at_end), right_excluding))
            if substituted:
                word_decayed_start.append(
                    (gather_positions(codes.left_context - codes.left, word_batch, at_start), left_including)
                )
                word_decayed_end.append(
                    (gather_positions(codes.right_context - codes.right, word_batch, at_end), right_including)
                )

        character_decay = None
        if characters is not None:
            # left P[c'] - decay P[c], right Q[c] - decay Q[c'] over the characters c..c' of the span.
            left_weight, right_weight = next(blocks), next(blocks)
            word_starts = characters.token_offsets[word_batch, word_position]
            word_ends = word_starts + characters.token_lengths[word_batch, word_position]
            start.append((characters.right.index_select(0, word_starts), right_weight))
            end.append((characters.left.index_select(0, word_ends), left_weight))
            character_decayed_start.append((characters.left.index_select(0, word_starts), left_weight))
            character_decayed_end.append((characters.right.index_select(0, word_ends), right_weight))
            character_starts, character_ends = characters.span_offsets(spans)
            character_decay = alpha_powers(character_alpha, character_ends - character_starts, self.weight.dtype)

        # (table, rows, weight per span) triples, summed per span.
        terms = [
            (projected(start) + self.bias, start_rows, None),
            (projected(end), end_rows, None),
            (window_sums(projected(bag), max_span_width), (widths - 1) * num_words + start_rows, None),
        ]
        if substituted:
            word_decay = alpha_powers(alpha, widths, self.weight.dtype)
            terms += [
                (projected(word_decayed_start), start_rows, word_decay),
                (projected(word_decayed_end), end_rows, word_decay),
            ]
        if character_decay is not None:
            terms += [
                (projected(character_decayed_start), start_rows, -character_decay),
                (projected(character_decayed_end), end_rows, -character_decay),
            ]
        hidden = (row_sums or weighted_row_sums)(terms)
        if cnn_features is not None:
            # Out of place: autocast casts addmm's operands to one dtype, never an in-place one's.
            hidden = torch.addmm(hidden, cnn_features, next(blocks).t())
        return hidden


def weighted_row_sums(terms: List[Term]) -> torch.Tensor:
    """
    `sum_k weight_k[s] * table_k[rows_k[s]]` for every s (`weight_k` `None` is 1): the tables
    `(num_rows_k, dim)` end to end, each sum one bag of `embedding_bag`.  `(num_sums, dim)`.
    """
    offsets = itertools.accumulate((table.size(0) for table, _, _ in terms[:-1]), initial=0)
    indices = torch.stack([rows + offset for (_, rows, _), offset in zip(terms, offsets)], dim=1)
    weights = [
        torch.ones(rows.shape, dtype=table.dtype, device=rows.device) if weight is None else weight
        for table, rows, weight in terms
    ]
    table = torch.cat([table for table, _, _ in terms])
    return torch.nn.functional.embedding_bag(indices, table, mode="sum", per_sample_weights=torch.stack(weights, dim=1))


def window_sums(values: torch.Tensor, max_width: int) -> torch.Tensor:
    """
    `(max_width * num_rows, dim)`: row `(width - 1) * num_rows + r` is `values[r : r + width].sum(0)`
    (cut short at the end).
    """
    sums = [values]
    for width in range(2, max_width + 1):  # a loop over the widths, not over spans
        following = torch.nn.functional.pad(values, (0, 0, 0, width - 1))[width - 1 :]  # row r: values[r + width - 1]
        sums.append(sums[-1] + following)
    return torch.cat(sums)


class FofeFeedForward(torch.nn.Module, FromParams):
    """
    The feed-forward net of FOFE-NER (§5.3: 3 layers of 512 ReLU units in the thesis), with the
    same constructor and results as allennlp's `FeedForward`, whose first layer is a
    `FactoredFirstLayer`: `from_first_layer` finishes the net from that layer's output.

    The first layer is `first_layer`, the others `remaining` (a `FeedForward`, or `None` for one
    layer).  State dicts of an allennlp `FeedForward` (`_linear_layers.k.*`) load as well.

    # Parameters

    input_dim : `int`
    num_layers : `int`
    hidden_dims : `Union[int, List[int]]`
    activations : `Union[Activation, List[Activation]]`
    dropout : `Union[float, List[float]]`, optional (default = `0.0`)
    """

    def __init__(
        self,
        input_dim: int,
        num_layers: int,
        hidden_dims: Union[int, List[int]],
        activations: Union[Activation, List[Activation]],
        dropout: Union[float, List[float]] = 0.0,
    ) -> None:
        super().__init__()
        hidden_dims, activations, dropout = (
            value if isinstance(value, list) else [value] * num_layers for value in (hidden_dims, activations, dropout)
        )
        if num_layers < 1 or not len(hidden_dims) == len(activations) == len(dropout) == num_layers:
            raise ConfigurationError(
                f"feedforward needs num_layers >= 1 and one hidden_dims, activations and dropout per layer, got "
                f"{num_layers}, {hidden_dims}, {activations}, {dropout}"
            )
        self.input_dim = input_dim
        self.first_layer = FactoredFirstLayer(input_dim, hidden_dims[0])
        self.first_activation = activations[0]
        self.first_dropout = torch.nn.Dropout(dropout[0])
        self.remaining: Optional[FeedForward] = None
        if num_layers > 1:
            self.remaining = FeedForward(hidden_dims[0], num_layers - 1, hidden_dims[1:], activations[1:], dropout[1:])
        self.output_dim = hidden_dims[-1]

    def get_input_dim(self) -> int:
        return self.input_dim

    def get_output_dim(self) -> int:
        return self.output_dim

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        """`(..., input_dim)` -> `(..., output_dim)`."""
        return self.from_first_layer(self.first_layer(features))

    def from_first_layer(self, first_layer: torch.Tensor) -> torch.Tensor:
        """The net's output from its first layer's output (before the activation)."""
        hidden = self.first_dropout(self.first_activation(first_layer))
        return hidden if self.remaining is None else self.remaining(hidden)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # An allennlp FeedForward's layer k is `_linear_layers.k`: the first is ours, the others `remaining`'s.
        old = prefix + "_linear_layers."
        for key in [key for key in state_dict if key.startswith(old)]:
            layer, _, name = key[len(old) :].partition(".")
            index = int(layer)
            new = f"first_layer.{name}" if index == 0 else f"remaining._linear_layers.{index - 1}.{name}"
            state_dict[prefix + new] = state_dict.pop(key)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
