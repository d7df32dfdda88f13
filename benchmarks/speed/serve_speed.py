#!/usr/bin/env python
"""
Requests per second and latency of `allennlp serve`, with and without dynamic batching, same run.

    .venv/bin/python benchmarks/speed/serve_speed.py [--archive model.tar.gz] [--data FILE]
        [--clients 1 32] [--requests 640] [--passes 2] [--max-wait-ms 5]

Two servers of the same archive run side by side: one batches the requests that arrive together
(`--max-batch-size 32`), the other runs one request per forward pass (`--max-batch-size 1`).  For
each number of concurrent clients, both are timed alternately over the same `--requests` sentences
(`{"sentence": ...}`, the words of each sentence of `--data` joined by spaces) for `--passes`
passes (the best pass is reported); each client, a keep-alive connection, sends its next request
when its last one is answered.  Every answer is checked
against the answer to the same request sent alone (before the timing): it must be equal.  Then 200
concurrent requests, 10% of them malformed, go to the batching server: every good one must be
answered as alone, every bad one with a 4xx, and the server must stay up.

Without `--archive`, the shipped `training_config/bilstm_crf.jsonnet` is trained for one epoch on
the fixtures (the full-size model; its accuracy does not matter here).  `--data` defaults to
CoNLL-2003 test in ../shared/data, else the fixtures' test file.  The last line is one JSON object.
"""

import argparse
import asyncio
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional, Tuple

import httpx

from nerzoo.server.server_process import ServerProcess

ROOT = pathlib.Path(__file__).resolve().parents[2]
SHARED_TEST = ROOT.parent / "shared" / "data" / "conll2003" / "eng.testb"
MALFORMED = [b"{", b"[]", b'{"sentence": ""}', b'{"tokens": [1, 2]}', b'{"text": "Oslo"}']


def read_sentences(path: str) -> List[str]:
    from nerzoo.data.dataset_readers.conll_columns import ConllColumnsReader

    documents = ConllColumnsReader(file_tag_scheme=None).read_documents(path)
    return [" ".join(row[0] for row in rows) for _, sentences in documents for _, _, rows in sentences]


