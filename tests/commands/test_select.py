"""
`allennlp select`: the strategies' scores against brute force over every tag sequence of a tiny
CRF, and the real command on the fixture archives (budgets, order, seeds, bad lines, errors,
refusals, and files the readers read back).
"""

import contextlib
import hashlib
import io
import itertools
import json
import sys
from unittest import mock

import numpy
import pytest
import torch
from allennlp.commands import main
from allennlp.data import Vocabulary
from nerzoo_runtime.tag_scheme import tags_to_spans

from nerzoo.commands._selection import (
    choose,
    expected_errors,
    expected_span_count,
    mnlp,
    open_questions,
    opening_tags,
    tie_order,
    token_entropy,
)
from nerzoo.data.dataset_readers.conll_columns import ConllColumnsReader
from nerzoo.modules.crf.linear_chain_crf import LinearChainCrf
from nerzoo.modules.crf.tag_head import TagHead
from tests import FIXTURES_ROOT, allennlp

CRF_ARCHIVE = FIXTURES_ROOT / "archives" / "bilstm_crf_tiny.tar.gz"
FOFE_ARCHIVE = FIXTURES_ROOT / "archives" / "fofe_ner_tiny.tar.gz"
DEV = "fixtures/conll2003/dev.txt"
LABELS = {"BIOUL": ["O", "B-PER", "I-PER", "L-PER", "U-PER", "U-LOC"], "BIO": ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]}


# ------------------------------------------------------------------------------------------------
# The scores against every tag sequence of a tiny CRF


def _vocab(scheme):
    vocab = Vocabulary()
    for label in LABELS[scheme]:
        vocab.add_token_to_namespace(label, "labels")
    return vocab


def _head(scheme, length=4, seed=0):
    """A TagHead with random scores at temperatures 1.3 / 0.8, its readable output for one sentence, and the
    probability of every tag sequence of that sentence (with its spans) by enumeration."""
    torch.manual_seed(seed)
    head = TagHead(_vocab(scheme), input_dim=3, tag_scheme=scheme, temperature=1.3, transition_temperature=0.8).eval()
    for parameter in (head.crf.transitions, head.crf.start_transitions, head.crf.end_transitions):
        torch.nn.init.normal_(parameter, std=1.5)
    encoded = torch.randn(1, length, 3) * 3
    mask = torch.ones(1, length, dtype=torch.bool)
    with torch.no_grad():
        readable = head.make_output_human_readable(head(encoded, mask))
        logits = head.logits(encoded)[0].double() / float(numpy.float32(1.3))  # as the posteriors divide them
        transitions, start, end = (values.double() for values in head.crf.chain_scores(False, 0.8))
    labels = head.tag_labels()
    allowed = head.crf.allowed_moves()
    sequences, scores = [], []
    for path in itertools.product(range(len(labels)), repeat=length):
        steps = list(zip(path, path[1:]))
        if not (allowed.start[path[0]] and allowed.end[path[-1]] and all(allowed.transitions[a, b] for a, b in steps)):
            continue
        score = start[path[0]] + end[path[-1]] + sum(logits[t, tag] for t, tag in enumerate(path))
        sequences.append(path)
        scores.append(float(score + sum(transitions[a, b] for a, b in steps)))
    probabilities = numpy.exp(numpy.array(scores) - numpy.logaddexp.reduce(scores))
    spans = [set(tags_to_spans([labels[tag] for tag in path])) for path in sequences]
    return head, readable, sequences, probabilities, spans


@pytest.mark.parametrize("scheme", ["BIOUL", "BIO"])
def test_mnlp_is_the_predicted_sequences_log_probability_over_its_length(scheme):
    head, readable, sequences, probabilities, _ = _head(scheme)
    predicted = tuple(head.tag_labels().index(tag) for tag in readable["tags"][0])
    expected = -numpy.log(probabilities[sequences.index(predicted)]) / 4
    assert mnlp(float(readable["sequence_log_probabilities"][0]), 4) == pytest.approx(expected, rel=1e-9)
    # The product of the path's marginals is not its probability.
    assert numpy.log(readable["tag_confidences"][0]).sum() != pytest.approx(-4 * expected, rel=1e-3)


