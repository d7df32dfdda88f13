"""
What every nerzoo model adds to allennlp's `Model`: its `regularizer` applied as a
`GroupedRegularizerApplicator` (one `foreach` norm per l2 term instead of calls per parameter), and
`forward_on_instances` (what `allennlp predict`, `Predictor`s and `serve` call) with the batch's
tensors made by `FastCollator`: the same outputs, with less of the host's time per sentence, which
bounds prediction on a GPU.
"""

from typing import Any, Dict, List, Optional

import torch
from allennlp.common import util
from allennlp.data import Instance, Vocabulary
from allennlp.models.model import Model
from allennlp.nn.regularizers import RegularizerApplicator

from nerzoo.data.fast_collator import FastCollator
from nerzoo.training.grouped_regularizer import GroupedRegularizerApplicator


class NerzooModel(Model):
    """
    The base of nerzoo's models (not registered itself).

    # Parameters

    vocab : `Vocabulary`, required
    regularizer : `RegularizerApplicator`, optional
        Applied as a `GroupedRegularizerApplicator` with the same regexes.
    **kwargs : passed to `Model` (e.g. `serialization_dir`)
    """

    def __init__(self, vocab: Vocabulary, regularizer: Optional[RegularizerApplicator] = None, **kwargs) -> None:
        super().__init__(vocab, regularizer=GroupedRegularizerApplicator.of(regularizer), **kwargs)

    def forward_on_instances(self, instances: List[Instance]) -> List[Dict[str, Any]]:
        """
        allennlp's, with `FastCollator`: one dict per instance, a tensor's rows as numpy arrays, a
        list's items; an output that is not one per instance is left out (allennlp warns once), a
        0-dim tensor taken as one row.
        """
        batch_size = len(instances)
        with torch.no_grad():
            for instance in instances:
                instance.index_fields(self.vocab)
            inputs = tensors_to_device(FastCollator()(instances), util.int_to_device(self._get_prediction_device()))
            outputs = self.make_output_human_readable(self(**inputs))
        separated: List[Dict[str, Any]] = [{} for _ in range(batch_size)]
        for name, output in outputs.items():
            if isinstance(output, torch.Tensor):
                output = output.detach().reshape(1) if output.dim() == 0 else output.detach()
                if output.size(0) != batch_size:
                    self._maybe_warn_for_unseparable_batches(name)
                    continue
                rows: Any = output.cpu().numpy()
            elif len(output) != batch_size:
                self._maybe_warn_for_unseparable_batches(name)
                continue
            else:
                rows = output
            for instance_output, row in zip(separated, rows):
                instance_output[name] = row
        return separated


def tensors_to_device(batch: Dict[str, Any], device: torch.device) -> Dict[str, Any]:
    """
    A collated batch with its tensors, at any depth of dicts, on `device`. Unlike allennlp's
    `move_to_device` it does not walk lists (a batch's metadata), which cost a call per word.
    """
    moved: Dict[str, Any] = {}
    for name, value in batch.items():
        if isinstance(value, torch.Tensor):
            moved[name] = value if value.device == device else value.to(device)
        elif isinstance(value, dict):
            moved[name] = tensors_to_device(value, device)
        else:
            moved[name] = value
    return moved
