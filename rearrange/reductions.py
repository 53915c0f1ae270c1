"""The named reductions on numpy data: what ``reduce(x, pattern, name)`` computes once the
plan has moved the reduced axes to the end of a view.

numpy arrays, ``rearrange.Tensor`` (through its numpy view) and dask blocks all reduce
here, so their values and result dtypes agree; torch and the array API use their own
library's reductions with the same rules (docs/reduce.md).
"""

from __future__ import annotations

import math
import threading
from typing import Any, Callable

import numpy as np

from .errors import RearrangeError
from .records import record

__all__ = ["apply_reduction", "reduce_values", "plan_by_layout", "reduce_by_layout",
           "compiled_reduction", "run_compiled", "COMPILED_STRATEGIES"]


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


# --------------------------------------------------------------------------- by layout
#
# numpy reduces every layout one way: an iterator over the output, the reduced axes in
# the inner loop. Two layouts lose to that by far, and are planned here instead (the
# result is the same array, value for value, dtype and strides):
#
# * a small window (pooling: "b c (h 2) (w 2) -> b c h w"): numpy walks the two reduced
#   axes of length 2 as its inner loop, a few elements at a time, at a fraction of the
#   memory's speed. The same maximum is the elementwise maximum of the window's strided
#   views, each a long loop over the output: ufunc(v0, v1, out), ufunc(out, v2, out), ...
#   max and min are exact in any order (NaN propagates either way). A sum is not: numpy
#   adds a window's elements one after the other from 0, in its iterator's order of the
#   reduced axes, which is their order here when their strides are positive and
#   descending (the commonest layout); only then are sums and means of floats reduced
#   as views, in that order, and 0 added last (numpy's sums start from 0, so they are
#   never -0.0). Integer sums are exact in any order.
# * a large reduction (an input of PARALLEL_MIN_BYTES or more) whose output has an axis
#   to cut that is not the input's innermost: the output split into slabs along its
#   outermost long axis, each slab reduced by numpy's own call into its part of one
#   result, on the kernel's thread count (numpy releases the GIL in its loops). Each
#   output element is the same sum in the same order as numpy's one call makes it: a slab
#   keeps the reduced axes' layout whole.
# * a sum or mean of float32 or float64 over short contiguous rows ("b c h w -> b c h"):
#   numpy's inner loop is called once a row, and costs ~40 ns a row of 56 floats
#   whatever the adds cost. The compiled row-sums runner (kernel/rowsums.py) adds each
#   row in numpy's own pairwise order (the same bits) with nothing between the rows, on
#   the kernel's pool (chunks of rows claimed by its threads, the mean divided in the
#   runner; until 2026-11-28 slabs of rows on a ThreadPoolExecutor, whose hand-off cost
#   27-45 us and whose halves waited on a worker woken late). Same rules as the copy kernel:
#   the runner is never compiled in the caller's thread by default (kernel/builds.py:
#   until it is ready, or where numba cannot run, the reduction is planned without it
#   and numpy's calls run), exact ndarrays only, rows re-checked on the array itself
#   before native code reads them.
# * a large maximum, minimum, any or all whose input's outermost axis is reduced: the
#   input cut along that axis, one part a thread, each part reduced by numpy's call
#   into a partial result, the partials combined by the ufunc (np.maximum, ...,
#   np.logical_or). Each thread reads one contiguous part of memory, where slabs of the
#   output read pieces ("b c h w -> c": a slab along c reads b pieces of h * w
#   elements, 12.5 KB each) or cannot be cut at all (a kept innermost axis,
#   "b c h w -> w"; a full reduction). Exact: these reductions give the same values in
#   any order, NaN included (np.maximum propagates it as numpy's max does).
# * a maximum or minimum of float32 or float64 whose reduced axes are contiguous runs
#   ("b c h w -> c", "-> b c", "-> b c h": run_layout): the compiled row maxima
#   (kernel/rowmax.py) on the kernel's pool — chunks of outputs claimed by spinning
#   workers, where the partials and slabs paid a ThreadPoolExecutor's hand-off (27-45
#   us) and waited for a late worker's half. numpy's values; an output whose zeros of
#   both signs tie for its extreme (numpy's sign then follows its SIMD lanes) makes the
#   whole numpy's call.
# * a sum or mean of float32 or float64 whose reduced axis lies between kept ones
#   ("b c h w -> b h w": column_layout): the compiled column sums, numpy's order kept
#   (each output from +0.0, the reduced rows added one after the other), on the pool.
# * a maximum or minimum of float32 or float64 over a small window whose rows are 1 or
#   2 consecutive elements, a row's windows one after the other (pooling, "b c (h 2)
#   (w 2) -> b c h w", 2x1, 1x2: window_layout): the compiled window maxima
#   (kernel/rowmax.py, "window-max") — each window row read once as vectors, its pairs
#   taken apart by shuffles, into the output row (in L1 until the window's last row),
#   each output written to memory once, where the views read the output 3 times more.
#   numpy's values, signed zeros included: of equal values the later one, as numpy's
#   loop over a short window keeps (a window that is one contiguous run of 8 or more,
#   where numpy's SIMD lanes choose, is left to the views). Wider windows (3x3) stay
#   views: read one by one they were slower.
# * a sum or mean of float32 or float64 over the same windows (average pooling): the
#   compiled window sums (kernel/rowmax.py, "window-sums", strategy "pool-sums"), only
#   where the views would run and add in an order the runner repeats (_summed_windows:
#   2 columns in the order "rows", a pair then the pairs; 1 column "flat"), then + 0.0
#   and the mean's division as the views do: the views' result, bit for bit, each window
#   row read once into the output row (4.5-7x the views at 98 MiB, 1.6-3x at 256 KiB).
#   All the compiled runners: the copy kernel's rules (never compiled in the caller's thread by
#   default, numpy's way until ready, exact aligned native ndarrays only, the layout
#   re-checked on the array itself).

