"""
The ME-CRF+ curriculum (Liu, Baldwin & Cohn, 2017, §4.2, https://aclanthology.org/I17-1056): CRF
transitions held at 0 for the first epochs, trained afterwards.  The main test trains a tiny
bilstm_crf for real with allennlp's GradientDescentTrainer and then resumes it from its checkpoint.
"""

import logging
from types import SimpleNamespace
from typing import Dict, List

import pytest
import torch
from allennlp.common import Params
from allennlp.common.checks import ConfigurationError
from allennlp.data import Vocabulary
from allennlp.data.data_loaders import SimpleDataLoader
from allennlp.models import Model
from allennlp.training import Trainer
from allennlp.training.callbacks import TrainerCallback

import nerzoo.models.bilstm_crf  # noqa: F401  registers "bilstm_crf"
from nerzoo.data.dataset_readers.conll_columns import ConllColumnsReader
from nerzoo.training.callbacks.crf_transition_curriculum import CrfTransitionCurriculum, transition_parameters
from tests import FIXTURES_ROOT

TRANSITIONS = ("transitions", "start_transitions", "end_transitions")


@TrainerCallback.register("test_record_transitions")
class RecordTransitions(TrainerCallback):
    """
    Test-only: snapshots of every parameter at the start and after each epoch, and whether the
    transitions had a gradient after each training step (the optimizer saw one).
    """

    instances: List["RecordTransitions"] = []

    def __init__(self, serialization_dir: str) -> None:
        super().__init__(serialization_dir)
        self.at_start: Dict[str, torch.Tensor] = {}
        self.after_epoch: List[Dict[str, torch.Tensor]] = []
        self.grad_norms: List[float] = []
        self.stepped_with_gradient: Dict[int, List[bool]] = {}
        RecordTransitions.instances.append(self)

    @staticmethod
    def _snapshot(model) -> Dict[str, torch.Tensor]:
        crf = model.head.crf
        snapshot = {name: parameter.detach().clone() for name, parameter in model.named_parameters()}
        snapshot.update({name: getattr(crf, name).detach().clone() for name in TRANSITIONS})
        return snapshot

    def on_start(self, trainer, is_primary=True, **kwargs):
        super().on_start(trainer, is_primary=is_primary, **kwargs)
        self.at_start = self._snapshot(trainer.model)

    def on_batch(self, trainer, batch_inputs, batch_outputs, batch_metrics, epoch, batch_number, is_training, **kwargs):
        if is_training:
            self.grad_norms.append(kwargs.get("batch_grad_norm"))
            crf = trainer.model.head.crf
            with_gradient = [getattr(crf, name).grad is not None for name in TRANSITIONS]
            assert len(set(with_gradient)) == 1
            self.stepped_with_gradient.setdefault(epoch, []).append(with_gradient[0])

    def on_epoch(self, trainer, metrics, epoch, is_primary=True, **kwargs):
        self.after_epoch.append(self._snapshot(trainer.model))


@pytest.fixture(scope="module")
def data():
    instances = list(ConllColumnsReader(tag_column=3).read(FIXTURES_ROOT / "conll2003" / "dev.txt"))
    return instances, Vocabulary.from_instances(instances)


def _model(vocab, use_crf=True):
    torch.manual_seed(0)
    params = {
        "type": "bilstm_crf",
        "text_field_embedder": {"token_embedders": {"tokens": {"type": "embedding", "embedding_dim": 6}}},
        "encoder": {"type": "lstm", "input_size": 6, "hidden_size": 4, "bidirectional": True},
        "head": {"use_crf": use_crf},
    }
    return Model.from_params(vocab=vocab, params=Params(params))


def _trainer(data, serialization_dir, num_epochs, use_crf=True):
    instances, vocab = data
    model = _model(vocab, use_crf)
    loader = SimpleDataLoader(instances, batch_size=4, vocab=vocab)
    params = {
        "num_epochs": num_epochs,
        # Weight decay, gradient norm and clipping all run over the frozen parameters' None gradients.
        "optimizer": {"type": "adam", "lr": 0.05, "weight_decay": 0.01},
        "grad_norm": 1.0,
        "grad_clipping": 1.0,
        "cuda_device": -1,
        "callbacks": [{"type": "crf_transition_curriculum", "frozen_epochs": 2}, {"type": "test_record_transitions"}],
    }
    return Trainer.from_params(
        params=Params(params), model=model, serialization_dir=str(serialization_dir), data_loader=loader
    )


