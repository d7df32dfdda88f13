"""
`TagDecoder` decodes spans and counts metrics from tag-id tensors; the string-based
`tags_to_spans`, `ConllSpanF1` and `ConceptErrorRate` are the slow obvious references.
"""

import random

import pytest
import torch
from allennlp.data import Vocabulary
from nerzoo_runtime.tag_scheme import tags_to_spans

from nerzoo.metrics.concept_error_rate import ConceptErrorRate
from nerzoo.metrics.conll_span_f1 import ConllSpanF1
from nerzoo.modules.crf.linear_chain_crf import LinearChainCrf
from nerzoo.modules.crf.tag_decoder import TagDecoder
from nerzoo.modules.crf.tag_scorers import CrfScorer, SoftmaxScorer

TYPES = ["LOC", "PER", "MISC"]
# Every prefix of every scheme, E/S spellings and a non-chunk label, so that random sequences
# include the invalid ones a softmax or an unconstrained CRF can produce.
LABELS = ["O"] + [f"{prefix}-{label}" for label in TYPES for prefix in "BILUES"] + ["NOT_A_CHUNK"]


def _vocab(labels=LABELS):
    vocab = Vocabulary()
    for label in labels:
        vocab.add_token_to_namespace(label, "labels")
    return vocab


def _random_batch(seed, batch_size=16, num_steps=12, with_sentences=True):
    rng = random.Random(seed)
    tags = torch.tensor([[rng.randrange(len(LABELS)) for _ in range(num_steps)] for _ in range(batch_size)])
    lengths = [rng.randint(1, num_steps) for _ in range(batch_size)]
    lengths[0] = num_steps
    mask = torch.tensor([[t < length for t in range(num_steps)] for length in lengths])
    sentence_spans = []
    for length in lengths:
        cuts = sorted(rng.sample(range(1, length), k=min(length - 1, rng.randint(0, 3)))) if with_sentences else []
        bounds = [0, *cuts, length]
        sentence_spans.append(list(zip(bounds[:-1], bounds[1:])))
    return tags, mask, lengths, sentence_spans


def _reference_spans(tags, lengths, sentence_spans):
    spans = set()
    for row, (length, sentences) in enumerate(zip(lengths, sentence_spans)):
        labels = [LABELS[tag] for tag in tags[row, :length].tolist()]
        for start, end in sentences:
            spans.update(
                (row, label, begin + start, finish + start) for label, begin, finish in tags_to_spans(labels[start:end])
            )
    return spans


@pytest.mark.parametrize("seed", range(25))
@pytest.mark.parametrize("with_sentences", [True, False])
def test_spans_equal_tags_to_spans_sentence_by_sentence(seed, with_sentences):
    decoder = TagDecoder(_vocab())
    tags, mask, lengths, sentence_spans = _random_batch(seed, with_sentences=with_sentences)
    found = decoder.spans(tags, mask, TagDecoder.sentence_starts(sentence_spans, mask))
    got = {
        (row, decoder.entity_types[label], start, end)
        for row, start, end, label in zip(
            found.rows.tolist(), found.starts.tolist(), found.ends.tolist(), found.types.tolist()
        )
    }
    assert len(got) == len(found.rows)
    assert got == _reference_spans(tags, lengths, sentence_spans)
    # Sorted by row, then start.
    order = (found.rows * 100 + found.starts).tolist()
    assert order == sorted(order)


@pytest.mark.parametrize("scheme_labels", [["O", "B-A", "I-A", "B-B", "I-B"], ["O", "I-A", "B-A", "I-B"]])
def test_spans_for_bio_and_iob1_vocabularies(scheme_labels):
    decoder = TagDecoder(_vocab(scheme_labels), tag_scheme="BIO")
    rng = random.Random(3)
    tags = torch.tensor([[rng.randrange(len(scheme_labels)) for _ in range(10)] for _ in range(50)])
    mask = torch.ones_like(tags, dtype=torch.bool)
    found = decoder.spans(tags, mask)
    got = {
        (row, decoder.entity_types[label], start, end)
        for row, start, end, label in zip(
            found.rows.tolist(), found.starts.tolist(), found.ends.tolist(), found.types.tolist()
        )
    }
    expected = {
        (row, label, start, end)
        for row in range(len(tags))
        for label, start, end in tags_to_spans([scheme_labels[tag] for tag in tags[row].tolist()])
    }
    assert got == expected


