"""The exception hierarchy.

Every error this package raises for bad input is a :class:`RearrangeError`, so one
``except rearrange.RearrangeError`` catches them all. The root is both a ``ValueError``
and a ``RuntimeError``: ``RuntimeError`` because einops raises ``EinopsError``, a
``RuntimeError``, for every mistake (so ``except RuntimeError`` written for einops
catches each of ours), ``ValueError`` because a bad argument is what that class means in
Python. Where PyTorch raises yet another builtin class for the same mistake, the child
class below is *also* that builtin, so code written against torch keeps working:

====================  =======================  ========================================
class                 also a                   raised for
====================  =======================  ========================================
RearrangeError        ValueError,              the root; anything below not more
                      RuntimeError             specific (a bad reduction, ``out=``, ...)
LayoutError           (the root's)             strides/sizes that forbid an op (view,
                                               expand, ...); sizes no array can have
DimensionError        IndexError               a dim or an index out of range
ArgumentTypeError     TypeError                an argument of the wrong type
PatternError          (the root's)             a pattern that is malformed or does not
                                               fit the input: a split that does not
                                               divide, a wrong rank, a length that
                                               contradicts the input, a result too big
                                               for any array (sizes of 2**63 elements or
                                               bytes, more than 64 dims)
ShapeMismatchError    (PatternError's)         ``parse_shape``/``check_shape``/``pack``/
                                               ``unpack``: a shape that does not fit
NoViewError           (LayoutError's)          ``copy=False`` when no strides can express
                                               the result
OutOfMemoryError      MemoryError              a result arrays can have, but numpy could
                                               not allocate (``repeat``, ``reduce``)
====================  =======================  ========================================

(``ShapeMismatchError`` lives in :mod:`rearrange.shapes`.) Every class is therefore a
``RuntimeError`` and a ``ValueError``; ``except RuntimeError`` and ``except ValueError``
code written for einops or numpy keeps working.
"""

from __future__ import annotations

__all__ = [
    "RearrangeError",
    "LayoutError",
    "DimensionError",
    "ArgumentTypeError",
    "PatternError",
    "NoViewError",
    "OutOfMemoryError",
]


class RearrangeError(ValueError, RuntimeError):
    """Root of every error raised by ``rearrange`` for bad input: a ``ValueError``, and a
    ``RuntimeError`` like einops' ``EinopsError``."""

    # Tracebacks say ``rearrange.PatternError``: the names users import.
    __module__ = "rearrange"


class LayoutError(RearrangeError):
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


class OutOfMemoryError(RearrangeError, MemoryError):
    """The result is within every limit of arrays, but numpy could not allocate it."""

    __module__ = "rearrange"
