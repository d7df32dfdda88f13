"""
nerzoo_runtime: tags text with a tagger exported by nerzoo's `allennlp export`, with numpy and
onnxruntime only (no allennlp, no torch).  `Tagger.load(directory).tag(texts or token lists)`.
"""

from nerzoo_runtime.errors import TaggerInputError
from nerzoo_runtime.tagger import Tagger

__all__ = ["Tagger", "TaggerInputError"]
