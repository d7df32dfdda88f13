import pytest
import torch

from nerzoo.modules.fofe.span_character_cnn import SpanCharacterCnn, range_max


def _random_ranges(batch_size: int, length: int, num_queries: int, generator: torch.Generator):
    starts = torch.randint(0, length + 1, (batch_size, num_queries), generator=generator)
    widths = torch.randint(0, 20, (batch_size, num_queries), generator=generator)
    return starts, torch.minimum(starts + widths, torch.tensor(length))


def test_range_max_equals_a_maximum_per_query():
    generator = torch.Generator().manual_seed(0)
    values = torch.rand(3, 37, 5, generator=generator)
    starts, ends = _random_ranges(3, 37, 200, generator)
    result = range_max(values, starts, ends)
    for batch in range(3):
        for query in range(200):
            start, end = int(starts[batch, query]), int(ends[batch, query])
            expected = values[batch, start:end].max(0).values if end > start else torch.zeros(5)
            assert torch.equal(result[batch, query], expected), (start, end)


def test_range_max_passes_gradients_to_the_maxima_only():
    values = torch.tensor([[[0.1], [0.9], [0.3], [0.7]]], requires_grad=True)
    range_max(values, torch.tensor([[0, 2]]), torch.tensor([[3, 4]])).sum().backward()
    assert values.grad.view(-1).tolist() == [0.0, 1.0, 0.0, 1.0]


@pytest.mark.parametrize("kernel_sizes", [(2, 3, 4, 5, 6, 7, 8, 9), (1, 4)])
def test_span_cnn_equals_the_cnn_run_on_each_fragment_alone(kernel_sizes):
    torch.manual_seed(1)
    cnn = SpanCharacterCnn(input_dim=6, num_filters=4, kernel_sizes=kernel_sizes)
    characters = torch.randn(2, 30, 6)
    generator = torch.Generator().manual_seed(2)
    starts, ends = _random_ranges(2, 30, 60, generator)
    result = cnn(characters, starts, ends)
    assert result.shape == (2, 60, 4 * len(kernel_sizes)) == (2, 60, cnn.get_output_dim())
    for batch in range(2):
        for query in range(60):
            start, end = int(starts[batch, query]), int(ends[batch, query])
            fragment = characters[batch, start:end].t().unsqueeze(0)
            expected = []
            for kernel_size, convolution in zip(cnn.kernel_sizes, cnn.convolutions):
                if fragment.size(-1) >= kernel_size:
                    expected.append(torch.relu(convolution(fragment)).max(-1).values.view(-1))
                else:
                    expected.append(torch.zeros(4))
            torch.testing.assert_close(result[batch, query], torch.cat(expected), rtol=1e-5, atol=1e-6)


def test_span_cnn_on_a_sequence_shorter_than_a_kernel():
    cnn = SpanCharacterCnn(input_dim=3, num_filters=2, kernel_sizes=(2, 9))
    result = cnn(torch.randn(1, 4, 3), torch.tensor([[0]]), torch.tensor([[4]]))
    assert result.shape == (1, 1, 4)
    assert torch.equal(result[0, 0, 2:], torch.zeros(2))


def test_range_max_is_the_same_with_and_without_autograd():
    generator = torch.Generator().manual_seed(5)
    values = torch.randint(0, 4, (2, 70, 3), generator=generator).float()  # many ties
    starts = torch.randint(0, 71, (2, 300), generator=generator)
    widths = torch.tensor([0, 1, 2, 3, 4, 7, 8, 9, 16, 31, 32, 33, 64, 70]).repeat(2, 300 // 14 + 1)[:, :300]
    ends = torch.minimum(starts + widths, torch.tensor(70))
    starts[0, 0], ends[0, 0] = 0, 70  # the whole row
    with torch.no_grad():
        buffered = range_max(values, starts, ends)
    tracked = range_max(values.clone().requires_grad_(), starts, ends)
    assert tracked.requires_grad and not buffered.requires_grad
    assert torch.equal(buffered, tracked.detach())
    for batch in range(2):
        for query in range(300):
            start, end = int(starts[batch, query]), int(ends[batch, query])
            expected = values[batch, start:end].max(0).values if end > start else torch.zeros(3)
            assert torch.equal(buffered[batch, query], expected), (start, end)
