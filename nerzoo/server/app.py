"""
The JSON API and the page of `allennlp serve` (routes in docs/serving.md): every error a 4xx with
`{"error": "..."}` naming what is wrong; requests that arrive together share a forward pass.
"""

import concurrent.futures
import contextlib
import json
import pathlib
from typing import Any, Dict, List, Optional

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from nerzoo.predictors.sequence_tagger import INPUT_KEYS, PARSE_KEYS
from nerzoo.server.batching import DynamicBatcher
from nerzoo.server.served_model import ServedModel

STATIC = pathlib.Path(__file__).parent / "static"
ASSETS = {"page.js": "text/javascript", "page.css": "text/css"}
OPTION_KEYS = ("attention", "tag_probabilities")
KNOWN_KEYS = set(INPUT_KEYS) | set(OPTION_KEYS) | set(PARSE_KEYS)
# The browser runs only the page's own script and loads nothing from elsewhere.
PAGE_POLICY = "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"


class InputError(Exception):
    """A request the server cannot use: answered with `status` and `{"error": message}`."""

    def __init__(self, message: str, status: int = 422) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


def create_app(
    models: List[ServedModel], max_batch_size: int = 32, max_wait: float = 0.005, max_chars: int = 10_000
) -> FastAPI:
    """
    # Parameters

    models : `List[ServedModel]`, each under its own `name`.
    max_batch_size : `int`, optional (default = `32`)
        Requests per batch at most (a batch may take several forward passes, see
        `ServedModel.predict_batch`); 1 runs one request per forward pass.
    max_wait : `float`, optional (default = `0.005`)
        Seconds a batch waits for more requests, while requests arrive together.
    max_chars : `int`, optional (default = `10000`)
        The longest text (or tokens joined by spaces) a request may send; a request body may be
        four times that in bytes (JSON escapes), plus 4 KiB.
    """
    by_name = {model.name: model for model in models}  # `named_archives` made the names unique
    # One worker thread runs every model's forward passes, one batch at a time (torch's threads share out each).
    executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="nerzoo-predict")
    batchers: Dict[str, DynamicBatcher] = {
        name: DynamicBatcher(model.predict_batch, executor, max_batch_size, max_wait) for name, model in by_name.items()
    }
    limits = {"max_chars": max_chars, "max_batch_size": max_batch_size, "max_wait_ms": max_wait * 1000}
    max_body = 4 * max_chars + 4096
    page = (STATIC / "index.html").read_text(encoding="utf-8")
    assets = {name: (STATIC / name).read_text(encoding="utf-8") for name in ASSETS}

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        yield
        for batcher in batchers.values():
            await batcher.close()
        executor.shutdown(wait=False, cancel_futures=True)

    app = FastAPI(title="nerzoo", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.batchers = batchers

    @app.exception_handler(InputError)
    async def input_error(request: Request, error: InputError) -> JSONResponse:
        return JSONResponse({"error": error.message}, status_code=error.status)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, error: StarletteHTTPException) -> JSONResponse:
        if error.status_code == 404:
            message = f"no route {request.url.path}"
        elif error.status_code == 405:  # starlette's routing says which methods the path takes
            allowed = (error.headers or {}).get("Allow") or "nothing"
            message = f"{request.method} is not allowed on {request.url.path}; it takes {allowed}"
        else:
            message = str(error.detail)
        return JSONResponse({"error": message}, status_code=error.status_code, headers=error.headers)

    @app.exception_handler(Exception)
    async def server_error(request: Request, error: Exception) -> JSONResponse:
        message = f"the server failed on this request: {type(error).__name__}: {str(error)[:300]}"
        return JSONResponse({"error": message}, status_code=500)

    @app.get("/", response_class=HTMLResponse)
    async def index() -> HTMLResponse:
        return HTMLResponse(page, headers={"Content-Security-Policy": PAGE_POLICY})

    @app.get("/assets/{name}")
    async def asset(name: str) -> Response:
        if name not in assets:
            raise InputError(f"no asset {name!r}", status=404)
        return Response(assets[name], media_type=ASSETS[name])

    @app.get("/api/health")
    async def health() -> Dict[str, Any]:
        return {"status": "ok", "models": list(by_name)}

    @app.get("/api/models")
    async def list_models() -> Dict[str, Any]:
        return {"models": [model.metadata for model in by_name.values()], "limits": limits}

    @app.get("/api/models/{name}")
    async def one_model(name: str) -> Dict[str, Any]:
        return {**_model(by_name, name).metadata, "limits": limits}

    @app.post("/api/models/{name}/predict")
    async def predict(name: str, request: Request) -> JSONResponse:
        model = _model(by_name, name)
        body = await _read_body(request, max_body)
        inputs, options = _check_input(body, model, max_chars)
        result = await batchers[name].submit((inputs, options))
        if "error" in result:
            raise InputError(result["error"])
        return JSONResponse(result)

    return app


