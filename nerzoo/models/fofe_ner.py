from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch
from allennlp.common import Lazy
from allennlp.common.checks import ConfigurationError, check_dimensions_match
from allennlp.data import TextFieldTensors, Vocabulary
from allennlp.models.model import Model
from allennlp.modules import TokenEmbedder
from allennlp.nn import InitializerApplicator
from allennlp.nn.util import get_text_field_mask
from allennlp.training.metrics import CategoricalAccuracy
from nerzoo_runtime.span_decoding import DECODERS, ScoredSpan, decode_spans

from nerzoo.metrics.span_calibration import SpanCalibration
from nerzoo.metrics.span_set_f1 import SpanSetF1
from nerzoo.models._fofe_ner_export import ExportedFofeNer
from nerzoo.modules.crf.calibration import CalibrationBatch, CalibrationSite
from nerzoo.modules.fofe import span_features as fofe_span_features
from nerzoo.modules.fofe import spans as fofe_spans
from nerzoo.modules.fofe.first_layer import FofeFeedForward
from nerzoo.modules.fofe.second_pass import FirstPassCache, check_first_pass
from nerzoo.modules.fofe.span_character_cnn import SpanCharacterCnn
from nerzoo.modules.fofe.span_output import candidate_spans, confidence_as_score, spans_to_tags
from nerzoo.modules.fofe.spans import FlatSpans