@pytest.mark.parametrize("with_concepts", [True, False], ids=["spans listed", "spans counted on the device"])
@pytest.mark.parametrize("seed", range(10))
def test_metrics_equal_the_string_metrics(seed, with_concepts):
    decoder = TagDecoder(_vocab(), verbose_metrics=True, concept_error_rate=with_concepts)
    span_f1 = ConllSpanF1(decoder.entity_types)
    concept_error_rate = ConceptErrorRate("BIOUL")
    for batch in range(3):
        gold, mask, lengths, sentence_spans = _random_batch(seed * 10 + batch)
        predicted = gold.clone()
        # Perturb about a third of the tokens so that predictions are partly right.
        flips = torch.rand(gold.shape, generator=torch.Generator().manual_seed(seed + batch)) < 0.3
        predicted[flips] = torch.randint(len(LABELS), (int(flips.sum()),))
        decoder.update_metrics(predicted, gold, mask, TagDecoder.sentence_starts(sentence_spans, mask))

        # The references, sentence by sentence on strings; non-chunk labels read as O.
        def sentences(tags, sentence_spans=sentence_spans):
            rows = []
            for row, spans in enumerate(sentence_spans):
                labels = [LABELS[tag] if LABELS[tag] != "NOT_A_CHUNK" else "O" for tag in tags[row].tolist()]
                rows.extend(labels[start:end] for start, end in spans)
            return rows

        span_f1(sentences(predicted), sentences(gold))
        concept_error_rate(sentences(predicted), sentences(gold))
    metrics = decoder.get_metrics(reset=True)
    expected = span_f1.get_metric(reset=True)
    assert {key: metrics[key] for key in expected} == expected
    if with_concepts:
        assert metrics["concept_error_rate"] == concept_error_rate.get_metric()["concept_error_rate"]
    assert 0.0 < metrics["accuracy"] < 1.0


@pytest.mark.parametrize("seed", range(10))
def test_span_counts_on_the_device_equal_the_listed_spans_counts(seed):
    decoder = TagDecoder(_vocab())
    gold, mask, _, sentence_spans = _random_batch(seed)
    predicted = torch.where(torch.rand(gold.shape) < 0.3, torch.randint(len(LABELS), gold.shape), gold)
    sentence_starts = TagDecoder.sentence_starts(sentence_spans, mask)
    expected = decoder.span_counts(*decoder.match(predicted, gold, mask, sentence_starts))
    assert torch.equal(decoder.dense_span_counts(predicted, gold, mask, sentence_starts), expected)
    assert expected[:, 0].sum() > 0 and expected[:, 1:].sum() > 0


def test_accuracy_counts_only_unmasked_tokens():
    decoder = TagDecoder(_vocab(["O", "U-A"]))
    gold = torch.tensor([[0, 1, 1], [1, 0, 0]])
    predicted = torch.tensor([[0, 1, 0], [0, 1, 1]])
    mask = torch.tensor([[True, True, False], [True, False, False]])
    decoder.update_metrics(predicted, gold, mask)
    assert decoder.get_metrics()["accuracy"] == pytest.approx(2 / 3)


@pytest.mark.parametrize("use_crf", [True, False])
def test_readable_spans_and_confidences_equal_the_per_span_reference(use_crf):
    labels = ["O", "B-PER", "I-PER", "L-PER", "U-PER", "U-LOC"]
    vocab = _vocab(labels)
    decoder = TagDecoder(vocab)
    torch.manual_seed(0)
    index_to_label = dict(enumerate(labels))
    scorer = CrfScorer(LinearChainCrf.for_labels(index_to_label)) if use_crf else SoftmaxScorer()
    logits = torch.randn(4, 9, len(labels)) * 2
    lengths = [9, 5, 1, 7]
    mask = torch.tensor([[t < length for t in range(9)] for length in lengths])
    paths = scorer.decode(logits, mask)
    predicted = [row[:length] for row, length in zip(paths.tolist(), lengths)]
    sentence_spans = [[(0, 4), (4, 9)], [(0, 5)], [(0, 1)], [(0, 2), (2, 7)]]
    output = {"logits": logits, "mask": mask, "tags": predicted, "sentence_spans": sentence_spans}
    readable = decoder.make_output_human_readable(output, paths, scorer.posteriors(logits, mask, paths))

    if use_crf:
        with torch.no_grad():
            passes = scorer.crf.forward_backward(logits.double(), mask)
        transitions = passes.scores.transitions

        def segment(row, start, end):
            """alpha_s + the path's scores inside + beta_e - log Z, one step at a time."""
            path, scores = paths[row].tolist(), logits[row].double()
            inside = sum(transitions[path[t - 1], path[t]] + scores[t, path[t]] for t in range(start + 1, end))
            outside = passes.log_alpha[row, start, path[start]] + passes.log_beta[row, end - 1, path[end - 1]]
            return float(outside + inside - passes.log_partition[row])
    else:
        log_softmax = torch.log_softmax(logits, dim=-1).double()

        def segment(row, start, end):
            return float(sum(log_softmax[row, t, paths[row, t]] for t in range(start, end)))

    assert readable["tags"] == [[labels[tag] for tag in path] for path in predicted]
    for row, (path, spans) in enumerate(zip(predicted, readable["spans"])):
        expected = []
        for start, end in sentence_spans[row]:
            for label, begin, finish in tags_to_spans([labels[tag] for tag in path[start:end]]):
                expected.append((label, begin + start, finish + start))
        assert [(span["label"], span["start"], span["end"]) for span in spans] == expected
        for span in spans:
            wanted = min(segment(row, span["start"], span["end"]), 0.0)
            assert span["confidence"] == pytest.approx(torch.tensor(wanted).exp().item(), rel=1e-4)
        assert len(readable["tag_confidences"][row]) == len(path)
    assert any(readable["spans"])
