"""
One table over every component nerzoo registers (as thinc's layer API test does): each entry is
built from a tiny config and checked.  A newly registered component that is missing from the table
fails `test_every_registered_component_is_in_the_table`.
"""

import argparse
import inspect
import json

import pytest
import torch
from allennlp.commands.subcommand import Subcommand
from allennlp.commands.train import TrainModel
from allennlp.common import Params, Registrable
from allennlp.data import DatasetReader, TokenIndexer, Vocabulary
from allennlp.data.data_loaders.data_collator import DataCollator
from allennlp.models import Model
from allennlp.modules.seq2seq_encoders import Seq2SeqEncoder
from allennlp.modules.seq2vec_encoders import Seq2VecEncoder
from allennlp.modules.token_embedders import TokenEmbedder
from allennlp.predictors import Predictor
from allennlp.training.callbacks import TrainerCallback
from allennlp.training.learning_rate_schedulers import LearningRateScheduler
from allennlp.training.metrics import Metric

import nerzoo  # noqa: F401
from tests import FIXTURES_ROOT, PROJECT_ROOT

COMPONENTS = {
    (DatasetReader, "conll_columns"): {"tag_column": 3},
    (DatasetReader, "conllu_ner"): {},
    (DatasetReader, "spacy_parsed_conll"): {"tag_column": 3},
    (DatasetReader, "thread_discourse"): {},
    (TokenIndexer, "lexical_features"): {},
    (TokenEmbedder, "lexical_features"): {},
    (Seq2SeqEncoder, "child_sum_tree_lstm"): {"input_dim": 6, "hidden_dim": 4, "num_layers": 2, "residual": True},
    (Seq2SeqEncoder, "relative_attention"): {"input_dim": 6},
    (Seq2SeqEncoder, "global_attention"): {"input_dim": 6, "attention_dim": 4},
    (Seq2SeqEncoder, "memory_hop"): {"input_dim": 6, "hidden_dim": 4, "memory_dim": 5, "num_hops": 2, "window": 3},
    (Seq2SeqEncoder, "residual_stack"): {
        "layers": [
            {"type": "lstm", "input_size": 6, "hidden_size": 3, "bidirectional": True},
            {"type": "lstm", "input_size": 6, "hidden_size": 3, "bidirectional": True},
        ]
    },
    (Seq2SeqEncoder, "fast_lstm"): {"input_size": 6, "hidden_size": 3, "num_layers": 2, "bidirectional": True},
    (Model, "deptree_ner"): None,  # built and trained in tests/models/test_deptree_ner.py
    (TrainerCallback, "crf_transition_curriculum"): {"serialization_dir": "unused", "frozen_epochs": 3},
    (Metric, "conll_span_f1"): {"entity_types": ["LOC", "PER"]},
    (Metric, "thread_discourse_f1"): None,  # hand-worked counts in tests/training/test_thread_discourse_f1.py
    (Model, "me_crf_thread_discourse"): None,  # built and trained in tests/models/test_me_crf_thread_discourse.py
    (Predictor, "thread_discourse"): None,  # needs a model: tests/models/test_me_crf_thread_discourse.py
    (
        Subcommand,
        "cross-validate-thread-discourse",
    ): None,  # parsed and run in tests/commands/test_cross_validate_thread_discourse.py
    (Model, "bilstm_crf"): None,  # built and trained in tests/models/test_bilstm_crf.py
    (Predictor, "sequence_tagger"): None,  # needs a model: tests/predictors/
    (Subcommand, "tag-text"): None,  # see test_tag_text_subcommand_parses
    (Subcommand, "serve"): None,  # run end to end in tests/server/test_serve_command.py
    (Subcommand, "draw-attention"): None,  # run end to end in tests/test_end_to_end.py
    (Subcommand, "draw-memory"): None,  # run end to end in tests/test_end_to_end.py
    (Subcommand, "calibrate"): None,  # tests/test_end_to_end.py, tests/commands/test_calibrate.py
    (Subcommand, "cross-estimate"): None,  # run end to end in tests/test_end_to_end_partial.py
    (Subcommand, "select"): None,  # run in tests/commands/test_select.py
    (Subcommand, "draw-calibration"): None,  # run end to end in tests/test_end_to_end.py
    (Subcommand, "export"): None,  # run end to end in tests/commands/test_export.py
    (Metric, "span_calibration"): {"num_bins": 5},
    (Model, "me_crf"): None,  # built and trained in tests/models/test_me_crf.py
    (DatasetReader, "entity_spans"): {"conll": {"tag_column": 3}},
    (DatasetReader, "spacy_docbin"): None,  # reads the DocBin files it writes: tests/data/test_spacy_docbin.py
    (Seq2VecEncoder, "fofe"): {"input_dim": 6, "trainable_alpha": True},
    (Metric, "span_set_f1"): {"entity_types": ["LOC", "PER"]},
    (TrainerCallback, "dropout_schedule"): {"serialization_dir": "unused", "start": 0.4, "end": 0.1},
    (TrainerCallback, "cuda_graphs"): {"serialization_dir": "unused", "length_multiple": 16},
    (TrainerCallback, "freeze_loaded_data"): {"serialization_dir": "unused"},
    (TrainerCallback, "leave_process_group"): {"serialization_dir": "unused"},
    (TrainModel, "whole_test_set"): None,  # every shipped config trains with it: tests/training/test_whole_test_set.py
    (LearningRateScheduler, "geometric_decay"): None,  # needs an optimiser: tests/training/test_geometric_decay.py
    (Model, "fofe_ner"): None,  # built and trained in tests/models/test_fofe_ner.py
    (TokenIndexer, "word_and_characters"): {"lowercase_tokens": True},
    (
        TokenEmbedder,
        "contextual_word_vectors",
    ): None,  # needs a model directory: tests/modules/test_contextual_word_vectors.py
    (
        TokenIndexer,
        "contextual_word_pieces",
    ): None,  # needs a model directory: tests/data/test_contextual_word_pieces_indexer.py
    (TokenEmbedder, "char_gated"): None,  # needs a vocabulary: tests/modules/test_char_gated_embedder.py
    (TokenEmbedder, "word_dropout"): None,  # needs a vocabulary: tests/modules/test_word_dropout.py
    (Seq2VecEncoder, "summed_gru"): {"input_dim": 6, "hidden_dim": 3, "output_dim": 5, "num_layers": 2},
    (Metric, "concept_error_rate"): {"tag_scheme": "BIO"},
    (Model, "seq2biseq"): None,  # built and trained in tests/models/test_seq2biseq.py
    (TokenEmbedder, "fast_character_encoding"): {
        "embedding": {"embedding_dim": 4, "num_embeddings": 20},
        "encoder": {"type": "cnn", "embedding_dim": 4, "num_filters": 5, "ngram_filter_sizes": [2]},
    },
}
# The file each reader reads in test_component_builds_from_params.
READER_FILES = {
    "conllu_ner": FIXTURES_ROOT / "ud" / "ner_misc.conllu",
    "thread_discourse": FIXTURES_ROOT / "thread_discourse" / "dev.jsonl",
}
# One perfect prediction per metric, in its own input format.
METRIC_INPUTS = {
    "conll_span_f1": ([["U-PER"]], [["U-PER"]]),
    "span_set_f1": ([[(0, 1, "PER")]], [[(0, 1, "PER")]]),
    "concept_error_rate": ([["B-PER", "O", "B-LOC"]], [["B-PER", "O", "B-LOC"]]),
    "span_calibration": ([1.0, 1.0, 0.0], [True, True, False]),  # perfectly calibrated
}


