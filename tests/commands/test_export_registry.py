"""
Every encoder allennlp's registry holds (allennlp's and nerzoo's), wired into a tiny untrained
bilstm_crf (a Seq2SeqEncoder as its encoder, a Seq2VecEncoder as its character encoder): `allennlp
export` either writes it, tagging as the archive does, or refuses it by its registered name before
tracing.  A name the registry gains and these tables lack fails here.
"""

import json

import pytest
import torch
from allennlp.common import Params
from allennlp.common.checks import ConfigurationError
from allennlp.data import Vocabulary
from allennlp.models import Model
from allennlp.models.archival import archive_model
from allennlp.modules import Seq2SeqEncoder, Seq2VecEncoder

import nerzoo  # noqa: F401 (registers nerzoo's encoders)
from nerzoo.commands import export

LSTM = {"input_size": 6, "hidden_size": 3, "num_layers": 2, "bidirectional": True}
# A Seq2SeqEncoder from 6 features per word, by registered name.
SEQ2SEQ = {
    "lstm": LSTM,
    "gru": LSTM,
    "rnn": {**LSTM, "nonlinearity": "relu"},
    "fast_lstm": LSTM,
    "unpacked_lstm": LSTM,
    "alternating_lstm": {"input_size": 6, "hidden_size": 6, "num_layers": 2},
    "stacked_bidirectional_lstm": {"input_size": 6, "hidden_size": 3, "num_layers": 2},
    "pytorch_transformer": {"input_dim": 6, "num_layers": 1, "feedforward_hidden_dim": 8, "num_attention_heads": 2},
    "pass_through": {"input_dim": 6},
    "compose": {"encoders": [{"type": "gru", **LSTM}, {"type": "lstm", **LSTM}]},
    "feedforward": {"feedforward": {"input_dim": 6, "num_layers": 1, "hidden_dims": 6, "activations": "relu"}},
    "gated-cnn-encoder": {"input_dim": 6, "layers": [[[2, 6]], [[3, 6]]]},
    "residual_stack": {"layers": [{"type": "lstm", **LSTM}, {"type": "rnn", **LSTM}]},
    "relative_attention": {"input_dim": 6},
    "global_attention": {"input_dim": 6, "attention_dim": 4},
    "memory_hop": {"input_dim": 6, "hidden_dim": 6},
}
# A Seq2VecEncoder from 4 features per character, by registered name.
SEQ2VEC = {
    "lstm": {"input_size": 4, "hidden_size": 3, "num_layers": 2, "bidirectional": True},
    "gru": {"input_size": 4, "hidden_size": 3, "bidirectional": True},
    "rnn": {"input_size": 4, "hidden_size": 3},
    "alternating_lstm": {"input_size": 4, "hidden_size": 3, "num_layers": 2},
    "stacked_bidirectional_lstm": {"input_size": 4, "hidden_size": 3, "num_layers": 2},
    "cnn": {"embedding_dim": 4, "num_filters": 3, "ngram_filter_sizes": [2, 3]},
    "cnn-highway": {"embedding_dim": 4, "filters": [[2, 3]], "num_highway": 1, "projection_dim": 3},
    "boe": {"embedding_dim": 4, "averaged": True},
    "bag_of_embeddings": {"embedding_dim": 4},
    "cls_pooler": {"embedding_dim": 4},
    "fofe": {"input_dim": 4},
    "summed_gru": {"input_dim": 4, "hidden_dim": 3},
}
# Encoders a bilstm_crf cannot hold, and why.
NOT_WIRED_SEQ2SEQ = {
    "child_sum_tree_lstm": "reads dependency heads (deptree_ner's syntactic encoder, tested there)",
    "augmented_lstm": "allennlp's wrapper has no input size to give (AugmentedLstm lacks input_size)",
}
NOT_WIRED_SEQ2VEC = {
    "bert_pooler": "a pretrained transformer's pooler, not a character encoder",
    "augmented_lstm": "allennlp's wrapper has no output size to give (AugmentedLstm lacks hidden_size)",
}
WORDS = ["peter", "blackburn", "visited", "brussels", "on", "monday", ".", "anna", "keller", "oslo"]
TAGS = ["O", "B-PER", "L-PER", "U-PER", "U-LOC", "B-LOC", "I-LOC", "L-LOC"]


