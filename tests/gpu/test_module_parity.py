"""
Every hand-written module computes on DEVICE what it computes on the CPU, in float32.

One table of cases drives one test: each case builds a module with a fixed seed (for the CRF
functions, the `ConditionalRandomField` that holds their parameters), makes CPU inputs (with the
builders of the module's own tests in tests/modules), and runs the same call on the module and on a
deep copy of it on DEVICE. The outputs (tensors on DEVICE, integer ones such as Viterbi paths
exactly equal), the gradients of a fixed random projection of them with respect to the floating
inputs, and the gradients of every parameter must equal the CPU's to 1e-5. Modules run in training
mode (cuDNN's RNNs have no backward pass in evaluation mode; tests/gpu/cudnn_rnn_rule.py holds the
CPU to that rule) with every dropout off, since the two devices draw different masks; their outputs
are compared in evaluation mode too. Where a module takes another path on an accelerator
(`fast_character_encoding` encodes every slot instead of packing the real tokens), a case runs
each path on DEVICE against the CPU's own.
"""

import copy
from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Tuple

import pytest
import torch
from allennlp.modules.seq2seq_encoders import LstmSeq2SeqEncoder

from nerzoo.modules.crf.tag_scorers import CrfScorer
from nerzoo.modules.fofe.codes import fofe_codes, prefix_codes, span_codes
from nerzoo.modules.fofe.span_character_cnn import SpanCharacterCnn
from nerzoo.modules.seq2seq_encoders.child_sum_tree_lstm import ChildSumTreeLstm
from nerzoo.modules.seq2seq_encoders.fast_lstm import FastLstm
from nerzoo.modules.seq2seq_encoders.global_attention import GlobalAttention
from nerzoo.modules.seq2seq_encoders.relative_attention import RelativeAttention
from nerzoo.modules.seq2seq_encoders.residual_stack import ResidualStack
from nerzoo.modules.seq2vec_encoders.fofe_encoder import FofeEncoder
from nerzoo.modules.seq2vec_encoders.summed_gru_encoder import SummedGruEncoder
from tests.gpu.device_under_test import DEVICE, skip_unless_the_device_is_available
from tests.modules import test_attention_encoders as attention_tests
from tests.modules import test_child_sum_tree_lstm as tree_tests
from tests.modules import test_fast_character_encoding as character_tests
from tests.modules import test_fast_lstm as lstm_tests
from tests.modules import test_fofe as fofe_tests
from tests.modules import test_linear_chain_crf as crf_tests
from tests.modules import test_memory_hop as memory_tests
from tests.modules import test_span_character_cnn as span_cnn_tests

skip_unless_the_device_is_available()

TOLERANCE = 1e-5
# Gradients sum over time steps and positions, in cuDNN and on the CPU in other orders.
GRADIENT_TOLERANCE = 1e-4


@dataclass(frozen=True)
class Case:
    """
    `build()` gives the module (called under a fixed seed), `inputs()` its CPU inputs, `run(module,
    *inputs)` a tensor or a (named) tuple of them on the CPU, and `run_on_device` the call on DEVICE
    where it differs.
    """

    name: str
    build: Callable[[], torch.nn.Module]
    inputs: Callable[[], Tuple[Any, ...]]
    run: Callable[..., Any]
    run_on_device: Optional[Callable[..., Any]] = None


class Alpha(torch.nn.Module):
    """A trainable FOFE forgetting factor, for the FOFE functions that take one."""

    def __init__(self, value: float) -> None:
        super().__init__()
        self.alpha = torch.nn.Parameter(torch.tensor(value))


def _crf_inputs(scale: float = 1.0, dtype: torch.dtype = torch.float32, **shape: int):
    logits, mask, tags, _ = crf_tests._random_batch(0, dtype, **shape)
    return logits * scale, mask, tags


