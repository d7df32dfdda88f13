import argparse
import pathlib
import socket
import sys
from typing import List, Tuple

from allennlp.commands.subcommand import Subcommand

from nerzoo.commands import one_line_errors
from nerzoo.data.spacy_pipelines import DEFAULT_SPACY_PIPELINE


@Subcommand.register("serve")
class Serve(Subcommand):
    """
    `allennlp serve ARCHIVE [ARCHIVE ...] --port 8000 --include-package nerzoo` serves trained
    taggers: a JSON API (`/api/...`, see `nerzoo.server.app`) and a page at `/` that draws the
    entities with their confidences, the dependency trees and the attention of the models that have
    them, two models side by side.  Each archive is served under its own name: `NAME=ARCHIVE`, or by
    default the archive's directory (`runs/deptree_ner/model.tar.gz` -> `deptree_ner`).

    Registered as a `Subcommand` with name "serve".
    """

    def add_subparser(self, parser: argparse._SubParsersAction) -> argparse.ArgumentParser:
        subparser = parser.add_parser(self.name, description=self.__doc__, help="Serve taggers: a JSON API and a page.")
        subparser.add_argument("archives", nargs="+", metavar="[NAME=]ARCHIVE", help="model.tar.gz files")
        subparser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
        subparser.add_argument("--port", type=int, default=8000)
        subparser.add_argument("--cuda-device", type=int, default=-1)
        subparser.add_argument("--spacy-model", default=DEFAULT_SPACY_PIPELINE, help="tokenises raw text")
        subparser.add_argument(
            "--max-batch-size", type=int, default=32, help="requests per batch at most; 1: one request per forward pass"
        )
        subparser.add_argument(
            "--max-wait-ms",
            type=float,
            default=5.0,
            help="how long a batch waits for more requests under load (default 5)",
        )
        subparser.add_argument("--max-chars", type=int, default=10_000, help="longest text a request may send")
        subparser.add_argument(
            "--dtype",
            choices=("float64", "float32"),
            default="float64",
            help="float64 (default): an answer never depends on the requests batched with it; float32: faster",
        )
        subparser.set_defaults(func=_serve)
        return subparser


def named_archives(arguments: List[str]) -> List[Tuple[str, str]]:
    """`[NAME=]ARCHIVE` arguments -> `(name, path)`; names are unique, archives exist."""
    named = []
    for argument in arguments:
        name, separator, path = argument.partition("=")
        if not separator:
            path = argument
            file = pathlib.Path(path)
            name = file.parent.name if file.name == "model.tar.gz" and file.parent.name else file.name.split(".")[0]
        if not name or not all(character.isalnum() or character in "-_." for character in name):
            raise ValueError(f"{argument}: a model name is letters, digits, '-', '_' or '.', got {name!r}")
        if not pathlib.Path(path).is_file():
            raise ValueError(f"{argument}: no archive at {path}")
        named.append((name, path))
    names = [name for name, _ in named]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ValueError(f"two archives are named {duplicates}: name them with NAME=ARCHIVE")
    return named


def _serve(args: argparse.Namespace) -> None:
    with one_line_errors((ValueError,)):
        named = named_archives(args.archives)
    try:  # before the models load
        with socket.socket(socket.AF_INET6 if ":" in args.host else socket.AF_INET) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((args.host, args.port))
    except OSError as error:
        sys.exit(f"error: cannot listen on {args.host} port {args.port}: {error.strerror or error}")
    import uvicorn

    from nerzoo.server.app import create_app
    from nerzoo.server.served_model import ServedModel

    models = []
    for name, path in named:
        try:
            models.append(ServedModel(name, path, args.cuda_device, args.dtype, args.spacy_model))
        except Exception as error:  # noqa: BLE001 - one line naming the archive, not a traceback
            sys.exit(f"error: {path}: cannot serve this archive: {type(error).__name__}: {error}")
    app = create_app(models, args.max_batch_size, args.max_wait_ms / 1000, args.max_chars)
    print(f"serving {', '.join(name for name, _ in named)} at http://{args.host}:{args.port}/", flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
