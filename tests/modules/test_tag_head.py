"""
`TagHead` with and without its CRF.  Without it the head is the MEMNET baseline of Liu, Baldwin &
Cohn (2017), eq. 13 (https://aclanthology.org/I17-1056): a softmax over the tags at each position.
"""

import math
import random

import pytest
import torch
from allennlp.common import Params
from allennlp.common.checks import ConfigurationError
from allennlp.data import Vocabulary
from allennlp.data.batch import Batch
from allennlp.models import Model
from allennlp.modules import ConditionalRandomField
from nerzoo_runtime.tag_scheme import convert_tags, tags_to_spans

from nerzoo.data.dataset_readers.conll_columns import ConllColumnsReader
from nerzoo.modules.crf.tag_head import TagHead
from tests import FIXTURES_ROOT

TAGS = ["O", "B-PER", "I-PER", "L-PER", "U-PER"]
LENGTHS = [4, 2, 3]


@pytest.fixture
def vocab():
    vocab = Vocabulary()
    for tag in TAGS:
        vocab.add_token_to_namespace(tag, "labels")
    return vocab


def _batch(input_dim=6, num_steps=4):
    torch.manual_seed(0)
    encoded = torch.randn(len(LENGTHS), num_steps, input_dim)
    mask = torch.tensor([[t < length for t in range(num_steps)] for length in LENGTHS])
    tags = torch.randint(len(TAGS), (len(LENGTHS), num_steps))
    return encoded, mask, tags


def _identity_head(vocab, use_crf):
    """A head whose tag scores are its input (one input dimension per tag)."""
    head = TagHead(vocab, input_dim=len(TAGS), use_crf=use_crf).eval()
    torch.nn.init.eye_(head.tag_projection._module.weight)
    torch.nn.init.zeros_(head.tag_projection._module.bias)
    return head


def test_softmax_head_has_no_crf(vocab):
    head = TagHead(vocab, input_dim=6, use_crf=False)
    assert head.crf is None
    assert not any("crf" in name for name, _ in head.named_parameters())
    assert isinstance(TagHead(vocab, input_dim=6).crf, ConditionalRandomField)


def test_softmax_loss_is_summed_cross_entropy_over_unmasked_tokens(vocab):
    head = TagHead(vocab, input_dim=6, use_crf=False)
    encoded, mask, tags = _batch()
    output = head(encoded, mask, tags)
    logits = output["logits"]
    expected = sum(
        torch.nn.functional.cross_entropy(logits[row, :length], tags[row, :length], reduction="sum")
        for row, length in enumerate(LENGTHS)
    )
    assert output["loss"].item() == pytest.approx(expected.item(), rel=1e-6)
    # The same number from the log-softmax by hand: padding contributes nothing.
    log_softmax = torch.log_softmax(logits, dim=-1)
    by_hand = -sum(log_softmax[row, t, tags[row, t]] for row, length in enumerate(LENGTHS) for t in range(length))
    assert output["loss"].item() == pytest.approx(by_hand.item(), rel=1e-6)
    output["loss"].backward()
    assert head.tag_projection._module.weight.grad.abs().sum() > 0


def test_softmax_predictions_are_the_argmax_and_probabilities_sum_to_one(vocab):
    head = TagHead(vocab, input_dim=6, use_crf=False).eval()
    encoded, mask, tags = _batch()
    output = head(encoded, mask, tags)
    logits = output["logits"]
    assert output["tags"] == [logits[row, :length].argmax(-1).tolist() for row, length in enumerate(LENGTHS)]
    readable = head.make_output_human_readable(output)
    probabilities = readable["tag_probabilities"]
    assert torch.allclose(probabilities.sum(-1)[mask], torch.ones(int(mask.sum())), atol=1e-6)
    assert probabilities[~mask].abs().sum() == 0
    assert torch.allclose(probabilities[mask], torch.softmax(logits, -1)[mask], atol=1e-6)
    for row, length in enumerate(LENGTHS):
        assert readable["tags"][row] == [TAGS[i] for i in logits[row, :length].argmax(-1).tolist()]
        best = probabilities[row, :length].max(-1).values.tolist()
        assert readable["tag_confidences"][row] == pytest.approx(best, rel=1e-6)


def test_softmax_metrics_count_the_argmax(vocab):
    head = TagHead(vocab, input_dim=6, use_crf=False).eval()
    encoded, mask, tags = _batch()
    output = head(encoded, mask, tags)
    predicted = output["logits"].argmax(-1)
    correct = sum(int((predicted[row, :n] == tags[row, :n]).sum()) for row, n in enumerate(LENGTHS))
    metrics = head.get_metrics(reset=True)
    assert metrics["accuracy"] == pytest.approx(correct / sum(LENGTHS))
    assert "f1-measure-overall" in metrics