def _crf_cases() -> List[Case]:
    # The CRFs scan on both devices: one algorithm on two devices.
    runs = {
        "viterbi": lambda crf, logits, mask, tags: crf.viterbi(logits, mask),
        "log_likelihood": lambda crf, logits, mask, tags: crf.log_likelihood(logits, tags, mask),
        "forward_backward": lambda crf, logits, mask, tags: tuple(crf.forward_backward(logits, mask)[:3]),
        "forward_backward, transition temperature 2": lambda crf, logits, mask, tags: tuple(
            crf.forward_backward(logits, mask, transition_temperature=2.0)[:3]
        ),
        "tag_marginals": lambda crf, logits, mask, tags: (
            CrfScorer(crf).posteriors(logits, mask, crf.viterbi(logits, mask).tags).probabilities
        ),
    }
    cases = []
    for name, run in runs.items():
        for constrained, start_end in [(True, True), (False, False)]:
            label = f"{name}, {'BIOUL constraints' if constrained else 'unconstrained'}"
            label += ", start/end" if start_end else ""
            cases.append(
                Case(
                    label,
                    lambda c=constrained, s=start_end: crf_tests._crf(c, s, seed=0, schedule="scan"),
                    _crf_inputs,
                    run,
                )
            )
    # Scores hundreds of nats apart.
    for name in ("forward_backward", "tag_marginals"):
        cases.append(
            Case(
                f"{name}, scores far apart",
                lambda: crf_tests._crf(True, True, seed=0, schedule="scan"),
                lambda: _crf_inputs(scale=30.0),
                runs[name],
            )
        )
    # A float64 batch as large as prediction's (confidences).
    for name in ("forward_backward", "tag_marginals"):
        cases.append(
            Case(
                f"{name}, float64, 64 sentences of 40 steps",
                lambda: crf_tests._crf(True, True, seed=0, schedule="scan").double(),
                lambda: _crf_inputs(dtype=torch.float64, batch_size=64, num_steps=40),
                runs[name],
            )
        )
    return cases


def _tree_lstm(
    input_dim: int, num_layers: int, residual: bool, projected_residual: bool, top_down: bool = False
) -> ChildSumTreeLstm:
    module = ChildSumTreeLstm(
        input_dim,
        5,
        num_layers=num_layers,
        residual=residual,
        dropout=0.2,
        projected_residual=projected_residual,
        top_down=top_down,
    )
    for layer in module.layers:
        if layer.layer_norm is not None:  # a non-trivial affine part
            torch.nn.init.normal_(layer.layer_norm.weight)
            torch.nn.init.normal_(layer.layer_norm.bias)
    return module


def _tree_inputs(input_dim: int, seed: int):
    """Random valid dependency forests: one tree, several roots, a single token, a 40-deep chain, an empty row."""
    mask, head_indices = tree_tests.random_batch(seed)
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*mask.shape, input_dim, generator=generator), mask, head_indices


def _tree_cases() -> List[Case]:
    shapes = [
        (6, 1, False, True, False),
        (6, 2, True, True, False),
        (5, 2, True, True, False),
        (6, 2, True, False, False),
        (6, 2, True, True, True),
    ]
    return [
        Case(
            f"child_sum_tree_lstm, input {dim}, {layers} layer(s), residual {residual}, projected {projected}"
            + (", top-down" if top_down else ""),
            lambda d=dim, n=layers, r=residual, p=projected, t=top_down: _tree_lstm(d, n, r, p, t),
            lambda d=dim, s=seed: _tree_inputs(d, s),
            lambda module, inputs, mask, heads: module.encode(inputs, mask, heads),
        )
        for seed, (dim, layers, residual, projected, top_down) in enumerate(shapes)
    ]


def _memory_hop_cases() -> List[Case]:
    return [
        Case(
            f"memory_hop {options}",
            lambda o=options: memory_tests._encoder(**o),
            memory_tests._inputs,
            lambda module, inputs, mask: module.attend(inputs, mask),
        )
        for options in memory_tests.OPTIONS
    ]


def _fofe_inputs(lengths, dim=5, seed=0):
    return fofe_tests.padded_batch(lengths, dim, dtype=torch.float32, seed=seed)


