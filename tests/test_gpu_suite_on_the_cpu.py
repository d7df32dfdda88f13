"""
The parity cases of the GPU suite (tests/gpu/test_module_parity.py) run on the CPU against the CPU,
with cuDNN's rule for RNNs applied there (tests/gpu/cudnn_rnn_rule.py): a case that backpropagates
through an RNN in evaluation mode fails here as it would on a GPU, and one that leaves a dropout on
compares two different masks. Every case must run its comparison: none skipped.
"""

import os
import re
import subprocess
import sys

from tests import PROJECT_ROOT


def test_module_parity_cases_pass_on_the_cpu():
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/gpu/test_module_parity.py"],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "NERZOO_TEST_DEVICE": "cpu"},
    )
    summary = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert re.search(r"\d+ passed", summary) and not re.search("skipped|failed|error|deselected", summary), summary