def test_softmax_head_decodes_spans_from_invalid_sequences(vocab):
    """`O I-PER L-PER B-PER O U-PER L-PER` is no BIOUL sequence; the argmax may produce it anyway."""
    index = vocab.get_token_to_index_vocabulary("labels")
    wanted = ["O", "I-PER", "L-PER", "B-PER", "O", "U-PER", "L-PER"]
    encoded = torch.full((1, len(wanted), len(TAGS)), -1.0)
    for position, tag in enumerate(wanted):
        encoded[0, position, index[tag]] = 2.0 + position / 10
    mask = torch.ones(1, len(wanted), dtype=torch.bool)

    softmax_head = _identity_head(vocab, use_crf=False)
    output = softmax_head.make_output_human_readable(softmax_head(encoded, mask))
    assert output["tags"] == [wanted]
    # conlleval's lenient rules: I- after O opens a chunk, B- without L- is a one-token chunk,
    # L- after U- opens one.
    assert [(span["label"], span["start"], span["end"]) for span in output["spans"][0]] == [
        ("PER", 1, 3),
        ("PER", 3, 4),
        ("PER", 5, 6),
        ("PER", 6, 7),
    ]
    probabilities = torch.softmax(encoded[0], -1)
    for span in output["spans"][0]:
        product = math.prod(probabilities[t, index[wanted[t]]].item() for t in range(span["start"], span["end"]))
        assert span["confidence"] == pytest.approx(product, rel=1e-5)

    # The constrained CRF, given the same scores and no transitions, decodes a valid sequence.
    crf_head = _identity_head(vocab, use_crf=True)
    with torch.no_grad():
        crf_head.crf.transitions.zero_()
        crf_head.crf.start_transitions.zero_()
        crf_head.crf.end_transitions.zero_()
    crf_tags = crf_head.make_output_human_readable(crf_head(encoded, mask))["tags"][0]
    # A BIOUL sequence is valid iff re-encoding its spans gives it back.
    assert convert_tags(wanted, "BIOUL") != wanted
    assert convert_tags(crf_tags, "BIOUL") == crf_tags


def test_tags_to_spans_tolerates_any_bioul_sequence():
    """Random (mostly invalid) sequences: disjoint, ordered spans of one type covering exactly the non-O tokens."""
    rng = random.Random(0)
    alphabet = ["O"] + [f"{prefix}-{label}" for prefix in "BILU" for label in ("PER", "LOC")]
    for _ in range(500):
        tags = [rng.choice(alphabet) for _ in range(rng.randint(0, 9))]
        spans = tags_to_spans(tags)
        covered = []
        for label, start, end in spans:
            assert start < end
            assert all(tags[t][2:] == label for t in range(start, end))
            covered.extend(range(start, end))
        assert covered == [t for t, tag in enumerate(tags) if tag != "O"]


def test_crf_head_loss_is_the_crf_negative_log_likelihood(vocab):
    head = TagHead(vocab, input_dim=6)
    encoded, mask, tags = _batch()
    output = head(encoded, mask, tags)
    assert output["loss"].item() == pytest.approx(-head.crf(output["logits"], tags, mask).item(), rel=1e-6)
    expected = [path for path, _ in head.crf.viterbi_tags(output["logits"], mask)]
    assert [row[:length] for row, length in zip(output["paths"].tolist(), LENGTHS)] == expected
    # Tag lists are made outside training only.
    assert "tags" not in output and head.eval()(encoded, mask, tags)["tags"] == expected


@pytest.mark.parametrize("use_crf", [True, False])
def test_mean_loss_reduction_averages_over_the_instances(vocab, use_crf):
    torch.manual_seed(3)
    summed = TagHead(vocab, input_dim=6, use_crf=use_crf)
    averaged = TagHead(vocab, input_dim=6, use_crf=use_crf, loss_reduction="mean")
    averaged.load_state_dict(summed.state_dict())
    encoded, mask, tags = _batch()
    total = summed(encoded, mask, tags)["loss"]
    assert averaged(encoded, mask, tags)["loss"].item() == pytest.approx(total.item() / mask.size(0), rel=1e-6)
    with pytest.raises(ConfigurationError, match="loss_reduction"):
        TagHead(vocab, input_dim=6, loss_reduction="token_mean")


