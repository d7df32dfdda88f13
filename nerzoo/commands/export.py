"""
`allennlp export ARCHIVE OUTPUT_DIR` writes a trained tagger's tag scores as an ONNX graph
(`model.onnx`, dynamic batch and length axes; bilstm_crf, char_gated_tagger, deptree_ner, fofe_ner,
me_crf, seq2biseq and their contextual twins) and beside it what `nerzoo_runtime` needs to tag text
without allennlp or torch (the CRF, or fofe_ner's span decoding, runs there): `tagger.json` (the
graph's inputs, tag scheme, CRF scores or span decoding, temperatures, tokenizer, deptree_ner's spaCy
parser), `vocabularies.json` and `model_card.json` (the archive's metrics and config, nerzoo's
version, the check).  Nothing is written for a model it cannot export, nor unless the runtime's
tags on sample sentences and `--check-file`'s lines equal the archive predictor's with every
confidence within 1e-4.  `--quantize int8` then stores int8 weights.
"""

import argparse
import copy
import importlib.metadata
import json
import logging
import pathlib
import shutil
import sys
import uuid
import warnings
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import torch
from allennlp.commands.subcommand import Subcommand
from allennlp.common.checks import ConfigurationError
from allennlp.common.util import lazy_groups_of
from allennlp.data import Batch, Instance, Token
from allennlp.data.fields import TextField
from allennlp.data.token_indexers import SingleIdTokenIndexer, TokenCharactersIndexer
from allennlp.models.archival import Archive, load_archive
from allennlp.modules.seq2seq_encoders import PytorchSeq2SeqWrapper
from allennlp.modules.seq2vec_encoders import PytorchSeq2VecWrapper
from allennlp.nn.util import get_text_field_mask
from allennlp.predictors import Predictor

from nerzoo.data.dependency_trees import DEPENDENCY_NAMESPACE, POS_NAMESPACE, DependencyReader
from nerzoo.data.spacy_pipelines import DEFAULT_SPACY_PIPELINE
from nerzoo.data.token_indexers.contextual_word_pieces_indexer import ContextualWordPiecesIndexer
from nerzoo.data.token_indexers.lexical_features_indexer import LexicalFeaturesIndexer
from nerzoo.data.token_indexers.word_and_characters_indexer import WordAndCharactersIndexer
from nerzoo.models._fofe_ner_export import ExportedFofeNer
from nerzoo.models._seq2biseq_export import exportable, exported_decode
from nerzoo.models.bilstm_crf import BiLstmCrf
from nerzoo.models.deptree_ner import DeptreeNer
from nerzoo.models.fofe_ner import FofeNer
from nerzoo.models.me_crf import MeCrf
from nerzoo.models.seq2biseq import Seq2Biseq
from nerzoo.modules.row_reversal import gather_steps, reversal_index
from nerzoo.modules.seq2seq_encoders._tree_lstm_export import ExportedTreeLstm
from nerzoo.modules.seq2seq_encoders.fast_lstm import FastLstm
from nerzoo.modules.token_embedders.contextual_word_vectors import ContextualWordVectors
from nerzoo.predictors.input_lines import parse_line

# What the models `allennlp export` cannot export yet lack, by registered name.
NOT_EXPORTABLE = {
    "me_crf_thread_discourse": "its threads of posts (title and text encoders, a memory over posts) have no exported form yet",
}
OPSET = 17
# Largest difference of a confidence between the export and the archive that the check allows.
TOLERANCE = 1e-4
SAMPLE_SENTENCES = [
    "Peter Blackburn visited Brussels on Monday .",
    "Anna Keller , chief executive of Norvik Bank , resigned on Friday .",
    "Oslo",
]
# The graph's inputs from a `contextual_word_pieces` indexer (`nerzoo_runtime.word_pieces`), `{indexer}.{key}`, and
# what their second axis counts; type ids (all 0, which the embedder ignores) are left out.
WORD_PIECES = {"token_ids": "num_pieces", "mask": "num_tokens", "offsets": "num_tokens", "wordpiece_mask": "num_pieces"}
# The graph's inputs from a `dependency_parse` "indexer" (`nerzoo_runtime.dependency_parse`): deptree_ner's arguments.
PARSE = ("pos_tags", "dependency_labels", "head_indices")
EXPORTED = (BiLstmCrf, DeptreeNer, FofeNer, MeCrf, Seq2Biseq)
Exported = Union[BiLstmCrf, DeptreeNer, FofeNer, MeCrf, Seq2Biseq]