WINDOW_MAX = 16               # the most elements in a window reduced as views
WINDOW_MIN_OUTPUT = 4096      # and the fewest outputs: below, numpy's call is as fast
PARALLEL_MIN_BYTES = 1 << 22  # inputs smaller than this are reduced in one thread
_WINDOW_UFUNCS = {"max": np.maximum, "min": np.minimum, "sum": np.add, "mean": np.add}
_SLAB_METHODS = frozenset({"max", "min", "sum", "mean", "prod", "any", "all"})
# The compiled row sums, measured at 1 and 2 threads against numpy's call, its slabs
# and windows (docs/performance.md, "Sums over short rows, compiled"): they win from
# ~500 rows of 56 float32 (a fixed ~20 us a call: the runner's call through ctypes,
# the output's and the rows' addresses); float64 rows of 128 or more and float32 rows
# of 4096 or more were no faster than numpy's call at 8 MiB (its inner loop is
# seldom called there), rows of 2-4 slower than their windows as views.
ROWS_MAX = {np.dtype(np.float32): 2048, np.dtype(np.float64): 64}   # the longest rows
ROWS_MIN_LENGTH = 5             # the shortest rows
ROWS_MIN_BYTES = 1 << 18        # the smallest input
ROWS_MIN_COUNT = 256            # the fewest rows
# The compiled maxima and minima over contiguous runs (kernel/rowmax.py; docs/performance.md,
# "Maxima over runs, compiled"): float32 and float64 (native), inputs of RUNS_MIN_BYTES
# or more, runs of RUNS_MIN_LENGTH or more (shorter windows are reduced as views), at
# least RUNS_MIN_OUTPUTS outputs (a whole reduction to one value: partial results).
RUNS_DTYPES = frozenset({np.dtype(np.float32), np.dtype(np.float64)})
RUNS_MIN_BYTES = 1 << 18
RUNS_MIN_LENGTH = 16
RUNS_MIN_OUTPUTS = 2
# At one thread, several runs an output only up to this long: numpy's call per run is
# what the runner saves (rows of 28-56: 3.5-4.6x), and at runs of 3136 ("b c h w -> c")
# the runner was 0.96-0.97x numpy's call (one run an output, "-> b c": 1.04-1.16x).
RUNS_ONE_THREAD_MAX_LENGTH = 256
# The compiled sums down columns (kernel/rowmax.py, "column-sums"): a sum or mean whose
# reduced axis lies between kept ones ("b c h w -> b h w"), numpy's order kept (each
# output from +0.0, the rows added one after the other), on the kernel's threads: where
# numpy's slabs would run (several threads, PARALLEL_MIN_BYTES or more), the kept inner
# run is COLUMNS_MIN_WIDTH elements or more and the outputs make a work unit a thread
# at least (a narrow output, "(n c) -> c", is one: numpy's call).
COLUMNS_MIN_WIDTH = 16
# The compiled maxima and minima over small windows (kernel/rowmax.py, "window-max";
# docs/performance.md, "Max-pooling, compiled"): float32 and float64 windows of 2 to
# WINDOW_MAX elements interleaved with kept axes (window_layout), inputs of
# POOL_MIN_BYTES or more, whose rows' windows are 1 or 2 consecutive elements (read as
# vectors: 2x2 1.5x the views at 128 KiB, 3-4x at 98 MiB). Wider windows (3x3, 2x3),
# read one by one, were 0.6-0.8x the views up to 36 MiB of float32: the views' way.
POOL_MIN_BYTES = 1 << 18     # (the window sums' too: 1.6-3.0x the views there, at 1 and 2 threads)
# The reductions combined from partial results, and how.
_PARTIAL_UFUNCS = {"max": np.maximum, "min": np.minimum, "any": np.logical_or,
                   "all": np.logical_and}
_pool: list[Any] = []         # [(its workers, the executor)], made by the first slabs
_pool_lock = threading.Lock()


def plan_by_layout(reduction: Any, shape: tuple[int, ...], dtype: np.dtype,
                   reduced: int, threads: int, strides: tuple[int, ...] | None = None) -> str:
    """How ``reduction`` of a view of ``shape`` whose last ``reduced`` axes are reduced
    runs: ``"numpy"`` (its own call), ``"window"`` (ufunc over the window's views),
    ``"slabs"`` (numpy's call on slabs of the output, in threads), ``"partials"``
    (numpy's call on parts of the input, combined), ``"rows"`` (the compiled row sums,
    on the kernel's pool), ``"columns"`` (the compiled column sums), ``"runs"`` (the
    compiled row maxima), ``"pool"`` (the compiled window maxima) or ``"pool-sums"``
    (the compiled window sums: only where the views would run, in the views' order,
    so that their result is the views'); for the compiled
    ones numpy's way (or the views), as planned without them,
    while their runner is not ready. Exact numpy arrays only; the choice depends on nothing
    but the arguments (``strides``: the view's, in elements; without them no sum or
    mean is reduced as views or rows)."""
    if not isinstance(reduction, str) or dtype.kind not in "biuf":
        return "numpy"
    if (reduction in ("sum", "mean") and dtype in ROWS_MAX and reduced == 1
            and strides is not None and ROWS_MIN_LENGTH <= shape[-1] <= ROWS_MAX[dtype]
            and math.prod(shape[:-1]) >= ROWS_MIN_COUNT
            and math.prod(shape) * dtype.itemsize >= ROWS_MIN_BYTES
            and _contiguous_rows(shape, strides)):
        return "rows"
    if (reduction in ("sum", "mean") and dtype in RUNS_DTYPES and strides is not None
            and threads > 1 and math.prod(shape) * dtype.itemsize >= PARALLEL_MIN_BYTES):
        columns = column_layout(shape, strides, reduced)
        if (columns is not None and columns.width >= COLUMNS_MIN_WIDTH
                and _column_units(columns, dtype) >= threads):
            return "columns"
    if (reduction in ("max", "min") and dtype in RUNS_DTYPES and strides is not None
            and math.prod(shape) * dtype.itemsize >= RUNS_MIN_BYTES):
        layout = run_layout(shape, strides, reduced)
        if (layout is not None and layout.n >= RUNS_MIN_LENGTH
                and layout.outputs >= RUNS_MIN_OUTPUTS
                and (threads > 1 or layout.count == 1
                     or layout.n <= RUNS_ONE_THREAD_MAX_LENGTH)):
            return "runs"
    if (reduction in ("max", "min") and dtype in RUNS_DTYPES and strides is not None
            and math.prod(shape) * dtype.itemsize >= POOL_MIN_BYTES
            and 1 < math.prod(shape[len(shape) - reduced:]) <= WINDOW_MAX):
        layout = window_layout(shape, strides, reduced)
        if layout is not None and layout.vectors:
            return "pool"
    if (reduction in ("sum", "mean") and dtype in RUNS_DTYPES and strides is not None
            and math.prod(shape) * dtype.itemsize >= POOL_MIN_BYTES
            and _summed_windows(shape, strides, reduced) is not None
            and _plan_without_rows(reduction, shape, dtype, reduced, threads,
                                   strides) == "window"):
        return "pool-sums"
    return _plan_without_rows(reduction, shape, dtype, reduced, threads, strides)