def test_transitions_stay_zero_for_the_frozen_epochs_then_train(data, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="nerzoo.training.callbacks.crf_transition_curriculum")
    RecordTransitions.instances.clear()
    _trainer(data, tmp_path, num_epochs=4).train()
    record = RecordTransitions.instances[-1]
    assert len(record.after_epoch) == 4
    first, second, third, fourth = record.after_epoch

    for snapshot in (record.at_start, first, second):
        for name in TRANSITIONS:
            assert torch.equal(snapshot[name], torch.zeros_like(snapshot[name])), name
    # Frozen during epoch 0 and 1 (the optimizer never saw a gradient of theirs), released once
    # epoch 1 (the second) has completed.
    assert record.stepped_with_gradient == {0: [False] * 4, 1: [False] * 4, 2: [True] * 4, 3: [True] * 4}
    for name in TRANSITIONS:
        assert third[name].abs().sum() > 0, name
        assert not torch.equal(third[name], fourth[name]), name
    # Everything else trains during the frozen epochs.
    trained_first = ("text_field_embedder", "encoder", "head.tag_projection")
    others = [name for name in record.at_start if name.startswith(trained_first)]
    assert others
    for before, after in ((record.at_start, first), (first, second)):
        for name in others:
            assert not torch.equal(before[name], after[name]), name
    assert all(norm is not None and torch.isfinite(torch.tensor(norm)) for norm in record.grad_norms)
    messages = [record.getMessage() for record in caplog.records]
    assert any("set to 0 and frozen" in message for message in messages)
    assert any("released (epoch 1 completed)" in message for message in messages)

    # Resume from the checkpoint after epoch 3 for one more epoch: the restored callback state says
    # the frozen epochs are over, so the trained transitions are kept and keep training.
    _trainer(data, tmp_path, num_epochs=5).train()
    resumed = RecordTransitions.instances[-1]
    assert resumed is not record and len(resumed.after_epoch) == 1
    assert resumed.stepped_with_gradient == {4: [True] * 4}
    for name in TRANSITIONS:
        assert torch.equal(resumed.at_start[name], fourth[name]), name
        assert not torch.equal(resumed.after_epoch[0][name], fourth[name]), name


def _fake_trainer(model):
    return SimpleNamespace(model=model, optimizer=torch.optim.Adam(p for p in model.parameters() if p.requires_grad))


def _step_moves_transitions(trainer) -> bool:
    """One optimizer step with a gradient of ones on the transitions: did they move?"""
    parameters = transition_parameters(trainer.model.head.crf)
    before = [parameter.detach().clone() for parameter in parameters]
    for parameter in parameters:
        parameter.grad = torch.ones_like(parameter)
    trainer.optimizer.step()
    trainer.optimizer.zero_grad()
    return any(not torch.equal(old, parameter) for old, parameter in zip(before, parameters))


def test_on_batch_releases_a_run_resumed_past_the_frozen_epochs(data):
    model = _model(data[1])
    trainer = _fake_trainer(model)
    curriculum = CrfTransitionCurriculum("unused", frozen_epochs=2)
    curriculum.on_start(trainer)
    parameters = transition_parameters(model.head.crf)
    # The parameters keep requiring gradients (DDP fixes its set when it wraps the model).
    assert len(parameters) == 3 and all(parameter.requires_grad for parameter in parameters)
    assert curriculum.frozen and not _step_moves_transitions(trainer)
    curriculum.on_batch(trainer, [], [], {}, epoch=1, batch_number=1, is_training=True)
    curriculum.on_batch(trainer, [], [], {}, epoch=2, batch_number=1, is_training=False)
    assert curriculum.frozen and not _step_moves_transitions(trainer)
    curriculum.on_batch(trainer, [], [], {}, epoch=2, batch_number=1, is_training=True)
    assert not curriculum.frozen and _step_moves_transitions(trainer)


def test_restored_state_past_the_frozen_epochs_leaves_transitions_alone(data):
    model = _model(data[1])
    before = model.head.crf.transitions.detach().clone()
    curriculum = CrfTransitionCurriculum("unused", frozen_epochs=2)
    curriculum.load_state_dict({"epochs_completed": 3})
    curriculum.on_start(_fake_trainer(model))
    assert torch.equal(model.head.crf.transitions, before)
    assert not curriculum.frozen
    assert curriculum.state_dict() == {"epochs_completed": 3}


def test_a_model_without_a_crf_raises(data, tmp_path):
    trainer = _trainer(data, tmp_path, num_epochs=1, use_crf=False)
    with pytest.raises(ConfigurationError, match="ConditionalRandomField"):
        trainer.train()


def test_transitions_left_out_of_the_optimizer_raise(data):
    model = _model(data[1])
    frozen = {id(parameter) for parameter in transition_parameters(model.head.crf)}
    optimizer = torch.optim.Adam(p for p in model.parameters() if p.requires_grad and id(p) not in frozen)
    with pytest.raises(ConfigurationError, match="not in the optimizer"):
        CrfTransitionCurriculum("unused", frozen_epochs=2).on_start(SimpleNamespace(model=model, optimizer=optimizer))


def test_builds_from_params(tmp_path):
    callback = TrainerCallback.from_params(
        Params({"type": "crf_transition_curriculum", "frozen_epochs": 3}), serialization_dir=str(tmp_path)
    )
    assert isinstance(callback, CrfTransitionCurriculum)
    assert callback.frozen_epochs == 3 and callback.serialization_dir == str(tmp_path)
    default = TrainerCallback.from_params(Params({"type": "crf_transition_curriculum"}), serialization_dir="x")
    assert default.frozen_epochs == 20
    with pytest.raises(ConfigurationError, match="frozen_epochs"):
        CrfTransitionCurriculum("x", frozen_epochs=-1)