@pytest.mark.parametrize("scheme", ["BIOUL", "BIO"])
def test_token_entropy_is_the_mean_entropy_of_the_enumerated_marginals(scheme):
    head, readable, sequences, probabilities, _ = _head(scheme)
    marginals = numpy.zeros((4, len(head.tag_labels())))
    for path, probability in zip(sequences, probabilities):
        marginals[range(4), path] += probability
    entropy = -(marginals * numpy.log(numpy.where(marginals > 0, marginals, 1))).sum(axis=1).mean()
    assert token_entropy(readable["tag_probabilities"][0].numpy()) == pytest.approx(entropy, rel=1e-9)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_expected_errors_are_the_enumerated_expected_span_errors_in_bioul(seed):
    head, readable, _, probabilities, spans = _head("BIOUL", seed=seed)
    predicted = {(span["label"], span["start"], span["end"]) for span in readable["spans"][0]}
    errors = sum(p * len(predicted ^ gold) for p, gold in zip(probabilities, spans))
    opens = opening_tags(head.tag_labels(), head.crf.allowed_moves())
    count = expected_span_count(readable["tag_probabilities"][0].numpy(), opens)
    confidences = [span["confidence"] for span in readable["spans"][0]]
    assert expected_errors(count, confidences) == pytest.approx(errors, rel=1e-9)


@pytest.mark.parametrize("scheme", ["BIOUL", "BIO"])
def test_the_expected_number_of_spans_is_the_enumerated_one(scheme):
    head, readable, _, probabilities, spans = _head(scheme)
    opens = opening_tags(head.tag_labels(), head.crf.allowed_moves())
    expected = sum(p * len(gold) for p, gold in zip(probabilities, spans))
    assert expected_span_count(readable["tag_probabilities"][0].numpy(), opens) == pytest.approx(expected, rel=1e-9)


def test_the_sequence_log_probability_of_a_document_adds_up_its_sentences_chains():
    torch.manual_seed(0)
    head = TagHead(_vocab("BIOUL"), input_dim=3, crf_per_sentence=True).eval()
    encoded, mask = torch.randn(1, 5, 3), torch.ones(1, 5, dtype=torch.bool)
    sentences = [(0, 2), (2, 5)]
    with torch.no_grad():
        document = head.make_output_human_readable(head(encoded, mask, metadata=[{"sentence_spans": sentences}]))
        alone = [
            head.make_output_human_readable(head(encoded[:, start:end], mask[:, start:end])) for start, end in sentences
        ]
    expected = sum(float(output["sequence_log_probabilities"][0]) for output in alone)
    assert float(document["sequence_log_probabilities"][0]) == pytest.approx(expected, rel=1e-9)


def test_a_chain_where_spans_open_by_the_previous_tag_has_no_opening_tags():
    labels = dict(enumerate(LABELS["BIO"]))
    assert opening_tags(LABELS["BIO"], LinearChainCrf.for_labels(labels, None).allowed_moves()) is None
    assert opening_tags(LABELS["BIO"], LinearChainCrf.for_labels(labels, "IOB1").allowed_moves()) is None
    assert opening_tags(LABELS["BIO"], LinearChainCrf.for_labels(labels, "BIO").allowed_moves()) == [
        False,
        True,
        False,
        True,
        False,
    ]


def test_choose_follows_the_scores_within_the_budget_and_breaks_ties_by_the_seed():
    scores, costs = [0.5, 2.0, 1.0, 1.0, 3.0], [4, 3, 2, 2, 0]
    assert choose(scores, costs, 7, seed=0) in ([1, 2, 3], [1, 3, 2])  # the item of cost 0 never
    assert choose(scores, costs, 5, seed=0) == choose(scores, costs, 6, seed=0)[:2]
    ties = [choose([0.0] * 6, [1] * 6, 6, seed) for seed in range(5)]
    assert ties[0] == choose([0.0] * 6, [1] * 6, 6, 0) and len({tuple(order) for order in ties}) > 1
    assert ties[0] == numpy.argsort(tie_order(6, 0)).tolist()
    assert choose([1.0, 0.0], [5, 1], 4, seed=0) == []  # the first alone is past the budget


def test_open_questions_widen_to_whole_predicted_spans():
    confidences = [0.99, 0.99, 0.5, 0.99, 0.99, 0.7]
    assert open_questions(confidences, [(1, 4), (4, 5)], 0.9) == [False, True, True, True, False, True]
    assert open_questions(confidences, [(0, 6), (2, 3)], 0.6) == [True] * 6


# ------------------------------------------------------------------------------------------------
# The command


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    """The dev sentences as `{"tokens": [...]}` lines."""
    sentences = [instance["metadata"]["words"] for instance in ConllColumnsReader(tag_column=3).read(DEV)]
    path = tmp_path_factory.mktemp("pool") / "pool.jsonl"
    path.write_text("".join(json.dumps({"tokens": words}) + "\n" for words in sentences))
    return path


