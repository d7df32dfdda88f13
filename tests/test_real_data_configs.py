"""
The data sets of training_config/data.libsonnet: every shipped config trains on the fixtures, and
`on(config, name)` puts it on a real data set; the configs of training_config/DATASET/ are that one
line for the pairs of docs/RESULTS.md.  Every shipped config on every real data set it accepts
points at ../shared/data and GloVe 6B 50d, its readers read the data, and its vocabulary and model
build from the first instances (no training; the slowest builds in `make test-slow`); a data set a
config does not accept is an error naming its model and the data sets it accepts.
"""

import itertools
import json
import pathlib
import re
from typing import Any, Dict, List

import _jsonnet
import pytest
from allennlp.common import Params
from allennlp.common.params import with_overrides
from allennlp.data import DatasetReader, Vocabulary
from allennlp.data.batch import Batch
from allennlp.models import Model

import nerzoo  # noqa: F401
from nerzoo.data.dataset_readers.conll_columns import parse_held_out_path
from tests import PROJECT_ROOT, SHARED_DATA
from tests.test_training_configs import NEEDS_AN_ARCHIVE, check_sorting_keys, labelled_sequence
from tests.tiny_transformer import tiny_bert_overrides

TRAINING_CONFIG = PROJECT_ROOT / "training_config"
ALL_CONFIGS = sorted(TRAINING_CONFIG.glob("*.jsonnet"))
SPLITS = ("train_data_path", "validation_data_path", "test_data_path")
# The second pass reads its first pass's archive (trained end to end in tests/test_end_to_end_fofe.py);
# its params resolve without one.
EXT_VARS = {"FOFE_FIRST_PASS": "runs/first/model.tar.gz"}


def jsonnet(snippet: str) -> Any:
    """A Jsonnet expression over training_config/ (imports relative to it)."""
    return json.loads(_jsonnet.evaluate_snippet("snippet", snippet, jpathdir=[str(TRAINING_CONFIG)], ext_vars=EXT_VARS))


def pair_config(config: pathlib.Path, data: str) -> str:
    """The config of `config` on `data`, as training_config/DATASET/CONFIG.jsonnet writes it."""
    return f'(import "../data.libsonnet").on((import "../{config.name}").fixture_config, "{data}")'


def params_on(config: pathlib.Path, data: str) -> Dict[str, Any]:
    """The params of `config` on `data` (the config itself on the fixtures), as allennlp reads them."""
    if data == "fixtures":
        return Params.from_file(str(config), ext_vars=EXT_VARS).as_dict(quiet=True)
    return jsonnet(pair_config(config, data).replace("../", ""))


def accepted(config: pathlib.Path) -> List[str]:
    return jsonnet(f'(import "data.libsonnet").accepted(import "{config.name}")')


DATASETS = jsonnet('(import "data.libsonnet").datasets')
GLOVE = jsonnet('(import "data.libsonnet").glove')
REAL_PAIRS = [(config, name) for config in ALL_CONFIGS for name in accepted(config) if name != "fixtures"]
PAIR_CONFIGS = sorted(TRAINING_CONFIG.glob("*/*.jsonnet"))
# The (config, data set) pairs of docs/RESULTS.md's rows, and me_crf_conll2003_contextual's (a model of
# benchmarks/reproduce.py): one config each in training_config/DATASET/.
RESULTS_PAIRS = {
    "conll2003": [
        *("bilstm_crf", "bilstm_crf_contextual", "bilstm_crf_gpu", "deptree_ner", "deptree_ner_contextual"),
        *("deptree_ner_gpu", "me_crf_conll2003", "me_crf_conll2003_contextual", "fofe_ner", "fofe_ner_second_pass"),
    ],
    "uner_ewt": ["bilstm_crf", "bilstm_crf_contextual", "deptree_ner", "deptree_ner_contextual"],
    "wnut17": ["bilstm_crf", "bilstm_crf_contextual", "deptree_ner", "deptree_ner_contextual"],
    "conll2000_chunking": [
        *("char_gated_tagger", "char_gated_tagger_concat", "char_gated_tagger_words", "char_gated_tagger_contextual")
    ],
    "conll2000_pos": ["seq2biseq_pos", "bilstm_crf_pos"],
    "ewt_upos": ["seq2biseq_pos", "bilstm_crf_pos"],
}


def test_the_data_sets_of_the_benchmarks_are_there():
    assert DATASETS[0] == "fixtures"
    assert set(DATASETS) == {
        "fixtures",
        "conll2003",
        "uner_ewt",
        "wnut17",
        "conll2000_chunking",
        "conll2000_pos",
        "ewt_upos",
    }


def test_every_config_accepts_the_fixtures():
    assert all(accepted(config)[0] == "fixtures" for config in ALL_CONFIGS)


