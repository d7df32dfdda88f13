"""The thread discourse model (ME-CRF+, Liu, Baldwin & Cohn 2017, §4) through the real `allennlp` CLI."""

import json

import pytest

from tests import FIXTURES_ROOT, allennlp

pytestmark = pytest.mark.end_to_end

CONFIG = "training_config/me_crf_thread_discourse.jsonnet"
TEST = FIXTURES_ROOT / "thread_discourse" / "test.jsonl"


def test_train_evaluate_predict_threads(tmp_path):
    run = tmp_path / "run"
    # The shipped config as it is: ME-CRF+, 50 epochs (one batch each on the 24 fixture threads).
    allennlp("train", CONFIG, "-s", run, "--include-package", "nerzoo")
    metrics = json.loads((run / "metrics.json").read_text())
    # Well above chance (uniform links: 0.39 on test; always the previous post: 0.46; the most
    # frequent DA: 0.19).
    assert metrics["best_validation_link_f1"] > 0.6 and metrics["best_validation_da_f1"] > 0.5, metrics

    evaluated_file = tmp_path / "evaluation.json"
    allennlp("evaluate", run / "model.tar.gz", TEST, "--output-file", evaluated_file, "--include-package", "nerzoo")
    evaluated = json.loads(evaluated_file.read_text())
    for name in ("link_f1", "da_f1", "joint_f1"):
        assert evaluated[name] == pytest.approx(metrics[f"test_{name}"], abs=1e-9)
    assert evaluated["link_f1"] > 0.5 and evaluated["da_f1"] > 0.4 and evaluated["joint_f1"] > 0.2, evaluated

    threads = [json.loads(line) for line in TEST.read_text().splitlines() if line.strip()]
    unlabelled = [
        {
            "thread_id": thread["thread_id"],
            "posts": [
                {key: value for key, value in post.items() if key not in ("links", "dialogue_acts")}
                for post in thread["posts"]
            ],
        }
        for thread in threads
    ]
    inputs = tmp_path / "threads.jsonl"
    inputs.write_text("".join(json.dumps(thread) + "\n" for thread in unlabelled))
    output = tmp_path / "predictions.jsonl"
    allennlp(
        "predict",
        run / "model.tar.gz",
        inputs,
        "--predictor",
        "thread_discourse",
        "--output-file",
        output,
        "--batch-size",
        3,
        "--silent",
        "--predictor-args",
        json.dumps({"return_attention": True}),
        "--include-package",
        "nerzoo",
    )
    predictions = [json.loads(line) for line in output.read_text().splitlines()]
    assert len(predictions) == len(threads)
    vocabulary = set((run / "vocabulary" / "labels.txt").read_text().split("\n")) - {""}
    for prediction, thread in zip(predictions, threads):
        assert prediction["thread_id"] == thread["thread_id"]
        assert len(prediction["posts"]) == len(thread["posts"])
        for entry, post in zip(prediction["posts"], thread["posts"]):
            assert entry["title"] == post["title"]
            assert 0 <= entry["link"] < entry["post"]
            assert len(entry["link_probabilities"]) == entry["post"]
            assert entry["dialogue_act"] in vocabulary
            assert len(entry["memory_attention"]) == 1  # one hop
    # The predictor's links are the model's: as good as evaluate says on the most recent links.
    correct = sum(
        entry["link"] in post["links"]
        for prediction, thread in zip(predictions, threads)
        for entry, post in zip(prediction["posts"], thread["posts"])
    )
    assert correct / sum(len(thread["posts"]) for thread in threads) == pytest.approx(
        evaluated["link_precision"], abs=1e-9
    )

    # The memory attention of a thread as a picture: rows are posts, column 0 the virtual head.
    picture = tmp_path / "thread_memory.png"
    allennlp(
        "draw-memory", run / "model.tar.gz", TEST, "--output", picture, "--index", 2, "--include-package", "nerzoo"
    )
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and picture.stat().st_size > 5000

    # A model `allennlp export` cannot export: one error naming what it lacks, nothing written.
    refused = allennlp("export", run / "model.tar.gz", tmp_path / "export", "--include-package", "nerzoo", check=False)
    assert refused.returncode != 0 and not (tmp_path / "export").exists()
    lacks = "its threads of posts (title and text encoders, a memory over posts) have no exported form yet"
    assert refused.stderr.strip().splitlines()[-1] == f"error: cannot export this me_crf_thread_discourse: {lacks}"
