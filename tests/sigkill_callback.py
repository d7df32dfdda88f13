"""
Test plugin: a trainer callback that SIGKILLs its own training process once, mid-epoch.

Used by tests/test_end_to_end.py with `--include-package tests.sigkill_callback`.  The marker file
makes it fire only once, so `allennlp train --recover` (which reuses the saved config) completes.
"""

import os
import pathlib
import signal

from allennlp.training.callbacks import TrainerCallback


@TrainerCallback.register("test_sigkill_once")
class SigkillOnce(TrainerCallback):
    def __init__(self, serialization_dir: str, epoch: int, batch: int, marker: str) -> None:
        super().__init__(serialization_dir)
        self.epoch, self.batch, self.marker = epoch, batch, pathlib.Path(marker)

    def on_batch(self, trainer, batch_inputs, batch_outputs, batch_metrics, epoch, batch_number, is_training, **kwargs):
        if is_training and epoch == self.epoch and batch_number == self.batch and not self.marker.exists():
            self.marker.write_text(f"killed at epoch {epoch} batch {batch_number}\n")
            os.kill(os.getpid(), signal.SIGKILL)