# What each compiled strategy's runner is, for explain (kernel/rowsums.py, rowmax.py).
_RUNNERS = {"rows": "row-sums", "columns": "column-sums", "runs": "row-max",
            "pool": "window-max", "pool-sums": "window-sums"}


def describe_strategy(reduction: Any, shape: tuple[int, ...], dtype: np.dtype, reduced: int,
                      threads: int, strides: tuple[int, ...] | None,
                      dim_names: tuple[str, ...] | None = None) -> str:
    """How the reduction of a view of ``shape`` (``strides`` in elements) over its last
    ``reduced`` axes runs at ``threads`` threads, in words: :func:`plan_by_layout`'s
    choice for exactly these arguments (what the call's runner decides), and for a
    compiled one, what runs until its runner is ready. ``dim_names``: the view's dims
    as the words name them (default: ``dim 0``, ``dim 1``, ...)."""
    if dim_names is None:
        dim_names = tuple(f"dim {k}" for k in range(len(shape)))
    strategy = plan_by_layout(reduction, shape, dtype, reduced, threads, strides)
    runner = _RUNNERS.get(strategy)
    if runner is None:
        return _numpy_words(strategy, reduction, shape, reduced, threads, strides, dim_names)
    without = _numpy_words(_plan_without_rows(reduction, shape, dtype, reduced, threads,
                                              strides),
                           reduction, shape, reduced, threads, strides, dim_names)
    from .kernel.modes import get_jit_mode   # (no numba: the mode is an environment word)

    if get_jit_mode() == "off":
        return f"{without} (the compiled {runner} runner's case, but REARRANGE_JIT is off)"
    return (f"the compiled {runner} runner (numpy's values, bit for bit) on {threads} "
            f"thread{'s' if threads > 1 else ''}; until it is compiled, {without}")


def _numpy_words(strategy: str, reduction: Any, shape: tuple[int, ...], reduced: int,
                 threads: int, strides: tuple[int, ...] | None,
                 dim_names: tuple[str, ...]) -> str:
    """:func:`describe_strategy`'s words for one of numpy's own ways."""
    name = reduction if isinstance(reduction, str) else "the callable"
    strategy, axis = numpy_way(strategy, shape, strides, reduced, threads)
    if strategy == "window":
        return (f"numpy.{_WINDOW_UFUNCS[reduction].__name__} of the window's "
                f"{math.prod(shape[len(shape) - reduced:])} strided views, a pass over "
                f"the output each")
    if strategy == "partials":
        return (f"numpy's {name} on {threads} parts of the input cut along "
                f"{dim_names[axis]}, one a thread, combined by "
                f"numpy.{_PARTIAL_UFUNCS[reduction].__name__}")
    if strategy == "slabs":
        return (f"numpy's {name} on slabs of the output along {dim_names[axis]}, on "
                f"{threads} threads")
    return f"numpy's {name} in one call"


def numpy_way(strategy: str, shape: tuple[int, ...], strides: tuple[int, ...] | None,
              reduced: int, threads: int) -> tuple[str, int | None]:
    """One of numpy's own strategies as :func:`reduce_by_layout` runs it on a view of
    ``shape`` and ``strides`` (elements or bytes: only their order counts):
    ``("partials", the reduced axis cut)``, ``("window", the output axis its slabs cut,
    or None)``, ``("slabs", the output axis cut)`` or ``("numpy", None)``: partial
    results with no axis to cut run as slabs, slabs with none as numpy's one call."""
    if strategy == "partials":
        cut = _partial_axis(shape, strides, reduced, threads)
        if cut is not None:
            return "partials", cut
        strategy = "slabs"
    if strategy not in ("window", "slabs"):
        return "numpy", None
    split = _slab_axis(shape, len(shape) - reduced, threads) if threads > 1 else None
    if strategy == "slabs" and split is None:
        return "numpy", None
    return strategy, split