def train_fixture_archive(directory: pathlib.Path) -> pathlib.Path:
    subprocess.run(
        [sys.executable, "-m", "allennlp", "train", "training_config/bilstm_crf.jsonnet", "-s", str(directory)]
        + ["--include-package", "nerzoo", "-o", json.dumps({"trainer.num_epochs": 1})],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    return directory / "model.tar.gz"


class Answer:
    def __init__(self, status_code: int, body: bytes) -> None:
        self.status_code = status_code
        self.body = body

    def json(self) -> Any:
        return json.loads(self.body)


class Connection:
    """One keep-alive HTTP/1.1 connection: a load generator that costs little CPU (unlike httpx),
    since it shares the machine with the server."""

    def __init__(self, base: str) -> None:
        self.host, port = base.removeprefix("http://").split(":")
        self.port = int(port)
        self.streams: Optional[Tuple[asyncio.StreamReader, asyncio.StreamWriter]] = None

    async def post(self, path: str, body: bytes) -> Answer:
        if self.streams is None:
            self.streams = await asyncio.open_connection(self.host, self.port)
        reader, writer = self.streams
        head = f"POST {path} HTTP/1.1\r\nHost: {self.host}\r\nContent-Type: application/json\r\n"
        writer.write(f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body)
        await writer.drain()
        status = int((await reader.readline()).split()[1])
        length = 0
        while (line := await reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        return Answer(status, await reader.readexactly(length))

    def close(self) -> None:
        if self.streams is not None:
            self.streams[1].close()


async def load(base: str, bodies: List[Any], clients: int) -> Dict[str, Any]:
    """`clients` concurrent clients send `bodies` (dicts, or raw bytes) until none is left."""
    answers: List[Optional[Answer]] = [None] * len(bodies)
    latencies: List[float] = []
    next_index = iter(range(len(bodies)))
    encoded = [body if isinstance(body, bytes) else json.dumps(body).encode() for body in bodies]

    async def client(connection: Connection) -> None:
        for index in next_index:
            started = time.perf_counter()
            answers[index] = await connection.post("/api/models/bilstm_crf/predict", encoded[index])
            latencies.append(time.perf_counter() - started)

    connections = [Connection(base) for _ in range(clients)]
    started = time.perf_counter()
    await asyncio.gather(*(client(connection) for connection in connections))
    seconds = time.perf_counter() - started
    for connection in connections:
        connection.close()
    latencies.sort()
    return {
        "answers": answers,
        "seconds": seconds,
        "requests_per_second": len(bodies) / seconds,
        "p50_ms": 1000 * statistics.median(latencies),
        "p99_ms": 1000 * latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))],
    }


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].strip())
    parser.add_argument("--archive", default=None, help="a bilstm_crf model.tar.gz (default: trained on the fixtures)")
    parser.add_argument("--data", default=None, help="CoNLL column file whose sentences are the requests")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 32])
    parser.add_argument("--requests", type=int, default=640, help="requests per timing (default 640)")
    parser.add_argument("--passes", type=int, default=2)
    parser.add_argument("--max-wait-ms", type=float, default=5.0)
    args = parser.parse_args(argv)
    data = args.data or str(SHARED_TEST if SHARED_TEST.exists() else ROOT / "fixtures" / "conll2003" / "test.txt")
    sentences = read_sentences(data)
    bodies = [{"sentence": sentences[index % len(sentences)]} for index in range(args.requests)]

    with tempfile.TemporaryDirectory(prefix="serve-speed-") as scratch:
        archive = args.archive or str(train_fixture_archive(pathlib.Path(scratch) / "bilstm_crf"))
        servers = [
            ServerProcess(
                [f"bilstm_crf={archive}"], ["--max-batch-size", str(size), "--max-wait-ms", str(args.max_wait_ms)]
            )
            for size in (32, 1)
        ]
        try:
            # The answers to every request sent alone (one client: one request per forward pass),
            # from each server, which also warms both up (spaCy's vocabulary grows on new words).
            alone = asyncio.run(load(servers[1].url, bodies, 1))["answers"]
            expected = [answer.json() for answer in alone]
            warm = asyncio.run(load(servers[0].url, bodies, 1))["answers"]
            mismatches = sum(answer.json() != want for answer, want in zip(warm, expected))
            results: Dict[str, Dict[str, List[Dict[str, float]]]] = {}
            for clients in args.clients:
                for _ in range(args.passes):
                    for server in servers:
                        run = asyncio.run(load(server.url, bodies, clients))
                        mismatches += sum(answer.json() != want for answer, want in zip(run.pop("answers"), expected))
                        name = "batched" if server is servers[0] else "one per forward"
                        results.setdefault(str(clients), {}).setdefault(name, []).append(run)
            malformed = check_malformed(servers[0], bodies, expected)
        finally:
            for server in servers:
                server.stop()

    summary: Dict[str, Any] = {"data": data, "requests": args.requests, "passes": args.passes, "mismatches": mismatches}
    print(f"{'clients':>7}  {'server':<16} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8}")
    for clients, by_server in results.items():
        for name, runs in by_server.items():
            best = max(runs, key=lambda run: run["requests_per_second"])
            summary[f"{clients} clients, {name}"] = {key: round(value, 2) for key, value in best.items()}
            print(
                f"{clients:>7}  {name:<16} {best['requests_per_second']:8.1f} {best['p50_ms']:8.1f} {best['p99_ms']:8.1f}"
            )
        ratio = (
            summary[f"{clients} clients, batched"]["requests_per_second"]
            / summary[f"{clients} clients, one per forward"]["requests_per_second"]
        )
        summary[f"{clients} clients, ratio"] = round(ratio, 2)
        print(f"{clients:>7}  batched / one per forward: {ratio:.2f}x requests per second")
    summary["malformed"] = malformed
    print(f"answers different from the request alone: {mismatches}")
    print(f"200 concurrent, 10% malformed: {json.dumps(malformed)}")
    print(json.dumps(summary))
    return 0 if mismatches == 0 and malformed["ok"] else 1


def check_malformed(server: ServerProcess, bodies: List[Any], expected: List[Any]) -> Dict[str, Any]:
    mixed = [
        MALFORMED[index % len(MALFORMED)] if index % 10 == 3 else bodies[index % len(bodies)] for index in range(200)
    ]
    answers = asyncio.run(load(server.url, mixed, 200))["answers"]
    good = sum(
        answer.status_code == 200 and answer.json() == expected[index % len(expected)]
        for index, answer in enumerate(answers)
        if not isinstance(mixed[index], bytes)
    )
    bad = sum(
        400 <= answer.status_code < 500 for index, answer in enumerate(answers) if isinstance(mixed[index], bytes)
    )
    alive = server.running() and httpx.get(f"{server.url}/api/health").status_code == 200
    return {
        "good_right": good,
        "good": 180,
        "bad_4xx": bad,
        "bad": 20,
        "up": alive,
        "ok": good == 180 and bad == 20 and alive,
    }


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
