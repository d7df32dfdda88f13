"""
`ChildSumTreeLstm.export_form()`, the form of the Tree-LSTM `allennlp export` traces, against the level form
(`ChildSumTreeLstm.encode`): in torch, and as an ONNX graph at batch sizes, lengths and depths the
trace never saw.
"""

import io

import onnxruntime
import pytest
import torch

from nerzoo.contracts import HasExportForm
from nerzoo.modules.seq2seq_encoders.child_sum_tree_lstm import ChildSumTreeLstm
from tests.modules.test_child_sum_tree_lstm import pad, random_batch

SHAPES = [
    {"num_layers": 1},
    {"num_layers": 2, "residual": True},  # the first layer's residual through P
    {"num_layers": 2, "residual": True, "top_down": True},
    {"num_layers": 1, "top_down": True, "residual": True, "projected_residual": False},
]


class Graph(torch.nn.Module):
    def __init__(self, module: torch.nn.Module) -> None:
        super().__init__()
        self.module = module

    def forward(self, inputs, mask, head_indices):
        return tuple(self.module.encode(inputs, mask, head_indices))


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_it_equals_the_level_form_in_torch_and_as_onnx(shape):
    torch.manual_seed(0)
    module = ChildSumTreeLstm(6, 5, **shape).eval()
    assert isinstance(module, HasExportForm)
    exported = module.export_form()
    traced_mask, traced_heads = pad([[2, 0, 2], [0]])
    graph = io.BytesIO()
    with torch.no_grad():
        torch.onnx.export(
            Graph(exported),
            (torch.randn(2, 3, 6), traced_mask, traced_heads),
            graph,
            input_names=["inputs", "mask", "head_indices"],
            output_names=["states", "root"],
            dynamic_axes={name: {0: "batch_size", 1: "num_tokens"} for name in ("inputs", "mask", "head_indices")},
            opset_version=17,
            dynamo=False,
        )
    session = onnxruntime.InferenceSession(graph.getvalue(), providers=["CPUExecutionProvider"])
    for seed in range(3):
        mask, head_indices = random_batch(seed)  # forests, a 40-deep chain, one-token and empty rows
        inputs = torch.randn(*mask.shape, 6).masked_fill(~mask.unsqueeze(-1), float("nan"))
        with torch.no_grad():
            expected = module.encode(inputs, mask, head_indices)
            got = exported.encode(inputs, mask, head_indices)
        onnx = session.run(None, {"inputs": inputs.numpy(), "mask": mask.numpy(), "head_indices": head_indices.numpy()})
        for want, have, from_onnx in zip(expected, got, onnx):
            assert torch.allclose(have, want, atol=1e-5)
            assert torch.allclose(torch.from_numpy(from_onnx), want, atol=1e-5)
        with torch.no_grad():
            assert torch.equal(exported(inputs, mask, head_indices), got.states)
