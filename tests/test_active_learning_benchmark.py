"""
benchmarks/active_learning.py on the fixtures (fixtures/conll2003/train.txt the pool): a seed set and
one round of `allennlp select --partial`, the file trained on against the gold tags, a second call
that trains nothing, and the table; the table's mean over seeds that stopped at different rounds.
"""

import json
import subprocess
import sys

import pytest
from nerzoo_runtime.tag_scheme import convert_tags, tags_to_spans

from tests import FIXTURES_ROOT, PROJECT_ROOT


def _sentences(path):
    """Each sentence of a CoNLL file as (tokens, last column), -DOCSTART- left out."""
    sentences, rows = [], []
    for line in path.read_text(encoding="utf-8").splitlines() + [""]:
        if line.strip() and not line.startswith("-DOCSTART-"):
            rows.append(line.split())
        elif rows:
            sentences.append(([row[0] for row in rows], [row[-1] for row in rows]))
            rows = []
    return sentences


@pytest.mark.slow
def test_partial_rounds_label_the_asked_stretches_with_whole_gold_entities(tmp_path):
    command = [sys.executable, "benchmarks/active_learning.py"]
    options = ["--output-root", tmp_path, "--data", "fixtures", "--strategy", "mnlp", "--partial", "0.9", "--seed", "4"]
    options += ["--seed-share", "40", "--round-share", "3", "--cap", "42", "--max-epochs", "5"]
    first = subprocess.run([*command, "run", *map(str, options)], cwd=PROJECT_ROOT, capture_output=True, text=True)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    run = tmp_path / "mnlp_partial0.9-4"
    rounds = json.loads((run / "curve.json").read_text())["rounds"]
    assert [record["round"] for record in rounds] == [0, 1]
    gold = {}
    for tokens, tags in _sentences(FIXTURES_ROOT / "conll2003" / "train.txt"):
        gold.setdefault(tuple(tokens), set()).add(tuple(convert_tags(tags, "BIO")))
    for number, record in enumerate(rounds):
        trained = _sentences(run / f"round-{number:02d}" / "train.bio")
        assert record["words"] == sum(tag != "-" for _, tags in trained for tag in tags)
        assert record["sentences"] == len(trained)
        for tokens, tags in trained:
            # the labelled tags are gold, and every gold entity is labelled whole or not at all
            assert any(all(tag in ("-", real) for tag, real in zip(tags, truth)) for truth in gold[tuple(tokens)])
            for _, start, end in tags_to_spans(next(iter(gold[tuple(tokens)]))):
                assert len({tag == "-" for tag in tags[start:end]}) == 1
    assert "-" not in {tag for _, tags in _sentences(run / "round-00" / "train.bio") for tag in tags}  # seed set whole
    assert "-" in {tag for _, tags in _sentences(run / "round-01" / "train.bio") for tag in tags}
    assert rounds[1]["words"] > rounds[0]["words"]

    trained_at = (run / "round-01" / "result.json").stat().st_mtime
    again = subprocess.run([*command, "run", *map(str, options)], cwd=PROJECT_ROOT, capture_output=True, text=True)
    assert again.returncode == 0 and (run / "round-01" / "result.json").stat().st_mtime == trained_at
    table = [*command, "table", "--output-root", str(tmp_path), "--target", "0"]
    printed = subprocess.run(table, cwd=PROJECT_ROOT, capture_output=True, text=True, check=True).stdout
    assert f"mnlp_partial0.9: reached at {rounds[0]['share']:.2f}% of the words" in printed


def test_the_table_averages_a_curve_to_the_last_round_every_seed_reached(tmp_path):
    for seed, tests in ((1, [50.0, 70.0, 80.0]), (2, [60.0, 74.0])):
        rounds = [{"round": n, "share": 1.0 + 2 * n, "dev": test, "test": test} for n, test in enumerate(tests)]
        (tmp_path / f"mnlp-{seed}").mkdir()
        (tmp_path / f"mnlp-{seed}" / "curve.json").write_text(json.dumps({"name": "mnlp", "rounds": rounds}))
    table = [sys.executable, "benchmarks/active_learning.py", "table", "--output-root", str(tmp_path)]
    printed = subprocess.run([*table, "--target", "71"], cwd=PROJECT_ROOT, capture_output=True, text=True, check=True)
    assert "| mnlp | 1 | 2 | 3.00 | 72.00 | 72.00 (70.00-74.00) |" in printed.stdout
    assert "| mnlp | 2 |" not in printed.stdout  # seed 1 alone
    assert "mnlp: reached at 3.00% of the words" in printed.stdout
    printed = subprocess.run([*table, "--target", "75"], cwd=PROJECT_ROOT, capture_output=True, text=True, check=True)
    assert "mnlp: not reached (best 72.00 at 3.00% of the words)" in printed.stdout