def tagger_archive(directory, encoder, character_encoder=None):
    """A bilstm_crf archive with `encoder` (and `character_encoder`), its weights as initialised."""
    indexers = {"tokens": {"type": "single_id", "lowercase_tokens": True}}
    embedders = {"tokens": {"type": "embedding", "embedding_dim": 6 if character_encoder is None else 3}}
    if character_encoder is not None:
        indexers["token_characters"] = {"type": "characters", "min_padding_length": 3}
        embedders["token_characters"] = {
            "type": "character_encoding",
            "embedding": {"embedding_dim": 4, "vocab_namespace": "token_characters"},
            "encoder": character_encoder,
        }
        encoder = {"type": "pass_through", "input_dim": 3 + character_encoder_dim(character_encoder)}
    model = {"type": "bilstm_crf", "text_field_embedder": {"token_embedders": embedders}, "encoder": encoder}
    config = {"dataset_reader": {"type": "conll_columns", "tag_column": 3, "token_indexers": indexers}, "model": model}
    config.update(train_data_path="unused", trainer={"num_epochs": 1})
    vocab = Vocabulary({"tokens": dict.fromkeys(WORDS, 1), "labels": dict.fromkeys(TAGS, 1)})
    vocab.add_tokens_to_namespace(sorted(set("".join(WORDS)) | set("PBAKO")), "token_characters")
    torch.manual_seed(0)
    built = Model.from_params(Params(json.loads(json.dumps(model))), vocab=vocab)
    vocab.save_to_files(str(directory / "vocabulary"))
    torch.save(built.state_dict(), directory / "best.th")
    (directory / "config.json").write_text(json.dumps(config))
    archive_model(str(directory))
    return directory / "model.tar.gz"


def character_encoder_dim(params):
    return Seq2VecEncoder.from_params(Params(json.loads(json.dumps(params)))).get_output_dim()


def assert_exported_or_refused_by_name(name, archive, output):
    try:
        card = export.export_archive(str(archive), str(output), spacy_model="blank:en")
    except ConfigurationError as error:
        assert f"cannot export this bilstm_crf: its encoder {name!r} has no exported form" in error.message
        assert not output.exists()
        return "refused"
    assert card["check"]["tags_equal"] and card["check"]["largest_confidence_difference"] <= 1e-4
    return "exported"


# Per kind: the registry, its encoders tried, those a tagger cannot wire, where one goes, some that must export.
KINDS = {
    "seq2seq": (
        Seq2SeqEncoder,
        SEQ2SEQ,
        NOT_WIRED_SEQ2SEQ,
        0,
        {"lstm", "gru", "rnn", "fast_lstm", "pass_through", "compose", "feedforward", "residual_stack"},
    ),
    "seq2vec": (Seq2VecEncoder, SEQ2VEC, NOT_WIRED_SEQ2VEC, 1, {"lstm", "gru", "rnn", "cnn", "summed_gru"}),
}


@pytest.mark.slow  # about 5 s an encoder
@pytest.mark.parametrize("kind", list(KINDS))
def test_every_registered_encoder_exports_equal_or_is_refused_by_name(kind, tmp_path):
    base, tried, not_wired, slot, must_export = KINDS[kind]
    assert set(base.list_available()) - set(not_wired) == set(tried), (
        f"a {kind} encoder the export has not been tried on"
    )
    outcomes = {}
    for name, params in tried.items():
        (tmp_path / name).mkdir()
        encoders = [None, None]
        encoders[slot] = {"type": name, **params}
        archive = tagger_archive(tmp_path / name, *encoders)
        outcomes[name] = assert_exported_or_refused_by_name(name, archive, tmp_path / name / "export")
    assert must_export <= {name for name, outcome in outcomes.items() if outcome == "exported"}


@pytest.mark.parametrize("name", ["stacked_bidirectional_lstm"])
def test_a_refusal_names_the_encoder_before_tracing(name, tmp_path, monkeypatch):
    archive = tagger_archive(tmp_path, {"type": name, **SEQ2SEQ[name]})
    monkeypatch.setattr(export, "write_graph", lambda *args: pytest.fail("traced"))
    with pytest.raises(ConfigurationError, match=f"^cannot export this bilstm_crf: its encoder '{name}' has no"):
        export.export_archive(str(archive), str(tmp_path / "export"))
