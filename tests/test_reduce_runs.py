"""Maxima and minima over contiguous runs, and sums and means down columns, by the compiled
runners of rearrange/kernel/rowmax.py (the "runs" and "columns" strategies of
rearrange/reductions.py): numpy's own results, bit for bit, signed zeros included.

The oracle is numpy's reduction of the same array (einops on the public path). Which
path ran is read from spies on the runners' entries (``rowmax.reduce_runs``,
``rowmax.sum_columns``) and from ``plan_by_layout``.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import rearrange as ra
from rearrange import reductions
from rearrange.kernel import builds, rowmax
from rearrange.reductions import column_layout, plan_by_layout, reduce_by_layout, run_layout
from test_reduce_rows import _bits_equal  # noqa: F401 - also test_reduce_windows'

einops = pytest.importorskip("einops")

FLOATS = [np.float32, np.float64]
f4, f8 = np.dtype(np.float32), np.dtype(np.float64)


@pytest.fixture(scope="module")
def runners():
    """The row-max and column-sums runners, compiled or loaded here (the suite runs in
    eager mode); skipped where numba cannot run."""
    try:
        return {(family, u): builds.build_here((family, u))
                for family in (rowmax.FAMILY, rowmax.COLUMN_SUMS) for u in (4, 8)}
    except Exception as error:      # noqa: BLE001 — numba unavailable here
        pytest.skip(f"no row-max runner: {error}")


def _values(draw, dtype, shape, zeros_only=False):
    """Values that expose NaN and signed-zero handling: mixed magnitudes, NaN, +-inf,
    +-0.0; or (``zeros_only``) zeros of both signs and negatives, where the maximum
    is a zero."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if zeros_only:
        pool = np.array([-0.0, 0.0, -1.0, -0.0, 0.0], dtype)
        return pool[rng.integers(0, len(pool), shape)]
    x = (rng.standard_normal(shape) * 10.0 ** rng.integers(-5, 6, shape)).astype(dtype)
    specials = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0], dtype)
    for _ in range(draw(st.integers(0, 4))):
        if x.size:
            x.flat[rng.integers(0, x.size)] = specials[rng.integers(0, 5)]
    return x


@st.composite
def runs_of(draw):
    """(outputs, count, n + gap) arrays and the gap: outputs of ``count`` runs of ``n``."""
    dtype = draw(st.sampled_from(FLOATS))
    outputs, count, n = draw(st.integers(1, 9)), draw(st.integers(1, 4)), draw(st.integers(1, 140))
    gap = draw(st.integers(0, 5))
    x = _values(draw, dtype, (outputs, count, n + gap), zeros_only=draw(st.booleans()))
    return x, gap


@settings(max_examples=200, deadline=None)
@given(case=runs_of(), op=st.sampled_from(["max", "min"]), threads=st.integers(1, 3))
@example(case=(np.array([[[-0.0, 0.0] * 20]], np.float32), 0), op="max", threads=1)
@example(case=(np.full((3, 2, 40), -0.0), 1), op="min", threads=2)
@example(case=(np.array([[[1.0] * 33 + [np.nan]]], np.float64), 0), op="max", threads=1)
def test_the_runner_takes_numpys_extremes_and_counts_mixed_zeros(runners, case, op, threads):
    x, gap = case
    runs = x[:, :, :x.shape[2] - gap]
    out = np.empty(x.shape[0], x.dtype)
    mixed_count = rowmax.reduce_runs(runners[rowmax.FAMILY, x.itemsize], out,
                               x.__array_interface__["data"][0],
                               rowmax.OP_MAX if op == "max" else rowmax.OP_MIN,
                               runs.shape[2], runs.shape[1], x.shape[2], x.shape[1] * x.shape[2],
                               threads)
    expected = getattr(runs, op)(axis=(1, 2))
    flat = runs.reshape(runs.shape[0], -1)
    zero = flat == 0
    mixed = ((expected == 0) & (zero & np.signbit(flat)).any(axis=1)
             & (zero & ~np.signbit(flat)).any(axis=1))
    assert mixed_count == mixed.sum()
    keep = ~mixed       # numpy's value; where its zeros have one sign, that sign
    _bits_equal(out[keep], expected[keep])


