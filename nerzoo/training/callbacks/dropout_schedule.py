import logging
import re
from typing import Any, Dict, List, Optional

import torch
from allennlp.common.checks import ConfigurationError
from allennlp.training.callbacks import TrainerCallback

logger = logging.getLogger(__name__)


@TrainerCallback.register("dropout_schedule")
class DropoutSchedule(TrainerCallback):
    """
    Sets the rate `p` of the model's `torch.nn.Dropout` modules (those whose name matches `modules`)
    before every epoch, moving linearly from `start` in the first epoch to `end` in the last one:
    `p = start + (end - start) * epoch / (num_epochs - 1)`: FOFE-NER's dropout, "initially set to
    0.4, slowly decreased during training until it reaches 0.1 at the end" (Xu, 2017, "Fixed-size
    Ordinally-Forgetting Encoding and Its Applications", MSc thesis, York University, §5.5.1).

    Registered as a `TrainerCallback` with name "dropout_schedule".

    The completed epochs are part of the callback's `state_dict`, so a resumed run continues the
    schedule.  Other dropout kinds (e.g. allennlp's `InputVariationalDropout`, a `torch.nn.Dropout`
    subclass) match too.

    # Parameters

    serialization_dir : `str`, required
        Passed in by the trainer; nothing is written there.
    start : `float`, optional (default = `0.4`)
    end : `float`, optional (default = `0.1`)
    num_epochs : `int`, optional (default = the trainer's `num_epochs`)
    modules : `str`, optional (default = `".*"`)
        A regular expression over module names (`named_modules`), matched with `re.search`.
    """

    def __init__(
        self,
        serialization_dir: str,
        start: float = 0.4,
        end: float = 0.1,
        num_epochs: Optional[int] = None,
        modules: str = ".*",
    ) -> None:
        super().__init__(serialization_dir)
        if not (0.0 <= start < 1.0 and 0.0 <= end < 1.0):
            raise ConfigurationError(f"dropout rates must lie in [0, 1), got start={start}, end={end}")
        if num_epochs is not None and num_epochs < 1:
            raise ConfigurationError(f"num_epochs must be >= 1, got {num_epochs}")
        self.start = start
        self.end = end
        self.num_epochs = num_epochs
        self.pattern = re.compile(modules)
        self.epochs_completed = 0
        self._dropouts: List[torch.nn.Dropout] = []

    def rate(self, epoch: int) -> float:
        """The dropout rate of (0-based) `epoch`."""
        num_epochs = self.num_epochs or 1
        progress = min(epoch, num_epochs - 1) / max(num_epochs - 1, 1)
        return self.start + (self.end - self.start) * progress

    def on_start(self, trainer, is_primary: bool = True, **kwargs) -> None:
        super().on_start(trainer, is_primary=is_primary, **kwargs)
        if self.num_epochs is None:
            self.num_epochs = trainer._num_epochs
        self._dropouts = [
            module
            for name, module in trainer.model.named_modules()
            if isinstance(module, torch.nn.Dropout) and self.pattern.search(name)
        ]
        if not self._dropouts:
            raise ConfigurationError(f"dropout_schedule: no torch.nn.Dropout module matches {self.pattern.pattern!r}")
        self._apply()

    def on_epoch(self, trainer, metrics: Dict[str, Any], epoch: int, is_primary: bool = True, **kwargs) -> None:
        self.epochs_completed = epoch + 1
        self._apply()

    def _apply(self) -> None:
        rate = self.rate(self.epochs_completed)
        for module in self._dropouts:
            module.p = rate
        logger.info(
            "dropout_schedule: epoch %d dropout %.3f on %d modules", self.epochs_completed, rate, len(self._dropouts)
        )

    def state_dict(self) -> Dict[str, Any]:
        return {"epochs_completed": self.epochs_completed}

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        self.epochs_completed = state_dict.get("epochs_completed", 0)