def test_every_conll2003_model_trains_on_real_conll2003():
    ner = {config.stem for config, name in REAL_PAIRS if name == "conll2003"}
    models = ("bilstm_crf", "deptree_ner", "fofe_ner", "me_crf_conll2003")
    assert {model + suffix for model in models for suffix in ("", "_contextual")} <= ner
    assert "fofe_ner_second_pass" in ner


def test_the_retired_real_data_configs_are_data_sets_of_their_base_configs():
    # training_config/real_data/ had these eight configs; each is now a data set of its base config.
    retired = {
        ("char_gated_tagger", "conll2000_chunking"),
        ("char_gated_tagger_concat", "conll2000_chunking"),
        ("char_gated_tagger_words", "conll2000_chunking"),
        ("seq2biseq", "conll2000_chunking"),
        ("seq2biseq_pos", "conll2000_pos"),
        ("seq2biseq_pos", "ewt_upos"),
        ("bilstm_crf_pos", "conll2000_pos"),
        ("bilstm_crf_pos", "ewt_upos"),
    }
    assert len(retired) == 8
    assert retired <= {(config.stem, name) for config, name in REAL_PAIRS}
    assert not (TRAINING_CONFIG / "real_data").exists()


def test_the_pair_configs_are_the_pairs_of_the_results():
    found = {(path.parent.name, path.stem) for path in PAIR_CONFIGS}
    assert found == {(data, config) for data, configs in RESULTS_PAIRS.items() for config in configs}
    assert all(data in DATASETS[1:] for data, _ in found)


@pytest.mark.parametrize("path", PAIR_CONFIGS, ids=lambda path: f"{path.parent.name}/{path.name}")
def test_a_pair_config_is_its_base_config_on_its_data_set(path: pathlib.Path):
    config, data = TRAINING_CONFIG / path.name, path.parent.name
    assert data in accepted(config)
    lines = path.read_text().splitlines()
    assert lines == [f"// {config.name} on {data} (training_config/data.libsonnet).", pair_config(config, data)]
    assert Params.from_file(str(path), ext_vars=EXT_VARS).as_dict(quiet=True) == params_on(config, data)


@pytest.mark.parametrize("config", ALL_CONFIGS, ids=lambda path: path.name)
def test_the_fixtures_leave_the_config_as_it_is(config: pathlib.Path):
    on_fixtures = params_on(config, "fixtures")
    assert on_fixtures == jsonnet(f'(import "{config.name}").fixture_config')
    assert all(on_fixtures[split].startswith("fixtures/") for split in SPLITS)


@pytest.mark.parametrize("config", ALL_CONFIGS, ids=lambda path: path.name)
def test_header_is_short_and_names_the_data_sets_it_accepts(config: pathlib.Path):
    lines = config.read_text().splitlines()
    header = list(itertools.takewhile(lambda line: line.startswith("//"), lines))
    assert 2 <= len(header) <= 6, f"{len(header)} header lines"
    data = " ".join(header)[" ".join(header).index("Data: the fixtures") :]
    named = {name for name in re.findall(r"\w+", data) if name in DATASETS}
    assert named == set(accepted(config))


@pytest.mark.parametrize(
    "config, data, accepts",
    [
        ("me_crf_thread_discourse.jsonnet", "conll2003", "fixtures"),
        ("bilstm_crf.jsonnet", "conll2000_pos", "fixtures, conll2003, uner_ewt, wnut17"),
        ("fofe_ner.jsonnet", "uner_ewt", "fixtures, conll2003"),
        ("seq2biseq_pos.jsonnet", "conll2000_chunking", "fixtures, conll2000_pos, ewt_upos"),
    ],
)
def test_a_data_set_a_config_does_not_accept_is_a_clear_error(config, data, accepts):
    model = params_on(TRAINING_CONFIG / config, "fixtures")["model"]["type"]
    with pytest.raises(RuntimeError) as error:
        params_on(TRAINING_CONFIG / config, data)
    message = str(error.value).splitlines()[0]
    assert f"data set {data} does not apply to model {model} " in message
    assert message.endswith(f"it accepts {accepts}")


def test_an_unknown_data_set_is_a_clear_error():
    with pytest.raises(RuntimeError, match="data set conll2030 is none of .* they are: fixtures, conll2000"):
        params_on(TRAINING_CONFIG / "bilstm_crf.jsonnet", "conll2030")


def pretrained_files(params: Any) -> List[str]:
    """Every `pretrained_file` in the params, and the vocabulary's `pretrained_files`."""
    if isinstance(params, dict):
        files = [value for key, value in params.items() if key == "pretrained_file"]
        files += list(params.get("vocabulary", {}).get("pretrained_files", {}).values())
        return files + [
            file for key, value in params.items() if key != "vocabulary" for file in pretrained_files(value)
        ]
    if isinstance(params, list):
        return [file for value in params for file in pretrained_files(value)]
    return []


