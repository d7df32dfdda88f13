"""
The fast path of the predictor's batches on the CPU: allennlp's `MetadataField`, whose batch is a
`UserList`, which `Model.forward_on_instances`'s `move_to_device` passes through whole instead of
walking every word and offset of the metadata (224,000 calls on CoNLL-2003 test), where the CPU moves
nothing.  The model reads it as the list, by index and iteration; tests/predictors/test_sequence_tagger.py.
"""

from collections import UserList
from typing import Any, List

from allennlp.data.fields import MetadataField


class UnwalkedMetadataField(MetadataField):
    def batch_tensors(self, tensor_list: List[Any]) -> UserList:  # type: ignore[override]
        return UserList(tensor_list)
