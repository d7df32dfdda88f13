import argparse
import io
import json
import logging
import os
import tarfile
import tempfile
from typing import Any, Dict, List, NamedTuple

import torch
from allennlp.commands.subcommand import Subcommand
from allennlp.common.checks import ConfigurationError
from allennlp.data.data_loaders import MultiProcessDataLoader
from allennlp.data.samplers import BucketBatchSampler
from allennlp.models import Model
from allennlp.models.archival import CONFIG_NAME, Archive, load_archive
from allennlp.nn import util

from nerzoo.commands import one_line_errors
from nerzoo.modules.crf.calibration import (
    CalibrationBatch,
    CalibrationSource,
    FittedTemperatures,
    calibration_modules,
    fit_temperatures,
    has_spans,
    site_config,
)

logger = logging.getLogger(__name__)


@Subcommand.register("calibrate")
class Calibrate(Subcommand):
    """
    `allennlp calibrate ARCHIVE DEV_DATA --output-file CALIBRATED.tar.gz` fits the temperatures of
    a model's confidences on `DEV_DATA` (read with the archive's validation dataset reader) and
    writes an archive that predicts with them: the same weights and vocabulary, the temperatures in
    its config (`nerzoo.modules.crf.calibration`, Guo et al. 2017).  Predictions do not change; the
    confidences (span and tag probabilities) do.

    The temperatures minimise a negative log-likelihood on `DEV_DATA`: with `--objective span` (the
    default) that of the predicted spans' correctness, each span right with probability its
    confidence (a site without spans, POS tags or `fofe_ner`, falls back to the sequence objective);
    with `--objective sequence` that of the gold labels (for a CRF head, of the gold tag sequence).
    `--temperatures 2` gives a CRF one temperature for the emissions and one for the transitions.

    Prints the fitted temperatures and the dev metrics before and after (span F1, `span_ece`,
    `span_brier`), and, as its last line, the same as one JSON object.

    Registered as a `Subcommand` with name "calibrate".
    """

    def add_subparser(self, parser: argparse._SubParsersAction) -> argparse.ArgumentParser:
        subparser = parser.add_parser(
            self.name,
            description=self.__doc__,
            help="Fit the temperatures of a model's confidences on dev data; write a calibrated archive.",
        )
        subparser.add_argument("archive_file", help="a model.tar.gz of a nerzoo tagger")
        subparser.add_argument("input_file", help="dev data, in the format of the archive's dataset reader")
        subparser.add_argument("--output-file", required=True, help="the calibrated archive to write (.tar.gz)")
        subparser.add_argument(
            "--temperatures",
            type=int,
            choices=[1, 2],
            default=1,
            help="1: one temperature for all scores; 2: a CRF's emissions and transitions apart",
        )
        subparser.add_argument(
            "--objective",
            choices=["span", "sequence"],
            default="span",
            help="minimise the NLL of the predicted spans' correctness (span, where a site has spans) or of "
            "the gold labels (sequence)",
        )
        subparser.add_argument("--batch-size", type=int, default=64)
        subparser.add_argument("--cuda-device", type=int, default=-1)
        subparser.add_argument("-o", "--overrides", default="", help="overrides of the archive's config")
        subparser.set_defaults(func=_calibrate)
        return subparser


class Evaluation(NamedTuple):
    metrics: Dict[str, float]
    batches: Dict[str, List[CalibrationBatch]]  # what each site needs to fit its temperatures
    confidences: torch.Tensor  # of every predicted span, `(num_spans,)`
    correct: torch.Tensor  # 1.0 where the span is right


def evaluate(
    model: Model, loader: MultiProcessDataLoader, modules: Dict[str, CalibrationSource], cuda_device: int = -1
) -> Evaluation:
    """One pass over the data in evaluation mode: the model's metrics, each site's batches, the span confidences."""
    model.eval()
    model.get_metrics(reset=True)
    batches: Dict[str, List[CalibrationBatch]] = {name: [] for name in modules}
    with torch.no_grad():
        for batch in loader:
            batch = util.move_to_device(batch, cuda_device)
            output = model(**batch)
            for name, module in modules.items():
                collected = module.calibration_batch(output, batch)
                if collected is not None:
                    batches[name].append(collected)
    # The span confidence metrics of the sites that have spans.
    pairs = [metric.pairs() for module in modules.values() if (metric := module.span_calibration) is not None]
    confidences = torch.cat([pair[0] for pair in pairs]) if pairs else torch.zeros(0, dtype=torch.float64)
    correct = torch.cat([pair[1] for pair in pairs]) if pairs else torch.zeros(0, dtype=torch.float64)
    return Evaluation(model.get_metrics(reset=True), batches, confidences, correct)