def readers(params: Dict[str, Any]) -> Dict[str, Dict[str, Any]]:
    validation = params.get("validation_dataset_reader", params["dataset_reader"])
    return {
        "train_data_path": params["dataset_reader"],
        "validation_data_path": validation,
        "test_data_path": validation,
    }


# GPU recipes: their base config's reader, vocabulary and model, with other batches and optimiser.
GPU_RECIPES = {"bilstm_crf_gpu": "bilstm_crf", "deptree_ner_gpu": "deptree_ner"}


@pytest.mark.parametrize("recipe", sorted(GPU_RECIPES))
def test_a_gpu_recipe_reads_and_builds_what_its_base_config_does(recipe: str):
    assert accepted(TRAINING_CONFIG / f"{recipe}.jsonnet") == accepted(
        TRAINING_CONFIG / f"{GPU_RECIPES[recipe]}.jsonnet"
    )
    for data in ("fixtures", "conll2003"):
        ours, base = (params_on(TRAINING_CONFIG / f"{name}.jsonnet", data) for name in (recipe, GPU_RECIPES[recipe]))
        for key in ("dataset_reader", "vocabulary", "model", "validation_data_loader", *SPLITS):
            assert ours.get(key) == base.get(key), (recipe, data, key)
        assert ours["data_loader"] != base["data_loader"]


# Contextual twins: their base config's readers, data and GloVe, with a transformer embedder.
CONTEXTUAL_TWINS = {config.stem for config in ALL_CONFIGS if config.stem.endswith("_contextual")}


def _real_pair(config: pathlib.Path, data: str):
    """
    One parameter; configs that read spaCy parses of a data set share a worker, hence the parse cache.
    Parsing a whole data set with spaCy takes a quarter to half a minute: those builds run in `make
    test-slow`, as do the GPU recipes' and the contextual twins' (their base configs' builds, and
    the twins' on the fixtures, in `make test`).
    """
    parsed = "spacy_parsed" in json.dumps(params_on(config, data)["dataset_reader"])  # not UD's gold trees
    marks = [pytest.mark.xdist_group(f"spacy-parses-{data}")] if parsed else []
    if parsed or config.stem in GPU_RECIPES or config.stem in CONTEXTUAL_TWINS:
        marks.append(pytest.mark.slow)
    return pytest.param(config, data, marks=marks, id=f"{config.stem}-{data}")


def test_every_contextual_twin_has_its_base_config_built_in_make_test():
    for twin in sorted(CONTEXTUAL_TWINS):
        base = TRAINING_CONFIG / f"{twin[: -len('_contextual')]}.jsonnet"
        assert base.exists(), twin
        assert set(accepted(base)) >= set(accepted(TRAINING_CONFIG / f"{twin}.jsonnet")), twin


@pytest.mark.parametrize("config, data", [pytest.param(c, d, id=f"{c.stem}-{d}") for c, d in REAL_PAIRS])
def test_config_points_at_the_real_data(config: pathlib.Path, data: str):
    params = params_on(config, data)
    assert all(params[split].startswith("../shared/data/") for split in SPLITS)
    files = pretrained_files(params)
    assert files and set(files) == {GLOVE} and GLOVE.startswith("../shared/data/")


@pytest.mark.parametrize("config, data", [_real_pair(config, data) for config, data in REAL_PAIRS])
def test_config_builds_on_real_data(config: pathlib.Path, data: str, monkeypatch):
    params = params_on(config, data)
    params = with_overrides(params, tiny_bert_overrides(params))  # the tests' tiny BERT, as -o gives it
    if not SHARED_DATA.exists():
        pytest.skip(f"{SHARED_DATA} (the real data, never copied into the project) is not here")
    if config.name in NEEDS_AN_ARCHIVE:
        pytest.skip(f"builds from a first pass's archive: trained end to end in {NEEDS_AN_ARCHIVE[config.name]}")
    monkeypatch.chdir(PROJECT_ROOT)
    assert pathlib.Path(GLOVE).exists()
    instances = []
    # As allennlp trains: the splits that share a reader's parameters share the reader.
    built: Dict[int, DatasetReader] = {}
    for split, reader_params in readers(params).items():
        path = params[split]
        assert pathlib.Path(parse_held_out_path(path)[0]).exists(), path
        if id(reader_params) not in built:
            built[id(reader_params)] = DatasetReader.from_params(Params(dict(reader_params)))
        reader = built[id(reader_params)]
        read = list(itertools.islice(reader.read(path), 3))
        assert len(read) == 3 and all(len(labelled_sequence(instance)) for instance in read)
        loader = params["data_loader" if split == "train_data_path" else "validation_data_loader"]
        check_sorting_keys(loader["batch_sampler"], read)
        instances += read
    vocab = Vocabulary.from_params(Params(params["vocabulary"]), instances=instances)
    model = Model.from_params(vocab=vocab, params=Params(params["model"]))
    batch = Batch(instances[:3])
    batch.index_instances(vocab)
    assert model(**batch.as_tensor_dict())["loss"].requires_grad
