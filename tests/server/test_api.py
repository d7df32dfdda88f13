"""
Every route and every error of the JSON API (`fastapi.testclient`), on archives trained on the
fixtures: the answers are the `sequence_tagger` predictor's, concurrent requests share forward
passes and get the answer they get alone, bad requests get a 4xx that names what is wrong.
"""

import asyncio
import json
import re

import httpx
import pytest
from allennlp.models.archival import load_archive
from allennlp.predictors import Predictor
from fastapi.testclient import TestClient

from nerzoo.server.app import STATIC, create_app
from tests.server.conftest import MAX_CHARS

pytestmark = pytest.mark.xdist_group("server")

TEXT = "Anna Keller of Norvik Bank visited Oslo on Monday ."
DOCUMENT = "Anna Keller visited Oslo. Then Peter Blackburn met Tomas Varga in Brussels."


@pytest.fixture(scope="module")
def client(served_models):
    with TestClient(create_app(served_models, max_chars=MAX_CHARS), raise_server_exceptions=False) as client:
        yield client


def predict(client, model, body):
    return client.post(f"/api/models/{model}/predict", json=body)


def test_the_page_and_its_own_assets_only(client):
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert '<script src="/assets/page.js">' in page.text
    assert page.headers["content-security-policy"].startswith("default-src 'self'")
    for name, kind in (("page.js", "text/javascript"), ("page.css", "text/css")):
        asset = client.get(f"/assets/{name}")
        assert asset.status_code == 200 and asset.headers["content-type"].startswith(kind)
    for path in (
        "/assets/index.html",
        "/assets/..%2Fapp.py",
        "/assets/%2e%2e%2fapp.py",
        "/assets/../app.py",
        "/static/page.js",
    ):
        answer = client.get(path)
        assert answer.status_code == 404 and "error" in answer.json(), path


def test_the_page_loads_nothing_from_elsewhere():
    for path in STATIC.iterdir():
        text = path.read_text()
        # The only URL is the SVG namespace, a name rather than an address the page fetches.
        assert set(re.findall(r"https?://[^\s\"')]+", text)) <= {"http://www.w3.org/2000/svg"}, path.name
        assert not re.search(r"\binnerHTML\b|outerHTML|insertAdjacentHTML|document\.write", text), path.name


def test_health_and_metadata(client):
    assert client.get("/api/health").json() == {
        "status": "ok",
        "models": ["bilstm_crf", "deptree_ner", "me_crf", "fofe_ner"],
    }
    listed = client.get("/api/models").json()
    assert listed["limits"]["max_chars"] == MAX_CHARS
    models = {model["name"]: model for model in listed["models"]}
    assert models["bilstm_crf"]["features"] == {
        "parse": False,
        "attention": [],
        "tag_probabilities": True,
        "documents": False,
    }
    assert models["deptree_ner"]["features"]["parse"] is True
    assert models["deptree_ner"]["features"]["attention"] == ["relative_attention", "global_attention"]
    assert models["me_crf"]["features"]["attention"] == ["memory_attention"]
    assert models["me_crf"]["features"]["documents"] is True
    assert models["fofe_ner"]["features"]["tag_probabilities"] is False
    for model in models.values():
        assert model["labels"] == ["LOC", "MISC", "ORG", "PER"]
        assert all(value == 1.0 for value in model["temperatures"].values()) and model["temperatures"]
    assert models["bilstm_crf"]["tag_scheme"] == "BIOUL" and "U-LOC" in models["bilstm_crf"]["tags"]
    one = client.get("/api/models/deptree_ner").json()
    assert one["name"] == "deptree_ner" and one["limits"] == listed["limits"]


