"""A Ray worker's setup hook for tests: an actor that dies once, at a fixed input (no heavy imports)."""

import json
import os
import pathlib

MARKER_WORD = "Zanzibarian"  # the input at which an actor kills itself, once


def die_once_at_the_marker() -> None:
    """`Tagger.tag` ends the process at the marker word the first time (a marker file says it happened)."""
    from nerzoo_runtime.tagger import Tagger

    tag, marker = Tagger.tag, pathlib.Path(os.environ["NERZOO_TEST_DIE_MARKER"])

    def dying_tag(self, inputs, batch_size=64):
        if any(MARKER_WORD in json.dumps(one) for one in inputs):
            try:
                marker.touch(exist_ok=False)
            except FileExistsError:
                pass
            else:
                os._exit(1)
        return tag(self, inputs, batch_size)

    Tagger.tag = dying_tag
