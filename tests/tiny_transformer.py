"""
Tiny randomly initialised BERTs (no download) for contextual word vectors, in the tests' cache
(tests/conftest.py writes them): 16 wide for the modules' tests, and as wide as the bundled
all-MiniLM-L6-v2 (384) for the shipped contextual configs, which take it through overrides.
"""

import os
import pathlib
import string
from typing import Any, Dict

import torch

WORDS = """eu rejects german call to boycott british lamb peter visited brussels on monday with anna of
the bank and in a is said was for at by it he from that has . , - ' " ( )""".split()


# The width of the bundled model, which training_config/contextual.libsonnet writes.
BUNDLED_WIDTH = 384
CONTEXTUAL_TYPES = ("contextual_word_pieces", "contextual_word_vectors")


def tiny_bert_directory(hidden_size: int = 16) -> pathlib.Path:
    """Where tests/conftest.py writes the tiny BERT of `hidden_size` (the tests' cache)."""
    return pathlib.Path(os.environ["NERZOO_CACHE"]) / f"tiny-bert-{hidden_size}"


def tiny_bert_overrides(params: Any, prefix: str = "") -> Dict[str, str]:
    """
    Overrides (`-o`) that point every `contextual_word_pieces` indexer and `contextual_word_vectors`
    embedder of a config's `params` (a dict) at the tiny BERT as wide as the bundled model.
    """
    found: Dict[str, str] = {}
    if isinstance(params, dict):
        if params.get("type") in CONTEXTUAL_TYPES:
            found[prefix + "model_name"] = str(tiny_bert_directory(BUNDLED_WIDTH))
        for key, value in params.items():
            found.update(tiny_bert_overrides(value, f"{prefix}{key}."))
    elif isinstance(params, list):
        for index, value in enumerate(params):
            found.update(tiny_bert_overrides(value, f"{prefix}{index}."))
    return found


def write_tiny_bert(directory: pathlib.Path, hidden_size: int = 16, num_layers: int = 2) -> pathlib.Path:
    """
    An uncased BERT with `num_layers` layers of `hidden_size` in `directory`: a Hugging Face model
    directory that AllenNLP's `pretrained_transformer_mismatched` indexer and nerzoo's
    `contextual_word_vectors` load like a real one.  Its word-piece vocabulary holds a few words and
    every letter and digit (alone and as a `##` continuation), so other words split into pieces.
    """
    from transformers import BertConfig, BertModel, BertTokenizerFast

    directory = pathlib.Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    characters = string.ascii_lowercase + string.digits
    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS, *characters, *("##" + c for c in characters)]
    (directory / "vocab.txt").write_text("\n".join(dict.fromkeys(vocabulary)) + "\n")
    BertTokenizerFast(vocab_file=str(directory / "vocab.txt"), do_lower_case=True).save_pretrained(str(directory))
    config = BertConfig(
        vocab_size=len(dict.fromkeys(vocabulary)),
        hidden_size=hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=2,
        intermediate_size=2 * hidden_size,
        max_position_embeddings=512,
    )
    torch.manual_seed(0)
    BertModel(config).save_pretrained(str(directory))
    return directory
