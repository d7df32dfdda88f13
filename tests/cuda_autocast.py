"""
CUDA's float16 autocast (the casting of allennlp's `trainer.use_amp`), applied to CPU tensors, for
tests on machines without a GPU.

CPU autocast (`torch.autocast("cpu", dtype=torch.float16)`) has another policy: it leaves softmax,
sums, `exp` and layer norm in the dtype they are given, and runs LSTMs in float32, where CUDA runs
cuDNN's LSTM in float16 and those reductions in float32. `cuda_float16_autocast()` applies CUDA's
lists (aten/src/ATen/autocast_mode.h: `AT_FORALL_LOWER_PRECISION_FP`, `AT_FORALL_FP32`,
`AT_FORALL_FP32_SET_OPT_DTYPE`, `AT_FORALL_PROMOTE`; aten/src/ATen/native/cudnn/AutocastRNN.cpp for
cuDNN's RNNs) to the torch functions that the code calls:

- float16: matrix products, convolutions, `linear`, `einsum`, `prelu`, the RNN cells, and whole
  RNNs (`torch.lstm`, `gru`, `rnn_tanh`, `rnn_relu`: input, states and weights, as cuDNN runs them);
- float32: `exp`, `log`, `pow`, `layer_norm`, `norm`, `logsumexp`, `softplus`, the losses...;
  `softmax`, `log_softmax`, `sum`, `prod`, `cumsum` and `cumprod` give float32 when not given a dtype;
- the widest dtype of the operands: `addcmul`, `addcdiv`, `bilinear`, `scatter_add`...;
- everything else runs in the dtype it is given (a float16 product's output stays float16 through
  `masked_fill`, `max`, `tanh`, dropout...), and `binary_cross_entropy` raises, as on CUDA.

Like CUDA's autocast it is off inside `torch.autocast(device, enabled=False)` (the float32 islands
of nerzoo.modules.full_precision): the context turns on CPU autocast's flag for that, and every
call runs with CPU autocast off, so that only CUDA's policy applies. The flag is set with CPU
autocast's own dtype (bfloat16), so that code asking for CPU float16 autocast does not take its
CPU-only paths. Differences from CUDA: casts apply to the functions called from Python, not to the
operators inside a composite one; casts are not cached; float16 arithmetic on the CPU rounds (and
accumulates) differently from cuDNN and cuBLAS, but overflows at the same 65504.
"""

import contextlib
import traceback
from typing import Any, Callable, Dict, Iterator, Optional, Tuple

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten, tree_map

from tests import PROJECT_ROOT

FLOAT16 = frozenset(
    """
    _convolution conv1d conv2d conv3d conv_tbc conv_transpose1d conv_transpose2d conv_transpose3d convolution
    prelu addmm addmv addr matmul __matmul__ __rmatmul__ einsum mm mv linalg_vecdot vecdot linear addbmm baddbmm bmm
    chain_matmul linalg_multi_dot multi_dot lstm_cell gru_cell rnn_tanh_cell rnn_relu_cell
    scaled_dot_product_attention lstm gru rnn_tanh rnn_relu
    """.split()
)
FLOAT32 = frozenset(
    """
    acos asin cosh erfinv exp expm1 log log10 log2 log1p reciprocal rsqrt sinh tan pow __pow__ __rpow__ softplus
    layer_norm rms_norm group_norm norm frobenius_norm nuclear_norm cosine_similarity poisson_nll_loss
    cosine_embedding_loss nll_loss hinge_embedding_loss kl_div l1_loss smooth_l1_loss huber_loss mse_loss
    margin_ranking_loss multilabel_margin_loss soft_margin_loss triplet_margin_loss multi_margin_loss
    binary_cross_entropy_with_logits dist pdist cdist renorm logsumexp cross_entropy
    """.split()
)
# Float32 when the first tensor is floating and no dtype is asked for.
FLOAT32_UNLESS_A_DTYPE = frozenset(
    "prod softmax log_softmax cumprod cumsum linalg_vector_norm vector_norm linalg_matrix_norm matrix_norm sum".split()
)
PROMOTE = frozenset(
    "addcdiv addcmul atan2 bilinear cross dot vdot grid_sampler index_put tensordot scatter_add".split()
)
BANNED = frozenset(["binary_cross_entropy"])


def _castable(value: Any) -> bool:
    return torch.is_tensor(value) and value.is_floating_point() and value.dtype != torch.float64


