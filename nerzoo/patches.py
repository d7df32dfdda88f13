"""
Every change nerzoo makes to another library, applied by `apply()`, which `nerzoo/__init__.py` calls
once; a second call changes nothing.  allennlp has no plugin point for either (a registered
`TrainerCallback` acts only where a config names it, and `TrainModel` has no hook after training),
so they patch allennlp itself, for every `allennlp train` run in a process that imported nerzoo.

Both make `evaluate_on_test` after distributed training give what `allennlp evaluate` gives on the
archive.  allennlp's `train` command runs the test evaluation on the primary worker alone, after the
other workers have returned, while the process group is still up: the reader would give the primary
its shard of the test set only, and the first collective of a metric (allennlp's
`CategoricalAccuracy` and `Average` all-reduce in every `__call__`, nerzoo's metrics in
`get_metric`) would wait for workers that are gone.

1. `allennlp.training.gradient_descent_trainer.DEFAULT_CALLBACKS` gains
   `nerzoo.training.distributed.LeaveProcessGroupAfterTraining`, after allennlp's own: every
   `GradientDescentTrainer` (unless its `enable_default_callbacks` is false) ends the process group
   on every worker when training ends, so the test evaluation runs as one process.  Outside
   distributed training it does nothing.
2. `allennlp.commands.train.TrainModel.finish` (the test evaluation) reads the whole test set again
   first when the test loader was built in a distributed worker: a reader notes its worker's rank
   when it is built, and the loader read its shard at once.  Otherwise it is allennlp's own.

To see them applied:

    python -c "import nerzoo.patches as p; print(p.applied())"   # {'default_callbacks': True, ...}

and the log of a distributed `allennlp train` with `evaluate_on_test` says "Training ended: leaving
the distributed process group", then "Reading the whole test set for the test evaluation after
distributed training".

Importing nerzoo also sets the ext vars of the shipped configs where unset; that is the
environment, not another library: `nerzoo.transformer_models.set_default_ext_vars` lists them.
"""

import logging
from collections import deque
from typing import Any, Callable, Dict

from allennlp.commands.train import TrainModel
from allennlp.common.util import is_distributed
from allennlp.training import gradient_descent_trainer

from nerzoo.training.distributed import LeaveProcessGroupAfterTraining

logger = logging.getLogger(__name__)

# allennlp's own `TrainModel.finish`, kept by the class until `apply()` replaces it.
_allennlp_finish: Callable[[TrainModel, Dict[str, Any]], None] = TrainModel.finish


def finish_on_the_whole_test_set(self: TrainModel, metrics: Dict[str, Any]) -> None:
    """`TrainModel.finish`, reading the whole test set first where a distributed worker read a shard."""
    loader = self.evaluation_data_loader
    reader = getattr(loader, "reader", None)
    sharded = getattr(reader, "_distributed_info", None) is not None and hasattr(loader, "_instances")
    if self.evaluate_on_test and sharded and not is_distributed():
        logger.info("Reading the whole test set for the test evaluation after distributed training")
        reader._set_distributed_info(None)
        loader._instances = None  # type: ignore[union-attr]
        deque(loader.iter_instances(), maxlen=0)  # type: ignore[union-attr]
    _allennlp_finish(self, metrics)


def applied() -> Dict[str, bool]:
    """Whether each patch is in place."""
    return {
        "default_callbacks": LeaveProcessGroupAfterTraining in gradient_descent_trainer.DEFAULT_CALLBACKS,
        "train_model_finish": TrainModel.finish is finish_on_the_whole_test_set,
    }


def apply() -> None:
    """Applies every patch not yet in place."""
    if LeaveProcessGroupAfterTraining not in gradient_descent_trainer.DEFAULT_CALLBACKS:
        gradient_descent_trainer.DEFAULT_CALLBACKS = (  # type: ignore[assignment]
            *gradient_descent_trainer.DEFAULT_CALLBACKS,
            LeaveProcessGroupAfterTraining,
        )
    if TrainModel.finish is not finish_on_the_whole_test_set:
        TrainModel.finish = finish_on_the_whole_test_set  # type: ignore[method-assign]
