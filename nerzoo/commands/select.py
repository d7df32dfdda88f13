import argparse
import json
import os
import sys
from typing import Any, Callable, Dict, List, NamedTuple, Tuple

import numpy
import torch
from allennlp.commands.subcommand import Subcommand
from allennlp.common.checks import ConfigurationError
from allennlp.common.tqdm import Tqdm
from allennlp.data import Instance
from allennlp.models import Model
from allennlp.models.archival import load_archive
from allennlp.predictors import Predictor
from nerzoo_runtime.tag_scheme import convert_tags

from nerzoo.commands import one_line_errors
from nerzoo.commands._selection import (
    choose,
    expected_errors,
    expected_span_count,
    mnlp,
    open_questions,
    opening_tags,
    token_entropy,
)
from nerzoo.contracts import MemoryAttentionModel, TagProbabilityModel
from nerzoo.data.spacy_pipelines import DEFAULT_SPACY_PIPELINE, MissingSpacyPipeline
from nerzoo.models.fofe_ner import FofeNer
from nerzoo.modules.crf.tag_decoder import DecodedTagger
from nerzoo.modules.crf.tag_head import TagHead
from nerzoo.predictors.input_lines import INPUT_ERRORS, parse_line

STRATEGIES = ("mnlp", "token_entropy", "expected_errors", "random")  # the default: the first a model scores
# What a model lacks when it cannot score a strategy.
NEEDS = {
    "mnlp": "probability of its whole predicted tag sequence (a TagHead gives it)",
    "token_entropy": "tag marginals",
    "expected_errors": "exact expected number of spans (a CRF constrained to BIO or BIOUL gives it)",
}
GOLD_FIELDS = ("tags", "entities")  # what a dataset reader's gold labels are called; never read here


@Subcommand.register("select")
class Select(Subcommand):
    """
    `allennlp select ARCHIVE POOL --budget N --output FILE` chooses the sentences of POOL most worth
    annotating next (active learning) and writes them, pre-filled with the model's prediction, in
    the order of their scores.  ARCHIVE is only read.

    POOL is what `allennlp predict` reads for the archive (JSON lines, `{"sentence": TEXT}` or
    `{"tokens": [...]}`), a line a sentence; a line that cannot be used is reported on stderr as
    `POOL:LINE: why` and left out.  With `--use-dataset-reader` POOL is read by the archive's
    (validation) dataset reader instead, its gold labels ignored.

    `--strategy` (higher scores first; ties, and `random`'s order, by a permutation seeded with `--seed`;
    the default is the first of these the model can score, in the order they ranked on CoNLL-2003,
    docs/active_learning.md):

    - `mnlp`: Shen et al. (2017), `-log P(y* | x) / n` of the predicted tags `y*`, from the CRF at the
      archive's temperatures;
    - `token_entropy`: the entropy of each token's tag marginals, averaged over the sentence's words
      (so that a budget in words buys the most uncertain words);
    - `expected_errors`: the predicted spans' expected errors, `sum_s (1 - c_s)` (false
      positives) plus `E[number of spans] - sum_s c_s` (spans missed), with `c_s` a span's
      confidence and `E[number of spans]` the marginal probability, summed over the tokens, that a
      span opens there (a CRF constrained to BIO or BIOUL; `fofe_ner`: the sum over its scored
      fragments of P(not NONE));
    - `random`: every score 0.

    `--budget N` (`--unit words` or `sentences`): sentences are taken in score order until the next
    would take the total past N; if the first alone does, it is an error.

    `--output FILE` gets one JSON line per sentence: `source` (`POOL:LINE`, or with
    `--use-dataset-reader` the reader's `source` or the instance's index), `score`, `tokens`, `tags`
    (the model's, in BIO), `spans` (`start`, `end` exclusive, `label`, `confidence`) and `uncertain`
    (the tokens whose predicted tag's marginal is below `--uncertain-below`).  With `--output-format
    conll`, `TOKEN<TAB>TAG` lines in BIO and a blank line after each sentence instead: the
    `conll_columns` reader reads them with `file_tag_scheme: "BIO"` once the tags are corrected.

    `--partial THRESHOLD` asks only about the uncertain tokens (`uncertain` below THRESHOLD),
    widened to every predicted span they touch: those stretches keep the model's tags, every other
    token gets `-` (not annotated, docs/partial.md), the budget in words counts the stretches'
    tokens, and a sentence without one is not chosen.  The annotator corrects the tags of the
    stretches (extending a stretch over `-` tokens where an entity runs on) and leaves the `-` as
    they are; the file then trains a CRF archive as partial annotation.

    Registered as a `Subcommand` with name "select".
    """

    def add_subparser(self, parser: argparse._SubParsersAction) -> argparse.ArgumentParser:
        subparser = parser.add_parser(
            self.name, description=self.__doc__, help="Choose the sentences of a pool most worth annotating next."
        )
        subparser.add_argument("archive_file", help="a model.tar.gz of a nerzoo tagger")
        subparser.add_argument("pool", help="JSON lines as `allennlp predict` reads them (or see --use-dataset-reader)")
        subparser.add_argument("--budget", type=int, required=True, help="how many words (or sentences) to choose")
        subparser.add_argument("--unit", choices=["words", "sentences"], default="words")
        subparser.add_argument("--strategy", choices=STRATEGIES, help="default: the first of these the model scores")
        subparser.add_argument("--output", required=True, help="the file to write")
        subparser.add_argument("--output-format", choices=["json", "conll"], default="json")
        subparser.add_argument("--partial", type=float, metavar="THRESHOLD", help="ask only about uncertain stretches")
        subparser.add_argument("--uncertain-below", type=float, default=0.9, help="uncertain below this marginal")
        subparser.add_argument("--seed", type=int, default=0)
        subparser.add_argument("--use-dataset-reader", action="store_true", help="POOL is read by the archive's reader")
        subparser.add_argument("--spacy-model", default=DEFAULT_SPACY_PIPELINE, help="tokenises raw text")
        subparser.add_argument("--batch-size", type=int, default=64)
        subparser.add_argument("--cuda-device", type=int, default=-1)
        subparser.set_defaults(func=_select)
        return subparser


