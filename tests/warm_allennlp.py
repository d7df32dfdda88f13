"""
A warm `allennlp` command for the test suite.  Every `allennlp` process spends about 6 s of a core
importing allennlp, torch and transformers before it reads its arguments; the end-to-end tests start
about a hundred.  Here a server process imports `allennlp.commands` once, then forks a child for each
command, which runs the command exactly as a new process would: allennlp's own entry point (`python -m
allennlp`, or the `.venv/bin/allennlp` script) run by `runpy` with the caller's arguments, working
directory, environment and standard streams (their file descriptors are passed over a Unix socket),
and its exit status (negative for a signal, as `subprocess` gives it) passed back.

What a fork cannot give is a new interpreter: whatever the imports read from the environment at start
(`PYTHON*`, `HF_*`, `OMP_NUM_THREADS`, ...) is the server's.  So each server serves one environment,
less the variables read only at run time (`NERZOO_*`, the shell's own; nerzoo is not
imported by the server); a request in another environment gets a server of its own when a test starts
one (`start`), else runs the real command.  A server with any thread besides its main one (a thread
pool of a BLAS library, when `OMP_NUM_THREADS` is not 1) does not fork: its callers run the real
command; pyarrow's allocator is told to start no thread (`JE_ARROW_MALLOC_CONF`).  Warnings printed
while importing go to the server's log, not to a command's stderr; the tests of a command's output
take `fresh=True` (`tests.allennlp`).  `NERZOO_TEST_COLD_CLI=1` turns all of this off.

Only the standard library is imported at module level: the shim (`write_shim`) is a Python process
per command too, and its cost is its start.
"""

import hashlib
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import time
from typing import Dict, List, Optional, Sequence

DIRECTORY_VARIABLE = "NERZOO_WARM_ALLENNLP"  # where a pytest worker's servers put their sockets
RUN_TIME_VARIABLES = {"PWD", "OLDPWD", "SHLVL", "_", "COLUMNS", "LINES"}
RUN_TIME_PREFIXES = ("NERZOO_", "PYTEST_")
IDLE_SECONDS = 900  # a server with nothing to do exits after this long
START_SECONDS = 180


def enabled() -> bool:
    return os.environ.get("NERZOO_TEST_COLD_CLI") != "1" and bool(os.environ.get(DIRECTORY_VARIABLE))


def socket_path(env: Dict[str, str]) -> Optional[str]:
    """The socket of the server for `env`'s start-up variables, under `env`'s directory."""
    directory = env.get(DIRECTORY_VARIABLE)
    if not directory:
        return None
    start_up = sorted(
        (name, value)
        for name, value in env.items()
        if name not in RUN_TIME_VARIABLES and not name.startswith(RUN_TIME_PREFIXES)
    )
    key = hashlib.sha1(json.dumps([sys.executable, start_up]).encode()).hexdigest()[:16]
    return os.path.join(directory, key + ".sock")


def start(env: Dict[str, str]) -> bool:
    """
    Starts the server for `env` unless it runs (waiting until it has imported allennlp): whether it
    serves.  Called by the pytest worker, whose child the server is and whose exit ends it.
    """
    path = socket_path(env)
    if path is None or not enabled():
        return False
    if os.path.exists(path):
        return True
    refused = path + ".refused"
    if os.path.exists(refused):
        return False
    log = open(path + ".log", "wb")
    server = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), "serve", path, str(os.getpid())],
        env=env,
        cwd=os.path.dirname(path),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=log,
        start_new_session=True,
    )
    log.close()
    ready, _, _ = select.select([server.stdout], [], [], START_SECONDS)
    line = server.stdout.readline().decode() if ready else "no answer\n"
    server.stdout.close()
    if line != "ready\n":
        with open(refused, "w") as note:
            note.write(line)
        server.kill()
        return False
    return True


def run(
    args: Sequence[str],
    cwd: str,
    env: Dict[str, str],
    streams: Sequence[int],
    script: Optional[str] = None,
    argv0: Optional[str] = None,
    timeout: Optional[float] = None,
) -> Optional[int]:
    """
    `allennlp ARGS` in a child of the warm server for `env`: its exit status, or `None` when no
    server serves that environment (then run the real command).  `streams`: the file descriptors
    of its stdin, stdout and stderr.  `script`: the `allennlp` script to run as `argv0` (default:
    `python -m allennlp`).  Past `timeout` seconds the child is killed and `TimeoutError` raised.
    """
    path = socket_path(env)
    if path is None or not enabled() or not os.path.exists(path):
        return None
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connection.connect(path)
    except OSError:
        connection.close()
        return None
    request = json.dumps({"args": list(args), "cwd": str(cwd), "env": env, "script": script, "argv0": argv0})
    payload = request.encode()
    with connection:
        socket.send_fds(connection, [struct.pack("!I", len(payload)) + payload], list(streams))
        replies = _replies(connection)
        started = next(replies, {})
        if "pid" not in started:
            return None
        forward = _forward_signals(started["pid"])
        try:
            if timeout is not None:
                connection.settimeout(timeout)
            try:
                reply = next(replies, None)
            except socket.timeout:
                os.kill(started["pid"], signal.SIGKILL)
                raise TimeoutError(f"allennlp {' '.join(args)} ran past {timeout} s") from None
            if reply is None:
                raise RuntimeError(f"the warm allennlp server ({path}.log) ended before allennlp {' '.join(args)} did")
            return reply["status"]
        finally:
            for number, handler in forward.items():
                signal.signal(number, handler)