def write_archive(archive_file: str, output_file: str, config: Dict[str, Any]) -> None:
    """Copies `archive_file` with its config replaced by `config`; the output appears complete or not at all."""
    directory = os.path.dirname(os.path.abspath(output_file))
    os.makedirs(directory, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=".calibrate-", suffix=".tar.gz", dir=directory)
    os.close(handle)
    try:
        with tarfile.open(archive_file, "r:gz") as source, tarfile.open(temporary, "w:gz") as target:
            for member in source.getmembers():
                if member.name.lstrip("./") != CONFIG_NAME:
                    target.addfile(member, source.extractfile(member) if member.isfile() else None)
            data = json.dumps(config, indent=4).encode("utf-8")
            info = tarfile.TarInfo(CONFIG_NAME)
            info.size = len(data)
            target.addfile(info, io.BytesIO(data))
        os.replace(temporary, output_file)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)


def set_dotted(config: Dict[str, Any], dotted: str, value: Any) -> None:
    node = config
    *parents, last = dotted.split(".")
    for key in parents:
        if not isinstance(node.get(key), dict):
            raise ConfigurationError(f"the archive's config has no object at {dotted!r} to hold a temperature")
        node = node[key]
    node[last] = value


class ArchiveEvaluation(NamedTuple):
    archive: Archive
    modules: Dict[str, CalibrationSource]  # `calibration_modules`
    loader: MultiProcessDataLoader
    evaluation: Evaluation


def evaluate_archive(
    archive_file: str, data_file: str, batch_size: int = 64, cuda_device: int = -1, overrides: str = ""
) -> ArchiveEvaluation:
    """Loads an archive whose model has calibration sites and evaluates it on labelled `data_file`."""
    if not os.path.exists(archive_file):
        raise ConfigurationError(f"{archive_file}: no such archive")
    archive = load_archive(archive_file, cuda_device=cuda_device, overrides=overrides)
    modules = calibration_modules(archive.model)
    if not modules:
        raise ConfigurationError(f"{archive_file}: {type(archive.model).__name__} has no confidences to calibrate")
    # Batches of similar lengths, the same every time.
    sampler = BucketBatchSampler(batch_size=batch_size, padding_noise=0.0, shuffle=False)
    loader = MultiProcessDataLoader(archive.validation_dataset_reader, data_file, batch_sampler=sampler)
    loader.index_with(archive.model.vocab)
    return ArchiveEvaluation(archive, modules, loader, evaluate(archive.model, loader, modules, cuda_device))


def calibrate(args: argparse.Namespace) -> Dict[str, Any]:
    archive, modules, loader, before = evaluate_archive(
        args.archive_file, args.input_file, args.batch_size, args.cuda_device, args.overrides
    )
    config = archive.config.duplicate().as_dict(quiet=True)
    fitted: Dict[str, FittedTemperatures] = {}
    settings: Dict[str, float] = {}
    for name, module in modules.items():
        if not before.batches[name]:
            logger.warning("calibrate: no gold labels reached %s; its temperature stays as it is", name or "the model")
            continue
        site = module.calibration_site(name)
        objective = args.objective
        if objective == "span" and not has_spans(site, before.batches[name]):
            logger.info("calibrate: %s has no predicted spans; fitting the sequence likelihood", name or "the model")
            objective = "sequence"
        count = min(args.temperatures, len(site.config_keys))
        fitted[name] = fit_temperatures(site, before.batches[name], count, objective)
        site.set_temperatures(fitted[name].temperatures)
        for key, value in site_config(site, fitted[name].temperatures).items():
            set_dotted(config, f"model.{key}", value)
            settings[key] = value
    if not fitted:
        raise ConfigurationError(f"{args.input_file}: no gold labels to calibrate on")
    after = evaluate(archive.model, loader, modules, args.cuda_device)
    write_archive(args.archive_file, args.output_file, config)
    return {
        "temperatures": settings,
        "dev_nll": {name: [result.nll_before, result.nll_after] for name, result in fitted.items()},
        "objectives": {name: result.objective for name, result in fitted.items()},
        "before": before.metrics,
        "after": after.metrics,
        "output_file": args.output_file,
    }


def _calibrate(args: argparse.Namespace) -> None:
    with one_line_errors():
        report = calibrate(args)
    for key, value in report["temperatures"].items():
        print(f"{key}: {value:.4f}")
    for name, (nll_before, nll_after) in report["dev_nll"].items():
        per = "span" if report["objectives"][name] == "span" else "instance"
        print(f"dev NLL per {per} ({name or 'model'}): {nll_before:.4f} -> {nll_after:.4f}")
    for key in sorted(report["after"]):
        if key in report["before"] and (key.startswith("span_") or key.endswith("-overall") or key == "accuracy"):
            print(f"dev {key}: {report['before'][key]:.4f} -> {report['after'][key]:.4f}")
    print(f"calibrated archive: {report['output_file']}")
    print(json.dumps(report))
