"""The exception hierarchy.

Every error this package raises for bad input is a :class:`RearrangeError`, a
``ValueError`` subclass, so one ``except rearrange.RearrangeError`` catches them all.
Where PyTorch raises a different builtin class for the same mistake, the child class
below is *also* that builtin, so code written against torch keeps working:

====================  ==================  =========================================
class                 also a              raised for
====================  ==================  =========================================
RearrangeError        ValueError          the root; also torch's ValueErrors
LayoutError           RuntimeError        strides/sizes that forbid an op (view, expand, ...)
DimensionError        IndexError          a dim or an index out of range
ArgumentTypeError     TypeError           an argument of the wrong type
PatternError          —                   a rearrange pattern that is malformed or
                                          does not fit the input
NoViewError           RuntimeError        ``copy=False`` when no strides can express
                                          the result (a LayoutError)
====================  ==================  =========================================
"""

from __future__ import annotations

__all__ = [
    "RearrangeError",
    "LayoutError",
    "DimensionError",
    "ArgumentTypeError",
    "PatternError",
    "NoViewError",
]


class RearrangeError(ValueError):
    """Root of every error raised by ``rearrange`` for bad input."""

    # Tracebacks say ``rearrange.PatternError``: the names users import.
    __module__ = "rearrange"


class LayoutError(RearrangeError, RuntimeError):
    """The requested shape/strides cannot be produced (PyTorch raises RuntimeError)."""

    __module__ = "rearrange"


class DimensionError(RearrangeError, IndexError):
    """A dimension or an index is out of range (PyTorch raises IndexError)."""

    __module__ = "rearrange"


class ArgumentTypeError(RearrangeError, TypeError):
    """An argument has the wrong type (PyTorch raises TypeError)."""

    __module__ = "rearrange"


class PatternError(RearrangeError):
    """A pattern is malformed, or does not fit the input it is applied to."""

    __module__ = "rearrange"


class NoViewError(LayoutError):
    """``copy=False`` was requested, but the planner proved that no view exists."""

    __module__ = "rearrange"
