"""
The fast path of a predictor's batches on the CPU.  allennlp's `Model.forward_on_instances` hands
the batch to `nn.util.move_to_device`, which walks every list, tuple and dict in it, the metadata
included: a call per word and three per character offset (224,000 for CoNLL-2003's test set), where
the CPU moves nothing.  `UnwalkedMetadataField` is allennlp's `MetadataField` whose batch is a
sequence that is not a list, so it passes through whole; the model reads it as it reads the list,
by index and by iteration.  Tested equal in tests/predictors/test_sequence_tagger.py.
"""

from typing import Any, List, Sequence

from allennlp.data.fields import MetadataField


class MetadataBatch(Sequence):
    """The metadata of a batch's instances, in order."""

    def __init__(self, values: List[Any]) -> None:
        self._values = values

    def __getitem__(self, index):
        return self._values[index]

    def __len__(self) -> int:
        return len(self._values)


class UnwalkedMetadataField(MetadataField):
    def batch_tensors(self, tensor_list: List[Any]) -> MetadataBatch:  # type: ignore[override]
        return MetadataBatch(tensor_list)