def _plan_without_rows(reduction: Any, shape: tuple[int, ...], dtype: np.dtype,
                       reduced: int, threads: int, strides: tuple[int, ...] | None) -> str:
    """:func:`plan_by_layout`'s choice among numpy's own ways (what runs while the row
    sums' or the row maxima's runner is not ready)."""
    if not isinstance(reduction, str) or dtype.kind not in "biuf":
        return "numpy"
    kept = shape[:len(shape) - reduced]
    window = math.prod(shape[len(shape) - reduced:])
    outputs = math.prod(kept)
    if (reduction in _WINDOW_UFUNCS and 1 < window <= WINDOW_MAX
            and outputs >= WINDOW_MIN_OUTPUT and _window_exact(reduction, dtype, shape,
                                                               strides, reduced)):
        return "window"
    if (threads > 1 and reduction in _PARTIAL_UFUNCS
            and outputs * window * dtype.itemsize >= PARALLEL_MIN_BYTES
            and _partial_axis(shape, strides, reduced, threads) is not None):
        return "partials"
    if (threads > 1 and reduction in _SLAB_METHODS and dtype != np.float16
            and outputs * window * dtype.itemsize >= PARALLEL_MIN_BYTES
            and _slabs_keep_the_inner_axis(shape, strides, reduced, threads)):
        return "slabs"
    return "numpy"


def _partial_axis(shape: tuple[int, ...], strides: tuple[int, ...] | None, reduced: int,
                  threads: int) -> int | None:
    """The axis the input is cut along for partial results: its outermost moving axis
    (the largest stride) if it is a reduced one at least ``threads`` long; None
    otherwise (a kept axis outermost: slabs along it read contiguous parts already)."""
    if strides is None:
        return None
    moving = [k for k, n in enumerate(shape) if n > 1]
    if not moving:
        return None
    outer = max(moving, key=lambda k: abs(strides[k]))
    if outer < len(shape) - reduced or shape[outer] < threads:
        return None
    return outer


def _slabs_keep_the_inner_axis(shape: tuple[int, ...], strides: tuple[int, ...] | None,
                               reduced: int, threads: int) -> bool:
    """Is there an axis to cut the output along (the first kept one at least two slabs
    long, as :func:`reduce_by_layout` cuts), and is it not the input's innermost moving
    axis? Measured on a quiet 2-core machine at 2 threads against numpy's one call (the
    same results): slabs that keep the innermost axis whole win wherever the input is
    large — a sum over long rows 2.0-2.4x, a mean over channels 1.6-1.7x, a max per
    channel 1.4-1.6x, short reduced rows as before — and slabs that cut it lose (each
    thread reading runs a slab long: 0.45x)."""
    if strides is None:
        return False
    moving = [k for k, n in enumerate(shape) if n > 1]
    if not moving:
        return False
    inner = min(moving, key=lambda k: abs(strides[k]))
    split = _slab_axis(shape, len(shape) - reduced, threads)
    return split is not None and split != inner


