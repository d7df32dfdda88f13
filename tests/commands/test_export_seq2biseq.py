"""
`allennlp export` of a trained seq2biseq and of its contextual POS twin (the shipped configs, the twin
on a tiny BERT): its greedy decoders as traced loops,
its GRUs on the padded batch; tagged by nerzoo_runtime against `allennlp predict` at batch sizes and
lengths the export never saw, and the export's forms against the model's.
"""

import io
import json

import onnxruntime
import pytest
import torch
from allennlp.commands.train import train_model
from allennlp.common import Params
from allennlp.data import Vocabulary
from allennlp.modules.seq2seq_encoders import GruSeq2SeqEncoder
from allennlp.modules.text_field_embedders import BasicTextFieldEmbedder
from allennlp.modules.token_embedders import Embedding
from nerzoo_runtime import Tagger

from nerzoo.contracts import Exportable
from nerzoo.models.seq2biseq import Seq2Biseq
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


class GreedyDecode(torch.nn.Module):
    def __init__(self, model: Seq2Biseq) -> None:
        super().__init__()
        self.model = model

    def forward(self, lexical, mask):
        return self.model.decode(lexical, mask)


@pytest.mark.filterwarnings("ignore:Exporting a model to ONNX with a batch_size other than 1")
@pytest.mark.parametrize("num_layers, bias, lexical_decoders", [(1, True, True), (2, True, True), (1, False, False)])
def test_the_traced_greedy_decoders_give_the_models_logits_at_any_length(num_layers, bias, lexical_decoders):
    # Traced on 2 rows of 3 steps; run on 5 rows of up to 9 against `decode` (its dropout in eval mode).
    vocab = Vocabulary()
    for tag in ["B-PER", "I-PER", "O", "U-LOC"]:
        vocab.add_token_to_namespace(tag, "labels")
    torch.manual_seed(0)
    embedder = BasicTextFieldEmbedder({"tokens": Embedding(4, num_embeddings=10)})
    model = Seq2Biseq(vocab, embedder, GruSeq2SeqEncoder(4, 5), 3, 7, lexical_decoders=lexical_decoders, dropout=0.3)
    for name in ("backward_decoder", "forward_decoder"):
        gru = getattr(model, name)
        setattr(model, name, torch.nn.GRU(gru.input_size, 7, num_layers=num_layers, bias=bias, batch_first=True))
    model.eval()
    assert isinstance(model, Exportable) and model.export_refusal() is None
    assert model.export_decoding()["crf"] is None
    graph = io.BytesIO()
    with torch.no_grad():
        torch.onnx.export(
            GreedyDecode(model).eval(),
            (torch.randn(2, 3, 5), torch.tensor([[True, True, True], [True, True, False]])),
            graph,
            input_names=["lexical", "mask"],
            dynamic_axes={name: {0: "batch_size", 1: "num_tokens"} for name in ("lexical", "mask")},
            opset_version=17,
            dynamo=False,
        )
    session = onnxruntime.InferenceSession(graph.getvalue(), providers=["CPUExecutionProvider"])
    lexical = torch.randn(5, 9, 5)
    mask = torch.arange(9)[None] < torch.tensor([9, 1, 4, 7, 2])[:, None]
    with torch.no_grad():
        expected = model.decode(lexical, mask)
    got = session.run(None, {"lexical": lexical.numpy(), "mask": mask.numpy()})
    for have, want in zip(got, expected):
        torch.testing.assert_close(torch.from_numpy(have), want, rtol=0, atol=1e-5)


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
