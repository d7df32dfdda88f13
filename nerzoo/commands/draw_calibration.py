import argparse
from typing import List, NamedTuple

import torch
from allennlp.commands.subcommand import Subcommand
from allennlp.common.checks import ConfigurationError

from nerzoo.commands import one_line_errors
from nerzoo.commands.calibrate import evaluate_archive
from nerzoo.commands.draw_attention import save_figure, subplots
from nerzoo.metrics.span_calibration import (
    calibration_error,
    expected_calibration_error,
    fixed_bins,
    precision_at_coverage,
    reliability,
)

COVERAGES = [step / 100 for step in range(5, 101, 5)]
# Finer where a trained tagger puts most of its spans.
EDGES = [0.0, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 1.0]


class SpanConfidences(NamedTuple):
    name: str
    confidences: torch.Tensor
    correct: torch.Tensor


@Subcommand.register("draw-calibration")
class DrawCalibration(Subcommand):
    """
    `allennlp draw-calibration ARCHIVE DATA_FILE --output calibration.png` draws how far the span
    confidences of a model can be trusted on `DATA_FILE` (read with the archive's validation reader,
    gold labels needed), beside those of `--calibrated CALIBRATED.tar.gz` (e.g. the output of
    `allennlp calibrate`) when given:

    - the reliability diagram: each confidence bin's precision (spans exactly right) against its mean
      confidence, with its count of spans; the legend gives each archive's ECE over these bins and
      over `--bins` equal-count bins (the `span_ece` of `allennlp evaluate`);
    - the precision / coverage curve: the precision of the most confident 5% to 100% of the spans.

    The file is SVG when `--output` ends in `.svg`, PNG otherwise.

    Registered as a `Subcommand` with name "draw-calibration".
    """

    def add_subparser(self, parser: argparse._SubParsersAction) -> argparse.ArgumentParser:
        subparser = parser.add_parser(
            self.name,
            description=self.__doc__,
            help="Draw the reliability diagram and precision / coverage curve of a model's span confidences.",
        )
        subparser.add_argument("archive_file", help="a model.tar.gz of a nerzoo tagger")
        subparser.add_argument("input_file", help="labelled data, in the format of the archive's dataset reader")
        subparser.add_argument("--output", "-o", required=True, help="PNG or SVG file to write")
        subparser.add_argument("--calibrated", default=None, help="a second archive (e.g. calibrated) to draw beside")
        subparser.add_argument("--bins", type=int, default=10, help="equal-count bins of the reliability diagram")
        subparser.add_argument("--batch-size", type=int, default=64)
        subparser.add_argument("--cuda-device", type=int, default=-1)
        subparser.set_defaults(func=_draw_calibration)
        return subparser


def draw(series: List[SpanConfidences], output_path: str, num_bins: int) -> None:
    figure, (diagram, curve) = subplots(1, 2, figsize=(11, 5))
    diagram.plot([0, 1], [0, 1], color="grey", linestyle="--", linewidth=1, label="perfect calibration")
    for index, (name, confidences, correct) in enumerate(series):
        bins = fixed_bins(confidences, EDGES)
        rows = reliability(confidences, correct, bins)
        label = (
            f"{name}: ECE {calibration_error(confidences, correct, bins):.3f} (these bins), "
            f"{expected_calibration_error(confidences, correct, num_bins):.3f} ({num_bins} equal-count); "
            f"{len(confidences)} spans"
        )
        _, mean_confidences, bin_precisions = zip(*rows)
        (line,) = diagram.plot(mean_confidences, bin_precisions, marker="os"[index % 2], label=label)
        for count, confidence, precision in rows:
            diagram.annotate(
                str(count),
                (confidence, precision),
                textcoords="offset points",
                xytext=(-8, 6 if index == 0 else -12),
                fontsize=7,
                color=line.get_color(),
            )
        precisions = [precision_at_coverage(confidences, correct, coverage) for coverage in COVERAGES]
        curve.plot([100 * coverage for coverage in COVERAGES], precisions, marker="os"[index % 2], label=name)
    diagram.set_xlabel("mean confidence of the bin")
    diagram.set_ylabel("precision of the bin (spans exactly right)")
    diagram.set_title("reliability (spans per bin beside each point)")
    diagram.legend(loc="upper left", fontsize=8)
    curve.set_xlabel("coverage: % of predicted spans kept, most confident first")
    curve.set_ylabel("precision of the kept spans")
    curve.set_title("precision / coverage")
    curve.legend(loc="lower left", fontsize=8)
    curve.grid(alpha=0.3)
    save_figure(figure, output_path)


def _draw_calibration(args: argparse.Namespace) -> None:
    with one_line_errors():
        if args.bins < 1:
            raise ConfigurationError("--bins must be at least 1")
        archives = [("archive", args.archive_file)] + ([("calibrated", args.calibrated)] if args.calibrated else [])
        series = []
        for name, path in archives:
            evaluation = evaluate_archive(path, args.input_file, args.batch_size, args.cuda_device).evaluation
            if not len(evaluation.confidences):
                raise ConfigurationError(f"{path}: no predicted spans with confidences on {args.input_file}")
            series.append(SpanConfidences(name, evaluation.confidences, evaluation.correct))
        draw(series, args.output, args.bins)
    for name, confidences, correct in series:
        ece = expected_calibration_error(confidences, correct, args.bins)
        fixed = calibration_error(confidences, correct, fixed_bins(confidences, EDGES))
        at = ", ".join(
            f"precision at {round(100 * c)}% coverage {precision_at_coverage(confidences, correct, c):.4f}"
            for c in (0.8, 0.9)
        )
        print(
            f"{name}: {len(confidences)} spans, ECE {ece:.4f} ({args.bins} equal-count bins), {fixed:.4f} (fixed bins), {at}"
        )
    print(f"wrote {args.output}")
