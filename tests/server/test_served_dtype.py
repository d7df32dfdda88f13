"""The server predicts in its dtype by casting the model, never by changing torch's default dtype."""

import pytest
import torch

from tests import FIXTURES_ROOT

ARCHIVE = FIXTURES_ROOT / "archives" / "bilstm_crf_tiny.tar.gz"
REQUESTS = [{"sentence": "Peter Blackburn visited Brussels on Monday ."}, {"sentence": "Anna Keller went to Oslo"}]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_the_model_runs_in_its_dtype_and_the_default_dtype_is_left_alone(dtype):
    from nerzoo.server.served_model import DTYPES, ServedModel

    served = ServedModel("tiny", str(ARCHIVE), dtype=dtype)
    seen = []

    def record(module, inputs, output):
        seen.append((torch.get_default_dtype(), output["logits"].dtype))

    served.archive.model.register_forward_hook(record)
    batched = served.predict_batch([(request, (False, True)) for request in REQUESTS])
    alone = [served.predict_batch([(request, (False, True))])[0] for request in REQUESTS]
    assert torch.get_default_dtype() == torch.float32
    assert seen and set(seen) == {(torch.float32, DTYPES[dtype])}
    assert {parameter.dtype for parameter in served.archive.model.parameters()} == {DTYPES[dtype]}
    if dtype == "float64":
        assert batched == alone
