import torch

from nerzoo.modules.fofe.second_pass import FirstPassCache, first_pass_entities, run_first_pass
from nerzoo.modules.fofe.spans import enumerate_spans


def _probabilities(starts, ends, span_mask, entities):
    """Span probabilities over NONE and two types: `(start, end, type, probability)` entities, NONE elsewhere."""
    probabilities = torch.zeros(*starts.shape, 3)
    probabilities[..., 0] = 1.0
    for sentence, start, end, label, probability in entities:
        column = ((starts[sentence] == start) & (ends[sentence] == end)).nonzero().item()
        probabilities[sentence, column] = torch.tensor([1 - probability, 0.0, 0.0])
        probabilities[sentence, column, 1 + label] = probability
    return probabilities * span_mask.unsqueeze(-1)


def test_first_pass_entities_are_the_level_one_spans_per_token():
    mask = torch.tensor([[True] * 6, [True] * 3 + [False] * 3])
    starts, ends, span_mask = enumerate_spans(mask, 3)
    # [1, 3) beats the overlapping [2, 4); [4, 5) is under the threshold.
    entities = [(0, 1, 3, 0, 0.9), (0, 2, 4, 1, 0.8), (0, 4, 5, 1, 0.4), (1, 0, 1, 1, 0.7)]
    found = first_pass_entities(_probabilities(starts, ends, span_mask, entities), starts, ends, span_mask, mask, 0.5)
    assert found["in_entity"].tolist() == [[False, True, True, False, False, False], [True] + [False] * 5]
    inside = found["in_entity"]
    assert found["start"][inside].tolist() == [1, 1, 0]
    assert found["end"][inside].tolist() == [3, 3, 1]
    assert found["type"][inside].tolist() == [0, 0, 1]


class FirstPass(torch.nn.Module):
    """Scores every span of up to 2 tokens from its tokens' ids; counts the sentences it reads."""

    def __init__(self):
        super().__init__()
        self.sentences = 0

    def forward(self, tokens):
        ids = tokens["tokens"]["tokens"]
        self.sentences += ids.size(0)
        starts, ends, span_mask = enumerate_spans(ids > 0, 2)
        score = (ids.gather(1, starts) * 7 + ids.gather(1, ends - 1) * 3) % 10 / 10
        probabilities = torch.stack([1 - score, score * 0.6, score * 0.4], dim=-1) * span_mask.unsqueeze(-1)
        return {"class_probabilities": probabilities, "span_starts": starts, "span_ends": ends, "span_mask": span_mask}


def _batch(sentences):
    width = max(len(sentence) for sentence in sentences)
    ids = torch.tensor([sentence + [0] * (width - len(sentence)) for sentence in sentences])
    return {"tokens": {"tokens": ids}}, ids > 0, [[str(i) for i in sentence] for sentence in sentences]


def test_cache_runs_the_first_pass_once_per_sentence_with_the_same_results():
    sentences = [[1, 2, 3], [4, 5], [6, 7, 8, 9], [2, 2]]
    first_pass, cache = FirstPass(), FirstPassCache(10)
    for group in ([0, 1], [1, 2, 3], [3, 0], [0, 1, 2, 3]):
        tokens, mask, words = _batch([sentences[i] for i in group])
        cached = cache.results(first_pass, tokens, mask, words, 0.5)
        direct = run_first_pass(first_pass, tokens, mask, 0.5)
        for name, values in direct[0].items():
            assert torch.equal(cached[0][name][mask], values[mask]), name  # padding is not read
        assert torch.equal(cached[1], direct[1])
        first_pass.sentences -= len(group)  # not the direct run
    assert first_pass.sentences == len(sentences) and len(cache) == len(sentences)


def test_cache_holds_at_most_its_size_and_none_without_words():
    first_pass, cache = FirstPass(), FirstPassCache(2)
    tokens, mask, words = _batch([[1, 2], [3], [4, 5, 6]])
    cache.results(first_pass, tokens, mask, words, 0.5)
    assert len(cache) == 2
    cache.results(first_pass, tokens, mask, None, 0.5)
    assert len(cache) == 2 and first_pass.sentences == 6
    empty = FirstPassCache(0)
    empty.results(first_pass, tokens, mask, words, 0.5)
    assert len(empty) == 0
