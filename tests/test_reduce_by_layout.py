"""Reductions planned by layout (rearrange/reductions.py: windows as views, slabs in
threads) give exactly what numpy's own call gives: values, dtype and strides.

The oracle is numpy's reduction of the same view (and einops on the public path); the
strategies are tested directly on random layouts (forced, whatever the size) and through
``reduce`` on both sides of every threshold.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rearrange as ra
from rearrange import reductions
from rearrange.reductions import plan_by_layout, reduce_by_layout

einops = pytest.importorskip("einops")

DTYPES = [np.bool_, np.int8, np.uint16, np.int64, np.float32, np.float64]


def _same(got: np.ndarray, expected: np.ndarray) -> None:
    assert got.dtype == expected.dtype
    assert got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)     # NaN equals NaN here
    if got.size > 1:    # (a stride of a length-1 axis means nothing: numpy's vary)
        assert ([s for s, n in zip(got.strides, got.shape) if n > 1]
                == [s for s, n in zip(expected.strides, expected.shape) if n > 1])


@st.composite
def views(draw):
    """A view whose last 1-2 axes are reduced: any dtype, sliced, reversed, permuted."""
    ndim = draw(st.integers(2, 4))
    shape = tuple(draw(st.integers(1, 6)) for _ in range(ndim))
    dtype = draw(st.sampled_from(DTYPES))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    base = (rng.random(tuple(n * 2 for n in shape)) * 20 - 10).astype(dtype)
    if dtype in (np.float32, np.float64) and draw(st.booleans()):
        base.flat[draw(st.integers(0, base.size - 1))] = np.nan
    steps = tuple(draw(st.sampled_from([1, 2, -1, -2])) for _ in range(ndim))
    view = base[tuple(slice(None, None, s) if s > 0 else slice(None, None, s)
                      for s in steps)]
    view = view[tuple(slice(0, n) for n in shape)]
    order = draw(st.permutations(range(ndim)))
    reduced = draw(st.integers(1, min(2, ndim - 1)))
    return view.transpose(order), reduced


@settings(max_examples=300, deadline=None)
@given(case=views(), reduction=st.sampled_from(["max", "min", "sum", "mean", "prod",
                                                   "any", "all"]),
       threads=st.integers(1, 3))
def test_forced_strategies_equal_numpy(case, reduction, threads):
    y, reduced = case
    axis = tuple(range(y.ndim - reduced, y.ndim))
    expected = getattr(y, reduction)(axis=axis)
    exact = reductions._window_exact(reduction, y.dtype, y.shape, y.strides, reduced)
    if (reduction in reductions._WINDOW_UFUNCS and exact
            and math.prod(y.shape[-reduced:]) > 1):
        _same(reduce_by_layout("window", reduction, y, axis, threads), expected)
    _same(reduce_by_layout("slabs", reduction, y, axis, max(threads, 2)), expected)


def test_the_choice_on_both_sides_of_each_threshold():
    f4 = np.dtype(np.float32)
    big = reductions.WINDOW_MIN_OUTPUT
    assert plan_by_layout("max", (big, 2, 2), f4, 2, 1) == "window"
    assert plan_by_layout("max", (big - 1, 2, 2), f4, 2, 1) == "numpy"
    assert plan_by_layout("max", (big, 4, 4), f4, 2, 1) == "window"       # 16 elements
    assert plan_by_layout("max", (big, 17), f4, 1, 1) == "numpy"
    assert plan_by_layout("sum", (big, 2, 2), f4, 2, 1) == "numpy"        # order unknown
    assert plan_by_layout("sum", (big, 2, 2), f4, 2, 1, (8, 4, 1)) == "numpy"  # a block
    assert plan_by_layout("sum", (64, 64, 2, 2), f4, 2, 1, (512, 2, 128, 1)) == "window"
    assert plan_by_layout("sum", (big, 2, 2), f4, 2, 1, (4, 2, 1)) == "window"  # one run
    assert plan_by_layout("sum", (big, 4, 4), f4, 2, 1, (16, 4, 1)) == "numpy"  # 16 in a run
    assert plan_by_layout("sum", (big, 2, 8), f4, 2, 1, (32, 16, 1)) == "numpy"  # run of 8
    assert plan_by_layout("sum", (big, 2, 2), f4, 2, 1, (1, 8 * big, 4 * big)) == "window"
    assert plan_by_layout("mean", (big, 2, 2), f4, 2, 1, (4, 1, 2)) == "numpy"
    assert plan_by_layout("mean", (big, 2, 2), f4, 2, 1, (4, -2, 1)) == "numpy"
    assert plan_by_layout("sum", (big, 2, 2), np.dtype(np.int8), 2, 1) == "window"
    assert plan_by_layout("mean", (big, 2, 2), np.dtype(np.int8), 2, 1, (4, 2, 1)) == "numpy"
    # (contiguous float rows are summed by the compiled row sums: tests/test_reduce_rows.py;
    # products, and sums in float16, run in slabs)
    rows = reductions.PARALLEL_MIN_BYTES // 4 // 64
    assert plan_by_layout("sum", (rows, 64), f4, 1, 2, (64, 1)) == "rows"
    assert plan_by_layout("prod", (rows, 64), f4, 1, 2, (64, 1)) == "slabs"
    assert plan_by_layout("prod", (rows - 1, 64), f4, 1, 2, (64, 1)) == "numpy"
    assert plan_by_layout("prod", (rows, 64), f4, 1, 1, (64, 1)) == "numpy"
    assert plan_by_layout("sum", (2 * rows, 64), np.dtype(np.float16), 1, 2, (64, 1)) == "numpy"
    assert plan_by_layout("var", (rows, 64), f4, 1, 2, (64, 1)) == "numpy"
    long_rows = reductions.PARALLEL_MIN_BYTES // 4 // 127 + 1
    assert plan_by_layout("prod", (long_rows, 127), f4, 1, 2, (127, 1)) == "slabs"
    assert plan_by_layout("prod", (long_rows, 128), f4, 1, 2, (128, 1)) == "slabs"
    long_rows = reductions.PARALLEL_MIN_BYTES // 8 // 4096 + 1
    assert plan_by_layout("sum", (long_rows, 4096), np.dtype(np.float64), 1, 2,
                          (4096, 1)) == "slabs"                         # long rows
    assert plan_by_layout("sum", (64, rows), f4, 1, 2, (1, 64)) == "numpy"  # cut: the inner
    # a mean over channels, (b, c, h, w) viewed as (b, h, w, c): the inner axis w is kept,
    # the cut is along b
    # (float32/float64: the compiled column sums, tests/test_reduce_runs.py; others: slabs)
    assert plan_by_layout("mean", (rows // 64, 8, 8, 64), f4, 1, 2, (4096, 8, 1, 64)) == "columns"
    assert plan_by_layout("mean", (rows // 64, 8, 8, 64), np.dtype(np.int32), 1, 2,
                          (4096, 8, 1, 64)) == "slabs"
    # the same bytes with b the innermost axis (the input (c, h, w, b)): a cut along b
    # would cut it
    assert plan_by_layout("mean", (rows // 64, 8, 8, 64), f4, 1, 2,
                          (1, 8 * rows // 64, rows // 64, 64 * rows // 64)) == "numpy"
    assert plan_by_layout(np.max, (big, 2, 2), f4, 2, 1) == "numpy"       # callables: theirs
    assert plan_by_layout("max", (big, 2, 2), np.dtype(object), 2, 1) == "numpy"


POOLS = [
    # (shape, pattern): both sides of the window's output threshold and size
    ((1, 4, 64, 64), "b c (h 2) (w 2) -> b c h w"),        # 4096 outputs: window
    ((1, 4, 62, 64), "b c (h 2) (w 2) -> b c h w"),        # 3968 outputs: numpy's
    ((4, 16, 64, 64), "b c (h 2) (w 2) -> b c h w"),       # 1 MiB: the compiled pools
    ((2, 8, 64, 64), "b c (h 4) (w 4) -> b c h w"),        # 16 elements: window
    ((2, 3, 90, 90), "b c (h 3) (w 6) -> b c h w"),        # 18 elements: numpy's
    ((4, 64, 32, 32), "b c h w -> b h w"),                 # 262144 bytes: one thread
    ((16, 64, 64, 32), "b c h w -> b h w"),                # 8 MiB: slabs
    ((16, 64, 64, 32), "b c h w -> c"),                    # slabs over c
    ((16, 64, 64, 32), "b c h w -> b c h"),                # the contiguous axis
]


@pytest.mark.parametrize("shape, pattern", POOLS)
@pytest.mark.parametrize("reduction", ["max", "min", "sum", "mean"])
@pytest.mark.parametrize("dtype", [np.float32, np.int16])
def test_reduce_equals_einops_on_both_sides(shape, pattern, reduction, dtype):
    rng = np.random.default_rng(1)
    x = (rng.random(shape) * 100).astype(dtype)
    before = x.copy()
    for source in (x, x[:, ::-1], np.swapaxes(x, 0, 1).copy().swapaxes(0, 1)):
        got = ra.reduce(source, pattern, reduction)
        # einops' steps with numpy's own reduction (einops refuses an integer mean)
        _same(got, einops.reduce(source, pattern,
                                 lambda t, axes: getattr(t, reduction)(axis=axes)))
    np.testing.assert_array_equal(x, before)


def test_window_sums_of_negative_zeros_and_bools():
    x = np.full((1, 2, 128, 128), -0.0, np.float32)
    for reduction in ("sum", "mean"):
        got = ra.reduce(x, "b c (h 2) (w 2) -> b c h w", reduction)
        assert not np.signbit(got).any()            # numpy's sums start from +0.0
    flags = np.ones((1, 2, 128, 128), bool)
    _same(ra.reduce(flags, "b c (h 2) (w 2) -> b c h w", "sum"),
          flags.reshape(1, 2, 64, 2, 64, 2).sum(axis=(3, 5)))
    small = np.full((1, 2, 128, 128), 100, np.int8)
    _same(ra.reduce(small, "b c (h 2) (w 2) -> b c h w", "sum"),
          small.reshape(1, 2, 64, 2, 64, 2).sum(axis=(3, 5)))


def test_nan_propagates_through_a_window():
    x = np.zeros((1, 2, 128, 128), np.float32)
    x[0, 1, 5, 7] = np.nan
    got = ra.reduce(x, "b c (h 2) (w 2) -> b c h w", "max")
    _same(got, einops.reduce(x, "b c (h 2) (w 2) -> b c h w", "max"))
    assert np.isnan(got[0, 1, 2, 3]) and np.isnan(got).sum() == 1


def test_a_pattern_across_dtypes_and_thread_counts_keeps_its_results():
    """One pattern, caches never cleared: dtypes, layouts and thread counts mixed."""
    pattern = "b c (h 2) (w 2) -> b c h w"
    rng = np.random.default_rng(2)
    threads = ra.get_num_threads() if hasattr(ra, "get_num_threads") else None
    from rearrange import kernel
    original = kernel.get_num_threads()
    try:
        for n in (1, 2, 3, 2, 1):
            kernel.set_num_threads(n)
            for dtype in (np.float64, np.uint8, np.float32, np.bool_):
                x = (rng.random((2, 4, 96, 96)) * 9).astype(dtype)
                for source in (x, x[..., ::-1, :], x.transpose(0, 1, 3, 2)):
                    _same(ra.reduce(source, pattern, "max"),
                          einops.reduce(source, pattern, "max"))
                    _same(ra.reduce(source, "b c h w -> b h w", "sum"),
                          einops.reduce(source, "b c h w -> b h w", "sum"))
    finally:
        kernel.set_num_threads(original)
    del threads


@pytest.mark.parametrize("shape, order, reduced", [
    ((6, 20000), (0, 1), 1),              # a reduced run longer than numpy's buffer
    ((8, 300, 70), (0, 1, 2), 2),         # two reduced axes that coalesce
    ((8, 300, 70), (2, 0, 1), 1),         # the reduced axis strided, kept ones inner
    ((5, 9, 130, 3), (1, 3, 0, 2), 2),
])
@pytest.mark.parametrize("reduction", ["sum", "mean", "prod"])
@pytest.mark.parametrize("threads", [2, 3])
def test_slabs_add_in_numpys_order(shape, order, reduced, reduction, threads):
    x = np.random.default_rng(3).random(shape, dtype=np.float32).transpose(order) + 0.5
    axis = tuple(range(x.ndim - reduced, x.ndim))
    _same(reduce_by_layout("slabs", reduction, x, axis, threads),
          getattr(x, reduction)(axis=axis))


def test_slabs_widen_their_pool_with_the_thread_count():
    """The executor is made for the first call's thread count; a later, larger count
    gets a wider one (a narrower pool would run the slabs one after another)."""
    x = np.random.default_rng(4).random((12, 40), dtype=np.float32)
    for threads in (2, 4, 3):
        _same(reduce_by_layout("slabs", "sum", x, (1,), threads), x.sum(axis=1))
        assert reductions._pool[0][0] >= threads - 1
    assert reductions._pool[0][0] >= 3


_WORDS = {"numpy": ("in one call",), "window": ("strided views",),
          "partials": ("parts of the input",), "slabs": ("slabs of the output", "in one call"),
          "rows": ("compiled row-sums runner",), "columns": ("compiled column-sums runner",),
          "runs": ("compiled row-max runner",), "pool": ("compiled window-max runner",),
          "pool-sums": ("compiled window-sums runner",)}


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("reduction", ["max", "sum", "mean", "prod", "any"])
def test_explain_says_how_the_reduction_runs(threads, reduction, monkeypatch):
    """explain's reduce step names the strategy the call then runs (a spy on the
    runner's choice), on both sides of the thresholds, at one and two threads."""
    from rearrange import kernel
    from rearrange.backends import ndarray

    chosen: list[str] = []
    real = ndarray.reduce_by_layout

    def spy(strategy, *args, **kwargs):
        chosen.append(strategy)
        return real(strategy, *args, **kwargs)

    real_compiled = ndarray.run_compiled

    def spy_compiled(call, *args, **kwargs):      # a compiled strategy, its layout lowered
        chosen.append(call.strategy)
        return real_compiled(call, *args, **kwargs)

    monkeypatch.setattr(ndarray, "reduce_by_layout", spy)
    monkeypatch.setattr(ndarray, "run_compiled", spy_compiled)
    before = kernel.get_num_threads()
    kernel.set_num_threads(threads)
    try:
        seen = set()
        for shape, pattern in POOLS + [((64, 64, 32, 32), "b c h w -> c")]:
            x = np.ones(shape, np.float32)
            ra.cache_clear()
            chosen.clear()
            ra.reduce(x, pattern, reduction)
            strategy = chosen[0] if chosen else "numpy"
            seen.add(strategy)
            reason = next(step for step in ra.explain(x, pattern, op="reduce",
                                                      reduction=reduction).steps
                          if step.op == "reduce").reason
            assert any(words in reason for words in _WORDS[strategy]), (strategy, reason)
            if strategy in ("rows", "columns", "runs", "pool", "pool-sums"):
                assert "until it is compiled" in reason
        if threads == 2 or reduction in ("max", "sum", "mean"):
            assert len(seen) >= 2       # the cases straddle the thresholds
    finally:
        kernel.set_num_threads(before)


def test_explain_of_a_compiled_reduction_with_the_jit_off(monkeypatch):
    """With REARRANGE_JIT=off no runner is ever compiled: explain names numpy's way
    (what then runs) and says why, not a runner that will never come."""
    from rearrange.kernel import modes

    before = modes.get_jit_mode()
    modes.set_jit_mode("off")
    try:
        reason = ra.explain((32, 64, 112, 112), "b c (h 2) (w 2) -> b c h w", op="reduce",
                            reduction="max", dtype="float32").steps[-1].reason
    finally:
        modes.set_jit_mode(before)
    assert "REARRANGE_JIT is off" in reason and "strided views" in reason
    assert "until it is compiled" not in reason
