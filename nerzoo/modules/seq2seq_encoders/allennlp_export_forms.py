"""
The forms `allennlp export` traces of allennlp's registered encoders (Seq2Seq and Seq2Vec), and the
walk that puts every part of a model in its traced form.  allennlp's `lstm`, `gru` and `rnn` pack
their batch with the lengths as Python numbers, which a trace fixes to the traced batch: here they
run on the padded batch (`PaddedRnn`, `RnnFinalStates`), as `fast_lstm` does.  The encoders of
`TRACED_AS_THEY_ARE` need no other form; every other encoder allennlp registers is refused by its
registered name before tracing.  nerzoo's own modules give their form through `export_form()`
(`nerzoo.contracts.HasExportForm`) or trace as they are.
"""

import copy
from typing import List, Optional

import torch
from allennlp.common.checks import ConfigurationError
from allennlp.modules import Seq2SeqEncoder, Seq2VecEncoder
from allennlp.modules import seq2seq_encoders as seq2seq
from allennlp.modules import seq2vec_encoders as seq2vec

from nerzoo.contracts import HasExportForm
from nerzoo.modules.seq2seq_encoders.fast_lstm import padded_run


class PaddedRnn(seq2seq.PytorchSeq2SeqWrapper):
    """
    allennlp's `lstm`, `gru` or `rnn` Seq2SeqEncoder as the export traces it: run on the padded
    batch as `fast_lstm` runs an LSTM (`padded_run`), zeros at padding.

    # Parameters

    encoder : `seq2seq.PytorchSeq2SeqWrapper`, required
        Its torch RNN, parameters included, is shared, not copied.
    """

    def __init__(self, encoder: seq2seq.PytorchSeq2SeqWrapper) -> None:
        super().__init__(encoder._module)

    def forward(self, inputs: torch.Tensor, mask: torch.BoolTensor, hidden_state: None = None) -> torch.Tensor:
        """`(batch_size, num_steps, input_size)` -> `(batch_size, num_steps, directions * hidden_size)`."""
        return padded_run(self._module, inputs, mask, False)


class RnnFinalStates(seq2vec.PytorchSeq2VecWrapper):
    """
    allennlp's `lstm`, `gru` or `rnn` Seq2VecEncoder as the export traces it: the padded run's top
    layer read at each row's last step (forward direction) and at its first (backward direction).

    # Parameters

    encoder : `seq2vec.PytorchSeq2VecWrapper`, required
        Its torch RNN, parameters included, is shared, not copied.
    """

    def __init__(self, encoder: seq2vec.PytorchSeq2VecWrapper) -> None:
        super().__init__(encoder._module)

    def forward(self, inputs: torch.Tensor, mask: torch.BoolTensor, hidden_state: None = None) -> torch.Tensor:
        """`(batch_size, num_steps, input_size)` -> `(batch_size, directions * hidden_size)`, zeros for empty rows."""
        rnn, steps = self._module, padded_run(self._module, inputs, mask, False)
        last = (mask.long().sum(dim=1) - 1).clamp(min=0)
        final = steps.gather(1, last[:, None, None].expand(-1, 1, steps.size(-1)))[:, 0]
        if not rnn.bidirectional:
            return final
        size = rnn.hidden_size  # the backward direction ends at the first step
        return torch.cat([final[:, :size], steps[:, 0, size:]], dim=-1)


class ComposedEncoders(seq2seq.ComposeEncoder):
    """
    allennlp's `compose` Seq2SeqEncoder run over its child modules, which the export puts in their
    traced forms (`compose` runs the plain list it keeps of them).

    # Parameters

    encoder : `seq2seq.ComposeEncoder`, required
        Its encoders, parameters included, are shared, not copied.
    """

    def __init__(self, encoder: seq2seq.ComposeEncoder) -> None:
        super().__init__(list(encoder.encoders))

    def forward(self, inputs: torch.Tensor, mask: torch.BoolTensor = None) -> torch.Tensor:
        for encoder in self.children():
            inputs = encoder(inputs, mask)
        return inputs


FORMS = {
    seq2seq.ComposeEncoder: ComposedEncoders,
    # The wrappers of a torch RNN: `lstm`, `gru`, `rnn`, and the bare wrapper nerzoo's modules build.
    seq2seq.PytorchSeq2SeqWrapper: PaddedRnn,
    seq2seq.LstmSeq2SeqEncoder: PaddedRnn,
    seq2seq.GruSeq2SeqEncoder: PaddedRnn,
    seq2seq.RnnSeq2SeqEncoder: PaddedRnn,
    seq2vec.PytorchSeq2VecWrapper: RnnFinalStates,
    seq2vec.LstmSeq2VecEncoder: RnnFinalStates,
    seq2vec.GruSeq2VecEncoder: RnnFinalStates,
    seq2vec.RnnSeq2VecEncoder: RnnFinalStates,
}
# allennlp's encoders whose forward a trace follows over any batch.
TRACED_AS_THEY_ARE = (
    seq2seq.PassThroughEncoder,
    seq2seq.FeedForwardEncoder,
    seq2seq.GatedCnnEncoder,
    seq2seq.PytorchTransformer,
    seq2vec.BagOfEmbeddingsEncoder,
    seq2vec.ClsPooler,
    seq2vec.CnnEncoder,
    seq2vec.CnnHighwayEncoder,
)


def allennlp_encoder_name(module: torch.nn.Module) -> Optional[str]:
    """The name allennlp registers `module`'s class under as a Seq2Seq or Seq2Vec encoder, if it does."""
    for base in (Seq2SeqEncoder, Seq2VecEncoder):
        for name in base.list_available():
            registered = base.resolve_class_name(name)[0]
            if registered is type(module) and registered.__module__.startswith("allennlp."):
                return name
    return None


def traced_form(module: torch.nn.Module, path: List[str]) -> torch.nn.Module:
    """
    `module` with every part in the form the export traces (new modules where a part changes, the
    parameters shared; `module` itself is left as it is); raises a `ConfigurationError` naming the first allennlp encoder it has no form for
    (`path`: the attribute names down to `module`).
    """
    if isinstance(module, HasExportForm):
        module = module.export_form()
    elif type(module) in FORMS:
        if getattr(module, "stateful", False):
            raise ConfigurationError(f"its encoder {allennlp_encoder_name(module)!r} is stateful: no exported form")
        module = FORMS[type(module)](module)
    elif not isinstance(module, TRACED_AS_THEY_ARE) and allennlp_encoder_name(module) is not None:
        raise ConfigurationError(
            f"its encoder {allennlp_encoder_name(module)!r} has no exported form (at {'.'.join(path)})"
        )
    children = {name: traced_form(child, path + [name]) for name, child in module.named_children()}
    if any(form is not getattr(module, name) for name, form in children.items()):
        module = copy.copy(module)  # the parts that stay are shared, the original is left as it is
        module._modules = dict(children)
    return module