def _model(by_name: Dict[str, ServedModel], name: str) -> ServedModel:
    if name not in by_name:
        raise InputError(f"no model named {name!r}; this server has {sorted(by_name)}", status=404)
    return by_name[name]


async def _read_body(request: Request, max_body: int) -> Any:
    """The request's JSON, read no further than `max_body` bytes."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > max_body:
        raise InputError(f"the request body is over the limit of {max_body} bytes ({declared})", status=413)
    raw = bytearray()
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > max_body:
            raise InputError(f"the request body is over the limit of {max_body} bytes", status=413)
    if not raw.strip():
        raise InputError('the request body is empty; send a JSON object such as {"sentence": "..."}', status=400)
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise InputError("the request body is not UTF-8", status=400) from None
    except json.JSONDecodeError as error:
        raise InputError(
            f"the request body is not JSON ({error.msg}, line {error.lineno} column {error.colno})", 400
        ) from None


def _check_input(body: Any, model: ServedModel, max_chars: int):
    """The predictor's input and the options `(attention, tag_probabilities)`; what is checked here
    is what the predictor would not refuse (empty or long text, unknown keys, options)."""
    if not isinstance(body, dict):
        raise InputError(f"the request body must be a JSON object, got {type(body).__name__}", status=400)
    unknown = sorted(set(body) - KNOWN_KEYS)
    if unknown:
        raise InputError(
            f"unknown keys {unknown}; an input has one of {list(INPUT_KEYS)} and optionally {list(OPTION_KEYS)}"
        )
    given = [key for key in INPUT_KEYS if key in body]
    if len(given) != 1:
        raise InputError(f"an input has exactly one of {list(INPUT_KEYS)}, got {given or 'none'}")
    key = given[0]
    text = _text_of(key, body[key])
    if text is not None:
        if not text.strip():
            raise InputError(f'"{key}" is empty: there is nothing to tag')
        if len(text) > max_chars:
            raise InputError(f'"{key}" has {len(text)} characters; the limit is {max_chars}', status=413)
    options = []
    for option in OPTION_KEYS:
        flag = body.get(option, False)
        if not isinstance(flag, bool):
            raise InputError(f'"{option}" must be true or false, got {json.dumps(flag)[:50]}')
        options.append(flag)
    if options[1] and not model.has_tag_probabilities:
        raise InputError(f"{model.name} classifies spans and has no tag probabilities; its spans carry a `score`")
    inputs = {name: value for name, value in body.items() if name not in OPTION_KEYS}
    return inputs, tuple(options)


def _text_of(key: str, value: Any) -> Optional[str]:
    """The text a well-typed input carries (tokens joined by spaces); `None` where the type is wrong
    (the predictor names it)."""
    if key in ("sentence", "document"):
        return value if isinstance(value, str) else None
    if key == "tokens" and isinstance(value, list) and all(isinstance(word, str) for word in value):
        return " ".join(value)
    if key == "sentences" and isinstance(value, list) and all(isinstance(sentence, list) for sentence in value):
        if all(isinstance(word, str) for sentence in value for word in sentence):
            return " ".join(" ".join(sentence) for sentence in value)
    return None
