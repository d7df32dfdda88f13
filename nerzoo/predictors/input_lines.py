"""
Per-line input handling for nerzoo's predictors under `allennlp predict`: every input line gives
exactly one output line, in order; a line that cannot be used gives an error result naming its
line number (and a warning on stderr), and never costs the other lines of its batch.
"""

import json
import logging
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

from allennlp.common.checks import ConfigurationError
from allennlp.common.util import JsonDict
from allennlp.data import DatasetReader, Instance
from allennlp.models import Model
from allennlp.predictors.predictor import Predictor

from nerzoo.data.spacy_pipelines import MissingSpacyPipeline

logger = logging.getLogger(__name__)

# Errors that belong to one input (its content), not to the setup: reported on that input's line.
INPUT_ERRORS = (ConfigurationError, ValueError, TypeError, KeyError, IndexError)


class InputLine(dict):
    """
    One line read by `load_line`: the JSON object (empty with an `error` when the line is not one) and
    its 1-based number among the non-blank lines `allennlp predict` reads.
    """

    def __init__(self, data: Dict[str, Any], line_number: int, error: Optional[str] = None) -> None:
        super().__init__(data)
        self.line_number = line_number
        self.error = error


def parse_line(line: str, line_number: int) -> InputLine:
    """`line` as an `InputLine`; text that is not a JSON object gives an `InputLine` with `error` set."""
    try:
        data = json.loads(line)
    except json.JSONDecodeError as error:
        return InputLine({}, line_number, f"not JSON ({error.msg}, column {error.colno}): {line.strip()[:200]}")
    if not isinstance(data, dict):
        return InputLine({}, line_number, f"a JSON object is expected, got {line.strip()[:200]}")
    return InputLine(data, line_number)


def predict_lines(
    inputs: Sequence[JsonDict],
    to_instance: Callable[[JsonDict], Union[Instance, JsonDict]],
    predict_instances: Callable[[List[Instance]], List[JsonDict]],
) -> List[JsonDict]:
    """
    One result per input, in order.  `to_instance` turns an input into an `Instance`, or into a
    finished result (a dict) when there is nothing to predict (e.g. an empty text); the instances
    are predicted together by `predict_instances`.  An input error (`INPUT_ERRORS`) gets `{"error": ...}`
    (and its `line`), logged as a warning; a missing spaCy pipeline concerns every input and is raised.
    """
    results: List[Optional[JsonDict]] = [None] * len(inputs)
    instances: List[Instance] = []
    positions: List[int] = []
    for position, item in enumerate(inputs):
        try:
            if isinstance(item, InputLine) and item.error is not None:
                raise ConfigurationError(item.error)
            built = to_instance(item)
        except MissingSpacyPipeline:
            raise
        except INPUT_ERRORS as error:
            result = results[position] = {"error": str(error) or type(error).__name__}
            if isinstance(item, InputLine):
                result["line"] = item.line_number
            logger.warning("input%s: %s", f" line {item.line_number}" if "line" in result else "", result["error"])
            continue
        if isinstance(built, Instance):
            instances.append(built)
            positions.append(position)
        else:
            results[position] = built
    if instances:
        for position, result in zip(positions, predict_instances(instances)):
            results[position] = result
    return results  # type: ignore[return-value]


class LinePredictor(Predictor):
    """
    A predictor whose every input line gives one output line (`predict_lines`).  Subclasses build an
    input's instance (or its finished result) in `_instance_or_result`, a model output's in `_format`.
    """

    def __init__(self, model: Model, dataset_reader: DatasetReader, frozen: bool = True) -> None:
        super().__init__(model, dataset_reader, frozen)
        self._lines_read = 0

    def _instance_or_result(self, json_dict: JsonDict) -> Union[Instance, JsonDict]:
        return self._json_to_instance(json_dict)

    def load_line(self, line: str) -> JsonDict:
        self._lines_read += 1
        return parse_line(line, self._lines_read)

    def predict_json(self, inputs: JsonDict) -> JsonDict:
        """Raises `ConfigurationError` on unusable input, except for lines read by `load_line`."""
        if isinstance(inputs, InputLine):
            return self.predict_batch_json([inputs])[0]
        built = self._instance_or_result(inputs)
        return built if isinstance(built, dict) else self.predict_instance(built)

    def predict_batch_json(self, inputs: List[JsonDict]) -> List[JsonDict]:
        """One result per input; an unusable input gets `{"error": ..., "line": ...}` and costs no other."""
        return predict_lines(inputs, self._instance_or_result, self.predict_batch_instance)

    def predict_instance(self, instance: Instance) -> JsonDict:
        return self.predict_batch_instance([instance])[0]

    def predict_batch_instance(self, instances: List[Instance]) -> List[JsonDict]:
        outputs = self._model.forward_on_instances(instances)
        return [self._format(instance, output) for instance, output in zip(instances, outputs)]
