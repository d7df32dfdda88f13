import logging

import torch
from allennlp.common.checks import ConfigurationError
from allennlp.training.callbacks import TrainerCallback

from nerzoo.contracts import GraphedModel
from nerzoo.training.step_graphs import StepGraphs, use_step_graphs

logger = logging.getLogger(__name__)


@TrainerCallback.register("cuda_graphs")
class CudaGraphs(TrainerCallback):
    """
    Runs the model's training loss, forward and backward, as CUDA graphs (`StepGraphs`) while the
    trainer trains on a GPU: a step launches a few replays and the optimizer's kernels instead of a
    kernel per operator and several per LSTM time step.  The model must be a `GraphedModel`
    (`bilstm_crf`); any other model is refused before training starts.  Batches are padded to
    multiples of `length_multiple` tokens, so each bucket of lengths is captured once.  Validation,
    evaluation and prediction run as before.  On the CPU, and in distributed training, it logs that
    and does nothing.

    Registered as a `TrainerCallback` with name "cuda_graphs":
    `-o '{"trainer.callbacks": [{"type": "cuda_graphs"}]}'`.

    # Parameters

    serialization_dir : `str`, required
        Passed in by the trainer; nothing is written there.
    length_multiple : `int`, optional (default = `8`)
    character_multiple : `int`, optional (default = `8`)
    max_graphs : `int`, optional (default = `64`)
        `StepGraphs`' parameters.
    """

    def __init__(
        self, serialization_dir: str, length_multiple: int = 8, character_multiple: int = 8, max_graphs: int = 64
    ) -> None:
        super().__init__(serialization_dir)
        self.graphs = StepGraphs(length_multiple, character_multiple, max_graphs)

    def on_start(self, trainer, is_primary: bool = True, **kwargs) -> None:
        model = trainer.model
        if not isinstance(model, GraphedModel):
            raise ConfigurationError(
                f"cuda_graphs: {type(model).__name__} has no graph_loss to capture; train it without `cuda_graphs`"
            )
        if getattr(trainer, "_num_gradient_accumulation_steps", 1) > 1:
            raise ConfigurationError("cuda_graphs: gradient accumulation needs each batch's gradients kept apart")
        if not next(model.parameters()).is_cuda:
            logger.info("cuda_graphs: the model is not on a CUDA device; it trains eagerly")
            return
        if getattr(trainer, "_distributed", False):
            logger.warning("cuda_graphs: not checked under distributed training; it trains eagerly")
            return
        use_step_graphs(model, self.graphs)

    def on_end(self, trainer, metrics=None, epoch=None, is_primary: bool = True, **kwargs) -> None:
        use_step_graphs(trainer.model, None)
        logger.info(
            "cuda_graphs: %d graphs, %d replays, %d plain steps (new shapes past max_graphs)",
            self.graphs.num_graphs,
            self.graphs.replays,
            self.graphs.plain_steps,
        )
        self.graphs.clear()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