def _select(archive, pool, output, *options, check=True):
    """`allennlp select` run by allennlp's own `main` in this process (a new process takes seconds to start): the
    written records (JSON lines), or with `check=False` the exit status and stderr."""
    stderr = io.StringIO()
    argv = ["allennlp", "select", str(archive), str(pool), "--output", str(output), *map(str, options)]
    with (
        mock.patch.object(sys, "argv", argv),
        contextlib.redirect_stderr(stderr),
        contextlib.redirect_stdout(io.StringIO()),
    ):
        try:
            main(prog="allennlp")
            status = 0
        except SystemExit as exit:  # as the interpreter reports it
            status = exit.code if isinstance(exit.code, int) else 1
            print(exit.code, file=sys.stderr)
    if not check:
        return status, stderr.getvalue()
    assert status == 0, stderr.getvalue()
    return [json.loads(line) for line in output.read_text().splitlines()] if output.suffix == ".jsonl" else None


def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("strategy", ["expected_errors", "mnlp", "token_entropy", "random"])
def test_each_strategy_orders_the_pool_and_fills_the_budget_without_passing_it(strategy, pool, tmp_path):
    before = _digest(CRF_ARCHIVE)
    everything = _select(CRF_ARCHIVE, pool, tmp_path / "all.jsonl", "--strategy", strategy, "--budget", "100000")
    assert len(everything) == len(pool.read_text().splitlines())
    scores = [record["score"] for record in everything]
    assert scores == sorted(scores, reverse=True)
    assert (max(scores) > 0) == (strategy != "random")
    words = numpy.cumsum([len(record["tokens"]) for record in everything])
    chosen = _select(CRF_ARCHIVE, pool, tmp_path / "some.jsonl", "--strategy", strategy, "--budget", "40")
    assert chosen == everything[: int((words <= 40).sum())] and words[len(chosen)] > 40
    assert _digest(CRF_ARCHIVE) == before
    record = chosen[0]
    assert set(record) == {"source", "score", "tokens", "tags", "spans", "uncertain"}
    assert {(span["label"], span["start"], span["end"]) for span in record["spans"]} == set(
        tags_to_spans(record["tags"])
    )


def test_the_default_strategy_for_a_crf_is_mnlp(pool, tmp_path):
    default = _select(CRF_ARCHIVE, pool, tmp_path / "default.jsonl", "--budget", "40")
    assert default == _select(CRF_ARCHIVE, pool, tmp_path / "mnlp.jsonl", "--budget", "40", "--strategy", "mnlp")


def test_random_is_reproducible_by_its_seed_and_counts_sentences(pool, tmp_path):
    options = ["--strategy", "random", "--budget", "5", "--unit", "sentences"]
    runs = [
        _select(CRF_ARCHIVE, pool, tmp_path / f"{run}.jsonl", *options, "--seed", seed)
        for run, seed in enumerate([3, 3, 4])
    ]
    assert runs[0] == runs[1] and runs[0] != runs[2] and len(runs[0]) == 5


def test_bad_lines_are_reported_by_line_and_the_rest_is_selected(tmp_path):
    pool = tmp_path / "pool.jsonl"
    good = ["Anna", "Keller", "met", "Karl", "."]
    lines = ["not json", '{"words": ["a"]}', '{"tokens": []}', "", json.dumps({"tokens": good}), '["a"]']
    pool.write_text("\n".join(lines) + "\n")
    # The real command, in a new process.
    command = ["select", CRF_ARCHIVE, pool, "--output", tmp_path / "out.jsonl", "--budget", "50"]
    result = allennlp(*command, "--include-package", "nerzoo")
    for number in (1, 2, 3, 6):
        assert f"{pool}:{number}: " in result.stderr
    (record,) = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert record["source"] == f"{pool}:5" and record["tokens"] == good


@pytest.mark.parametrize(
    "lines, options, message",
    [
        (["not json"], ["--budget", "10"], "the pool has no sentence to select from"),
        ([json.dumps({"tokens": ["a", "b"]})], ["--budget", "0"], "--budget must be at least 1 word, got 0"),
    ],
)
def test_an_empty_pool_and_a_budget_of_0_are_one_line_errors(lines, options, message, tmp_path):
    pool = tmp_path / "pool.jsonl"
    pool.write_text("\n".join(lines) + "\n")
    status, stderr = _select(CRF_ARCHIVE, pool, tmp_path / "out.jsonl", *options, check=False)
    last = stderr.strip().splitlines()[-1]
    assert status != 0 and last.startswith("error: ") and last.endswith(message)
    assert not list(tmp_path.glob("out.jsonl*"))


def test_conll_output_reads_back_with_the_same_tokens_and_spans(pool, tmp_path):
    records = _select(CRF_ARCHIVE, pool, tmp_path / "out.jsonl", "--budget", "60")
    _select(CRF_ARCHIVE, pool, tmp_path / "out.conll", "--budget", "60", "--output-format", "conll")
    instances = list(ConllColumnsReader(file_tag_scheme="BIO", tag_scheme="BIO").read(tmp_path / "out.conll"))
    assert [instance["metadata"]["words"] for instance in instances] == [record["tokens"] for record in records]
    for instance, record in zip(instances, records):
        spans = {(span["label"], span["start"], span["end"]) for span in record["spans"]}
        assert set(tags_to_spans(instance["tags"].labels)) == spans and not instance["metadata"].metadata.get("partial")