@pytest.mark.parametrize("model", ["bilstm_crf", "deptree_ner", "me_crf", "fofe_ner"])
def test_a_sentence_gets_the_predictors_answer_with_offsets_into_the_text(client, served_archives, model):
    answer = predict(client, model, {"sentence": TEXT})
    assert answer.status_code == 200
    result = answer.json()
    assert [TEXT[start:end] for start, end in result["token_offsets"]] == result["tokens"]
    for span in result["spans"]:
        assert TEXT[span["char_start"] : span["char_end"]] == span["text"]
    # The same as `allennlp predict` (float32 there: confidences agree to rounding).
    alone = Predictor.from_archive(load_archive(str(served_archives[model])), "sequence_tagger").predict_json(
        {"sentence": TEXT}
    )
    assert set(result) == set(alone) and result["tags"] == alone["tags"]
    assert [span["label"] for span in result["spans"]] == [span["label"] for span in alone["spans"]]
    assert result["tag_confidences"] == pytest.approx(alone["tag_confidences"], abs=1e-4)


def test_every_input_form(client):
    tokens = predict(client, "bilstm_crf", {"tokens": ["Anna", "Keller", "visited", "Oslo", "."]}).json()
    assert tokens["tokens"] == ["Anna", "Keller", "visited", "Oslo", "."] and tokens["token_offsets"][1] == [5, 11]
    document = predict(client, "me_crf", {"document": DOCUMENT}).json()
    assert len(document["sentences"]) == 2
    assert DOCUMENT[document["token_offsets"][document["sentences"][1][0]][0] :].startswith("Then")
    sentences = predict(
        client, "me_crf", {"sentences": [["Anna", "visited", "Oslo", "."], ["Then", "she", "left", "."]]}
    )
    assert sentences.json()["sentences"] == [[0, 4], [4, 8]]
    parse = {
        "pos_tags": ["NNP", "VBD", "NNP"],
        "dependency_labels": ["nsubj", "ROOT", "dobj"],
        "head_indices": [2, 0, 2],
    }
    parsed = predict(client, "deptree_ner", {"tokens": ["Anna", "visited", "Oslo"], **parse}).json()
    assert parsed["parse"] == parse


def test_attention_and_tag_probabilities_on_request(client):
    plain = predict(client, "deptree_ner", {"sentence": TEXT}).json()
    assert "relative_attention" not in plain and "tag_probabilities" not in plain and "parse" in plain
    shown = predict(client, "deptree_ner", {"sentence": TEXT, "attention": True, "tag_probabilities": True}).json()
    length = len(shown["tokens"])
    assert len(shown["relative_attention"]) == length and all(len(row) == length for row in shown["relative_attention"])
    assert len(shown["global_attention"]) == length and len(shown["tag_probabilities"]) == length
    assert shown["tags"] == plain["tags"] and shown["tag_confidences"] == plain["tag_confidences"]
    memory = predict(client, "me_crf", {"document": DOCUMENT, "attention": True}).json()["memory_attention"]
    assert memory and all(
        len(hop) == len(predict(client, "me_crf", {"document": DOCUMENT}).json()["tokens"]) for hop in memory
    )
    refused = predict(client, "fofe_ner", {"sentence": TEXT, "tag_probabilities": True})
    assert refused.status_code == 422 and "no tag probabilities" in refused.json()["error"]


def test_markup_comes_back_as_text(client):
    token = "<img src=x onerror=alert(1)>"
    answer = predict(client, "bilstm_crf", {"tokens": ["Anna", token, "Oslo"]})
    assert answer.headers["content-type"] == "application/json" and answer.json()["tokens"][1] == token