@Subcommand.register("export")
class Export(Subcommand):
    """The `allennlp export` subcommand (the module's docstring is its description)."""

    def add_subparser(self, parser: argparse._SubParsersAction) -> argparse.ArgumentParser:
        subparser = parser.add_parser(self.name, description=__doc__, help="Export a tagger to ONNX for nerzoo_runtime")
        subparser.add_argument("archive_file", help="a model.tar.gz of a nerzoo tagger")
        subparser.add_argument("output_dir", help="the directory to write (new, or empty)")
        subparser.add_argument("--check-file", help="more check inputs: JSON lines as `allennlp predict` reads")
        subparser.add_argument("--quantize", choices=["int8"], help="dynamic int8 quantisation, after the check")
        subparser.add_argument("--spacy-model", default=DEFAULT_SPACY_PIPELINE, help="tokenises raw text")
        subparser.set_defaults(func=_export)
        return subparser


def _export(args: argparse.Namespace) -> None:
    try:
        card = export_archive(args.archive_file, args.output_dir, args.check_file, args.spacy_model, args.quantize)
    except ConfigurationError as error:
        sys.exit(f"error: {error.message}")
    print(json.dumps({"output_dir": args.output_dir, "check": card["check"], "quantized": card["quantized"]}))


class TaggerGraph(torch.nn.Module):
    """An exported model from the tensors of its exported indexers (`graph_inputs`) to its tag (fofe_ner: span) scores."""

    def __init__(self, model: Exported, indexers: Sequence[Dict[str, Any]]) -> None:
        super().__init__()
        self.model = traceable(model)
        self.keys = [(name, key) for _, name, key, _ in graph_inputs(indexers)]

    def forward(self, *ids: torch.Tensor) -> torch.Tensor:
        tokens: Dict[str, Dict[str, torch.Tensor]] = {}
        for (name, key), tensor in zip(self.keys, ids):
            tokens.setdefault(name, {})[key] = tensor
        parse = tokens.pop("parse", {})
        for tensors in tokens.values():
            if "wordpiece_mask" in tensors:  # one segment (the runtime refuses more): the two masks are one
                tensors["segment_concat_mask"] = tensors["wordpiece_mask"]
        mask = get_text_field_mask(tokens)
        if isinstance(self.model, ExportedFofeNer):
            return self.model(tokens, mask)
        if isinstance(self.model, Seq2Biseq):
            return exported_decode(self.model, self.model.encoder(self.model.text_field_embedder(tokens), mask), mask)
        if isinstance(self.model, MeCrf):
            return self.model.head.logits(self.model.memory(self.model.text_field_embedder(tokens), mask))
        if isinstance(self.model, DeptreeNer):
            return self.model.head.logits(self.model._encode(tokens, mask, *(parse.get(key) for key in PARSE))[0])
        return self.model.head.logits(self.model._encode(tokens, mask))


class LstmFinalStates(PytorchSeq2VecWrapper):
    """
    allennlp's `lstm` Seq2VecEncoder (the top layer's final state in each direction) as the export
    traces it: its LSTM runs as `fast_lstm` on the padded batch and the final states are read at
    each row's length.  `lstm` packs its batch with the lengths as Python numbers, which a trace
    would fix to the traced batch.

    # Parameters

    encoder : `PytorchSeq2VecWrapper`, required
        allennlp's `lstm`; its `torch.nn.LSTM`, parameters included, is shared, not copied.
    """

    def __init__(self, encoder: PytorchSeq2VecWrapper) -> None:
        lstm = encoder._module
        super().__init__(lstm)
        self.steps = FastLstm(
            lstm.input_size, lstm.hidden_size, lstm.num_layers, lstm.bias, lstm.dropout, lstm.bidirectional
        )
        self.steps._module = lstm  # the same parameters

    def forward(self, inputs: torch.Tensor, mask: torch.BoolTensor, hidden_state: None = None) -> torch.Tensor:
        # (batch_size, num_steps, directions * hidden_size), zeros at padding
        steps = self.steps(inputs, mask)
        last = (mask.long().sum(dim=1) - 1).clamp(min=0)
        final = steps.gather(1, last[:, None, None].expand(-1, 1, steps.size(-1)))[:, 0]
        if not self._module.bidirectional:
            return final
        size = self._module.hidden_size  # the backward direction ends at the first step
        return torch.cat([final[:, :size], steps[:, 0, size:]], dim=-1)


