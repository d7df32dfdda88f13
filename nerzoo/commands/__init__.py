import contextlib
import logging
import sys
from typing import Iterator, Tuple, Type

from allennlp.common.checks import ConfigurationError


@contextlib.contextmanager
def one_line_errors(errors: Tuple[Type[Exception], ...] = (ConfigurationError, OSError)) -> Iterator[None]:
    """Quietens allennlp's logging; `errors` exit as one line `error: ...`."""
    logging.getLogger("allennlp").setLevel(logging.WARNING)
    try:
        yield
    except errors as error:
        sys.exit(f"error: {error}")
