"""
A stand-in accelerator for machines without one: tensors that compute on the CPU but are on
another device, so that code meant to run on a GPU can be checked for device placement on the CPU.

`on_the_stand_in()` is a context manager; inside it, `STAND_IN` is a device like a GPU:

- `model.to(STAND_IN)`, `tensor.to(STAND_IN)`, `torch.zeros(..., device=STAND_IN)`,
  `torch.tensor([...], device=STAND_IN)` make tensors on it (`StandInTensor`: a CPU tensor inside,
  PyTorch's `lazy` device type outside, so no CPU code path is taken for it);
- an operator that mixes a tensor on it with a CPU tensor raises the `RuntimeError` CUDA raises
  ("Expected all tensors to be on the same device"), except for the lengths of packed sequences
  (which PyTorch keeps on the CPU) and for copies between devices. It is stricter than CUDA, which
  lets a CPU tensor of 0 dimensions join an operator as a scalar and CPU indices index: on the
  stand-in those raise too, as tensors made on the CPU (a `torch.tensor(...)` without `device=`)
  in code that runs on the device;
- reads back to the host work as on a GPU: `item()`, `bool()`, `tolist()`, `.cpu()`, `.to("cpu")`
  (and `numpy()` raises, as for a CUDA tensor);
- allennlp takes it for GPU 0: `allennlp.nn.util.move_to_device(x, 0)` moves `x` to it,
  `get_device_of` a tensor on it is 0, `get_range_vector(n, 0)` is made on it, and so a model on it
  predicts there (`Model.forward_on_instances`).

Every operator goes through Python, so the stand-in is slow (tens of microseconds an operator): for
fixture batches only.
"""

import contextlib
from typing import Any, Dict, Iterator, Tuple

import allennlp.common.util
import allennlp.nn.util
import torch
from torch.utils._mode_utils import no_dispatch
from torch.utils._python_dispatch import TorchDispatchMode

# What tensors on the stand-in report as their device: a device type that every PyTorch build
# knows and that nerzoo never uses (`meta` would not do: `torch.tensor(data, device="meta")` drops
# the data before any operator sees it).
STAND_IN = torch.device("lazy")

_aten = torch.ops.aten
# Operators that take a CPU tensor beside tensors on a GPU, and its position: the lengths of
# packed sequences (`batch_sizes`), which live on the host.
_HOST_ARGUMENTS = {
    _aten._pack_padded_sequence.default: 1,
    _aten._pad_packed_sequence.default: 1,
    _aten.lstm.data: 1,
    _aten.gru.data: 1,
    _aten.rnn_tanh.data: 1,
    _aten.rnn_relu.data: 1,
}
# Operators that return CPU tensors for tensors on a GPU, and the positions of those results.
_HOST_RESULTS = {_aten._pack_padded_sequence.default: 1, _aten._pad_packed_sequence.default: 1}
# Operators that copy between devices.
_COPIES = {_aten._to_copy.default, _aten.copy_.default}


class StandInTensor(torch.Tensor):
    """A tensor on `STAND_IN`: `host` is its data, a CPU tensor of the same shape, dtype and strides."""

    host: torch.Tensor

    @staticmethod
    def __new__(cls, host: torch.Tensor) -> "StandInTensor":
        return torch.Tensor._make_wrapper_subclass(
            cls,
            host.size(),
            strides=host.stride(),
            storage_offset=host.storage_offset(),
            dtype=host.dtype,
            layout=host.layout,
            device=STAND_IN,
            requires_grad=host.requires_grad,
        )

    def __init__(self, host: torch.Tensor) -> None:
        self.host = host

    # No subclass behaviour above the dispatcher: operators reach `__torch_dispatch__` as they are.
    __torch_function__ = torch._C._disabled_torch_function_impl

    def tolist(self) -> Any:
        """As on a GPU: a copy to the host, read there."""
        return self.cpu().tolist()

    def __repr__(self) -> str:
        return f"StandInTensor({self.host!r})"

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        return _run(func, args, kwargs or {})


def _is_stand_in(device: Any) -> bool:
    return device is not None and torch.device(device).type == STAND_IN.type


def _check_devices(func, args: Tuple[Any, ...], flat: list) -> None:
    """Raises as CUDA does where `func` mixes a tensor on the stand-in with a CPU tensor."""
    if func in _COPIES:
        return
    host = set()  # of the CPU tensor the operator takes
    if func in _HOST_ARGUMENTS:
        host = {id(args[_HOST_ARGUMENTS[func]])}
    for value in flat:
        if isinstance(value, torch.Tensor) and not isinstance(value, StandInTensor) and id(value) not in host:
            raise RuntimeError(
                f"Expected all tensors to be on the same device, but found at least two devices, "
                f"{STAND_IN} (the stand-in accelerator) and {value.device}! (in {func}, a {value.dtype} tensor "
                f"of shape {tuple(value.shape)})"
            )


