import argparse
import json
import os
import tempfile
from typing import Any, Dict, List

from allennlp.commands.subcommand import Subcommand
from allennlp.common.checks import ConfigurationError
from allennlp.models.archival import load_archive
from allennlp.predictors import Predictor

from nerzoo.commands import one_line_errors
from nerzoo.data.spacy_pipelines import DEFAULT_SPACY_PIPELINE


@Subcommand.register("draw-attention")
class DrawAttention(Subcommand):
    """
    `allennlp draw-attention ARCHIVE "Some raw sentence ." --output attention.png` runs a trained
    `deptree_ner` model on one sentence (parsed by its reader's spaCy pipeline) and draws its
    relative attention matrix (eq. 1; rows are the attending words, like Figure 4 of Aguilar &
    Solorio 2019) above its global attention (eq. 3; each word shaded by its weight, the predicted
    tag beneath, like Figure 5).  `--tokens` takes the sentence as whitespace-separated tokens, and
    a JSON line file with `--input-file` takes pre-parsed input (`tokens`, `pos_tags`,
    `dependency_labels`, `head_indices`); its first line is drawn.

    Registered as a `Subcommand` with name "draw-attention".
    """

    def add_subparser(self, parser: argparse._SubParsersAction) -> argparse.ArgumentParser:
        subparser = parser.add_parser(
            self.name, description=self.__doc__, help="Draw a sentence's relative and global attention as a PNG."
        )
        subparser.add_argument("archive_file", help="a model.tar.gz of a deptree_ner model")
        subparser.add_argument("sentence", nargs="?", help="raw sentence (or use --input-file)")
        subparser.add_argument("--output", "-o", required=True, help="PNG file to write")
        subparser.add_argument("--input-file", help="JSON lines input; the first line is drawn")
        subparser.add_argument("--tokens", action="store_true", help="the sentence is whitespace-tokenised")
        subparser.add_argument("--spacy-model", default=DEFAULT_SPACY_PIPELINE, help="spaCy pipeline for raw text")
        subparser.add_argument("--cuda-device", type=int, default=-1)
        subparser.set_defaults(func=_draw_attention)
        return subparser


def _input(args: argparse.Namespace) -> Dict[str, Any]:
    if args.input_file:
        with open(args.input_file, encoding="utf-8") as handle:
            for line_number, line in enumerate(handle, start=1):
                if line.strip():
                    try:
                        return json.loads(line)
                    except json.JSONDecodeError as error:
                        raise ConfigurationError(f"{args.input_file}:{line_number}: not JSON ({error})") from None
        raise ConfigurationError(f"{args.input_file}: no input line")
    if not args.sentence or not args.sentence.strip():
        raise ConfigurationError("give a sentence or --input-file")
    return {"tokens": args.sentence.split()} if args.tokens else {"sentence": args.sentence}


def draw(prediction: Dict[str, Any], output_path: str) -> None:
    """Writes the figure for one `sequence_tagger` prediction made with `return_attention`."""
    tokens: List[str] = prediction["tokens"]
    relative = prediction.get("relative_attention")
    global_weights = prediction.get("global_attention")
    if relative is None and global_weights is None:
        raise ConfigurationError("this model has neither relative nor global attention to draw")
    size = max(4.0, 0.45 * len(tokens) + 2.5)
    heights = [size] * (relative is not None) + [1.6] * (global_weights is not None)
    figure, axes = subplots(len(heights), 1, figsize=(size + 1.5, sum(heights)), gridspec_kw={"height_ratios": heights})
    axes = list(axes) if len(heights) > 1 else [axes]
    if relative is not None:
        axis = axes.pop(0)
        image = axis.imshow(relative, cmap="Blues", vmin=0.0)
        axis.set_xticks(range(len(tokens)), tokens, rotation=90)
        axis.set_yticks(range(len(tokens)), tokens)
        axis.set_title("relative attention (row: attending word; diagonal excluded)")
        figure.colorbar(image, ax=axis, fraction=0.046, pad=0.04)
    if global_weights is not None:
        axis = axes.pop(0)
        # Shaded from the smallest to the largest weight: they are close to 1/N, so a 0-based scale
        # would paint every word alike.  The weights themselves are printed.
        axis.imshow([global_weights], cmap="Oranges", vmin=min(global_weights), vmax=max(global_weights), aspect="auto")
        axis.set_xticks(range(len(tokens)), tokens, rotation=90)
        axis.set_yticks([])
        for position, (tag, weight) in enumerate(zip(prediction["tags"], global_weights)):
            axis.text(position, 0, f"{tag}\n{weight:.3f}", ha="center", va="center", fontsize=7, style="italic")
        axis.set_title("global attention (weight and predicted tag per word)")
    save_figure(figure, output_path)


def subplots(*args, **kwargs):
    """`matplotlib.pyplot.subplots`, drawn off screen."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(*args, **kwargs)


def save_figure(figure, output_path: str) -> None:
    """Writes a matplotlib figure (SVG for a `.svg` path, else PNG) without leaving a half-written file."""
    import matplotlib.pyplot as plt

    figure.tight_layout()
    directory = os.path.dirname(os.path.abspath(output_path))
    os.makedirs(directory, exist_ok=True)
    file_format = "svg" if output_path.lower().endswith(".svg") else "png"
    handle, temporary = tempfile.mkstemp(suffix=f".{file_format}", dir=directory)
    os.close(handle)
    try:
        figure.savefig(temporary, dpi=150, format=file_format)
        os.replace(temporary, output_path)
    finally:
        plt.close(figure)
        if os.path.exists(temporary):
            os.remove(temporary)


def _draw_attention(args: argparse.Namespace) -> None:
    with one_line_errors():
        json_input = _input(args)
        archive = load_archive(args.archive_file, cuda_device=args.cuda_device)
        predictor = Predictor.from_archive(
            archive, "sequence_tagger", extra_args={"spacy_model": args.spacy_model, "return_attention": True}
        )
        prediction = predictor.predict_json(json_input)
        draw(prediction, args.output)
    print(
        f"wrote {args.output}: {len(prediction['tokens'])} tokens, spans {[(s['text'], s['label']) for s in prediction['spans']]}"
    )
