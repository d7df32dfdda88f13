r"""
A linear-chain CRF (Lafferty, McCallum & Pereira, 2001, "Conditional Random Fields: Probabilistic
Models for Segmenting and Labeling Sequence Data", ICML) as one dynamic program over a semiring
(Goodman, 1999, "Semiring Parsing"; Rush, 2020, "Torch-Struct: Deep Structured Prediction
Library", ACL demos).

A chain of `T` steps and `K` tags scores a tag path `y` by

    s(y) = start[y_1] + sum_{t=1..T} x_t[y_t] + sum_{t=2..T} A[y_{t-1}, y_t] + end[y_T]

with `x` the emission scores (`logits`) and `A` the transitions.  With the step matrices
`M_t[i, j] = A[i, j] + x_t[j]` (`t = 2..T`), the forward and backward scores are

    alpha_1 = start + x_1,   alpha_t = alpha_{t-1} (x) M_t,
    beta_T  = end,           beta_t  = M_{t+1} (x) beta_{t+1},

where `(u (x) M)[j] = (+)_i (u[i] + M[i, j])` is the matrix product of a semiring:

- the log semiring, `(+) = logsumexp`: `log Z = logsumexp_j (alpha_T[j] + end[j])`, the training
  likelihood `s(y) - log Z` (differentiated by autograd), and the posterior marginals
  `P(y_t = j | x) = exp(alpha_t[j] + beta_t[j] - log Z)` (Sutton & McCallum, 2012, §4.1);
- the max semiring, `(+) = max`: the best score `max_y s(y)`, and the Viterbi path read back from
  `y_T = argmax_j (alpha_T[j] + end[j])`, `y_{t-1} = argmax_i (alpha_{t-1}[i] + M_t[i, y_t])`.

A partial annotation's likelihood, `log sum_{y it allows} exp(s(y) + sum_t w_t[y_t]) - log Z`, is
the same forward recursion over the emissions `x_t + w_t` (`w` finite: `FORBIDDEN` where the
annotation rules a tag out, as minus infinity gives NaN gradients through `logsumexp`), less `log Z`.

The backward pass is the same forward recursion over the reversed chain, with the transposed
transitions: its alpha is `beta_t + x_t`, from `end + x_T`.  The recursion runs on one of two
schedules (`SCHEDULES`):

- `"steps"`: the `T - 1` products one after the other;
- `"scan"`: the prefix products `P_t = M_2 (x) ... (x) M_t` by a parallel scan in `ceil(log2 T)`
  rounds (Hillis & Steele, 1986, "Data Parallel Algorithms"), then `alpha_t = alpha_1 (x) P_t` in
  one product: `K` times the work in `log T` depth, the shape of work an accelerator wants;
- `"auto"`: `"scan"` on an accelerator, `"steps"` on the CPU.

Padding needs no masking inside the recursion: a row's scores up to its last valid step `L` read
no step past it, so `log Z` reads `alpha_L`, and the backward pass runs forward over each row
reversed within its length.  Scores past `L` mean nothing (padded emissions count as 0).
Decoding and the marginals score forbidden transitions `FORBIDDEN`, as allennlp's Viterbi does; the
training likelihood uses the unconstrained transitions, as allennlp's `forward` does.

Shapes: `logits` `(batch_size, T, K)`, `mask` and `tags` `(batch_size, T)` with each row's valid
steps first.  Half-precision logits (under autocast) are scored in float32, with autocast off.
"""

from typing import Callable, Dict, List, NamedTuple, Optional, Union

import torch
from allennlp.common.checks import ConfigurationError
from allennlp.modules.conditional_random_field import ConditionalRandomField, allowed_transitions

from nerzoo.modules.full_precision import full_precision, without_autocast
from nerzoo.modules.row_reversal import gather_steps, reversal_index

SCHEDULES = ("auto", "steps", "scan")
# allennlp's score of a forbidden transition.
FORBIDDEN = -10000.0


