"""The backend interface, declared: what every array type's module provides
(:class:`Backend`), and the optional hooks with their defaults in one place
(:func:`hook`).

A backend is a module (``ndarray``, ``tensor``, ``_numpy_subclass``, ``_torch``,
``_dask``, ``_array_api``); a module satisfies a Protocol by having the functions, so
``isinstance(module, Backend)`` holds for every one (tests/test_backend_protocol.py
checks each, with the signatures). The fronts call the required functions directly and
every optional one through :func:`hook`, never ``getattr(backend, name, None)``.
"""

from __future__ import annotations

from typing import Any, Callable, Hashable, Protocol, Sequence, runtime_checkable

import numpy as np

__all__ = ["Backend", "OPTIONAL_HOOKS", "hook"]

Runner = Callable[[Any], Any]


@runtime_checkable
class Backend(Protocol):
    """What every backend module provides."""

    def matches(self, x: Any) -> bool:
        """Is ``x`` one of this backend's arrays? Cheap: from ``type(x)`` alone."""

    def cache_key(self, x: Any) -> Hashable:
        """All of ``x`` that a lowered runner depends on (shape and dtype; strides and
        device where the library has them). Unhashable when ``x``'s sizes are traced:
        then nothing is cached."""

    def describe(self, x: Any) -> Any:
        """The :class:`~rearrange.backends.ArrayInfo` the planner sees: layout, dtype,
        item size."""

    def lower(self, plan: Any, reduction: Any, sample: Any) -> Runner:
        """A transform's plan (rearrange, reduce, repeat) as ``x -> result`` in the
        library's own ops, for arrays like ``sample``; a plan the call refuses lowers
        to :func:`rearrange.backends.refusal`."""

    def stack(self, xs: list[Any]) -> Any:
        """Arrays of one shape stacked on a new first axis (a list input, as einops)."""

    def reshape(self, x: Any, shape: tuple[int, ...]) -> Any:
        """``x`` reshaped (a view where the library can)."""

    def concat(self, xs: list[Any], axis: int) -> Any:
        """Arrays concatenated along ``axis``."""

    def einsum(self, subscripts: str, *xs: Any) -> Any:
        """The library's einsum over plain subscripts."""


def _no_check(x: Any) -> None:
    return None


def _not_traced(x: Any, axes_lengths: Any) -> bool:
    return False


def _plan_as_is(plan: Any, *context: Any) -> Any:
    return plan


def _as_numpy(x: Any) -> np.ndarray:
    try:
        return np.asarray(x)
    except (TypeError, ValueError, RuntimeError):  # e.g. cupy: device memory, DLPack only
        return np.from_dlpack(x)


def _checks_on_plain_ints(checks: Sequence[Any]) -> None:
    """Without a tracer sizes are ints: each :class:`~rearrange.recipe.SizeCheck` is
    decided at once, raising eager's error."""
    for check in checks:
        holds = check.lhs == check.rhs if check.relation == "==" else check.lhs >= check.rhs
        if not holds:
            raise check.failure(check.quoted)


#: The optional hooks and what a backend without one gets.
OPTIONAL_HOOKS: dict[str, Any] = {
    # Raise ArgumentTypeError for an array of this type that no plan can describe
    # (torch: sparse, mkldnn, nested).
    "check": _no_check,
    # Are x's sizes (or the axis lengths) symbolic or traced? Then the call follows a
    # SymbolicPlan, lowered by ``lower_symbolic(plan, reduction)``, and is never cached.
    "traced": _not_traced,
    "lower_symbolic": None,
    # Assert a symbolic plan's size checks in the traced program (torch: torch._check).
    "assert_sizes": _checks_on_plain_ints,
    # The plan with its copy step saying who copies (torch: its own copy for small
    # tensors and other devices; dask: chunks).
    "describe_copy": _plan_as_is,
    # The einsum plan with the engine that contracts (torch.matmul, the library's einsum).
    "describe_einsum": _plan_as_is,
    # An einsum plan as ``runner(arrays)``; None: the front runs the plan's rearranges
    # and the backend's einsum step by step.
    "lower_einsum": None,
    # A pack plan as ``runner(arrays) -> packed`` (numpy and Tensor: a plan over their
    # layouts and dtypes; any other library: over shapes alone, dtype None — torch's
    # reshapes and one torch.cat); None: the library's ``reshape`` and ``concat`` run it.
    "lower_pack": None,
    # An unpack plan as ``runner(packed) -> list of views``; None: the library's slicing
    # and ``reshape``.
    "lower_unpack": None,
    # x's values as a numpy array, for asnumpy.
    "to_numpy": _as_numpy,
}


def hook(backend: Any, name: str) -> Any:
    """``backend``'s optional function ``name``, or its default (None where the
    operation has another way: ``lower_symbolic``, ``lower_einsum``, ``lower_pack``,
    ``lower_unpack``)."""
    found = getattr(backend, name, None)
    return found if found is not None else OPTIONAL_HOOKS[name]
