"""
What the scripts of this folder share: the repository's paths, `allennlp train` in a subprocess,
reading allennlp's `training_duration`, the command line and machine of a run for its note, and the
words of a CoNLL file's sentences.  The scripts import it as `harness` (fairscale owns the top-level
name `benchmarks`); those in `speed/` put this folder on `sys.path` first.
"""

import json
import os
import platform
import shlex
import subprocess
import sys
from typing import Any, Dict, List, Optional

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED_DATA = os.path.normpath(os.path.join(REPO_ROOT, "..", "shared", "data"))
ALLENNLP = os.path.join(os.path.dirname(sys.executable), "allennlp")


def train(config: str, directory: str, overrides: Dict[str, Any], env=None, package="nerzoo", log=None) -> int:
    """`allennlp train CONFIG -s DIRECTORY -f -o OVERRIDES` from the repository root, its output in
    `log` (default `DIRECTORY.log`): the return code."""
    command = [ALLENNLP, "train", config, "-s", directory, "-f", "--include-package", package]
    command += ["-o", json.dumps(overrides)]
    with open(log or f"{directory}.log", "w") as handle:
        return subprocess.call(command, cwd=REPO_ROOT, stdout=handle, stderr=subprocess.STDOUT, env=env)


def parse_duration(value: Any) -> Optional[float]:
    """allennlp writes `training_duration` as `str(timedelta)`: `H:MM:SS.ffffff` or `N day(s), H:MM:SS`."""
    if value is None or isinstance(value, (int, float)):
        return value
    text, days = str(value), 0
    if "day" in text:
        day_part, text = text.split(",", 1)
        days = int(day_part.split()[0])
    hours, minutes, seconds = text.strip().split(":")
    return days * 86400 + int(hours) * 3600 + int(minutes) * 60 + float(seconds)


def display_path(path: str) -> str:
    """Path relative to the repository root when that is shorter, for the results file."""
    relative = os.path.relpath(path, REPO_ROOT)
    return relative if len(relative) < len(path) else path


def command_line(script: str, argv: List[str]) -> str:
    """The command that ran, with paths inside the repository relative to its root."""
    python = os.path.relpath(sys.executable, REPO_ROOT) if sys.executable.startswith(REPO_ROOT) else sys.executable
    return shlex.join([python, os.path.relpath(os.path.abspath(script), REPO_ROOT), *argv])


def machine_description() -> str:
    import torch

    return (
        f"{os.cpu_count()} CPU cores ({platform.processor() or platform.machine()}), no GPU used, "
        f"torch {torch.__version__} ({torch.get_num_threads()} threads), Python {platform.python_version()}, "
        f"load average {'/'.join(f'{value:.2f}' for value in os.getloadavg())}"
    )


def read_sentences(path: str, count: Optional[int] = None) -> List[List[str]]:
    """The words (first column) of the sentences of a CoNLL column file (the first `count`), read by `conll_columns`."""
    from nerzoo.data.dataset_readers.conll_columns import ConllColumnsReader

    documents = ConllColumnsReader(file_tag_scheme=None).read_documents(path)
    sentences = [[row[0] for row in rows] for _, sentences in documents for _, _, rows in sentences]
    if count is not None and len(sentences) < count:
        raise ValueError(f"{path} has only {len(sentences)} sentences.")
    return sentences[:count]
