"""
The graph `allennlp export` writes: the inputs `nerzoo_runtime` feeds it (one entry per token
indexer in `tagger.json`, as the indexers say), and the trace of the model's scores over them.
"""

import warnings
from typing import Any, Dict, List, Sequence, Tuple

import torch
from allennlp.common.checks import ConfigurationError
from allennlp.data import Batch, TextFieldTensors
from allennlp.data.token_indexers import TokenIndexer
from allennlp.models.archival import Archive
from allennlp.nn.util import get_text_field_mask

from nerzoo.data.dependency_trees import DEPENDENCY_NAMESPACE, POS_NAMESPACE, DependencyReader
from nerzoo.data.token_indexers.allennlp_export_settings import oov_token, runtime_settings

SAMPLE_SENTENCES = [
    "Peter Blackburn visited Brussels on Monday .",
    "Anna Keller , chief executive of Norvik Bank , resigned on Friday .",
    "Oslo",
]
# The graph's inputs from a `contextual_word_pieces` indexer (`nerzoo_runtime.word_pieces`), `{indexer}.{key}`, and
# what their second axis counts; type ids (all 0, which the embedder ignores) are left out.
WORD_PIECES = {"token_ids": "num_pieces", "mask": "num_tokens", "offsets": "num_tokens", "wordpiece_mask": "num_pieces"}
# The graph's inputs from a `dependency_parse` "indexer" (`nerzoo_runtime.dependency_parse`).
PARSE = ("pos_tags", "dependency_labels", "head_indices")
EXPORTED_INDEXERS = "single_id, characters, word_and_characters, lexical_features and contextual_word_pieces"


def graph_inputs(indexers: Sequence[Dict[str, Any]]) -> List[Tuple[str, str, str, Dict[int, str]]]:
    """Each input of the graph: its name, its indexer's name and key, and its dynamic axes."""
    words = {0: "batch_size", 1: "num_tokens"}
    characters = {**words, 2: "num_characters"}
    inputs = []
    for indexer in indexers:
        name = indexer["name"]
        if indexer["type"] == "word_and_characters":  # nerzoo_runtime's WordAndCharactersIndexer names them
            inputs += [
                (f"{name}.{key}", name, key, axes)
                for key, axes in [("token_ids", words), ("token_characters", characters)]
            ]
        elif indexer["type"] == "contextual_word_pieces":  # nerzoo_runtime's WordPieces names them
            inputs += [(f"{name}.{key}", name, key, {**words, 1: axis}) for key, axis in WORD_PIECES.items()]
        elif indexer["type"] == "dependency_parse":
            inputs += [(key, name, key, words) for key in PARSE]
        else:
            inputs.append((name, name, indexer["key"], characters if indexer["type"] == "characters" else words))
    return inputs


def sample_batch(archive: Archive, sentences: Sequence[str]) -> Tuple[Dict[str, TokenIndexer], Dict[str, Any]]:
    """The reader's token indexers, and the tensors of `sentences` as the reader makes them at prediction."""
    reader = archive.validation_dataset_reader
    instances = [reader.text_to_instance(sentence.split()) for sentence in sentences]
    for instance in instances:
        reader.apply_token_indexers(instance)
    batch = Batch(instances)
    batch.index_instances(archive.model.vocab)
    return instances[0]["tokens"].token_indexers, batch.as_tensor_dict()