def _spans(num_steps: int, batch_size: int, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    starts = torch.randint(0, num_steps + 1, (batch_size, 25), generator=generator)
    ends = torch.clamp(starts + torch.randint(0, 7, starts.shape, generator=generator), max=num_steps)
    return starts, ends


def _span_codes(module, inputs, mask, starts, ends, reverse):
    return span_codes(prefix_codes(inputs, mask, module.alpha, reverse=reverse), starts, ends, module.alpha, reverse)


def _fofe_cases() -> List[Case]:
    cases = []
    for reverse in (False, True):
        direction = "right to left" if reverse else "left to right"
        cases += [
            Case(
                f"fofe_codes, trainable alpha, blocks of 4, {direction}",
                lambda: Alpha(0.6),
                lambda: _fofe_inputs([11, 7, 1, 4]),
                lambda module, inputs, mask, r=reverse: fofe_codes(inputs, mask, module.alpha, r, block_size=4),
            ),
            Case(
                f"fofe_codes, alpha 0.7, 300 steps, {direction}",
                torch.nn.Module,
                lambda: _fofe_inputs([300, 200, 1], dim=4),
                lambda module, inputs, mask, r=reverse: fofe_codes(inputs, mask, 0.7, r),
            ),
            Case(
                f"prefix_codes and span_codes, trainable alpha, {direction}",
                lambda: Alpha(0.45),
                lambda: (*_fofe_inputs([11, 7, 1, 4]), *_spans(11, 4)),
                lambda module, *inputs, r=reverse: _span_codes(module, *inputs, reverse=r),
            ),
        ]
    for options in [{"alpha": 0.4, "trainable_alpha": True}, {"alpha": 1.0, "bidirectional": False}]:
        cases.append(
            Case(
                f"fofe encoder {options}",
                lambda o=options: FofeEncoder(5, **o),
                lambda: _fofe_inputs([9, 3, 0, 1]),
                lambda module, inputs, mask: module(inputs, mask),
            )
        )
    return cases


def _with_layer_norm(module: torch.nn.Module, layer_norm: str = "_layer_norm") -> torch.nn.Module:
    attention_tests._randomise_layer_norm(getattr(module, layer_norm))
    return module


def _with_query(query_dim: int):
    inputs, mask = attention_tests._batch(6)
    return inputs, mask, torch.randn(inputs.size(0), query_dim, generator=torch.Generator().manual_seed(3))


def _zero_padded(dim: int):
    inputs, mask = attention_tests._batch(dim)
    return inputs.masked_fill(~mask.unsqueeze(-1), 0.0), mask


def _residual_stack() -> ResidualStack:
    stack = ResidualStack(
        [
            LstmSeq2SeqEncoder(input_size=4, hidden_size=3, bidirectional=True),
            FastLstm(input_size=6, hidden_size=3, bidirectional=True),
            RelativeAttention(input_dim=6, residual=False),
        ],
        dropout=0.3,
    )
    for index, layer_norm in stack._layer_norms.items():
        attention_tests._randomise_layer_norm(layer_norm, seed=int(index))
    return stack


def _attention_cases() -> List[Case]:
    # The attention tests' inputs hold NaN at padding, which the modules must never read.
    attend = lambda module, inputs, mask: module.attend(inputs, mask)  # noqa: E731
    return [
        Case(
            "relative_attention, residual",
            lambda: _with_layer_norm(RelativeAttention(6, residual=True, dropout=0.1)),
            lambda: attention_tests._batch(6),
            attend,
        ),
        Case(
            "relative_attention, plain",
            lambda: RelativeAttention(6, residual=False),
            lambda: attention_tests._batch(6),
            attend,
        ),
        Case(
            "global_attention, context, own query",
            lambda: _with_layer_norm(GlobalAttention(6, 4)),
            lambda: attention_tests._batch(6),
            attend,
        ),
        Case(
            "global_attention, scale, bidirectional input",
            lambda: _with_layer_norm(GlobalAttention(6, 4, bidirectional_input=True, mode="scale")),
            lambda: attention_tests._batch(6),
            attend,
        ),
        Case(
            "global_attention, context, given query",
            lambda: _with_layer_norm(GlobalAttention(6, 4, query_dim=3)),
            lambda: _with_query(3),
            lambda module, inputs, mask, query: module.attend(inputs, mask, query),
        ),
        Case(
            "residual_stack of lstm, fast_lstm and relative_attention",
            _residual_stack,
            lambda: _zero_padded(4),
            lambda module, inputs, mask: module(inputs, mask),
        ),
    ]


def _recurrent_cases() -> List[Case]:
    run = lambda module, inputs, mask: module(inputs, mask)  # noqa: E731
    cases = [
        Case(
            f"fast_lstm, {shape}",
            lambda s=shape: lstm_tests._pair(s, torch.float32)[1],
            lambda: lstm_tests._batch(torch.float32),
            run,
        )
        for shape in sorted(lstm_tests.SHAPES)
    ]
    cases.append(
        Case("summed_gru", lambda: SummedGruEncoder(5, 3, output_dim=4), lambda: lstm_tests._batch(torch.float32), run)
    )
    return cases


def _character_cases() -> List[Case]:
    cases = [
        Case(
            f"fast_character_encoding, {encoder}",
            lambda e=encoder: character_tests._pair(e)[1],
            lambda: character_tests._characters()[:1],
            lambda module, characters: module(characters),
        )
        for encoder in sorted(character_tests.ENCODERS)
    ]

    def span_inputs():
        generator = torch.Generator().manual_seed(2)
        characters = torch.randn(2, 30, 6, generator=generator)
        return (characters, *span_cnn_tests._random_ranges(2, 30, 60, generator))

    cases.append(
        Case(
            "span_character_cnn",
            lambda: SpanCharacterCnn(input_dim=6, num_filters=4, kernel_sizes=(1, 2, 3, 5)),
            span_inputs,
            lambda module, characters, starts, ends: module(characters, starts, ends),
        )
    )
    return cases


CASES = _crf_cases() + _tree_cases() + _memory_hop_cases() + _fofe_cases() + _attention_cases()
CASES += _recurrent_cases() + _character_cases()


def _leaves(value: Any) -> List[Any]:
    """The tensors (and other values) of an output, a (named) tuple flattened in order."""
    if isinstance(value, (tuple, list)):
        return [leaf for item in value for leaf in _leaves(item)]
    return [value]


def _outputs_and_gradients(
    module: torch.nn.Module, inputs: Tuple[Any, ...], run: Callable[..., Any], device: torch.device
):
    """
    The outputs of `run(module, *inputs)` and the gradients of a fixed random projection of the
    differentiable ones (of the floating inputs, of the parameters), all copied to the CPU.
    """
    module.zero_grad(set_to_none=True)
    inputs = [
        value.detach().clone().requires_grad_() if torch.is_tensor(value) and value.is_floating_point() else value
        for value in inputs
    ]
    outputs = _leaves(run(module, *inputs))
    # Nothing falls back to the CPU on the way.
    assert all(output.device.type == device.type for output in outputs if torch.is_tensor(output))
    differentiable = [output for output in outputs if torch.is_tensor(output) and output.requires_grad]
    if differentiable:
        generator = torch.Generator().manual_seed(123)
        projections = [torch.randn(output.shape, generator=generator).to(output.device) for output in differentiable]
        sum((output * projection).sum() for output, projection in zip(differentiable, projections)).backward()
    return (
        [output.detach().cpu() if torch.is_tensor(output) else output for output in outputs],
        [value.grad.cpu() if torch.is_tensor(value) and value.grad is not None else None for value in inputs],
        {name: parameter.grad.cpu() for name, parameter in module.named_parameters() if parameter.grad is not None},
    )


def _without_dropout(module: torch.nn.Module) -> torch.nn.Module:
    """`module` in training mode with every dropout off: its `Dropout` layers and its RNNs' between layers."""
    for each in module.modules():
        if isinstance(each, torch.nn.modules.dropout._DropoutNd):
            each.p = 0.0
        elif isinstance(each, torch.nn.RNNBase):
            each.dropout = 0.0
    return module.train()


def _outputs_in_evaluation_mode(module: torch.nn.Module, inputs: Tuple[Any, ...], run: Callable[..., Any]):
    module.eval()
    try:
        with torch.no_grad():
            return [output.cpu() if torch.is_tensor(output) else output for output in _leaves(run(module, *inputs))]
    finally:
        module.train()


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_module_on_the_device_equals_the_cpu(case: Case, ieee_float32):
    torch.manual_seed(0)
    module = _without_dropout(case.build())
    inputs = case.inputs()
    device_module = copy.deepcopy(module).to(DEVICE)
    device_inputs = tuple(value.to(DEVICE) if torch.is_tensor(value) else value for value in inputs)

    # A seed of its own for each side: a dropout left on gives other masks even when DEVICE is the CPU.
    torch.manual_seed(1)
    expected = _outputs_and_gradients(module, inputs, case.run, torch.device("cpu"))
    torch.manual_seed(2)
    got = _outputs_and_gradients(device_module, device_inputs, case.run_on_device or case.run, DEVICE)
    evaluated = [
        _outputs_in_evaluation_mode(each, each_inputs, run)
        for each, each_inputs, run in [
            (module, inputs, case.run),
            (device_module, device_inputs, case.run_on_device or case.run),
        ]
    ]

    def close(actual, wanted, what, tolerance=TOLERANCE):
        torch.testing.assert_close(
            actual, wanted, atol=tolerance, rtol=tolerance, msg=lambda message: f"{case.name}, {what}: {message}"
        )

    for mode, actuals, wanteds in [("training", got[0], expected[0]), ("evaluation", evaluated[1], evaluated[0])]:
        assert len(actuals) == len(wanteds)
        for index, (actual, wanted) in enumerate(zip(actuals, wanteds)):
            if torch.is_tensor(wanted):
                close(actual, wanted, f"output {index} in {mode} mode")  # integer ones (Viterbi paths) exactly
            else:
                assert actual == wanted, (case.name, mode, index)
    assert [grad is None for grad in got[1]] == [grad is None for grad in expected[1]]
    for index, (actual, wanted) in enumerate(zip(got[1], expected[1])):
        if wanted is not None:
            close(actual, wanted, f"gradient of input {index}", GRADIENT_TOLERANCE)
    assert got[2].keys() == expected[2].keys()
    for name in expected[2]:
        close(got[2][name], expected[2][name], f"gradient of {name}", GRADIENT_TOLERANCE)
    # Something was compared: every case has outputs, and each differentiable one reaches its parameters.
    assert expected[0]
