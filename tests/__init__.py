import json
import os
import pathlib
import subprocess
import sys
import tempfile
from typing import Optional

from tests import warm_allennlp

PROJECT_ROOT = pathlib.Path(__file__).resolve().parent.parent
FIXTURES_ROOT = PROJECT_ROOT / "fixtures"
SHARED_DATA = PROJECT_ROOT.parent / "shared" / "data"


def allennlp(*args, check=True, env=None, fresh=False) -> subprocess.CompletedProcess:
    """
    Runs the real `allennlp` command (`python -m allennlp ARGS`) from the project root, as a user
    would: in a child of a warm server (`tests/warm_allennlp.py`), or with `fresh` (for tests of
    what a new process prints) or where none serves, in a new process.
    """
    command = [sys.executable, "-m", "allennlp", *map(str, args)]
    full_env = {**os.environ, **(env or {})}
    result = None if fresh else _warm(command, full_env)
    if result is None:
        result = subprocess.run(command, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=900, env=full_env)
    if check and result.returncode != 0:
        raise AssertionError(f"{' '.join(command)} failed ({result.returncode}):\n{result.stderr[-4000:]}")
    return result


def _warm(command, env, cwd=PROJECT_ROOT) -> Optional[subprocess.CompletedProcess]:
    """`command` run by the warm server for `env`, its output captured as `subprocess.run` would; `None` without one."""
    if not warm_allennlp.start(env):
        return None
    with tempfile.TemporaryFile() as stdout, tempfile.TemporaryFile() as stderr, open(os.devnull) as stdin:
        streams = (stdin.fileno(), stdout.fileno(), stderr.fileno())
        try:
            status = warm_allennlp.run(command[3:], cwd, env, streams, timeout=900)
        except TimeoutError as error:
            raise subprocess.TimeoutExpired(command, 900) from error
        if status is None:
            return None
        outputs = []
        for stream in (stdout, stderr):
            stream.seek(0)
            outputs.append(stream.read().decode().replace("\r\n", "\n").replace("\r", "\n"))  # as text=True
    return subprocess.CompletedProcess(command, status, *outputs)


def train(config, run, overrides, env=None) -> subprocess.CompletedProcess:
    """`allennlp train CONFIG -s RUN --include-package nerzoo -o OVERRIDES` (a JSON string)."""
    return allennlp("train", config, "-s", run, "--include-package", "nerzoo", "-o", overrides, env=env)


def evaluate(archive, data, output) -> dict:
    allennlp("evaluate", archive, data, "--output-file", output, "--include-package", "nerzoo")
    return json.loads(output.read_text())


def predict(archive, lines, path, *extra, env=None) -> list:
    """`allennlp predict` over one file of `lines` (json objects), batched by 2; `extra` arguments are added."""
    inputs = path.with_suffix(".in.jsonl")
    inputs.write_text("".join(json.dumps(line) + "\n" for line in lines))
    allennlp(
        "predict",
        archive,
        inputs,
        "--output-file",
        path,
        "--batch-size",
        2,
        "--silent",
        "--include-package",
        "nerzoo",
        *extra,
        env=env,
    )
    return [json.loads(line) for line in path.read_text().splitlines()]