class PaddedGru(PytorchSeq2SeqWrapper):
    """
    allennlp's `gru` Seq2SeqEncoder as the export traces it: run on the padded batch as `fast_lstm`
    runs an LSTM (the backward direction over each row reversed within its length), zeros at padding.
    `gru` packs its batch with the lengths as Python numbers, which a trace would fix.

    # Parameters

    encoder : `PytorchSeq2SeqWrapper`, required
        allennlp's `gru`; its `torch.nn.GRU`, parameters included, is shared, not copied.
    """

    def __init__(self, encoder: PytorchSeq2SeqWrapper) -> None:
        super().__init__(encoder._module)

    def forward(self, inputs: torch.Tensor, mask: torch.BoolTensor, hidden_state: None = None) -> torch.Tensor:
        gru, reverse = self._module, reversal_index(mask)
        names = ["weight_ih", "weight_hh"] + (["bias_ih", "bias_hh"] if gru.bias else [])
        zeros = inputs.new_zeros(1, inputs.size(0), gru.hidden_size)
        output = inputs
        for layer in range(gru.num_layers):
            directions = []
            for suffix in ["", "_reverse"] if gru.bidirectional else [""]:
                weights = [getattr(gru, f"{name}_l{layer}{suffix}") for name in names]
                steps = gather_steps(output, reverse) if suffix else output
                states, _ = torch.gru(steps, zeros, weights, gru.bias, 1, 0.0, False, False, True)
                directions.append(gather_steps(states, reverse) if suffix else states)
            output = torch.cat(directions, dim=-1)
        return output * mask.unsqueeze(-1)


def traceable(model: Exported) -> Union[Exported, ExportedFofeNer]:
    """
    A copy of `model` with its `lstm` Seq2VecEncoders as `LstmFinalStates`, its `gru` Seq2SeqEncoders as
    `PaddedGru`, its Tree-LSTM as `ExportedTreeLstm`; a fofe_ner as `ExportedFofeNer`.
    """
    model = copy.deepcopy(model)
    if isinstance(model, FofeNer):
        return ExportedFofeNer(model)
    if getattr(model, "syntactic_encoder", None) is not None:
        model.syntactic_encoder = ExportedTreeLstm(model.syntactic_encoder)
    for module in list(model.modules()):
        for name, child in module.named_children():
            if isinstance(child, PytorchSeq2VecWrapper):
                setattr(module, name, LstmFinalStates(child))
            elif isinstance(child, PytorchSeq2SeqWrapper) and type(child._module) is torch.nn.GRU:
                setattr(module, name, PaddedGru(child))
    return model


def graph_inputs(indexers: Sequence[Dict[str, Any]]) -> List[Tuple[str, str, str, Dict[int, str]]]:
    """Each input of the graph: its name, its indexer's name and key, and its dynamic axes."""
    words = {0: "batch_size", 1: "num_tokens"}
    characters = {**words, 2: "num_characters"}
    inputs = []
    for indexer in indexers:
        name = indexer["name"]
        if indexer["type"] == "word_and_characters":  # nerzoo_runtime's WordAndCharactersIndexer names them
            inputs += [
                (f"{name}.token_ids", name, "token_ids", words),
                (f"{name}.token_characters", name, "token_characters", characters),
            ]
        elif indexer["type"] == "contextual_word_pieces":  # nerzoo_runtime's WordPieces names them
            inputs += [(f"{name}.{key}", name, key, {**words, 1: axis}) for key, axis in WORD_PIECES.items()]
        elif indexer["type"] == "dependency_parse":
            inputs += [(key, name, key, words) for key in PARSE]
        else:
            inputs.append((name, name, indexer["key"], characters if indexer["type"] == "characters" else words))
    return inputs


