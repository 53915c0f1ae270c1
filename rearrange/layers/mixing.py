"""The plan of an ``EinMix`` layer: pattern text -> the pre-rearrange, the einsum, the
post-rearrange and the parameter shapes, with every check einops' ``EinMix`` makes.

Pure: no framework is imported here; :mod:`rearrange.layers.torch` builds the layer from
the plan. The plan is the one einops builds (same einsum letters, same reshape patterns,
same shapes and initialisation bounds), so weights and ``state_dict`` s move between the
two unchanged.

>>> plan = plan_einmix("b (h w) c -> b h w d", "c d", "d", {"h": 4, "c": 3, "d": 5})
>>> plan.pre_reshape_pattern, plan.einsum_pattern, plan.post_reshape_pattern
('b (h w) c -> b h w c', 'adeb,bc->adec', None)
>>> plan.weight_shape, plan.bias_shape, round(plan.weight_bound, 4)
((3, 5), (1, 1, 1, 5), 1.0)
"""

from __future__ import annotations

import math
import string
import warnings
from typing import Any

from ..errors import ArgumentTypeError, PatternError
from ..parsing import AnonymousAxis, AxisName, EllipsisAxis, Side, parse_transform
from ..records import record

__all__ = ["EinMixPlan", "plan_einmix"]


@record
class EinMixPlan:
    """What an ``EinMix`` layer does to its input, in einops' terms."""

    pre_reshape_pattern: str | None  # rearrange of the input to flat axes; None: not needed
    pre_reshape_lengths: dict[str, int] | None  # lengths that rearrange needs
    einsum_pattern: str  # "input,weight->output", one lowercase letter per axis
    post_reshape_pattern: str | None  # rearrange of the einsum result to the output
    weight_shape: tuple[int, ...]
    weight_bound: float  # weight ~ U(-bound, bound), bound = sqrt(3 / fan_in)
    bias_shape: tuple[int, ...] | None  # broadcasts against the einsum result; None: no bias
    bias_bound: float  # bias ~ U(-bound, bound), bound = sqrt(1 / fan_in)


def _error(message: str, pattern: str, weight_shape: str, bias_shape: Any,
           axes_lengths: dict[str, Any]) -> PatternError:
    lengths = "".join(f", {name}={length!r}" for name, length in axes_lengths.items())
    return PatternError(f"{message}\n  in EinMix({pattern!r}, {weight_shape!r}, "
                        f"{bias_shape!r}{lengths})")


def _parse_side(text: str) -> Side:
    """One side of an EinMix pattern, checked as a side of ``repeat``'s right-hand side:
    valid names, none twice, one ``...`` at most (grouped or not)."""
    # repeat accepts new names on its right side; '...' there must be matched on the left
    prefix = "... -> " if "..." in text or "…" in text else " -> "
    return parse_transform(prefix + text, "repeat").right


def _flat_names(side: Side) -> list[str]:
    return ["..." if type(member) is EllipsisAxis else member.name
            for group in side.groups for member in group.members]