# Earlier names, kept so that archives trained under them still load: each is the same class as
# its current name.
ALIASES = {
    (TokenEmbedder, "packed_character_encoding"): "fast_character_encoding",
    (Seq2SeqEncoder, "unpacked_lstm"): "fast_lstm",
    (DatasetReader, "forum_threads"): "thread_discourse",
    (Model, "me_crf_threads"): "me_crf_thread_discourse",
}
# Names under which allennlp's own components load (`nerzoo.other_names`).
OTHER_NAMES = {
    (DataCollator, "fast"): "allennlp",
    (TokenIndexer, "fast_characters"): "characters",
    (TokenIndexer, "batched_characters"): "characters",
}


def _nerzoo_registrations():
    for base, registry in Registrable._registry.items():
        for name, (cls, _) in registry.items():
            if cls.__module__.startswith("nerzoo."):
                yield base, name


def test_every_registered_component_is_in_the_table():
    assert set(_nerzoo_registrations()) == set(COMPONENTS) | set(ALIASES)


@pytest.mark.parametrize("key", list(ALIASES), ids=lambda key: key[1])
def test_earlier_name_is_the_same_component(key):
    base, earlier = key
    assert base.by_name(earlier) is base.by_name(ALIASES[key])


@pytest.mark.parametrize("key", list(OTHER_NAMES), ids=lambda key: key[1])
def test_other_name_is_allennlps_component(key):
    base, name = key
    assert base.by_name(name) is base.by_name(OTHER_NAMES[key])


