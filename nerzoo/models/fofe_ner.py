from dataclasses import replace
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

import torch
from allennlp.common import Lazy
from allennlp.common.checks import ConfigurationError, check_dimensions_match
from allennlp.data import TextFieldTensors, Vocabulary
from allennlp.models.model import Model
from allennlp.modules import FeedForward, TokenEmbedder
from allennlp.nn import InitializerApplicator
from allennlp.nn.util import batched_index_select, get_text_field_mask
from allennlp.training.metrics import CategoricalAccuracy

from nerzoo.modules.calibration import CalibrationBatch, CalibrationSite
from nerzoo.modules.fofe import alpha_powers, prefix_codes, span_codes
from nerzoo.modules.span_character_cnn import SpanCharacterCnn
from nerzoo.modules.span_decoding import DECODERS, ScoredSpan, decode_spans, highest_first_mask
from nerzoo.training.metrics.span_calibration import SpanCalibration
from nerzoo.training.metrics.span_set_f1 import SpanSetF1


@Model.register("fofe_ner")
class FofeNer(Model):
    """
    FOFE-NER, local detection of (possibly nested) entities: Xu (2017), "Fixed-size
    Ordinally-Forgetting Encoding and Its Applications", MSc thesis, York University, chapter 5.

    Every fragment of up to `max_span_width` words (§5.1) is classified into NONE or an entity type
    by a feed-forward net over fixed-size features (§5.2), all computed from prefix codes
    (`nerzoo.modules.fofe`) and gathers, without a loop over spans:

    - for each word vocabulary (the thesis has two, case-sensitive and case-insensitive, each with
      its own embedding matrix): the bag of words of the fragment and the FOFE codes (eq. 3.1,
      projected form eq. 4.3) of the left context including and excluding the fragment and of the
      right context (read right to left) including and excluding it;
    - the left-to-right and right-to-left character FOFE of the fragment (its words joined by a
      separator symbol), with its own character embedding;
    - a character CNN of the fragment (kernel heights 2-9, `SpanCharacterCnn`), with another one.

    Training (Algorithm 1) keeps every span that matches a gold entity (its type) and a random
    share of the spans that partially overlap one (`overlap_sample_rate`) or are disjoint from all
    (`disjoint_sample_rate`), both labelled NONE, redrawn at every batch; only kept spans go through
    the feed-forward net.  Decoding (Algorithms 2-5) takes, per span, the best class and its
    probability; spans whose best class is not NONE are candidates, pruned per nesting level by
    `thresholds` and made non-overlapping by `decoding` (`highest_first` / `longest_first`), so
    `decoding: ["highest_first", "highest_first"]` also returns entities nested one level deep.

    Only real spans are scored, as one flat list over the batch.  At inference the feed-forward
    net's first layer is computed from per-word-position tables rather than from the features of
    every span (`_first_layer`: the features are prefix codes read at a span's two ends), and the
    characters of the whole batch form one sequence without padding.

    Second pass (§5.4): with `first_pass` (a trained `fofe_ner`, e.g. `{"type": "from_archive",
    ...}`, frozen), the contexts of every fragment see the first pass's entities (level 1,
    highest-first, outside the fragment) replaced by one type token each (a learned embedding per
    type and vocabulary); the second pass is trained on those contexts and, at inference, its
    probabilities are interpolated with the first pass's: `λ p1 + (1 - λ) p2`.  The first pass is
    frozen and reads one sentence at a time, so its entities and probabilities are kept per sentence
    (keyed by its words, up to `first_pass_cache_size` sentences) and computed once, not at every
    epoch.

    For prediction, `make_output_human_readable` adds the `spans` and, as every nerzoo tagger does,
    `tags` and `tag_confidences`: BIO tags of the outermost (level-1) spans, a tag inside a span
    having the span's probability as confidence and an `O` the smallest NONE probability of the
    scored spans that cover its word.  There are no per-tag probabilities (`has_tag_probabilities`).

    Registered as a `Model` with name "fofe_ner".  Reads `entity_spans` instances.

    # Parameters

    vocab : `Vocabulary`, required
    word_embedders : `Dict[str, TokenEmbedder]`, required
        One per word vocabulary, keyed by the token indexer's name (e.g. `tokens` case-sensitive,
        `lowercase_tokens` case-insensitive); each gives its own set of five word features.
    feedforward : `Lazy[FeedForward]`, required
        Built with `input_dim` = the feature size (3 layers of 512 ReLU units in the thesis).
    max_span_width : `int`, optional (default = `7`)
        `n`: longer fragments are never entities.
    alpha : `float`, optional (default = `0.5`)
        Forgetting factor of the word FOFE codes (§5.5.1).
    characters : `str`, optional (default = `"token_characters"`)
        Name of a `characters` token indexer; `None` turns the character features off.
    character_namespace : `str`, optional (default = `"token_characters"`)
    character_dim : `int`, optional (default = `64`)
        Size of both character embeddings (initialised uniformly in [-1, 1], §5.5.1).
    character_alpha : `float`, optional (default = `0.5`)
    cnn_filters : `int`, optional (default = `16`)
        Feature maps per kernel height; `0` turns the character CNN off.
    cnn_kernel_sizes : `Sequence[int]`, optional (default = `2, ..., 9`)
    dropout : `float`, optional (default = `0.0`)
        On the features (the feed-forward net has its own).
    overlap_sample_rate : `float`, optional (default = `0.36`)
    disjoint_sample_rate : `float`, optional (default = `0.09`)
    decoding : `Sequence[str]`, optional (default = `("highest_first",)`)
        Algorithm per nesting level.
    thresholds : `Sequence[float]`, optional (default = `(0.5,)`)
        Minimum probability per nesting level (the global pruning threshold is the first).
    merge_adjacent : `bool`, optional (default = `True`)
        Merge adjacent fragments of the same type (`mergeAdjacentOfSameType`).
    first_pass : `Model`, optional (default = `None`)
        A trained `fofe_ner` over the same vocabulary; makes this model the second pass.
    interpolation : `float`, optional (default = `0.5`)
        `λ`, the first pass's weight at inference.
    first_pass_cache_size : `int`, optional (default = `500000`)
        Sentences whose first-pass results are kept (on the model's device); `0` runs the first pass
        on every batch.
    label_namespace : `str`, optional (default = `"labels"`)
        The entity types.
    temperature : `float`, optional (default = `1.0`)
        Divides the span scores in the reported probabilities (fitted on dev data by `allennlp
        calibrate`, see `nerzoo.modules.calibration`).
    calibrated_decoding : `bool`, optional (default = `False`)
        Decode (thresholds, highest-first order) from the temperature-scaled probabilities.  By
        default decoding reads the unscaled ones, so calibration changes no prediction.
    initializer : `InitializerApplicator`, optional

    Confidence of a decoded span (its `score`): the probability of its class from the softmax with
    `temperature` (mixed with the first pass's as above for a second pass).  In evaluation mode
    with gold entities the confidences of the decoded spans are scored against them (`span_ece`,
    `span_brier`: `SpanCalibration`).
    """

    default_predictor = "sequence_tagger"

    # Read by the predictors: a span classifier has no per-tag probabilities.
    has_tag_probabilities = False

    def __init__(
        self,
        vocab: Vocabulary,
        word_embedders: Dict[str, TokenEmbedder],
        feedforward: Lazy[FeedForward],
        max_span_width: int = 7,
        alpha: float = 0.5,
        characters: Optional[str] = "token_characters",
        character_namespace: str = "token_characters",
        character_dim: int = 64,
        character_alpha: float = 0.5,
        cnn_filters: int = 16,
        cnn_kernel_sizes: Sequence[int] = tuple(range(2, 10)),
        dropout: float = 0.0,
        overlap_sample_rate: float = 0.36,
        disjoint_sample_rate: float = 0.09,
        decoding: Sequence[str] = ("highest_first",),
        thresholds: Sequence[float] = (0.5,),
        merge_adjacent: bool = True,
        first_pass: Optional[Model] = None,
        interpolation: float = 0.5,
        first_pass_cache_size: int = 500_000,
        label_namespace: str = "labels",
        temperature: float = 1.0,
        calibrated_decoding: bool = False,
        initializer: InitializerApplicator = InitializerApplicator(),
        **kwargs,
    ) -> None:
        super().__init__(vocab, **kwargs)
        if temperature <= 0:
            raise ConfigurationError(f"temperature must be > 0, got {temperature}")
        self.temperature = float(temperature)
        self.calibrated_decoding = calibrated_decoding
        if not word_embedders:
            raise ConfigurationError("fofe_ner needs at least one word embedder")
        if max_span_width < 1:
            raise ConfigurationError(f"max_span_width must be >= 1, got {max_span_width}")
        if not 0.0 < alpha < 1.0 or not 0.0 < character_alpha < 1.0:
            raise ConfigurationError(f"forgetting factors must lie in (0, 1), got {alpha}, {character_alpha}")
        for name, rate in (
            ("overlap_sample_rate", overlap_sample_rate),
            ("disjoint_sample_rate", disjoint_sample_rate),
        ):
            if not 0.0 <= rate <= 1.0:
                raise ConfigurationError(f"{name} must lie in [0, 1], got {rate}")
        if len(decoding) != len(thresholds) or not decoding:
            raise ConfigurationError(
                f"decoding {list(decoding)} and thresholds {list(thresholds)} need one entry per level"
            )
        unknown = [name for name in decoding if name not in DECODERS]
        if unknown:
            raise ConfigurationError(f"unknown decoding {unknown}; choose from {sorted(DECODERS)}")
        if not 0.0 <= interpolation <= 1.0:
            raise ConfigurationError(f"interpolation must lie in [0, 1], got {interpolation}")
        self.label_namespace = label_namespace
        self.entity_types = [
            vocab.get_token_from_index(index, label_namespace) for index in range(vocab.get_vocab_size(label_namespace))
        ]
        num_classes = len(self.entity_types) + 1  # class 0 is NONE
        self.max_span_width = max_span_width
        self.alpha = alpha
        self.character_alpha = character_alpha
        self.overlap_sample_rate = overlap_sample_rate
        self.disjoint_sample_rate = disjoint_sample_rate
        self.decoding = list(decoding)
        self.thresholds = [float(value) for value in thresholds]
        self.merge_adjacent = merge_adjacent
        self.interpolation = interpolation
        if first_pass_cache_size < 0:
            raise ConfigurationError(f"first_pass_cache_size must be >= 0, got {first_pass_cache_size}")
        self.first_pass_cache_size = first_pass_cache_size
        # words -> (per-token substitution tensors, probabilities of the sentence's spans); not saved.
        self._first_pass_cache: Dict[Tuple[str, ...], Tuple[Dict[str, torch.Tensor], torch.Tensor]] = {}

        self.word_embedders = torch.nn.ModuleDict(word_embedders)
        feature_dim = sum(5 * embedder.get_output_dim() for embedder in word_embedders.values())
        self.characters = characters
        self.character_embedding: Optional[torch.nn.Embedding] = None
        self.cnn_character_embedding: Optional[torch.nn.Embedding] = None
        self.character_cnn: Optional[SpanCharacterCnn] = None
        if characters is not None:
            # One extra row (the last) is the separator between the fragment's words.
            num_characters = vocab.get_vocab_size(character_namespace) + 1
            self.character_embedding = _uniform_embedding(num_characters, character_dim)
            feature_dim += 2 * character_dim
            if cnn_filters > 0:
                self.cnn_character_embedding = _uniform_embedding(num_characters, character_dim)
                self.character_cnn = SpanCharacterCnn(character_dim, cnn_filters, cnn_kernel_sizes)
                feature_dim += self.character_cnn.get_output_dim()
        self.feature_dim = feature_dim
        # The widths of the feature blocks, in the order of `_span_features`.
        self._feature_sizes = [embedder.get_output_dim() for embedder in word_embedders.values() for _ in range(5)]
        if self.character_embedding is not None:
            self._feature_sizes += [character_dim, character_dim]
        if self.character_cnn is not None:
            self._feature_sizes.append(self.character_cnn.get_output_dim())
        self.dropout = torch.nn.Dropout(dropout)
        self.feedforward = feedforward.construct(input_dim=feature_dim)
        check_dimensions_match(
            feature_dim, self.feedforward.get_input_dim(), "span feature dim", "feedforward input dim"
        )
        self.output_layer = torch.nn.Linear(self.feedforward.get_output_dim(), num_classes)

        self.type_embeddings = torch.nn.ModuleDict()
        if first_pass is not None:
            self._check_first_pass(first_pass, vocab)
            for name, embedder in word_embedders.items():
                self.type_embeddings[name] = torch.nn.Embedding(len(self.entity_types), embedder.get_output_dim())

        self.accuracy = CategoricalAccuracy()
        self.span_f1 = SpanSetF1(self.entity_types)
        self.span_calibration = SpanCalibration()
        initializer(self)
        # Attached after the initializer, whose regexes would otherwise re-initialise its weights.
        self.first_pass = first_pass
        if first_pass is not None:
            for parameter in first_pass.parameters():
                parameter.requires_grad_(False)

    def _check_first_pass(self, first_pass: Model, vocab: Vocabulary) -> None:
        if not isinstance(first_pass, FofeNer):
            raise ConfigurationError(f"first_pass must be a fofe_ner model, got {type(first_pass).__name__}")
        if first_pass.max_span_width != self.max_span_width:
            raise ConfigurationError(
                f"first_pass has max_span_width {first_pass.max_span_width}, this model {self.max_span_width}"
            )
        for namespace in sorted(set(vocab.get_namespaces()) | set(first_pass.vocab.get_namespaces())):
            ours, theirs = vocab.get_vocab_size(namespace), first_pass.vocab.get_vocab_size(namespace)
            if ours != theirs:
                raise ConfigurationError(
                    f"first_pass vocabulary differs in namespace {namespace!r} ({theirs} vs {ours}); build this "
                    'model\'s vocabulary from the first pass\'s archive: "vocabulary": {"type": "from_files", '
                    '"directory": "<first pass>/model.tar.gz"}'
                )

    def train(self, mode: bool = True) -> "FofeNer":
        super().train(mode)
        if self.first_pass is not None:
            self.first_pass.eval()  # a frozen first pass always predicts as at inference
        return self

    def forward(  # type: ignore
        self,
        tokens: TextFieldTensors,
        entities: Optional[torch.LongTensor] = None,
        metadata: Optional[List[Dict[str, Any]]] = None,
        **kwargs,
    ) -> Dict[str, Any]:
        """
        # Parameters

        tokens : `TextFieldTensors`, one sentence per instance
        entities : `torch.LongTensor`, optional, `(batch_size, num_tokens, num_tokens)`
            Gold entity type ids at `[start, end - 1]`, -1 elsewhere (`entity_spans`' AdjacencyField).
        metadata : `List[Dict]`, optional; `words` and gold `entities` are used

        # Returns

        `class_probabilities` `(batch_size, num_spans, num_classes)` (class 0 is NONE) over the
        spans `span_starts`/`span_ends` `(batch_size, num_spans)` (token offsets, end exclusive) where
        `span_mask` is true; `loss` with gold entities.  During training only the sampled spans are
        scored.
        """
        mask = get_text_field_mask(tokens)
        starts, ends, span_mask = self._enumerate_spans(mask)
        if entities is not None:
            entities = entities.long()  # allennlp's AdjacencyField pads a float tensor
        gold = None if entities is None else self._gold_classes(entities, starts, ends, span_mask)

        keep = span_mask
        if self.training and gold is not None:
            keep = span_mask & self._sample(gold, entities, starts, ends, mask)
        # The scored spans as one flat list (row-major order of `keep`): no work on padding.
        span_batch, span_column = keep.nonzero(as_tuple=True)
        flat_starts, flat_ends = starts[span_batch, span_column], ends[span_batch, span_column]

        first_pass_probabilities = None
        substitutions = None
        if self.first_pass is not None:
            substitutions, first_pass_probabilities = self._first_pass_results(tokens, mask, metadata)

        if self.training:
            features = self._span_features(tokens, mask, span_batch, flat_starts, flat_ends, substitutions)
            hidden = self.feedforward(self.dropout(features))
        else:
            first_layer = self._first_layer(tokens, mask, span_batch, flat_starts, flat_ends, substitutions)
            hidden = self._feedforward_from_first_layer(first_layer)
        logits = self.output_layer(hidden)  # (num_scored, num_classes)
        probabilities = torch.softmax(logits, dim=-1)
        confidences = probabilities if self.temperature == 1.0 else torch.softmax(logits / self.temperature, dim=-1)
        if first_pass_probabilities is not None and not self.training:
            probabilities, confidences = (
                self.interpolation * first_pass_probabilities + (1 - self.interpolation) * values
                for values in (probabilities, confidences)
            )

        scored_mask = _row_prefix_mask(keep.sum(1))
        output: Dict[str, Any] = {
            "class_probabilities": _scatter_rows(probabilities, scored_mask),
            "class_confidences": _scatter_rows(confidences, scored_mask),
            "span_starts": _scatter_rows(flat_starts, scored_mask),
            "span_ends": _scatter_rows(flat_ends, scored_mask),
            "span_mask": scored_mask,
        }
        if not self.training:
            output["class_logits"] = _scatter_rows(logits, scored_mask)
            if first_pass_probabilities is not None:
                output["first_pass_probabilities"] = _scatter_rows(first_pass_probabilities, scored_mask)
        if gold is not None:
            flat_gold = gold[span_batch, span_column]
            if flat_gold.numel():
                output["loss"] = torch.nn.functional.cross_entropy(logits, flat_gold)
                self.accuracy(logits, flat_gold)
            else:
                output["loss"] = logits.sum() * 0.0
        if metadata is not None:
            output["words"] = [instance["words"] for instance in metadata]
            if not self.training and all("entities" in instance for instance in metadata):
                predicted = self._decode_output(output)
                gold_entities = [instance["entities"] for instance in metadata]
                self.span_f1(
                    [[(span.start, span.end, span.label) for span, _ in spans] for spans in predicted], gold_entities
                )
                gold_sets = [set(map(tuple, entities)) for entities in gold_entities]
                scored = [
                    (span.score, (span.start, span.end, span.label) in gold_set)
                    for spans, gold_set in zip(predicted, gold_sets)
                    for span, _ in spans
                ]
                self.span_calibration([score for score, _ in scored], [right for _, right in scored])
        return output

    def _enumerate_spans(self, mask: torch.BoolTensor) -> Tuple[torch.LongTensor, torch.LongTensor, torch.BoolTensor]:
        """All `(start, start + width)` for widths 1..n, laid out `(batch, num_tokens * n)`."""
        batch_size, num_tokens = mask.shape
        positions = torch.arange(num_tokens, device=mask.device)
        widths = torch.arange(1, self.max_span_width + 1, device=mask.device)
        starts = positions.unsqueeze(1).expand(num_tokens, self.max_span_width).reshape(1, -1)
        ends = (positions.unsqueeze(1) + widths.unsqueeze(0)).reshape(1, -1)
        lengths = mask.sum(1, keepdim=True)
        span_mask = ends <= lengths
        return starts.expand(batch_size, -1), ends.expand(batch_size, -1).clamp(max=num_tokens), span_mask

    @staticmethod
    def _gold_classes(
        entities: torch.LongTensor, starts: torch.LongTensor, ends: torch.LongTensor, span_mask: torch.BoolTensor
    ) -> torch.LongTensor:
        """Class per span: 1 + the entity type id where a gold entity has its boundaries, else 0 (NONE)."""
        num_tokens = entities.size(1)
        flat = entities.reshape(entities.size(0), -1)
        index = starts * num_tokens + (ends - 1).clamp(min=0)
        return (flat.gather(1, index) + 1).clamp(min=0) * span_mask

    def _sample(
        self,
        gold: torch.LongTensor,
        entities: torch.LongTensor,
        starts: torch.LongTensor,
        ends: torch.LongTensor,
        mask: torch.BoolTensor,
    ) -> torch.BoolTensor:
        """Algorithm 1: keep exact matches, and overlapping / disjoint negatives at their rates."""
        has_entity = entities >= 0
        opened = has_entity.sum(2)  # entities starting at each token
        closed = torch.nn.functional.pad(has_entity.sum(1), (1, 0))[:, :-1]  # entities ended before each token
        covered = (torch.cumsum(opened - closed, dim=1) > 0) & mask
        covered_prefix = torch.nn.functional.pad(torch.cumsum(covered.long(), dim=1), (1, 0))
        covered_in_span = covered_prefix.gather(1, ends) - covered_prefix.gather(1, starts)
        exact = gold > 0
        disjoint = covered_in_span == 0
        overlapping = ~exact & ~disjoint
        draw = torch.rand(gold.shape, device=gold.device)
        return (
            exact | (overlapping & (draw < self.overlap_sample_rate)) | (disjoint & (draw < self.disjoint_sample_rate))
        )

    def _run_first_pass(
        self, tokens: TextFieldTensors, mask: torch.BoolTensor
    ) -> Tuple[Dict[str, torch.Tensor], torch.Tensor, torch.LongTensor]:
        """
        The first pass's entities as `_first_pass_entities` gives them, its probabilities of every
        span `(num_spans, num_classes)`, flat in the order of `_enumerate_spans` (by start, then
        width; a sentence's spans come out the same whatever the batch's padding), and the number of
        spans of each row `(batch_size,)`.
        """
        with torch.no_grad():
            first_output = self.first_pass(tokens)
        substitutions = self._first_pass_entities(
            first_output["class_probabilities"],
            first_output["span_starts"],
            first_output["span_ends"],
            first_output["span_mask"],
            mask,
        )
        span_mask = first_output["span_mask"]
        return substitutions, first_output["class_probabilities"][span_mask], span_mask.sum(1)

    def _first_pass_results(
        self, tokens: TextFieldTensors, mask: torch.BoolTensor, metadata: Optional[List[Dict[str, Any]]]
    ) -> Tuple[Dict[str, torch.Tensor], torch.Tensor]:
        """`_run_first_pass` for the batch, run only on sentences not seen before."""
        if metadata is None or self.first_pass_cache_size == 0:
            return self._run_first_pass(tokens, mask)[:2]
        keys = [tuple(instance["words"]) for instance in metadata]
        entries: Dict[int, Tuple[Dict[str, torch.Tensor], torch.Tensor]] = {}
        missing = []
        for row, key in enumerate(keys):
            cached = self._first_pass_cache.get(key)
            if cached is None:
                missing.append(row)
            else:
                entries[row] = cached
        lengths = mask.sum(1).tolist()
        if missing:
            index = torch.tensor(missing, device=mask.device)
            sub_tokens = {
                name: {key: tensor.index_select(0, index) for key, tensor in indexed.items()}
                for name, indexed in tokens.items()
            }
            substitutions, probabilities, counts = self._run_first_pass(sub_tokens, mask.index_select(0, index))
            for position, (row, row_probabilities) in enumerate(zip(missing, probabilities.split(counts.tolist()))):
                length = lengths[row]
                entry = ({name: values[position, :length] for name, values in substitutions.items()}, row_probabilities)
                entries[row] = entry
                if len(self._first_pass_cache) < self.first_pass_cache_size:
                    self._first_pass_cache[keys[row]] = entry
        num_tokens = mask.size(1)
        substitutions = {
            name: torch.stack(
                [
                    torch.nn.functional.pad(entries[row][0][name], (0, num_tokens - lengths[row]))
                    for row in range(len(keys))
                ]
            )
            for name in entries[0][0]
        }
        return substitutions, torch.cat([entries[row][1] for row in range(len(keys))])

    def _first_pass_entities(
        self,
        probabilities: torch.Tensor,
        starts: torch.LongTensor,
        ends: torch.LongTensor,
        span_mask: torch.BoolTensor,
        mask: torch.BoolTensor,
    ) -> Dict[str, torch.Tensor]:
        """
        The first pass's level-1 entities (threshold, then highest-first) as per-token tensors, each
        `(batch, num_tokens)`: `in_entity`, entity `start`, `end` and `type`.
        """
        scores, classes = probabilities.max(dim=-1)
        candidates = span_mask & (classes > 0) & (scores >= self.thresholds[0])
        kept = highest_first_mask(scores, starts, ends, candidates, mask.size(1))
        positions = torch.arange(mask.size(1), device=mask.device).view(1, 1, -1)
        covers = kept.unsqueeze(-1) & (starts.unsqueeze(-1) <= positions) & (positions < ends.unsqueeze(-1))
        in_entity = covers.any(dim=1)
        owner = covers.float().argmax(dim=1)  # (batch, num_tokens): the kept span over each token
        return {
            "in_entity": in_entity & mask,
            "start": starts.gather(1, owner),
            "end": ends.gather(1, owner),
            "type": (classes - 1).clamp(min=0).gather(1, owner),
        }

    def _word_codes(
        self, tokens: TextFieldTensors, mask: torch.BoolTensor, substitutions: Optional[Dict[str, torch.Tensor]]
    ) -> List[Tuple[torch.Tensor, ...]]:
        """
        Per word vocabulary, the embedded words `(batch, num_tokens, dim)` and the prefix codes every
        word feature is read from, each `(batch, num_tokens + 1, dim)`: running sums (alpha = 1, the
        bag of words), left-to-right and right-to-left codes, and the left and right context codes
        (the same two, or with the first pass's entities substituted, §5.4).
        """
        codes = []
        for name, embedder in self.word_embedders.items():
            embedded = embedder(**tokens[name]) * mask.unsqueeze(-1)
            left = prefix_codes(embedded, mask, self.alpha)
            right = prefix_codes(embedded, mask, self.alpha, reverse=True)
            sums = prefix_codes(embedded, mask, 1.0)
            left_context, right_context = left, right
            if substitutions is not None:
                left_context, right_context = self._substituted_contexts(
                    embedded, mask, left, right, substitutions, self.type_embeddings[name]
                )
            codes.append((embedded, sums, left, right, left_context, right_context))
        return codes

    def _span_features(
        self,
        tokens: TextFieldTensors,
        mask: torch.BoolTensor,
        span_batch: torch.LongTensor,
        starts: torch.LongTensor,
        ends: torch.LongTensor,
        substitutions: Optional[Dict[str, torch.Tensor]],
    ) -> torch.Tensor:
        """
        `(num_spans, feature_dim)`: word features per vocabulary, then character features, of the
        spans `starts[k]`..`ends[k]` (exclusive) of sentence `span_batch[k]`, all `(num_spans,)`.
        """
        features = []
        decay = self.alpha ** (ends - starts).unsqueeze(-1).float()
        for _, sums, left, right, left_context, right_context in self._word_codes(tokens, mask, substitutions):
            fragment_left = _flat_span_codes(left, span_batch, starts, ends, self.alpha)
            fragment_right = _flat_span_codes(right, span_batch, starts, ends, self.alpha, reverse=True)
            left_excluding = _rows(left_context, span_batch, starts)
            right_excluding = _rows(right_context, span_batch, ends)
            features += [
                _flat_span_codes(sums, span_batch, starts, ends, 1.0),
                decay * left_excluding + fragment_left,
                left_excluding,
                decay * right_excluding + fragment_right,
                right_excluding,
            ]
        if self.character_embedding is not None:
            characters = self._character_codes(tokens[self.characters], mask)
            character_starts, character_ends = characters.span_offsets(span_batch, starts, ends)
            starts_, ends_, alpha = character_starts.unsqueeze(0), character_ends.unsqueeze(0), self.character_alpha
            features += [
                span_codes(characters.left.unsqueeze(0), starts_, ends_, alpha)[0],
                span_codes(characters.right.unsqueeze(0), starts_, ends_, alpha, reverse=True)[0],
            ]
            if self.character_cnn is not None:
                features.append(self._character_cnn_features(characters, character_starts, character_ends))
        return torch.cat(features, dim=-1)

    def _first_layer(
        self,
        tokens: TextFieldTensors,
        mask: torch.BoolTensor,
        span_batch: torch.LongTensor,
        starts: torch.LongTensor,
        ends: torch.LongTensor,
        substitutions: Optional[Dict[str, torch.Tensor]],
    ) -> torch.Tensor:
        """
        The first linear layer of the feed-forward net on `_span_features` (before its
        activation), `(num_spans, hidden_dim)`, without building the features (no dropout on them:
        for inference).

        Every FOFE feature of a span `[i, j)` is a prefix code read at `i` or `j`, or a difference
        of two, the one at the far end times a decay (`alpha^(j - i)` for words, `alpha^(number of
        characters)` for characters), e.g. the left context including the fragment
        `alpha^(j-i) L[i] + (L[j] - alpha^(j-i) L[i]) = L[j]`.  The layer being linear, its weights are
        applied once per word position to the codes read there, giving tables of rows for span
        starts and ends (and for their decayed parts), and each span is a weighted sum of a few
        rows, gathered and summed in one `embedding_bag`.  The bag of words is a row of window sums
        of projected words (at most `max_span_width` of them; the difference of two running sums
        would lose digits to cancellation).  Only the character CNN features are projected per
        span.  Equal to the layer on the features up to rounding.
        """
        layer = self.feedforward._linear_layers[0]  # allennlp FeedForward keeps its layers there
        blocks = iter(layer.weight.split(self._feature_sizes, dim=1))
        # Every word position `p` of the batch is a row: as a span start `i = p` and as a span end
        # `j = p + 1` (the spans are never empty).
        word_batch, word_position = mask.nonzero(as_tuple=True)
        num_words = len(word_batch)
        row_of_word = (torch.cumsum(mask.reshape(-1).long(), 0) - 1).view(mask.shape)
        start_rows = row_of_word[span_batch, starts]
        end_rows = row_of_word[span_batch, ends - 1]
        widths = ends - starts

        bag, start, end = _Terms(), _Terms(), _Terms()
        word_decayed_start, word_decayed_end = _Terms(), _Terms()
        character_decayed_start, character_decayed_end = _Terms(), _Terms()
        for embedded, _, left, right, left_context, right_context in self._word_codes(tokens, mask, substitutions):
            bag_of_words, left_including, left_excluding, right_including, right_excluding = (
                next(blocks) for _ in range(5)
            )
            # bag: the words i..j-1; left including L[j] + decay (L'[i] - L[i]); left excluding L'[i];
            # right including R[i] + decay (R'[j] - R[j]); right excluding R'[j]  (L', R': contexts).
            at_start, at_end = word_position, word_position + 1
            bag.add(embedded[word_batch, word_position], bag_of_words)
            start.add(_rows(left_context, word_batch, at_start), left_excluding)
            start.add(_rows(right, word_batch, at_start), right_including)
            end.add(_rows(left, word_batch, at_end), left_including)
            end.add(_rows(right_context, word_batch, at_end), right_excluding)
            if substitutions is not None:
                word_decayed_start.add(_rows(left_context - left, word_batch, at_start), left_including)
                word_decayed_end.add(_rows(right_context - right, word_batch, at_end), right_including)

        cnn_features, cnn_weight, character_decay = None, None, None
        if self.character_embedding is not None:
            # left P[c'] - decay P[c], right Q[c] - decay Q[c'] over the characters c..c' of the span.
            left_weight, right_weight = next(blocks), next(blocks)
            characters = self._character_codes(tokens[self.characters], mask)
            word_starts = characters.token_offsets[word_batch, word_position]
            word_ends = word_starts + characters.token_lengths[word_batch, word_position]
            start.add(characters.right.index_select(0, word_starts), right_weight)
            end.add(characters.left.index_select(0, word_ends), left_weight)
            character_decayed_start.add(characters.left.index_select(0, word_starts), left_weight)
            character_decayed_end.add(characters.right.index_select(0, word_ends), right_weight)
            character_starts, character_ends = characters.span_offsets(span_batch, starts, ends)
            character_decay = alpha_powers(self.character_alpha, character_ends - character_starts, layer.weight.dtype)
            if self.character_cnn is not None:
                cnn_features = self._character_cnn_features(characters, character_starts, character_ends)
                cnn_weight = next(blocks)

        # (table, rows, weight per span) triples, summed per span.
        terms = [
            (start.projected() + layer.bias, start_rows, None),
            (end.projected(), end_rows, None),
            (_window_sums(bag.projected(), self.max_span_width), (widths - 1) * num_words + start_rows, None),
        ]
        if substitutions is not None:
            word_decay = alpha_powers(self.alpha, widths, layer.weight.dtype)
            terms += [
                (word_decayed_start.projected(), start_rows, word_decay),
                (word_decayed_end.projected(), end_rows, word_decay),
            ]
        if character_decay is not None:
            terms += [
                (character_decayed_start.projected(), start_rows, -character_decay),
                (character_decayed_end.projected(), end_rows, -character_decay),
            ]
        hidden = _weighted_row_sums(terms)
        if cnn_features is not None:
            # Out of place: autocast casts addmm's operands to one dtype, never an in-place one's.
            hidden = torch.addmm(hidden, cnn_features, cnn_weight.t())
        return hidden

    def _feedforward_from_first_layer(self, first_layer: torch.Tensor) -> torch.Tensor:
        """The feed-forward net's output from its first layer's output (before the activation)."""
        feedforward = self.feedforward
        output = first_layer
        for index, (activation, dropout) in enumerate(zip(feedforward._activations, feedforward._dropout)):
            if index:
                output = feedforward._linear_layers[index](output)
            # A ReLU in place: the layer's output is not used again.
            output = dropout(torch.relu_(output) if isinstance(activation, torch.nn.ReLU) else activation(output))
        return output

    def _substituted_contexts(
        self,
        embedded: torch.Tensor,
        mask: torch.BoolTensor,
        left: torch.Tensor,
        right: torch.Tensor,
        substitutions: Dict[str, torch.Tensor],
        type_embedding: torch.nn.Embedding,
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        """
        Context codes at every boundary `i` (`(batch, num_tokens + 1, dim)`) of the sentence in which
        each first-pass entity is one type token (§5.4).  An entity cut by the boundary keeps its
        words on the context's side (it is not outside the fragment); its other words belong to the
        fragment.  With `U`/`V` the codes of the substituted sequence and `a`/`b` the start/end of
        the entity cut at `i` (`a = b = i` if none):
        left(i) = α^(i-a) U[units before a] + (P[i] - α^(i-a) P[a]), and symmetrically on the right.
        """
        batch_size, num_tokens = mask.shape
        in_entity, entity_start = substitutions["in_entity"], substitutions["start"]
        positions = torch.arange(num_tokens, device=mask.device).unsqueeze(0)
        interior = in_entity & (entity_start < positions)  # token continues an entity
        first_word = in_entity & ~interior
        is_unit = mask & ~interior
        units_before = torch.nn.functional.pad(torch.cumsum(is_unit.long(), dim=1), (1, 0))  # (batch, T + 1)
        unit_values = torch.where(
            first_word.unsqueeze(-1), type_embedding(substitutions["type"]), embedded
        ) * is_unit.unsqueeze(-1)
        batch_index = torch.arange(batch_size, device=mask.device).unsqueeze(1).expand(-1, num_tokens)
        units = embedded.new_zeros(embedded.shape).index_put(
            (batch_index[is_unit], units_before[:, :-1][is_unit]), unit_values[is_unit]
        )
        unit_mask = positions < units_before[:, -1:]
        unit_left = prefix_codes(units, unit_mask, self.alpha)
        unit_right = prefix_codes(units, unit_mask, self.alpha, reverse=True)

        boundaries = torch.arange(num_tokens + 1, device=mask.device).unsqueeze(0).expand(batch_size, -1)
        cut = torch.nn.functional.pad(interior, (0, 1))
        cut_start = torch.where(cut, torch.nn.functional.pad(entity_start, (0, 1)), boundaries)
        cut_end = torch.where(cut, torch.nn.functional.pad(substitutions["end"], (0, 1)), boundaries)

        def gather(values: torch.Tensor, index: torch.LongTensor) -> torch.Tensor:
            return batched_index_select(values, index)

        left_decay = self.alpha ** (boundaries - cut_start).unsqueeze(-1).float()
        left_context = left_decay * gather(unit_left, units_before.gather(1, cut_start)) + (
            left - left_decay * gather(left, cut_start)
        )
        right_decay = self.alpha ** (cut_end - boundaries).unsqueeze(-1).float()
        right_context = right_decay * gather(unit_right, units_before.gather(1, cut_end)) + (
            right - right_decay * gather(right, cut_end)
        )
        return left_context, right_context

    def _character_codes(self, characters: Dict[str, torch.Tensor], mask: torch.BoolTensor) -> "_CharacterCodes":
        """
        The batch's characters end to end, each word followed by the separator (`_join_words`),
        and their FOFE prefix codes.  A fragment's code is a difference of two prefix codes, so
        the characters of other sentences cancel out; none are spent on padding.
        """
        character_ids = characters["token_characters"]  # (batch, num_tokens, num_characters)
        flat_ids, token_offsets, token_lengths = _join_words(
            character_ids, mask, self.character_embedding.num_embeddings - 1
        )
        embedded = self.character_embedding(flat_ids).unsqueeze(0)
        return _CharacterCodes(
            flat_ids=flat_ids,
            token_offsets=token_offsets,
            token_lengths=token_lengths,
            left=prefix_codes(embedded, None, self.character_alpha)[0],
            right=prefix_codes(embedded, None, self.character_alpha, reverse=True)[0],
        )

    def _character_cnn_features(
        self, characters: "_CharacterCodes", character_starts: torch.LongTensor, character_ends: torch.LongTensor
    ) -> torch.Tensor:
        """`(num_spans, cnn_dim)`: the character CNN of each fragment's characters."""
        # A fragment's windows lie inside it, so the CNN runs once over all the characters.
        embedded = self.cnn_character_embedding(characters.flat_ids).unsqueeze(0)
        return self.character_cnn(embedded, character_starts.unsqueeze(0), character_ends.unsqueeze(0))[0]

    def _decode_output(self, output_dict: Dict[str, Any]) -> List[List[Tuple[ScoredSpan, int]]]:
        """`decode` of a forward output, each span's `score` replaced by its confidence."""
        confidences = output_dict["class_confidences"]
        probabilities = confidences if self.calibrated_decoding else output_dict["class_probabilities"]
        decoded = self.decode(
            probabilities, output_dict["span_starts"], output_dict["span_ends"], output_dict["span_mask"], confidences
        )
        return [
            [
                (replace(span, score=span.score if span.confidence is None else span.confidence), level)
                for span, level in spans
            ]
            for spans in decoded
        ]

    def decode(
        self,
        probabilities: torch.Tensor,
        starts: torch.LongTensor,
        ends: torch.LongTensor,
        span_mask: torch.BoolTensor,
        confidences: Optional[torch.Tensor] = None,
    ) -> List[List[Tuple[ScoredSpan, int]]]:
        """
        Per sentence, `(span, nesting level)` pairs (Algorithms 2-5) from the span probabilities;
        `confidences` (same shape), when given, become the spans' `confidence`.
        """
        scores, classes = probabilities.detach().max(dim=-1)
        candidates = span_mask & (classes > 0) & (scores >= min(self.thresholds))
        batch_index, span_index = candidates.nonzero(as_tuple=True)
        chosen = classes[batch_index, span_index]
        reported = (
            scores[batch_index, span_index]
            if confidences is None
            else confidences.detach()[batch_index, span_index].gather(1, chosen.unsqueeze(1)).squeeze(1)
        )
        rows = zip(
            batch_index.tolist(),
            starts[batch_index, span_index].tolist(),
            ends[batch_index, span_index].tolist(),
            chosen.tolist(),
            scores[batch_index, span_index].tolist(),
            reported.tolist(),
        )
        per_sentence: List[List[ScoredSpan]] = [[] for _ in range(probabilities.size(0))]
        for sentence, start, end, label, score, confidence in rows:
            per_sentence[sentence].append(ScoredSpan(start, end, self.entity_types[label - 1], score, confidence))
        return [
            decode_spans(spans, self.decoding, self.thresholds, merge_adjacent=self.merge_adjacent)
            for spans in per_sentence
        ]

    def make_output_human_readable(self, output_dict: Dict[str, Any]) -> Dict[str, Any]:
        """
        Adds `spans` (per sentence, dicts with `start`, `end` (exclusive), `label`, `score`, `level`)
        and, when the instances had metadata, `tags` and `tag_confidences`.
        """
        decoded = self._decode_output(output_dict)
        output_dict["spans"] = [
            [
                {"start": span.start, "end": span.end, "label": span.label, "score": span.score, "level": level}
                for span, level in spans
            ]
            for spans in decoded
        ]
        if "words" in output_dict:
            output_dict["tags"], output_dict["tag_confidences"] = self._tags_of_spans(output_dict, decoded)
        return output_dict

    def _tags_of_spans(
        self, output_dict: Dict[str, Any], decoded: List[List[Tuple[ScoredSpan, int]]]
    ) -> Tuple[List[List[str]], List[List[float]]]:
        """Per sentence, the BIO tags of its level-1 spans and each tag's confidence (see the class docstring)."""
        starts, ends, span_mask = output_dict["span_starts"], output_dict["span_ends"], output_dict["span_mask"]
        lengths = [len(words) for words in output_dict["words"]]
        positions = torch.arange(max(lengths, default=0), device=starts.device)
        covers = (starts.unsqueeze(-1) <= positions) & (positions < ends.unsqueeze(-1)) & span_mask.unsqueeze(-1)
        none_probabilities = output_dict["class_confidences"][..., 0].detach().unsqueeze(-1)
        outside = torch.where(covers, none_probabilities, torch.ones_like(none_probabilities)).min(dim=1).values
        all_tags, all_confidences = [], []
        for length, spans, row in zip(lengths, decoded, outside.tolist()):
            tags, confidences = ["O"] * length, row[:length]
            for span, level in spans:
                if level == 1:
                    tags[span.start : span.end] = [f"B-{span.label}"] + [f"I-{span.label}"] * (
                        span.end - span.start - 1
                    )
                    confidences[span.start : span.end] = [span.score] * (span.end - span.start)
            all_tags.append(tags)
            all_confidences.append(confidences)
        return all_tags, all_confidences

    def get_metrics(self, reset: bool = False) -> Dict[str, float]:
        metrics = {"span_accuracy": self.accuracy.get_metric(reset)}
        if not self.training:
            metrics.update(self.span_f1.get_metric(reset))
            metrics.update(self.span_calibration.get_metric(reset))
        return metrics

    # ----------------------------------------------------------------------------------------------
    # Calibration (`nerzoo.modules.calibration`)

    def calibration_site(self, config_prefix: str) -> CalibrationSite:
        """The span softmax's temperature, `temperature` in the model's config."""
        key = f"{config_prefix}.temperature" if config_prefix else "temperature"
        return CalibrationSite((key,), self._calibration_log_likelihood, self._set_temperatures)

    def _set_temperatures(self, temperatures: Sequence[float]) -> None:
        self.temperature = float(temperatures[0])

    def _calibration_log_likelihood(self, batch: CalibrationBatch, temperatures: torch.Tensor) -> torch.Tensor:
        """`(batch_size,)` log-probability of every scored span's gold class, summed per sentence."""
        log_probabilities = torch.log_softmax(batch.logits.double() / temperatures[0], dim=-1)
        gold = log_probabilities.gather(2, batch.tags.unsqueeze(-1)).squeeze(-1)
        if batch.mixture is not None:
            first = batch.mixture.double().gather(2, batch.tags.unsqueeze(-1)).squeeze(-1)
            gold = torch.log(self.interpolation * first + (1 - self.interpolation) * gold.exp())
        return (gold * batch.mask).sum(dim=1)

    def calibration_batch(self, output_dict: Dict[str, Any], batch: Dict[str, Any]) -> Optional[CalibrationBatch]:
        entities = batch.get("entities")
        if entities is None or "class_logits" not in output_dict:
            return None
        mask = output_dict["span_mask"]
        gold = self._gold_classes(entities.long(), output_dict["span_starts"], output_dict["span_ends"], mask)
        mixture = output_dict.get("first_pass_probabilities")
        return CalibrationBatch(output_dict["class_logits"], gold, mask, mixture).detached()


def _uniform_embedding(num_embeddings: int, dim: int) -> torch.nn.Embedding:
    embedding = torch.nn.Embedding(num_embeddings, dim, padding_idx=0)
    with torch.no_grad():
        embedding.weight.uniform_(-1.0, 1.0)
        embedding.weight[0].zero_()
    return embedding


def _row_prefix_mask(counts: torch.LongTensor) -> torch.BoolTensor:
    """`(batch, max(1, max(counts)))`: the first `counts[b]` entries of row `b` are true."""
    width = max(int(counts.max()), 1) if counts.numel() else 1
    return torch.arange(width, device=counts.device).unsqueeze(0) < counts.unsqueeze(1)


def _scatter_rows(values: torch.Tensor, mask: torch.BoolTensor) -> torch.Tensor:
    """`values` `(mask.sum(), ...)` laid out row by row at the true entries of `mask`, zeros elsewhere."""
    padded = values.new_zeros(*mask.shape, *values.shape[1:])
    padded[mask] = values
    return padded


class _CharacterCodes(NamedTuple):
    """
    `flat_ids` `(num_characters,)`: the batch's words one after the other, each followed by the
    separator; `token_offsets`, `token_lengths` `(batch, num_tokens)`: where each word's characters
    are; `left`, `right` `(num_characters + 1, character_dim)`: prefix codes.
    """

    flat_ids: torch.LongTensor
    token_offsets: torch.LongTensor
    token_lengths: torch.LongTensor
    left: torch.Tensor
    right: torch.Tensor

    def span_offsets(
        self, span_batch: torch.LongTensor, starts: torch.LongTensor, ends: torch.LongTensor
    ) -> Tuple[torch.LongTensor, torch.LongTensor]:
        """Character offsets (end exclusive) of the word spans `starts`..`ends` of sentences `span_batch`."""
        character_starts = self.token_offsets[span_batch, starts]
        last_word = (ends - 1).clamp(min=0)
        character_ends = torch.maximum(
            self.token_offsets[span_batch, last_word] + self.token_lengths[span_batch, last_word], character_starts
        )
        return character_starts, character_ends


class _Terms:
    """Codes `(num_rows, dim_k)` and the weight blocks `(out_dim, dim_k)` they meet, for one product."""

    def __init__(self) -> None:
        self.codes: List[torch.Tensor] = []
        self.weights: List[torch.Tensor] = []

    def add(self, codes: torch.Tensor, weight: torch.Tensor) -> None:
        self.codes.append(codes)
        self.weights.append(weight)

    def projected(self) -> torch.Tensor:
        """`sum_k codes[k] @ weights[k].T`, `(num_rows, out_dim)`."""
        return torch.cat(self.codes, dim=-1) @ torch.cat(self.weights, dim=1).t()


def _weighted_row_sums(terms: List[Tuple[torch.Tensor, torch.LongTensor, Optional[torch.Tensor]]]) -> torch.Tensor:
    """
    `sum_k weight_k[s] * table_k[rows_k[s]]` for every s (`weight_k` `None` is 1): the tables
    `(num_rows_k, dim)` end to end, each sum one bag of `embedding_bag`.  `(num_sums, dim)`.
    """
    offsets = [0]
    for table, _, _ in terms[:-1]:
        offsets.append(offsets[-1] + table.size(0))
    indices = torch.stack([rows + offset for (_, rows, _), offset in zip(terms, offsets)], dim=1)
    ones = None
    weights = []
    for table, rows, weight in terms:
        if weight is None:
            ones = ones if ones is not None else torch.ones(rows.shape, dtype=table.dtype, device=rows.device)
            weight = ones
        weights.append(weight)
    table = torch.cat([table for table, _, _ in terms])
    return torch.nn.functional.embedding_bag(indices, table, mode="sum", per_sample_weights=torch.stack(weights, dim=1))


def _window_sums(values: torch.Tensor, max_width: int) -> torch.Tensor:
    """
    `(max_width * num_rows, dim)`: row `(width - 1) * num_rows + r` is `values[r : r + width].sum(0)`
    (cut short at the end).
    """
    num_rows = values.size(0)
    sums = [values]
    for width in range(2, max_width + 1):  # a loop over the widths, not over spans
        following = torch.nn.functional.pad(values[width - 1 :], (0, 0, 0, min(width - 1, num_rows)))
        sums.append(sums[-1] + following)
    return torch.cat(sums)


def _rows(values: torch.Tensor, span_batch: torch.LongTensor, positions: torch.LongTensor) -> torch.Tensor:
    """`values[span_batch[k], positions[k]]` for every k: `(batch, length, dim)` -> `(num_spans, dim)`."""
    batch_size, length, dim = values.shape
    return values.reshape(batch_size * length, dim).index_select(0, span_batch * length + positions)


def _flat_span_codes(
    prefix: torch.Tensor,
    span_batch: torch.LongTensor,
    starts: torch.LongTensor,
    ends: torch.LongTensor,
    alpha: float,
    reverse: bool = False,
) -> torch.Tensor:
    """`span_codes` of flat spans (`(num_spans,)` each, in sentence `span_batch[k]`): `(num_spans, dim)`."""
    batch_size, num_positions, dim = prefix.shape
    offsets = span_batch * num_positions
    flat_prefix = prefix.reshape(1, batch_size * num_positions, dim)
    return span_codes(flat_prefix, (offsets + starts).unsqueeze(0), (offsets + ends).unsqueeze(0), alpha, reverse)[0]


def _join_words(
    character_ids: torch.LongTensor, mask: torch.BoolTensor, separator: int
) -> Tuple[torch.LongTensor, torch.LongTensor, torch.LongTensor]:
    """
    The batch's characters as one sequence without padding: every word of every sentence, in
    order, each followed by `separator`.  Returns the `(num_characters,)` ids and each word's
    offset and length `(batch, num_tokens)` (0 for padding).
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
