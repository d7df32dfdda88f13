import functools
import random

import pytest
from nerzoo_runtime.tag_scheme import convert_tags, split_tag
from seqeval.metrics import classification_report, f1_score, precision_score, recall_score

from nerzoo.data.dataset_readers.conll_columns import ConllColumnsReader
from nerzoo.metrics.conll_span_f1 import ConllSpanF1
from tests import FIXTURES_ROOT, SHARED_DATA
from tests.distributed import metric_in_two_processes


def test_hand_worked_counts():
    metric = ConllSpanF1(["LOC", "PER"])
    metric(
        [["B-PER", "L-PER", "O", "U-LOC"], ["U-PER", "O"]],
        [["B-PER", "L-PER", "O", "O"], ["B-PER", "L-PER"]],
    )
    # PER: one exact match, one wrong boundary (1 fp + 1 fn); LOC: one spurious.
    assert metric.counts == {"LOC": {"tp": 0, "fp": 1, "fn": 0}, "PER": {"tp": 1, "fp": 1, "fn": 1}}
    scores = metric.get_metric(reset=True)
    assert scores["precision-overall"] == pytest.approx(1 / 3)
    assert scores["recall-overall"] == pytest.approx(1 / 2)
    assert scores["f1-measure-overall"] == pytest.approx(2 * (1 / 3) * (1 / 2) / (1 / 3 + 1 / 2))
    assert scores["f1-measure-LOC"] == 0.0
    assert metric.get_metric()["f1-measure-overall"] == 0.0


def test_unknown_type_is_an_error():
    with pytest.raises(ValueError, match="'ORG' is not among"):
        ConllSpanF1(["PER"])([["U-ORG"]], [["O"]])


def _corrupt(tags, rng):
    """Realistic tagger errors, including ill-formed sequences that conlleval reads leniently."""
    tags = list(tags)
    types = ["PER", "LOC", "ORG", "MISC"]
    for index in range(len(tags)):
        roll = rng.random()
        if roll < 0.04:
            tags[index] = "O"
        elif roll < 0.08:
            tags[index] = "I-" + rng.choice(types)
        elif roll < 0.10:
            tags[index] = "B-" + rng.choice(types)
        elif roll < 0.12 and tags[index] != "O":
            tags[index] = split_tag(tags[index])[0] + "-" + rng.choice(types)
    return tags


def _sentences():
    path = SHARED_DATA / "conll2003" / "eng.testa"
    if not path.exists():
        path = FIXTURES_ROOT / "conll2003" / "dev.txt"
    reader = ConllColumnsReader(tag_column=3, tag_scheme="BIO")
    return [instance["tags"].labels for instance in reader.read(path)]


@pytest.mark.parametrize("scheme", ["BIO", "IOB1"])
def test_agrees_with_seqeval(scheme):
    rng = random.Random(7)
    gold = [convert_tags(tags, scheme) for tags in _sentences()]
    predicted = [_corrupt(tags, rng) for tags in gold]
    metric = ConllSpanF1(["PER", "LOC", "ORG", "MISC"])
    metric(predicted, gold)
    ours = metric.get_metric()
    assert ours["f1-measure-overall"] == pytest.approx(f1_score(gold, predicted), abs=1e-12)
    assert ours["precision-overall"] == pytest.approx(precision_score(gold, predicted), abs=1e-12)
    assert ours["recall-overall"] == pytest.approx(recall_score(gold, predicted), abs=1e-12)
    report = classification_report(gold, predicted, output_dict=True)
    for label in ("PER", "LOC", "ORG", "MISC"):
        assert ours[f"f1-measure-{label}"] == pytest.approx(report[label]["f1-score"], abs=1e-12)
    assert 0.3 < ours["f1-measure-overall"] < 0.95  # the corruption really changed things


def test_distributed_counts_aggregate_exactly(tmp_path):
    rng = random.Random(3)
    gold = _sentences()[:400]
    predicted = [_corrupt(tags, rng) for tags in gold]
    single = ConllSpanF1(["PER", "LOC", "ORG", "MISC"])
    single(predicted, gold)
    expected = single.get_metric()

    results = metric_in_two_processes(
        functools.partial(ConllSpanF1, ["PER", "LOC", "ORG", "MISC"]), (predicted, gold), tmp_path / "init"
    )
    assert results[0] == expected and results[1] == expected


def test_model_metric_agrees_with_seqeval_on_real_predictions(trained_archive):
    from allennlp.models.archival import load_archive

    archive = load_archive(str(trained_archive))
    model, reader = archive.model, archive.validation_dataset_reader
    instances = list(reader.read(FIXTURES_ROOT / "conll2003" / "test.txt"))
    model.get_metrics(reset=True)
    outputs = model.forward_on_instances(instances)
    ours = model.get_metrics(reset=True)["f1-measure-overall"]
    predicted = [convert_tags(output["tags"], "BIO") for output in outputs]
    gold = [convert_tags(instance["tags"].labels, "BIO") for instance in instances]
    assert ours == pytest.approx(f1_score(gold, predicted), abs=1e-12)
