from typing import Any, Dict, List, Optional, Tuple

import torch
from allennlp.common.checks import ConfigurationError
from allennlp.data import Vocabulary

from nerzoo.models.nerzoo_model import NerzooModel
from nerzoo.modules.auxiliary_loss import AuxiliaryLossCollector, auxiliary_loss_sources
from nerzoo.modules.crf.tag_head import TagHead
from nerzoo.training.step_graphs import StepGraphs


class HeadTagger(NerzooModel):
    """
    The tail of every tagger whose last layer is a `TagHead` (`bilstm_crf`, `deptree_ner`,
    `me_crf`, `me_crf_thread_discourse`): a subclass embeds and encodes its input to `(batch_size,
    num_tokens, encoded_dim)`, builds `self.head` with that `input_dim`, and hands the encoding to
    `tag`, which collects the auxiliary losses of the model's sources, runs the head and copies
    the words.  Human-readable output, metrics and the label namespace are the head's.

    It is a `TagProbabilityModel` and an `AttentionModel` (`nerzoo.contracts`); its head is the
    model's `CalibrationSource` (config path `model.head`).  Not registered itself.

    # Parameters

    vocab : `Vocabulary`, required
    **kwargs : passed to `NerzooModel` (e.g. `regularizer`, `serialization_dir`)
    """

    head: TagHead
    default_predictor = "sequence_tagger"

    def __init__(self, vocab: Vocabulary, **kwargs) -> None:
        super().__init__(vocab, **kwargs)
        self._auxiliary_losses = AuxiliaryLossCollector()
        self._step_graphs: Optional[StepGraphs] = None

    def tag(
        self,
        encoded: torch.Tensor,
        mask: torch.BoolTensor,
        tags: Optional[torch.LongTensor] = None,
        metadata: Optional[List[Dict[str, Any]]] = None,
    ) -> Dict[str, Any]:
        """
        # Parameters

        encoded : `torch.Tensor`, `(batch_size, num_tokens, encoded_dim)`
        mask : `torch.BoolTensor`, `(batch_size, num_tokens)`
        tags : `torch.LongTensor`, optional, `(batch_size, num_tokens)` gold tag ids
        metadata : `List[Dict]`, optional; `words` is copied to the output, `sentence_spans` used
            by the head

        # Returns

        What `TagHead.forward` returns (its `loss` including the auxiliary losses), plus `words`
        when metadata is given.
        """
        return _with_words(self.head(encoded, mask, tags, metadata, self._auxiliary_losses.pop(self)), metadata)

    def graphed_tag(
        self,
        inputs: Dict[str, Any],
        mask: torch.BoolTensor,
        tags: Optional[torch.LongTensor],
        metadata: Optional[List[Dict[str, Any]]],
        *static: int,
    ) -> Optional[Dict[str, Any]]:
        """
        `tag`'s output for a training batch whose loss runs through the step graphs
        (`use_step_graphs`), from `graph_loss(inputs, *static)` of a subclass that has one
        (`GraphedLossModel`); `None` where they do not apply (no graphs, evaluation, no tags, a
        batch the head scores in several chains, or a new shape past the graphs' `max_graphs`).
        """
        if self._step_graphs is None or not self.training or tags is None:
            return None
        sentence_spans = self.head.sentence_spans(metadata, mask)
        if not self.head.graphable(sentence_spans):
            return None
        graphed = self._step_graphs(self, inputs, *static)
        if graphed is None:
            return None
        loss, logits = graphed
        # The graph's buffers are overwritten by its next replay: the metrics keep a copy.
        logits = logits[:, : mask.size(1)].clone()
        return _with_words(
            self.head.finish(logits, mask, tags, metadata, loss=loss, sentence_spans=sentence_spans), metadata
        )

    def use_step_graphs(self, graphs: Optional[StepGraphs]) -> None:
        """Runs the training loss of `forward` with `graphs` from now on (`None`: eagerly)."""
        if graphs is not None and auxiliary_loss_sources(self):
            raise ConfigurationError(
                f"{type(self).__name__}: its modules add auxiliary losses, which a CUDA graph of the loss would not see"
            )
        self._step_graphs = graphs

    @property
    def label_namespace(self) -> str:
        return self.head.label_namespace

    def tag_labels(self) -> List[str]:
        return self.head.tag_labels()

    def attention_keys(self) -> Tuple[str, ...]:
        """None by default; models with attention outputs list them."""
        return ()

    def make_output_human_readable(self, output_dict: Dict[str, Any]) -> Dict[str, Any]:
        return self.head.make_output_human_readable(output_dict)

    def get_metrics(self, reset: bool = False) -> Dict[str, float]:
        return self.head.get_metrics(reset)


def _with_words(output: Dict[str, Any], metadata: Optional[List[Dict[str, Any]]]) -> Dict[str, Any]:
    """`output` with each instance's `words` from `metadata`, when given."""
    if metadata is not None:
        output["words"] = [instance_metadata["words"] for instance_metadata in metadata]
    return output
