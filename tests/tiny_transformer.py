"""A tiny randomly initialised BERT written to a directory (no download), for contextual word vectors."""

import pathlib
import string

import torch

WORDS = """eu rejects german call to boycott british lamb peter visited brussels on monday with anna of
the bank and in a is said was for at by it he from that has . , - ' " ( )""".split()


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
