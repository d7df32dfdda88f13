import argparse
import json
import os
from typing import Dict, List, Optional

from allennlp.commands.subcommand import Subcommand
from allennlp.commands.train import train_model_from_file
from allennlp.common import Params
from allennlp.common.checks import ConfigurationError
from allennlp.models.archival import load_archive

from nerzoo.commands import one_line_errors


@Subcommand.register("cross-estimate")
class CrossEstimate(Subcommand):
    """
    `allennlp cross-estimate CONFIG -s DIR`: Jie et al.'s cross-estimation (2019, NAACL, §3.2) over
    the AllenNLP trainer.  In each of `--rounds` rounds, for each of `--folds` folds of the training
    sentences (`conll_columns`' `?held_out=K:J`), a model trained on the other folds gives the
    fold's open tokens their exact tag marginals, which weigh those tags in the next round's loss
    (the reader's `open_weights`); `DIR/model` trains on every sentence with the last weights.
    `DIR/round<r>.jsonl` holds round r's weights, a JSON line a sentence with open tokens:
    `{"id": SENTENCE_ID, "tags": [null or {TAG: probability}, ...]}`.  What DIR holds is not done
    again: a stopped run goes on where it was.
    """

    def add_subparser(self, parser: argparse._SubParsersAction) -> argparse.ArgumentParser:
        subparser = parser.add_parser(
            self.name, description=self.__doc__, help="Train on partial annotation with cross-estimated weights."
        )
        subparser.add_argument("config_file", help="a training config whose reader is conll_columns")
        subparser.add_argument("-s", "--serialization-dir", required=True)
        subparser.add_argument("--folds", type=int, default=2)
        subparser.add_argument("--rounds", type=int, default=3)
        subparser.add_argument("-o", "--overrides", default="", help="a JSON string of overrides")
        subparser.set_defaults(func=lambda args: cross_estimate(args))
        return subparser


def cross_estimate(args: argparse.Namespace) -> None:
    with one_line_errors():
        if args.folds < 2 or args.rounds < 1:
            raise ConfigurationError(f"--folds must be >= 2 and --rounds >= 1, got {args.folds} and {args.rounds}")
        overrides = json.loads(args.overrides or "{}")
        train_path = Params.from_file(args.config_file, args.overrides)["train_data_path"]
        weights: Optional[str] = None
        for round_number in range(1, args.rounds + 1):
            path = os.path.join(args.serialization_dir, f"round{round_number}.jsonl")
            if not os.path.exists(path):
                lines: List[str] = []
                for fold in range(args.folds):
                    print(f"cross-estimate: round {round_number} of {args.rounds}, fold {fold + 1} of {args.folds}")
                    directory = os.path.join(args.serialization_dir, f"round{round_number}", f"fold{fold}")
                    rest = {"train_data_path": f"{train_path}?without_held_out={args.folds}:{fold}"}
                    archive = _trained(args.config_file, directory, {**overrides, **rest}, weights)
                    lines += _marginals(archive, f"{train_path}?held_out={args.folds}:{fold}")
                with open(path + ".part", "w", encoding="utf-8") as out:
                    out.writelines(lines)
                os.replace(path + ".part", path)
            weights = path
        print(f"cross-estimate: the final model on every sentence, with {weights}")
        _trained(args.config_file, os.path.join(args.serialization_dir, "model"), overrides, weights)


def _trained(config: str, directory: str, overrides: Dict, weights: Optional[str]) -> str:
    archive = os.path.join(directory, "model.tar.gz")
    if not os.path.exists(archive):
        with_weights = {**overrides, "dataset_reader.open_weights": weights}
        train_model_from_file(config, directory, json.dumps(with_weights), force=True)
    return archive


def _marginals(archive_file: str, data_path: str) -> List[str]:
    """The weights lines of the sentences of `data_path` with open tokens: the model's tag marginals there."""
    archive = load_archive(archive_file)
    model, reader = archive.model.eval(), archive.dataset_reader
    labels = model.tag_labels()
    instances = [instance for instance in reader.read(data_path) if instance["metadata"].get("partial")]
    lines = []
    for start in range(0, len(instances), 64):
        batch = instances[start : start + 64]
        for instance, output in zip(batch, model.forward_on_instances(batch)):
            tags = [
                None if tag is not None else {label: round(float(p), 6) for label, p in zip(labels, row) if p >= 1e-6}
                for tag, row in zip(instance["tags"].labels, output["tag_probabilities"])
            ]
            lines.append(json.dumps({"id": instance["metadata"]["sentence_ids"][0], "tags": tags}) + "\n")
    return lines
