"""
`allennlp serve` in a child process, for scripts, notebooks, tests and benchmarks:

    with ServerProcess(["runs/bilstm_crf/model.tar.gz"]) as server:
        httpx.post(f"{server.url}/api/models/bilstm_crf/predict", json={"sentence": "..."})
"""

import socket
import subprocess
import sys
import time
from typing import List, Optional, Sequence

import httpx


class ServerProcess:
    """
    Starts `allennlp serve ARCHIVES... OPTIONS... --port PORT --include-package nerzoo` and waits
    until `/api/health` answers.

    # Parameters

    archives : `Sequence[str]`, `[NAME=]ARCHIVE` arguments.
    options : `Sequence[str]`, optional, more arguments (`["--max-batch-size", "1"]`).
    port : `int`, optional (default = a free port)
    timeout : `float`, optional (default = `180`), seconds to wait for the models to load.
    cwd : `str`, optional, where the command runs.
    """

    def __init__(
        self,
        archives: Sequence[str],
        options: Sequence[str] = (),
        port: Optional[int] = None,
        timeout: float = 180.0,
        cwd: Optional[str] = None,
    ) -> None:
        if port is None:  # a free one
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", 0))
                port = probe.getsockname()[1]
        self.port = port
        self.url = f"http://127.0.0.1:{self.port}"
        command: List[str] = [sys.executable, "-m", "allennlp", "serve", *map(str, archives), *options]
        command += ["--port", str(self.port), "--include-package", "nerzoo"]
        self.process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + timeout
        while not self._healthy():
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"allennlp serve exited ({self.process.returncode}): {self.process.stderr.read()[-3000:]}"
                )
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"allennlp serve did not answer within {timeout:.0f} s")
            time.sleep(0.2)

    def _healthy(self) -> bool:
        try:
            return httpx.get(f"{self.url}/api/health", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def __enter__(self) -> "ServerProcess":
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()
