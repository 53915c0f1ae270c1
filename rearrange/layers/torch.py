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


from ..api import explain, reduce, rearrange
from ..calls import check_reduction, context_line
from ..errors import PatternError
from ..parsing import parse_transform
from ..records import record
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

    def explain(self, x_or_shape: Any, **options: Any) -> Any:
        """The plan ``forward`` follows for this input (see :func:`rearrange.explain`)."""
        return explain(x_or_shape, self.pattern, **options, **self.axes_lengths)

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

    def explain(self, x_or_shape: Any, **options: Any) -> Any:
        """The plan ``forward`` follows for this input (see :func:`rearrange.explain`)."""
        return explain(x_or_shape, self.pattern, op="reduce", reduction=self.reduction,
                       **options, **self.axes_lengths)

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

    def explain(self, x_or_shape: Any, **options: Any) -> "EinMixExplanation":
        """What ``forward`` does to this input (an array or a shape): the plan of the
        rearrange before the einsum, the einsum with the weight, the bias, and the plan
        of the rearrange after it. ``options`` go to :func:`rearrange.explain`."""
        first = self.pre_rearrange.explain(x_or_shape, **options) if self.pre_rearrange else None
        mixed_shape = None
        if self.post_rearrange is not None:
            shape = tuple(first.output.shape if first is not None and hasattr(first, "output")
                          else first.output_shape if first is not None
                          else getattr(x_or_shape, "shape", x_or_shape))
            mixed_shape = _einsum_shape(self.einsum_pattern, shape, tuple(self.weight.shape))
        last = None
        if self.post_rearrange is not None:
            dtype = getattr(x_or_shape, "dtype", None)
            post_options = dict(options)
            if dtype is not None and "dtype" not in options:   # the einsum keeps the dtype
                post_options["dtype"] = str(dtype).removeprefix("torch.")
            last = self.post_rearrange.explain(mixed_shape, **post_options)
        return EinMixExplanation(repr(self), first, self.einsum_pattern,
                                 tuple(self.weight.shape),
                                 None if self.bias is None else tuple(self.bias.shape), last)

    def __repr__(self) -> str:
        params = repr(self.pattern) + f", '{self.weight_shape}'"
        if self.bias_shape is not None:
            params += f", '{self.bias_shape}'"
        params += "".join(f", {axis}={length}" for axis, length in self.axes_lengths.items())
        return f"{type(self).__name__}({params})"


def _einsum_shape(subscripts: str, shape: tuple[Any, ...], weight: tuple[int, ...]) -> tuple[Any, ...]:
    """The shape of ``torch.einsum(subscripts, x, weight)``: one letter per axis, and
    ``...`` (in x and the output only, as EinMix writes them) for the dims it covers."""
    inputs, output = subscripts.split("->")
    x_letters, w_letters = inputs.split(",")
    size = dict(zip(w_letters, weight))
    head, _, tail = x_letters.partition("...")
    size.update(zip(head, shape))
    size.update(zip(tail, shape[len(shape) - len(tail):]))
    covered = tuple(shape[len(head):len(shape) - len(tail)])
    before, dots, after = output.partition("...")
    return (*(size[c] for c in before), *(covered if dots else ()), *(size[c] for c in after))


@record
class EinMixExplanation:
    """The steps of an ``EinMix`` forward for one input; ``str()`` prints them."""

    layer: str
    pre_rearrange: Any          # the rearrange's plan (a Plan or SymbolicPlan), or None
    einsum_pattern: str         # torch.einsum(einsum_pattern, x, weight)
    weight_shape: tuple[int, ...]
    bias_shape: tuple[int, ...] | None
    post_rearrange: Any         # the rearrange's plan, or None

    def __str__(self) -> str:
        lines = [self.layer]
        if self.pre_rearrange is not None:
            lines += ["", "before the einsum:", _indented(str(self.pre_rearrange))]
        lines += ["", f"torch.einsum({self.einsum_pattern!r}, x, weight)  weight shape "
                      f"{self.weight_shape}: a new array"]
        if self.bias_shape is not None:
            lines.append(f"+ bias, shape {self.bias_shape} (broadcast): a new array")
        if self.post_rearrange is not None:
            lines += ["", "after the einsum:", _indented(str(self.post_rearrange))]
        return "\n".join(lines)


def _indented(text: str) -> str:
    return "\n".join("  " + line if line else line for line in text.splitlines())