def exported_indexers(archive: Archive) -> List[Dict[str, Any]]:
    """How the runtime indexes words for the graph, one entry per token indexer; raises what the model lacks."""
    name = archive.config.as_dict(quiet=True)["model"]["type"]
    if not isinstance(archive.model, EXPORTED):
        lacks = NOT_EXPORTABLE.get(
            name,
            "it is none of the models `allennlp export` exports (bilstm_crf, deptree_ner, fofe_ner, me_crf, seq2biseq)",
        )
        raise ConfigurationError(f"cannot export this {name}: {lacks}")
    if isinstance(archive.model, Seq2Biseq) and not exportable(archive.model):
        raise ConfigurationError(f"cannot export this {name}: its label decoders are not one-layer GRUs with biases")
    if isinstance(archive.model, FofeNer) and archive.model.first_pass is not None:
        raise ConfigurationError(
            f"cannot export this {name}: its first pass (a second fofe_ner inside) has no exported form"
        )
    if isinstance(archive.model, MeCrf) and archive.model.memory.window is not None:
        raise ConfigurationError(
            f"cannot export this {name}: its memory's window (band attention) has no exported form"
        )
    for module in archive.model.modules():
        if isinstance(module, PytorchSeq2VecWrapper) and type(module._module) is not torch.nn.LSTM:
            raise ConfigurationError(
                f"cannot export this {name}: its {type(module._module).__name__} Seq2VecEncoder packs its batch, "
                f"which the exporter fixes to the traced lengths (exported: lstm)"
            )
    indexers = []
    for key, indexer in archive.validation_dataset_reader._token_indexers.items():
        if isinstance(indexer, ContextualWordPiecesIndexer):
            indexers.append({"name": key, **word_piece_settings(archive, key, indexer)})
            continue
        if isinstance(indexer, SingleIdTokenIndexer) and indexer.namespace and indexer._feature_name == "text":
            settings = {"type": "single_id", "key": "tokens", "namespace": indexer.namespace}
            settings["lowercase"] = indexer.lowercase_tokens
            extras = [indexer._start_tokens, indexer._end_tokens]
        elif isinstance(indexer, TokenCharactersIndexer):
            characters = indexer._character_tokenizer
            settings = {"type": "characters", "key": "token_characters", "namespace": indexer._namespace}
            settings.update(lowercase=characters._lowercase_characters, min_padding_length=indexer._min_padding_length)
            extras = [indexer._start_tokens, indexer._end_tokens, characters._start_tokens, characters._end_tokens]
            extras.append(characters._byte_encoding)
        elif isinstance(indexer, WordAndCharactersIndexer):
            settings, extras = word_and_characters_settings(indexer), []
        elif isinstance(indexer, LexicalFeaturesIndexer):  # word shapes: no vocabulary
            indexers.append({"name": key, "type": "lexical_features", "key": "features"})
            continue
        else:
            extras = [True]
        if any(extras):  # start or end tokens, a byte encoding, or another indexer: none have an exported form
            raise ConfigurationError(
                f"cannot export this {name}: its token indexer {key!r} ({type(indexer).__name__}) has no exported "
                f"form yet (exported: single_id, characters, word_and_characters, lexical_features and contextual_word_pieces, "
                f"without start or end tokens)"
            )
        indexers.append({"name": key, **settings, "oov": archive.model.vocab._oov_token})
    if isinstance(archive.model, DeptreeNer):
        indexers.append(parse_settings(archive))
    return indexers


def parse_settings(archive: Archive) -> Dict[str, Any]:
    """How `nerzoo_runtime.dependency_parse` parses words as deptree_ner's reader does at prediction."""
    reader = archive.validation_dataset_reader
    if not isinstance(reader, DependencyReader):
        raise ConfigurationError(f"cannot export this deptree_ner: its reader {type(reader).__name__} parses no input")
    return {
        "name": "parse",
        "type": "dependency_parse",
        "spacy_model": reader.parser.spacy_model,
        "pos_attribute": reader.parser.pos_attribute,
        "tree": reader.tree,
        "pos_namespace": POS_NAMESPACE,
        "relation_namespace": DEPENDENCY_NAMESPACE,
        "oov": archive.model.vocab._oov_token,
    }


