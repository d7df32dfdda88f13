import json
import threading
import time

import pytest

from tests import PROJECT_ROOT

# The archives the server tests serve: the shipped configs, two epochs on the fixtures, by served name.
EXPERIMENTS = {
    "bilstm_crf": "bilstm_crf",
    "deptree_ner": "deptree_ner",
    "me_crf": "me_crf_conll2003",
    "fofe_ner": "fofe_ner",
}
MAX_CHARS = 400


@pytest.fixture(scope="session")
def served_archives(tmp_path_factory):
    from allennlp.commands.train import train_model_from_file

    import nerzoo  # noqa: F401

    root = tmp_path_factory.mktemp("served")
    archives = {}
    for name, config in EXPERIMENTS.items():
        train_model_from_file(
            str(PROJECT_ROOT / "training_config" / f"{config}.jsonnet"),
            str(root / name),
            overrides=json.dumps({"trainer.num_epochs": 2}),
        )
        archives[name] = root / name / "model.tar.gz"
    return archives


@pytest.fixture(scope="session")
def served_models(served_archives):
    from nerzoo.server.served_model import ServedModel

    return [ServedModel(name, str(path)) for name, path in served_archives.items()]


@pytest.fixture(scope="session")
def live_server(served_models):
    """The app on a real uvicorn server in a thread of this process: its base URL."""
    import uvicorn

    from nerzoo.server.app import create_app

    config = uvicorn.Config(
        create_app(served_models, max_chars=MAX_CHARS), host="127.0.0.1", port=0, log_level="warning"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not (server.started and server.servers):
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the test server did not start")
        time.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)
