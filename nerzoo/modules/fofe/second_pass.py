"""
What FOFE-NER's second pass reads from its first pass: Xu (2017), "Fixed-size
Ordinally-Forgetting Encoding and Its Applications", MSc thesis, York University, §5.4.

The second pass sees the first pass's entities (level 1: thresholded, then highest-first) each
replaced by one type token in the contexts of its fragments (`first_pass_entities` gives them as
per-token tensors, `nerzoo.modules.fofe.span_features.substituted_contexts` the contexts), and
interpolates its probabilities with the first pass's.  The first pass is frozen and reads one
sentence at a time, so its results can be kept per sentence (`FirstPassCache`) and computed once.
"""

from typing import Dict, Optional, Sequence, Tuple

import torch
from allennlp.common.checks import ConfigurationError
from allennlp.data import TextFieldTensors, Vocabulary
from allennlp.models import Model

from nerzoo.modules.fofe.span_decoding import highest_first_mask

# Per-token entity tensors (`first_pass_entities`), probabilities of the sentence's spans.
FirstPassResults = Tuple[Dict[str, torch.Tensor], torch.Tensor]


def first_pass_entities(
    probabilities: torch.Tensor,
    starts: torch.LongTensor,
    ends: torch.LongTensor,
    span_mask: torch.BoolTensor,
    mask: torch.BoolTensor,
    threshold: float,
) -> Dict[str, torch.Tensor]:
    """
    The first pass's level-1 entities (best class not NONE, probability at least `threshold`, then
    highest-first) as per-token tensors.

    # Parameters

    probabilities : `(batch, num_spans, num_classes)`, class 0 is NONE
    starts, ends, span_mask : `(batch, num_spans)`
    mask : `(batch, num_tokens)`
    threshold : `float`

    # Returns

    `in_entity` (the token is inside an entity), and the entity's `start`, `end` and `type` (its
    class - 1; meaningless outside entities), each `(batch, num_tokens)`.
    """
    scores, classes = probabilities.max(dim=-1)
    candidates = span_mask & (classes > 0) & (scores >= threshold)
    kept = highest_first_mask(scores, starts, ends, candidates, mask.size(1))
    positions = torch.arange(mask.size(1), device=mask.device).view(1, 1, -1)
    covers = kept.unsqueeze(-1) & (starts.unsqueeze(-1) <= positions) & (positions < ends.unsqueeze(-1))
    in_entity = covers.any(dim=1)
    owner = covers.float().argmax(dim=1)  # (batch, num_tokens): the kept span over each token
    return {
        "in_entity": in_entity & mask,
        "start": starts.gather(1, owner),
        "end": ends.gather(1, owner),
        "type": (classes - 1).clamp(min=0).gather(1, owner),
    }


def check_first_pass(first_pass: Model, model_type: type, vocab: Vocabulary, max_span_width: int) -> None:
    """Raises a `ConfigurationError` unless `first_pass` is a `model_type` over the same spans and vocabulary."""
    if not isinstance(first_pass, model_type):
        raise ConfigurationError(f"first_pass must be a fofe_ner model, got {type(first_pass).__name__}")
    if first_pass.max_span_width != max_span_width:
        raise ConfigurationError(
            f"first_pass has max_span_width {first_pass.max_span_width}, this model {max_span_width}"
        )
    for namespace in sorted(set(vocab.get_namespaces()) | set(first_pass.vocab.get_namespaces())):
        ours, theirs = vocab.get_vocab_size(namespace), first_pass.vocab.get_vocab_size(namespace)
        if ours != theirs:
            raise ConfigurationError(
                f"first_pass vocabulary differs in namespace {namespace!r} ({theirs} vs {ours}); build this "
                'model\'s vocabulary from the first pass\'s archive: "vocabulary": {"type": "from_files", '
                '"directory": "<first pass>/model.tar.gz"}'
            )


def run_first_pass(
    first_pass: Model, tokens: TextFieldTensors, mask: torch.BoolTensor, threshold: float
) -> Tuple[Dict[str, torch.Tensor], torch.Tensor, torch.LongTensor]:
    """
    The first pass's entities (`first_pass_entities`), its probabilities of all the spans of the
    batch row by row `(num_spans, num_classes)` (a sentence's spans come out the same whatever the
    batch's padding), and the number of spans of each row `(batch,)`.
    """
    with torch.no_grad():
        output = first_pass(tokens)
    probabilities, span_mask = output["class_probabilities"], output["span_mask"]
    entities = first_pass_entities(
        probabilities, output["span_starts"], output["span_ends"], span_mask, mask, threshold
    )
    return entities, probabilities[span_mask], span_mask.sum(1)


class FirstPassCache:
    """
    First-pass results of up to `max_size` sentences, keyed by their words (not saved with the
    model; the first pass must not change while it is used).

    # Parameters

    max_size : `int`
        Sentences kept; the first ones seen stay.  `0` keeps none.
    """

    def __init__(self, max_size: int) -> None:
        self.max_size = max_size
        self._entries: Dict[Tuple[str, ...], FirstPassResults] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def results(
        self,
        first_pass: Model,
        tokens: TextFieldTensors,
        mask: torch.BoolTensor,
        words: Optional[Sequence[Sequence[str]]],
        threshold: float,
    ) -> FirstPassResults:
        """
        The entity tensors `(batch, num_tokens)` and span probabilities `(num_spans, num_classes)`
        of `run_first_pass` on the whole batch, running it only on the sentences not kept.  `words`,
        the sentences' words, are the keys; without them nothing is kept.
        """
        if words is None or self.max_size == 0:
            return run_first_pass(first_pass, tokens, mask, threshold)[:2]
        keys = [tuple(sentence) for sentence in words]
        entries = {row: self._entries[key] for row, key in enumerate(keys) if key in self._entries}
        missing = [row for row in range(len(keys)) if row not in entries]
        lengths = mask.sum(1).tolist()
        if missing:
            index = torch.tensor(missing, device=mask.device)
            sub_tokens = {
                name: {key: tensor.index_select(0, index) for key, tensor in indexed.items()}
                for name, indexed in tokens.items()
            }
            entities, probabilities, counts = run_first_pass(
                first_pass, sub_tokens, mask.index_select(0, index), threshold
            )
            for position, (row, row_probabilities) in enumerate(zip(missing, probabilities.split(counts.tolist()))):
                row_entities = {name: values[position, : lengths[row]] for name, values in entities.items()}
                entries[row] = (row_entities, row_probabilities)
                if len(self._entries) < self.max_size:
                    self._entries[keys[row]] = entries[row]
        num_tokens = mask.size(1)
        entities = {
            name: torch.stack(
                [
                    torch.nn.functional.pad(entries[row][0][name], (0, num_tokens - lengths[row]))
                    for row in range(len(keys))
                ]
            )
            for name in entries[0][0]
        }
        return entities, torch.cat([entries[row][1] for row in range(len(keys))])