@Model.register("fofe_ner")
class FofeNer(Model):
    """
    FOFE-NER, local detection of (possibly nested) entities: Xu (2017), "Fixed-size
    Ordinally-Forgetting Encoding and Its Applications", MSc thesis, York University, chapter 5.

    Every fragment of up to `max_span_width` words (§5.1) is classified into NONE or an entity type
    by a feed-forward net over fixed-size FOFE features (§5.2), without a loop over spans.  Training
    scores the spans Algorithm 1 samples; decoding (Algorithms 2-5) keeps the spans whose best class
    is not NONE, pruned per nesting level by `thresholds` and made non-overlapping by `decoding`
    (`["highest_first", "highest_first"]` also returns entities nested one level deep).  With
    `first_pass` it is the second pass (§5.4).  The parts are in `nerzoo.modules.fofe`.

    `make_output_human_readable` adds `spans`, `tags` and `tag_confidences`; a span's `score` is the
    probability of its class at `temperature` (interpolated for a second pass).  Reads `entity_spans`.

    # Parameters

    vocab : `Vocabulary`, required
    word_embedders : `Dict[str, TokenEmbedder]`, required
        One per word vocabulary, keyed by its token indexer's name; each gives five word features.
    feedforward : `Lazy[FofeFeedForward]`, required
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
        A trained, frozen `fofe_ner` over the same vocabulary (`{"type": "from_archive", ...}`): its
        entities become type tokens (an embedding per type and vocabulary) in the contexts.
    interpolation : `float`, optional (default = `0.5`)
        `λ`, the first pass's weight at inference: `λ p1 + (1 - λ) p2`.
    first_pass_cache_size : `int`, optional (default = `500000`)
        Sentences whose first-pass results are kept (on the model's device); `0` keeps none.
    label_namespace : `str`, optional (default = `"labels"`), the entity types
    temperature : `float`, optional (default = `1.0`)
        Divides the span scores in the reported probabilities (fitted by `allennlp calibrate`).
    initializer : `InitializerApplicator`, optional
    """

    default_predictor = "sequence_tagger"

    def __init__(
        self,
        vocab: Vocabulary,
        word_embedders: Dict[str, TokenEmbedder],
        feedforward: Lazy[FofeFeedForward],
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
        initializer: InitializerApplicator = InitializerApplicator(),
        **kwargs,
    ) -> None:
        super().__init__(vocab, **kwargs)
        for valid, message in [
            (temperature > 0, f"temperature must be > 0, got {temperature}"),
            (bool(word_embedders), "fofe_ner needs at least one word embedder"),
            (max_span_width >= 1, f"max_span_width must be >= 1, got {max_span_width}"),
            (0 < alpha < 1 and 0 < character_alpha < 1, f"forgetting factors must lie in (0, 1), got {alpha}, {character_alpha}"),
            (0 <= overlap_sample_rate <= 1, f"overlap_sample_rate must lie in [0, 1], got {overlap_sample_rate}"),
            (0 <= disjoint_sample_rate <= 1, f"disjoint_sample_rate must lie in [0, 1], got {disjoint_sample_rate}"),
            (len(decoding) == len(thresholds) > 0, f"decoding {list(decoding)} and thresholds {list(thresholds)} need one entry per level"),
            (set(decoding) <= set(DECODERS), f"unknown decoding {sorted(set(decoding) - set(DECODERS))}; choose from {sorted(DECODERS)}"),
            (0 <= interpolation <= 1, f"interpolation must lie in [0, 1], got {interpolation}"),
            (first_pass_cache_size >= 0, f"first_pass_cache_size must be >= 0, got {first_pass_cache_size}"),
        ]:  # fmt: skip
            if not valid:
                raise ConfigurationError(message)
        self.temperature = float(temperature)
        self.label_namespace = label_namespace
        self.entity_types = [
            vocab.get_token_from_index(index, label_namespace) for index in range(vocab.get_vocab_size(label_namespace))
        ]
        num_classes = len(self.entity_types) + 1  # class 0 is NONE
        self.max_span_width, self.alpha, self.character_alpha = max_span_width, alpha, character_alpha
        self.overlap_sample_rate, self.disjoint_sample_rate = overlap_sample_rate, disjoint_sample_rate
        self.decoding, self.thresholds = list(decoding), [float(value) for value in thresholds]
        self.merge_adjacent, self.interpolation = merge_adjacent, interpolation
        self.first_pass_cache = FirstPassCache(first_pass_cache_size)
        self.word_embedders = torch.nn.ModuleDict(word_embedders)
        feature_dim = sum(5 * embedder.get_output_dim() for embedder in word_embedders.values())
        self.characters = characters
        self.character_embedding, self.cnn_character_embedding, self.character_cnn = None, None, None
        if characters is not None:
            # One extra row (the last) is the separator between the fragment's words.
            num_characters = vocab.get_vocab_size(character_namespace) + 1
            self.character_embedding = fofe_span_features.uniform_embedding(num_characters, character_dim)
            feature_dim += 2 * character_dim
            if cnn_filters > 0:
                self.cnn_character_embedding = fofe_span_features.uniform_embedding(num_characters, character_dim)
                self.character_cnn = SpanCharacterCnn(character_dim, cnn_filters, cnn_kernel_sizes)
                feature_dim += self.character_cnn.get_output_dim()
        self.dropout = torch.nn.Dropout(dropout)
        self.feedforward = feedforward.construct(input_dim=feature_dim)
        check_dimensions_match(feature_dim, self.feedforward.get_input_dim(), "span features", "feedforward input")
        self.output_layer = torch.nn.Linear(self.feedforward.get_output_dim(), num_classes)
        self.type_embeddings = torch.nn.ModuleDict()
        if first_pass is not None:
            check_first_pass(first_pass, FofeNer, vocab, max_span_width)
            for name, embedder in word_embedders.items():
                self.type_embeddings[name] = torch.nn.Embedding(len(self.entity_types), embedder.get_output_dim())
        self.accuracy = CategoricalAccuracy()
        self.span_f1 = SpanSetF1(self.entity_types)
        self.span_calibration = SpanCalibration()
        initializer(self)
        # Attached after the initializer, whose regexes would otherwise re-initialise its weights.
        self.first_pass = first_pass
        if first_pass is not None:
            first_pass.requires_grad_(False)

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
            Gold type ids at `[start, end - 1]`, -1 elsewhere, -2 at spans left open (never trained on).
        metadata : `List[Dict]`, optional; `words` and gold `entities` are used

        # Returns

        `class_probabilities` `(batch_size, num_spans, num_classes)` (class 0 is NONE) of the spans
        `span_starts`/`span_ends` `(batch_size, num_spans)` (end exclusive) where `span_mask` is true
        (only the sampled spans in training); `loss` with gold entities.
        """
        mask = get_text_field_mask(tokens)
        starts, ends, span_mask = fofe_spans.enumerate_spans(mask, self.max_span_width)
        gold = known = None
        if entities is not None:
            entities = entities.long()  # allennlp's AdjacencyField pads a float tensor
            gold = fofe_spans.gold_span_classes(entities, starts, ends, span_mask)
            known = fofe_spans.known_spans(entities, starts, ends)

        keep = span_mask
        if self.training and gold is not None:
            rates = self.overlap_sample_rate, self.disjoint_sample_rate
            keep = span_mask & known & fofe_spans.sample_spans(gold, entities, starts, ends, mask, *rates)
        # The scored spans as one flat list (row-major order of `keep`): no work on padding.
        spans = FlatSpans.where(keep, starts, ends)

        first_pass_probabilities = substitutions = None
        if self.first_pass is not None:
            sentences = None if metadata is None else [instance["words"] for instance in metadata]
            substitutions, first_pass_probabilities = self.first_pass_cache.results(
                self.first_pass, tokens, mask, sentences, self.thresholds[0]
            )

        if self.training:
            hidden = self.feedforward(self.dropout(self.span_features(tokens, mask, spans, substitutions)))
        else:
            words, characters, cnn_features = self.codes(tokens, mask, spans, substitutions)
            alphas, nested = (self.alpha, self.character_alpha), substitutions is not None
            first_layer = self.feedforward.first_layer.from_codes(
                words, characters, mask, spans, *alphas, self.max_span_width, nested, cnn_features
            )
            hidden = self.feedforward.from_first_layer(first_layer)
        logits = self.output_layer(hidden)  # (num_scored, num_classes)
        probabilities = torch.softmax(logits, dim=-1)
        confidences = probabilities if self.temperature == 1.0 else torch.softmax(logits / self.temperature, dim=-1)
        if first_pass_probabilities is not None and not self.training:
            probabilities, confidences = (
                self.interpolation * first_pass_probabilities + (1 - self.interpolation) * values
                for values in (probabilities, confidences)
            )

        scored_mask = fofe_spans.row_prefix_mask(keep.sum(1))
        output: Dict[str, Any] = {
            "class_probabilities": fofe_spans.scatter_rows(probabilities, scored_mask),
            "class_confidences": fofe_spans.scatter_rows(confidences, scored_mask),
            "span_starts": fofe_spans.scatter_rows(spans.starts, scored_mask),
            "span_ends": fofe_spans.scatter_rows(spans.ends, scored_mask),
            "span_mask": scored_mask,
        }
        if not self.training:
            output["class_logits"] = fofe_spans.scatter_rows(logits, scored_mask)
            if first_pass_probabilities is not None:
                output["first_pass_probabilities"] = fofe_spans.scatter_rows(first_pass_probabilities, scored_mask)
        if gold is not None:
            # The loss is over the spans whose class the annotation fixes.
            scored_known = known[keep]
            flat_gold, known_logits = gold[keep][scored_known], logits[scored_known]
            if flat_gold.numel():
                output["loss"] = torch.nn.functional.cross_entropy(known_logits, flat_gold)
                self.accuracy(known_logits, flat_gold)
            else:
                output["loss"] = logits.sum() * 0.0
        if metadata is not None:
            output["words"] = [instance["words"] for instance in metadata]
            if not self.training and all("entities" in instance for instance in metadata):
                unknown = fofe_spans.open_spans(entities)  # spans over open tokens are neither right nor wrong
                decoded = [
                    [span for span, _ in spans if (row, span.start, span.end) not in unknown]
                    for row, spans in enumerate(self._decode_output(output))
                ]
                predicted = [[(span.start, span.end, span.label) for span in spans] for spans in decoded]
                gold_sets = [set(map(tuple, instance["entities"])) for instance in metadata]
                self.span_f1(predicted, gold_sets)
                right = [span in gold_set for spans, gold_set in zip(predicted, gold_sets) for span in spans]
                self.span_calibration([span.score for spans in decoded for span in spans], right)
        return output

    def span_features(
        self, tokens: TextFieldTensors, mask: torch.BoolTensor, spans: FlatSpans, entities: Optional[Dict] = None
    ) -> torch.Tensor:
        """`(num_spans, feature_dim)`: `fofe_span_features.span_features`, with the first pass's `entities` if given."""
        words, characters, cnn_features = self.codes(tokens, mask, spans, entities)
        return fofe_span_features.span_features(
            words, characters, spans, self.alpha, self.character_alpha, cnn_features
        )

    def codes(
        self,
        tokens: TextFieldTensors,
        mask: torch.BoolTensor,
        spans: FlatSpans,
        entities: Optional[Dict] = None,
        join: Optional[Callable] = None,
        cnn: Optional[torch.nn.Module] = None,
    ) -> Tuple[List[fofe_span_features.WordCodes], Optional[fofe_span_features.CharacterCodes], Optional[torch.Tensor]]:
        """The prefix codes of the words (with the first pass's `entities`) and characters, and the
        spans' CNN features; `join` and `cnn` replace `join_words` and `character_cnn` (the export's)."""
        type_embeddings = dict(self.type_embeddings.items()) if entities is not None else {}
        words = [
            fofe_span_features.word_codes(
                embedder(**tokens[name]) * mask.unsqueeze(-1), mask, self.alpha, entities, type_embeddings.get(name)
            )
            for name, embedder in self.word_embedders.items()
        ]
        if self.character_embedding is None:
            return words, None, None
        characters = fofe_span_features.character_codes(
            tokens[self.characters]["token_characters"], mask, self.character_embedding, self.character_alpha, join
        )
        if self.character_cnn is None:
            return words, characters, None
        offsets = characters.span_offsets(spans)
        cnn = self.character_cnn if cnn is None else cnn
        return words, characters, characters.cnn_features(self.cnn_character_embedding, cnn, *offsets)

    def _decode_output(self, output_dict: Dict[str, Any]) -> List[List[Tuple[ScoredSpan, int]]]:
        """`decode` of a forward output, each span's `score` replaced by its confidence."""
        keys = ("class_probabilities", "span_starts", "span_ends", "span_mask", "class_confidences")
        decoded = self.decode(*(output_dict[key] for key in keys))
        return [[(confidence_as_score(span), level) for span, level in spans] for spans in decoded]

    def decode(
        self,
        probabilities: torch.Tensor,
        starts: torch.LongTensor,
        ends: torch.LongTensor,
        span_mask: torch.BoolTensor,
        confidences: Optional[torch.Tensor] = None,
    ) -> List[List[Tuple[ScoredSpan, int]]]:
        """Per sentence, `(span, nesting level)` pairs (Algorithms 2-5); `confidences` become the spans' `confidence`."""
        candidates = candidate_spans(
            probabilities, starts, ends, span_mask, self.entity_types, min(self.thresholds), confidences
        )
        return [
            decode_spans(spans, self.decoding, self.thresholds, merge_adjacent=self.merge_adjacent)
            for spans in candidates
        ]

    def make_output_human_readable(self, output_dict: Dict[str, Any]) -> Dict[str, Any]:
        """Adds `spans` (`start`, `end` (exclusive), `label`, `score`, `level`) and with `words` `tags`, `tag_confidences`."""
        decoded = self._decode_output(output_dict)
        fields = "start", "end", "label", "score"
        output_dict["spans"] = [
            [{**{name: getattr(span, name) for name in fields}, "level": level} for span, level in spans]
            for spans in decoded
        ]
        if "words" in output_dict:
            lengths = [len(words) for words in output_dict["words"]]
            spans = [output_dict[key] for key in ("span_starts", "span_ends", "span_mask")]
            none_probabilities = output_dict["class_confidences"][..., 0]
            output_dict["tags"], output_dict["tag_confidences"] = spans_to_tags(
                decoded, lengths, *spans, none_probabilities
            )
        return output_dict

    def get_metrics(self, reset: bool = False) -> Dict[str, float]:
        metrics = {"span_accuracy": self.accuracy.get_metric(reset)}
        if not self.training:
            metrics.update(self.span_f1.get_metric(reset))
            metrics.update(self.span_calibration.get_metric(reset))
        return metrics

    def export_refusal(self) -> Optional[str]:
        """`Exportable`: a second pass has no exported form."""
        return None if self.first_pass is None else "its first pass (a second fofe_ner inside) has no exported form"

    def export_scores(self) -> torch.nn.Module:
        """`Exportable`: the logits of every fragment (`ExportedFofeNer`), decoded in `nerzoo_runtime`."""
        return ExportedFofeNer(self)

    def export_decoding(self) -> Dict[str, Any]:
        """`Exportable`: the span decoding (Algorithms 2-5) and the softmax's temperature."""
        spans = {"max_span_width": self.max_span_width, "decoding": self.decoding, "thresholds": self.thresholds}
        spans.update(merge_adjacent=self.merge_adjacent)
        temperatures = {"temperature": self.temperature, "transition_temperature": self.temperature}
        return {"tag_scheme": "BIO", "crf": None, "spans": spans, **temperatures}

    def calibration_site(self, config_prefix: str) -> CalibrationSite:
        """The span softmax's temperature, `temperature` in the model's config."""
        key = f"{config_prefix}.temperature" if config_prefix else "temperature"
        return CalibrationSite((key,), self._calibration_log_likelihood, self._set_temperature)

    def _set_temperature(self, temperatures: Sequence[float]) -> None:
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
        spans = entities.long(), output_dict["span_starts"], output_dict["span_ends"]
        mask = output_dict["span_mask"] & fofe_spans.known_spans(*spans)
        gold = fofe_spans.gold_span_classes(*spans, mask)
        mixture = output_dict.get("first_pass_probabilities")
        return CalibrationBatch(output_dict["class_logits"], gold, mask, mixture).detached()
