import argparse

import pytest

from nerzoo.commands.calibrate import _calibrate


def _args(tmp_path, archive_file, input_file="fixtures/conll2003/dev.txt"):
    return argparse.Namespace(
        archive_file=str(archive_file),
        input_file=input_file,
        output_file=str(tmp_path / "calibrated.tar.gz"),
        temperatures=1,
        objective="span",
        batch_size=8,
        cuda_device=-1,
        overrides="",
    )


def test_a_missing_archive_is_one_line_and_writes_nothing(tmp_path):
    with pytest.raises(SystemExit, match=r"^error: .*missing\.tar\.gz: no such archive$"):
        _calibrate(_args(tmp_path, tmp_path / "missing.tar.gz"))
    assert list(tmp_path.iterdir()) == []


def test_a_malformed_dev_file_names_its_line_and_writes_nothing(tmp_path, trained_archive):
    bad = tmp_path / "bad.txt"
    bad.write_text("EU NNP B-NP B-ORG\nrejects VBZ\n")
    with pytest.raises(SystemExit, match=r"bad\.txt:2"):
        _calibrate(_args(tmp_path, trained_archive, str(bad)))
    assert not (tmp_path / "calibrated.tar.gz").exists()
