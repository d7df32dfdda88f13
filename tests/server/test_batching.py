import asyncio
import concurrent.futures
import threading
import time

import pytest

from nerzoo.server.batching import DynamicBatcher
from nerzoo.server.served_model import length_buckets

pytestmark = pytest.mark.xdist_group("server")


def run(batcher, items, stagger=0.0):
    async def together():
        async def one(index, item):
            await asyncio.sleep(stagger * index)
            try:
                return await batcher.submit(item)
            except Exception as error:  # noqa: BLE001
                return error

        results = await asyncio.gather(*(one(index, item) for index, item in enumerate(items)))
        await batcher.close()
        return results

    return asyncio.run(together())


def doubling(delay=0.0):
    def predict(items):
        time.sleep(delay)
        if "bad" in items:
            raise ValueError("bad input")
        return [item * 2 for item in items]

    return predict


@pytest.fixture
def executor():
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as executor:
        yield executor


def test_every_request_gets_its_own_result_in_batches_of_at_most_the_limit(executor):
    batcher = DynamicBatcher(doubling(0.01), executor, max_batch_size=4, max_wait=0.05)
    assert run(batcher, list(range(10))) == [2 * item for item in range(10)]
    assert sum(batcher.batch_sizes) == 10 and max(batcher.batch_sizes) == 4


def test_one_request_per_forward_pass(executor):
    batcher = DynamicBatcher(doubling(), executor, max_batch_size=1)
    assert run(batcher, list(range(6))) == [2 * item for item in range(6)]
    assert batcher.batch_sizes == [1] * 6


def test_a_lone_request_does_not_wait(executor):
    batcher = DynamicBatcher(doubling(), executor, max_batch_size=32, max_wait=2.0)
    started = time.monotonic()
    assert run(batcher, [1]) == [2]
    assert time.monotonic() - started < 1.0


def test_requests_arriving_during_a_pass_form_the_next_batch(executor):
    gate = threading.Event()

    def predict(items):
        gate.wait(5)
        return [item * 2 for item in items]

    batcher = DynamicBatcher(predict, executor, max_batch_size=32, max_wait=0.0)

    async def scenario():
        first = asyncio.ensure_future(batcher.submit(0))
        await asyncio.sleep(0.05)  # the first pass is running
        rest = [asyncio.ensure_future(batcher.submit(item)) for item in range(1, 6)]
        await asyncio.sleep(0.05)
        gate.set()
        results = await asyncio.gather(first, *rest)
        await batcher.close()
        return results

    assert asyncio.run(scenario()) == [0, 2, 4, 6, 8, 10]
    assert batcher.batch_sizes == [1, 5]


def test_a_failing_batch_is_retried_one_by_one(executor):
    batcher = DynamicBatcher(doubling(0.01), executor, max_batch_size=8, max_wait=0.05)
    results = run(batcher, [1, "bad", 3])
    assert results[0] == 2 and results[2] == 6 and isinstance(results[1], ValueError)


def test_a_new_event_loop_gets_a_new_worker(executor):
    batcher = DynamicBatcher(doubling(), executor)
    assert run(batcher, [1]) == [2]
    assert run(batcher, [2]) == [4]


@pytest.mark.parametrize("arguments", [{"max_batch_size": 0}, {"max_wait": -1.0}])
def test_bad_settings(executor, arguments):
    with pytest.raises(ValueError):
        DynamicBatcher(doubling(), executor, **arguments)


def test_buckets_of_similar_lengths_give_each_input_its_own_answer(served_models):
    model = next(model for model in served_models if model.name == "deptree_ner")
    sentences = [
        " ".join(["Anna", "Keller", "visited", "Oslo"][: 1 + index % 4] + ["."] * (index % 7)) for index in range(23)
    ]
    requests = [({"sentence": text}, (index % 3 == 0, False)) for index, text in enumerate(sentences)]
    requests.append(({"tokens": 3}, (False, False)))
    alone = [model.predict_batch([request])[0] for request in requests]
    model.pass_cost = 3.0  # several buckets
    try:
        assert model.predict_batch(requests) == alone
    finally:
        model.pass_cost = 120.0
    assert "error" in alone[-1] and "relative_attention" in alone[0] and "relative_attention" not in alone[1]


def test_length_buckets_split_where_padding_costs_more_than_a_pass():
    assert length_buckets([], 10.0) == []
    assert length_buckets([5, 5, 5], 10.0) == [(0, 3)]
    assert length_buckets([2, 2, 2, 40, 40], 10.0) == [(0, 3), (3, 5)]  # 10 + 6 + 10 + 80 < 10 + 200
    assert length_buckets([2, 2, 2, 40, 40], 1000.0) == [(0, 5)]
    assert length_buckets([1, 2, 3], 0.0) == [(0, 1), (1, 2), (2, 3)]
