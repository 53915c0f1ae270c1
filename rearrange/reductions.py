"""The named reductions on numpy data: what ``reduce(x, pattern, name)`` computes once the
plan has moved the reduced axes to the end of a view.

numpy arrays, ``rearrange.Tensor`` (through its numpy view) and dask blocks all reduce
here, so their values and result dtypes agree; torch and the array API use their own
library's reductions with the same rules (docs/reduce.md).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from .errors import RearrangeError

__all__ = ["apply_reduction", "reduce_values"]


def _logsumexp(y: np.ndarray, axis: tuple[int, ...]) -> np.ndarray:
    """log(sum(exp(y))) over ``axis``, shifted by the maximum so that exp never
    overflows; infinite maxima are not shifted (their result is the maximum itself).

    Integers and bools are computed and returned in float64 (subtracting the peak in
    their own dtype would wrap, and numpy's exp of small ints is float16); float16 is
    computed in float32 (a sum of many exp terms exceeds float16's range) and returned
    as float16."""
    if y.dtype.kind in "biu":
        y = y.astype(np.float64)
    elif y.dtype == np.float16:
        return _logsumexp(y.astype(np.float32), axis).astype(np.float16)
    if y.size == 0:
        with np.errstate(divide="ignore"):  # the sum of nothing is 0: log gives -inf
            return np.log(np.sum(np.exp(y), axis=axis))
    peak = np.max(y, axis=axis, keepdims=True)
    peak = np.where(np.isfinite(peak), peak, 0)
    with np.errstate(divide="ignore"):  # log(0) = -inf for an all -inf slice, as wanted
        return np.log(np.sum(np.exp(y - peak), axis=axis)) + np.squeeze(peak, axis=axis)


def _one_axis(method: str) -> Callable[[np.ndarray, tuple[int, ...]], np.ndarray]:
    def reduce_one(y: np.ndarray, axis: tuple[int, ...]) -> np.ndarray:
        return getattr(y, method)(axis=axis[0])
    return reduce_one


def _count_nonzero(y: np.ndarray, axis: tuple[int, ...]) -> np.ndarray:
    return np.asarray(np.count_nonzero(y, axis=axis))


# name -> f(view, trailing axes): numpy's own methods, so that dtypes follow numpy's
# promotion (integer sums widen, integer means become float64).
_NUMPY_REDUCERS: dict[str, Callable[[np.ndarray, tuple[int, ...]], Any]] = {
    **{name: (lambda method: lambda y, axis: getattr(y, method)(axis=axis))(name)
       for name in ("min", "max", "sum", "mean", "prod", "any", "all", "var", "std")},
    "logsumexp": _logsumexp,
    "argmax": _one_axis("argmax"),
    "argmin": _one_axis("argmin"),
    "count_nonzero": _count_nonzero,
}


def apply_reduction(reduction: Any, y: np.ndarray, axis: tuple[int, ...],
                    kept_shape: tuple[int, ...]) -> np.ndarray:
    """``y`` reduced over its trailing ``axis``: an array of ``kept_shape``."""
    result = reduce_values(reduction, y, axis)
    if isinstance(result, np.generic):
        result = np.asarray(result)
    if not isinstance(result, np.ndarray) or result.shape != kept_shape:
        got = getattr(result, "shape", type(result).__name__)
        raise RearrangeError(
            f"the reduction callable returned {got}; expected an array of shape {kept_shape} "
            f"(the input of shape {y.shape} reduced over axes {axis})")
    return result




def reduce_values(reduction: Any, y: np.ndarray, axis: tuple[int, ...]) -> Any:
    """``reduction`` (a name or a callable ``f(y, axis)``) of ``y`` over ``axis``, as the
    array's own methods give it: no check of the result's type or shape (a numpy
    subclass keeps its own: ``np.matrix`` reductions stay 2-d, masked arrays keep their
    mask)."""
    try:
        if callable(reduction):
            return reduction(y, axis)
        return _NUMPY_REDUCERS[reduction](y, axis)
    except ValueError as error:  # numpy: a zero-size reduction without an identity
        name = reduction if isinstance(reduction, str) else repr(reduction)
        raise RearrangeError(
            f"reduction {name} over axes of total length 0 failed: {error}") from None