def _flat(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> list:
    """The values of an operator's arguments, a list of tensors opened (the only nesting an operator's schema has)."""
    flat: list = []
    for value in (*args, *kwargs.values()):
        if isinstance(value, (list, tuple)):
            flat.extend(value)
        else:
            flat.append(value)
    return flat


def _map(function: Any, value: Any) -> Any:
    """`function` on each value of an operator's argument or result (lists and tuples opened, at any depth)."""
    if isinstance(value, (list, tuple)):
        return type(value)(_map(function, item) for item in value)
    return function(value)


def _run(func, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
    """`func` computed on the CPU tensors inside; its tensors are put back on the stand-in where they belong."""
    flat = _flat(args, kwargs)
    on_stand_in = any(isinstance(value, StandInTensor) for value in flat)
    target = kwargs.get("device")
    if not on_stand_in and not _is_stand_in(target):
        return func(*args, **kwargs)  # on the CPU alone
    if on_stand_in:
        _check_devices(func, args, flat)

    def host(value: Any) -> Any:
        return value.host if isinstance(value, StandInTensor) else value

    host_args = _map(host, args)
    host_kwargs = {key: _map(host, value) for key, value in kwargs.items()}
    if _is_stand_in(target):
        host_kwargs["device"] = torch.device("cpu")
    result = func(*host_args, **host_kwargs)
    if func is _aten.copy_.default:
        return args[0]
    if torch.Tag.inplace_view in func.tags and isinstance(args[0], StandInTensor):
        _change_shape(func, args, kwargs)
    if target is not None:
        wrap = _is_stand_in(target)
    else:
        wrap = on_stand_in
    # In-place operators return their argument: the same tensor on the stand-in, not a new one.
    owners = {id(host(value)): value for value in args if isinstance(value, StandInTensor)}

    def put_back(value: Any) -> Any:
        if isinstance(value, torch.Tensor) and id(value) in owners:
            return owners[id(value)]
        return StandInTensor(value) if wrap and isinstance(value, torch.Tensor) else value

    if func in _HOST_RESULTS:
        on_host = _HOST_RESULTS[func]
        return tuple(value if index == on_host else put_back(value) for index, value in enumerate(result))
    return _map(put_back, result)


def _change_shape(func, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> None:
    """Gives the tensor on the stand-in the shape and strides that `func` (`transpose_`, ...) gave its data."""
    # As `torch.utils._python_dispatch.return_and_correct_aliasing` does: the operator runs on the
    # tensor's metadata alone.
    with no_dispatch():
        meta_in_tls = torch._C._meta_in_tls_dispatch_include()
        torch._C._set_meta_in_tls_dispatch_include(True)
        try:
            func(*args, **kwargs)
        finally:
            torch._C._set_meta_in_tls_dispatch_include(meta_in_tls)


class _StandInMode(TorchDispatchMode):
    """Sends every operator to `_run`, so that operators that make tensors (`torch.zeros(device=...)`) see the stand-in."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return _run(func, args, kwargs or {})


def _get_device_of(tensor: torch.Tensor) -> int:
    return 0 if isinstance(tensor, StandInTensor) else _ORIGINALS["get_device_of"](tensor)


def _get_range_vector(size: int, device: int) -> torch.Tensor:
    if device > -1:
        return torch.arange(size, dtype=torch.long, device=STAND_IN)
    return _ORIGINALS["get_range_vector"](size, device)


def _int_to_device(device: Any) -> torch.device:
    if isinstance(device, int) and device >= 0:
        return STAND_IN
    return _ORIGINALS["int_to_device"](device)


_ORIGINALS = {
    "get_device_of": allennlp.nn.util.get_device_of,
    "get_range_vector": allennlp.nn.util.get_range_vector,
    "int_to_device": allennlp.nn.util.int_to_device,
}
_PATCHES = [
    (allennlp.nn.util, "get_device_of", _get_device_of),
    (allennlp.nn.util, "get_range_vector", _get_range_vector),
    (allennlp.nn.util, "int_to_device", _int_to_device),
    (allennlp.common.util, "int_to_device", _int_to_device),
]


@contextlib.contextmanager
def on_the_stand_in() -> Iterator[torch.device]:
    """Within it, `STAND_IN` (yielded) is a device that computes on the CPU and that allennlp takes for GPU 0."""
    saved = [(module, name, getattr(module, name)) for module, name, _ in _PATCHES]
    # `torch.tensor(data, device=...)` builds on the CPU and then copies, which the mode sees.
    lift_only_cpu = torch._C._only_lift_cpu_tensors()
    torch._C._set_only_lift_cpu_tensors(True)
    try:
        for module, name, replacement in _PATCHES:
            setattr(module, name, replacement)
        with _StandInMode():
            yield STAND_IN
    finally:
        torch._C._set_only_lift_cpu_tensors(lift_only_cpu)
        for module, name, original in saved:
            setattr(module, name, original)
