"""benchmarks/speed/collate_speed.py on the fixtures, in this process: both collations time every batch size."""

from tests import benchmark_script


def test_collate_speed_on_the_fixtures(monkeypatch):
    monkeypatch.setenv("NERZOO_DATA", "fixtures")
    script = benchmark_script("speed/collate_speed.py", monkeypatch)
    rows = script.measure("bilstm_crf", [3, 8], passes=1)
    assert [row["batch"] for row in rows] == [3, 8]
    names = ("default", "fast", "default moved", "fast moved")
    assert all(row["sentences"] > 0 and all(row[name] > 0 for name in names) for row in rows)
