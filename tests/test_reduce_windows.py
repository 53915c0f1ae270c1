"""Maxima and minima over small windows (pooling) by the compiled window runner of
rearrange/kernel/rowmax.py (family "window-max", the "pool" strategy of
rearrange/reductions.py): numpy's own results, bit for bit, signed zeros included.

The oracle is numpy's reduction of the same window view (einops on the public path).
Which path ran is read from a spy on the runner's entry (``rowmax.reduce_windows``) and
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
from rearrange.reductions import WindowLayout, plan_by_layout, reduce_by_layout, window_layout

from test_reduce_runs import _bits_equal, _values

einops = pytest.importorskip("einops")

FLOATS = [np.float32, np.float64]
f4, f8 = np.dtype(np.float32), np.dtype(np.float64)


@pytest.fixture(scope="module")
def runners():
    """The window-max runners, compiled or loaded here; skipped where numba cannot run."""
    try:
        return {u: builds.build_here((rowmax.WINDOWS, u)) for u in (4, 8)}
    except Exception as error:      # noqa: BLE001 — numba unavailable here
        pytest.skip(f"no window-max runner: {error}")


def _windows(x: np.ndarray, a: int, b: int) -> np.ndarray:
    """``b c (h a) (w b) -> b c h w``'s view, its window axes last: (b, c, h, w, a, b)."""
    n, c, h, w = x.shape
    return x.reshape(n, c, h // a, a, w // b, b).transpose(0, 1, 2, 4, 3, 5)


def _spy(monkeypatch):
    calls = []
    real = rowmax.reduce_windows
    monkeypatch.setattr(rowmax, "reduce_windows",
                        lambda *args: (calls.append(args), real(*args))[1])
    return calls


@st.composite
def pools(draw):
    """An image batch, its window (rows x columns, 2x2 to 4x4 and 1-column / 1-row ones),
    its width in windows (the vectors' tail: any), values with NaN, infinities and
    zeros of both signs (or only zeros and negatives: extremes that are zeros)."""
    dtype = draw(st.sampled_from(FLOATS))
    a, b = draw(st.sampled_from([(2, 2), (3, 3), (2, 1), (1, 2), (4, 4), (2, 3), (3, 2)]))
    shape = (draw(st.integers(1, 3)), draw(st.integers(1, 4)),
             a * draw(st.integers(1, 6)), b * draw(st.integers(1, 40)))
    return _values(draw, dtype, shape, zeros_only=draw(st.booleans())), a, b


@settings(max_examples=250, deadline=None)
@given(case=pools(), op=st.sampled_from(["max", "min"]), threads=st.integers(1, 3))
@example(case=(np.array([[[[-0.0, 0.0], [0.0, -0.0]]]], np.float32), 2, 2), op="max",
         threads=1)
@example(case=(np.array([[[[0.0, -0.0], [-1.0, -0.0]]]], np.float64), 2, 2), op="min",
         threads=1)
@example(case=(np.array([[[[1.0] * 33 + [np.nan], [2.0] * 34]]], np.float32), 2, 2),
         op="max", threads=2)
def test_the_pool_strategy_equals_numpy(runners, case, op, threads):
    """Forced (whatever the size): numpy's values, signed zeros and NaN positions
    included, through the runner; the input untouched."""
    x, a, b = case
    before = x.copy()
    y = _windows(x, a, b)
    with pytest.MonkeyPatch.context() as monkeypatch:
        calls = _spy(monkeypatch)
        got = reduce_by_layout("pool", op, y, (4, 5), threads)
    layout = window_layout(y.shape, tuple(s // y.itemsize for s in y.strides), 2)
    taken = layout is not None and layout.vectors
    assert taken == (b <= 2 and (a * b < 8 or x.shape[3] > b))
    assert len(calls) == taken
    if taken:
        _bits_equal(got, getattr(y, op)(axis=(4, 5)))
    else:       # 3 or more columns, or a window that is one contiguous run of 8 or
        # more (images one window wide): planned without the runner
        np.testing.assert_array_equal(got, getattr(y, op)(axis=(4, 5)))
    np.testing.assert_array_equal(x, before)


def test_the_later_of_equal_zeros_is_numpys_in_every_window_order(runners):
    """numpy keeps the later of two equal values in its loop over a short window: the
    runner's order (window rows, then columns) gives its sign wherever zeros tie."""
    rng = np.random.default_rng(3)
    for dtype in FLOATS:
        for a, b in ((2, 2), (3, 2), (2, 1), (1, 2), (4, 2)):
            x = np.array([0.0, -0.0, -1.0, 1.0], dtype)[rng.integers(0, 4, (2, 3, 8 * a, 37 * b))]
            y = _windows(x, a, b)
            for op in ("max", "min"):
                expected = getattr(y, op)(axis=(4, 5))
                got = reduce_by_layout("pool", op, y, (4, 5), 2)
                _bits_equal(got, expected)
                assert np.signbit(expected[expected == 0]).any()    # ties of both signs


def test_the_paths_taken_once_ready_and_while_off(runners, monkeypatch):
    """Through ``reduce``: the runner once ready; with kernels off the views — both
    numpy's result, bit for bit, and einops' values."""
    calls = _spy(monkeypatch)
    x = np.random.default_rng(4).random((8, 32, 64, 66), dtype=np.float32)
    x[2, 3, 4, 5] = np.nan
    x[1, 1, 8:10, 8:10] = [[0.0, -0.0], [-0.0, 0.0]]
    before = (ra.get_jit_mode(), ra.get_num_threads())
    try:
        ra.set_num_threads(2)
        for mode, ran in (("eager", True), ("off", False)):
            ra.set_jit_mode(mode)
            calls.clear()
            for pattern, a, b in (("b c (h 2) (w 2) -> b c h w", 2, 2),
                                  ("b c (h 2) w -> b c h w", 2, 1),
                                  ("b c h (w 2) -> b c h w", 1, 2),
                                  ("b c (h 2) (w 3) -> b c h w", 2, 3)):   # (the views)
                for reduction in ("max", "min"):
                    got = ra.reduce(x, pattern, reduction)
                    _bits_equal(got, getattr(_windows(x, a, b), reduction)(axis=(4, 5)))
                    np.testing.assert_array_equal(got, einops.reduce(x, pattern, reduction))
            assert len(calls) == (6 if ran else 0), mode
    finally:
        ra.set_jit_mode(before[0])
        ra.set_num_threads(before[1])


def test_arrays_the_runner_cannot_take_keep_the_views(runners, monkeypatch):
    """A subclass, unaligned or byte-swapped data, reversed or sliced windows, a
    strided image: the views (never the runner); each numpy's result, inputs
    untouched."""
    calls = _spy(monkeypatch)

    class Sub(np.ndarray):
        pass
    x = np.random.default_rng(6).random((4, 8, 32, 32), dtype=np.float32)
    raw = np.zeros(x.nbytes + 1, np.uint8)[1:].view(np.float32).reshape(x.shape)
    raw[...] = x
    for y in (x.view(Sub), raw, x.astype(">f4"), x[:, :, ::-1], x[:, :, :, ::-1],
              x[:, ::-1]):
        before = np.array(y)
        windows = _windows(np.asarray(y), 2, 2)
        if type(y) is Sub:
            windows = windows.view(Sub)
        got = reduce_by_layout("pool", "max", windows, (4, 5), 2)
        _bits_equal(np.asarray(got), np.asarray(windows).max(axis=(4, 5)))
        np.testing.assert_array_equal(y, before)
    assert calls == []
    sliced = x[:, :, :, 1:31]            # rows that do not follow each other: the runner
    got = reduce_by_layout("pool", "min", _windows(sliced, 2, 2), (4, 5), 2)
    _bits_equal(got, _windows(sliced, 2, 2).min(axis=(4, 5)))
    assert len(calls) == 1


def test_the_layouts():
    # "b c (h 2) (w 2) -> b c h w" on (32, 64, 112, 112): rows of 56 windows
    assert window_layout((32, 64, 56, 56, 2, 2), (802816, 12544, 224, 2, 112, 1), 2) == \
        WindowLayout(32 * 64 * 56, 224, 56, 2, 2, 112, 2, 1)
    assert window_layout((32, 64, 56, 56, 2, 2), (802816, 12544, 224, 2, 112, 1), 2).vectors
    # 2x1: one reduced axis, not contiguous: the window's rows; 1x2: its columns
    assert window_layout((4, 56, 112, 2), (12544, 224, 1, 112), 1) == \
        WindowLayout(4 * 56, 224, 112, 1, 2, 112, 1, 0)
    assert window_layout((4, 112, 56, 2), (12544, 112, 2, 1), 1) == \
        WindowLayout(4 * 112, 112, 56, 2, 1, 0, 2, 1)
    # 3x3: a layout, not the runner's (its windows would be read one by one)
    layout = window_layout((4, 10, 10, 3, 3), (900, 90, 3, 30, 1), 2)
    assert layout == WindowLayout(40, 90, 10, 3, 3, 30, 3, 1) and not layout.vectors
    assert not window_layout((4, 10, 10, 2, 2), (800, 80, 4, 40, 2), 2).vectors  # strided
    assert window_layout((4, 10, 10, 2, 2), (400, 40, -2, 20, 1), 2) is None   # reversed
    assert window_layout((4, 10, 10, 2, 2), (400, 2, 40, 20, 1), 2) is None    # kept order
    assert window_layout((4, 10, 2, 2, 2), (160, 4, 80, 40, 1), 3) is None     # 3 axes
    # a window that is one contiguous run of 8 or more (images one window wide; 1x8)
    assert window_layout((40, 1, 3, 3), (9, 3, 3, 1), 2) is None
    assert window_layout((40, 2, 3, 3), (18, 3, 6, 1), 2) is not None
    assert window_layout((40, 4, 8), (32, 8, 1), 1) is None
    assert window_layout((40, 4, 7), (28, 7, 1), 1) is not None


def test_the_choice_on_both_sides_of_each_threshold():
    strides = (802816, 12544, 224, 2, 112, 1)
    shape = (32, 64, 56, 56, 2, 2)
    assert plan_by_layout("max", shape, f4, 2, 2, strides) == "pool"
    assert plan_by_layout("min", shape, f8, 2, 1, strides) == "pool"
    assert plan_by_layout("max", shape, f4, 2, 2) != "pool"              # no strides
    for reduction in ("sum", "mean", "prod"):
        assert plan_by_layout(reduction, shape, f4, 2, 2, strides) != "pool"
    for dtype in (np.dtype(np.float16), np.dtype(np.int32), np.dtype(">f4")):
        assert plan_by_layout("max", shape, dtype, 2, 2, strides) != "pool"
    # the smallest input: POOL_MIN_BYTES
    rows = -(-reductions.POOL_MIN_BYTES // (4 * 4 * 56))
    small = ((rows, 56, 2, 2), (224, 2, 112, 1))
    assert plan_by_layout("max", *small[:1], f4, 2, 2, small[1]) == "pool"
    assert plan_by_layout("max", (rows - 1,) + small[0][1:], f4, 2, 2, small[1]) == "window"
    # the largest window: WINDOW_MAX elements (rows of 2)
    tall = reductions.WINDOW_MAX // 2
    assert plan_by_layout("max", (1024, 56, tall, 2), f4, 2, 2,
                          (56 * 2 * tall, 2, 112, 1)) == "pool"
    assert plan_by_layout("max", (1024, 56, tall + 1, 2), f4, 2, 2,
                          (56 * 2 * (tall + 1), 2, 112, 1)) != "pool"
    # windows of 3 columns (3x3, 2x3): the views, at any thread count
    three = ((2048, 56, 3, 3), (56 * 9, 3, 168, 1))
    assert plan_by_layout("max", three[0], f4, 2, 2, three[1]) == "window"
    assert plan_by_layout("max", three[0], f4, 2, 1, three[1]) == "window"
    # 2x1 and 1x2 windows: the runner
    assert plan_by_layout("max", (512, 112, 2), f4, 1, 1, (224, 1, 112)) == "pool"
    assert plan_by_layout("max", (1024, 56, 2), f4, 1, 1, (112, 2, 1)) == "pool"


def test_background_mode_pools_with_the_views_until_the_runner_is_ready(tmp_path):
    """A fresh process, REARRANGE_JIT unset (background) and an empty cache: the first
    pooling is the views' (the caller's thread never compiles nor imports numba), the
    runner is compiled out of the way, and once ready the result is its, bit for bit."""
    build_tests = pytest.importorskip("test_jit_builds")
    report = build_tests.run("""
        from rearrange.kernel import rowmax
        ra.set_num_threads(2)
        x = np.random.default_rng(8).random((8, 32, 64, 64), dtype=np.float32)
        windows = x.reshape(8, 32, 32, 2, 32, 2)
        pattern = "b c (h 2) (w 2) -> b c h w"
        first = ra.reduce(x, pattern, "max").tobytes() == windows.max(axis=(3, 5)).tobytes()
        numba_in_call = "numba" in sys.modules
        status = [builds.status(rowmax.WINDOWS, 4)]
        assert K.wait(600)
        status.append(builds.status(rowmax.WINDOWS, 4))
        ran = []
        real = rowmax.reduce_windows
        rowmax.reduce_windows = lambda *a: (ran.append("reduce_windows"), real(*a))[1]
        later = ra.reduce(x, pattern, "max").tobytes() == windows.max(axis=(3, 5)).tobytes()
        print(json.dumps({"exact": [first, later], "numba_in_call": numba_in_call,
                          "status": status, "ran": ran}))
    """, tmp_path / "cache")
    assert report == {"exact": [True, True], "numba_in_call": False,
                      "status": ["compiling", "ready"], "ran": ["reduce_windows"]}


def test_runner_family():
    with pytest.raises(ValueError, match="2-byte units"):
        rowmax.runner(2, rowmax.WINDOWS)
    out = np.empty((2, 3), np.float32)
    with pytest.raises(ValueError, match="3 columns"):
        rowmax.reduce_windows(None, out, 0, rowmax.OP_MAX, 3, 9, 1, 0, 3, 1)
