"""
`allennlp export` of a trained seq2biseq and of its contextual POS twin (the shipped configs, the twin
on a tiny BERT): its greedy decoders as scripted loops,
its GRUs on the padded batch; tagged by nerzoo_runtime against `allennlp predict` at batch sizes and
lengths the export never saw, and the export's forms against the model's.
"""

import json

import pytest
import torch
from allennlp.commands.train import train_model
from allennlp.common import Params
from allennlp.models.archival import load_archive
from allennlp.modules.seq2seq_encoders import GruSeq2SeqEncoder
from nerzoo_runtime import Tagger

from nerzoo.models._seq2biseq_export import exported_decode
from nerzoo.modules.seq2seq_encoders.allennlp_export_forms import PaddedRnn
from tests import PROJECT_ROOT, allennlp, predict
from tests.commands.test_export import assert_same, assert_tags_as_allennlp_predict, fixture_sentences
from tests.tiny_transformer import tiny_bert_overrides

# One trained archive for the module: its tests run on one pytest-xdist worker (--dist loadgroup).
pytestmark = pytest.mark.xdist_group("seq2biseq_archive")


def trained(name, directory):
    config = str(PROJECT_ROOT / "training_config" / f"{name}.jsonnet")
    overrides = {**tiny_bert_overrides(Params.from_file(config).as_dict(quiet=True)), "trainer.num_epochs": 4}
    train_model(Params.from_file(config, json.dumps(overrides)), str(directory))
    return directory / "model.tar.gz"


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    return trained("seq2biseq", tmp_path_factory.mktemp("seq2biseq") / "model")


def test_the_export_of_seq2biseq_tags_the_fixtures_as_allennlp_predict_does(archive, tmp_path):
    output = tmp_path / "tagger"
    result = allennlp("export", archive, output, "--include-package", "nerzoo")
    assert json.loads(result.stdout.splitlines()[-1])["check"]["tags_equal"]
    assert json.loads((output / "tagger.json").read_text())["crf"] is None
    sentences = fixture_sentences()  # and one of 150 words, longer than any the export saw
    assert_tags_as_allennlp_predict(archive, output, sentences, tmp_path / "predictions.jsonl")


def test_the_exported_decoders_give_the_models_greedy_logits(archive):
    model = load_archive(str(archive)).model.eval()
    torch.manual_seed(0)
    lexical = torch.randn(5, 9, model.encoder.get_output_dim())
    mask = torch.arange(9)[None] < torch.tensor([9, 1, 4, 7, 2])[:, None]
    with torch.no_grad():
        torch.testing.assert_close(exported_decode(model, lexical, mask), model.decode(lexical, mask)[0])


@pytest.mark.parametrize("num_layers, bidirectional", [(1, True), (2, True), (2, False)])
def test_the_exported_form_of_a_gru_encoder_gives_its_states(num_layers, bidirectional):
    torch.manual_seed(0)
    encoder = GruSeq2SeqEncoder(5, 4, num_layers=num_layers, bidirectional=bidirectional).eval()
    inputs = torch.randn(4, 6, 5)
    mask = torch.arange(6)[None] < torch.tensor([6, 1, 3, 0])[:, None]  # a row without steps: zeros
    with torch.no_grad():
        torch.testing.assert_close(PaddedRnn(encoder)(inputs, mask), encoder(inputs, mask), rtol=0, atol=1e-6)


def test_the_export_of_its_contextual_pos_twin_tags_the_fixtures_as_allennlp_predict_does(tmp_path):
    archive = trained("seq2biseq_pos_contextual", tmp_path / "model")
    result = allennlp("export", archive, tmp_path / "tagger", "--include-package", "nerzoo")
    assert json.loads(result.stdout.splitlines()[-1])["check"]["tags_equal"]
    sentences = fixture_sentences()
    sentences[-1] = sentences[-1][:60]  # within the tiny BERT's max_length of word pieces
    expected = predict(archive, [{"tokens": words} for words in sentences], tmp_path / "predictions.jsonl")
    assert len({tag for result in expected for tag in result["tags"]}) > 1  # POS tags, no spans
    for batch_size in (1, 64):
        assert_same(Tagger.load(tmp_path / "tagger").tag(sentences, batch_size=batch_size), expected)
