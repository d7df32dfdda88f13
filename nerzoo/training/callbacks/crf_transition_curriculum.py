import logging
from typing import Any, Dict, List

import torch
from allennlp.common.checks import ConfigurationError
from allennlp.modules import ConditionalRandomField
from allennlp.training.callbacks import TrainerCallback
from torch.utils.hooks import RemovableHandle

logger = logging.getLogger(__name__)


def transition_parameters(crf: ConditionalRandomField) -> List[torch.nn.Parameter]:
    """`A` of eq. 7 in an allennlp CRF: `transitions` and, when it has them, the start and end transitions."""
    parameters = [crf.transitions]
    if crf.include_start_end_transitions:
        parameters += [crf.start_transitions, crf.end_transitions]
    return parameters


@TrainerCallback.register("crf_transition_curriculum")
class CrfTransitionCurriculum(TrainerCallback):
    """
    Trains a CRF tagger as ME-CRF+ (Liu, Baldwin & Cohn, 2017, §4.2,
    https://aclanthology.org/I17-1056): the transition scores of every allennlp
    `ConditionalRandomField` in the model are set to 0 and frozen when training starts, and trained
    like any other parameter once `frozen_epochs` epochs have completed.

    Registered as a `TrainerCallback` with name "crf_transition_curriculum".

    `A` of eq. 7 scores the moves `y_t -> y_{t+1}` for `t = 0 .. T`, from a start state and into an
    end state too, so "A = 0" covers allennlp's `start_transitions` and `end_transitions` as well as
    `transitions`.  With all three at 0 the CRF's log-likelihood is the sum of per-token log-softmax
    scores: the frozen epochs train independent maxent classifiers.  The tag scheme's constraints
    (allennlp's `_constraint_mask`) still apply in decoding and posteriors.

    `on_start` zeroes them; they stay in the optimizer (DDP reduces them as any other), a gradient
    hook zeroes their gradients and an optimizer pre-step hook drops them, so nothing moves them.
    They are released once `frozen_epochs` epochs have completed, or when training ends (then
    staying 0).  The completed epochs are the `state_dict`, so a resumed run continues.

    # Parameters

    serialization_dir : `str`, required
        Passed in by the trainer; nothing is written there.
    frozen_epochs : `int`, optional (default = `20`)
        Epochs trained with the transitions frozen at 0 (the paper's `e`).
    """

    def __init__(self, serialization_dir: str, frozen_epochs: int = 20) -> None:
        super().__init__(serialization_dir)
        if frozen_epochs < 0:
            raise ConfigurationError(f"frozen_epochs must be >= 0, not {frozen_epochs}")
        self.frozen_epochs = frozen_epochs
        self.epochs_completed = 0
        self._frozen: List[torch.nn.Parameter] = []
        self._hooks: List[RemovableHandle] = []

    @property
    def frozen(self) -> bool:
        """Whether the transitions are held at 0 now."""
        return bool(self._frozen)

    def on_start(self, trainer, is_primary: bool = True, **kwargs) -> None:
        super().on_start(trainer, is_primary=is_primary, **kwargs)
        crfs = [module for module in trainer.model.modules() if isinstance(module, ConditionalRandomField)]
        if not crfs:
            raise ConfigurationError(
                "crf_transition_curriculum needs a model with a ConditionalRandomField, and "
                f"{type(trainer.model).__name__} has none (a tag head with use_crf=False?)"
            )
        parameters = [parameter for crf in crfs for parameter in transition_parameters(crf)]
        optimized = {id(parameter) for group in trainer.optimizer.param_groups for parameter in group["params"]}
        if any(id(parameter) not in optimized for parameter in parameters):
            raise ConfigurationError(
                "crf_transition_curriculum: the CRF transitions are not in the optimizer (frozen by "
                "the trainer's no_grad or a parameter group with requires_grad false?), so they "
                "would never be trained after the frozen epochs"
            )
        if self.epochs_completed >= self.frozen_epochs:
            logger.info(
                "CRF transition curriculum: %d of %d frozen epochs already completed, transitions are trained",
                self.epochs_completed,
                self.frozen_epochs,
            )
            return
        if getattr(trainer, "_moving_average", None) is not None:
            logger.warning(
                "CRF transition curriculum: the moving average was set up before the transitions were "
                "zeroed, so its averaged transitions are not 0 during the frozen epochs"
            )
        with torch.no_grad():
            for parameter in parameters:
                parameter.zero_()
        self._frozen = parameters
        self._hooks = [parameter.register_hook(torch.zeros_like) for parameter in parameters]
        self._hooks.append(trainer.optimizer.register_step_pre_hook(self._drop_gradients))
        logger.info(
            "CRF transition curriculum: transitions of %d CRF(s) set to 0 and frozen until %d epochs have completed",
            len(crfs),
            self.frozen_epochs,
        )

    def on_batch(
        self,
        trainer,
        batch_inputs,
        batch_outputs,
        batch_metrics,
        epoch: int,
        batch_number: int,
        is_training: bool,
        is_primary: bool = True,
        batch_grad_norm=None,
        **kwargs,
    ) -> None:
        if self._frozen and is_training and epoch >= self.frozen_epochs:
            self.epochs_completed = max(self.epochs_completed, epoch)
            self._release(f"training is at epoch {epoch}")

    def on_epoch(self, trainer, metrics: Dict[str, Any], epoch: int, is_primary: bool = True, **kwargs) -> None:
        self.epochs_completed = epoch + 1
        if self._frozen and self.epochs_completed >= self.frozen_epochs:
            self._release(f"epoch {epoch} completed")

    def on_end(self, trainer, metrics=None, epoch=None, is_primary: bool = True, **kwargs) -> None:
        if self._frozen:  # no hooks are left behind
            self._release("training ended within the frozen epochs; the transitions stay 0")

    def _drop_gradients(self, optimizer, args, kwargs) -> None:
        for parameter in self._frozen:
            parameter.grad = None

    def _release(self, reason: str) -> None:
        for hook in self._hooks:
            hook.remove()
        self._hooks = []
        self._frozen = []
        logger.info("CRF transition curriculum: transitions released (%s)", reason)

    def state_dict(self) -> Dict[str, Any]:
        return {"epochs_completed": self.epochs_completed}

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        # A checkpoint written with another callback list may hand us another callback's state.
        self.epochs_completed = state_dict.get("epochs_completed", 0)
