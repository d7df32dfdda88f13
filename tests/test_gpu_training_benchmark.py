"""
benchmarks/speed/gpu_training.py on the CPU on the fixtures, in this process: its rows train and
predict (in batches of each size asked), the `use_amp` rows and (without allennlp-models) `crf_tagger` are skipped with a message,
and the GPU recipe is measured against the recipe's batches, the recipe with `cuda_graphs` against
the recipe.
"""

import importlib.util
import json
import math

from tests import benchmark_script


def test_gpu_training_benchmark_on_the_cpu(monkeypatch, tmp_path):
    script = benchmark_script("speed/gpu_training.py", monkeypatch)
    output = tmp_path / "results.json"
    argv = ["--data", "fixtures", "--device", "cpu", "--epochs", "1", "--max-sentences", "30"]
    argv += ["--rows", "bilstm_crf,bilstm_crf_gpu,crf_tagger,bilstm_crf+cuda_graphs", "--predict-passes", "1"]
    argv += ["--json", str(output)]
    argv += ["--predict-batch-sizes", "4,16"]
    assert script.main(argv) == 0

    results = json.loads(output.read_text())
    assert results["device"].startswith("CPU") and results["torch"]
    assert "first 30 sentences" in results["train_data"]
    rows = {row["row"]: row for row in results["rows"]}
    models = [*script.MODELS[:3], "bilstm_crf+cuda_graphs"]
    assert set(rows) == {f"{model} {precision}" for model in models for precision in script.PRECISIONS}
    for model in ("bilstm_crf", "bilstm_crf_gpu", "bilstm_crf+cuda_graphs"):
        row = rows[f"{model} float32"]
        assert row["status"] == "ok", row
        assert row["train_sentences"] == 30 and len(row["epoch_seconds"]) == 1
        assert row["train_sentences_per_second"] > 0 and row["predict_sentences_per_second"] > 0
        assert row["predict_sentences"] > 0 and math.isfinite(row["train_loss"])
        by_size = row["predict_sentences_per_second_by_batch_size"]
        assert set(by_size) == {"4", "16"} and by_size["4"] == row["predict_sentences_per_second"] and by_size["16"] > 0
        assert rows[f"{model} use_amp"]["status"] == "skipped" and "CUDA" in rows[f"{model} use_amp"]["message"]
    if importlib.util.find_spec("allennlp_models") is None:
        assert rows["crf_tagger float32"]["status"] == "skipped"
        assert "make install-bench" in rows["crf_tagger float32"]["message"]
    else:
        assert rows["crf_tagger float32"]["status"] == "ok"
        assert {ratio["row"] for ratio in results["ratios"] if ratio["against"] == "crf_tagger float32"} == {
            "bilstm_crf float32",
            "bilstm_crf_gpu float32",
            "bilstm_crf+cuda_graphs float32",
        }

    (recipe,) = [ratio for ratio in results["ratios"] if ratio["what"] == "GPU recipe / recipe batches"]
    assert (recipe["row"], recipe["against"]) == ("bilstm_crf_gpu float32", "bilstm_crf float32")
    expected = (
        rows["bilstm_crf_gpu float32"]["train_sentences_per_second"]
        / rows["bilstm_crf float32"]["train_sentences_per_second"]
    )
    assert math.isclose(recipe["train"], expected) and recipe["predict"] > 0

    # On the CPU the callback does nothing: the graphed row is the recipe again.
    (graphed,) = [ratio for ratio in results["ratios"] if ratio["what"] == "cuda_graphs / eager"]
    assert (graphed["row"], graphed["against"]) == ("bilstm_crf+cuda_graphs float32", "bilstm_crf float32")
