import pytest
import torch

from tests.gpu.cudnn_rnn_rule import cudnn_rnn_rule


@pytest.fixture(autouse=True)
def cpu_rnns_follow_cudnn():
    """Every test of the suite: an RNN on the CPU has no backward pass in evaluation mode, as on a GPU."""
    with cudnn_rnn_rule():
        yield


@pytest.fixture
def ieee_float32():
    """
    Full float32 arithmetic on the GPU for one test. cuDNN's convolutions and RNNs use TF32 by
    default on Ampere and later GPUs (a 10-bit mantissa, relative errors around 1e-3), which no
    comparison with the CPU at 1e-5 survives; matrix products are IEEE by default and kept so.
    """
    saved = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved
