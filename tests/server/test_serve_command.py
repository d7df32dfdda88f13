"""
The real `allennlp serve` in a subprocess: it serves two archives, answers 200 concurrent requests
of which 10% are malformed (each good one as it is answered alone, each bad one with a 4xx) and
stays up; a missing or ambiguous archive is one line on stderr.
"""

import asyncio

import httpx
import pytest

from nerzoo.commands.serve import named_archives
from nerzoo.server.server_process import ServerProcess
from tests import PROJECT_ROOT, allennlp

pytestmark = [pytest.mark.xdist_group("server"), pytest.mark.end_to_end]

SENTENCES = [
    "Anna Keller of Norvik Bank visited Oslo on Monday .",
    "Peter Blackburn met Tomas Varga in Brussels .",
    "The European Commission said on Thursday it disagreed with German advice .",
    "Lena Holm won .",
]
MALFORMED = [b"{", b"[]", b'{"sentence": ""}', b'{"tokens": [1, 2]}', b'{"text": "Oslo"}']


@pytest.fixture(scope="module")
def served(served_archives):
    archives = [served_archives["bilstm_crf"], f"tree={served_archives['deptree_ner']}"]
    with ServerProcess(archives, cwd=PROJECT_ROOT) as server:
        yield server.process, server.url


def test_two_archives_under_their_names(served):
    _, base = served
    assert httpx.get(f"{base}/api/health").json() == {"status": "ok", "models": ["bilstm_crf", "tree"]}
    assert httpx.get(f"{base}/").status_code == 200


def test_200_concurrent_requests_with_10_percent_malformed(served):
    process, base = served
    requests = []
    for index in range(200):
        model = ("bilstm_crf", "tree")[index % 2]
        if index % 10 == 3:
            requests.append((model, MALFORMED[index % len(MALFORMED)], None))
        else:
            sentence = SENTENCES[index % len(SENTENCES)]
            requests.append((model, None, {"sentence": sentence, "attention": model == "tree" and index % 4 == 0}))
    alone = {}
    for model, _, body in requests:
        if body is not None and (model, str(body)) not in alone:
            alone[model, str(body)] = httpx.post(f"{base}/api/models/{model}/predict", json=body).json()

    async def together():
        async with httpx.AsyncClient(base_url=base, timeout=120, limits=httpx.Limits(max_connections=200)) as http:
            return await asyncio.gather(
                *(
                    http.post(f"/api/models/{model}/predict", json=body)
                    if body is not None
                    else http.post(
                        f"/api/models/{model}/predict", content=raw, headers={"content-type": "application/json"}
                    )
                    for model, raw, body in requests
                )
            )

    answers = asyncio.run(together())
    for (model, _, body), answer in zip(requests, answers):
        if body is None:
            assert 400 <= answer.status_code < 500 and answer.json()["error"]
        else:
            assert answer.status_code == 200 and answer.json() == alone[model, str(body)]
    assert process.poll() is None
    assert httpx.get(f"{base}/api/health").status_code == 200


def test_a_missing_archive_is_one_line(tmp_path):
    result = allennlp("serve", tmp_path / "none.tar.gz", "--include-package", "nerzoo", check=False)
    assert result.returncode != 0
    assert (
        result.stderr.strip().splitlines()[-1]
        == f"error: {tmp_path / 'none.tar.gz'}: no archive at {tmp_path / 'none.tar.gz'}"
    )
    assert "Traceback" not in result.stderr


def test_an_archive_that_cannot_be_served_is_one_line(tmp_path):
    broken = tmp_path / "broken" / "model.tar.gz"
    broken.parent.mkdir()
    broken.write_bytes(b"not an archive")
    result = allennlp("serve", broken, "--include-package", "nerzoo", check=False)
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith(f"error: {broken}: cannot serve this archive:")


def test_archive_names(tmp_path):
    for directory in ("a", "b"):
        (tmp_path / directory).mkdir()
        (tmp_path / directory / "model.tar.gz").write_bytes(b"")
    first, second = str(tmp_path / "a" / "model.tar.gz"), str(tmp_path / "b" / "model.tar.gz")
    assert named_archives([first, f"other={second}"]) == [("a", first), ("other", second)]
    with pytest.raises(ValueError, match=r"two archives are named \['a'\]"):
        named_archives([first, f"a={second}"])
    with pytest.raises(ValueError, match="a model name is"):
        named_archives([f"a/b={first}"])


def test_the_port_in_use_is_one_line(served, served_archives):
    _, base = served
    port = base.rsplit(":", 1)[1]
    result = allennlp(
        "serve", served_archives["bilstm_crf"], "--port", port, "--include-package", "nerzoo", check=False
    )
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert f"port {port}" in result.stderr.strip().splitlines()[-1]


def test_a_server_process_that_cannot_start_says_why(tmp_path):
    with pytest.raises(RuntimeError, match="no archive at"):
        ServerProcess([str(tmp_path / "none.tar.gz")], cwd=PROJECT_ROOT)
