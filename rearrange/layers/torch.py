"""``Rearrange``, ``Reduce`` and ``EinMix`` as ``torch.nn.Module``s, for ``nn.Sequential``.

The pattern is parsed and checked when the layer is built; every forward call is the
package's ``rearrange`` / ``reduce`` on the input, lowered to torch's own ops, so autograd
works and ``torch.compile`` sees the operations as single nodes of its graph (no graph
breaks: they are registered with ``torch.compiler.allow_in_graph``).

>>> import torch
>>> from rearrange.layers.torch import Rearrange, Reduce
>>> model = torch.nn.Sequential(Rearrange('b c (h p) (w q) -> b (h w) (p q c)', p=2, q=2),
...                             Reduce('b n d -> b d', 'mean'))
>>> model(torch.zeros(4, 3, 8, 8)).shape
torch.Size([4, 12])
>>> model
Sequential(
  (0): Rearrange('b c (h p) (w q) -> b (h w) (p q c)', p=2, q=2)
  (1): Reduce('b n d -> b d', 'mean')
)
"""

from __future__ import annotations

from typing import Any

import torch

from ..api import reduce, rearrange
from ..calls import check_reduction, context_line
from ..errors import PatternError
from ..parsing import parse_transform
from .mixing import plan_einmix

__all__ = ["Rearrange", "Reduce", "EinMix"]


def _checked(pattern: str, op: str, axes_lengths: dict[str, Any]) -> dict[str, int]:
    try:
        parse_transform(pattern, op)
    except PatternError as error:
        raise PatternError(f"{error}\n{context_line(pattern, None, axes_lengths, op)}") from None
    for name, length in axes_lengths.items():
        if isinstance(length, bool) or not isinstance(length, int) or length <= 0:
            raise PatternError(f"axis length {name}={length!r} must be a positive integer\n"
                               f"{context_line(pattern, None, axes_lengths, op)}")
    return dict(axes_lengths)


def _lengths_repr(axes_lengths: dict[str, int]) -> str:
    return "".join(f", {name}={length}" for name, length in axes_lengths.items())


class Rearrange(torch.nn.Module):
    """``rearrange(x, pattern, **axes_lengths)`` as a layer."""

    def __init__(self, pattern: str, **axes_lengths: int) -> None:
        super().__init__()
        self.pattern = pattern
        self.axes_lengths = _checked(pattern, "rearrange", axes_lengths)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rearrange(x, self.pattern, **self.axes_lengths)

    def extra_repr(self) -> str:
        return f"{self.pattern!r}{_lengths_repr(self.axes_lengths)}"


class Reduce(torch.nn.Module):
    """``reduce(x, pattern, reduction, **axes_lengths)`` as a layer."""

    def __init__(self, pattern: str, reduction: str, **axes_lengths: int) -> None:
        super().__init__()
        check_reduction(reduction)
        self.pattern = pattern
        self.reduction = reduction
        self.axes_lengths = _checked(pattern, "reduce", axes_lengths)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return reduce(x, self.pattern, self.reduction, **self.axes_lengths)

    def extra_repr(self) -> str:
        return f"{self.pattern!r}, {self.reduction!r}{_lengths_repr(self.axes_lengths)}"


class EinMix(torch.nn.Module):
    """einops' ``EinMix``: an einsum of the input with a learned ``weight`` (plus an
    optional learned ``bias``), with rearranges before and after it.

    ``EinMix('t b c -> t b c_out', weight_shape='c c_out', bias_shape='c_out', c=10,
    c_out=20)`` is a linear layer on the last axis. The pattern, weight and bias shapes,
    checks, parameter shapes and initialisation (uniform, bound ``sqrt(3 / fan_in)`` for
    the weight and ``sqrt(1 / fan_in)`` for the bias, fan_in the product of the weight
    axes not in the output) are einops'; so are the parameter names, so ``state_dict`` s
    load in either. The plan is :func:`rearrange.layers.mixing.plan_einmix`.
    """

    def __init__(self, pattern: str, weight_shape: str, bias_shape: str | None = None,
                 **axes_lengths: Any) -> None:
        super().__init__()
        plan = plan_einmix(pattern, weight_shape, bias_shape, axes_lengths)
        self.pattern = pattern
        self.weight_shape = weight_shape
        self.bias_shape = bias_shape
        self.axes_lengths = axes_lengths
        self.einsum_pattern = plan.einsum_pattern
        # drawn as einops draws them, so one seed gives both layers the same parameters
        self.weight = torch.nn.Parameter(
            torch.zeros(plan.weight_shape).uniform_(-plan.weight_bound, plan.weight_bound))
        self.bias: torch.nn.Parameter | None = None
        if plan.bias_shape is not None:
            self.bias = torch.nn.Parameter(
                torch.zeros(plan.bias_shape).uniform_(-plan.bias_bound, plan.bias_bound))
        self.pre_rearrange = None if plan.pre_reshape_pattern is None else Rearrange(
            plan.pre_reshape_pattern, **(plan.pre_reshape_lengths or {}))
        self.post_rearrange = None if plan.post_reshape_pattern is None else Rearrange(
            plan.post_reshape_pattern)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.pre_rearrange is not None:
            x = self.pre_rearrange(x)
        result = torch.einsum(self.einsum_pattern, x, self.weight)
        if self.bias is not None:
            result = result + self.bias
        if self.post_rearrange is not None:
            result = self.post_rearrange(result)
        return result

    def __repr__(self) -> str:
        params = repr(self.pattern) + f", '{self.weight_shape}'"
        if self.bias_shape is not None:
            params += f", '{self.bias_shape}'"
        params += "".join(f", {axis}={length}" for axis, length in self.axes_lengths.items())
        return f"{type(self).__name__}({params})"