def _replies(connection: socket.socket):
    """The server's replies, one JSON object a line."""
    buffered = b""
    while True:
        while b"\n" not in buffered:
            chunk = connection.recv(4096)
            if not chunk:
                return
            buffered += chunk
        line, buffered = buffered.split(b"\n", 1)
        yield json.loads(line)


def _forward_signals(pid: int) -> Dict[int, object]:
    """In the main thread, SIGINT and SIGTERM go on to the child; the handlers they replace."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        return {}
    previous = {}
    for number in (signal.SIGINT, signal.SIGTERM):
        previous[number] = signal.signal(number, lambda received, frame: os.kill(pid, received))
    return previous


def shim(real: str) -> None:
    """The body of a shim `allennlp` script: the warm command when a server serves, else `real`."""
    args = sys.argv[1:]
    status = run(args, os.getcwd(), dict(os.environ), (0, 1, 2), script=real, argv0=sys.argv[0])
    if status is None:
        os.execv(real, [real, *args])
    if status < 0:  # as the command itself: killed by that signal
        signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
    sys.exit(status)


def write_shim(path, real: str) -> None:
    """An executable `allennlp` at `path` that runs `shim(real)`."""
    here = os.path.dirname(os.path.abspath(__file__))
    with open(path, "w") as script:
        script.write(
            f"#!{sys.executable} -I\nimport sys\nsys.path.insert(0, {here!r})\n"
            f"import warm_allennlp\nwarm_allennlp.shim({str(real)!r})\n"
        )
    os.chmod(path, 0o755)


def venv_with_shim(directory, venv) -> None:
    """`directory` as the virtual environment `venv` (links to its entries) whose `bin/allennlp` is a shim."""
    os.makedirs(os.path.join(directory, "bin"))
    for name in os.listdir(venv):
        if name != "bin":
            os.symlink(os.path.join(venv, name), os.path.join(directory, name))
    for name in os.listdir(os.path.join(venv, "bin")):
        target = os.path.join(directory, "bin", name)
        if name == "allennlp":
            write_shim(target, os.path.join(venv, "bin", name))
        else:
            os.symlink(os.path.join(venv, "bin", name), target)


# The server.


def serve(path: str, parent: int) -> None:
    # pyarrow (imported by pandas, which scikit-learn imports where allennlp-models installed them)
    # starts its jemalloc's background thread at import; this server's children do not need it.
    os.environ.setdefault("JE_ARROW_MALLOC_CONF", "background_thread:false")
    import allennlp.commands  # noqa: F401  (what every command imports first; nerzoo is not imported)

    threads = len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else 0
    if threads != 1:
        print(f"not forked: {threads} threads after the imports", flush=True)
        return
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(16)
    print("ready", flush=True)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 1)
    children: Dict[int, socket.socket] = {}
    last = time.monotonic()
    try:
        while os.getppid() == parent and (children or time.monotonic() - last < IDLE_SECONDS):
            ready, _, _ = select.select([listener], [], [], 0.02)
            if ready:
                connection, _ = listener.accept()
                try:
                    pid = _fork(connection, listener, children)
                except Exception as error:  # a bad request, or no fork: the client runs the real command
                    print(f"request refused: {error!r}", file=sys.stderr, flush=True)
                    connection.close()
                    pid = None
                if pid is not None:
                    children[pid] = connection
                last = time.monotonic()
            for pid in list(children):
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    connection = children.pop(pid)
                    code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
                    try:
                        connection.sendall((json.dumps({"status": code}) + "\n").encode())
                    except OSError:
                        pass
                    connection.close()
                    last = time.monotonic()
    finally:
        listener.close()
        if os.path.exists(path):
            os.unlink(path)


def _fork(connection: socket.socket, listener: socket.socket, children: Dict[int, socket.socket]) -> Optional[int]:
    header, fds, _, _ = socket.recv_fds(connection, 4, 3)
    if len(header) < 4 or len(fds) != 3:
        connection.close()
        return None
    (size,) = struct.unpack("!I", header)
    payload = b""
    while len(payload) < size:
        chunk = connection.recv(size - len(payload))
        if not chunk:
            break
        payload += chunk
    request = json.loads(payload)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        listener.close()
        for other in children.values():
            other.close()
        connection.close()
        os._exit(_child(request, fds))
    for fd in fds:
        os.close(fd)
    connection.sendall((json.dumps({"pid": pid}) + "\n").encode())
    return pid


def _child(request: Dict, fds: List[int]) -> int:
    """Runs the command as `python -m allennlp` or the script would, and ends as the interpreter does."""
    import atexit
    import runpy
    import threading

    try:
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        script = request["script"]
        sys.argv = [request["argv0"] or script or "allennlp", *request["args"]]
        if script:
            sys.path[0] = os.path.dirname(os.path.realpath(script))
            runpy.run_path(script, run_name="__main__")
        else:
            sys.path[0] = os.getcwd()
            runpy.run_module("allennlp", run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exit:
        code = _exit_code(exit.code)
    except BaseException:
        sys.excepthook(*sys.exc_info())
        code = 1
    try:
        threading._shutdown()  # type: ignore[attr-defined]  (as the interpreter waits for its threads)
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        code = code or 1
    return code


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        serve(sys.argv[2], int(sys.argv[3]))