class Semiring(NamedTuple):
    """`plus(tensor, dim)` reduces a dimension; times is `+` in both semirings."""

    plus: Callable[[torch.Tensor, int], torch.Tensor]

    def matmul(self, left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
        """`(..., I, J) (x) (..., J, K) -> (..., I, K)`."""
        return self.plus(left.unsqueeze(-1) + right.unsqueeze(-3), -2)


LOG = Semiring(torch.logsumexp)
MAX = Semiring(torch.amax)


class ChainScores(NamedTuple):
    """`transitions` `(K, K)` (from, to), `start` and `end` `(K,)`."""

    transitions: torch.Tensor
    start: torch.Tensor
    end: torch.Tensor


class ViterbiPaths(NamedTuple):
    tags: torch.LongTensor  # (batch_size, T): the best path, 0 at padding
    scores: torch.Tensor  # (batch_size,): its score, 0 for a row without valid steps


class ForwardBackward(NamedTuple):
    log_alpha: torch.Tensor  # (batch_size, T, K): paths up to (t, j), x_t[j] included
    log_beta: torch.Tensor  # (batch_size, T, K): paths from (t, j) to the end, x_t[j] excluded
    log_partition: torch.Tensor  # (batch_size,)
    scores: ChainScores  # the scores of the chain, in the logits' dtype


def forward_scores(
    first: torch.Tensor, transitions: torch.Tensor, emissions: torch.Tensor, semiring: Semiring, schedule: str
) -> torch.Tensor:
    """
    `(batch_size, n + 1, K)`: `alpha_1 = first` `(batch_size, K)`, then `alpha_{t+1} = alpha_t (x) M_t`
    with `M_t = transitions + emissions[:, t]` (added to every row), `emissions` `(batch_size, n, K)`.
    """
    if schedule == "steps":
        alphas = [first]
        for emitted in emissions.unbind(1):
            alphas.append(semiring.matmul(alphas[-1].unsqueeze(-2), transitions).squeeze(-2) + emitted)
        return torch.stack(alphas, dim=1)
    products = transitions + emissions.unsqueeze(-2)  # (batch_size, n, K, K)
    shift = 1
    while shift < products.size(1):
        # Hillis & Steele: P_t <- P_{t - shift} (x) P_t wherever t - shift exists.
        shifted = semiring.matmul(products[:, :-shift], products[:, shift:])
        products = torch.cat([products[:, :shift], shifted], dim=1)
        shift *= 2
    rest = semiring.matmul(first[:, None, None, :], products).squeeze(-2)
    return torch.cat([first.unsqueeze(1), rest], dim=1)


def backtrack(
    alpha: torch.Tensor, transitions: torch.Tensor, mask: torch.BoolTensor, last: torch.LongTensor, schedule: str
) -> torch.LongTensor:
    """
    `(batch_size, T)`: the path from `last` `(batch_size,)` at each row's last valid step back along
    `y_{t-1} = argmax_i (alpha_{t-1}[i] + A[i, y_t])` (the emissions at `t` change no argmax over
    `i`), from max-semiring `alpha` `(batch_size, T, K)`; padded steps repeat `last`.  The scan
    takes every step's pointers at once and composes them by pointer jumping.
    """
    if schedule == "steps":
        path = [last]
        for t in range(alpha.size(1) - 1, 0, -1):
            best = (alpha[:, t - 1] + transitions.t()[path[-1]]).argmax(dim=-1)
            path.append(torch.where(mask[:, t], best, path[-1]))
        return torch.stack(path[::-1], dim=1)
    batch_size, num_steps, num_tags = alpha.shape
    stay = torch.arange(num_tags, device=alpha.device)
    pointers = torch.where(mask[:, 1:, None], (alpha[:, :-1].unsqueeze(-1) + transitions).argmax(dim=-2), stay)
    # Map t sends a tag at t + 1 to one at t; the last map sends every tag to `last`.
    maps = torch.cat([pointers, last.view(batch_size, 1, 1).expand(batch_size, 1, num_tags)], dim=1)
    shift = 1
    while shift < num_steps:
        # Map t then reaches step t + 2 * shift; past the end it is already constant, so the
        # wrapped-around maps it reads change nothing.
        maps = maps.gather(2, maps.roll(-shift, dims=1))
        shift *= 2
    return maps[:, :, 0]


def at_last_step(values: torch.Tensor, mask: torch.BoolTensor) -> torch.Tensor:
    """`(batch_size, ...)`: `values` `(batch_size, T, ...)` at each row's last valid step (the first if none)."""
    last = (mask.sum(dim=1) - 1).clamp_min(0)
    return values[torch.arange(values.size(0), device=values.device), last]


def chain_log_likelihood(
    scores: ChainScores, logits: torch.Tensor, tags: torch.LongTensor, mask: torch.BoolTensor, schedule: str
) -> torch.Tensor:
    """`(batch_size,)` `log P(tags | x) = s(tags) - log Z`; every row needs a valid step."""
    transitions, start, end = (values.to(logits.dtype) for values in scores)
    logits = logits.masked_fill(~mask.unsqueeze(-1), 0.0)
    emitted = logits.gather(2, tags.unsqueeze(-1)).squeeze(-1)
    moved = torch.nn.functional.pad(transitions[tags[:, :-1], tags[:, 1:]], (1, 0))
    gold = torch.where(mask, emitted + moved, 0.0).sum(dim=1) + start[tags[:, 0]] + end[at_last_step(tags, mask)]
    alpha = forward_scores(start + logits[:, 0], transitions, logits[:, 1:], LOG, schedule)
    return gold - torch.logsumexp(at_last_step(alpha, mask) + end, dim=-1)


def partial_log_likelihood(
    scores: ChainScores,
    logits: torch.Tensor,
    tags: torch.LongTensor,
    mask: torch.BoolTensor,
    log_weights: torch.Tensor,
    schedule: str,
) -> torch.Tensor:
    """
    `(batch_size,)` `log sum_y exp(s(y) + sum_t w_t[y_t]) - log Z` with `log_weights` `w` (from
    `nerzoo.modules.crf.tag_lattice.annotation_weights`), and `chain_log_likelihood` for the rows
    that `tags` (negative where open) fix entirely; every row needs a valid step.
    """
    transitions, start, end = (values.to(logits.dtype) for values in scores)
    logits = logits.masked_fill(~mask.unsqueeze(-1), 0.0)

    def log_sum(emissions: torch.Tensor) -> torch.Tensor:
        alpha = forward_scores(start + emissions[:, 0], transitions, emissions[:, 1:], LOG, schedule)
        return torch.logsumexp(at_last_step(alpha, mask) + end, dim=-1)

    lattice = log_sum(logits + log_weights.masked_fill(~mask.unsqueeze(-1), 0.0)) - log_sum(logits)
    fixed = ((tags >= 0) | ~mask).all(dim=1)
    return torch.where(fixed, chain_log_likelihood(scores, logits, tags.clamp_min(0), mask, schedule), lattice)


def viterbi(scores: ChainScores, logits: torch.Tensor, mask: torch.BoolTensor, schedule: str) -> ViterbiPaths:
    """The best path of every row and its score."""
    batch_size, num_steps, _ = logits.shape
    if num_steps == 0:
        return ViterbiPaths(mask.new_zeros((batch_size, 0), dtype=torch.long), logits.new_zeros(batch_size))
    transitions, start, end = (values.to(logits.dtype) for values in scores)
    logits = logits.masked_fill(~mask.unsqueeze(-1), 0.0)
    alpha = forward_scores(start + logits[:, 0], transitions, logits[:, 1:], MAX, schedule)
    best, last = (at_last_step(alpha, mask) + end).max(dim=-1)
    tags = backtrack(alpha, transitions, mask, last, schedule)
    return ViterbiPaths(tags * mask, best * mask[:, 0])


def forward_backward(
    scores: ChainScores, logits: torch.Tensor, mask: torch.BoolTensor, schedule: str
) -> ForwardBackward:
    """
    Both passes in the log semiring.  The backward one is the forward pass of each row reversed:
    there `beta_t + x_t` is an alpha, of the transposed transitions, that starts from `end + x_T`.
    """
    scores = ChainScores(*(values.to(logits.dtype) for values in scores))
    transitions, start, end = scores
    logits = logits.masked_fill(~mask.unsqueeze(-1), 0.0)
    log_alpha = forward_scores(start + logits[:, 0], transitions, logits[:, 1:], LOG, schedule)
    index = reversal_index(mask)
    reverse = gather_steps(logits, index)
    beta_and_emission = forward_scores(end + reverse[:, 0], transitions.t(), reverse[:, 1:], LOG, schedule)
    log_beta = gather_steps(beta_and_emission, index) - logits
    log_partition = torch.logsumexp(at_last_step(log_alpha, mask) + end, dim=-1)
    return ForwardBackward(log_alpha, log_beta, log_partition, scores)


class LinearChainCrf(ConditionalRandomField):
    """
    allennlp's `ConditionalRandomField` (its parameters, constraints and state-dict keys; its own
    `forward` and `viterbi_tags` stay the references it is tested against), with the batched
    dynamic program of this module.

    # Parameters

    num_tags : `int`, required
    constraints : `List[Tuple[int, int]]`, optional (default = `None`)
        Allowed transitions `(from, to)`, with `num_tags` as the start and `num_tags + 1` as the
        end (`allowed_transitions`); `None`: all.  Decoding and the marginals forbid the others.
    include_start_end_transitions : `bool`, optional (default = `True`)
    schedule : `str`, optional (default = `"auto"`)
        `"steps"`, `"scan"`, or `"auto"` (see the module's docstring).  The schedules compute the
        same numbers, rounded differently.
    """

    def __init__(
        self,
        num_tags: int,
        constraints=None,
        include_start_end_transitions: bool = True,
        schedule: str = "auto",
    ) -> None:
        if num_tags < 1:
            raise ConfigurationError(f"a CRF needs at least one tag, got num_tags={num_tags}")
        if schedule not in SCHEDULES:
            raise ConfigurationError(f"the CRF's schedule must be one of {SCHEDULES}, got {schedule!r}")
        super().__init__(num_tags, constraints, include_start_end_transitions)
        self.schedule = schedule

    @classmethod
    def for_labels(
        cls,
        labels: Dict[int, str],
        tag_scheme: Optional[str] = None,
        include_start_end_transitions: bool = True,
        schedule: str = "auto",
    ) -> "LinearChainCrf":
        """A CRF over `labels` (tag id to tag), with the transitions `tag_scheme` forbids (`None`: none)."""
        constraints = allowed_transitions(tag_scheme, labels) if tag_scheme is not None else None
        return cls(len(labels), constraints, include_start_end_transitions, schedule)

    def schedule_on(self, device: torch.device) -> str:
        """The schedule the recursions take on `device`."""
        if self.schedule == "auto":
            return "steps" if device.type == "cpu" else "scan"
        return self.schedule

    def chain_scores(self, constrained: bool, temperature: Union[float, torch.Tensor] = 1.0) -> ChainScores:
        """
        The learned scores divided by `temperature` (a float or a scalar tensor); `constrained`:
        with the forbidden moves scored `FORBIDDEN` (not divided), as allennlp's Viterbi.
        """
        transitions = self.transitions
        if self.include_start_end_transitions:
            start, end = self.start_transitions, self.end_transitions
        else:
            start = end = transitions.new_zeros(self.num_tags)
        if torch.is_tensor(temperature) or temperature != 1.0:
            transitions, start, end = transitions / temperature, start / temperature, end / temperature
        if not constrained:
            return ChainScores(transitions, start, end)
        allowed = self.allowed_moves()
        return ChainScores(
            *(torch.where(ok, values, FORBIDDEN) for ok, values in zip(allowed, (transitions, start, end)))
        )

    def allowed_moves(self) -> ChainScores:
        """Which moves the constraints allow, as booleans shaped as `chain_scores`' (all true without constraints)."""
        allowed = self._constraint_mask.detach() > 0.5  # (K + 2, K + 2): K is the start, K + 1 the end
        num_tags = self.num_tags
        return ChainScores(
            allowed[:num_tags, :num_tags], allowed[num_tags, :num_tags], allowed[:num_tags, num_tags + 1]
        )

    def runtime_settings(self) -> Dict[str, List]:
        """
        What `nerzoo_runtime.crf.Crf.from_settings` reads of this CRF (`tagger.json`'s `crf`): the
        learned `transitions`, `start` and `end` (unconstrained, undivided) and which moves are
        allowed (`allowed_transitions`, `allowed_start`, `allowed_end`).
        """
        learned = {
            key: values.detach().tolist() for key, values in self.chain_scores(constrained=False)._asdict().items()
        }
        return {**learned, **{f"allowed_{key}": ok.tolist() for key, ok in self.allowed_moves()._asdict().items()}}

    def log_likelihood(self, logits: torch.Tensor, tags: torch.LongTensor, mask: torch.BoolTensor) -> torch.Tensor:
        """`(batch_size,)` `log P(tags | x)`: allennlp's `forward` of each row (which sums them)."""
        logits = self._checked(logits, mask)
        with without_autocast(logits):
            scores = self.chain_scores(constrained=False)
            return chain_log_likelihood(scores, logits, tags, mask.bool(), self.schedule_on(logits.device))

    def partial_log_likelihood(
        self, logits: torch.Tensor, tags: torch.LongTensor, mask: torch.BoolTensor, log_weights: torch.Tensor
    ) -> torch.Tensor:
        """`(batch_size,)` `partial_log_likelihood`: `tags` negative where open, `log_weights` `(batch_size, T, K)`."""
        logits = self._checked(logits, mask)
        with without_autocast(logits):
            scores = self.chain_scores(constrained=False)
            schedule = self.schedule_on(logits.device)
            return partial_log_likelihood(scores, logits, tags, mask.bool(), log_weights.to(logits), schedule)

    @torch.no_grad()
    def viterbi(self, logits: torch.Tensor, mask: torch.BoolTensor) -> ViterbiPaths:
        """The best path of every row under the constraints: `viterbi_tags`, batched."""
        logits = self._checked(logits, mask)
        with without_autocast(logits):
            return viterbi(self.chain_scores(constrained=True), logits, mask.bool(), self.schedule_on(logits.device))

    def forward_backward(
        self, logits: torch.Tensor, mask: torch.BoolTensor, transition_temperature: Union[float, torch.Tensor] = 1.0
    ) -> ForwardBackward:
        """Both passes under the constraints, the transitions divided by `transition_temperature`."""
        logits = self._checked(logits, mask)
        with without_autocast(logits):
            scores = self.chain_scores(constrained=True, temperature=transition_temperature)
            scores = ChainScores(*(values.to(logits.device) for values in scores))
            return forward_backward(scores, logits, mask.bool(), self.schedule_on(logits.device))

    def _checked(self, logits: torch.Tensor, mask: torch.BoolTensor) -> torch.Tensor:
        if logits.dim() != 3 or logits.size(-1) != self.num_tags or mask.shape != logits.shape[:2]:
            raise ValueError(
                f"expected logits (batch_size, num_steps, {self.num_tags}) and a mask (batch_size, num_steps), "
                f"got logits {tuple(logits.shape)} and mask {tuple(mask.shape)}"
            )
        return full_precision(logits)
