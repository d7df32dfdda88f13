import atexit
import os
import shutil
import tempfile
import warnings

import pytest

from tests import FIXTURES_ROOT, PROJECT_ROOT, warm_allennlp

warnings.filterwarnings("ignore", category=FutureWarning)
# The configs train on a GPU when they see one; this suite checks the CPU, so it hides GPUs from
# itself and the processes it starts. `make test-gpu` (NERZOO_TEST_GPU=1) runs tests/gpu on them.
if os.environ.get("NERZOO_TEST_GPU") != "1":
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
# Every test runs from the project root so that the configs' relative fixture paths resolve.
os.chdir(PROJECT_ROOT)
# spaCy parses are cached per test session (subprocesses inherit it), never in the user's cache.
os.environ["NERZOO_CACHE"] = tempfile.mkdtemp(prefix="nerzoo-test-cache-")
atexit.register(shutil.rmtree, os.environ["NERZOO_CACHE"], ignore_errors=True)
# The `allennlp` commands of this process run in children of warm servers (tests/warm_allennlp.py),
# which put their sockets here and end with this process.
# Not in the GPU suite (NERZOO_TEST_GPU=1): there the commands run in new processes, as users run them.
if os.environ.get("NERZOO_TEST_GPU") != "1":
    os.environ[warm_allennlp.DIRECTORY_VARIABLE] = tempfile.mkdtemp(prefix="nz-warm-")
    atexit.register(shutil.rmtree, os.environ[warm_allennlp.DIRECTORY_VARIABLE], ignore_errors=True)
# Tiny random BERTs in that cache (no download): the contextual configs get the one as wide as the
# bundled model through overrides (tests.tiny_transformer.tiny_bert_overrides).
from tests.tiny_transformer import BUNDLED_WIDTH, tiny_bert_directory, write_tiny_bert  # noqa: E402

for width in (16, BUNDLED_WIDTH):
    write_tiny_bert(tiny_bert_directory(width), hidden_size=width)

# Under pytest-xdist the workers share the cores: each worker, and the allennlp processes it
# starts, gets its share of threads instead of all of them (unless OMP_NUM_THREADS is set).
WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if WORKERS > 1 and "OMP_NUM_THREADS" not in os.environ:
    os.environ["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // WORKERS))
    import torch

    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    # Tests that share the in-process `trained_archive` run on one worker (--dist loadgroup), so
    # it is trained once.
    for item in items:
        if "trained_archive" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("trained_archive"))
    # The slowest tests (the allennlp command in subprocesses) start first, so that parallel
    # workers do not end the run waiting on one of them.
    items.sort(key=lambda item: not item.get_closest_marker("end_to_end"))


def pytest_collection_finish(session):
    # Says so when --dist loadgroup did not group (then shared models are trained on each worker).
    if getattr(session.config.option, "loadgroup", False):
        split = [item for item in session.items if item.get_closest_marker("xdist_group") and "@" not in item.nodeid]
        if split:
            warnings.warn(
                pytest.PytestWarning(f"pytest-xdist did not group {len(split)} tests with an xdist_group"), stacklevel=1
            )


def pytest_terminal_summary(terminalreporter):
    # Says plainly when the page's browser tests did not run, and why.
    skipped = [
        report for report in terminalreporter.stats.get("skipped", []) if "tests/server/test_page.py" in report.nodeid
    ]
    if skipped:
        reason = skipped[0].longrepr[-1] if isinstance(skipped[0].longrepr, tuple) else str(skipped[0].longrepr)
        terminalreporter.write_line(f"{len(skipped)} browser tests of the page skipped: {reason}", yellow=True)


@pytest.fixture(scope="session")
def trained_archive(tmp_path_factory):
    """A tiny bilstm_crf trained in-process on the fixtures, shared by the predictor tests."""
    from allennlp.commands.train import train_model_from_file

    import nerzoo  # noqa: F401

    serialization_dir = tmp_path_factory.mktemp("trained") / "model"
    train_model_from_file(str(FIXTURES_ROOT / "experiments" / "bilstm_crf_tiny.jsonnet"), str(serialization_dir))
    return serialization_dir / "model.tar.gz"
