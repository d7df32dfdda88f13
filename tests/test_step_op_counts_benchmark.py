"""benchmarks/speed/step_op_counts.py on the fixtures, in this process: it counts a training step and a prediction batch."""

import torch

from tests import benchmark_script


def test_step_op_counts_on_the_fixtures(monkeypatch):
    monkeypatch.setenv("NERZOO_DATA", "fixtures")
    script = benchmark_script("speed/step_op_counts.py", monkeypatch)
    row = script.count("bilstm_crf", steps=2, batch_size=4)
    assert row["batch"] == 4
    # Forward, backward, clipping, a fused SGD step (the config's fused_optimizer) and the metrics read:
    # hundreds of calls, not none.
    assert 100 < row["training_step"] < 2000 and 50 < row["prediction_batch"] < 2000
    assert sum(calls for _, calls in row["top_training_operators"]) <= row["training_step"]
    # Views launch no kernel: fewer "kernel" calls than calls, but some.
    assert 0 < row["training_step_kernels"] < row["training_step"]
    assert 0 < row["prediction_batch_kernels"] < row["prediction_batch"]


def test_counts_prediction_over_the_whole_validation_file(monkeypatch):
    monkeypatch.setenv("NERZOO_DATA", "fixtures")
    script = benchmark_script("speed/step_op_counts.py", monkeypatch)
    row = script.count("bilstm_crf", steps=1, batch_size=4, whole_validation=8)
    # The fixtures' 16 dev sentences in batches of 8.
    assert row["batch"] == 4 and row["validation_batch_size"] == 8 and row["validation_batches"] == 2
    assert 50 < row["validation_batch"] < 5000 and 0 < row["validation_batch_kernels"] < row["validation_batch"]


def test_the_optimizer_steps_as_on_a_gpu(monkeypatch):
    script = benchmark_script("speed/step_op_counts.py", monkeypatch)
    parameters = [torch.nn.Parameter(torch.zeros(3))]
    for fused in (True, False):
        adam, adagrad = torch.optim.Adam(parameters), torch.optim.Adagrad(parameters)
        for optimizer in (adam, adagrad):
            script.steps_as_on_a_gpu(optimizer, fused=fused)
        # With the config's fused_optimizer, Adam steps fused, as that callback makes it on CUDA; the
        # rest as PyTorch defaults them on CUDA.
        assert (adam.param_groups[0]["fused"], adam.param_groups[0]["foreach"]) == (
            (True, False) if fused else (None, True)
        )
        assert (adagrad.param_groups[0]["fused"], adagrad.param_groups[0]["foreach"]) == (None, True)


def test_attributes_a_training_steps_calls_to_their_source_lines(monkeypatch):
    monkeypatch.setenv("NERZOO_DATA", "fixtures")
    script = benchmark_script("speed/step_op_counts.py", monkeypatch)
    plain = script.count("bilstm_crf", steps=1, batch_size=4)
    row = script.count("bilstm_crf", steps=1, batch_size=4, by_source=200)
    assert row["training_step"] == plain["training_step"]  # attributing counts the same calls
    sources = dict(row["training_step_by_source"])
    assert sum(sources.values()) == row["training_step"]  # every call has a source (200 is all of them)
    assert sources["backward of AccumulateGrad"] > 0  # one per parameter
    assert any(source.startswith("nerzoo/modules/") for source in sources)  # forward lines
    assert any(source.startswith("backward of nerzoo/") for source in sources)  # nodes made by nerzoo lines