def exported_indexers(
    archive: Archive, scores: torch.nn.Module
) -> Tuple[List[Dict[str, Any]], Dict[str, TokenIndexer]]:
    """How the runtime indexes words for the graph, one entry per token indexer, and the reader's indexers;
    raises what the model lacks.  `scores`: the model's `export_scores()`, its `parse_keys` the parse it reads."""
    name, vocab = archive.config["model"]["type"], archive.model.vocab
    token_indexers, _ = sample_batch(archive, SAMPLE_SENTENCES[2:])
    indexers = []
    for key, indexer in token_indexers.items():
        try:
            settings = runtime_settings(indexer, vocab)
        except ConfigurationError as error:
            raise ConfigurationError(f"cannot export this {name}: {error.message} (token indexer {key!r})") from None
        if settings is None:  # start or end tokens, a byte encoding, or another indexer
            raise ConfigurationError(
                f"cannot export this {name}: its token indexer {key!r} ({type(indexer).__name__}) has no exported "
                f"form yet (exported: {EXPORTED_INDEXERS}, without start or end tokens)"
            )
        if settings["type"] == "contextual_word_pieces":
            settings["tokenizer_file"] = f"{key}.tokenizer.json"
        indexers.append({"name": key, **settings})
    reader, reads_parse = archive.validation_dataset_reader, bool(getattr(scores, "parse_keys", ()))
    if reads_parse and not isinstance(reader, DependencyReader):
        raise ConfigurationError(f"cannot export this {name}: its reader {type(reader).__name__} parses no input")
    if reads_parse:  # as `nerzoo_runtime.dependency_parse` parses words the way the reader does at prediction
        parser = {"spacy_model": reader.parser.spacy_model, "pos_attribute": reader.parser.pos_attribute}
        namespaces = {"pos_namespace": POS_NAMESPACE, "relation_namespace": DEPENDENCY_NAMESPACE}
        parse = {"name": "parse", "type": "dependency_parse", **parser, "tree": reader.tree, **namespaces}
        indexers.append({**parse, "oov": oov_token(vocab)})
    return indexers, token_indexers


class TaggerGraph(torch.nn.Module):
    """The model's `export_scores()` from the tensors of its exported indexers (`graph_inputs`)."""

    def __init__(self, scores: torch.nn.Module, indexers: Sequence[Dict[str, Any]]) -> None:
        super().__init__()
        self.scores = scores
        self.keys = [(name, key) for _, name, key, _ in graph_inputs(indexers)]

    def forward(self, *ids: torch.Tensor) -> torch.Tensor:
        tokens: TextFieldTensors = {}
        for (name, key), tensor in zip(self.keys, ids):
            tokens.setdefault(name, {})[key] = tensor
        parse = tokens.pop("parse", {})
        for tensors in tokens.values():
            if "wordpiece_mask" in tensors:  # one segment (the runtime refuses more): the two masks are one
                tensors["segment_concat_mask"] = tensors["wordpiece_mask"]
        return self.scores(tokens, get_text_field_mask(tokens), parse)


def write_graph(archive: Archive, scores: torch.nn.Module, indexers: List[Dict[str, Any]], path, opset: int) -> None:
    """`model.onnx`: the scores, traced on a padded batch of two sample sentences."""
    _, tensor_dict = sample_batch(archive, SAMPLE_SENTENCES[:2])
    tensors = {**tensor_dict["tokens"], "parse": tensor_dict}  # the parse's tensors are fields of their own
    inputs = graph_inputs(indexers)
    with torch.no_grad(), warnings.catch_warnings():
        # Of shapes traced as constants and LSTMs over other batch sizes: the check tags those against the archive.
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        warnings.filterwarnings("ignore", "Exporting a model to ONNX with a batch_size other than 1")
        # Of how fofe_ner's reversed codes (slices of step -1) and gathers are written in ONNX.
        warnings.filterwarnings("ignore", "Constant folding - Only steps=1")
        warnings.filterwarnings("ignore", "Exporting aten::index operator of advanced indexing")
        torch.onnx.export(
            TaggerGraph(scores, indexers).eval(),
            tuple(tensors[name][key] for _, name, key, _ in inputs),
            str(path),
            input_names=[name for name, *_ in inputs],
            output_names=["logits"],
            dynamic_axes={**{name: axes for name, _, _, axes in inputs}, "logits": {0: "batch_size", 1: "num_tokens"}},
            opset_version=opset,
            dynamo=False,
        )
