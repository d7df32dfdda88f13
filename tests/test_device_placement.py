"""
Every shipped config with its model on a device other than the CPU, as on a GPU: a training step
(forward, loss, backward, the training metrics read), a prediction batch through the model's
default predictor (as `allennlp predict` runs it), and `allennlp calibrate`'s fitting (its
`evaluate` collects the calibration batches on the CPU, and each site fits its temperatures on them).

The device is the stand-in accelerator of `tests/stand_in_device.py`: it computes on the CPU, and
any operator that mixes one of its tensors with a CPU tensor raises, so a tensor made on the CPU
(a `torch.tensor(...)` without `device=`) inside code that runs on the model's device fails here
as it would on a GPU.
"""

import inspect
import pathlib
from typing import Any, Dict, List

import pytest
import torch
from allennlp.common.util import sanitize
from allennlp.data import DatasetReader
from allennlp.data.batch import Batch
from allennlp.models import Model
from allennlp.nn import util
from allennlp.predictors import Predictor

from nerzoo.commands.calibrate import evaluate
from nerzoo.contracts import TagProbabilityModel
from nerzoo.modules.crf.calibration import (
    CalibrationBatch,
    SpanOutcomes,
    calibration_modules,
    fit_temperatures,
    has_spans,
    mean_nll,
)
from tests import PROJECT_ROOT
from tests.stand_in_device import STAND_IN, on_the_stand_in
from tests.test_training_configs import CONFIGS, build_on_fixtures, on_fixtures

# Instances per batch: a few (me_crf's are whole documents), of different lengths.
BATCH_SIZE = 4


def _predictor(model: Model, config: pathlib.Path) -> Predictor:
    """The model's default predictor, asked for everything it can show (attention, tag probabilities)."""
    reader = DatasetReader.from_params(on_fixtures(config).pop("dataset_reader"))
    predictor_class = Predictor.by_name(model.default_predictor)
    options = {"return_attention": True, "return_tag_probabilities": isinstance(model, TagProbabilityModel)}
    accepted = inspect.signature(predictor_class.__init__).parameters
    return predictor_class(model, reader, **{key: value for key, value in options.items() if key in accepted})


def _with_spans(batch: CalibrationBatch) -> CalibrationBatch:
    """
    The batch, with one span per row (its first token, alternately right and wrong) where the
    model predicted none: an untrained model often predicts no entity, and the span likelihood
    should still run.
    """
    if batch.spans is not None and len(batch.spans.right):
        return batch
    rows = torch.arange(batch.mask.size(0))
    spans = SpanOutcomes(rows, torch.zeros_like(rows), torch.ones_like(rows), (rows % 2 == 0).double())
    return batch._replace(spans=spans)


def _training_step(model: Model, instances, vocab) -> Dict[str, float]:
    batch = Batch(instances)
    batch.index_instances(vocab)
    model.train()
    output = model(**util.move_to_device(batch.as_tensor_dict(), 0))  # allennlp's GPU 0: the stand-in
    assert output["loss"].device == STAND_IN
    penalty = model.get_regularization_penalty()  # as the trainer adds it
    (output["loss"] if penalty is None else output["loss"] + penalty).backward()
    gradients = [parameter.grad for parameter in model.parameters() if parameter.grad is not None]
    assert gradients and all(gradient.device == STAND_IN for gradient in gradients)
    model.zero_grad()
    return model.get_metrics(reset=True)


def _fit_calibration_sites(model: Model, instances, vocab) -> List[str]:
    """
    `allennlp calibrate`'s fitting on one batch, with every temperature of each site: of the span
    likelihood where the site has one, else of the sequence likelihood, whose gradient is taken in
    any case; the objectives fitted.
    """
    batch = Batch(instances)
    batch.index_instances(vocab)
    modules = calibration_modules(model)
    evaluation = evaluate(model, [batch.as_tensor_dict()], modules, cuda_device=0)
    fitted = []
    for name, module in modules.items():
        site = module.calibration_site(name)
        batches = evaluation.batches[name]
        assert batches, f"{name or 'the model'} collected no calibration batch"
        temperatures = torch.ones(len(site.config_keys), dtype=torch.float64, requires_grad=True)
        mean_nll(site, batches, temperatures, "sequence").backward()
        assert temperatures.grad is not None and bool(torch.isfinite(temperatures.grad).all())
        objective = "sequence"
        if site.span_log_likelihood is not None and batches[0].paths is not None:
            batches = [_with_spans(batch) for batch in batches]
            assert has_spans(site, batches)
            objective = "span"
        fitted.append(fit_temperatures(site, batches, len(site.config_keys), objective).objective)
    return fitted