def test_crf_with_zero_transitions_has_the_softmax_loss(vocab):
    """With A = 0 (ME-CRF+'s frozen epochs) the CRF likelihood is the independent-softmax one."""
    crf_head = TagHead(vocab, input_dim=6)
    softmax_head = TagHead(vocab, input_dim=6, use_crf=False)
    softmax_head.tag_projection.load_state_dict(crf_head.tag_projection.state_dict())
    with torch.no_grad():
        for parameter in (crf_head.crf.transitions, crf_head.crf.start_transitions, crf_head.crf.end_transitions):
            parameter.zero_()
    encoded, mask, tags = _batch()
    crf_loss = crf_head(encoded, mask, tags)["loss"]
    softmax_loss = softmax_head(encoded, mask, tags)["loss"]
    assert crf_loss.item() == pytest.approx(softmax_loss.item(), rel=1e-5)


def test_bilstm_crf_trains_a_step_with_the_softmax_head():
    import nerzoo.models.bilstm_crf  # noqa: F401  registers "bilstm_crf"

    instances = list(ConllColumnsReader(tag_column=3).read(FIXTURES_ROOT / "conll2003" / "dev.txt"))
    vocab = Vocabulary.from_instances(instances)
    params = Params(
        {
            "type": "bilstm_crf",
            "text_field_embedder": {"token_embedders": {"tokens": {"type": "embedding", "embedding_dim": 6}}},
            "encoder": {"type": "lstm", "input_size": 6, "hidden_size": 4, "bidirectional": True},
            "head": {"use_crf": False},
        }
    )
    model = Model.from_params(vocab=vocab, params=params)
    assert model.head.crf is None
    batch = Batch(instances[:4])
    batch.index_instances(vocab)
    output = model(**batch.as_tensor_dict())
    output["loss"].backward()
    model.eval()
    readable = model.make_output_human_readable(model(**batch.as_tensor_dict()))
    assert [len(tags) for tags in readable["tags"]] == [len(words) for words in readable["words"]]
    assert all(0.0 < span["confidence"] <= 1.0 for spans in readable["spans"] for span in spans)


def _documents():
    """Two documents of 3 and 2 sentences, padded to 9 steps, and their sentence spans."""
    torch.manual_seed(7)
    spans = [[(0, 3), (3, 4), (4, 9)], [(0, 2), (2, 5)]]
    lengths = [9, 5]
    encoded = torch.randn(2, 9, len(TAGS)) * 3
    mask = torch.tensor([[t < length for t in range(9)] for length in lengths])
    tags = torch.randint(len(TAGS), (2, 9)) * mask
    metadata = [{"sentence_spans": document_spans} for document_spans in spans]
    return encoded, mask, tags, metadata


def test_per_sentence_crf_scores_each_sentence_on_its_own(vocab):
    head = TagHead(vocab, input_dim=len(TAGS), crf_per_sentence=True).eval()
    torch.nn.init.normal_(head.crf.transitions, std=2.0)
    torch.nn.init.normal_(head.crf.start_transitions, std=2.0)
    torch.nn.init.normal_(head.crf.end_transitions, std=2.0)
    encoded, mask, tags, metadata = _documents()
    output = head(encoded, mask, tags, metadata)
    readable = head.make_output_human_readable(dict(output))
    # The slow reference: allennlp's CRF on every sentence alone, and the head on a batch of one.
    expected_loss = 0.0
    single = TagHead(vocab, input_dim=len(TAGS)).eval()
    single.load_state_dict(head.state_dict())
    for row, document in enumerate(metadata):
        path = []
        for start, end in document["sentence_spans"]:
            logits = output["logits"][row : row + 1, start:end]
            sentence_mask = torch.ones(1, end - start, dtype=torch.bool)
            expected_loss -= head.crf(logits, tags[row : row + 1, start:end], sentence_mask).item()
            path += head.crf.viterbi_tags(logits, sentence_mask)[0][0]
            alone = single.make_output_human_readable(single(encoded[row : row + 1, start:end], sentence_mask))
            torch.testing.assert_close(readable["tag_probabilities"][row, start:end], alone["tag_probabilities"][0])
            assert readable["tag_confidences"][row][start:end] == pytest.approx(alone["tag_confidences"][0])
            found = {(s["label"], s["start"], s["end"]): s["confidence"] for s in readable["spans"][row]}
            for span in alone["spans"][0]:
                key = (span["label"], span["start"] + start, span["end"] + start)
                assert found[key] == pytest.approx(span["confidence"], rel=1e-5)
        assert output["tags"][row] == path
    assert output["loss"].item() == pytest.approx(expected_loss, rel=1e-5)
    # One chain per document scores differently: the boundaries matter.
    document_head = TagHead(vocab, input_dim=len(TAGS)).eval()
    document_head.load_state_dict(head.state_dict())
    assert document_head(encoded, mask, tags, metadata)["loss"].item() != pytest.approx(expected_loss, rel=1e-3)


