import argparse
import json
import sys

from allennlp.commands.subcommand import Subcommand
from allennlp.models.archival import load_archive
from allennlp.predictors import Predictor

from nerzoo.commands import one_line_errors
from nerzoo.data.spacy_pipelines import DEFAULT_SPACY_PIPELINE


@Subcommand.register("tag-text")
class TagText(Subcommand):
    """
    `allennlp tag-text ARCHIVE "Some raw text ."` tags raw text with a trained nerzoo tagger and
    prints each token's tag and confidence (and, for models over dependency trees, the POS tag,
    dependency relation and 1-based head spaCy gave it), then the entities with character offsets.

    Registered as a `Subcommand` with name "tag-text".
    """

    def add_subparser(self, parser: argparse._SubParsersAction) -> argparse.ArgumentParser:
        subparser = parser.add_parser(self.name, description=self.__doc__, help="Print the entities of raw text.")
        subparser.add_argument("archive_file", help="a model.tar.gz from `allennlp train`")
        subparser.add_argument("text", nargs="+", help="raw text (several arguments are several sentences)")
        subparser.add_argument("--spacy-model", default=DEFAULT_SPACY_PIPELINE, help="installed spaCy pipeline")
        subparser.add_argument("--predictor", default="sequence_tagger", help="registered predictor name")
        subparser.add_argument("--cuda-device", type=int, default=-1)
        subparser.add_argument("--json", action="store_true", help="print the predictor's JSON instead")
        subparser.set_defaults(func=_tag_text)
        return subparser


def _tag_text(args: argparse.Namespace) -> None:
    with one_line_errors():
        archive = load_archive(args.archive_file, cuda_device=args.cuda_device)
        predictor = Predictor.from_archive(archive, args.predictor, extra_args={"spacy_model": args.spacy_model})
        results = predictor.predict_batch_json([{"sentence": text} for text in args.text])
    for result in results:
        if args.json:
            print(json.dumps(result))
            continue
        if "error" in result:
            print(f"error: {result['error']}", file=sys.stderr)
            continue
        width = max((len(token) for token in result["tokens"]), default=0)
        parse = result.get("parse")
        for index, (token, tag, confidence) in enumerate(
            zip(result["tokens"], result["tags"], result["tag_confidences"])
        ):
            line = f"{token:<{width}}  {tag:<8} {confidence:.3f}"
            if parse is not None:  # models over dependency trees show the tree they used
                line += (
                    f"   {parse['pos_tags'][index]:<6} {parse['dependency_labels'][index]:<10}"
                    f" head {parse['head_indices'][index]}"
                )
            print(line)
        print("entities:")
        for span in result["spans"]:
            print(
                f"  {span['label']:<6} {span['text']!r:<30} chars {span['char_start']}-{span['char_end']}"
                f"  confidence {span.get('confidence', span.get('score')):.3f}"
            )
        if not result["spans"]:
            print("  (none)")
        print()
