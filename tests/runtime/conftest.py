import pytest

from nerzoo.commands import export
from tests import FIXTURES_ROOT


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """The tiny bilstm_crf fixture archive, exported (raw text through a blank spaCy pipeline)."""
    directory = tmp_path_factory.mktemp("export") / "tagger"
    archive = FIXTURES_ROOT / "archives" / "bilstm_crf_tiny.tar.gz"
    export.export_archive(str(archive), str(directory), spacy_model="blank:en")
    return directory