class Sentence(NamedTuple):
    source: str
    tokens: List[str]
    tags: List[str]  # the model's, in BIO (plain labels as they are)
    spans: List[Dict[str, Any]]
    confidences: List[float]  # each predicted tag's marginal
    score: float


Scorer = Callable[[Dict[str, Any]], float]


def scorers(model: Model) -> Dict[str, Scorer]:
    """The strategies `model` can score, each as a function of one instance's `forward_on_instances` output."""
    found: Dict[str, Scorer] = {"random": lambda output: 0.0}
    head = getattr(model, "head", None)
    if isinstance(model, TagProbabilityModel):
        found["token_entropy"] = lambda output: token_entropy(_marginals(output))
    if isinstance(head, TagHead):
        found["mnlp"] = lambda output: mnlp(float(output["sequence_log_probabilities"]), len(output["tags"]))
        opens = opening_tags(head.tag_labels(), head.crf.allowed_moves()) if head.crf is not None else None
        if opens is not None:
            found["expected_errors"] = lambda output: expected_errors(
                expected_span_count(_marginals(output), opens), _confidences(output)
            )
    if isinstance(model, FofeNer):

        def fofe_errors(output: Dict[str, Any]) -> float:
            entity = 1.0 - numpy.asarray(output["class_confidences"], dtype=numpy.float64)[:, 0]
            return expected_errors(
                float(entity[numpy.asarray(output["span_mask"], dtype=bool)].sum()), _confidences(output)
            )

        found["expected_errors"] = fofe_errors
    return found


def _marginals(output: Dict[str, Any]) -> numpy.ndarray:
    return numpy.asarray(output["tag_probabilities"])[: len(output["tags"])]


def _confidences(output: Dict[str, Any]) -> List[float]:
    return [float(span.get("confidence", span.get("score"))) for span in output["spans"]]


