"""
Ends training when the next epoch would overrun a wall-clock budget, so that models compared at an
equal budget each get the same CPU time.
"""

import json
import logging
import os
import time
from typing import Any, Dict, Optional

from allennlp.common.checks import ConfigurationError
from allennlp.training.callbacks import TrainerCallback
from allennlp.training.gradient_descent_trainer import GradientDescentTrainer
from allennlp.training.metric_tracker import MetricTracker

from nerzoo.training.distributed import maximum_over_workers

logger = logging.getLogger(__name__)

REPORT_FILE = "time_budget.json"


@TrainerCallback.register("time_budget")
class TimeBudget(TrainerCallback):
    """
    Stops training after an epoch when one more epoch (the mean epoch so far, validation included)
    would end more than `max_minutes` after training started.  The best weights are then restored and
    archived as after early stopping, and `time_budget.json` in the serialization directory records
    the stop (epoch, elapsed and mean epoch seconds, budget).

    Registered as a `TrainerCallback` with name "time_budget".

    AllenNLP 2.10's `GradientDescentTrainer` has no public way for a callback to end training: its
    epoch loop ends at `num_epochs` or when its `MetricTracker` says `should_stop_early()`.  This
    callback asks for the stop through that tracker, in `_stop_after_this_epoch`, the one place that
    touches the trainer's internals; it checks their types and fails with a clear error if a
    different trainer or AllenNLP version lays them out otherwise.

    Under distributed training every worker decides on the slowest worker's clock (the largest
    elapsed time, all-reduced after each epoch), so all of them stop after the same epoch; a worker
    that stopped alone would leave the others waiting in their next collective.

    # Parameters

    serialization_dir : `str`, required
        Passed in by the trainer; `time_budget.json` is written there when the budget stops training.
    max_minutes : `float`, required
        The wall-clock budget of the epochs (data reading and vocabulary building come before it).
    """

    def __init__(self, serialization_dir: str, max_minutes: float) -> None:
        super().__init__(serialization_dir)
        if max_minutes <= 0:
            raise ConfigurationError(f"time_budget: max_minutes must be > 0, got {max_minutes}")
        self.max_seconds = max_minutes * 60.0
        self.start_time: Optional[float] = None
        self.epochs_seen = 0

    def on_start(self, trainer: GradientDescentTrainer, is_primary: bool = True, **kwargs) -> None:
        _metric_tracker(trainer)  # a trainer this callback cannot stop fails before the first epoch
        self.start_time = time.time()
        self.epochs_seen = 0

    def on_epoch(
        self,
        trainer: GradientDescentTrainer,
        metrics: Dict[str, Any],
        epoch: int,
        is_primary: bool = True,
        **kwargs,
    ) -> None:
        if self.start_time is None or epoch < 0:
            return
        self.epochs_seen += 1
        elapsed = maximum_over_workers(time.time() - self.start_time)
        mean_epoch = elapsed / self.epochs_seen
        if elapsed + mean_epoch <= self.max_seconds:
            return
        _stop_after_this_epoch(trainer)
        report = {
            "stopped_after_epoch": epoch,
            "elapsed_seconds": round(elapsed, 1),
            "mean_epoch_seconds": round(mean_epoch, 1),
            "max_minutes": self.max_seconds / 60.0,
        }
        logger.info("Time budget: stopping after epoch %d (%s)", epoch, report)
        if is_primary and self.serialization_dir:
            with open(os.path.join(self.serialization_dir, REPORT_FILE), "w") as handle:
                json.dump(report, handle, indent=2)


def _metric_tracker(trainer: Any) -> MetricTracker:
    tracker = getattr(trainer, "_metric_tracker", None)
    if not isinstance(trainer, GradientDescentTrainer) or not isinstance(tracker, MetricTracker):
        raise ConfigurationError(
            f"time_budget works with allennlp 2.10's gradient_descent trainer only, not {type(trainer).__name__}"
        )
    return tracker


def _stop_after_this_epoch(trainer: GradientDescentTrainer) -> None:
    # The epoch loop asks the tracker after saving the epoch's weights; from then on it answers "stop".
    tracker = _metric_tracker(trainer)
    tracker.should_stop_early = lambda: True  # type: ignore[method-assign]
