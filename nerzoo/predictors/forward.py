from typing import Any, Dict, List

import torch
from allennlp.data import Batch, Instance
from allennlp.models import Model


def forward_on_instances(model: Model, instances: List[Instance]) -> List[Dict[str, Any]]:
    """
    `Model.forward_on_instances` (one batch, `make_output_human_readable`, outputs split per
    instance), except that only tensors are moved to the model's device: allennlp's
    `move_to_device` rebuilds every list and tuple of the metadata (words, character offsets,
    sentence spans), a Python call per element, which costs more than the CRF's forward-backward.
    """
    with torch.no_grad():
        device = model._get_prediction_device()
        batch = Batch(instances)
        batch.index_instances(model.vocab)
        inputs = batch.as_tensor_dict()
        if device >= 0:
            inputs = _tensors_to(inputs, torch.device("cuda", device))
        outputs = model.make_output_human_readable(model(**inputs))
        separated: List[Dict[str, Any]] = [{} for _ in instances]
        for name, output in list(outputs.items()):
            if isinstance(output, torch.Tensor):
                if output.dim() == 0:
                    output = output.unsqueeze(0)
                if output.size(0) != len(instances):
                    model._maybe_warn_for_unseparable_batches(name)
                    continue
                output = output.detach().cpu().numpy()
            elif len(output) != len(instances):
                model._maybe_warn_for_unseparable_batches(name)
                continue
            for instance_output, element in zip(separated, output):
                instance_output[name] = element
        return separated


def _tensors_to(inputs: Any, device: torch.device) -> Any:
    """Tensors, and tensors in (nested) dicts, moved to `device`; anything else (metadata) as it is."""
    if isinstance(inputs, torch.Tensor):
        return inputs.to(device)
    if isinstance(inputs, dict):
        return {key: _tensors_to(value, device) for key, value in inputs.items()}
    return inputs