def _assert_close(got: Any, wanted: Any, where: str = "") -> None:
    """The same JSON, floats within 1e-5 (the CPU and the device may take different code paths)."""
    if isinstance(wanted, float):
        assert got == pytest.approx(wanted, abs=1e-5), where
    elif isinstance(wanted, dict):
        assert isinstance(got, dict) and got.keys() == wanted.keys(), where
        for key in wanted:
            _assert_close(got[key], wanted[key], f"{where}.{key}")
    elif isinstance(wanted, (list, tuple)):
        assert isinstance(got, (list, tuple)) and len(got) == len(wanted), where
        for index, (got_item, wanted_item) in enumerate(zip(got, wanted)):
            _assert_close(got_item, wanted_item, f"{where}[{index}]")
    else:
        assert got == wanted, where


def _run_on_the_stand_in(config: pathlib.Path) -> Dict[str, Any]:
    """A training step, a prediction batch and calibrate's fitting with the model on the stand-in."""
    model, instances, vocab = build_on_fixtures(config)
    instances = instances[:BATCH_SIZE]
    predictor = _predictor(model, config)
    on_the_cpu = predictor.predict_batch_instance(instances)
    model.get_metrics(reset=True)  # the counts of the gold tags that the instances carry
    with on_the_stand_in() as device:
        model.to(device)
        metrics = _training_step(model, instances, vocab)
        model.eval()
        predicted = sanitize(predictor.predict_batch_instance(instances))
        # Calibration needs whole annotation; a partial config's fixture has whole sentences too.
        whole = [instance for instance in instances if not instance.fields["metadata"].metadata.get("partial")]
        objectives = _fit_calibration_sites(model, whole, vocab)
    return {"metrics": metrics, "predicted": predicted, "on_the_cpu": on_the_cpu, "objectives": objectives}


@pytest.mark.parametrize("config", CONFIGS, ids=lambda path: path.name)
def test_config_runs_on_another_device_than_the_cpu(config: pathlib.Path):
    run = _run_on_the_stand_in(config)
    assert run["metrics"]
    assert run["objectives"]
    # The device's code paths (no CPU shortcuts there) predict what the CPU's do.
    assert len(run["predicted"]) == len(run["on_the_cpu"])
    assert any("tags" in result or "posts" in result for result in run["on_the_cpu"])
    _assert_close(run["predicted"], sanitize(run["on_the_cpu"]))


def test_the_stand_in_is_a_device_like_a_gpu():
    with on_the_stand_in() as device:
        on_device = torch.tensor([1.0, 2.0], device=device)
        assert on_device.device == device and torch.zeros(2, device=device).device == device
        assert (on_device * 2 + torch.ones(2).to(device)).tolist() == [3.0, 5.0]
        assert on_device.sum().item() == 3.0 and bool(on_device.max() == 2.0)
        assert on_device.cpu().device.type == "cpu" and on_device.cpu().tolist() == [1.0, 2.0]
        assert util.move_to_device(torch.ones(1), 0).device == device
        transposed = torch.arange(6, device=device).view(2, 3).transpose_(0, 1)  # an in-place view
        assert transposed.shape == (3, 2) and transposed.cpu().tolist() == [[0, 3], [1, 4], [2, 5]]
        for made_on_the_cpu in (torch.ones(2), torch.tensor(2.0)):
            with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
                on_device * made_on_the_cpu
    assert util.move_to_device(torch.ones(1), -1).device.type == "cpu"


def test_the_stand_in_catches_a_scalar_made_on_the_cpu_in_device_code(monkeypatch):
    from nerzoo.models.bilstm_crf import BiLstmCrf

    readable = BiLstmCrf.make_output_human_readable

    def with_a_cpu_scalar(self, output_dict):
        output_dict["logits"] = output_dict["logits"] / torch.tensor(1.0)  # made without `device=`
        return readable(self, output_dict)

    monkeypatch.setattr(BiLstmCrf, "make_output_human_readable", with_a_cpu_scalar)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        _run_on_the_stand_in(PROJECT_ROOT / "training_config" / "bilstm_crf.jsonnet")