def word_and_characters_settings(indexer: WordAndCharactersIndexer) -> Dict[str, Any]:
    """How nerzoo_runtime's `WordAndCharactersIndexer` gives a word's id and its characters' ids."""
    words, characters = indexer._word_indexer, indexer._character_indexer
    return {
        "type": "word_and_characters",
        "namespace": words.namespace,
        "lowercase": words.lowercase_tokens,
        "character_namespace": characters._namespace,
        "min_padding_length": characters._min_padding_length,
    }


def word_piece_settings(archive: Archive, key: str, indexer: ContextualWordPiecesIndexer) -> Dict[str, Any]:
    """How `nerzoo_runtime.word_pieces` splits words as `indexer` does; raises what the export lacks."""
    model = archive.model
    embedders = model.word_embedders if isinstance(model, FofeNer) else model.text_field_embedder._token_embedders
    embedder = embedders[key] if key in embedders else None
    tokenizer = indexer._allennlp_tokenizer
    special = tokenizer.single_sequence_start_tokens + tokenizer.single_sequence_end_tokens
    if not isinstance(embedder, ContextualWordVectors):
        lacks = f"its word pieces {key!r} feed {type(embedder).__name__}, not contextual_word_vectors"
    elif not indexer._tokenizer.is_fast:
        lacks = f"the word pieces {key!r} come from a slow tokenizer; the runtime reads a fast one's tokenizer.json"
    elif tokenizer.single_sequence_token_type_id or any(token.type_id for token in special):
        lacks = f"the word pieces {key!r} have type ids other than 0"
    else:
        transformer = embedder._matched_embedder
        return {
            "type": "contextual_word_pieces",
            "tokenizer_file": f"{key}.tokenizer.json",
            "start_ids": [token.text_id for token in tokenizer.single_sequence_start_tokens],
            "end_ids": [token.text_id for token in tokenizer.single_sequence_end_tokens],
            "pad_id": indexer._tokenizer.pad_token_id or 0,
            # Longer sentences are folded into segments, which the graph does not do: the runtime refuses them.
            "max_length": transformer._max_length or transformer.transformer_model.config.max_position_embeddings,
        }
    raise ConfigurationError(f"cannot export this {archive.config['model']['type']}: {lacks}")


def decoder_settings(head: Any) -> Dict[str, Any]:
    """How the runtime turns the graph's scores into tags: the tag scheme, a CRF or fofe_ner's span decoding, temperatures."""
    if isinstance(head, FofeNer):
        spans = {"max_span_width": head.max_span_width, "decoding": head.decoding, "thresholds": head.thresholds}
        return {
            "tag_scheme": "BIO",
            "crf": None,
            "spans": {**spans, "merge_adjacent": head.merge_adjacent},
            "temperature": head.temperature,
            "transition_temperature": head.temperature,
        }
    return {
        "tag_scheme": head.tag_scheme,
        "crf": None if getattr(head, "crf", None) is None else head.crf.runtime_settings(),
        "crf_per_sentence": getattr(head, "crf_per_sentence", False),
        "temperature": head.scorer.temperature,
        "transition_temperature": getattr(head.scorer, "transition_temperature", head.scorer.temperature),
    }