def test_partial_output_asks_about_the_uncertain_stretches_and_reads_back_as_partial(tmp_path):
    options = ["--use-dataset-reader", "--budget", "30", "--partial", "0.95"]
    records = _select(CRF_ARCHIVE, DEV, tmp_path / "out.jsonl", *options)
    _select(CRF_ARCHIVE, DEV, tmp_path / "out.conll", *options, "--output-format", "conll")
    assert sum(tag != "-" for record in records for tag in record["tags"]) <= 30
    for record in records:
        assert record["source"].startswith("dev.txt:") and record["uncertain"]
        assert all(record["tags"][index] != "-" for index in record["uncertain"])
        # A marked token is uncertain, or in a predicted span with an uncertain token; no span is cut.
        for index in (index for index, tag in enumerate(record["tags"]) if tag != "-"):
            around = [
                range(span["start"], span["end"])
                for span in record["spans"]
                if index in range(span["start"], span["end"])
            ]
            assert index in record["uncertain"] or set(record["uncertain"]) & set(around[0])
        for span in record["spans"]:
            assert "-" not in record["tags"][span["start"] : span["end"]]
    reader = ConllColumnsReader(file_tag_scheme="BIO", tag_scheme="BIO")
    instances = list(reader.read(tmp_path / "out.conll"))
    assert [instance["metadata"]["words"] for instance in instances] == [record["tokens"] for record in records]
    assert all(
        instance["metadata"].metadata.get("partial", False) == ("-" in record["tags"])
        for instance, record in zip(instances, records)
    )
    assert any(instance["metadata"].metadata.get("partial") for instance in instances)


def test_fofe_ner_scores_expected_errors_by_default_and_refuses_tag_marginals_by_name(pool, tmp_path):
    default = _select(FOFE_ARCHIVE, pool, tmp_path / "out.jsonl", "--budget", "30")
    options = ["--budget", "30", "--strategy", "expected_errors"]
    assert default and default == _select(FOFE_ARCHIVE, pool, tmp_path / "errors.jsonl", *options)
    status, stderr = _select(
        FOFE_ARCHIVE, pool, tmp_path / "no.jsonl", "--budget", "9", "--strategy", "mnlp", check=False
    )
    assert status != 0 and "error: select: fofe_ner cannot score --strategy mnlp: it gives no probability" in stderr
    status, stderr = _select(
        FOFE_ARCHIVE, pool, tmp_path / "no.jsonl", "--budget", "9", "--strategy", "token_entropy", check=False
    )
    assert "fofe_ner cannot score --strategy token_entropy: it gives no tag marginals" in stderr


@pytest.fixture(scope="module")
def small_archives(tmp_path_factory):
    """seq2biseq and me_crf trained for one epoch on the test sentences."""
    from allennlp.commands.train import train_model_from_file

    directory = tmp_path_factory.mktemp("archives")
    overrides = {
        "trainer.num_epochs": 1,
        "train_data_path": "fixtures/conll2003/test.txt",
        "validation_data_path": None,
    }
    archives = {}
    for name, extra in (("seq2biseq", {"trainer.validation_metric": "-loss"}), ("me_crf", {})):
        config = FIXTURES_ROOT / "experiments" / f"{name}_tiny.jsonnet"
        train_model_from_file(str(config), str(directory / name), overrides=json.dumps({**overrides, **extra}))
        archives[name] = directory / name / "model.tar.gz"
    return archives


def test_seq2biseq_defaults_to_token_entropy_and_refuses_mnlp_and_me_crf_is_refused(small_archives, pool, tmp_path):
    seq2biseq = small_archives["seq2biseq"]
    entropy = _select(seq2biseq, pool, tmp_path / "out.jsonl", "--budget", "30", "--strategy", "token_entropy")
    assert entropy and entropy == _select(seq2biseq, pool, tmp_path / "default.jsonl", "--budget", "30")
    status, stderr = _select(
        seq2biseq, pool, tmp_path / "no.jsonl", "--budget", "30", "--strategy", "mnlp", check=False
    )
    assert status != 0 and "select: seq2biseq cannot score --strategy mnlp" in stderr
    assert "it can score token_entropy, random" in stderr
    status, stderr = _select(small_archives["me_crf"], pool, tmp_path / "no.jsonl", "--budget", "30", check=False)
    assert status != 0 and "error: select does not support me_crf: " in stderr