@st.composite
def views(draw):
    """A float view with its last 1-3 axes reduced: sliced, reversed, permuted, axes of
    length 0 and 1; values with NaN and signed zeros."""
    ndim = draw(st.integers(2, 4))
    shape = tuple(draw(st.integers(0 if k == 0 else 1, 6)) for k in range(ndim))
    dtype = draw(st.sampled_from(FLOATS))
    base = _values(draw, dtype, tuple(2 * n + 1 for n in shape),
                   zeros_only=draw(st.booleans()))
    steps = tuple(draw(st.sampled_from([1, 1, 2, -1])) for _ in range(ndim))
    view = base[tuple(slice(None, None, s) for s in steps)]
    view = view[tuple(slice(0, n) for n in shape)]
    if draw(st.booleans()):
        view = view.transpose(draw(st.permutations(range(ndim))))
    return view, draw(st.integers(1, ndim))


@settings(max_examples=250, deadline=None)
@given(case=views(), reduction=st.sampled_from(["max", "min", "sum", "mean"]),
       threads=st.integers(1, 3))
def test_the_runs_and_columns_strategies_equal_numpy(runners, case, reduction, threads):
    """Forced (whatever the size): numpy's values, dtype and strides, -0.0 included;
    inputs untouched. A layout the runners cannot take is numpy's own way."""
    y, reduced = case
    before = y.copy()
    axis = tuple(range(y.ndim - reduced, y.ndim))
    for strategy in ("runs", "columns"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            try:
                expected = getattr(y, reduction)(axis=axis)
            except ValueError:      # an empty maximum: numpy's error, ours the same way
                with pytest.raises(ValueError):
                    reduce_by_layout(strategy, reduction, y, axis, threads)
                continue
            got = reduce_by_layout(strategy, reduction, y, axis, threads)
        if isinstance(expected, np.ndarray):
            _bits_equal(got, expected)
        else:
            assert type(got) is type(expected)
            np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(y, before)


def _spy(monkeypatch, name):
    calls = []
    real = getattr(rowmax, name)
    monkeypatch.setattr(rowmax, name, lambda *args: (calls.append(args), real(*args))[1])
    return calls


def test_mixed_zeros_are_numpys_call(runners, monkeypatch):
    """An output whose maximum is a zero of both signs among its elements: numpy's own
    call gives the whole result (its SIMD lanes decide the sign); one sign only: the
    runner's result, that sign."""
    calls = _spy(monkeypatch, "reduce_runs")
    rng = np.random.default_rng(3)
    for dtype in FLOATS:
        x = -rng.random((16, 32, 28, 28)).astype(dtype)
        x[:, 3] = -0.0
        x[:, 4] = 0.0
        x[0, 5, 0, :3] = [-0.0, 0.0, -0.0]
        y = x.transpose(1, 0, 2, 3)
        for reduction in ("max", "min"):
            got = reduce_by_layout("runs", reduction, y, (1, 2, 3), 2)
            _bits_equal(got, getattr(y, reduction)(axis=(1, 2, 3)))
        assert np.signbit(reduce_by_layout("runs", "max", y, (1, 2, 3), 2)[3])
        assert not np.signbit(reduce_by_layout("runs", "max", y, (1, 2, 3), 2)[4])
    assert len(calls) == 8


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("side", [8, 96])      # each output 16 KiB / 2.25 MiB (float32)
def test_outputs_read_whole_are_claimed_one_at_a_time(runners, monkeypatch, dtype, side):
    """Outputs that each read OUTPUT_CHUNK_BYTES or more are the chunks the threads claim
    (one output each), smaller ones the usual chunks; both sides numpy's values, at one
    and two threads, NaN and a mixed-zero output included."""
    cuts = []
    real = rowmax.execute_units
    monkeypatch.setattr(rowmax, "execute_units",
                        lambda *args, **kwargs: cuts.append(kwargs.get("chunks")) or
                        real(*args, **kwargs))
    rng = np.random.default_rng(side)
    x = rng.standard_normal((64, 24, side, side)).astype(dtype)
    x[5, 7, 3, 2] = np.nan
    x[:, 11] = -0.0
    x[9, 11, 0, 0] = 0.0
    y = x.transpose(1, 0, 2, 3)
    whole = 64 * side * side * x.itemsize >= rowmax.OUTPUT_CHUNK_BYTES
    for threads in (1, 2):
        cuts.clear()
        got = reduce_by_layout("runs", "max", y, (1, 2, 3), threads)
        _bits_equal(got, y.max(axis=(1, 2, 3)))
        assert cuts == [24 if whole else None]
    assert whole == (side == 96)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("block", [8, 64, 1 << 14])
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_column_sums_keep_numpys_order(runners, dtype, block, data):
    """Each output from +0.0, the rows added one after the other, in the data's type:
    values whose sums depend on that order (magnitudes 1e-5 to 1e5, cancellations),
    -0.0, NaN and inf; work units of a few elements to whole rows."""
    b, c, w = data.draw(st.integers(1, 5)), data.draw(st.integers(2, 40)), \
        data.draw(st.integers(2, 70))
    x = _values(data.draw, dtype, (b, c, w))
    if data.draw(st.booleans()):
        x[:, :, 0] = -0.0                   # a column of negative zeros sums to +0.0
    y = x.transpose(0, 2, 1)
    threads = data.draw(st.integers(1, 3))
    default = rowmax.COLUMN_BLOCK_BYTES
    rowmax.COLUMN_BLOCK_BYTES = block
    try:
        for reduction in ("sum", "mean"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                expected = getattr(y, reduction)(axis=2)
                got = reductions._reduce_compiled("columns", reduction, y, 1, threads)
            assert got is not None
            _bits_equal(got, expected)
    finally:
        rowmax.COLUMN_BLOCK_BYTES = default


def test_the_paths_taken_once_ready_and_while_off(runners, monkeypatch, two_threads):
    """Through ``reduce``: the runners once ready; with kernels off numpy's ways — both
    numpy's result, bit for bit, and einops' values."""
    runs = _spy(monkeypatch, "reduce_runs")
    columns = _spy(monkeypatch, "sum_columns")
    x = np.random.default_rng(4).random((16, 32, 56, 56), dtype=np.float32)
    x[2, 3, 4, 5] = np.nan
    before = ra.get_jit_mode()
    try:
        for mode, ran in (("eager", True), ("off", False)):
            ra.set_jit_mode(mode)
            runs.clear()
            columns.clear()
            for pattern, reduction, axis in (("b c h w -> c", "max", (0, 2, 3)),
                                             ("b c h w -> c", "min", (0, 2, 3)),
                                             ("b c h w -> b c", "max", (2, 3)),
                                             ("b c h w -> b c h", "min", (3,)),
                                             ("b c h w -> b h w", "mean", (1,)),
                                             ("b c h w -> b h w", "sum", (1,))):
                got = ra.reduce(x, pattern, reduction)
                _bits_equal(got, getattr(x, reduction)(axis=axis))
                np.testing.assert_array_equal(got, einops.reduce(x, pattern, reduction))
            assert (len(runs), len(columns)) == ((4, 2) if ran else (0, 0)), mode
    finally:
        ra.set_jit_mode(before)


def test_arrays_the_runners_cannot_take_keep_numpys_ways(runners, monkeypatch):
    """A subclass, unaligned or byte-swapped data, a strided run: numpy's call (or its
    slabs, partials), never a runner; each numpy's result."""
    runs = _spy(monkeypatch, "reduce_runs")
    columns = _spy(monkeypatch, "sum_columns")

    class Sub(np.ndarray):
        pass
    x = np.random.default_rng(6).random((32, 64, 56), dtype=np.float32)
    raw = np.zeros(x.nbytes + 1, np.uint8)[1:].view(np.float32).reshape(x.shape)
    raw[...] = x
    for y in (x.view(Sub), raw, x.astype(">f4")):
        for strategy, reduction in (("runs", "max"), ("columns", "sum")):
            got = reduce_by_layout(strategy, reduction, y, (2,), 2)
            _bits_equal(np.asarray(got), getattr(np.asarray(y), reduction)(axis=2))
    got = reduce_by_layout("runs", "max", x[:, :, ::2], (2,), 2)    # not a contiguous run
    _bits_equal(got, x[:, :, ::2].max(axis=2))
    assert runs == [] and columns == []


def test_the_layouts():
    # "b c h w -> c" viewed as (c, b, h, w): b runs of h * w an output
    assert run_layout((64, 32, 56, 56), (3136, 200704, 56, 1), 3) == \
        reductions.RunLayout(64, 3136, 32, 200704, 3136)
    assert run_layout((8, 4, 56), (224, 56, 1), 1) == reductions.RunLayout(32, 56, 1, 56, 56)
    assert run_layout((8, 1, 56), (60, 56, 1), 1) == reductions.RunLayout(8, 60, 1, 56, 56)
    assert run_layout((8, 4, 56), (224, 56, 2), 1) is None              # a strided run
    assert run_layout((8, 4, 56), (224, -56, 1), 2) is None             # reversed
    assert run_layout((4, 3, 5, 7), (1000, 100, 7, 1), 3) == reductions.RunLayout(4, 1000, 3, 100, 35)
    assert run_layout((4, 2, 3, 5, 7), (5000, 1000, 100, 7, 1), 4) is None     # two run axes
    assert run_layout((4, 3, 7), (7, 28, 1), 1) is None                 # kept axes apart
    # "b c h w -> b h w" viewed as (b, h, w, c)
    assert column_layout((32, 56, 56, 64), (200704, 56, 1, 3136), 1) == \
        reductions.ColumnLayout(32, 200704, 64, 3136, 3136)
    assert column_layout((56, 64), (1, 56), 1) == reductions.ColumnLayout(1, 56, 64, 56, 56)
    assert column_layout((32, 56, 64), (3584, 1, 56), 1) == \
        reductions.ColumnLayout(32, 3584, 64, 56, 56)
    assert column_layout((32, 56, 64), (3584, 2, 112), 1) is None       # strided columns
    assert column_layout((32, 4, 56), (224, 56, 1), 1) is None          # rows: numpy pairwise
    assert column_layout((32, 56, 4, 16), (3584, 1, 56, 224), 2) is None   # not flat order


def test_the_choice_on_both_sides_of_each_threshold():
    # runs: maxima and minima of float32/float64 over contiguous runs
    few = -(-reductions.RUNS_MIN_BYTES // (4 * 56))           # the fewest rows of 56 float32
    assert plan_by_layout("max", (few, 56), f4, 1, 2, (56, 1)) == "runs"
    assert plan_by_layout("min", (few, 56), f4, 1, 1, (56, 1)) == "runs"
    assert plan_by_layout("max", (few - 1, 56), f4, 1, 2, (56, 1)) != "runs"   # too small
    assert plan_by_layout("max", (few, 56), f8, 1, 2, (56, 1)) == "runs"
    for dtype in (np.dtype(np.float16), np.dtype(np.int32), np.dtype(">f4"),
                  np.dtype(np.bool_)):
        assert plan_by_layout("max", (few, 56), dtype, 1, 2, (56, 1)) != "runs"
    for reduction in ("sum", "prod", "any", "argmax"):
        assert plan_by_layout(reduction, (few, 56), f4, 1, 2, (56, 1)) != "runs"
    assert plan_by_layout("max", (few, 56), f4, 1, 2) != "runs"            # no strides
    n = reductions.RUNS_MIN_LENGTH
    rows = 1 << 16
    assert plan_by_layout("max", (rows, n), f4, 1, 2, (n, 1)) == "runs"
    assert plan_by_layout("max", (rows, n - 1), f4, 1, 2, (n - 1, 1)) == "window"
    big = (1, 8 * reductions.RUNS_MIN_BYTES)
    assert plan_by_layout("max", big, f4, 1, 2, (big[1], 1)) != "runs"     # one output
    assert plan_by_layout("max", (2,) + big[1:], f4, 1, 2, (big[1], 1)) == "runs"
    per_channel = ((64, 32, 56, 56), (3136, 200704, 56, 1))
    assert plan_by_layout("max", per_channel[0], f4, 3, 2, per_channel[1]) == "runs"
    # one thread: several runs an output only while they are short; one run, any length
    assert plan_by_layout("max", per_channel[0], f4, 3, 1, per_channel[1]) == "numpy"
    assert plan_by_layout("max", (64, 32 * 56 * 56), f4, 1, 1, (3136 * 32, 1)) == "runs"
    short = reductions.RUNS_ONE_THREAD_MAX_LENGTH
    many = (256, 64, short)
    assert plan_by_layout("max", many, f4, 2, 1, (short, short * 256, 1)) == "runs"
    longer = (256, 64, short + 1)
    assert plan_by_layout("max", longer, f4, 2, 1, (short + 1, (short + 1) * 256, 1)) != "runs"
    assert plan_by_layout("max", longer, f4, 2, 2, (short + 1, (short + 1) * 256, 1)) == "runs"
    assert plan_by_layout("max", per_channel[0], f4, 3, 2,
                          (3136, 200704, 112, 2)) == "partials"    # not runs: as before
    # columns: sums and means down columns, where numpy's slabs would run
    over_channels = ((32, 56, 56, 64), (200704, 56, 1, 3136))
    assert plan_by_layout("mean", *over_channels[:1], f4, 1, 2, over_channels[1]) == "columns"
    assert plan_by_layout("sum", *over_channels[:1], f8, 1, 2, over_channels[1]) == "columns"
    assert plan_by_layout("mean", *over_channels[:1], f4, 1, 1, over_channels[1]) == "numpy"
    assert plan_by_layout("max", *over_channels[:1], f4, 1, 2, over_channels[1]) == "slabs"
    assert plan_by_layout("sum", *over_channels[:1], np.dtype(np.int32), 1, 2,
                          over_channels[1]) == "slabs"
    rows = -(-reductions.PARALLEL_MIN_BYTES // (4 * 64 * 16))
    width = reductions.COLUMNS_MIN_WIDTH
    assert plan_by_layout("sum", (rows, width, 64), f4, 1, 2, (64 * width, 1, width)) \
        == "columns"
    assert plan_by_layout("sum", (rows - 1, width, 64), f4, 1, 2, (64 * width, 1, width)) \
        != "columns"                                                   # too small
    rows = -(-reductions.PARALLEL_MIN_BYTES // (4 * 64 * (width - 1)))
    assert plan_by_layout("sum", (rows, width - 1, 64), f4, 1, 2,
                          (64 * (width - 1), 1, width - 1)) != "columns"   # too narrow


def test_background_mode_reduces_with_numpy_until_the_runners_are_ready(tmp_path):
    """A fresh process, REARRANGE_JIT unset (background) and an empty cache: the first
    reductions are numpy's (the caller's thread never compiles nor imports numba), the
    runners are compiled out of the way, and once ready the results are theirs, bit
    for bit."""
    build_tests = pytest.importorskip("test_jit_builds")
    report = build_tests.run("""
        from rearrange.kernel import rowmax
        ra.set_num_threads(2)
        x = np.random.default_rng(8).random((16, 64, 28, 56), dtype=np.float32)
        first = [ra.reduce(x, "b c h w -> c", "max").tobytes() == x.max(axis=(0, 2, 3)).tobytes(),
                 ra.reduce(x, "b c h w -> b h w", "mean").tobytes() == x.mean(axis=1).tobytes()]
        numba_in_call = "numba" in sys.modules
        status = [builds.status(rowmax.FAMILY, 4), builds.status(rowmax.COLUMN_SUMS, 4)]
        assert K.wait(600)
        status += [builds.status(rowmax.FAMILY, 4), builds.status(rowmax.COLUMN_SUMS, 4)]
        ran = []
        for name in ("reduce_runs", "sum_columns"):
            real = getattr(rowmax, name)
            setattr(rowmax, name, lambda *a, real=real, name=name: (ran.append(name), real(*a))[1])
        later = [ra.reduce(x, "b c h w -> c", "max").tobytes() == x.max(axis=(0, 2, 3)).tobytes(),
                 ra.reduce(x, "b c h w -> b h w", "mean").tobytes() == x.mean(axis=1).tobytes()]
        print(json.dumps({"exact": first + later, "numba_in_call": numba_in_call,
                          "status": status, "ran": ran}))
    """, tmp_path / "cache")
    assert report == {"exact": [True] * 4, "numba_in_call": False,
                      "status": ["compiling", "compiling", "ready", "ready"],
                      "ran": ["reduce_runs", "sum_columns"]}


def test_runner_families_and_units():
    with pytest.raises(ValueError, match="no 'rows' runner here"):
        rowmax.runner(4, "rows")
    with pytest.raises(ValueError, match="2-byte units"):
        rowmax.runner(2)
    assert rowmax.FLOAT_DTYPES == {4: np.float32, 8: np.float64}
