"""
`StepGraphs` on DEVICE: `bilstm_crf`'s training loss captured as CUDA graphs and replayed over
batches of several lengths (some padded to one shape, so a graph is replayed for new data) gives the
loss, logits and gradients of the same padded loss run eagerly, in float32 and under float16 autocast; with dropout on
(random numbers drawn inside the graph) training steps stay finite and differ from one another.
On the CPU (`NERZOO_TEST_DEVICE=cpu`) the padded loss runs eagerly: the same comparisons.
"""

import copy

import pytest
import torch
from allennlp.data.batch import Batch
from allennlp.nn.util import move_to_device

from nerzoo.training.step_graphs import StepGraphs, use_step_graphs
from tests import PROJECT_ROOT
from tests.gpu.device_under_test import DEVICE, skip_unless_the_device_is_available
from tests.test_training_configs import build_on_fixtures

skip_unless_the_device_is_available()


def _batches(instances, vocab, size):
    instances = sorted(instances, key=lambda instance: len(instance["tokens"]))
    batches = []
    for start in range(0, len(instances), size):
        batch = Batch(instances[start : start + size])
        batch.index_instances(vocab)
        batches.append(move_to_device(batch.as_tensor_dict(), DEVICE))
    return batches


def _step(model, tensors, autocast):
    model.zero_grad(set_to_none=True)
    with torch.autocast(DEVICE.type, dtype=torch.float16, enabled=autocast):
        output = model(**tensors)
    output["loss"].backward()
    gradients = {name: None if p.grad is None else p.grad.clone() for name, p in model.named_parameters()}
    return output["loss"].detach().clone(), output["logits"].detach().clone(), gradients


@pytest.mark.parametrize("autocast", [False, True], ids=["float32", "autocast"])
def test_graphed_training_steps_equal_the_eager_ones(autocast, ieee_float32):
    torch.manual_seed(0)
    model, instances, vocab = build_on_fixtures(PROJECT_ROOT / "training_config" / "bilstm_crf.jsonnet")
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    # The reference runs the same padded loss eagerly.
    eager = model.to(DEVICE).train()
    use_step_graphs(eager, StepGraphs(length_multiple=16, character_multiple=16, capture=False))
    graphed = copy.deepcopy(model)
    graphs = StepGraphs(length_multiple=16, character_multiple=16)
    use_step_graphs(graphed, graphs)
    batches = _batches(instances, vocab, 2)
    # Every batch twice: the second pass replays the graphs with the same data, the first already
    # replays one for data other than its capture's (two batches padded to one shape).
    for tensors in batches + batches:
        loss, logits, gradients = _step(eager, tensors, autocast)
        graphed_loss, graphed_logits, graphed_gradients = _step(graphed, tensors, autocast)
        tolerance = {"atol": 1e-3, "rtol": 1e-3} if autocast else {"atol": 1e-5, "rtol": 1e-5}
        torch.testing.assert_close(graphed_loss, loss, **tolerance)
        torch.testing.assert_close(graphed_logits, logits, **tolerance)
        # float16 sums over a batch's tokens: a tag projection's gradient differed by up to 1.5e-3 (an H200).
        tolerance = {"atol": 3e-3, "rtol": 1e-2} if autocast else tolerance
        for name, gradient in gradients.items():
            if gradient is None:
                assert graphed_gradients[name] is None, name
            else:
                torch.testing.assert_close(
                    graphed_gradients[name], gradient, msg=lambda m, n=name: f"{n}: {m}", **tolerance
                )
    if DEVICE.type == "cuda":
        assert 1 <= graphs.num_graphs < len(batches) and graphs.replays == 2 * len(batches)
    else:
        assert graphs.eager_runs == 2 * len(batches)


def test_dropout_inside_the_graph_draws_new_masks():
    torch.manual_seed(0)
    model, instances, vocab = build_on_fixtures(PROJECT_ROOT / "training_config" / "bilstm_crf.jsonnet")
    model.to(DEVICE).train()
    use_step_graphs(model, StepGraphs())
    tensors = _batches(instances, vocab, 8)[0]
    losses = [_step(model, tensors, autocast=False)[0].item() for _ in range(3)]
    assert all(torch.isfinite(torch.tensor(losses)))
    assert len(set(losses)) == 3, losses


def test_shapes_past_max_graphs_take_the_plain_step():
    torch.manual_seed(0)
    model, instances, vocab = build_on_fixtures(PROJECT_ROOT / "training_config" / "bilstm_crf.jsonnet")
    model.to(DEVICE).train()
    graphs = StepGraphs(length_multiple=8, character_multiple=8, max_graphs=1)
    use_step_graphs(model, graphs)
    batches = _batches(instances, vocab, 2)  # 7 to 13 tokens: padded to 8 and to 16
    losses = [_step(model, tensors, autocast=False)[0] for tensors in batches]
    assert all(torch.isfinite(loss) for loss in losses)
    if DEVICE.type == "cuda":
        assert graphs.num_graphs == 1 and graphs.replays >= 1 and graphs.plain_steps >= 1
        assert graphs.replays + graphs.plain_steps == len(batches)
    else:
        assert graphs.eager_runs == len(batches)
