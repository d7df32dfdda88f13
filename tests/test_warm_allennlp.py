"""The warm `allennlp` of the test suite (tests/warm_allennlp.py) answers as a new `allennlp` process does."""

import json
import os
import re
import signal
import subprocess
import sys

import pytest

import tests
from tests import PROJECT_ROOT, warm_allennlp

# Its own environment, in which the server forks (one thread: OMP_NUM_THREADS=1) whatever the run's.
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def _warm(args, cwd=PROJECT_ROOT, env=ENV):
    """(status, stdout, stderr) of `allennlp ARGS` in a child of the warm server."""
    result = tests._warm([sys.executable, "-m", "allennlp", *args], env, cwd)
    assert result is not None, "the warm server did not serve"
    return result.returncode, result.stdout, result.stderr


def _fresh(args, cwd=PROJECT_ROOT, env=ENV):
    result = subprocess.run(
        [sys.executable, "-m", "allennlp", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )
    return result.returncode, result.stdout, result.stderr


@pytest.mark.end_to_end
@pytest.mark.parametrize(
    "args",
    [["--help"], ["evaluate", "no/such/model.tar.gz", "no/such/data.txt"]],
    ids=["help", "missing-archive"],
)
def test_a_warm_command_answers_as_a_new_process(args):
    warm, fresh = _warm(args), _fresh(args)
    assert warm[0] == fresh[0] and warm[1] == fresh[1]
    # The last line of stderr (a log record's time left out): argparse's message, or the exception
    # a traceback ends with.
    last = [re.sub(r"^[\d-]+ [\d:,]+ - ", "", output.strip().splitlines()[-1]) for output in (warm[2], fresh[2])]
    assert last[0] == last[1]
    assert (fresh[0] != 0) == (args[0] != "--help")


@pytest.mark.end_to_end
def test_the_command_runs_in_the_callers_directory(tmp_path):
    run = tmp_path / "runs" / "one"
    run.mkdir(parents=True)
    (run / "metrics.json").write_text(json.dumps({"f1": 0.5}))
    status, stdout, _ = _warm(["print-results", "runs", "-k", "f1"], cwd=tmp_path)
    assert status == 0 and "runs/one/metrics.json, 0.5" in stdout


def test_only_start_up_variables_choose_the_server():
    env = {warm_allennlp.DIRECTORY_VARIABLE: "/tmp/x", "PATH": "/bin", "NERZOO_DATA": "a", "PWD": "/a"}
    same = warm_allennlp.socket_path({**env, "NERZOO_DATA": "b", "PWD": "/b", "PYTEST_CURRENT_TEST": "t"})
    assert warm_allennlp.socket_path(env) == same
    assert warm_allennlp.socket_path({**env, "PYTHONPATH": "guard"}) != same
    assert warm_allennlp.socket_path({**env, "OMP_NUM_THREADS": "2"}) != same


@pytest.mark.end_to_end
def test_the_shim_gives_the_commands_streams_and_status(tmp_path):
    warm_allennlp.venv_with_shim(tmp_path / ".venv", PROJECT_ROOT / ".venv")
    assert warm_allennlp.start(ENV)
    script = ".venv/bin/allennlp --help | head -1; .venv/bin/allennlp no-such-command 2> err.txt; echo status $?"
    result = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=300)
    assert result.stdout.splitlines() == ["usage: allennlp [-h] [--version]  ...", "status 2"]
    assert "invalid choice: 'no-such-command'" in (tmp_path / "err.txt").read_text()


@pytest.mark.end_to_end
def test_a_command_killed_by_a_signal_gives_its_negative_status(tmp_path):
    # A plugin that kills its own process when imported, as --include-package imports it.
    (tmp_path / "killer.py").write_text("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n")
    status, _, _ = _warm(["evaluate", "model.tar.gz", "data.txt", "--include-package", "killer"], cwd=tmp_path)
    assert status == -signal.SIGKILL


def test_cold_commands_when_asked(monkeypatch):
    monkeypatch.setenv("NERZOO_TEST_COLD_CLI", "1")
    assert not warm_allennlp.start(dict(os.environ))
    assert warm_allennlp.run(["--help"], PROJECT_ROOT, dict(os.environ), (0, 1, 2)) is None
