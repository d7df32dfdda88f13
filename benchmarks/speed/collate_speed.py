#!/usr/bin/env python
"""
The host's time per sentence to turn indexed instances into a batch's tensors: allennlp's
`Batch(instances).as_tensor_dict()` (the `default` collation) against nerzoo's `fast` collation,
which gives the same tensors.  A GPU waits on this in prediction and small-batch training.  Also
each with allennlp's `move_to_device` after it, as the trainer and `evaluate` run every batch
(`moved`: it walks allennlp's list of metadata word by word, and passes `fast`'s `BatchMetadata`
whole).  The config's validation data, batches of `--batch-sizes`, the fastest of `--passes`
alternated passes.

    NERZOO_DATA=conll2003 .venv/bin/python benchmarks/speed/collate_speed.py bilstm_crf deptree_ner
    .venv/bin/python benchmarks/speed/collate_speed.py bilstm_crf --passes 1   # fixtures: a smoke test
"""

import argparse
import os
import sys
from typing import Any, Dict, List

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import harness  # noqa: E402


def measure(config_name: str, batch_sizes: List[int], passes: int) -> List[Dict[str, Any]]:
    from allennlp.common.params import Params
    from allennlp.common.util import import_module_and_submodules
    from allennlp.data import Batch, DatasetReader, Vocabulary
    from allennlp.nn.util import move_to_device

    import_module_and_submodules("nerzoo")
    from nerzoo.data.fast_collator import FastCollator

    config = Params.from_file(f"training_config/{config_name}.jsonnet", ext_vars=dict(os.environ)).as_dict(quiet=True)
    reader = DatasetReader.from_params(Params(config["dataset_reader"]))
    instances = list(reader.read(config["validation_data_path"]))
    vocab = Vocabulary.from_instances(instances)
    for instance in instances:
        instance.index_fields(vocab)
    fast = FastCollator()
    rows = []
    for size in batch_sizes:
        batches = harness.batches(instances, size)
        runs = {
            "default": lambda batches=batches: [Batch(batch).as_tensor_dict() for batch in batches],
            "fast": lambda batches=batches: [fast(batch) for batch in batches],
            "default moved": lambda batches=batches: [move_to_device(Batch(b).as_tensor_dict(), -1) for b in batches],
            "fast moved": lambda batches=batches: [move_to_device(fast(batch), -1) for batch in batches],
        }
        seconds, _ = harness.timed_passes(runs, passes, alternate=True)
        micro = {name: min(values) / len(instances) * 1e6 for name, values in seconds.items()}
        rows.append({"config": config_name, "batch": size, "sentences": len(instances), **micro})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("configs", nargs="+", help="names of training_config/*.jsonnet")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[10, 64])
    parser.add_argument("--passes", type=int, default=5)
    args = parser.parse_args()
    print(harness.machine_description())
    print(f"{'config':<16} {'batch':>5} {'sentences':>9}  us a sentence: default, fast (ratio); both moved (ratio)")
    for name in args.configs:
        for row in measure(name, args.batch_sizes, args.passes):
            print(
                f"{row['config']:<16} {row['batch']:>5} {row['sentences']:>9}  {row['default']:.1f}, {row['fast']:.1f}"
                f" ({row['default'] / row['fast']:.1f}x); {row['default moved']:.1f}, {row['fast moved']:.1f}"
                f" ({row['default moved'] / row['fast moved']:.1f}x)"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
