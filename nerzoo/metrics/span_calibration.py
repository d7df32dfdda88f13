from typing import Dict, List, Sequence, Tuple

import torch
from allennlp.common.util import is_distributed
from allennlp.training.metrics.metric import Metric

from nerzoo.metrics.distributed import all_gather_rows


@Metric.register("span_calibration")
class SpanCalibration(Metric):
    """
    How well the confidences of predicted spans match how often they are right: the expected
    calibration error (ECE; Naeini, Cooper & Hauskrecht, 2015, "Obtaining Well Calibrated
    Probabilities Using Bayesian Binning", AAAI) over equal-mass bins, and the Brier score of span
    correctness (Brier, 1950).

    Registered as a `Metric` with name "span_calibration".

    A predicted span is right when a gold span has its start, end and label.  The spans are sorted by
    confidence and cut into `num_bins` bins of (nearly) equal counts (a trained tagger puts most
    spans above 0.99); ECE is the span-weighted mean over the bins of |mean confidence - precision|.
    The Brier score is the mean of (confidence - right)^2 over the spans.  Unmatched gold spans
    enter neither figure.

    `get_metric` gathers every worker's `(confidence, right)` pairs (every worker must call it) and
    sorts them by confidence, then rightness, so the figures do not depend on the batches.

    Keys: `span_ece`, `span_brier`, both absent before any span has been counted (by any worker).

    # Parameters

    num_bins : `int`, optional (default = `10`)
    """

    def __init__(self, num_bins: int = 10) -> None:
        self.num_bins = num_bins
        self._confidences: List[float] = []
        self._correct: List[bool] = []

    def __call__(self, confidences: Sequence[float], correct: Sequence[bool]) -> None:  # type: ignore
        """One value per predicted span: its confidence and whether it is right."""
        if len(confidences) != len(correct):
            raise ValueError(f"{len(confidences)} confidences but {len(correct)} correctness flags")
        self._confidences.extend(float(value) for value in confidences)
        self._correct.extend(bool(value) for value in correct)

    def pairs(self) -> Tuple[torch.Tensor, torch.Tensor]:
        """
        The confidences and the 0/1 correctness of every span this worker counted since the last
        reset, `(num_spans,)` each, in the order they were counted.
        """
        return torch.tensor(self._confidences, dtype=torch.float64), torch.tensor(self._correct, dtype=torch.float64)

    def get_metric(self, reset: bool = False) -> Dict[str, float]:
        if not self._confidences and not is_distributed():
            return {}  # nothing counted (as in training): nothing to build
        # (num_spans, 2) over every worker.
        pairs = all_gather_rows(torch.stack(self.pairs(), dim=1))
        metrics: Dict[str, float] = {}
        if len(pairs):
            confidences, correct = sorted_pairs(pairs[:, 0], pairs[:, 1])
            metrics["span_ece"] = expected_calibration_error(confidences, correct, self.num_bins)
            metrics["span_brier"] = float(((confidences - correct) ** 2).mean())
        if reset:
            self.reset()
        return metrics

    def reset(self) -> None:
        self._confidences, self._correct = [], []


def sorted_pairs(confidences: torch.Tensor, correct: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """`confidences` and `correct` reordered by confidence, then correctness: one order for a multiset of pairs."""
    by_correct = torch.argsort(correct, stable=True)
    order = by_correct[torch.argsort(confidences[by_correct], stable=True)]
    return confidences[order], correct[order]


def reliability(
    confidences: torch.Tensor, correct: torch.Tensor, bins: List[torch.LongTensor]
) -> List[Tuple[int, float, float]]:
    """`(count, mean confidence, precision)` of each bin."""
    return [(len(index), float(confidences[index].mean()), float(correct[index].mean())) for index in bins]


def fixed_bins(confidences: torch.Tensor, edges: Sequence[float]) -> List[torch.LongTensor]:
    """Indices of `confidences` per bin `[edges[i], edges[i + 1])` (the last bin closed), empty bins left out."""
    inner = torch.tensor(list(edges[1:-1]), dtype=confidences.dtype)
    which = torch.bucketize(confidences, inner, right=True)
    bins = [torch.nonzero(which == index).flatten() for index in range(len(edges) - 1)]
    return [index for index in bins if len(index)]


def calibration_error(confidences: torch.Tensor, correct: torch.Tensor, bins: List[torch.LongTensor]) -> float:
    """Span-weighted mean |mean confidence - precision| over `bins`."""
    rows = reliability(confidences, correct, bins)
    total = sum(count for count, _, _ in rows)
    return sum(count * abs(confidence - precision) for count, confidence, precision in rows) / max(total, 1)


def expected_calibration_error(confidences: torch.Tensor, correct: torch.Tensor, num_bins: int = 10) -> float:
    """ECE over the spans sorted by confidence and cut into `min(num_bins, n)` bins of nearly equal size."""
    order = torch.argsort(confidences, stable=True)
    bins = [chunk for chunk in torch.tensor_split(order, min(num_bins, len(order))) if len(chunk)]
    return calibration_error(confidences, correct, bins)


def precision_at_coverage(confidences: torch.Tensor, correct: torch.Tensor, coverage: float) -> float:
    """Precision of the `coverage` share of the spans (rounded up) with the highest confidences."""
    keep = max(1, int(torch.ceil(torch.tensor(coverage * len(confidences))).item()))
    order = torch.argsort(confidences, descending=True, stable=True)
    return float(correct[order[:keep]].mean())
