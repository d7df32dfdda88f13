"""Offline loading of spaCy pipelines (`nerzoo_runtime.spacy_loading`), failing as a `ConfigurationError`."""

import functools

from allennlp.common.checks import ConfigurationError
from nerzoo_runtime.spacy_loading import DEFAULT_SPACY_PIPELINE, load_spacy


class MissingSpacyPipeline(ConfigurationError):
    """A spaCy pipeline that is not installed: a problem of the setup, not of one input."""


@functools.lru_cache(maxsize=None)
def load_spacy_pipeline(name: str = DEFAULT_SPACY_PIPELINE):
    """`nerzoo_runtime.spacy_loading.load_spacy`, once per name; a missing pipeline is one `MissingSpacyPipeline`."""
    try:
        return load_spacy(name, otherwise='or choose another with `spacy_model` ("blank:en" tokenises without a model)')
    except OSError as error:
        raise MissingSpacyPipeline(str(error)) from None
