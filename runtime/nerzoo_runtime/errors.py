"""The runtime's error of one input."""


class TaggerInputError(ValueError):
    """An input the tagger cannot use; the others of its call are tagged."""
