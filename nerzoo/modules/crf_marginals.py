"""
Exact posterior marginals of allennlp's `ConditionalRandomField` by the forward-backward algorithm
(Lafferty, McCallum & Pereira, 2001; Sutton & McCallum, "An Introduction to Conditional Random
Fields", 2012, §4.1), under the same transition constraints that its Viterbi decoding applies.

Shapes: `logits` `(batch_size, num_steps, num_tags)`, `mask` `(batch_size, num_steps)` with each
row's valid steps first (right padding), as everywhere in allennlp.
"""
from typing import NamedTuple, Tuple

import torch
from allennlp.modules.conditional_random_field import ConditionalRandomField

# allennlp's Viterbi gives forbidden transitions this score; we do the same.
_FORBIDDEN = -10000.0


class ForwardBackward(NamedTuple):
    log_alpha: torch.Tensor  # (batch_size, num_steps, num_tags): paths ending at (t, tag), emissions up to t included
    log_beta: torch.Tensor  # (batch_size, num_steps, num_tags): paths leaving (t, tag) to the end, excluding emission at t
    log_partition: torch.Tensor  # (batch_size,)
    transitions: torch.Tensor  # (num_tags, num_tags), constrained


def constrained_scores(crf: ConditionalRandomField) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`(transitions, start, end)` with forbidden moves scored as in `crf.viterbi_tags`."""
    num_tags = crf.num_tags
    allowed = crf._constraint_mask  # (num_tags + 2, num_tags + 2); rows/cols num_tags, num_tags + 1 = start, end
    transitions = crf.transitions * allowed[:num_tags, :num_tags] + _FORBIDDEN * (
        1 - allowed[:num_tags, :num_tags]
    )
    start_allowed = allowed[num_tags, :num_tags]
    end_allowed = allowed[:num_tags, num_tags + 1]
    if crf.include_start_end_transitions:
        start = crf.start_transitions * start_allowed + _FORBIDDEN * (1 - start_allowed)
        end = crf.end_transitions * end_allowed + _FORBIDDEN * (1 - end_allowed)
    else:
        start = _FORBIDDEN * (1 - start_allowed)
        end = _FORBIDDEN * (1 - end_allowed)
    return transitions, start, end


def forward_backward(
    crf: ConditionalRandomField, logits: torch.Tensor, mask: torch.BoolTensor
) -> ForwardBackward:
    """Runs both recursions, batched over sentences, one step at a time."""
    transitions, start, end = constrained_scores(crf)
    batch_size, num_steps, num_tags = logits.shape
    mask = mask.bool()
    alphas = [start.view(1, num_tags) + logits[:, 0]]
    for t in range(1, num_steps):
        # (batch, from, to): alpha[from] + transition[from, to] + emission[to]
        step = torch.logsumexp(alphas[-1].unsqueeze(2) + transitions.unsqueeze(0), dim=1) + logits[:, t]
        alphas.append(torch.where(mask[:, t : t + 1], step, alphas[-1]))
    log_alpha = torch.stack(alphas, dim=1)
    # After the loop alphas[-1] holds each row's alpha at its last valid step.
    log_partition = torch.logsumexp(alphas[-1] + end.view(1, num_tags), dim=1)

    end_scores = end.view(1, num_tags).expand(batch_size, num_tags)
    betas = [end_scores]
    for t in range(num_steps - 2, -1, -1):
        # (batch, from, to): transition[from, to] + emission[to] at t+1 + beta[to] at t+1
        step = torch.logsumexp(
            transitions.unsqueeze(0) + (logits[:, t + 1] + betas[-1]).unsqueeze(1), dim=2
        )
        # Where t+1 is padding, t is the last valid step (or padding): only the end transition remains.
        betas.append(torch.where(mask[:, t + 1 : t + 2], step, end_scores))
    log_beta = torch.stack(betas[::-1], dim=1)
    return ForwardBackward(log_alpha, log_beta, log_partition, transitions)


def tag_marginals(result: ForwardBackward, mask: torch.BoolTensor) -> torch.Tensor:
    """`(batch_size, num_steps, num_tags)` posterior P(tag at t | x); zero at padding."""
    log_marginals = result.log_alpha + result.log_beta - result.log_partition.view(-1, 1, 1)
    return log_marginals.exp() * mask.unsqueeze(-1)


class PathPosteriors:
    """
    Posteriors along given tag paths (typically the Viterbi paths), computed batched once so that
    any stretch of a path can then be scored in O(1):

        log P(y_s..y_e = path_s..path_e | x)
            = log_alpha[s, path_s] + sum_{k=s+1..e} (T[path_{k-1}, path_k] + logits[k, path_k])
              + log_beta[e, path_e] - log Z

    For a predicted entity this is the probability that the model gives to that entity with
    exactly its boundaries and type, whatever the rest of the sentence carries.

    # Parameters

    result : `ForwardBackward`
    logits : `torch.Tensor`, `(batch_size, num_steps, num_tags)`
    paths : `torch.LongTensor`, `(batch_size, num_steps)`, any value at padding
    """

    def __init__(self, result: ForwardBackward, logits: torch.Tensor, paths: torch.LongTensor) -> None:
        on_path = paths.unsqueeze(-1)
        alpha = result.log_alpha.gather(2, on_path).squeeze(-1)  # (batch_size, num_steps)
        beta = result.log_beta.gather(2, on_path).squeeze(-1)
        emissions = logits.gather(2, on_path).squeeze(-1)
        steps = result.transitions[paths[:, :-1], paths[:, 1:]] + emissions[:, 1:]
        prefix = torch.cat([torch.zeros_like(alpha[:, :1]), steps.cumsum(dim=1)], dim=1)
        log_partition = result.log_partition.unsqueeze(1)
        # Marginal of each step's path tag, and the pieces of any segment's score, as lists.
        self.tag_log_marginals = (alpha + beta - log_partition).tolist()
        self._alpha_minus_prefix = (alpha - prefix - log_partition).tolist()
        self._beta_plus_prefix = (beta + prefix).tolist()

    def segment_log_probability(self, row: int, start: int, end: int) -> float:
        """log-posterior of the path's tags on steps `start .. end - 1` of instance `row`."""
        return self._alpha_minus_prefix[row][start] + self._beta_plus_prefix[row][end - 1]
