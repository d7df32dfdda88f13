"""
The exported form of fofe_ner's span scores (`nerzoo.models._fofe_ner_export`) against the model's
forward, in torch and through onnxruntime, at batch sizes and lengths the trace never saw; its
scripted range maximum against the model's; int8; the contextual twin's own check on the fixtures.  The export through the CLI, tagged against `allennlp
predict`, is in tests/test_end_to_end_fofe.py (on the archive trained there).
"""

import json
import random

import onnxruntime
import pytest
import torch
from allennlp.commands.train import train_model
from allennlp.common import Params
from allennlp.data import Batch, Instance, Token
from allennlp.data.fields import TextField
from allennlp.models.archival import load_archive
from allennlp.nn.util import get_text_field_mask

from nerzoo.commands import export, export_graph
from nerzoo.models._fofe_ner_export import ExportedFofeNer, gathered_row_sums
from nerzoo.modules.fofe.first_layer import weighted_row_sums
from nerzoo.modules.fofe.span_character_cnn import range_max
from nerzoo.modules.fofe.spans import enumerate_spans
from tests import FIXTURES_ROOT, PROJECT_ROOT, allennlp
from tests.commands.test_export import RAW_TEXTS, check_file, fixture_sentences
from tests.tiny_transformer import tiny_bert_overrides


@pytest.fixture(scope="module")
def archive():
    return load_archive(str(FIXTURES_ROOT / "archives" / "fofe_ner_tiny.tar.gz"))


def batches(archive):
    """Batches of the vocabulary's words and unknown ones: one word of one character, 64 sentences, 150 words."""
    rng = random.Random(0)
    words = list(archive.model.vocab.get_token_to_index_vocabulary("tokens"))[2:] + ["Zzyzx", "self-sufficiency"]
    shapes = [(1, [1]), (3, [4, 1, 9]), (64, [rng.randint(1, 30) for _ in range(64)]), (2, [150, 3])]
    yield [["a"]]
    for _, lengths in shapes:
        yield [[rng.choice(words) for _ in range(length)] for length in lengths]


def tensors(archive, sentences):
    indexers = archive.validation_dataset_reader._token_indexers
    batch = Batch([Instance({"tokens": TextField([Token(word) for word in words], indexers)}) for words in sentences])
    batch.index_instances(archive.model.vocab)
    return batch.as_tensor_dict()


def test_the_exported_form_gives_the_models_span_logits_in_torch_and_as_onnx(archive, tmp_path):
    model = archive.model.eval()
    scores = export.traced_scores(archive)
    indexers, _ = export_graph.exported_indexers(archive, scores)
    export_graph.write_graph(archive, scores, indexers, tmp_path / "model.onnx", export.OPSET)
    session = onnxruntime.InferenceSession(str(tmp_path / "model.onnx"), providers=["CPUExecutionProvider"])
    for sentences in batches(archive):
        tensor_dict = tensors(archive, sentences)
        mask = get_text_field_mask(tensor_dict["tokens"])
        with torch.no_grad():
            expected = model(**tensor_dict)["class_logits"]
            in_torch = ExportedFofeNer(model)(tensor_dict["tokens"], mask)
        feeds = {
            name: tensor_dict["tokens"][indexer][key].numpy()
            for name, indexer, key, _ in export_graph.graph_inputs(indexers)
        }
        (as_onnx,) = session.run(["logits"], feeds)
        _, _, span_mask = enumerate_spans(mask, model.max_span_width)
        for logits in (in_torch, torch.from_numpy(as_onnx)):
            assert logits.shape[:3] == (*mask.shape, model.max_span_width)
            flat = logits.reshape(mask.size(0), span_mask.size(1), -1)
            for row in range(mask.size(0)):  # the model's scored spans are each row's real ones, in the same order
                real = int(span_mask[row].sum())
                torch.testing.assert_close(flat[row][span_mask[row]], expected[row, :real], rtol=0, atol=1e-5)


def test_the_scripted_range_maximum_equals_the_models():
    scripted = torch.jit.script(range_max)
    generator = torch.Generator().manual_seed(0)
    for _ in range(40):
        batch_size, length = (int(value) for value in torch.randint(1, 40, (2,), generator=generator))
        values = torch.relu(torch.randn(batch_size, length, 3, generator=generator))
        starts = torch.randint(0, length, (batch_size, 6), generator=generator)
        ends = (starts + torch.randint(-3, 25, (batch_size, 6), generator=generator)).clamp(max=length)
        assert torch.equal(scripted(values, starts, ends), range_max(values, starts, ends))
    empty = torch.zeros(2, 5, dtype=torch.long)
    assert torch.equal(scripted(torch.rand(2, 7, 3), empty, empty), torch.zeros(2, 5, 3))
    assert scripted(torch.rand(2, 7, 3), empty[:, :0], empty[:, :0]).shape == (2, 0, 3)


def test_an_int8_export_quantises_the_convolutions_and_layers(tmp_path):
    import onnx

    card = export.export_archive(
        str(FIXTURES_ROOT / "archives" / "fofe_ner_tiny.tar.gz"), str(tmp_path / "int8"), quantize="int8"
    )
    assert card["check"]["tags_equal"] and card["quantized"]["check_tags_alike"] >= 0.95
    operators = {node.op_type for node in onnx.load(str(tmp_path / "int8" / "model.onnx")).graph.node}
    assert {"ConvInteger", "MatMulInteger"} <= operators


def test_the_export_of_its_contextual_twin_checks_itself_on_the_fixtures(tmp_path):
    config = str(PROJECT_ROOT / "training_config" / "fofe_ner_contextual.jsonnet")
    overrides = {**tiny_bert_overrides(Params.from_file(config).as_dict(quiet=True)), "trainer.num_epochs": 2}
    train_model(Params.from_file(config, json.dumps(overrides)), str(tmp_path / "model"))
    sentences = fixture_sentences()
    sentences[-1] = sentences[-1][:60]  # within the tiny BERT's max_length of word pieces
    lines = check_file(tmp_path / "check.jsonl", sentences, RAW_TEXTS)
    archive = tmp_path / "model" / "model.tar.gz"
    result = allennlp("export", archive, tmp_path / "tagger", "--check-file", lines, "--include-package", "nerzoo")
    check = json.loads(result.stdout.splitlines()[-1])["check"]  # the archive's predictor against the runtime
    assert check["tags_equal"] and check["tokens"] > sum(map(len, sentences))


def test_the_gathered_row_sums_equal_the_models_embedding_bag():
    generator = torch.Generator().manual_seed(0)
    terms = [
        (torch.randn(num_rows, 8, generator=generator), torch.randint(0, num_rows, (30,), generator=generator), weight)
        for num_rows, weight in [
            (5, None),
            (12, torch.rand(30, generator=generator)),
            (1, -torch.rand(30, generator=generator)),
        ]
    ]
    torch.testing.assert_close(gathered_row_sums(terms), weighted_row_sums(terms), rtol=0, atol=1e-6)
