"""What the scripts of this folder share, imported as `harness` (fairscale owns the name `benchmarks`)."""

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED_DATA = os.path.normpath(os.path.join(REPO_ROOT, "..", "shared", "data"))
ALLENNLP = os.path.join(os.path.dirname(sys.executable), "allennlp")


def allennlp(arguments: List[str], log: str, env=None) -> int:
    """An `allennlp` command with nerzoo's components, from the repository root, its output in `log`: the return code."""
    with open(log, "w") as handle:
        command = [ALLENNLP, *arguments, "--include-package", "nerzoo"]
        return subprocess.call(command, cwd=REPO_ROOT, stdout=handle, stderr=subprocess.STDOUT, env=env)


def train(config: str, directory: str, overrides: Dict[str, Any], env=None, log=None) -> int:
    """`allennlp train` into `directory`, its output in `log` (default `DIRECTORY.log`): the return code."""
    command = ["train", config, "-s", directory, "-f", "-o", json.dumps(overrides)]
    return allennlp(command, log or f"{directory}.log", env)


def parse_duration(text: str) -> float:
    """allennlp writes `training_duration` as `str(timedelta)`: `H:MM:SS.ffffff` or `N day(s), H:MM:SS`."""
    days, _, clock = text.rpartition(", ")
    hours, minutes, seconds = clock.split(":")
    return int((days or "0").split()[0]) * 86400 + int(hours) * 3600 + int(minutes) * 60 + float(seconds)


def display_path(path: str) -> str:
    """Path relative to the repository root when that is shorter, for the results file."""
    relative = os.path.relpath(path, REPO_ROOT)
    return relative if len(relative) < len(path) else path


def command_line(script: str, argv: Optional[List[str]] = None) -> str:
    """The command that ran (`argv`, default this process's), with paths inside the repository relative to its root."""
    python = os.path.relpath(sys.executable, REPO_ROOT) if sys.executable.startswith(REPO_ROOT) else sys.executable
    argv = sys.argv[1:] if argv is None else argv
    return shlex.join([python, os.path.relpath(os.path.abspath(script), REPO_ROOT), *argv])


def machine_description() -> str:
    import torch

    return (
        f"{os.cpu_count()} CPU cores ({platform.processor() or platform.machine()}), no GPU used, "
        f"torch {torch.__version__} ({torch.get_num_threads()} threads), Python {platform.python_version()}, "
        f"load average {'/'.join(f'{value:.2f}' for value in os.getloadavg())}"
    )


def read_sentences(path: str, column: int = 0) -> List[List[str]]:
    """A column (default the words) of each sentence of a CoNLL column file, read by `conll_columns`."""
    from nerzoo.data.dataset_readers.conll_columns import ConllColumnsReader

    documents = ConllColumnsReader(file_tag_scheme=None).read_documents(path)
    return [[row[column] for row in rows] for _, sentences in documents for _, _, rows in sentences]


def train_or_exit(config: str, directory: str, overrides: Dict[str, Any], env=None) -> str:
    """`train`, ending the script when it fails; the archive."""
    if train(config, directory, overrides, env):
        raise SystemExit(f"{config}: allennlp train failed, see {directory}.log")
    return os.path.join(directory, "model.tar.gz")


def thread_env(threads: int) -> Dict[str, str]:
    """This process's environment with `threads` OpenMP and MKL threads, for `train`."""
    return dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))


def set_threads(threads: Optional[int]) -> None:
    """torch's threads, unless `threads` is None (torch's default)."""
    import torch

    torch.set_num_threads(threads or torch.get_num_threads())


def named(parser: argparse.ArgumentParser, values: List[str], option: str) -> Dict[str, str]:
    """`NAME=VALUE` arguments as a dict; a usage error on one without `=`."""
    if bad := [value for value in values if "=" not in value]:
        parser.error(f"{option} expects NAME=VALUE, got {bad[0]!r}")
    return dict(value.split("=", 1) for value in values)


def read_json(path: str) -> Any:
    with open(path) as handle:
        return json.load(handle)


def write_json(path: str, value: Any) -> None:
    with open(path, "w") as handle:
        json.dump(value, handle, indent=1)


def batches(items: List[Any], size: int) -> List[List[Any]]:
    return [items[start : start + size] for start in range(0, len(items), size)]


def padded(rows: List[Any]):
    """The rows of a batch as one tensor padded with 0, `(batch_size, longest)`, and its mask."""
    import torch

    tensors = [torch.as_tensor(row) for row in rows]
    mask = torch.arange(max(len(row) for row in tensors)) < torch.tensor([[len(row)] for row in tensors])
    return torch.nn.utils.rnn.pad_sequence(tensors, batch_first=True), mask


def timed_passes(
    runs: Dict[str, Callable[[], Any]], passes: int, alternate: bool = False, synchronize=lambda: None
) -> Tuple[Dict[str, List[float]], Dict[str, Any]]:
    """Seconds of each of `passes` passes of each run, in turn (the order reversed every other pass
    with `alternate`; `synchronize` before and after each), and each run's last result."""
    seconds: Dict[str, List[float]] = {name: [] for name in runs}
    results: Dict[str, Any] = {}
    for number in range(passes):
        order = list(runs.items())
        for name, run in order[::-1] if alternate and number % 2 else order:
            synchronize()
            started = time.perf_counter()
            results[name] = run()
            synchronize()
            seconds[name].append(time.perf_counter() - started)
    return seconds, results


def write_prefix(source: str, count: int, target: str, documents: bool = True) -> List[List[str]]:
    """Writes the first `count` sentences of a CoNLL file (all it has, if fewer) to `target`, its
    -DOCSTART- lines kept with `documents`: their words."""
    kept: List[str] = []
    words: List[List[str]] = []
    in_sentence = False
    with open(source, encoding="utf-8") as handle:
        for line in handle:
            if line.startswith("-DOCSTART-"):
                kept += [line] if documents else []
            elif line.strip():
                words += [] if in_sentence else [[]]
                words[-1].append(line.split()[0])
                kept.append(line)
                in_sentence = True
            elif in_sentence or documents:
                kept.append(line)
                if in_sentence and len(words) == count:
                    break
                in_sentence = False
    with open(target, "w", encoding="utf-8") as out:
        out.writelines(kept)
    return words