def _cast(args: Tuple, kwargs: Dict, dtype: torch.dtype):
    def cast(value):
        return value.to(dtype) if _castable(value) and value.dtype != dtype else value

    return tree_map(cast, args), tree_map(cast, kwargs)


@contextlib.contextmanager
def _cpu_autocast_off() -> Iterator[None]:
    enabled = torch.is_autocast_enabled("cpu")
    torch.set_autocast_enabled("cpu", False)
    try:
        yield
    finally:
        torch.set_autocast_enabled("cpu", enabled)


class CudaFloat16Autocast(TorchFunctionMode):
    """
    The casting of `torch.autocast("cuda", dtype=torch.float16)`, on the torch functions called.

    `first_non_finite` names the first call that gave an infinite or NaN value from finite inputs
    (with the largest of them, before casting, and where in the calling code), to say where a
    non-finite loss comes from.
    """

    def __init__(self) -> None:
        super().__init__()
        self.first_non_finite: Optional[str] = None

    def __torch_function__(self, func: Callable, types, args: Tuple = (), kwargs: Optional[Dict] = None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        given = (args, kwargs)
        if torch.is_autocast_enabled("cpu") and "out" not in kwargs:
            args, kwargs = self.cast(name, args, kwargs)
        with _cpu_autocast_off():
            output = func(*args, **kwargs)
            # Uninitialised memory (buffers filled afterwards) may hold anything.
            if name not in UNINITIALISED and self.first_non_finite is None and not all(map(_finite, _floats(output))):
                inputs = _floats(given)
                if all(map(_finite, inputs)):
                    largest = max((float(value.abs().max()) for value in inputs if value.numel()), default=0.0)
                    self.first_non_finite = f"{name}, largest input {largest:g}, at {_caller()}"
        return output

    @staticmethod
    def cast(name: str, args: Tuple, kwargs: Dict) -> Tuple[Tuple, Dict]:
        if name in FLOAT16:
            return _cast(args, kwargs, torch.float16)
        if name in FLOAT32:
            return _cast(args, kwargs, torch.float32)
        if name in FLOAT32_UNLESS_A_DTYPE:
            first = next((value for value in tree_flatten((args, kwargs))[0] if torch.is_tensor(value)), None)
            asked = kwargs.get("dtype") is not None or any(isinstance(value, torch.dtype) for value in args)
            if first is None or asked or not _castable(first) or first.dtype == torch.float32:
                return args, kwargs
            return tree_map(lambda value: value.float() if value is first else value, (args, kwargs))
        if name in PROMOTE:
            dtypes = {value.dtype for value in tree_flatten((args, kwargs))[0] if _castable(value)}
            return _cast(args, kwargs, torch.float32) if len(dtypes) > 1 else (args, kwargs)
        if name in BANNED:
            raise RuntimeError(f"torch.nn.functional.{name} is unsafe to autocast (CUDA autocast refuses it)")
        return args, kwargs


def _floats(value: Any) -> list:
    return [leaf for leaf in tree_flatten(value)[0] if torch.is_tensor(leaf) and leaf.is_floating_point()]


UNINITIALISED = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"}


def _finite(tensor: torch.Tensor) -> bool:
    return tensor.device.type == "meta" or bool(torch.isfinite(tensor).all())


def _caller() -> str:
    """The innermost lines of the stack outside torch and this module."""
    frames = [frame for frame in traceback.extract_stack() if "/torch/" not in frame.filename]
    frames = [frame for frame in frames if not frame.filename.endswith("cuda_autocast.py")]
    return " <- ".join(
        f"{frame.filename.split('/site-packages/')[-1].replace(f'{PROJECT_ROOT}/', '')}:{frame.lineno} {frame.line}"
        for frame in frames[:-4:-1]
    )


@contextlib.contextmanager
def cuda_float16_autocast() -> Iterator[CudaFloat16Autocast]:
    """Runs its body under CUDA's float16 autocast policy, on CPU tensors (see the module's docstring)."""
    enabled, dtype = torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu")
    torch.set_autocast_dtype("cpu", torch.bfloat16)
    torch.set_autocast_enabled("cpu", True)
    try:
        with CudaFloat16Autocast() as mode:
            yield mode
    finally:
        torch.set_autocast_enabled("cpu", enabled)
        torch.set_autocast_dtype("cpu", dtype)
