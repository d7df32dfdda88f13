import torch
from allennlp.common.checks import ConfigurationError
from allennlp.training.learning_rate_schedulers import ExponentialLearningRateScheduler, LearningRateScheduler


@LearningRateScheduler.register("geometric_decay")
class GeometricDecay(ExponentialLearningRateScheduler):
    """
    allennlp's `exponential` scheduler with its `gamma` derived from the trainer's `num_epochs`:
    epoch `e` (0-based) runs at `lr * final_factor ** (e / (num_epochs - 1))`, so an override of
    `num_epochs` keeps the schedule in step.  FOFE-NER's rate is "initially set to 0.128 and is
    multiplied by a decay factor each epoch so that it reaches 1/16 of the initial value at the end
    of the training" (Xu, 2017, "Fixed-size Ordinally-Forgetting Encoding and Its Applications", MSc
    thesis, York University, §5.5.1).

    Registered as a `LearningRateScheduler` with name "geometric_decay".

    # Parameters

    optimizer : `torch.optim.Optimizer`, required
    num_epochs : `int`, required
        Passed in by the trainer (its `num_epochs`).
    final_factor : `float`, optional (default = `1 / 16`)
        The last epoch's rate over the first's.
    """

    def __init__(self, optimizer: torch.optim.Optimizer, num_epochs: int, final_factor: float = 1 / 16) -> None:
        if not 0.0 < final_factor <= 1.0:
            raise ConfigurationError(f"final_factor must lie in (0, 1], got {final_factor}")
        if num_epochs < 1:
            raise ConfigurationError(f"num_epochs must be >= 1, got {num_epochs}")
        gamma = final_factor ** (1.0 / (num_epochs - 1)) if num_epochs > 1 else 1.0
        super().__init__(optimizer, gamma=gamma)