def write_graph(archive: Archive, indexers: List[Dict[str, Any]], path: pathlib.Path) -> None:
    """`model.onnx`: the emission scores, traced on a padded batch of two sample sentences."""
    reader = archive.validation_dataset_reader
    sentences = [sentence.split() for sentence in SAMPLE_SENTENCES[:2]]
    if isinstance(archive.model, DeptreeNer):  # the reader parses them
        instances = [reader.text_to_instance(words) for words in sentences]
        for instance in instances:
            reader.apply_token_indexers(instance)
    else:
        fields = [TextField([Token(word) for word in words], reader._token_indexers) for words in sentences]
        instances = [Instance({"tokens": field}) for field in fields]
    batch = Batch(instances)
    batch.index_instances(archive.model.vocab)
    tensor_dict = batch.as_tensor_dict()
    tensors = {**tensor_dict["tokens"], "parse": {key: tensor_dict[key] for key in PARSE if key in tensor_dict}}
    inputs = graph_inputs(indexers)
    with torch.no_grad(), warnings.catch_warnings():
        # Of shapes traced as constants and LSTMs over other batch sizes: the check tags those against the archive.
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        warnings.filterwarnings("ignore", "Exporting a model to ONNX with a batch_size other than 1")
        # Of how fofe_ner's reversed codes (slices of step -1) and gathers are written in ONNX.
        warnings.filterwarnings("ignore", "Constant folding - Only steps=1")
        warnings.filterwarnings("ignore", "Exporting aten::index operator of advanced indexing")
        torch.onnx.export(
            TaggerGraph(archive.model, indexers).eval(),
            tuple(tensors[name][key] for _, name, key, _ in inputs),
            str(path),
            input_names=[name for name, *_ in inputs],
            output_names=["logits"],
            dynamic_axes={**{name: axes for name, _, _, axes in inputs}, "logits": {0: "batch_size", 1: "num_tokens"}},
            opset_version=OPSET,
            dynamo=False,
        )


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
    from nerzoo_runtime import Tagger

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
    from nerzoo_runtime import Tagger
    from onnxruntime.quantization import QuantType, quantize_dynamic

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


def export_archive(
    archive_file: str,
    output_dir: str,
    check_file: Optional[str] = None,
    spacy_model: str = DEFAULT_SPACY_PIPELINE,
    quantize: Optional[str] = None,
) -> Dict[str, Any]:
    """Writes the export of `archive_file` into `output_dir` (new, or empty) once checked; returns its model card."""
    output = pathlib.Path(output_dir)
    if output.exists() and (not output.is_dir() or any(output.iterdir())):
        raise ConfigurationError(f"{output} exists and is not an empty directory: choose a new one")
    for path in filter(None, (archive_file, check_file)):
        if not pathlib.Path(path).is_file():
            raise ConfigurationError(f"no file at {path}")
    archive = load_archive(archive_file)
    indexers = exported_indexers(archive)
    inputs = check_inputs(archive, indexers, check_file)
    config = archive.config.as_dict(quiet=True)
    staging = output.parent / f".{output.name}-{uuid.uuid4().hex}"
    staging.mkdir(parents=True)  # moved to `output` once complete
    try:
        write_graph(archive, indexers, staging / "model.onnx")
        head = getattr(archive.model, "head", archive.model)  # seq2biseq holds its scorer itself
        settings = {
            "format_version": 1,
            "model_type": config["model"]["type"],
            "label_namespace": head.label_namespace,
            "indexers": indexers,
            **decoder_settings(head),
            "tokenizer": {"spacy_model": spacy_model},
        }
        (staging / "tagger.json").write_text(json.dumps(settings, indent=1))
        for indexer in indexers:
            if indexer["type"] == "contextual_word_pieces":  # the tokenizer as the reader's indexer holds it
                tokenizer = archive.validation_dataset_reader._token_indexers[indexer["name"]]._tokenizer
                tokenizer.backend_tokenizer.save(str(staging / indexer["tokenizer_file"]))
        vocab = archive.model.vocab
        keys = ("namespace", "character_namespace", "pos_namespace", "relation_namespace")
        spaces = [indexer[key] for indexer in indexers for key in keys if key in indexer]
        vocabularies = {
            space: [vocab.get_token_from_index(i, space) for i in range(vocab.get_vocab_size(space))]
            for space in [head.label_namespace] + spaces
        }
        (staging / "vocabularies.json").write_text(json.dumps(vocabularies))
        metrics_file = pathlib.Path(archive_file).parent / "metrics.json"
        card = {
            "nerzoo_version": importlib.metadata.version("nerzoo"),
            "archive": str(archive_file),
            "model_type": config["model"]["type"],
            "onnx_opset": OPSET,
            "check": check(archive, staging, inputs, spacy_model),
            "quantized": quantize_int8(staging, inputs, spacy_model) if quantize == "int8" else None,
            "metrics": json.loads(metrics_file.read_text()) if metrics_file.is_file() else None,
            "config": config,
        }
        (staging / "model_card.json").write_text(json.dumps(card, indent=1))
        staging.replace(output)  # an empty `output` is replaced
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return card
