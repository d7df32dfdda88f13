"""
PyTorch's fused optimizer steps for a model that trains on a GPU.
"""

import logging
from typing import Collection, List, Optional

import torch
from allennlp.training.callbacks import TrainerCallback
from allennlp.training.optimizers import MultiOptimizer

logger = logging.getLogger(__name__)

# The optimizers whose step takes `fused` as a parameter group option, on CUDA and on the CPU
# (`AdamW` and allennlp's `adam`, `adamw` and `sgd` are subclasses).
FUSABLE = (torch.optim.Adam, torch.optim.SGD)
# The tensor types that fused steps take (subclasses such as distributed tensors are left alone).
_PLAIN_TENSORS = (torch.Tensor, torch.nn.Parameter)


def use_fused_steps(
    optimizer: torch.optim.Optimizer,
    device_types: Collection[str] = ("cuda", "cpu"),
    sparse_gradients: Collection[torch.Tensor] = (),
) -> List[str]:
    """
    Switches the parameter groups of `optimizer` (each optimizer of a `MultiOptimizer`) to PyTorch's
    fused step, where PyTorch has one (`torch.optim.Adam`, `AdamW`, `SGD` and their subclasses):
    `group["fused"] = True`, `group["foreach"] = False`.  A fused step updates every parameter of a
    group in one kernel and keeps Adam's step counters on the parameters' device; the default on
    CUDA (`foreach`) launches a kernel per operation and reads each parameter's counter on the host.
    The arithmetic is the same up to rounding.

    A group is left as it is when it sets `foreach` or `fused` itself (a group that already asks for
    `fused` gets its state moved, as below), is `differentiable`, or holds a parameter that is not a
    floating point tensor on one of `device_types` or is in `sparse_gradients` (fused steps refuse
    sparse gradients); an SGD group with momentum and `dampening` too, since fused SGD cannot start
    the momentum of a parameter whose first gradient comes after the others'.

    Existing state is made fit for the fused step: Adam's `step` counters are moved to their
    parameter's device as float32 tensors (as `load_state_dict` places them for a fused group); SGD
    with momentum gets a zero momentum buffer for every parameter that has none yet, which gives the
    first update of that parameter exactly as the unfused step's copy of the gradient does (no
    dampening).

    Returns a line for each group (or each optimizer left as it is), saying what was done or why not.

    # Parameters

    optimizer : `torch.optim.Optimizer`
    device_types : `Collection[str]`, optional (default = `("cuda", "cpu")`)
        The device types whose parameters are switched.
    sparse_gradients : `Collection[torch.Tensor]`, optional (default = `()`)
        Parameters whose gradients are sparse (those of an embedding with `sparse=True`).
    """
    if isinstance(optimizer, MultiOptimizer):
        return [
            f"{name}: {line}"
            for name, inner in optimizer.optimizers.items()
            for line in use_fused_steps(inner, device_types, sparse_gradients)
        ]
    name = type(optimizer).__name__
    if not isinstance(optimizer, FUSABLE):
        return [f"{name}: left as it is (PyTorch has no fused step for it here)"]
    sparse = {id(parameter) for parameter in sparse_gradients}
    lines = []
    for index, group in enumerate(optimizer.param_groups):
        where = f"{name}, parameter group {index} ({len(group['params'])} parameters)"
        reason = _why_not(optimizer, group, device_types, sparse)
        if reason:
            lines.append(f"{where}: left as it is ({reason})")
            continue
        already = group.get("fused") is True
        group["fused"], group["foreach"] = True, False
        moved = _fit_state(optimizer, group)
        lines.append(f"{where}: {'already fused' if already else 'fused'}{f', {moved}' if moved else ''}")
    return lines


def _why_not(
    optimizer: torch.optim.Optimizer, group: dict, device_types: Collection[str], sparse: Collection[int]
) -> Optional[str]:
    """Why the group cannot be switched, or None."""
    if group.get("differentiable"):
        return "differentiable"
    if group.get("fused") is not True and (group.get("fused") is not None or group.get("foreach") is not None):
        return f"it sets foreach={group.get('foreach')}, fused={group.get('fused')}"
    for parameter in group["params"]:
        if type(parameter) not in _PLAIN_TENSORS:
            return f"a parameter is a {type(parameter).__name__}"
        if not parameter.is_floating_point() or parameter.device.type not in device_types:
            return f"a parameter is {parameter.dtype} on {parameter.device}"
        if id(parameter) in sparse:
            return "a parameter has sparse gradients"
    if isinstance(optimizer, torch.optim.SGD) and group.get("momentum") and group.get("dampening"):
        return "momentum with dampening"
    return None


def _fit_state(optimizer: torch.optim.Optimizer, group: dict) -> str:
    """Makes the group's existing state fit for the fused step; says what it changed."""
    changed = 0
    if isinstance(optimizer, torch.optim.Adam):
        for parameter in group["params"]:
            state = optimizer.state.get(parameter)
            if state and "step" in state:
                step = state["step"]
                fit = torch.as_tensor(step).to(device=parameter.device, dtype=torch.float32)
                if fit is not step:
                    state["step"] = fit
                    changed += 1
        return f"{changed} step counters moved to the device" if changed else ""
    if group.get("momentum") and not group.get("dampening"):
        for parameter in group["params"]:
            state = optimizer.state[parameter]
            if state.get("momentum_buffer") is None:
                state["momentum_buffer"] = torch.zeros_like(parameter, memory_format=torch.preserve_format)
                changed += 1
        return f"{changed} momentum buffers started at zero" if changed else ""
    return ""


@TrainerCallback.register("fused_optimizer")
class FusedOptimizer(TrainerCallback):
    """
    Steps the trainer's optimizer with PyTorch's fused kernels when the model trains on a CUDA
    device (`use_fused_steps`): Adam, AdamW and SGD update every parameter of a group in one kernel,
    with Adam's step counters on the device, where PyTorch's default on CUDA (`foreach`) launches a
    kernel per operation (about 10 for Adam) and reads each parameter's step counter on the host
    twice a step.  Groups that set `foreach` or `fused` themselves, other optimizers, and groups with
    parameters off the GPU or that fused steps do not take are left as they are; each group's
    outcome is logged.

    On the CPU it logs that and does nothing: the CPU steps parameters one at a time, and its fused
    Adam rounds differently.  It runs when training starts, after the trainer has restored a
    checkpoint's optimizer state, which it moves where the fused step wants it.  allennlp's
    `use_amp` keeps its usual order (gradients unscaled, clipped, then stepped).

    Registered as a `TrainerCallback` with name "fused_optimizer": `"trainer": {"callbacks":
    [{"type": "fused_optimizer"}]}`.

    # Parameters

    serialization_dir : `str`, required
        Passed in by the trainer; nothing is written there.
    """

    def on_start(self, trainer, is_primary: bool = True, **kwargs) -> None:
        parameters = [parameter for parameter in trainer.model.parameters() if parameter.requires_grad]
        if not any(parameter.is_cuda for parameter in parameters):
            logger.info("fused_optimizer: the model is not on a CUDA device; the optimizer steps as configured")
            return
        sparse = [
            parameter
            for module in trainer.model.modules()
            if getattr(module, "sparse", False) is True
            for parameter in module.parameters(recurse=False)
        ]
        for line in use_fused_steps(trainer.optimizer, device_types=("cuda",), sparse_gradients=sparse):
            logger.info("fused_optimizer: %s", line)
