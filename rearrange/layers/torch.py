"""``Rearrange`` and ``Reduce`` as ``torch.nn.Module``s, for ``nn.Sequential``.

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
from ..backends._torch import allow_in_compiled_graph

__all__ = ["Rearrange", "Reduce"]

allow_in_compiled_graph()


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
