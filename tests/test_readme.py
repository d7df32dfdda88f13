"""
The README and the pages of docs/ as a user reads them: every `nerzoo.` name they show imports,
every file they name exists, every registered name in their component tables is registered, and
their shell commands run on the fixtures from a directory laid out like the repository root
(training for one epoch; commands on real data, installs and `make` are left out).
"""

import importlib
import os
import re
import subprocess

import pytest
from allennlp.common import Registrable

import nerzoo  # noqa: F401
from tests import PROJECT_ROOT

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
    if "../shared" in block or re.search(r"^(make|python3 -m venv|\.venv/bin/uv|NERZOO_DATA=)", block, flags=re.M):
        return None
    lines = []
    for line in block.replace("\\\n", " ").splitlines():
        if re.search(r"allennlp (train|cross-validate-thread-discourse)\b", line) and " -o " not in line:
            line += """ -o '{"trainer.num_epochs": 1}'"""
        lines.append(re.sub(r"--folds \d+", "--folds 2", line))
    return "set -euo pipefail\n" + "\n".join(lines) + "\n"


@pytest.mark.end_to_end
def test_its_commands_run_on_the_fixtures(tmp_path):
    scripts = [script for script in map(_runnable, BLOCKS) if script]
    assert len(scripts) >= 5
    for name in ("training_config", "fixtures", ".venv", ".allennlp_plugins"):
        (tmp_path / name).symlink_to(PROJECT_ROOT / name)
    guard = PROJECT_ROOT / "tests" / "network_guard"
    env = {**os.environ, "PYTHONPATH": str(guard), "NERZOO_NETWORK_LOG": str(tmp_path / "network.log")}
    for script in scripts:
        result = subprocess.run(
            ["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900
        )
        assert result.returncode == 0, f"{script}\n{result.stderr[-3000:]}"
    assert not (tmp_path / "network.log").exists()
    for picture in ("attention.png", "memory.png", "calibration.png"):
        assert (tmp_path / picture).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("block", BLOCKS[:1])
def test_the_quick_start_is_the_two_make_targets(block):
    assert [line.split("#")[0].strip() for line in block.strip().splitlines()] == ["make train", "make test"]
