"""The `freeze_loaded_data` callback: what is alive at the start of training is out of the garbage collector's passes until its end."""

import gc
import json

from allennlp.commands.train import train_model_from_file
from allennlp.training.callbacks import TrainerCallback

from nerzoo.training.callbacks.freeze_loaded_data import FreezeLoadedData
from tests import FIXTURES_ROOT


def _collected(obj) -> bool:
    """Whether the collector's generations (not its permanent one) hold `obj`."""
    return any(other is obj for other in gc.get_objects())


def test_what_lives_at_the_start_is_frozen_until_the_end():
    loaded = [[word] for word in ("EU", "rejects", "German", "call")]  # as a data set's lists
    callback = FreezeLoadedData("unused")
    assert _collected(loaded)
    callback.on_start(trainer=None)
    try:
        assert gc.get_freeze_count() > 0 and not _collected(loaded)
        during = [["made", "in", "training"]]
        assert _collected(during)  # what training allocates is still collected
    finally:
        callback.on_end(trainer=None)
    assert gc.get_freeze_count() == 0 and _collected(loaded)


@TrainerCallback.register("test_freeze_count")
class _FreezeCount(TrainerCallback):
    seen = []

    def on_batch(self, trainer, *args, **kwargs) -> None:
        _FreezeCount.seen.append(gc.get_freeze_count())


def test_a_config_trains_with_it(tmp_path):
    overrides = {
        "trainer.num_epochs": 1,
        "trainer.callbacks": [{"type": "freeze_loaded_data"}, {"type": "test_freeze_count"}],
    }
    train_model_from_file(
        str(FIXTURES_ROOT / "experiments" / "bilstm_crf_tiny.jsonnet"), str(tmp_path / "run"), json.dumps(overrides)
    )
    assert _FreezeCount.seen and min(_FreezeCount.seen) > 10_000
    assert gc.get_freeze_count() == 0
