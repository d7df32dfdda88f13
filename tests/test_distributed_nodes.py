"""
`bilstm_crf` trained on the fixtures by the real `allennlp train` as two nodes of one gloo worker each
on 127.0.0.1 (`num_nodes`, `primary_port`, `--node-rank`), each node with its own serialization
directory as on two machines, against one node of two workers: the same world size, so the same
shards, batches and seeds.  The first node's archive and metrics are the one-node run's; the second
node writes no metrics of its own, and its archive holds the first node's weights.  A serialization
directory that both nodes share is refused on both.

The best epoch is not the last (the dev F1 falls in the second), so every node loads the best
weights back at the end of training.  `make test-slow` runs these, `make test` does not.
"""

import io
import json
import socket
import subprocess
import sys
import tarfile
import time

import pytest
import torch

from tests import PROJECT_ROOT, train

pytestmark = [pytest.mark.end_to_end, pytest.mark.slow, pytest.mark.xdist_group("distributed_nodes")]

CONFIG = "training_config/bilstm_crf.jsonnet"
# Two tiny epochs; one validation batch a worker (tests/test_distributed_configs.py).
OVERRIDES = {
    "trainer.num_epochs": 2,
    "data_loader.batches_per_epoch": 3,
    "trainer.patience": None,
    "validation_data_loader.batch_sampler.batch_size": 1000,
}
# Not properties of the weights: the time and the memory each run took.
NOT_COMPARED = ("training_duration", "_memory_MB")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _node(run, node_rank, port, *extra) -> subprocess.Popen:
    """`allennlp train` as node `node_rank` of two, one CPU worker each, the first at 127.0.0.1:`port`."""
    distributed = {"cuda_devices": [-1], "num_nodes": 2, "primary_address": "127.0.0.1", "primary_port": port}
    overrides = json.dumps({**OVERRIDES, "distributed": distributed})
    command = [sys.executable, "-m", "allennlp", "train", CONFIG, "-s", str(run), "--include-package", "nerzoo"]
    command += ["-o", overrides, "--node-rank", str(node_rank), *extra]
    return subprocess.Popen(command, cwd=PROJECT_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _weights(archive):
    with tarfile.open(archive) as tar:
        return torch.load(io.BytesIO(tar.extractfile("weights.th").read()), map_location="cpu")


def _metrics(run):
    metrics = json.loads((run / "metrics.json").read_text())
    return {key: value for key, value in metrics.items() if not key.endswith(NOT_COMPARED)}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The run directories of the two nodes and of the one-node run, trained at the same time."""
    root = tmp_path_factory.mktemp("nodes")
    port = _free_port()
    nodes = [_node(root / f"node{rank}", rank, port) for rank in (0, 1)]
    try:
        one_node = {**OVERRIDES, "distributed": {"cuda_devices": [-1, -1]}}
        train(CONFIG, root / "one_node", json.dumps(one_node))
        for rank, node in enumerate(nodes):
            _, stderr = node.communicate(timeout=600)
            assert node.returncode == 0, f"node {rank} failed ({node.returncode}):\n{stderr[-4000:]}"
    finally:
        for node in nodes:
            if node.poll() is None:
                node.kill()
                node.wait()
    return root / "node0", root / "node1", root / "one_node"


def test_two_nodes_train_the_weights_and_metrics_of_one_node(runs):
    first, _, one_node = runs
    expected = _metrics(one_node)
    assert expected["best_epoch"] < expected["epoch"], "the best epoch should not be the last"
    assert _metrics(first) == expected
    weights, expected_weights = _weights(first / "model.tar.gz"), _weights(one_node / "model.tar.gz")
    assert weights.keys() == expected_weights.keys()
    # Two workers either way: gloo's all-reduce adds two gradients, and a float sum of two terms
    # does not depend on their order, so every step is the same to the bit.
    for name, tensor in weights.items():
        assert torch.equal(tensor, expected_weights[name]), name


def test_the_second_node_leaves_no_metrics_and_the_first_nodes_weights(runs):
    first, second, _ = runs
    assert not (second / "metrics.json").exists()
    weights, expected_weights = _weights(second / "model.tar.gz"), _weights(first / "model.tar.gz")
    assert weights.keys() == expected_weights.keys()
    for name, tensor in weights.items():
        assert torch.equal(tensor, expected_weights[name]), name


def test_a_serialization_directory_shared_by_two_nodes_is_refused_on_both(tmp_path):
    """
    allennlp refuses a second node whose directory the first has written to, unless it is started
    with `--recover` (as its message says), or both start at once; then both would train there.
    """
    run = tmp_path / "run"
    port = _free_port()
    nodes = [_node(run, 0, port)]
    try:
        # The first node's worker has started: its vocabulary is written, which `--recover` reads.
        deadline = time.monotonic() + 300
        while not (run / "out_worker0.log").exists() and nodes[0].poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        nodes.append(_node(run, 1, port, "--recover"))
        errors = [node.communicate(timeout=600)[1] for node in nodes]
    finally:
        for node in nodes:
            if node.poll() is None:
                node.kill()
                node.wait()
    for node, stderr in zip(nodes, errors):
        assert node.returncode != 0 and "give each node its own" in stderr, stderr[-4000:]
    assert not (run / "best.th").exists()
