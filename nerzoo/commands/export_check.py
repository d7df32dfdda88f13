"""
The check `allennlp export` runs before it writes anything (`nerzoo_runtime` tags the check inputs as
the archive's predictor does, every confidence within `TOLERANCE`), and the int8 quantisation.
"""

import logging
import pathlib
from typing import Any, Dict, List, Optional, Sequence

from allennlp.common.checks import ConfigurationError
from allennlp.common.util import lazy_groups_of
from allennlp.models.archival import Archive
from allennlp.predictors import Predictor
from nerzoo_runtime import Tagger

from nerzoo.commands.export_graph import SAMPLE_SENTENCES
from nerzoo.predictors.input_lines import parse_line

# Largest difference of a confidence between the export and the archive that the check allows.
TOLERANCE = 1e-4


def check_inputs(archive: Archive, indexers: List[Dict[str, Any]], check_file: Optional[str]) -> List[Any]:
    """The sample sentences, sentences of 1 to 40 of the vocabulary's words, and `check_file`'s inputs."""
    inputs: List[Any] = [sentence.split() for sentence in SAMPLE_SENTENCES]
    kinds = ("single_id", "word_and_characters")  # indexers of words
    namespace = next((indexer["namespace"] for indexer in indexers if indexer["type"] in kinds), None)
    words = list(archive.model.vocab.get_token_to_index_vocabulary(namespace))[2:402] if namespace else []
    lengths = [1, 2, 5, 9, 17, 40]
    while words:
        inputs.append(words[: lengths[len(inputs) % len(lengths)]])
        words = words[len(inputs[-1]) :]
    for number, line in enumerate(pathlib.Path(check_file).read_text().splitlines() if check_file else [], 1):
        if not line.strip():
            continue
        data = parse_line(line, number)  # empty if not a JSON object
        item = data.get("tokens", data.get("sentence"))
        if not isinstance(item, (list, str)):
            raise ConfigurationError(
                f'{check_file}, line {number}: expected {{"tokens": [...]}} or {{"sentence": "..."}}'
            )
        inputs.append(item)
    return inputs


def confidences(result: Dict[str, Any]) -> List[float]:
    """A result's tag confidences, then its spans' (fofe_ner's: their `score`)."""
    return result["tag_confidences"] + [span.get("confidence", span.get("score")) for span in result["spans"]]


def largest_difference(results: Sequence[Dict], others: Sequence[Dict]) -> float:
    pairs = [pair for result, other in zip(results, others) for pair in zip(confidences(result), confidences(other))]
    return max((abs(a - b) for a, b in pairs), default=0.0)


def outline(result: Dict[str, Any]) -> List[Any]:
    """A result's tokens, their offsets and tags, and its spans' labels and bounds."""
    spans = [(span["label"], span["start"], span["end"], span.get("level")) for span in result["spans"]]
    return [result.get(key) for key in ("tokens", "token_offsets", "tags")] + spans


def check(archive: Archive, directory: pathlib.Path, inputs: List[Any], spacy_model: str) -> Dict[str, Any]:
    """Tags `inputs` with the archive's predictor and with the export; raises at the first difference."""

    predictor = Predictor.from_archive(archive, "sequence_tagger", extra_args={"spacy_model": spacy_model})
    lines = [{"sentence": item} if isinstance(item, str) else {"tokens": item} for item in inputs]
    expected = [result for batch in lazy_groups_of(lines, 16) for result in predictor.predict_batch_json(batch)]
    got = Tagger.load(directory, spacy_model).tag(inputs, batch_size=7)
    differs = "the exported model differs from the archive, nothing was written"
    for number, (item, want, have) in enumerate(zip(inputs, expected, got)):
        where = f"{differs}: check input {number} ({str(item)[:80]})"
        if "error" in want or "error" in have or outline(want) != outline(have):
            shown = [result.get("error") or list(zip(result["tokens"], result["tags"])) for result in (want, have)]
            raise ConfigurationError(f"{where}: the archive gave {shown[0]}, the export {shown[1]}")
        for a, b in zip(confidences(want), confidences(have)):
            if abs(a - b) > TOLERANCE:
                raise ConfigurationError(f"{where}: a confidence of {a} in the archive is {b} in the export")
    return {
        "inputs": len(inputs),
        "tokens": sum(len(result["tokens"]) for result in expected),
        "tags_equal": True,
        "largest_confidence_difference": largest_difference(expected, got),
        "tolerance": TOLERANCE,
    }


def quantize_int8(directory: pathlib.Path, inputs: List[Any], spacy_model: str) -> Dict[str, Any]:
    """Replaces `model.onnx` by onnxruntime's dynamic int8 quantisation; returns how it moved the check's results."""
    from onnxruntime.quantization import QuantType, quantize_dynamic  # onnx, which it needs, is optional (nerzoo[onnx])

    before = Tagger.load(directory, spacy_model).tag(inputs)
    logging.disable(logging.WARNING)  # its advice to pre-process the graph, whose shape inference fails on LSTMs
    try:
        quantize_dynamic(directory / "model.onnx", directory / "model.int8.onnx", weight_type=QuantType.QInt8)
    finally:
        logging.disable(logging.NOTSET)
    (directory / "model.int8.onnx").replace(directory / "model.onnx")
    after = Tagger.load(directory, spacy_model).tag(inputs)
    pairs = [pair for old, new in zip(before, after) for pair in zip(old["tags"], new["tags"])]
    return {
        "type": "int8",
        "check_tags_alike": sum(a == b for a, b in pairs) / max(len(pairs), 1),
        "largest_confidence_difference": largest_difference(before, after),
    }
