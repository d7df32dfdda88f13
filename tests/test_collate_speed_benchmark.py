"""benchmarks/speed/collate_speed.py on the fixtures, in this process: both collations time every batch size."""

from tests import benchmark_script


def test_collate_speed_on_the_fixtures(monkeypatch):
    monkeypatch.setenv("NERZOO_DATA", "fixtures")
    script = benchmark_script("speed/collate_speed.py", monkeypatch)
    rows = script.measure("bilstm_crf", [3, 8], passes=1)
    assert [row["batch"] for row in rows] == [3, 8]
    assert all(row["sentences"] > 0 and row["default"] > 0 and row["fast"] > 0 for row in rows)
