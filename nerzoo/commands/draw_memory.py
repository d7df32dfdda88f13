import argparse
import itertools
from typing import Any, Dict, List, Tuple

import numpy
import torch
from allennlp.commands.subcommand import Subcommand
from allennlp.common.checks import ConfigurationError
from allennlp.models.archival import load_archive

from nerzoo.commands import one_line_errors
from nerzoo.commands.draw_attention import save_figure, subplots
from nerzoo.contracts import MemoryAttentionModel
from nerzoo.modules.seq2seq_encoders.memory_hop import dense_attention

NULL_LABEL = "(head)"


@Subcommand.register("draw-memory")
class DrawMemory(Subcommand):
    """
    `allennlp draw-memory ARCHIVE DATA_FILE --output memory.png` draws the memory attention `p_{t,i}`
    (eq. 4 of Liu, Baldwin & Cohn 2017) of an `me_crf` or `me_crf_thread_discourse` model on instance
    `--index` of `DATA_FILE` as a heatmap like the paper's Table 3: one row per step (word or post, with
    its predicted label), one column per memory position, weights of at least 0.1 printed, dashed
    lines at sentence boundaries.

    Rows are the whole instance when it has at most `--max-rows` steps, otherwise the sentence
    `--sentence` (default: the last); columns are the memory positions whose weight reaches
    `--min-weight` in some row.  `--hop` picks the hop (default: the last).

    Registered as a `Subcommand` with name "draw-memory".
    """

    def add_subparser(self, parser: argparse._SubParsersAction) -> argparse.ArgumentParser:
        subparser = parser.add_parser(
            self.name,
            description=self.__doc__,
            help="Draw an ME-CRF model's memory attention over a document as a PNG.",
        )
        subparser.add_argument("archive_file", help="a model.tar.gz of an me_crf or me_crf_thread_discourse model")
        subparser.add_argument(
            "data_file", help="a file the archive's dataset reader reads (CoNLL, JSON-lines threads)"
        )
        subparser.add_argument("--output", "-o", required=True, help="PNG file to write")
        subparser.add_argument("--index", type=int, default=0, help="which instance of the file (0-based)")
        subparser.add_argument("--sentence", type=int, default=None, help="which sentence of a long document (0-based)")
        subparser.add_argument("--hop", type=int, default=-1, help="which memory hop (default: the last)")
        subparser.add_argument("--max-rows", type=int, default=60, help="draw every step of instances up to this size")
        subparser.add_argument("--min-weight", type=float, default=0.02, help="hide memory columns weighted below this")
        subparser.add_argument("--cuda-device", type=int, default=-1)
        subparser.set_defaults(func=_draw_memory)
        return subparser


def draw(
    output: Dict[str, Any], output_path: str, hop: int, rows: Tuple[int, int], min_weight: float, null_memory: bool
) -> List[str]:
    """
    Draws one instance's memory attention (`forward_on_instance` output of a model whose memory has
    the dummy head `m_0` when `null_memory`); returns the tick labels of the memory columns drawn,
    `"<word or post> <index>"` (words from 0, posts from 1 and the head 0 with a dummy head).
    """
    weights = numpy.asarray(output["memory_attention"])
    if not -weights.shape[0] <= hop < weights.shape[0]:
        raise ConfigurationError(f"--hop {hop}: the model has {weights.shape[0]} hops")
    words: List[str] = list(output["words"])
    num_steps = len(words)
    positions = torch.as_tensor(numpy.asarray(output["memory_key_positions"])[:num_steps])
    dense = dense_attention(torch.as_tensor(weights[hop][:num_steps]), positions, null_memory).numpy()
    has_null = int(null_memory)
    start, end = rows
    block = dense[start:end]
    shown = [column for column in range(block.shape[1]) if block[:, column].max(initial=0.0) >= min_weight]
    if not shown:
        raise ConfigurationError(f"no memory position reaches --min-weight {min_weight} in rows {start}..{end - 1}")
    # With a dummy head (threads), steps are numbered from 1 and the head is 0, as links are.
    labels = [label if len(label) <= 24 else label[:23] + "…" for label in [NULL_LABEL] * has_null + words]
    tags = output.get("tags") or [""] * num_steps
    sentence_of = {}
    for index, (sentence_start, sentence_end) in enumerate(output.get("sentence_spans") or [(0, num_steps)]):
        sentence_of.update(dict.fromkeys(range(sentence_start, sentence_end), index))

    image = block[:, shown]
    width = min(30.0, max(7.0, 0.32 * len(shown) + 4.0))
    height = min(30.0, max(4.0, 0.3 * (end - start) + 3.0))
    figure, axis = subplots(figsize=(width, height))
    axis.imshow(image, cmap="Blues", vmin=0.0, vmax=max(float(image.max()), 1e-6), aspect="auto")
    column_ticks = [f"{labels[column]} {column}" for column in shown]
    axis.set_xticks(range(len(shown)), column_ticks, rotation=90, fontsize=7)
    axis.set_yticks(
        range(end - start),
        [f"{labels[row + has_null]} {row + has_null} ({tags[row]})" for row in range(start, end)],
        fontsize=7,
    )
    for row, column in itertools.product(range(image.shape[0]), range(image.shape[1])):
        if image[row, column] >= 0.1:
            color = "white" if image[row, column] > 0.6 * image.max() else "black"
            axis.text(column, row, f"{image[row, column]:.2f}", ha="center", va="center", fontsize=6, color=color)
    # Dashed lines where the shown memory columns change sentence.
    memory_sentences = [sentence_of.get(column - has_null, -1) for column in shown]
    for index in range(1, len(shown)):
        if memory_sentences[index] != memory_sentences[index - 1]:
            axis.axvline(index - 0.5, color="grey", linestyle="--", linewidth=0.8)
    axis.set_xlabel("memory position i (word or post, index)")
    axis.set_ylabel("current step t (predicted label)")
    axis.set_title(f"ME-CRF memory attention p(t, i), hop {hop % weights.shape[0] + 1} of {weights.shape[0]}")
    save_figure(figure, output_path)
    return column_ticks


def _draw_memory(args: argparse.Namespace) -> None:
    with one_line_errors():
        archive = load_archive(args.archive_file, cuda_device=args.cuda_device)
        reader = archive.validation_dataset_reader
        instance = next(itertools.islice(reader.read(args.data_file), args.index, None), None)
        if instance is None:
            raise ConfigurationError(f"{args.data_file} has no instance with index {args.index}")
        reader.apply_token_indexers(instance)
        model = archive.model
        if not isinstance(model, MemoryAttentionModel):
            raise ConfigurationError(
                f"{type(model).__name__} has no memory to draw (expected me_crf or me_crf_thread_discourse)"
            )
        model.eval()
        output = model.forward_on_instance(instance)
        metadata = instance["metadata"].metadata  # type: ignore
        output["words"] = metadata["words"]
        output["sentence_spans"] = spans = metadata.get("sentence_spans") or [(0, len(output["words"]))]
        # The whole instance when it is short, else one sentence (by default the last).
        rows = (0, len(output["words"]))
        if args.sentence is not None or len(output["words"]) > args.max_rows:
            index = len(spans) - 1 if args.sentence is None else args.sentence
            if not 0 <= index < len(spans):
                raise ConfigurationError(f"--sentence {args.sentence}: the instance has {len(spans)} sentences")
            rows = tuple(spans[index])
        columns = draw(output, args.output, args.hop, rows, args.min_weight, model.memory.null_memory)
    print(
        f"wrote {args.output}: instance {args.index} of {args.data_file}, {rows[1] - rows[0]} rows x {len(columns)} memory columns"
    )
