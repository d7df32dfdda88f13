"""
Small runs for the tests of `use_fused_steps` and the `fused_optimizer` callback, on the CPU and on
the GPU suite's device: a few optimizer steps of a small network, and a tiny bilstm_crf trained with
allennlp's trainer.
"""

import copy
import functools
from typing import Any, List, Set, Tuple

import torch
from allennlp.common import Params
from allennlp.data import Vocabulary
from allennlp.data.data_loaders import SimpleDataLoader
from allennlp.models import Model
from allennlp.training import Trainer
from allennlp.training.callbacks import TrainerCallback
from allennlp.training.optimizers import Optimizer

import nerzoo.models.bilstm_crf  # noqa: F401  registers "bilstm_crf"
from nerzoo.data.dataset_readers.conll_columns import ConllColumnsReader
from nerzoo.training.callbacks.fused_optimizer import use_fused_steps
from tests import FIXTURES_ROOT

OPTIMIZERS = {
    "adam": {"type": "adam", "lr": 0.05},
    "adamw": {"type": "adamw", "lr": 0.05, "weight_decay": 0.1},
    "sgd": {"type": "sgd", "lr": 0.05},
    "sgd_momentum": {"type": "sgd", "lr": 0.05, "momentum": 0.9},
    "sgd_nesterov": {"type": "sgd", "lr": 0.05, "momentum": 0.9, "nesterov": True, "weight_decay": 0.01},
}
STEPS = 7
LATE = 4  # the step at which the last parameter gets its first gradient


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first = torch.nn.Linear(5, 4)
        self.second = torch.nn.Linear(4, 3)
        self.late = torch.nn.Parameter(torch.randn(3))  # no gradient before step LATE

    def loss(self, step: int) -> torch.Tensor:
        inputs = torch.randn(8, 5, generator=torch.Generator().manual_seed(step)).to(self.late.device)
        loss = self.second(torch.tanh(self.first(inputs))).sum(-1).pow(2).mean()
        return loss + (self.late * self.late).sum() if step >= LATE else loss


def model_and_optimizer(config, device, **groups):
    torch.manual_seed(0)
    model = Net().to(device)
    params = Params(copy.deepcopy(config))
    if groups:
        params["parameter_groups"] = [[["^first"], groups]]
    return model, Optimizer.from_params(model_parameters=list(model.named_parameters()), params=params)


def optimizer_step(model, optimizer, step):
    optimizer.zero_grad()
    model.loss(step).backward()
    optimizer.step()


def check_switched_steps_equal_the_unswitched(name: str, switch_at: int, device: torch.device) -> None:
    """`STEPS` steps of the `name` optimizer on `device`, one switched at `switch_at`, one as PyTorch defaults it."""
    config = OPTIMIZERS[name]
    reference, reference_optimizer = model_and_optimizer(config, device)
    model, optimizer = model_and_optimizer(config, device)
    for step in range(STEPS):
        if step == switch_at:
            if step and "adam" in name:
                # Counters as other processes leave them: a float64 tensor (float64 the default
                # dtype) and a number (older PyTorch), both on the host.
                steps = [optimizer.state[parameter] for parameter in (model.first.weight, model.first.bias)]
                steps[0]["step"] = steps[0]["step"].to(torch.float64)
                steps[1]["step"] = float(steps[1]["step"])
            lines = use_fused_steps(optimizer)
            assert len(lines) == 1 and "fused" in lines[0] and "left" not in lines[0], lines
            assert optimizer.param_groups[0]["fused"] is True and optimizer.param_groups[0]["foreach"] is False
            assert reference_optimizer.param_groups[0]["fused"] is None
        optimizer_step(reference, reference_optimizer, step)
        optimizer_step(model, optimizer, step)
        for (parameter_name, parameter), expected in zip(model.named_parameters(), reference.parameters()):
            torch.testing.assert_close(parameter, expected, msg=f"{name}, step {step}: {parameter_name}")
    if "adam" in name:
        for parameter in model.parameters():
            counter = optimizer.state[parameter]["step"]
            assert counter.device == parameter.device and counter.dtype == torch.float32
            assert float(counter) == STEPS - (LATE if parameter is model.late else 0)
    if "momentum" in config:
        assert all(optimizer.state[parameter]["momentum_buffer"] is not None for parameter in model.parameters())


@TrainerCallback.register("test_record_optimizer_steps")
class RecordSteps(TrainerCallback):
    """
    Test-only: after each training step, each group's `(fused, foreach)`, the device types and
    dtypes of Adam's step counters, the most steps a counter has counted, and the batch's loss.
    """

    runs: List["RecordSteps"] = []

    def __init__(self, serialization_dir: str) -> None:
        super().__init__(serialization_dir)
        self.groups: List[List[Tuple[Any, Any]]] = []
        self.counters: Set[Tuple[str, torch.dtype]] = set()
        self.steps = 0
        self.losses: List[float] = []
        RecordSteps.runs.append(self)

    def on_batch(self, trainer, batch_inputs, batch_outputs, batch_metrics, epoch, batch_number, is_training, **kwargs):
        if is_training:
            optimizer = trainer.optimizer
            self.groups.append([(group["fused"], group["foreach"]) for group in optimizer.param_groups])
            for state in optimizer.state.values():
                if "step" in state:
                    self.counters.add((state["step"].device.type, state["step"].dtype))
                    self.steps = max(self.steps, int(state["step"]))
            self.losses.append(batch_metrics["batch_loss"])


@functools.lru_cache(maxsize=None)
def _data():
    instances = list(ConllColumnsReader(tag_column=3).read(FIXTURES_ROOT / "conll2003" / "dev.txt"))
    return instances, Vocabulary.from_instances(instances)


def tiny_trainer(serialization_dir, callbacks, optimizer="adam", num_epochs=1, cuda_device=-1, use_amp=False):
    """A small bilstm_crf on the fixtures' 16 dev sentences, 4 batches an epoch, with allennlp's trainer."""
    instances, vocab = _data()
    torch.manual_seed(0)
    model_params = {
        "type": "bilstm_crf",
        "text_field_embedder": {"token_embedders": {"tokens": {"type": "embedding", "embedding_dim": 6}}},
        "encoder": {"type": "lstm", "input_size": 6, "hidden_size": 4, "bidirectional": True},
    }
    model = Model.from_params(vocab=vocab, params=Params(model_params))
    params = {
        "num_epochs": num_epochs,
        "optimizer": copy.deepcopy(OPTIMIZERS[optimizer]),
        "grad_norm": 5.0,
        "cuda_device": cuda_device,
        "use_amp": use_amp,
        "callbacks": [{"type": name} for name in callbacks],
    }
    loader = SimpleDataLoader(instances, batch_size=4, vocab=vocab)
    return Trainer.from_params(
        params=Params(params), model=model, serialization_dir=str(serialization_dir), data_loader=loader
    )
