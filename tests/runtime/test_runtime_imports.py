"""What importing the runtime loads: numpy, and none of onnxruntime, spaCy, tokenizers, pyarrow, ray, torch, allennlp or nerzoo."""

import json
import subprocess
import sys

import pytest

HEAVY = ("onnxruntime", "spacy", "tokenizers", "pyarrow", "ray", "torch", "allennlp", "nerzoo")
LIGHT_MODULES = [
    "nerzoo_runtime",
    "nerzoo_runtime.chains",
    "nerzoo_runtime.dependency_parse",
    "nerzoo_runtime.inputs",
    "nerzoo_runtime.ray_tagging",
    "nerzoo_runtime.span_decoding",
    "nerzoo_runtime.spacy_loading",
    "nerzoo_runtime.tag_corpus",
    "nerzoo_runtime.tag_scheme",
    "nerzoo_runtime.word_pieces",
    "nerzoo_runtime.word_shapes",
]


@pytest.mark.parametrize("module", LIGHT_MODULES)
def test_importing_it_loads_none_of_them(module):
    program = f"import json, sys, {module}\nprint(json.dumps({{name: name in sys.modules for name in {HEAVY!r}}}))\n"
    run = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120, check=True)
    loaded = json.loads(run.stdout)
    assert [name for name in HEAVY if loaded[name]] == []