def test_per_sentence_crf_equals_the_document_chain_for_one_sentence(vocab):
    head = TagHead(vocab, input_dim=6, crf_per_sentence=True)
    plain = TagHead(vocab, input_dim=6)
    plain.load_state_dict(head.state_dict())
    encoded, mask, tags = _batch()
    a, b = head(encoded, mask, tags), plain(encoded, mask, tags)
    assert torch.equal(a["paths"], b["paths"]) and a["loss"].item() == pytest.approx(b["loss"].item())


def test_the_crf_schedules_give_the_same_loss_paths_and_confidences(vocab):
    encoded, mask, tags = _batch()
    heads = {}
    for schedule in ("steps", "scan"):
        torch.manual_seed(5)
        heads[schedule] = TagHead(vocab, input_dim=6, crf_schedule=schedule).eval()
        assert heads[schedule].crf.schedule == schedule
    outputs = {schedule: head(encoded, mask, tags) for schedule, head in heads.items()}
    readable = {
        schedule: heads[schedule].make_output_human_readable(dict(output)) for schedule, output in outputs.items()
    }
    assert outputs["steps"]["loss"].item() == pytest.approx(outputs["scan"]["loss"].item(), rel=1e-6)
    assert readable["steps"]["tags"] == readable["scan"]["tags"]
    torch.testing.assert_close(readable["steps"]["tag_probabilities"], readable["scan"]["tag_probabilities"])
    with pytest.raises(ConfigurationError, match="crf_schedule"):
        TagHead(vocab, input_dim=6, crf_schedule="parallel")


@pytest.mark.parametrize("crf_per_sentence", [False, True])
def test_a_partial_batch_sums_over_what_the_marks_allow_and_a_whole_one_is_unchanged(vocab, crf_per_sentence):
    head = _identity_head(vocab, use_crf=True).train()
    head.crf_per_sentence = crf_per_sentence
    encoded, mask, tags = _batch(input_dim=len(TAGS))
    spans = [{"sentence_spans": [(0, 2), (2, 4)]}, {"sentence_spans": [(0, 2)]}, {"sentence_spans": [(0, 3)]}]
    whole = head(encoded, mask, tags, spans)["loss"]
    flagged = [dict(instance, partial=True) for instance in spans]
    assert torch.equal(head(encoded, mask, tags, flagged)["loss"], whole)
    opened = tags.clone()
    opened[0, 1:3] = -1  # one open token in each sentence of the first row
    partial = head(encoded, mask, opened, flagged)["loss"]
    # Brute force: minus the log of the probability of every way to fill the open tokens.
    filled = []
    for first in range(len(TAGS)):
        for second in range(len(TAGS)):
            candidate = tags.clone()
            candidate[0, 1], candidate[0, 2] = first, second
            filled.append(-head(encoded, mask, candidate, spans)["loss"])
    torch.testing.assert_close(partial, -torch.logsumexp(torch.stack(filled), 0), rtol=1e-5, atol=1e-4)


def test_cross_estimated_weights_weigh_the_open_tokens_tags(vocab):
    head = _identity_head(vocab, use_crf=True).train()
    encoded, mask, tags = _batch(input_dim=len(TAGS))
    opened = tags.clone()
    opened[0, 1:3] = -1
    metadata = [{"partial": True}, {"partial": True}, {"partial": True}]
    plain = head(encoded, mask, opened, metadata)["loss"]
    # Equal weights on every tag scale each path alike: the loss grows by log K an open token.
    uniform = {tag: 1 / len(TAGS) for tag in TAGS}
    metadata[0]["open_weights"] = [None, uniform, uniform, None]
    torch.testing.assert_close(head(encoded, mask, opened, metadata)["loss"], plain + 2 * math.log(len(TAGS)))
    # All of an open token's weight on one tag: that token as good as marked.
    certain = {TAGS[int(tags[0, 1])]: 1.0}
    metadata[0]["open_weights"] = [None, certain, None, None]
    marked = tags.clone()
    marked[0, 2] = -1
    torch.testing.assert_close(
        head(encoded, mask, opened, metadata)["loss"],
        head(encoded, mask, marked, metadata[:1] + [{}, {}])["loss"],
        rtol=1e-4,
        atol=1e-3,
    )