def test_names_do_not_clash_with_allennlp_models():
    # allennlp-models is a benchmark extra, not installed with nerzoo: its names come from a snapshot
    # of every registration that importing all of allennlp_models 2.10.1 (the final release) adds.
    snapshot = json.loads((PROJECT_ROOT / "tests" / "data" / "allennlp_models_2.10.1_names.json").read_text())
    assert (
        "crf_tagger" in snapshot["allennlp.models.model.Model"]
        and "conll2000" in snapshot["allennlp.data.dataset_readers.dataset_reader.DatasetReader"]
    )
    clashes = [
        (base.__name__, name)
        for base, name in _nerzoo_registrations()
        if name in snapshot.get(f"{base.__module__}.{base.__name__}", [])
    ]
    assert not clashes


@pytest.mark.parametrize(
    "key", [key for key, params in COMPONENTS.items() if params is not None], ids=lambda key: key[1]
)
def test_component_builds_from_params(key):
    base, name = key
    component = base.from_params(Params({"type": name, **COMPONENTS[key]}))
    assert inspect.getmodule(type(component)).__name__.startswith("nerzoo.")
    if base is DatasetReader:
        instances = list(component.read(READER_FILES.get(name, FIXTURES_ROOT / "conll2003" / "dev.txt")))
        vocab = Vocabulary.from_instances(instances)
        assert vocab.get_vocab_size("labels") > 1
    if base is Seq2SeqEncoder:
        check_encoder_shapes_and_masking(component)
    if base is Seq2VecEncoder:
        check_seq2vec_shapes_and_masking(component)
    if base is Metric:
        component(*METRIC_INPUTS[name])
        metrics = component.get_metric()
        if "concept_error_rate" in metrics:
            assert metrics["concept_error_rate"] == 0.0
        elif "span_ece" in metrics:
            assert metrics["span_ece"] == 0.0 and metrics["span_brier"] == 0.0
        else:
            assert metrics["f1-measure-overall"] == 1.0


def check_encoder_shapes_and_masking(encoder):
    """Output is `(batch, seq, get_output_dim())`, zero at padding, blind to what padding holds."""
    torch.manual_seed(0)
    encoder.eval()
    mask = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
    inputs = torch.randn(2, 5, encoder.get_input_dim())
    extra = {}
    if "head_indices" in inspect.signature(encoder.forward).parameters:
        extra["head_indices"] = torch.tensor([[2, 0, 2, 3, 2], [0, 1, 1, 0, 0]])
    output = encoder(inputs, mask, **extra)
    assert output.shape == (2, 5, encoder.get_output_dim())
    assert torch.all(output[~mask] == 0)
    garbage = inputs.clone()
    garbage[~mask] = 1e3
    if extra:
        extra["head_indices"] = extra["head_indices"].masked_fill(~mask, 4)
    assert torch.allclose(encoder(garbage, mask, **extra)[mask], output[mask], atol=1e-6)


def check_seq2vec_shapes_and_masking(encoder):
    """Output is `(batch, get_output_dim())` and blind to what padding holds."""
    torch.manual_seed(0)
    mask = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
    inputs = torch.randn(2, 5, encoder.get_input_dim())
    output = encoder(inputs, mask)
    assert output.shape == (2, encoder.get_output_dim())
    garbage = inputs.clone()
    garbage[~mask] = 1e3
    assert torch.allclose(encoder(garbage, mask), output, atol=1e-6)


def test_tag_text_subcommand_parses():
    parser = argparse.ArgumentParser()
    Subcommand.by_name("tag-text")().add_subparser(parser.add_subparsers())
    args = parser.parse_args(["tag-text", "model.tar.gz", "One .", "Two .", "--spacy-model", "blank:en"])
    assert args.archive_file == "model.tar.gz" and args.text == ["One .", "Two ."]
    assert args.spacy_model == "blank:en" and callable(args.func)
