#!/usr/bin/env python
"""
Requests per second and latency of `allennlp serve`, with and without dynamic batching, same run.

    .venv/bin/python benchmarks/speed/serve_speed.py [--archive model.tar.gz] [--data FILE]
        [--clients 1 32] [--requests 640] [--passes 2] [--max-wait-ms 5]

How it measures: benchmarks/README.md, "Speed".
"""

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional, Tuple

from nerzoo.server.server_process import ServerProcess

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import harness  # noqa: E402

SERVERS = [("batched", "32"), ("one per forward", "1")]
CONFIG = "training_config/bilstm_crf.jsonnet"


async def post(streams, body: bytes) -> Tuple[int, bytes]:
    """One request on a keep-alive HTTP/1.1 connection: a load generator that costs little CPU
    (unlike httpx), since it shares the machine with the server."""
    reader, writer = streams
    head = "POST /api/models/bilstm_crf/predict HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
    writer.write(f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body)
    status, length = int((await reader.readline()).split()[1]), 0
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode("latin-1").partition(":")
        length = int(value) if name.strip().lower() == "content-length" else length
    return status, await reader.readexactly(length)


async def load(port: int, bodies: List[bytes], clients: int) -> Dict[str, Any]:
    """`clients` concurrent connections send `bodies` until none is left."""
    answers: List[Any] = [None] * len(bodies)
    latencies: List[float] = []
    next_index = iter(range(len(bodies)))

    async def client() -> None:
        streams = await asyncio.open_connection("127.0.0.1", port)
        for index in next_index:
            started = time.perf_counter()
            answers[index] = await post(streams, bodies[index])
            latencies.append(time.perf_counter() - started)
        streams[1].close()

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    seconds = time.perf_counter() - started
    latencies.sort()
    return {
        "answers": answers,
        "requests_per_second": len(bodies) / seconds,
        "p50_ms": 1000 * statistics.median(latencies),
        "p99_ms": 1000 * latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))],
    }


def different(answers: List[Tuple[int, bytes]], expected: List[Any]) -> int:
    return sum(json.loads(body) != want for (_, body), want in zip(answers, expected))


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].strip())
    parser.add_argument("--archive", default=None, help="a bilstm_crf model.tar.gz (default: trained on the fixtures)")
    parser.add_argument("--data", default=None, help="CoNLL column file whose sentences are the requests")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 32])
    parser.add_argument("--requests", type=int, default=640, help="requests per timing (default 640)")
    parser.add_argument("--passes", type=int, default=2)
    parser.add_argument("--max-wait-ms", type=float, default=5.0)
    args = parser.parse_args(argv)
    data = args.data or os.path.join(harness.SHARED_DATA, "conll2003", "eng.testb")
    if not os.path.exists(data):
        data = os.path.join(harness.REPO_ROOT, "fixtures", "conll2003", "test.txt")
    sentences = harness.read_sentences(data)
    bodies = [json.dumps({"sentence": " ".join(sentences[i % len(sentences)])}).encode() for i in range(args.requests)]
    results: Dict[str, List[Dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="serve-speed-") as scratch, contextlib.ExitStack() as stack:
        fixture = os.path.join(scratch, "bilstm_crf")
        archive = args.archive or harness.train_or_exit(CONFIG, fixture, {"trainer.num_epochs": 1})
        options = ["--max-wait-ms", str(args.max_wait_ms), "--max-batch-size"]
        servers: Dict[str, ServerProcess] = {}
        for name, size in SERVERS:
            servers[name] = stack.enter_context(ServerProcess([f"bilstm_crf={archive}"], options + [size]))
        # The answers alone (one client: one request per forward pass), from each server, which
        # also warms both up (spaCy's vocabulary grows on new words).
        alone = [asyncio.run(load(server.port, bodies, 1))["answers"] for server in servers.values()]
        expected = [json.loads(body) for _, body in alone[1]]
        mismatches = different(alone[0], expected)
        for clients in args.clients:
            for _ in range(args.passes):
                for name, server in servers.items():
                    run = asyncio.run(load(server.port, bodies, clients))
                    mismatches += different(run.pop("answers"), expected)
                    results.setdefault(f"{clients} clients, {name}", []).append(run)

    summary: Dict[str, Any] = {"data": data, "requests": args.requests, "passes": args.passes, "mismatches": mismatches}
    for clients in args.clients:
        for name, _ in SERVERS:
            best = max(results[f"{clients} clients, {name}"], key=lambda run: run["requests_per_second"])
            summary[f"{clients} clients, {name}"] = {key: round(value, 2) for key, value in best.items()}
            print(f"{clients:>3} clients, {name:<16} " + ", ".join(f"{k} {v:.1f}" for k, v in best.items()))
        speeds = [summary[f"{clients} clients, {name}"]["requests_per_second"] for name, _ in SERVERS]
        summary[f"{clients} clients, ratio"] = ratio = round(speeds[0] / speeds[1], 2)
        print(f"{clients:>3} clients, batched / one per forward: {ratio:.2f}x requests per second")
    print(f"answers different from the request alone: {mismatches}")
    print(json.dumps(summary))
    return 0 if mismatches == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