def read_pool(args: argparse.Namespace, predictor: Predictor) -> Tuple[List[Instance], List[str]]:
    """The pool's instances and where each comes from; lines that cannot be used are reported on stderr."""
    if args.use_dataset_reader:
        instances = []
        for instance in predictor._dataset_reader.read(args.pool):
            instance = Instance({name: field for name, field in instance.fields.items() if name not in GOLD_FIELDS})
            predictor._dataset_reader.apply_token_indexers(instance)
            instances.append(instance)
        sources = [instance["metadata"].metadata.get("source", index) for index, instance in enumerate(instances)]
        return instances, [str(source) for source in sources]
    if not os.path.isfile(args.pool):
        raise ConfigurationError(f"{args.pool}: no such file")
    instances, sources = [], []
    with open(args.pool, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8")
                if not line.strip():
                    continue
                item = parse_line(line, number)
                if item.error is not None:
                    raise ConfigurationError(item.error)
                built = predictor._instance_or_result(item)
                if not isinstance(built, Instance):
                    raise ConfigurationError("no tokens")
            except MissingSpacyPipeline:
                raise
            except (*INPUT_ERRORS, UnicodeDecodeError) as error:
                print(f"{args.pool}:{number}: {error}", file=sys.stderr)
                continue
            instances.append(built)
            sources.append(f"{args.pool}:{number}")
    return instances, sources


def score_pool(
    model: Model, instances: List[Instance], sources: List[str], scorer: Scorer, batch_size: int
) -> List[Sentence]:
    """Every instance's prediction and score, the model run on batches of similar lengths."""
    tagger = getattr(model, "head", model)
    scheme = tagger.decoder.tag_scheme if isinstance(tagger, DecodedTagger) else "BIO"  # span classifiers: BIO
    order = sorted(range(len(instances)), key=lambda index: len(instances[index]["metadata"]["words"]))
    sentences: Dict[int, Sentence] = {}
    with torch.inference_mode(), Tqdm.tqdm(total=len(instances), desc="select") as progress:
        for first in range(0, len(order), batch_size):
            batch = order[first : first + batch_size]
            for index, output in zip(batch, model.forward_on_instances([instances[index] for index in batch])):
                tags = [str(tag) for tag in output["tags"]]
                spans = [
                    {key: span[key] for key in ("start", "end", "label")} | {"confidence": confidence}
                    for span, confidence in zip(output["spans"], _confidences(output))
                ]
                words = instances[index]["metadata"]["words"]
                bio = convert_tags(tags, "BIO") if scheme is not None else tags
                confidences = [float(value) for value in output["tag_confidences"]]
                sentences[index] = Sentence(sources[index], list(words), bio, spans, confidences, scorer(output))
            progress.update(len(batch))
    return [sentences[index] for index in range(len(instances))]


def select(args: argparse.Namespace) -> Dict[str, Any]:
    """Chooses and writes the sentences; returns what was chosen (`chosen`, `words`, `pool`)."""
    if args.budget < 1:
        raise ConfigurationError(f"--budget must be at least 1 {args.unit[:-1]}, got {args.budget}")
    if args.batch_size < 1:
        raise ConfigurationError(f"--batch-size must be at least 1, got {args.batch_size}")
    if not os.path.isfile(args.archive_file):
        raise ConfigurationError(f"{args.archive_file}: no such archive")
    archive = load_archive(args.archive_file, cuda_device=args.cuda_device)
    model, name = archive.model.eval(), archive.config["model"]["type"]
    if isinstance(model, MemoryAttentionModel):
        raise ConfigurationError(
            f"select does not support {name}: its instances are whole documents, and a sentence chosen from one "
            "would need the rest of its document beside it to train on"
        )
    found = scorers(model)
    scorable = [strategy for strategy in STRATEGIES if strategy in found]  # never empty: `random`
    strategy = args.strategy or scorable[0]
    if strategy not in found:
        raise ConfigurationError(
            f"select: {name} cannot score --strategy {strategy}: it gives no {NEEDS[strategy]}; "
            f"it can score {', '.join(scorable)}"
        )
    predictor = Predictor.from_archive(archive, "sequence_tagger", extra_args={"spacy_model": args.spacy_model})
    instances, sources = read_pool(args, predictor)
    if not instances:
        raise ConfigurationError(f"{args.pool}: the pool has no sentence to select from")
    sentences = score_pool(model, instances, sources, found[strategy], args.batch_size)
    threshold = args.uncertain_below if args.partial is None else args.partial
    asked = [open_questions(s.confidences, [(x["start"], x["end"]) for x in s.spans], threshold) for s in sentences]
    if args.partial is None:
        costs = [len(sentence.tokens) if args.unit == "words" else 1 for sentence in sentences]
    else:
        costs = [sum(marked) if args.unit == "words" else int(any(marked)) for marked in asked]
    chosen = choose([sentence.score for sentence in sentences], costs, args.budget, args.seed)
    if not chosen:
        why = "no sentence has an uncertain token" if not any(costs) else "the first sentence by score alone exceeds it"
        raise ConfigurationError(f"select: nothing fits in --budget {args.budget} {args.unit}: {why}")
    lines = [_record(sentences[index], asked[index], threshold, args) for index in chosen]
    with open(args.output + ".part", "w", encoding="utf-8") as out:
        out.writelines(lines)
    os.replace(args.output + ".part", args.output)
    return {"chosen": len(chosen), "words": sum(costs[index] for index in chosen), "pool": len(sentences)}


def _record(sentence: Sentence, asked: List[bool], threshold: float, args: argparse.Namespace) -> str:
    """One chosen sentence as the output writes it."""
    tags, spans = sentence.tags, sentence.spans
    if args.partial is not None:
        tags = [tag if marked else "-" for tag, marked in zip(tags, asked)]
        spans = [span for span in spans if asked[span["start"]]]
    if args.output_format == "conll":
        return "".join(f"{token}\t{tag}\n" for token, tag in zip(sentence.tokens, tags)) + "\n"
    uncertain = [index for index, value in enumerate(sentence.confidences) if value < threshold]
    record = {"source": sentence.source, "score": sentence.score, "tokens": sentence.tokens, "tags": tags}
    return json.dumps(record | {"spans": spans, "uncertain": uncertain}) + "\n"


def _select(args: argparse.Namespace) -> None:
    with one_line_errors():
        report = select(args)
    unit = "sentences" if args.unit == "sentences" else "words" if args.partial is None else "tokens to label"
    print(f"select: {report['chosen']} of {report['pool']} sentences ({report['words']} {unit}) -> {args.output}")
