"""
The README and the pages of docs/ as a user reads them: every `nerzoo.` name they show imports,
every file they name exists, every registered name in their component tables is registered, and
their shell commands run on the fixtures from a directory laid out like the repository root
(training for one epoch; commands on real data, installs and `make` are left out), one test per
command: the commands that share a `runs/` directory form a chain, run in order in one directory on
one worker, and a command run alone runs the ones before it in its chain first.
"""

import importlib
import os
import re
import subprocess
from typing import Dict, List, NamedTuple

import pytest
from allennlp.common import Registrable

import nerzoo  # noqa: F401
from tests import PROJECT_ROOT, warm_allennlp

PAGES = ["README.md"] + [
    f"docs/{name}.md"
    for name in (
        "deptree_ner",
        "me_crf",
        "fofe_ner",
        "char_gated_tagger",
        "seq2biseq",
        "components",
        "gpu",
        "serving",
        "development",
        "partial",
        "active_learning",
        "scale",
    )
]
README = "\n".join((PROJECT_ROOT / page).read_text() for page in PAGES)
BLOCKS = re.findall(r"```bash\n(.*?)```", README, flags=re.S)


def test_every_nerzoo_name_it_shows_imports():
    names = set(re.findall(r"`(nerzoo(?:\.\w+)+)", README))
    assert len(names) >= 5
    for name in sorted(names):
        parts = name.split(".")
        for split in range(len(parts), 0, -1):
            try:
                value = importlib.import_module(".".join(parts[:split]))
            except ModuleNotFoundError:
                continue
            for attribute in parts[split:]:
                value = getattr(value, attribute)
            break
        else:
            raise AssertionError(f"{name} does not import")


def test_every_file_it_names_exists():
    paths = set(re.findall(r"(?<![\w/])((?:training_config|benchmarks|fixtures|nerzoo|docs|tests)/[\w./-]*\w)", README))
    assert len(paths) > 10
    missing = [path for path in sorted(paths) if not (PROJECT_ROOT / path).exists()]
    assert not missing


def test_every_registered_name_in_its_tables_is_registered():
    registered = {name for registry in Registrable._registry.values() for name in registry}
    table_names = re.findall(r"^\| [A-Za-z +]+ \| `([\w-]+)` \|", README, flags=re.M)
    assert len(table_names) > 20
    assert not [name for name in table_names if name not in registered]


def _runnable(block):
    """The block's commands as a user would run them on the fixtures, or None when it needs more."""
    if "../shared" in block or re.search(r"^(make|python3 -m venv|\.venv/bin/uv)", block, flags=re.M):
        return None
    lines = []
    for line in block.replace("\\\n", " ").splitlines():
        if re.search(r"allennlp (train|cross-validate-thread-discourse)\b", line) and " -o " not in line:
            line += """ -o '{"trainer.num_epochs": 1}'"""
        lines.append(re.sub(r"--folds \d+", "--folds 2", line))
    return lines


class Step(NamedTuple):
    chain: str  # the steps that share a `runs/` directory, in page order, run in one directory
    name: str
    script: str


def _steps() -> List[Step]:
    """
    Every runnable command of the pages, each with the lines before it that are no command of its
    own (`echo ... > input.jsonl`), grouped into chains by the `runs/` directories they share.
    """
    commands = []
    for lines in filter(None, map(_runnable, BLOCKS)):
        pending = []
        for line in lines:
            pending.append(line)
            if "bin/allennlp " in line:
                commands.append("\n".join(pending))
                pending = []
        assert not pending, f"lines after the last command of a block: {pending}"
    chain_of: Dict[str, str] = {}
    steps = []
    for command in commands:
        directories = re.findall(r"\bruns/(\w+)", command)
        assert directories, f"a command outside runs/: {command}"
        chain = next((chain_of[name] for name in directories if name in chain_of), directories[0])
        chain_of.update((name, chain) for name in directories)
        verb = re.search(r"bin/allennlp ([\w-]+)", command).group(1)
        steps.append(Step(chain, f"{chain}-{sum(step.chain == chain for step in steps) + 1}-{verb}", command))
    return steps


STEPS = _steps()


class Chains:
    """One directory per chain, laid out like the repository root; each step runs once, in order."""

    def __init__(self, root):
        self.root = root
        self.outcome: Dict[str, bool] = {}

    def run_through(self, step: Step) -> None:
        directory = self.root / step.chain
        if not directory.exists():
            directory.mkdir()
            for name in ("training_config", "fixtures", ".allennlp_plugins"):
                (directory / name).symlink_to(PROJECT_ROOT / name)
            warm_allennlp.venv_with_shim(directory / ".venv", PROJECT_ROOT / ".venv")
        for earlier in STEPS[: STEPS.index(step) + 1]:
            if earlier.chain != step.chain:
                continue
            if earlier.name not in self.outcome:
                self.outcome[earlier.name] = False
                self._run(earlier, directory)
                self.outcome[earlier.name] = True
            assert self.outcome[earlier.name], f"{step.name} needs {earlier.name}, which failed"

    @staticmethod
    def _run(step: Step, directory) -> None:
        guard = PROJECT_ROOT / "tests" / "network_guard"
        network_log = directory / "network.log"
        env = {**os.environ, "PYTHONPATH": str(guard), "NERZOO_NETWORK_LOG": str(network_log)}
        warm_allennlp.start(env)  # for the shim `.venv/bin/allennlp`
        script = "set -euo pipefail\n" + step.script + "\n"
        result = subprocess.run(
            ["bash", "-c", script], cwd=directory, env=env, capture_output=True, text=True, timeout=900
        )
        assert result.returncode == 0, f"{script}\n{result.stderr[-3000:]}"
        assert not network_log.exists(), network_log.read_text()
        for picture in re.findall(r" -o (\S+\.png)", step.script):
            assert (directory / picture).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", picture


@pytest.fixture(scope="session")
def chains(tmp_path_factory):
    return Chains(tmp_path_factory.mktemp("readme"))


def test_the_commands_form_chains():
    assert len(STEPS) >= 15
    assert {"bilstm_crf", "deptree_ner", "me_crf", "threads", "fofe"} <= {step.chain for step in STEPS}
    assert all(
        re.search(r"\.png$", picture) for step in STEPS for picture in re.findall(r" -o (\S+\.png)", step.script)
    )
    assert sum(len(re.findall(r" -o (\S+\.png)", step.script)) for step in STEPS) >= 3


@pytest.mark.end_to_end
@pytest.mark.parametrize(
    "step", [pytest.param(step, marks=pytest.mark.xdist_group(f"readme-{step.chain}"), id=step.name) for step in STEPS]
)
def test_its_commands_run_on_the_fixtures(step, chains):
    chains.run_through(step)


@pytest.mark.parametrize("block", BLOCKS[:1])
def test_the_quick_start_is_the_two_make_targets(block):
    assert [line.split("#")[0].strip() for line in block.strip().splitlines()] == ["make train", "make test"]
