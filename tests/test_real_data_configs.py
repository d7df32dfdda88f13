"""
The real-data configs of training_config/real_data/ point at ../shared/data and their readers read it;
their batch samplers sort by a field of the instances read.
"""

import itertools
import pathlib

import pytest
from allennlp.common import Params
from allennlp.data import DatasetReader

import nerzoo  # noqa: F401
from nerzoo.data.dataset_readers.conll_columns import parse_held_out_path
from tests import PROJECT_ROOT, SHARED_DATA
from tests.test_training_configs import check_sorting_keys

CONFIGS = sorted((PROJECT_ROOT / "training_config" / "real_data").glob("*.jsonnet"))
SPLITS = ("train_data_path", "validation_data_path", "test_data_path")


def test_there_are_real_data_configs():
    assert len(CONFIGS) == 8


@pytest.mark.parametrize("config", CONFIGS, ids=lambda path: path.name)
def test_real_data_config_reads_shared_data(config: pathlib.Path, monkeypatch):
    params = Params.from_file(str(config)).as_dict(quiet=True)
    paths = [params[split] for split in SPLITS]
    assert all(path.startswith("../shared/data/") for path in paths)
    glove = params["vocabulary"]["pretrained_files"]["tokens"]
    assert glove.startswith("../shared/data/") and glove in str(params["model"]["text_field_embedder"])
    if not SHARED_DATA.exists():
        pytest.skip("../shared/data is not here")
    monkeypatch.chdir(PROJECT_ROOT)
    assert pathlib.Path(glove).exists()
    readers = {
        "train_data_path": params["dataset_reader"],
        "validation_data_path": params.get("validation_dataset_reader", params["dataset_reader"]),
        "test_data_path": params.get("validation_dataset_reader", params["dataset_reader"]),
    }
    for split, path in zip(SPLITS, paths):
        assert pathlib.Path(parse_held_out_path(path)[0]).exists(), path
        reader = DatasetReader.from_params(Params(dict(readers[split])))
        instances = list(itertools.islice(reader.read(path), 3))
        assert len(instances) == 3 and all("tags" in instance.fields for instance in instances)
        loader = params["data_loader" if split == "train_data_path" else "validation_data_loader"]
        check_sorting_keys(loader["batch_sampler"], instances)
