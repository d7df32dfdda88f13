"""
`fast_lstm` on DEVICE: after the move, every layer's direction starts a flat weight buffer of its
own, so cuDNN runs each call on the weights in place: no copy, and no warning that the weights "are
not part of single contiguous chunk of memory". On the CPU the weights stay as `torch.nn.LSTM` has them.
"""

import warnings

import torch

from nerzoo.modules.seq2seq_encoders.fast_lstm import FastLstm
from tests.gpu.device_under_test import DEVICE, skip_unless_the_device_is_available

skip_unless_the_device_is_available()


def test_each_direction_owns_its_buffer_and_cudnn_copies_nothing():
    torch.manual_seed(0)
    lstm = FastLstm(6, 5, num_layers=2, bidirectional=True).to(DEVICE)
    if DEVICE.type == "cuda" and torch.backends.cudnn.is_acceptable(lstm._module.weight_ih_l0):
        for layer in range(2):
            for suffix in ("", "_reverse"):
                first, *others = lstm._weights(layer, suffix)
                storage = first.untyped_storage().data_ptr()
                assert storage == first.data_ptr(), (layer, suffix)
                assert all(w.untyped_storage().data_ptr() == storage for w in others), (layer, suffix)
    inputs = torch.randn(3, 7, 6, device=DEVICE, requires_grad=True)
    mask = torch.tensor([[True] * 7, [True] * 4 + [False] * 3, [True] + [False] * 6], device=DEVICE)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lstm.train()
        lstm(inputs, mask).sum().backward()
    assert not [w for w in caught if "contiguous chunk of memory" in str(w.message)]
    assert all(torch.isfinite(p.grad).all() for p in lstm.parameters())