def _contiguous_rows(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """Is this view (its last axis reduced; ``strides`` in elements) rows of contiguous
    elements, one after the other: its last axis of stride 1, its kept axes one run of
    rows (each moving axis a whole number of the next, strides positive) that do not
    overlap? numpy then adds each row as one run, in its pairwise order (its iterator's
    innermost axis is the row's)."""
    rows = [k for k in range(len(shape) - 1) if shape[k] > 1]
    if strides[-1] != 1:
        return False
    if any(strides[k] <= 0 for k in rows):
        return False
    if rows and strides[rows[-1]] < shape[-1]:
        return False
    return all(strides[a] == shape[b] * strides[b] for a, b in zip(rows, rows[1:]))


@record
class RunLayout:
    """A view whose reduced axes are ``count`` runs of ``n`` contiguous elements each
    output, ``rstride`` elements apart, the outputs' first runs ``ostride`` apart, in
    the C order of its kept axes (strides in elements)."""
    outputs: int
    ostride: int
    count: int
    rstride: int
    n: int


def run_layout(shape: tuple[int, ...], strides: tuple[int, ...], reduced: int) -> RunLayout | None:
    """The view (its last ``reduced`` axes reduced, ``strides`` in elements) as runs
    (:class:`RunLayout`), or None where it is not one: axes of length 1 dropped, every
    stride positive; the reduced axes, outermost first, each a whole number of the next
    (one run of stride-1 elements) but for at most one outer axis (the runs); the kept
    axes likewise one run of outputs (each a whole number of the next)."""
    first_reduced = len(shape) - reduced
    moving = [k for k, n in enumerate(shape) if n > 1]
    if any(strides[k] <= 0 for k in moving):
        return None
    window = [k for k in moving if k >= first_reduced]
    kept = [k for k in moving if k < first_reduced]
    if not window or strides[window[-1]] != 1:
        return None
    inner = len(window) - 1        # the run: the innermost axes that coalesce
    while inner > 0 and strides[window[inner - 1]] == shape[window[inner]] * strides[window[inner]]:
        inner -= 1
    n = math.prod(shape[k] for k in window[inner:])
    if inner > 1:
        return None                 # runs along more than one axis
    count, rstride = (shape[window[0]], strides[window[0]]) if inner == 1 else (1, n)
    if any(strides[a] != shape[b] * strides[b] for a, b in zip(kept, kept[1:])):
        return None
    outputs = math.prod(shape[k] for k in kept)
    ostride = strides[kept[-1]] if kept else 0
    return RunLayout(outputs, ostride, count, rstride, n)


@record
class WindowLayout:
    """A view whose kept axes are ``outer`` output rows of ``width`` outputs each (C
    order), the rows' first windows ``outer_stride`` apart and a row's windows ``step``
    apart, and whose reduced axes are windows of ``rows`` x ``cols`` elements, the rows
    ``row_stride`` apart, the columns ``col_stride`` (strides in elements, the rows the
    larger)."""
    outer: int
    outer_stride: int
    width: int
    step: int
    rows: int
    row_stride: int
    cols: int
    col_stride: int

    @property
    def vectors(self) -> bool:
        """Can the runner take it: a row's windows its consecutive elements, of 1 or 2
        columns (read as vectors)?"""
        return self.step == self.cols and (self.cols == 1 or (self.cols == 2
                                                              and self.col_stride == 1))


def window_layout(shape: tuple[int, ...], strides: tuple[int, ...],
                  reduced: int) -> WindowLayout | None:
    """The view (its last ``reduced`` axes reduced, ``strides`` in elements) as windows
    (:class:`WindowLayout`), or None: axes of length 1 dropped, every moving stride
    positive and no two alike; one or two moving reduced axes (a window's rows and
    columns: the larger stride the rows'), no contiguous run of 8 or more among them
    (numpy's SIMD lanes order such a run); the kept axes in descending strides, the
    innermost one the step between windows, the others one run of output rows (each a
    whole number of the next)."""
    moving = [k for k, n in enumerate(shape) if n > 1]
    if (any(strides[k] <= 0 for k in moving)
            or len({strides[k] for k in moving}) < len(moving)):
        return None
    first_reduced = len(shape) - reduced
    window = sorted((k for k in moving if k >= first_reduced), key=lambda k: -strides[k])
    kept = [k for k in moving if k < first_reduced]
    if not window or len(window) > 2:
        return None
    if any(strides[a] <= strides[b] for a, b in zip(kept, kept[1:])):
        return None
    # the output rows' axis: the view's last kept one (of length 1: rows of one window)
    inner = first_reduced - 1 if first_reduced > 0 and shape[first_reduced - 1] > 1 else None
    outer_axes = [k for k in kept if k != inner]
    if any(strides[a] != shape[b] * strides[b] for a, b in zip(outer_axes, outer_axes[1:])):
        return None
    rows_axis, cols_axis = (window[0], window[1]) if len(window) == 2 else (None, window[0])
    if rows_axis is None and strides[cols_axis] != 1:
        rows_axis, cols_axis = cols_axis, None       # one reduced axis: the window's rows
    if cols_axis is not None and strides[cols_axis] == 1:
        # numpy's inner loop over a contiguous run of the window (its rows and columns
        # coalesced where they follow each other): from 8 elements on, its SIMD lanes
        # choose among equal zeros (float64 runs of 9: measured), not the later one
        run = shape[cols_axis]
        if rows_axis is not None and strides[rows_axis] == run:
            run *= shape[rows_axis]
        if run >= 8:
            return None
    return WindowLayout(
        outer=math.prod(shape[k] for k in outer_axes),
        outer_stride=strides[outer_axes[-1]] if outer_axes else 0,
        width=shape[inner] if inner is not None else 1,
        step=strides[inner] if inner is not None else      # (one window a row: any step)
        shape[cols_axis] if cols_axis is not None else 1,
        rows=shape[rows_axis] if rows_axis is not None else 1,
        row_stride=strides[rows_axis] if rows_axis is not None else 0,
        cols=shape[cols_axis] if cols_axis is not None else 1,
        col_stride=strides[cols_axis] if cols_axis is not None else 0)


def _vector_window_layout(shape: tuple[int, ...], strides: tuple[int, ...],
                          reduced: int) -> WindowLayout | None:
    """:func:`window_layout` where the compiled window maxima can take it (``vectors``),
    else None."""
    layout = window_layout(shape, strides, reduced)
    return layout if layout is not None and layout.vectors else None


def _summed_windows(shape: tuple[int, ...], strides: tuple[int, ...],
                    reduced: int) -> WindowLayout | None:
    """:func:`window_layout` where the compiled window sums add exactly as the views do
    (:func:`reduce_by_layout`'s "window" strategy), else None: the runner's order — each
    window row's elements added first, then the rows' partial sums one after the other
    — is the views' for windows of 2 columns in the order ``"rows"`` (:func:`sum_order`:
    a pair, then the pairs; 2x2, 3x2, 1x2) and for windows of 1 column in the order
    ``"flat"`` (one element after the other: 2x1). Every other order, a window of 2
    columns added flat among them (one contiguous run of 4: ``a0 + a1 + a2 + a3``, not
    ``(a0 + a1) + (a2 + a3)``), stays the views'."""
    layout = window_layout(shape, strides, reduced)
    if layout is None or not layout.vectors:
        return None
    order = sum_order(shape, strides, reduced)
    if (layout.cols, order) not in ((2, "rows"), (1, "flat")):
        return None
    return layout


@record
class ColumnLayout:
    """A view whose kept axes are ``outer`` rows of ``width`` contiguous outputs each
    (the outer ones ``outer_stride`` apart) and whose reduced axes are ``rows`` rows
    ``row_stride`` apart, added by numpy one after the other (strides in elements)."""
    outer: int
    outer_stride: int
    rows: int
    row_stride: int
    width: int


def column_layout(shape: tuple[int, ...], strides: tuple[int, ...],
                  reduced: int) -> ColumnLayout | None:
    """The view (its last ``reduced`` axes reduced, ``strides`` in elements) as columns
    (:class:`ColumnLayout`), or None: every moving stride positive, numpy's order the
    flat one (:func:`sum_order`: its inner loop over a kept axis, the reduced rows added
    in turn), the reduced axes one run of rows (each a whole number of the next), the
    kept axes a contiguous inner run and at most one outer axis."""
    moving = [k for k, n in enumerate(shape) if n > 1]
    if any(strides[k] <= 0 for k in moving) or sum_order(shape, strides, reduced) != "flat":
        return None
    first_reduced = len(shape) - reduced
    window = [k for k in moving if k >= first_reduced]
    kept = [k for k in moving if k < first_reduced]
    if not window or not kept or strides[kept[-1]] != 1:
        return None
    if any(strides[a] != shape[b] * strides[b] for a, b in zip(window, window[1:])):
        return None
    inner = len(kept) - 1
    while inner > 0 and strides[kept[inner - 1]] == shape[kept[inner]] * strides[kept[inner]]:
        inner -= 1
    if inner > 1:
        return None
    width = math.prod(shape[k] for k in kept[inner:])
    outer, outer_stride = (shape[kept[0]], strides[kept[0]]) if inner == 1 else (1, width)
    return ColumnLayout(outer, outer_stride, shape[window[0]] if len(window) == 1 else
                        math.prod(shape[k] for k in window), strides[window[-1]], width)


def _column_units(layout: ColumnLayout, dtype: np.dtype) -> int:
    """The work units the column sums cut ``layout`` into (blocks of output rows: each
    output's rows are added by one thread, in order)."""
    from .kernel.rowmax import COLUMN_BLOCK_BYTES        # (numpy only: no numba)

    return layout.outer * -(-layout.width * dtype.itemsize // COLUMN_BLOCK_BYTES)


def _window_exact(reduction: str, dtype: np.dtype, shape: tuple[int, ...],
                  strides: tuple[int, ...] | None, reduced: int) -> bool:
    """Is a window of this layout reduced as views exactly as numpy reduces it?"""
    if reduction in ("max", "min"):
        return True
    if reduction == "sum" and dtype.kind in "biu":
        return True                     # integer sums: exact in any order
    if dtype.kind != "f" or dtype == np.float16 or strides is None:
        return False
    return sum_order(shape, strides, reduced) is not None


def sum_order(shape: tuple[int, ...], strides: tuple[int, ...], reduced: int) -> str | None:
    """The order in which numpy adds a window of this layout, where it is one mirrored
    here: ``"flat"`` — one element after the other, in C order of the reduced axes (its
    inner loop runs over a kept axis); ``"rows"`` — each run along the last reduced axis
    added first (its inner loop, shorter than numpy's 8-element pairwise block), then the
    runs one after the other, where a kept axis lies between the rows (pooling: the
    window's rows are a whole image row apart, its columns interleaved with the kept
    ones). None for every other layout (negative or zero strides,
    which numpy's iterator may flip or drop; ties; reduced axes not in descending
    strides; a run of 8 or more, or one that coalesces with the next reduced axis)."""
    moving = [k for k, n in enumerate(shape) if n > 1]
    if any(strides[k] <= 0 for k in moving) or len({strides[k] for k in moving}) < len(moving):
        return None
    first_reduced = len(shape) - reduced
    window = [k for k in moving if k >= first_reduced]
    if any(strides[a] <= strides[b] for a, b in zip(window, window[1:])):
        return None
    inner = min(moving, key=lambda k: strides[k]) if moving else None
    if inner is None or inner < first_reduced:
        return "flat"
    if shape[inner] >= 8 or inner != len(shape) - 1:
        return None
    if len(window) > 1 and strides[window[-2]] == shape[inner] * strides[inner]:
        # the run coalesces with the axis before it: one run of the whole window when
        # every reduced axis does, added one element after the other below 8
        whole = all(strides[a] == shape[b] * strides[b] for a, b in zip(window, window[1:]))
        return "flat" if whole and math.prod(shape[k] for k in window) < 8 else None
    if len(window) > 1 and not any(strides[inner] < strides[k] < strides[window[-2]]
                                   for k in moving if k < first_reduced):
        # a window of several rows that lie closer together than any kept axis: numpy
        # buffers such a block and adds it in its own pairwise order (measured), not
        # row by row
        return None
    return "rows"


def _slab_axis(shape: tuple[int, ...], kept: int, threads: int) -> int | None:
    """The axis the output is cut along into ``threads`` slabs: the first of its ``kept``
    axes at least two slabs long (slabs of at least 2: numpy orders an iteration without
    its length-1 axes, which may change the order in which it adds; a slab of 2 or more
    keeps the whole's order); None: none is."""
    return next((k for k in range(kept) if shape[k] >= 2 * threads), None)


def reduce_by_layout(strategy: str, reduction: str, y: np.ndarray, axis: tuple[int, ...],
                     threads: int, compiled_tried: bool = False) -> np.ndarray:
    """``y`` reduced over its trailing ``axis`` as ``strategy`` (from
    :func:`plan_by_layout`) says: the array numpy's own call would return.
    ``compiled_tried``: the caller has tried a compiled strategy's runner on ``y``
    (:func:`run_compiled`) and it could not take it: numpy's ways then."""
    if strategy in _COMPILED_TAKES:
        if not compiled_tried:
            done = _reduce_compiled(strategy, reduction, y, len(axis), threads)
            if done is not None:
                return done
        # the runner cannot take it now (not ready; not this array): numpy's ways, as
        # planned without the compiled runners
        strategy = _plan_without_rows(reduction, y.shape, y.dtype, len(axis), threads,
                                      _element_strides(y))
        if strategy == "numpy":
            return getattr(y, reduction)(axis=axis)
    strategy, split = numpy_way(strategy, y.shape, y.strides, len(axis), threads)
    if strategy == "numpy":     # slabs with no axis to cut
        return getattr(np.ndarray, reduction)(y, axis=axis)
    if strategy == "partials":
        return _reduce_in_parts(reduction, y, axis, split, threads)
    kept = y.ndim - len(axis)
    if strategy == "window":
        first = y[(Ellipsis,) + (0,) * len(axis)]
        # (numpy's max of byte-swapped data is native, and a ufunc's dtype must be)
        dtype = y.dtype.newbyteorder("=") if reduction in ("max", "min") else np.add.reduce(
            y[(Ellipsis,) + (slice(0, 1),) * len(axis)], axis=axis).dtype
        out = np.empty_like(first, dtype=dtype)   # numpy's result keeps the kept axes' order
        ufunc = _WINDOW_UFUNCS[reduction]
        count = len(corners := list(np.ndindex(*y.shape[kept:])))

        rows = (reduction in ("sum", "mean") and dtype.kind == "f"
                and sum_order(y.shape, y.strides, len(axis)) == "rows")

        def window(lo: int, hi: int) -> None:
            part = (slice(None),) * split + (slice(lo, hi),) if split is not None else ()
            target = out[part]
            views = [y[(Ellipsis,) + corner][part] for corner in corners]
            if rows:    # numpy's order: each run along the last axis, then the runs
                run = y.shape[-1]
                scratch = np.empty_like(target) if len(views) > run else None
                for start in range(0, len(views), run):
                    into = target if start == 0 else scratch
                    np.add(views[start], views[start + 1], out=into)
                    for view in views[start + 2:start + run]:
                        np.add(into, view, out=into)
                    if start:
                        np.add(target, scratch, out=target)
            else:
                ufunc(views[0], views[1], out=target, dtype=dtype)
                for view in views[2:]:
                    ufunc(target, view, out=target, dtype=dtype)
            if reduction in ("sum", "mean") and dtype.kind == "f":
                np.add(target, 0.0, out=target)             # -0.0 -> 0.0, as numpy's
                if reduction == "mean":
                    np.true_divide(target, count, out=target)
        _in_slabs(window, y.shape[split] if split is not None else 1, threads
                  if split is not None and y.nbytes >= PARALLEL_MIN_BYTES else 1)
        return out
    # slabs (along `split`: numpy_way resolved slabs without an axis to numpy's call):
    # numpy's own call on each part of the output
    method = getattr(np.ndarray, reduction)
    dtype = method(y[(slice(None),) * split + (slice(0, 0),)], axis=axis).dtype
    out = np.empty_like(y[(Ellipsis,) + (0,) * len(axis)], dtype=dtype)

    def slab(lo: int, hi: int) -> None:
        part = (slice(None),) * split + (slice(lo, hi),)
        method(y[part], axis=axis, out=out[part])
    _in_slabs(slab, y.shape[split], threads)
    return out


def _in_slabs(work: Callable[[int, int], None], length: int, threads: int) -> None:
    """``work(lo, hi)`` over ``range(length)`` cut into ``threads`` slabs: the caller's
    thread takes the first, the pool the others; returns when all are done (an error in
    any is raised here)."""
    if threads <= 1 or length < 2:
        work(0, length)
        return
    bounds = [length * k // threads for k in range(threads + 1)]
    # one executor, as wide as the widest call yet (set_num_threads may raise the count:
    # a narrower pool would run the slabs one after another)
    with _pool_lock:
        if not _pool or _pool[0][0] < threads - 1:
            from concurrent.futures import ThreadPoolExecutor   # not at import: a pool
            if _pool:       # (work it was given still runs: shutdown cancels nothing)
                _pool.pop()[1].shutdown(wait=False)
            _pool.append((threads - 1, ThreadPoolExecutor(
                max_workers=threads - 1, thread_name_prefix="rearrange-reduce")))
        executor = _pool[0][1]
        futures = [executor.submit(work, bounds[k], bounds[k + 1]) for k in range(1, threads)]
    work(bounds[0], bounds[1])
    for future in futures:
        future.result()


def _element_strides(y: np.ndarray) -> tuple[int, ...] | None:
    """``y``'s strides in elements; None where one is not a whole number of them."""
    itemsize = y.itemsize
    strides = y.strides
    elements = tuple([stride // itemsize for stride in strides])
    for stride, element in zip(strides, elements):
        if element * itemsize != stride:
            return None
    return elements


_kernel_modules: list = []      # [(builds, rowmax, rowsums)], see _kernel


def _kernel() -> tuple:
    """The kernel's modules the compiled strategies call: ``(builds, rowmax, rowsums)``,
    imported by the first of them, not at ``import rearrange`` (as a function-level
    import would, which costs ~1 us a call: a tenth of a compiled reduction's Python).
    Modules, not values: a test's monkeypatch of their attributes is seen."""
    if not _kernel_modules:
        from .kernel import builds, rowmax, rowsums
        _kernel_modules.append((builds, rowmax, rowsums))
    return _kernel_modules[0]


@record
class RowLayout:
    """A view whose last axis is reduced in rows of ``n`` contiguous elements, the rows
    ``row_stride`` apart, one output each in C order (strides in elements)."""
    n: int
    row_stride: int


def row_layout(shape: tuple[int, ...], strides: tuple[int, ...],
               reduced: int) -> RowLayout | None:
    """The view (``strides`` in elements) as rows (:class:`RowLayout`) for the compiled
    row sums, or None: one reduced axis, at least one kept, the rows contiguous and in
    order (:func:`_contiguous_rows`)."""
    if reduced != 1 or len(shape) < 2 or not _contiguous_rows(shape, strides):
        return None
    moving = [k for k in range(len(shape) - 1) if shape[k] > 1]
    return RowLayout(shape[-1], strides[moving[-1]] if moving else shape[-1])


@record
class CompiledReduction:
    """A compiled strategy of :func:`plan_by_layout` decided for one layout of its input
    (shape, strides, dtype) when a plan is lowered: the runner's family, its layout of
    the view (:class:`RowLayout`, :class:`ColumnLayout`, :class:`RunLayout` or
    :class:`WindowLayout`), and numpy's result for it (``shape``: the kept axes, C
    order; ``dtype``). A call has left to ask only whether the runner is ready, whether
    the array is aligned, and where it is (:func:`run_compiled`). ``parallel``: the
    view holds PARALLEL_MIN_BYTES or more (else one thread)."""
    strategy: str
    reduction: str
    family: str
    layout: Any
    shape: tuple[int, ...]
    dtype: np.dtype
    reduced: int
    parallel: bool


# Each compiled strategy: the reductions and dtypes its runner takes, and its layout of
# a view (None: not one it takes).
_COMPILED_TAKES: dict[str, tuple[tuple[str, ...], Any, Callable[..., Any]]] = {
    "rows": (("sum", "mean"), ROWS_MAX, row_layout),
    "columns": (("sum", "mean"), RUNS_DTYPES, column_layout),
    "runs": (("max", "min"), RUNS_DTYPES, run_layout),
    "pool": (("max", "min"), RUNS_DTYPES, _vector_window_layout),
    "pool-sums": (("sum", "mean"), RUNS_DTYPES, _summed_windows),
}
COMPILED_STRATEGIES = frozenset(_COMPILED_TAKES)


def compiled_reduction(strategy: str, reduction: str, y: np.ndarray,
                       reduced: int) -> CompiledReduction | None:
    """The compiled ``strategy``'s call for arrays laid out as ``y`` (reduced over its
    last ``reduced`` axes), or None where its runner cannot take them: not a compiled
    strategy, a reduction or dtype (native float32/float64) it does not take, an exact
    ndarray it cannot lay out (its strides in elements, every one it reads positive:
    the layout functions), an empty one, or numpy's result not C-ordered."""
    takes = _COMPILED_TAKES.get(strategy)
    if takes is None or not isinstance(reduction, str):
        return None
    reductions, dtypes, describe = takes
    strides = _element_strides(y)
    if (reduction not in reductions or type(y) is not np.ndarray or y.dtype not in dtypes
            or strides is None or y.size == 0 or y.ndim - reduced == 0):
        return None
    layout = describe(y.shape, strides, reduced)
    if layout is None:
        return None
    out = np.empty_like(y[(Ellipsis,) + (0,) * reduced])     # numpy's layout
    if not out.flags.c_contiguous:
        return None
    return CompiledReduction(strategy, reduction, _RUNNERS[strategy], layout, out.shape,
                             y.dtype, reduced, y.nbytes >= PARALLEL_MIN_BYTES)


def run_compiled(call: CompiledReduction, x: np.ndarray, threads: int,
                 view: Callable[[np.ndarray], np.ndarray]) -> np.ndarray | None:
    """``call``'s reduction of ``view(x)`` — an array of the layout ``call`` was made
    for, which starts where ``x`` does — by its runner on ``threads`` threads (one under
    PARALLEL_MIN_BYTES): the array numpy's call would return; None — nothing done —
    when the runner is not ready (:func:`rearrange.kernel.builds.runner_for`: in the
    default mode this asks for it, loaded or compiled out of the caller's way) or ``x``
    is not aligned. Native code reads ``x``'s memory through the layout. Where a
    maximum's zeros have both signs, numpy's choice between them depends on the order
    of its SIMD lanes: the runner counts them, and the result is then numpy's own call
    on ``view(x)``."""
    builds, rowmax, rowsums = _kernel()
    run = builds.runner_for(call.family, call.dtype.itemsize)
    if run is None or not x.flags.aligned:
        return None
    out = np.empty(call.shape, call.dtype)
    source = x.__array_interface__["data"][0]
    if not call.parallel:
        threads = 1
    layout = call.layout
    strategy = call.strategy
    mean = call.reduction == "mean"
    extreme = rowmax.OP_MAX if call.reduction == "max" else rowmax.OP_MIN   # runs, pool
    if strategy == "runs":
        if rowmax.reduce_runs(run, out.reshape(-1), source, extreme, layout.n, layout.count,
                              layout.rstride, layout.ostride, threads):
            y = view(x)         # zeros of both signs: numpy's SIMD order decides
            return getattr(y, call.reduction)(axis=tuple(range(y.ndim - call.reduced,
                                                               y.ndim)))
    elif strategy == "rows":
        rowsums.sum_rows(run, out.reshape(-1), source, layout.row_stride * out.itemsize,
                         layout.n, mean, threads)
    elif strategy == "columns":
        rowmax.sum_columns(run, out.reshape(layout.outer, layout.width), source,
                           layout.rows, layout.width, layout.row_stride,
                           layout.outer_stride, mean, threads)
    else:
        windows = out.reshape(-1, layout.width)
        if strategy == "pool":
            rowmax.reduce_windows(run, windows, source, extreme, layout.width,
                                  layout.outer_stride, layout.rows, layout.row_stride,
                                  layout.cols, threads)
        else:
            rowmax.sum_windows(run, windows, source, mean, layout.width,
                               layout.outer_stride, layout.rows, layout.row_stride,
                               layout.cols, threads)
    return out


def _same(y: np.ndarray) -> np.ndarray:
    return y


def _reduce_compiled(strategy: str, reduction: str, y: np.ndarray, reduced: int,
                     threads: int) -> np.ndarray | None:
    """``y`` reduced over its last ``reduced`` axes by the compiled ``strategy``, its
    layout found now (:func:`compiled_reduction`, then :func:`run_compiled`); None —
    nothing done — where the runner cannot take it now. (Lowered plans find the layout
    once: rearrange/backends/ndarray.py.)"""
    call = compiled_reduction(strategy, reduction, y, reduced)
    return None if call is None else run_compiled(call, y, threads, _same)



def _reduce_in_parts(reduction: str, y: np.ndarray, axis: tuple[int, ...], cut: int,
                     threads: int) -> np.ndarray:
    """``y`` reduced over ``axis`` as numpy's call: parts of ``y`` along the reduced axis
    ``cut``, each reduced by numpy's call on the kernel's thread count (one part a
    thread: :func:`_in_slabs`), the partial results combined in order by
    the reduction's ufunc, into the first one (numpy's result for its part: the same
    dtype and layout as numpy's for the whole)."""
    method = getattr(np.ndarray, reduction)
    partials: dict[int, Any] = {}

    def part(lo: int, hi: int) -> None:
        partials[lo] = method(y[(slice(None),) * cut + (slice(lo, hi),)], axis=axis)
    _in_slabs(part, y.shape[cut], min(threads, y.shape[cut]))   # no empty part
    ufunc = _PARTIAL_UFUNCS[reduction]
    ordered = [partials[lo] for lo in sorted(partials)]
    result = ordered[0]
    for partial in ordered[1:]:
        if isinstance(result, np.ndarray):
            ufunc(result, partial, out=result)
        else:                   # a full reduction: numpy scalars
            result = ufunc(result, partial)
    return result


