from typing import Any, Dict, List, Optional, Tuple, Union

import torch
from allennlp.common import FromParams
from allennlp.common.checks import ConfigurationError
from allennlp.common.util import is_distributed
from allennlp.data import Vocabulary
from allennlp.modules import FeedForward, TimeDistributed
from allennlp.nn import Activation
from nerzoo_runtime.tag_scheme import check_tag_scheme

from nerzoo.data.partial_tags import OPEN, is_partial
from nerzoo.modules.auxiliary_loss import AuxiliaryLosses
from nerzoo.modules.crf.calibration import CalibrationBatch
from nerzoo.modules.crf.linear_chain_crf import SCHEDULES, LinearChainCrf
from nerzoo.modules.crf.sentence_rows import SentenceRows
from nerzoo.modules.crf.tag_decoder import DecodedTagger, TagDecoder
from nerzoo.modules.crf.tag_lattice import OpenTokens, annotation_weights, continuations
from nerzoo.modules.crf.tag_scorers import CrfScorer, SoftmaxScorer, TagPosteriors


class TagHead(DecodedTagger, torch.nn.Module, FromParams):
    """
    The tagging head of every nerzoo tagger: optional hidden layer, linear projection to tag scores,
    a scorer (`tag_scorers`: a linear-chain CRF constrained by the tag scheme, or a softmax) and a
    `TagDecoder` for labels, entity spans with confidences and the metrics.  Models take it as
    `Lazy[TagHead]` built with their encoder's output size, so a config names only what differs
    from the defaults (`"head": {"hidden_dim": 50}`).  It is their `CalibrationSource`.

    An entity's confidence is the posterior that its tokens carry exactly its tags (`CrfScorer`),
    of the CRF with emissions divided by `temperature` and transitions by `transition_temperature`
    (fitted by `allennlp calibrate`); the Viterbi paths never change with them.  In evaluation with
    gold tags the span confidences are scored (`span_ece`, `span_brier`).  The model's auxiliary
    losses are added to the loss.

    With `use_crf=False` the head is MEMNET (Liu, Baldwin & Cohn, 2017, §4.3, eq. 13): `y_t =
    softmax(W u_t)` at each position, the cross-entropy summed over the tokens (as the CRF loss, so
    learning rates carry over), confidences the product of the tokens' probabilities, and spans read
    from the argmax with conlleval's lenient rules.

    # Parameters

    vocab : `Vocabulary`, required
    input_dim : `int`, required
        Size of the encoded token vectors, `(batch_size, num_tokens, input_dim)`.
    label_namespace : `str`, optional (default = `"labels"`)
    tag_scheme : `str`, optional (default = `"BIOUL"`)
        Scheme of the labels ("IOB1", "BIO", "BIOUL"), used for the transition constraints and to
        decode spans.  `None` for plain labels (POS tags): no constraints, no spans, no span F1.
    constrain_crf_decoding : `bool`, optional (default = `True`)
        Forbid transitions the scheme does not allow (e.g. `O -> L-PER`) in decoding and marginals.
    include_start_end_transitions : `bool`, optional (default = `True`)
    hidden_dim : `int`, optional (default = `None`)
        Size of a hidden layer between the encoder and the tag projection.
    activation : `str`, optional (default = `"tanh"`)
        Activation of the hidden layer.
    dropout : `float`, optional (default = `0.0`)
        Dropout on the input of the projection.
    verbose_metrics : `bool`, optional (default = `False`)
        Report per-type precision, recall and F1 as well as the overall ones.
    use_crf : `bool`, optional (default = `True`)
        `False` gives the per-position softmax of MEMNET (eq. 13) instead of the CRF; `crf` is then
        `None`, and `constrain_crf_decoding` and `include_start_end_transitions` have no effect.
    loss_reduction : `str`, optional (default = `"sum"`)
        `"sum"` over the instances of the batch (allennlp's `ConditionalRandomField`), or `"mean"`
        (Aguilar & Solorio, 2019, footnote 4); auxiliary losses are added after the reduction.
    temperature : `float`, optional (default = `1.0`)
        Divides the emission scores (the softmax logits without the CRF) in the posteriors.
    transition_temperature : `float`, optional (default = `temperature`)
        Divides the CRF's transition, start and end scores in the posteriors.
    crf_per_sentence : `bool`, optional (default = `False`)
        For document-level instances (`sentence_spans` in the metadata): one CRF chain per sentence,
        as ME-CRF's (Liu et al., 2017, §3), while the encoder reads the whole document.  `False`:
        one chain per instance.
    training_decode_interval : `int`, optional (default = `1`)
        In training, decode this many batches at a time, in one padded batch, for the training
        metrics (the epoch's are the same; the progress bar's update every this many batches, and a
        training forward pass returns no `paths`).  On a GPU, e.g. 50 saves most Viterbi launches.
    crf_schedule : `str`, optional (default = `"auto"`)
        `"steps"`, `"scan"` or `"auto"` (`nerzoo.modules.crf.linear_chain_crf`).
    open_tokens : `OpenTokens`, optional (default = `OpenTokens()`)
        What the loss assumes of the tokens a partial annotation leaves open (instances with
        `partial` in their metadata, docs/partial.md): the CRF sums over every path the marked
        tokens allow, weighted by `open_tokens`; the softmax leaves open tokens out.
    """

    def __init__(
        self,
        vocab: Vocabulary,
        input_dim: int,
        label_namespace: str = "labels",
        tag_scheme: Optional[str] = "BIOUL",
        constrain_crf_decoding: bool = True,
        include_start_end_transitions: bool = True,
        hidden_dim: Optional[int] = None,
        activation: str = "tanh",
        dropout: float = 0.0,
        verbose_metrics: bool = False,
        use_crf: bool = True,
        loss_reduction: str = "sum",
        crf_per_sentence: bool = False,
        temperature: float = 1.0,
        transition_temperature: Optional[float] = None,
        training_decode_interval: int = 1,
        crf_schedule: str = "auto",
        open_tokens: Optional[OpenTokens] = None,
    ) -> None:
        super().__init__()
        if crf_schedule not in SCHEDULES:
            raise ConfigurationError(f"crf_schedule must be one of {SCHEDULES}, got {crf_schedule!r}")
        if training_decode_interval < 1:
            raise ConfigurationError(f"training_decode_interval must be >= 1, got {training_decode_interval}")
        self.training_decode_interval = training_decode_interval
        # Training batches waiting to be decoded for the metrics: (logits, tags, mask, sentence_starts, partial).
        self._pending: List[Tuple[torch.Tensor, torch.Tensor, torch.Tensor, Optional[torch.Tensor], bool]] = []
        # Whether the decoder counted anything since the metrics were last read, and that read.
        self._counted = False
        self._last_read: Optional[Dict[str, float]] = None
        if temperature <= 0 or (transition_temperature is not None and transition_temperature <= 0):
            raise ConfigurationError(
                f"temperatures must be > 0, got temperature={temperature}, transition_temperature={transition_temperature}"
            )
        if loss_reduction not in ("sum", "mean"):
            raise ConfigurationError(f"loss_reduction must be 'sum' or 'mean', got {loss_reduction!r}")
        self.loss_reduction = loss_reduction
        self.crf_per_sentence = crf_per_sentence
        self.label_namespace = label_namespace
        self.tag_scheme = None if tag_scheme is None else check_tag_scheme(tag_scheme)
        self.num_tags = vocab.get_vocab_size(label_namespace)
        if self.num_tags == 0:
            raise ConfigurationError(f"the vocabulary has no labels in namespace {label_namespace!r}")
        self.dropout = torch.nn.Dropout(dropout)

        self.hidden: Optional[torch.nn.Module] = None
        if hidden_dim is not None:
            self.hidden = TimeDistributed(FeedForward(input_dim, 1, hidden_dim, Activation.by_name(activation)()))
        self.tag_projection = TimeDistributed(torch.nn.Linear(hidden_dim or input_dim, self.num_tags))

        labels = vocab.get_index_to_token_vocabulary(label_namespace)
        self.open_tokens = open_tokens or OpenTokens()
        self.o_index = vocab.get_token_to_index_vocabulary(label_namespace).get("O")
        self.register_buffer("continuation", continuations(labels, self.tag_scheme), persistent=False)
        self.crf: Optional[LinearChainCrf] = None
        self.scorer: Union[CrfScorer, SoftmaxScorer] = SoftmaxScorer(temperature)
        if use_crf:
            constraint_scheme = self.tag_scheme if constrain_crf_decoding else None
            self.crf = LinearChainCrf.for_labels(labels, constraint_scheme, include_start_end_transitions, crf_schedule)
            self.scorer = CrfScorer(self.crf, temperature, transition_temperature)
        self.decoder = TagDecoder(vocab, label_namespace, self.tag_scheme, verbose_metrics)
        self.auxiliary_losses = AuxiliaryLosses()

    def forward(
        self,
        encoded: torch.Tensor,
        mask: torch.BoolTensor,
        tags: Optional[torch.LongTensor] = None,
        metadata: Optional[List[Dict[str, Any]]] = None,
        auxiliary_losses: Optional[Dict[str, torch.Tensor]] = None,
    ) -> Dict[str, Any]:
        """
        # Parameters

        encoded : `torch.Tensor`, `(batch_size, num_tokens, input_dim)`
        mask : `torch.BoolTensor`, `(batch_size, num_tokens)`
        tags : `torch.LongTensor`, optional, `(batch_size, num_tokens)` gold tag ids
        metadata : `List[Dict]`, optional; `sentence_spans` in it delimit sentences inside an
            instance, so document-level instances are scored sentence by sentence
        auxiliary_losses : `Dict[str, torch.Tensor]`, optional; scalar terms added to the loss

        # Returns

        `logits` `(batch_size, num_tokens, num_tags)`, `mask`, `paths` (the predicted tag ids,
        `(batch_size, num_tokens)`), outside training also as `tags` (one list per instance),
        `sentence_spans` (per instance, `(start, end)` of its sentences) and `loss` when `tags` are
        given.  A training step reads nothing back from the device.
        """
        return self.finish(self.logits(encoded), mask, tags, metadata, auxiliary_losses)

    def logits(self, encoded: torch.Tensor) -> torch.Tensor:
        """Tag scores, `(batch_size, num_tokens, input_dim)` -> `(batch_size, num_tokens, num_tags)`."""
        hidden = self.dropout(encoded)
        if self.hidden is not None:
            hidden = self.hidden(hidden)
        return self.tag_projection(hidden)

    def export_decoding(self) -> Dict[str, Any]:
        """What `nerzoo_runtime` decodes this head's logits with (`tagger.json`, `allennlp export`)."""
        return {
            "tag_scheme": self.tag_scheme,
            "crf": None if self.crf is None else self.crf.runtime_settings(),
            "crf_per_sentence": self.crf_per_sentence,
            "temperature": self.scorer.temperature,
            "transition_temperature": getattr(self.scorer, "transition_temperature", self.scorer.temperature),
        }

    def graph_loss(
        self, encoded: torch.Tensor, mask: torch.BoolTensor, tags: torch.LongTensor
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        """
        `forward`'s training loss and logits (detached) as tensors only, for a CUDA graph of the
        training step (`graphable` batches); `finish` with them gives `forward`'s output and metrics.
        """
        logits = self.logits(encoded)
        return self._loss(logits, tags, mask, None, False), logits.detach()

    def graphable(self, sentence_spans: List[List[Tuple[int, int]]], metadata: Optional[List[Dict]] = None) -> bool:
        """Whether `graph_loss` is this batch's loss: a CRF (the softmax loss gathers the real
        tokens, a shape of the data's), one chain per row and every token annotated."""
        return self.crf is not None and not self._chains_per_sentence(sentence_spans) and not is_partial(metadata)

    def finish(
        self,
        logits: torch.Tensor,
        mask: torch.BoolTensor,
        tags: Optional[torch.LongTensor] = None,
        metadata: Optional[List[Dict[str, Any]]] = None,
        auxiliary_losses: Optional[Dict[str, torch.Tensor]] = None,
        loss: Optional[torch.Tensor] = None,
    ) -> Dict[str, Any]:
        """`forward` from the logits on; `loss`, when given, is `graph_loss`'s for these tags."""
        sentence_spans = self.sentence_spans(metadata, mask)
        rows = self._sentence_rows(sentence_spans, mask)
        partial = is_partial(metadata)
        output: Dict[str, Any] = {"logits": logits, "mask": mask, "sentence_spans": sentence_spans}
        deferred = self.training and tags is not None and self.training_decode_interval > 1
        if not self.training and self._pending:
            self._decode_pending()  # counted before the batches of another mode
        if not deferred:
            if rows is None:
                paths = self.scorer.decode(logits, mask)
            else:
                paths = rows.scatter(self.scorer.decode(rows.gather(logits), rows.mask), mask.size(0))
            output["paths"] = paths
        if not self.training:
            # Lists are read on the host; a training step never needs them.
            output["tags"] = [row[:length] for row, length in zip(paths.tolist(), mask.sum(dim=1).tolist())]
        if tags is not None:
            if loss is None:
                loss = self._loss(logits, tags, mask, rows, partial, self._open_weights(metadata, mask))
            output["loss"] = self.auxiliary_losses.add_to(loss, auxiliary_losses)
            if deferred:
                self._defer(logits, tags, mask, sentence_spans, rows, partial)
                return output
            posteriors = None
            if not self.training and self.span_calibration is not None:
                posteriors = self.posteriors(logits, mask, paths, sentence_spans)
            sentence_starts = TagDecoder.sentence_starts(sentence_spans, mask)
            self.decoder.update_metrics(paths, tags, mask, sentence_starts, posteriors, partial)
            self._counted = True
        return output

    def _loss(
        self,
        logits: torch.Tensor,
        tags: torch.LongTensor,
        mask: torch.BoolTensor,
        rows: Optional[SentenceRows],
        partial: bool,
        open_weights: Optional[torch.Tensor] = None,
    ) -> torch.Tensor:
        """The scorer's loss of the batch (of its sentences' `rows` when given), reduced as configured."""
        batch_size = max(mask.size(0), 1)
        if rows is not None:
            logits, tags, mask = rows.gather(logits), rows.gather(tags), rows.mask
            open_weights = None if open_weights is None else rows.gather(open_weights)
        loss = self._partial_loss(logits, tags, mask, open_weights) if partial else self.scorer.loss(logits, tags, mask)
        return loss / batch_size if self.loss_reduction == "mean" else loss

    def _partial_loss(
        self, logits: torch.Tensor, tags: torch.LongTensor, mask: torch.BoolTensor, open_weights: Optional[torch.Tensor]
    ) -> torch.Tensor:
        """The loss of a batch with open tokens (`OPEN` tags): over the paths they allow, or without them."""
        if self.crf is None:
            return self.scorer.loss(logits, tags.clamp_min(0), mask & (tags != OPEN))
        weights = annotation_weights(tags, self.num_tags, self.continuation, open_weights)
        loss = -self.crf.partial_log_likelihood(logits, tags, mask, weights).sum()
        return loss + self.open_tokens.ratio_loss(self.crf, logits, mask, self.o_index) * mask.size(0)

    def _open_weights(self, metadata: Optional[List[Dict[str, Any]]], mask: torch.BoolTensor) -> Optional[torch.Tensor]:
        """`(batch_size, num_tokens, num_tags)` log of the instances' `open_weights` (`allennlp cross-estimate`), 0 elsewhere."""
        given = [instance.get("open_weights") for instance in metadata or []]
        if not any(given):
            return None
        cells = [(row, position, p) for row, tokens in enumerate(given) for position, p in enumerate(tokens or []) if p]
        rows, positions, estimates = zip(*cells)
        table = torch.tensor([[p.get(label, 0.0) for label in self.decoder.labels] for p in estimates]).clamp_min(1e-6)
        weights = torch.zeros(*mask.shape, self.num_tags)
        return weights.index_put_((torch.tensor(rows), torch.tensor(positions)), table.log()).to(mask.device)

    def _defer(self, logits, tags, mask, sentence_spans, rows: Optional[SentenceRows], partial: bool) -> None:
        """Keeps a training batch for `_decode_pending`, one row per CRF chain."""
        if rows is None:
            sentence_starts = TagDecoder.sentence_starts(sentence_spans, mask)
            self._pending.append((logits.detach(), tags, mask, sentence_starts, partial))
        else:
            self._pending.append((rows.gather(logits.detach()), rows.gather(tags), rows.mask, None, partial))

    def _decode_pending(self) -> None:
        """Decodes the kept training batches as one batch padded to the longest, and counts them."""
        pending, self._pending = self._pending, []
        num_steps = max(batch[2].size(1) for batch in pending)

        def padded(tensor: Optional[torch.Tensor], like: torch.Tensor) -> torch.Tensor:
            if tensor is None:  # no sentence boundaries inside these rows
                tensor = torch.zeros_like(like, dtype=torch.bool)
            return torch.nn.functional.pad(tensor, (0, 0) * (tensor.dim() - 2) + (0, num_steps - tensor.size(1)))

        logits, tags, mask, starts = (
            torch.cat([padded(batch[index], batch[2]) for batch in pending]) if len(pending) > 1 else pending[0][index]
            for index in range(4)
        )
        if len(pending) > 1 and all(batch[3] is None for batch in pending):
            starts = None
        partial = any(batch[4] for batch in pending)
        self.decoder.update_metrics(self.scorer.decode(logits, mask), tags, mask, starts, None, partial)
        self._counted = True

    def make_output_human_readable(self, output_dict: Dict[str, Any]) -> Dict[str, Any]:
        """Adds the posteriors (`tag_probabilities`, `tag_confidences`, `spans`, `sequence_log_probabilities`)
        and turns tag ids into strings; not in `forward`, so that training and validation do not pay for
        forward-backward."""
        paths = output_dict.pop("paths")
        mask, sentence_spans = output_dict["mask"].bool(), output_dict["sentence_spans"]
        posteriors = self.posteriors(output_dict["logits"], mask, paths, sentence_spans)
        output_dict["sequence_log_probabilities"] = self.sequence_log_probabilities(posteriors, mask, sentence_spans)
        return self.decoder.make_output_human_readable(output_dict, paths, posteriors)

    def sequence_log_probabilities(
        self, posteriors: TagPosteriors, mask: torch.BoolTensor, sentence_spans: List[List[Tuple[int, int]]]
    ) -> torch.Tensor:
        """`(batch_size,)` log P(an instance's predicted tags | x): the sum over its chains (a sentence
        each with `crf_per_sentence`) of the posterior of the chain's whole path."""
        lengths = mask.sum(dim=1).tolist()
        chains = sentence_spans if self._chains_per_sentence(sentence_spans) else [[(0, n)] for n in lengths]
        found = [(row, start, end) for row, spans in enumerate(chains) for start, end in spans if end > start]
        rows, starts, ends = torch.tensor(found, dtype=torch.long, device=mask.device).view(-1, 3).unbind(1)
        values = posteriors.segment_log_probabilities(rows, starts, ends)
        return values.new_zeros(mask.size(0)).index_add_(0, rows, values)

    def posteriors(
        self,
        logits: torch.Tensor,
        mask: torch.BoolTensor,
        paths: torch.LongTensor,
        sentence_spans: List[List[Tuple[int, int]]],
    ) -> TagPosteriors:
        """The scorer's posteriors (temperatures applied) of `forward`'s logits along `paths`, chain by chain."""
        rows = self._sentence_rows(sentence_spans, mask)
        if rows is None:
            return self.scorer.posteriors(logits, mask, paths)
        sentence_posteriors = self.scorer.posteriors(rows.gather(logits), rows.mask, rows.gather(paths))
        return TagPosteriors(*(rows.scatter(values, mask.size(0)) for values in sentence_posteriors))

    def calibration_batch(self, output_dict: Dict[str, Any], batch: Dict[str, Any]) -> Optional[CalibrationBatch]:
        """The logits, gold tags, mask, predicted paths and spans of one evaluated batch, one row per CRF chain."""
        tags = batch.get("tags")
        if tags is None:
            return None
        logits, mask, paths = output_dict["logits"], output_dict["mask"].bool(), output_dict["paths"]
        sentence_spans = output_dict["sentence_spans"]
        rows = self._sentence_rows(sentence_spans, mask)
        sentence_starts = TagDecoder.sentence_starts(sentence_spans, mask)
        if rows is not None:
            logits, tags, paths, mask = rows.gather(logits), rows.gather(tags), rows.gather(paths), rows.mask
            sentence_starts = None
        return self.decoder.calibration_batch(logits, tags, mask, paths, sentence_starts)

    @staticmethod
    def sentence_spans(metadata: Optional[List[Dict[str, Any]]], mask: torch.BoolTensor) -> List[List[Tuple[int, int]]]:
        """Each instance's sentences: the reader's `sentence_spans`, else one sentence (read from the mask)."""
        given = [(metadata[row] if metadata else {}).get("sentence_spans") for row in range(mask.size(0))]
        if all(given):
            return given
        lengths = mask.sum(dim=1).tolist()
        return [spans or [(0, length)] for spans, length in zip(given, lengths)]

    def _sentence_rows(
        self, sentence_spans: List[List[Tuple[int, int]]], mask: torch.BoolTensor
    ) -> Optional[SentenceRows]:
        """The sentences as rows when each gets its own chain and some instance has more than one."""
        if self.crf is None or not self._chains_per_sentence(sentence_spans):
            return None
        return SentenceRows(sentence_spans, mask.size(1), mask.device)

    def _chains_per_sentence(self, sentence_spans: List[List[Tuple[int, int]]]) -> bool:
        """Whether the sentences of some instance get a CRF chain each (`crf_per_sentence`)."""
        return self.crf_per_sentence and any(len(spans) > 1 for spans in sentence_spans)

    def get_metrics(self, reset: bool = False) -> Dict[str, float]:
        """
        The decoder's metrics and the auxiliary losses' means; while nothing new is counted, the
        previous read's values, without waiting for the device.
        """
        if self._pending and (reset or len(self._pending) >= self.training_decode_interval):
            self._decode_pending()
        unchanged = not self._counted and not self.auxiliary_losses.recorded and not is_distributed()
        if not reset and unchanged and self._last_read is not None:
            return dict(self._last_read)
        metrics = self.decoder.get_metrics(reset)
        metrics.update(self.auxiliary_losses.get_metrics(reset))
        self._counted = False
        self._last_read = None if reset else dict(metrics)
        return metrics
