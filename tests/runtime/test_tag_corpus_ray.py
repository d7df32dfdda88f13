"""
`nerzoo-tag --ray` on a local Ray cluster (2 CPUs, 127.0.0.1, no dashboard, no usage stats): the same
shards as in this process for JSON lines, text and Parquet with bad lines among them; an actor killed
once at a fixed input; a re-run that finishes only the missing shards.  Without Ray these tests skip
and say why; with NERZOO_REQUIRE_RAY=1 (CI, after `make install-ray`) they fail instead.
"""

import json
import os
import pathlib
import subprocess
import sys

import pytest
from nerzoo_runtime.tag_corpus import main

from tests import PROJECT_ROOT
from tests.runtime.ray_die_once import MARKER_WORD
from tests.runtime.test_tag_corpus import RAW_TEXTS, fixture_sentences, records

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]
# Ray reads these as it loads: every process of the test cluster on 127.0.0.1, no usage stats sent,
# and workers at the suite's priority (Ray's default, nice 15, starves them beside parallel tests).
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_worker_niceness", "0")
try:
    import pyarrow
    import ray
    from pyarrow import parquet
except ImportError as missing:
    if os.environ.get("NERZOO_REQUIRE_RAY") == "1":
        raise ImportError(f"NERZOO_REQUIRE_RAY=1 but {missing}: `make install-ray`") from missing
    pytest.skip(f"Ray Data or pyarrow is not installed ({missing}): `make install-ray`", allow_module_level=True)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """JSON lines with bad lines, text with blank lines, and Parquet, in one folder."""
    folder = tmp_path_factory.mktemp("corpus")
    sentences = fixture_sentences()
    lines = [json.dumps({"tokens": words}) for words in sentences]
    lines[5:5] = ["{not json", json.dumps({"tokens": [MARKER_WORD, "visited", "Oslo", "."]}), "[1, 2]"]
    (folder / "news.jsonl").write_text("\n".join(lines) + "\n")
    (folder / "texts.txt").write_text(f"{RAW_TEXTS[0]}\n\n{RAW_TEXTS[1]}\n" * 4)
    table = pyarrow.table({"words": sentences[:9]})
    parquet.write_table(table, folder / "table.parquet", row_group_size=4)
    return folder


@pytest.fixture(scope="module")
def in_process(exported, corpus, tmp_path_factory):
    output = tmp_path_factory.mktemp("in_process")
    assert (
        main([str(exported), str(corpus), "--output", str(output), "--shard-lines", "6", "--tokens-column", "words"])
        == 0
    )
    return output


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A local cluster of 2 CPUs whose workers run `ray_die_once.die_once_at_the_marker` as they start."""
    marker = tmp_path_factory.mktemp("marker") / "died"
    path = os.pathsep.join([str(PROJECT_ROOT), os.environ.get("PYTHONPATH", "")])
    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        runtime_env={
            "env_vars": {"PYTHONPATH": path, "NERZOO_TEST_DIE_MARKER": str(marker)},
            "worker_process_setup_hook": "tests.runtime.ray_die_once.die_once_at_the_marker",
        },
    )
    yield marker
    ray.shutdown()


def shards(output: pathlib.Path):
    return {path.name: path.read_bytes() for path in sorted(output.iterdir()) if path.name != "_manifest.json"}


def test_the_console_script_on_a_new_local_cluster_writes_the_in_process_shards(exported, corpus, in_process, tmp_path):
    output = tmp_path / "ray"
    command = [pathlib.Path(sys.executable).parent / "nerzoo-tag", exported, corpus, "--output", output]
    command += ["--shard-lines", "6", "--tokens-column", "words", "--ray", "local", "--workers", "2"]
    command += ["--worker-cpus", "0.5"]
    run = subprocess.run(command, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-3000:]
    assert shards(output) == shards(in_process)
    assert json.loads((output / "_manifest.json").read_text()) == json.loads(
        (in_process / "_manifest.json").read_text()
    )
    errors = [record for record in records(output) if "error" in record]
    assert [record["source"]["line"] for record in errors] == [6, 8]


def test_an_actor_killed_mid_run_is_replaced_and_every_input_is_written_once(
    exported,
    corpus,
    in_process,
    cluster,
    tmp_path,
):
    output = tmp_path / "ray"
    argv = [str(exported), str(corpus), "--output", str(output), "--shard-lines", "6", "--tokens-column", "words"]
    assert main([*argv, "--ray", "auto", "--workers", "2"]) == 0
    assert cluster.exists(), "no actor died: the test did not test a restart"
    assert shards(output) == shards(in_process)
    sources = [json.dumps(record["source"], sort_keys=True) for record in records(output)]
    assert len(sources) == len(set(sources)) == json.loads((output / "_manifest.json").read_text())["records"]


def test_a_rerun_on_ray_writes_only_the_missing_shards(exported, corpus, in_process, cluster, tmp_path):
    output = tmp_path / "ray"
    argv = [str(exported), str(corpus), "--output", str(output), "--shard-lines", "6", "--tokens-column", "words"]
    assert main([*argv, "--ray", "auto", "--workers", "2"]) == 0
    written = sorted(path for path in output.iterdir() if path.name != "_manifest.json")
    written[0].unlink()
    written[2].rename(written[2].with_name(written[2].name + ".part"))
    times = {path.name: path.stat().st_mtime_ns for path in written if path.exists()}
    assert main([*argv, "--ray", "auto", "--workers", "2"]) == 0
    assert shards(output) == shards(in_process)
    assert {name: (output / name).stat().st_mtime_ns for name in times} == times
