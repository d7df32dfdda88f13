import atexit
import os
import shutil
import tempfile
import warnings

import pytest

from tests import FIXTURES_ROOT, PROJECT_ROOT

warnings.filterwarnings("ignore", category=FutureWarning)
# Every test runs from the project root so that the configs' relative fixture paths resolve.
os.chdir(PROJECT_ROOT)
# spaCy parses are cached per test session (subprocesses inherit it), never in the user's cache.
os.environ["NERZOO_CACHE"] = tempfile.mkdtemp(prefix="nerzoo-test-cache-")
atexit.register(shutil.rmtree, os.environ["NERZOO_CACHE"], ignore_errors=True)


@pytest.fixture(scope="session")
def trained_archive(tmp_path_factory):
    """A tiny bilstm_crf trained in-process on the fixtures, shared by the predictor tests."""
    import nerzoo  # noqa: F401
    from allennlp.commands.train import train_model_from_file

    serialization_dir = tmp_path_factory.mktemp("trained") / "model"
    train_model_from_file(str(FIXTURES_ROOT / "experiments" / "bilstm_crf_tiny.jsonnet"), str(serialization_dir))
    return serialization_dir / "model.tar.gz"
