"""
allennlp's `RegularizerApplicator` with each l2 term computed for all its parameters at once.

allennlp calls a regularizer once per parameter, `alpha * sum(p ** 2)`, and the trainer adds the sum
to every training step's loss: 4 operator calls per parameter forward and 5 backward (`deptree_ner`:
36 parameters, 361 calls a step, each a kernel launch on a GPU).  Here the parameters of an `l2`
regularizer take one `foreach` norm forward and one `foreach` product backward.  The value is the
same sum, up to float rounding; other regularizers run as in allennlp.
"""

import re
from typing import Dict, List, Optional, Tuple, Union

import torch
from allennlp.nn.regularizers.regularizer_applicator import RegularizerApplicator
from allennlp.nn.regularizers.regularizers import L2Regularizer
from torch.autograd.function import once_differentiable


class _SquaredNorm(torch.autograd.Function):
    """`alpha * sum_p sum(p ** 2)` over `parameters` on one device and of one dtype; gradient `2 alpha p`."""

    @staticmethod
    def forward(ctx, alpha: float, *parameters: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        ctx.alpha = alpha
        ctx.save_for_backward(*parameters)
        return torch.stack(torch._foreach_norm(parameters)).square_().sum().mul_(alpha)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: torch.Tensor):  # type: ignore[override]
        return (None, *torch._foreach_mul(ctx.saved_tensors, grad * (2.0 * ctx.alpha)))


class GroupedRegularizerApplicator(RegularizerApplicator):
    """
    A `RegularizerApplicator` (same `regexes`, same first-match rule, parameters that require
    gradients only) that penalises the parameters an `l2` regularizer matches in one batched
    function per device and dtype.  nerzoo's models wrap the applicator they are given in it
    (`GroupedRegularizerApplicator.of`), so configs keep allennlp's `regularizer` block.
    """

    def __init__(self, regexes: Optional[List[Tuple[str, object]]] = None) -> None:
        super().__init__(regexes)  # type: ignore[arg-type]
        self._first_match: Dict[str, int] = {}  # parameter name -> index of its regex, -1: none

    @classmethod
    def of(cls, applicator: Optional[RegularizerApplicator]) -> Optional[RegularizerApplicator]:
        """`applicator` with the same regexes as a `GroupedRegularizerApplicator` (`None` stays `None`)."""
        if applicator is None or isinstance(applicator, cls) or type(applicator) is not RegularizerApplicator:
            return applicator
        return cls(applicator._regularizers)

    def _match(self, name: str) -> int:
        if name not in self._first_match:
            found = (index for index, (regex, _) in enumerate(self._regularizers) if re.search(regex, name))
            self._first_match[name] = next(found, -1)
        return self._first_match[name]

    def __call__(self, module: torch.nn.Module) -> Union[torch.Tensor, float]:
        groups: Dict[Tuple[int, torch.device, torch.dtype], List[torch.Tensor]] = {}
        for name, parameter in module.named_parameters():
            index = self._match(name) if parameter.requires_grad else -1
            if index >= 0:
                groups.setdefault((index, parameter.device, parameter.dtype), []).append(parameter)
        terms = []
        for (index, _, _), parameters in groups.items():
            regularizer = self._regularizers[index][1]
            if type(regularizer) is L2Regularizer:
                terms.append(_SquaredNorm.apply(regularizer.alpha, *parameters))
            else:
                terms.extend(regularizer(parameter) for parameter in parameters)
        if not terms:
            return 0.0  # as allennlp: no parameter matched
        penalty = terms[0]
        for term in terms[1:]:
            penalty = penalty + term
        return penalty
