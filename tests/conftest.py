import os
import warnings

import pytest

from tests import FIXTURES_ROOT, PROJECT_ROOT

warnings.filterwarnings("ignore", category=FutureWarning)
# Every test runs from the project root so that the configs' relative fixture paths resolve.
os.chdir(PROJECT_ROOT)


@pytest.fixture(scope="session")
def trained_archive(tmp_path_factory):
    """A tiny bilstm_crf trained in-process on the fixtures, shared by the predictor tests."""
    import nerzoo  # noqa: F401
    from allennlp.commands.train import train_model_from_file

    serialization_dir = tmp_path_factory.mktemp("trained") / "model"
    train_model_from_file(str(FIXTURES_ROOT / "experiments" / "bilstm_crf_tiny.jsonnet"), str(serialization_dir))
    return serialization_dir / "model.tar.gz"
