"""benchmarks/speed/collate_speed.py on the fixtures, in this process: both collations time every batch size."""

import importlib.util
import sys

from tests import PROJECT_ROOT


def test_collate_speed_on_the_fixtures(monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))  # the script puts benchmarks/ on it
    monkeypatch.setenv("NERZOO_DATA", "fixtures")
    spec = importlib.util.spec_from_file_location("collate_speed", PROJECT_ROOT / "benchmarks/speed/collate_speed.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    rows = script.measure("bilstm_crf", [3, 8], passes=1)
    assert [row["batch"] for row in rows] == [3, 8]
    assert all(row["sentences"] > 0 and row["default"] > 0 and row["fast"] > 0 for row in rows)