BAD_REQUESTS = [
    # (body bytes, status, a fragment of the error)
    (b"", 400, "body is empty"),
    (b"{", 400, "not JSON"),
    (b"\xff\xfe", 400, "not UTF-8"),
    (b"[1, 2]", 400, "must be a JSON object"),
    (b'"Anna"', 400, "must be a JSON object"),
    (b'{"sentence": ""}', 422, "is empty"),
    (b'{"sentence": " \\n "}', 422, "is empty"),
    (b'{"document": ""}', 422, "is empty"),
    (b'{"tokens": []}', 422, "is empty"),
    (b'{"sentence": 5}', 422, "got {'sentence': 5}"),
    (b'{"tokens": "Anna Keller"}', 422, "got {'tokens': 'Anna Keller'}"),
    (b'{"tokens": ["Anna", 3]}', 422, "a token list must hold non-blank strings, got ['Anna', 3]"),
    (b'{"tokens": ["Anna", " "]}', 422, "a token list must hold non-blank strings, got ['Anna', ' ']"),
    (b'{"sentences": [["Anna"], "Oslo"]}', 422, '"sentences" must be'),
    (b'{"text": "Anna"}', 422, "unknown keys ['text']"),
    (b"{}", 422, "exactly one of"),
    (b'{"sentence": "Anna", "tokens": ["Anna"]}', 422, "exactly one of"),
    (b'{"sentence": "Anna", "attention": "yes"}', 422, '"attention" must be true or false'),
    (json.dumps({"sentence": "x" * (MAX_CHARS + 1)}).encode(), 413, f"the limit is {MAX_CHARS}"),
    (json.dumps({"tokens": ["x"] * MAX_CHARS}).encode(), 413, f"the limit is {MAX_CHARS}"),
    (b" " * (4 * MAX_CHARS + 4097), 413, "over the limit"),
]


@pytest.mark.parametrize("body, status, fragment", BAD_REQUESTS, ids=[fragment for _, _, fragment in BAD_REQUESTS])
def test_a_bad_request_gets_a_4xx_naming_it_and_the_server_goes_on(client, body, status, fragment):
    answer = client.post("/api/models/bilstm_crf/predict", content=body, headers={"content-type": "application/json"})
    assert answer.status_code == status
    assert fragment in answer.json()["error"]
    assert predict(client, "bilstm_crf", {"sentence": TEXT}).status_code == 200


def test_unknown_models_routes_and_methods(client):
    unknown = predict(client, "nope", {"sentence": TEXT})
    assert unknown.status_code == 404 and "no model named 'nope'" in unknown.json()["error"]
    assert "bilstm_crf" in unknown.json()["error"]
    assert client.get("/api/models/nope").status_code == 404
    assert client.get("/api/nothing").json() == {"error": "no route /api/nothing"}
    wrong_method = client.get("/api/models/bilstm_crf/predict")
    assert wrong_method.status_code == 405 and "POST" in wrong_method.json()["error"]
    # An archive path is a model name like any other: nothing is loaded.
    loading = predict(client, "..%2F..%2Fmodel.tar.gz", {"sentence": TEXT})
    assert loading.status_code == 404


def test_concurrent_requests_share_forward_passes_and_get_their_answer_alone(client):
    app = client.app
    texts = [" ".join(TEXT.split()[: 2 + index % 9]) + f" {index} ." for index in range(48)]
    alone = [predict(client, "bilstm_crf", {"sentence": text}).json() for text in texts]
    batcher = app.state.batchers["bilstm_crf"]
    batches_before = len(batcher.batch_sizes)

    async def together():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
            answers = await asyncio.gather(
                *(http.post("/api/models/bilstm_crf/predict", json={"sentence": text}) for text in texts)
            )
        return [answer.json() for answer in answers]

    assert asyncio.run(together()) == alone
    sizes = batcher.batch_sizes[batches_before:]
    assert sum(sizes) == len(texts) and max(sizes) > 1


def test_a_failing_forward_pass_costs_only_its_own_request(served_models, monkeypatch):
    model = served_models[0]
    real = model.predict_batch

    def failing(requests):
        if any(inputs.get("sentence") == "boom" for inputs, _ in requests):
            raise RuntimeError("a model bug")
        return real(requests)

    monkeypatch.setattr(model, "predict_batch", failing)
    app = create_app([model], max_wait=0.05)

    async def together():
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
            bodies = [{"sentence": TEXT}, {"sentence": "boom"}, {"sentence": "Oslo ."}]
            return await asyncio.gather(*(http.post(f"/api/models/{model.name}/predict", json=b) for b in bodies))

    good, bad, other = asyncio.run(together())
    assert good.status_code == other.status_code == 200
    assert bad.status_code == 500 and "RuntimeError" in bad.json()["error"]
    assert app.state.batchers[model.name].batch_sizes[0] == 3
