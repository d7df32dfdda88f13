"""
`allennlp export ARCHIVE OUTPUT_DIR` writes a trained tagger's scores as an ONNX graph (`model.onnx`,
dynamic batch and length axes; any model that is `Exportable`: bilstm_crf, char_gated_tagger,
deptree_ner, fofe_ner, me_crf, seq2biseq and their contextual twins) and beside it what
`nerzoo_runtime` needs to tag text without allennlp or torch (the CRF, or fofe_ner's span decoding,
runs there): `tagger.json` (the graph's inputs, tag scheme, CRF scores or span decoding,
temperatures, tokenizer, deptree_ner's spaCy parser), `vocabularies.json` and `model_card.json`
(the archive's metrics and config, nerzoo's version, the check).  Nothing is written for a model it
cannot export, nor unless the runtime's tags on sample sentences and `--check-file`'s lines equal the
archive predictor's with every confidence within 1e-4.  `--quantize int8` then stores int8 weights.
Needs onnx and onnxruntime: `pip install nerzoo[onnx]`.
"""

import argparse
import importlib.metadata
import importlib.util
import json
import pathlib
import shutil
import sys
import uuid
from typing import Any, Dict, Optional

import torch
from allennlp.commands.subcommand import Subcommand
from allennlp.common.checks import ConfigurationError
from allennlp.models.archival import Archive, load_archive
from nerzoo_runtime.spacy_loading import DEFAULT_SPACY_PIPELINE

from nerzoo.commands.export_check import check, check_inputs, quantize_int8
from nerzoo.commands.export_graph import exported_indexers, write_graph
from nerzoo.contracts import Exportable
from nerzoo.modules.seq2seq_encoders.allennlp_export_forms import traced_form

OPSET = 17


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


def traced_scores(archive: Archive) -> torch.nn.Module:
    """The model's `export_scores()` with every part in its traced form (parameters shared); raises what the model lacks."""
    model, name = archive.model, archive.config["model"]["type"]
    if not isinstance(model, Exportable):
        refusal = "it is none of the models `allennlp export` exports (an `Exportable` nerzoo tagger)"
    else:
        refusal = model.export_refusal()
    try:
        if refusal is None:
            return traced_form(model.export_scores(), []).eval()
    except ConfigurationError as error:
        refusal = error.message
    raise ConfigurationError(f"cannot export this {name}: {refusal}")


def export_archive(
    archive_file: str,
    output_dir: str,
    check_file: Optional[str] = None,
    spacy_model: str = DEFAULT_SPACY_PIPELINE,
    quantize: Optional[str] = None,
) -> Dict[str, Any]:
    """Writes the export of `archive_file` into `output_dir` (new, or empty) once checked; returns its model card."""
    missing = [name for name in ("onnx", "onnxruntime") if importlib.util.find_spec(name) is None]
    if missing:
        raise ConfigurationError(f"the export needs {' and '.join(missing)}: pip install nerzoo[onnx]")
    output = pathlib.Path(output_dir)
    if output.exists() and (not output.is_dir() or any(output.iterdir())):
        raise ConfigurationError(f"{output} exists and is not an empty directory: choose a new one")
    for path in filter(None, (archive_file, check_file)):
        if not pathlib.Path(path).is_file():
            raise ConfigurationError(f"no file at {path}")
    try:
        archive = load_archive(archive_file)
    except Exception as error:  # tarfile's, gzip's, json's, torch's or allennlp's: all mean the same here
        reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise ConfigurationError(f"{archive_file} is not an archive of a nerzoo tagger: {reason}") from None
    scores = traced_scores(archive)
    indexers, token_indexers = exported_indexers(archive, scores)
    inputs = check_inputs(archive, indexers, check_file)
    config, vocab, model = archive.config.as_dict(quiet=True), archive.model.vocab, archive.model
    staging = output.parent / f".{output.name}-{uuid.uuid4().hex}"
    staging.mkdir(parents=True)  # moved to `output` once complete
    try:
        write_graph(archive, scores, indexers, staging / "model.onnx", OPSET)
        settings = {
            "format_version": 1,
            "model_type": config["model"]["type"],
            "label_namespace": model.label_namespace,
            "indexers": indexers,
            **model.export_decoding(),
            "tokenizer": {"spacy_model": spacy_model},
        }
        (staging / "tagger.json").write_text(json.dumps(settings, indent=1))
        for indexer in indexers:
            if "tokenizer_file" in indexer:
                token_indexers[indexer["name"]].save_tokenizer(str(staging / indexer["tokenizer_file"]))
        keys = ("namespace", "character_namespace", "pos_namespace", "relation_namespace")
        spaces = [model.label_namespace] + [indexer[key] for indexer in indexers for key in keys if key in indexer]
        vocabularies = {
            space: [vocab.get_token_from_index(i, space) for i in range(vocab.get_vocab_size(space))]
            for space in spaces
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
