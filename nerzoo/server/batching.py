"""
Dynamic batching, as model servers do it: requests that arrive together share one forward pass.

A `DynamicBatcher` takes requests from the event loop (`await batcher.submit(item)`) and hands
them to a blocking `predict_batch` function in batches: the first waiting request opens a batch,
which takes every request already queued and, when the last batch had company (requests are
arriving together), those that come within `max_wait` seconds, up to `max_batch_size`.  While a
batch runs on the worker thread, the next one fills.
"""

import asyncio
import concurrent.futures
import contextlib
import logging
from typing import Any, Callable, List, Optional, Tuple

logger = logging.getLogger(__name__)


class DynamicBatcher:
    """
    # Parameters

    predict_batch : `Callable[[List[Any]], List[Any]]`
        Blocking; one result per item, in order.  Run on `executor`.
    executor : `concurrent.futures.Executor`
        Where the batches run: one worker thread per model keeps its forward passes in sequence.
    max_batch_size : `int`, optional (default = `32`)
    max_wait : `float`, optional (default = `0.005`)
        Seconds a batch waits for more requests after its first one.
    """

    def __init__(
        self,
        predict_batch: Callable[[List[Any]], List[Any]],
        executor: concurrent.futures.Executor,
        max_batch_size: int = 32,
        max_wait: float = 0.005,
    ) -> None:
        if max_batch_size < 1:
            raise ValueError(f"max_batch_size must be at least 1, got {max_batch_size}")
        if max_wait < 0:
            raise ValueError(f"max_wait must be at least 0, got {max_wait}")
        self.predict_batch = predict_batch
        self.executor = executor
        self.max_batch_size = max_batch_size
        self.max_wait = max_wait
        self.batch_sizes: List[int] = []  # of the last 10,000 batches at most, for tests
        self._queue: Optional[asyncio.Queue] = None
        self._worker: Optional[asyncio.Task] = None

    async def submit(self, item: Any) -> Any:
        """The result of `item`, predicted in a batch with the requests that arrive with it."""
        loop = asyncio.get_running_loop()
        if self._worker is None or self._worker.done() or self._worker.get_loop() is not loop:
            self._queue = asyncio.Queue()  # the first request, or the first on a new event loop
            self._worker = loop.create_task(self._run(self._queue))
        future = loop.create_future()
        self._queue.put_nowait((item, future))  # type: ignore[union-attr]
        return await future

    async def close(self) -> None:
        worker, self._worker = self._worker, None
        if worker is not None and worker.get_loop() is asyncio.get_running_loop():
            worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await worker

    async def _next_batch(self, queue: asyncio.Queue) -> List[Tuple[Any, asyncio.Future]]:
        batch = [await queue.get()]
        under_load = bool(self.batch_sizes) and self.batch_sizes[-1] > 1
        deadline = asyncio.get_running_loop().time() + (self.max_wait if under_load else 0.0)
        while len(batch) < self.max_batch_size:
            if not queue.empty():
                batch.append(queue.get_nowait())
                continue
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                break
            try:
                batch.append(await asyncio.wait_for(queue.get(), remaining))
            except asyncio.TimeoutError:
                break
        return batch

    async def _run(self, queue: asyncio.Queue) -> None:
        loop = asyncio.get_running_loop()
        while True:
            batch = await self._next_batch(queue)
            batch = [(item, future) for item, future in batch if not future.cancelled()]  # clients gone
            if not batch:
                continue
            self.batch_sizes.append(len(batch))
            del self.batch_sizes[:-10_000]
            items = [item for item, _ in batch]
            try:
                results = await loop.run_in_executor(self.executor, self.predict_batch, items)
            except Exception:  # noqa: BLE001 - one failing input must not cost the others
                logger.exception("a batch of %d failed; predicting its requests one by one", len(items))
                results = []
                for item in items:
                    try:
                        results.append((await loop.run_in_executor(self.executor, self.predict_batch, [item]))[0])
                    except Exception as error:  # noqa: BLE001
                        results.append(error)
            for (_, future), result in zip(batch, results):
                if future.done():
                    continue
                if isinstance(result, BaseException):
                    future.set_exception(result)
                else:
                    future.set_result(result)