def plan_einmix(pattern: str, weight_shape: str, bias_shape: str | None,
                axes_lengths: dict[str, Any]) -> EinMixPlan:
    """Check an ``EinMix`` and plan it, raising a :class:`~rearrange.PatternError`
    (``ArgumentTypeError`` for a non-str argument) where einops raises ``EinopsError``."""
    def fail(message: str) -> PatternError:
        return _error(message, pattern, weight_shape, bias_shape, axes_lengths)

    for name, value in (("pattern", pattern), ("weight_shape", weight_shape)):
        if not isinstance(value, str):
            raise ArgumentTypeError(f"EinMix {name} must be a str, not {type(value).__name__}")
    if bias_shape is not None and not isinstance(bias_shape, str):
        raise ArgumentTypeError("bias shape should be string specifying which axes bias "
                                f"depends on, not {type(bias_shape).__name__}")
    if pattern.count("->") != 1:
        raise fail("expected one '->' in the pattern, between input and output")
    left_pattern, right_pattern = pattern.split("->")
    try:
        left, right, weight = map(_parse_side, (left_pattern, right_pattern, weight_shape))
    except PatternError as error:
        raise fail(str(error)) from None
    left_names, right_names, weight_names = set(left.names), set(right.names), set(weight.names)

    unknown = right_names - left_names - weight_names
    if unknown:
        raise fail(f"Unrecognized identifiers on the right side of EinMix {unknown}")
    if weight.has_ellipsis:
        raise fail("Ellipsis is not supported in weight, as its shape should be fully specified")
    if left.has_ellipsis or right.has_ellipsis:
        if not (left.has_ellipsis and right.has_ellipsis):
            raise fail(f"Ellipsis in EinMix should be on both sides, {pattern}")
        if any(group.bracketed and type(member) is EllipsisAxis
               for group in left.groups for member in group.members):
            raise fail(f"Ellipsis on left side can't be in parenthesis, got {pattern}")
    if any(type(member) is AnonymousAxis
           for side in (left, right, weight) for group in side.groups for member in group.members):
        raise fail("Anonymous axes (numbers) are not allowed in EinMix")
    if "(" in weight_shape or ")" in weight_shape:
        raise fail(f"Parenthesis is not allowed in weight shape: {weight_shape}")

    pre_reshape_pattern = pre_reshape_lengths = post_reshape_pattern = None
    # a group that is not exactly one axis (or a bare '...') needs a rearrange
    if any(len(group.members) != 1 for group in left.groups):
        names = _flat_names(left)
        pre_reshape_pattern = f"{left_pattern}-> {' '.join(names)}"
        pre_reshape_lengths = {name: length for name, length in axes_lengths.items()
                               if name in names}
    if any(len(group.members) != 1 or (group.bracketed and right.has_ellipsis
                                       and type(group.members[0]) is EllipsisAxis)
           for group in right.groups):
        post_reshape_pattern = f"{' '.join(_flat_names(right))} ->{right_pattern}"

    for name in weight.names:
        if name not in axes_lengths:
            raise fail(f"Dimension {name} of weight should be specified")
    unused = set(axes_lengths) - left_names - weight_names
    if unused:
        raise fail(f"Axes {unused} are not used in pattern")
    redundant = weight_names - left_names - right_names
    if redundant:
        raise fail(f"Weight axes {redundant} are redundant")
    for name, length in axes_lengths.items():
        if isinstance(length, bool) or not isinstance(length, int) or length <= 0:
            raise fail(f"axis length {name}={length!r} must be a positive integer")
    if not weight.names:
        warnings.warn("EinMix: weight has no dimensions (means multiplication by a number)",
                      stacklevel=3)

    # a single output element is a combination of fan_in input elements
    fan_in = math.prod(axes_lengths[name] for name in weight.names if name not in right_names)
    bias_shape_ = None
    if bias_shape is not None:
        try:
            bias = _parse_side(bias_shape)
        except PatternError as error:
            raise fail(str(error)) from None
        bias_names = set(bias.names)
        if bias_names - right_names:
            raise fail(f"Bias axes {bias_names - right_names} not present in output")
        if bias_names - set(axes_lengths):
            raise fail(f"Sizes not provided for bias axes {bias_names - set(axes_lengths)}")
        shape: list[int] = []
        used_non_trivial_size = False
        for group in right.groups:
            for member in group.members:
                if type(member) is EllipsisAxis:
                    if used_non_trivial_size:
                        raise fail("all bias dimensions should go after ellipsis in the output")
                elif type(member) is AxisName and member.name in bias_names:
                    shape.append(axes_lengths[member.name])
                    used_non_trivial_size = True
                else:
                    shape.append(1)
        bias_shape_ = tuple(shape)

    # einsum with single lowercase letters, which every framework understands
    identifiers = sorted(left_names | right_names | weight_names)
    if len(identifiers) > len(string.ascii_lowercase):
        raise fail(f"EinMix takes at most {len(string.ascii_lowercase)} distinct axes, "
                   f"got {len(identifiers)}")
    letters = dict(zip(identifiers, string.ascii_lowercase))
    letters["..."] = "..."

    def flat(side: Side) -> str:
        return "".join(letters[name] for name in _flat_names(side))

    return EinMixPlan(
        pre_reshape_pattern=pre_reshape_pattern,
        pre_reshape_lengths=pre_reshape_lengths,
        einsum_pattern=f"{flat(left)},{flat(weight)}->{flat(right)}",
        post_reshape_pattern=post_reshape_pattern,
        weight_shape=tuple(axes_lengths[name] for name in weight.names),
        weight_bound=(3 / fan_in) ** 0.5,
        bias_shape=bias_shape_,
        bias_bound=(1 / fan_in) ** 0.5,
    )
