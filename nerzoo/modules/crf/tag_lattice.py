"""
What a partial annotation allows (docs/partial.md): the tag lattice of the tokens it marks and of
those it leaves open (`OPEN` in `nerzoo.data.partial_tags`), as log-weights `w_t[j]` for the CRF's
`partial_log_likelihood`, and what a tagger assumes of the open tokens (`OpenTokens`).
Shapes: `tags` `(batch_size, T)`, weights `(batch_size, T, K)`.
"""

from typing import Dict, Optional

import torch
from allennlp.common import FromParams
from allennlp.common.checks import ConfigurationError
from nerzoo_runtime.tag_scheme import split_tag

from nerzoo.data.partial_tags import OPEN
from nerzoo.modules.crf.linear_chain_crf import FORBIDDEN, LinearChainCrf, forward_backward
from nerzoo.modules.full_precision import full_precision, without_autocast


def continuations(labels: Dict[int, str], tag_scheme: Optional[str]) -> torch.LongTensor:
    """
    `(K,)`: for each tag, the tag that would carry its span on to the next token, -1 if none
    matters: `I-X` after `B-X` and `I-X` in BIO and IOB1.  An open token after a marked span may
    not take it (the span was marked whole); in BIOUL a span's last tag already closes it.
    """
    ids = {tag: index for index, tag in labels.items()}
    following = [-1] * len(labels)
    if tag_scheme in ("BIO", "IOB1"):
        for index, tag in labels.items():
            prefix, label = split_tag(tag)
            if prefix in ("B", "I"):
                following[index] = ids.get(f"I-{label}", -1)
    return torch.tensor(following, dtype=torch.long)


def annotation_weights(
    tags: torch.LongTensor, num_tags: int, continuation: torch.LongTensor, open_weights: Optional[torch.Tensor] = None
) -> torch.Tensor:
    """
    `(batch_size, T, K)` log-weights of what `tags` (`OPEN` at open tokens) allow: 0 on a marked
    token's tag, `FORBIDDEN` on its other tags; `open_weights` (0 if `None`) on an open token's,
    broadcast from `(K,)` or given `(batch_size, T, K)`, with `FORBIDDEN` on the `continuation`
    of a marked tag just before it.
    """
    is_open = tags == OPEN
    marked = torch.nn.functional.one_hot(tags.clamp_min(0), num_tags).bool()
    weights = torch.where(marked, 0.0, FORBIDDEN)
    if open_weights is None:
        open_weights = weights.new_zeros(num_tags)
    weights = torch.where(is_open.unsqueeze(-1), open_weights.to(weights), weights)
    previous = torch.nn.functional.pad(tags[:, :-1], (1, 0), value=OPEN)
    carried = continuation.to(tags.device)[previous.clamp_min(0)].masked_fill(previous == OPEN, -1)
    carries = is_open & (carried >= 0)
    weights[carries.nonzero(as_tuple=True) + (carried[carries],)] = FORBIDDEN
    return weights


class OpenTokens(FromParams):
    """
    What a tagger assumes of the tokens an annotation leaves open (docs/partial.md).  Without
    `entity_ratio` every tag of an open token is equally allowed (but for the weights of `allennlp
    cross-estimate`): the plain partial CRF, which learns to over-predict entities.

    # Parameters

    entity_ratio : `float`, optional (default = `None`)
        Effland & Collins (2021, TACL, "Partially Supervised Named Entity Recognition via the
        Expected Entity Ratio Loss"): the share `rho` of tokens expected in entities.  The loss
        adds `ratio_weight * max(0, |rho - rho_hat| - ratio_margin)` per sentence, with `rho_hat`
        the batch's expected share of non-`O` tags under the CRF's exact marginals.
    ratio_margin : `float`, optional (default = `0.05`)
    ratio_weight : `float`, optional (default = `10.0`)
    """

    def __init__(
        self, entity_ratio: Optional[float] = None, ratio_margin: float = 0.05, ratio_weight: float = 10.0
    ) -> None:
        if entity_ratio is not None and not 0 < entity_ratio < 1:
            raise ConfigurationError(f"entity_ratio must lie strictly between 0 and 1, got {entity_ratio}")
        if ratio_margin < 0 or ratio_weight < 0:
            raise ConfigurationError(f"ratio_margin and ratio_weight must be >= 0, got {ratio_margin}, {ratio_weight}")
        self.entity_ratio = entity_ratio
        self.ratio_margin = ratio_margin
        self.ratio_weight = ratio_weight

    def ratio_loss(
        self, crf: LinearChainCrf, logits: torch.Tensor, mask: torch.BoolTensor, o_index: Optional[int]
    ) -> torch.Tensor:
        """The expected-entity-ratio term of a batch (0 without `entity_ratio`), counted once per sentence."""
        if self.entity_ratio is None or o_index is None:
            return logits.new_zeros(())
        logits = full_precision(logits)
        with without_autocast(logits):
            scores = crf.chain_scores(constrained=False)
            passes = forward_backward(scores, logits, mask, crf.schedule_on(logits.device))
        log_o = passes.log_alpha[..., o_index] + passes.log_beta[..., o_index] - passes.log_partition[:, None]
        # Past a row's end the passes mean nothing, and may overflow.
        expected = (1 - log_o.masked_fill(~mask, 0.0).exp()).sum() / mask.sum().clamp_min(1)
        return self.ratio_weight * torch.relu((self.entity_ratio - expected).abs() - self.ratio_margin)
