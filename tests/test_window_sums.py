"""Sums and means over small windows (average pooling) by the compiled window sums of
rearrange/kernel/rowmax.py (family "window-sums", the "pool-sums" strategy of
rearrange/reductions.py): the views' result (the "window" strategy), which is numpy's
own, bit for bit — signed zeros, NaN and infinities included.

The oracles are numpy's reduction of the same window view and einops on the public path.
Which path ran is read from a spy on the runner's entry (``rowmax.sum_windows``) and
from ``plan_by_layout``.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import rearrange as ra
from rearrange import reductions
from rearrange.kernel import builds, rowmax
from rearrange.reductions import (WindowLayout, describe_strategy, plan_by_layout,
                                  reduce_by_layout)

from test_reduce_runs import _bits_equal, _values

einops = pytest.importorskip("einops")

FLOATS = [np.float32, np.float64]
f4, f8 = np.dtype(np.float32), np.dtype(np.float64)
# (pattern, window rows, window columns): the runner's windows, then one it leaves
PATTERNS = [("b c (h 2) (w 2) -> b c h w", 2, 2), ("b c (h 3) (w 2) -> b c h w", 3, 2),
            ("b c (h 2) w -> b c h w", 2, 1), ("b c h (w 2) -> b c h w", 1, 2),
            ("b c (h 2) (w 3) -> b c h w", 2, 3)]


@pytest.fixture(scope="module")
def runners():
    """The window-sums runners, compiled or loaded here; skipped where numba cannot run."""
    try:
        return {u: builds.build_here((rowmax.WINDOW_SUMS, u)) for u in (4, 8)}
    except Exception as error:      # noqa: BLE001 — numba unavailable here
        pytest.skip(f"no window-sums runner: {error}")


@pytest.fixture
def jit_state():
    """The JIT mode and thread count, restored after the test."""
    before = (ra.get_jit_mode(), ra.get_num_threads())
    yield
    ra.set_jit_mode(before[0])
    ra.set_num_threads(before[1])


def _windows(x: np.ndarray, a: int, b: int) -> np.ndarray:
    """``b c (h a) (w b) -> b c h w``'s view, its window axes last: (b, c, h, w, a, b)."""
    n, c, h, w = x.shape
    return x.reshape(n, c, h // a, a, w // b, b).transpose(0, 1, 2, 4, 3, 5)


def _spy(monkeypatch):
    calls = []
    real = rowmax.sum_windows
    monkeypatch.setattr(rowmax, "sum_windows",
                        lambda *args: (calls.append(args), real(*args))[1])
    return calls


def _strides(y: np.ndarray) -> tuple[int, ...]:
    return tuple(s // y.itemsize for s in y.strides)


def _runner_takes(y: np.ndarray) -> bool:
    """The runner's windows, read from the layout alone: a row's windows its
    consecutive elements, 2 columns added as pairs or 1 column added in turn."""
    layout = reductions.window_layout(y.shape, _strides(y), 2)
    if layout is None or not layout.vectors:
        return False
    order = reductions.sum_order(y.shape, _strides(y), 2)
    return (layout.cols, order) in ((2, "rows"), (1, "flat"))


@st.composite
def pools(draw):
    """An image batch, its window (rows x columns: the runner's 2x2, 3x2, 2x1, 1x2, 4x2
    and the views' 3x3, 2x3, 4x4), its width in windows (the vectors' tail: any),
    values with NaN, infinities and zeros of both signs (or only zeros and negatives:
    sums that are zeros)."""
    dtype = draw(st.sampled_from(FLOATS))
    a, b = draw(st.sampled_from([(2, 2), (3, 2), (2, 1), (1, 2), (4, 2), (3, 3), (2, 3),
                                 (4, 4)]))
    shape = (draw(st.integers(1, 3)), draw(st.integers(1, 4)),
             a * draw(st.integers(1, 6)), b * draw(st.integers(1, 40)))
    return _values(draw, dtype, shape, zeros_only=draw(st.booleans())), a, b


@settings(max_examples=250, deadline=None)
@given(case=pools(), reduction=st.sampled_from(["sum", "mean"]), threads=st.integers(1, 3))
@example(case=(np.array([[[[-0.0, -0.0], [-0.0, -0.0]]]], np.float32), 2, 2),
         reduction="sum", threads=1)
@example(case=(np.array([[[[np.inf, -np.inf], [1.0, 2.0]]]], np.float64), 2, 2),
         reduction="mean", threads=1)
@example(case=(np.array([[[[1e30] * 33 + [np.nan], [-1e30] * 34]]], np.float32), 2, 2),
         reduction="sum", threads=2)
def test_the_pool_sums_strategy_equals_numpy_and_the_views(runners, case, reduction, threads):
    """Forced (whatever the size): the views' result and numpy's, signed zeros and NaN
    positions included, through the runner where it takes the window; the input
    untouched."""
    x, a, b = case
    before = x.copy()
    y = _windows(x, a, b)
    with pytest.MonkeyPatch.context() as monkeypatch:
        calls = _spy(monkeypatch)
        got = reduce_by_layout("pool-sums", reduction, y, (4, 5), threads)
    taken = _runner_takes(y)
    # 3 columns, or images one window wide (a window of 2 columns then one contiguous
    # run, added flat by numpy or by its SIMD lanes; one of 1 column a run of its
    # rows): planned without the runner
    assert taken == (b <= 2 and (x.shape[3] > b or (a, b) == (1, 2)))
    assert len(calls) == taken
    expected = getattr(y, reduction)(axis=(4, 5))
    _bits_equal(got, expected)
    if taken:   # (forced on other layouts, the views need not add in numpy's order)
        _bits_equal(got, reduce_by_layout("window", reduction, y, (4, 5), threads))
    np.testing.assert_array_equal(x, before)


@pytest.mark.parametrize("dtype", FLOATS)
def test_zero_sums_are_positive_and_specials_propagate(runners, dtype):
    """A window of -0.0 sums to +0.0 (numpy's sums start from 0); inf - inf is NaN, a
    NaN anywhere in the window is NaN, infinities stay; a mean of tiny values rounds
    as numpy's division."""
    specials = np.array([-0.0, 0.0, np.inf, -np.inf, np.nan, 1.0, -1.0,
                         np.finfo(dtype).tiny, np.finfo(dtype).max], dtype)
    rng = np.random.default_rng(5)
    x = specials[rng.integers(0, len(specials), (2, 4, 32, 80))]
    x[0, 0, :2, :2] = -0.0
    for a, b in ((2, 2), (3, 2), (2, 1), (1, 2)):
        y = _windows(x[:, :, :32 // a * a], a, b)
        for reduction in ("sum", "mean"):
            with pytest.MonkeyPatch.context() as monkeypatch:
                calls = _spy(monkeypatch)
                got = reduce_by_layout("pool-sums", reduction, y, (4, 5), 2)
            expected = getattr(y, reduction)(axis=(4, 5))
            _bits_equal(got, expected)
            assert len(calls) == (1 if a != 3 else 0)      # (32 rows: 3x2 sliced)
            assert not np.signbit(got[np.asarray(got == 0)]).any()
    assert np.isnan(reduce_by_layout("pool-sums", "sum", _windows(x, 2, 2), (4, 5), 1)).any()


def test_the_paths_taken_once_ready_and_while_off(runners, monkeypatch, jit_state):
    """Through ``reduce``: the runner once ready (1 and 2 threads), the views with the
    kernels off — both numpy's result bit for bit, and einops' values."""
    calls = _spy(monkeypatch)
    rng = np.random.default_rng(4)
    for dtype in FLOATS:
        x = rng.standard_normal((8, 16, 66, 66)).astype(dtype)
        x[2, 3, 4, 5] = np.nan
        x[1, 1, 8:10, 8:10] = -0.0
        x[0, 2, 0, :2] = [np.inf, -np.inf]
        for mode, threads in (("eager", 1), ("eager", 2), ("off", 2)):
            ra.set_jit_mode(mode)
            ra.set_num_threads(threads)
            calls.clear()
            for pattern, a, b in PATTERNS:
                for reduction in ("sum", "mean"):
                    got = ra.reduce(x, pattern, reduction)
                    _bits_equal(got, getattr(_windows(x, a, b), reduction)(axis=(4, 5)))
                    np.testing.assert_array_equal(got, einops.reduce(x, pattern, reduction))
            assert len(calls) == (8 if mode == "eager" else 0), (mode, threads)
            given = threads if x.nbytes >= reductions.PARALLEL_MIN_BYTES else 1
            assert all(args[-1] == given for args in calls), (dtype, x.nbytes)


def test_both_sides_of_the_size_threshold(runners, monkeypatch, jit_state):
    """Below POOL_MIN_BYTES the views, from it the runner; at one thread below
    PARALLEL_MIN_BYTES, at the kernel's count from it: each numpy's result."""
    calls = _spy(monkeypatch)
    ra.set_jit_mode("eager")
    ra.set_num_threads(2)
    rows = reductions.POOL_MIN_BYTES // (4 * 64 * 2)        # images of 64 x 2 rows of floats
    cases = [((rows - 2, 1, 2, 64), 0), ((rows, 1, 2, 64), 1), ((rows * 16, 1, 2, 64), 2)]
    for shape, runs in cases:
        x = np.random.default_rng(9).random(shape, dtype=np.float32)
        for reduction in ("sum", "mean"):
            calls.clear()
            got = ra.reduce(x, "b c (h 2) (w 2) -> b c h w", reduction)
            _bits_equal(got, getattr(_windows(x, 2, 2), reduction)(axis=(4, 5)))
            assert len(calls) == (runs > 0), (shape, reduction)
            if runs:
                assert calls[0][-1] == runs     # the threads it was given


@pytest.mark.parametrize("dtype", [np.float16, np.int32, np.int8, ">f4", ">f8"])
def test_other_dtypes_keep_their_way(runners, monkeypatch, jit_state, dtype):
    """float16, integers and byte-swapped floats: never the runner; numpy's result."""
    calls = _spy(monkeypatch)
    ra.set_jit_mode("eager")
    x = (np.random.default_rng(2).random((4, 16, 64, 64)) * 50).astype(dtype)
    for reduction in ("sum", "mean"):
        got = ra.reduce(x, "b c (h 2) (w 2) -> b c h w", reduction)
        expected = getattr(_windows(x, 2, 2), reduction)(axis=(4, 5))
        assert got.dtype == expected.dtype
        np.testing.assert_array_equal(got, expected)
        y = _windows(x, 2, 2)
        assert plan_by_layout(reduction, y.shape, y.dtype, 2, 2, _strides(y)) != "pool-sums"
    assert calls == []


def test_arrays_the_runner_cannot_take_keep_the_views(runners, monkeypatch):
    """A subclass, unaligned or byte-swapped data, reversed or sliced windows, a
    strided image: the views (never the runner); each numpy's result, inputs
    untouched. A sliced image whose rows still make one run, at an offset: the
    runner."""
    calls = _spy(monkeypatch)

    class Sub(np.ndarray):
        pass
    x = np.random.default_rng(6).standard_normal((4, 8, 32, 32)).astype(np.float32)
    raw = np.zeros(x.nbytes + 1, np.uint8)[1:].view(np.float32).reshape(x.shape)
    raw[...] = x
    for y in (x.view(Sub), raw, x.astype(">f4"), x[:, :, ::-1], x[:, :, :, ::-1],
              x[:, ::-1]):
        before = np.array(y)
        windows = _windows(np.asarray(y), 2, 2)
        if type(y) is Sub:
            windows = windows.view(Sub)
        got = reduce_by_layout("pool-sums", "sum", windows, (4, 5), 2)
        _bits_equal(np.asarray(got), np.asarray(windows).sum(axis=(4, 5)))
        np.testing.assert_array_equal(y, before)
    assert calls == []
    for reduction in ("sum", "mean"):
        sliced = x[:, :, :, 1:31]            # rows that do not follow each other: the runner
        before = sliced.copy()
        got = reduce_by_layout("pool-sums", reduction, _windows(sliced, 2, 2), (4, 5), 2)
        _bits_equal(got, getattr(_windows(sliced, 2, 2), reduction)(axis=(4, 5)))
        np.testing.assert_array_equal(sliced, before)
    assert len(calls) == 2


def test_a_runner_not_ready_leaves_the_views(runners, monkeypatch, jit_state):
    """While builds has no runner to give (compiling, loading: runner_for says None),
    the call plans "pool-sums", runs the views, and gives numpy's result."""
    calls = _spy(monkeypatch)
    ra.set_jit_mode("eager")
    real = builds.runner_for
    monkeypatch.setattr(builds, "runner_for", lambda family, unit: None
                        if family == rowmax.WINDOW_SUMS else real(family, unit))
    x = np.random.default_rng(7).random((4, 32, 64, 64))
    for reduction in ("sum", "mean"):
        got = ra.reduce(x, "b c (h 2) (w 2) -> b c h w", reduction)
        _bits_equal(got, getattr(_windows(x, 2, 2), reduction)(axis=(4, 5)))
    assert calls == []
    monkeypatch.setattr(builds, "runner_for", real)
    ra.reduce(x, "b c (h 2) (w 2) -> b c h w", "mean")
    assert len(calls) == 1


def test_mixed_calls_keep_every_result_numpys(runners, monkeypatch, jit_state):
    """Calls that mix dtypes, windows, reductions, thread counts and layouts, caches
    never cleared: each result numpy's, the runner where its layout is."""
    calls = _spy(monkeypatch)
    ra.set_jit_mode("eager")
    rng = np.random.default_rng(11)
    images = {dtype: rng.standard_normal((4, 16, 48, 66)).astype(dtype)
              for dtype in (np.float32, np.float64, np.float16)}
    for step in range(60):
        dtype = [np.float32, np.float64, np.float16][rng.integers(0, 3)]
        pattern, a, b = PATTERNS[rng.integers(0, len(PATTERNS))]
        reduction = ["sum", "mean", "max"][rng.integers(0, 3)]
        x = images[dtype]
        if rng.integers(0, 3) == 0:
            x = x[:, :, :, 2:2 + 60 // b * b]          # an offset, sliced image
        ra.set_num_threads(int(rng.integers(1, 3)))
        calls.clear()
        got = ra.reduce(x, pattern, reduction)
        y = _windows(x, a, b)
        _bits_equal(got, getattr(y, reduction)(axis=(4, 5)))
        assert len(calls) == (reduction != "max" and dtype != np.float16 and b <= 2
                              and x.nbytes >= reductions.POOL_MIN_BYTES), step


def test_the_layouts_the_runner_takes():
    # "b c (h 2) (w 2) -> b c h w" on (32, 64, 112, 112): pairs, then the rows
    pool = ((32, 64, 56, 56, 2, 2), (802816, 12544, 224, 2, 112, 1), 2)
    assert reductions._summed_windows(*pool) == WindowLayout(32 * 64 * 56, 224, 56, 2, 2,
                                                             112, 2, 1)
    # 2x1: one column, added in turn (numpy's flat order); 1x2: a pair
    assert reductions._summed_windows((4, 56, 112, 2), (12544, 224, 1, 112), 1).cols == 1
    assert reductions._summed_windows((4, 112, 56, 2), (12544, 112, 2, 1), 1).cols == 2
    # 3x3: a layout, not the runner's; a window that is one contiguous run of 4 (images
    # one window wide): numpy adds it flat, a0 + a1 + a2 + a3, not by pairs
    assert reductions._summed_windows((4, 10, 10, 3, 3), (900, 90, 3, 30, 1), 2) is None
    assert reductions.sum_order((40, 1, 2, 2), (4, 4, 2, 1), 2) == "flat"
    assert reductions.window_layout((40, 1, 2, 2), (4, 4, 2, 1), 2).vectors
    assert reductions._summed_windows((40, 1, 2, 2), (4, 4, 2, 1), 2) is None
    assert reductions._summed_windows((4, 10, 10, 2, 2), (400, 40, -2, 20, 1), 2) is None


def test_the_choice_on_both_sides_of_each_threshold():
    strides = (802816, 12544, 224, 2, 112, 1)
    shape = (32, 64, 56, 56, 2, 2)
    for reduction in ("sum", "mean"):
        assert plan_by_layout(reduction, shape, f4, 2, 2, strides) == "pool-sums"
        assert plan_by_layout(reduction, shape, f8, 2, 1, strides) == "pool-sums"
        assert plan_by_layout(reduction, shape, f4, 2, 2) != "pool-sums"     # no strides
    for reduction in ("max", "min", "prod"):
        assert plan_by_layout(reduction, shape, f4, 2, 2, strides) != "pool-sums"
    # the smallest input: POOL_MIN_BYTES
    rows = -(-reductions.POOL_MIN_BYTES // (4 * 4 * 56))
    small = ((rows, 56, 2, 2), (224, 2, 112, 1))
    assert plan_by_layout("sum", *small[:1], f4, 2, 2, small[1]) == "pool-sums"
    assert plan_by_layout("sum", (rows - 1,) + small[0][1:], f4, 2, 2, small[1]) == "window"
    # the largest window: WINDOW_MAX elements (rows of 2)
    tall = reductions.WINDOW_MAX // 2
    assert plan_by_layout("mean", (1024, 56, tall, 2), f4, 2, 2,
                          (56 * 2 * tall, 2, 112, 1)) == "pool-sums"
    assert plan_by_layout("mean", (1024, 56, tall + 1, 2), f4, 2, 2,
                          (56 * 2 * (tall + 1), 2, 112, 1)) != "pool-sums"
    # only where the views would run: fewer outputs than WINDOW_MIN_OUTPUT (a tall
    # window of float64 from POOL_MIN_BYTES) stays numpy's call
    few = reductions.WINDOW_MIN_OUTPUT - 56
    assert plan_by_layout("sum", (few // 56, 56, 8, 2), f8, 2, 1,
                          (56 * 16, 2, 112, 1)) == "numpy"
    # windows of 3 columns (3x3, 2x3): the views, at any thread count
    three = ((2048, 56, 3, 3), (56 * 9, 3, 168, 1))
    for threads in (1, 2):
        assert plan_by_layout("sum", three[0], f4, 2, threads, three[1]) == "window"
    # 2x1 and 1x2 windows: the runner
    assert plan_by_layout("sum", (512, 112, 2), f4, 1, 1, (224, 1, 112)) == "pool-sums"
    assert plan_by_layout("mean", (1024, 56, 2), f4, 1, 1, (112, 2, 1)) == "pool-sums"


def test_explain_names_the_runner_and_what_runs_until_it_is_ready(jit_state):
    """describe_strategy: the window-sums runner from POOL_MIN_BYTES at 1 and 2
    threads, the views below; with the JIT off, the views and why."""
    strides = (802816, 12544, 224, 2, 112, 1)
    shape = (32, 64, 56, 56, 2, 2)
    ra.set_jit_mode("eager")
    for threads in (1, 2):
        words = describe_strategy("mean", shape, f4, 2, threads, strides)
        assert words.startswith("the compiled window-sums runner")
        assert f"on {threads} thread" in words
        assert "until it is compiled, numpy.add of the window's 4 strided views" in words
    rows = reductions.POOL_MIN_BYTES // (4 * 4 * 56) - 1      # (below POOL_MIN_BYTES)
    small = describe_strategy("sum", (rows, 56, 2, 2), f4, 2, 2, (224, 2, 112, 1))
    assert small.startswith("numpy.add of the window's 4 strided views")
    ra.set_jit_mode("off")
    reason = ra.explain((32, 64, 112, 112), "b c (h 2) (w 2) -> b c h w", op="reduce",
                        reduction="mean", dtype="float32").steps[-1].reason
    assert "REARRANGE_JIT is off" in reason and "strided views" in reason
    assert "window-sums" in reason and "until it is compiled" not in reason


def test_background_mode_pools_with_the_views_until_the_runner_is_ready(tmp_path):
    """A fresh process, REARRANGE_JIT unset (background) and an empty cache: the first
    average pooling is the views' (the caller's thread never compiles nor imports
    numba), the runner is compiled out of the way, and once ready the result is its,
    bit for bit."""
    build_tests = pytest.importorskip("test_jit_builds")
    report = build_tests.run("""
        from rearrange.kernel import rowmax
        ra.set_num_threads(2)
        x = np.random.default_rng(8).standard_normal((8, 32, 64, 64)).astype(np.float32)
        windows = x.reshape(8, 32, 32, 2, 32, 2).transpose(0, 1, 2, 4, 3, 5)
        pattern = "b c (h 2) (w 2) -> b c h w"
        expected = windows.mean(axis=(4, 5)).tobytes()
        first = ra.reduce(x, pattern, "mean").tobytes() == expected
        numba_in_call = "numba" in sys.modules
        status = [builds.status(rowmax.WINDOW_SUMS, 4)]
        assert K.wait(600)
        status.append(builds.status(rowmax.WINDOW_SUMS, 4))
        ran = []
        real = rowmax.sum_windows
        rowmax.sum_windows = lambda *a: (ran.append("sum_windows"), real(*a))[1]
        later = ra.reduce(x, pattern, "mean").tobytes() == expected
        print(json.dumps({"exact": [first, later], "numba_in_call": numba_in_call,
                          "status": status, "ran": ran}))
    """, tmp_path / "cache")
    assert report == {"exact": [True, True], "numba_in_call": False,
                      "status": ["compiling", "ready"], "ran": ["sum_windows"]}


def test_jit_off_in_a_fresh_process_pools_with_the_views(tmp_path):
    """``REARRANGE_JIT=off``: average pooling is the views' (numpy's bits), no runner is
    asked for, numba is never imported, and explain says why."""
    build_tests = pytest.importorskip("test_jit_builds")
    report = build_tests.run("""
        from rearrange.kernel import rowmax
        ra.set_num_threads(2)
        ran = []
        real = rowmax.sum_windows
        rowmax.sum_windows = lambda *a: (ran.append("sum_windows"), real(*a))[1]
        x = np.random.default_rng(8).standard_normal((8, 32, 64, 64))
        windows = x.reshape(8, 32, 32, 2, 32, 2).transpose(0, 1, 2, 4, 3, 5)
        exact = [ra.reduce(x, "b c (h 2) (w 2) -> b c h w", r).tobytes()
                 == getattr(windows, r)(axis=(4, 5)).tobytes() for r in ("sum", "mean")]
        reason = ra.explain(x, "b c (h 2) (w 2) -> b c h w", op="reduce",
                            reduction="mean").steps[-1].reason
        print(json.dumps({"exact": exact, "ran": ran, "numba": "numba" in sys.modules,
                          "off": "REARRANGE_JIT is off" in reason}))
    """, tmp_path / "cache", mode="off")
    assert report["exact"] == [True, True] and report["ran"] == []
    assert not report["numba"] and report["off"], report


def test_runner_family():
    with pytest.raises(ValueError, match="2-byte units"):
        rowmax.runner(2, rowmax.WINDOW_SUMS)
    out = np.empty((2, 3), np.float32)
    with pytest.raises(ValueError, match="3 columns"):
        rowmax.sum_windows(None, out, 0, False, 3, 9, 1, 0, 3, 1)
