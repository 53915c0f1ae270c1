"""Sums and means over short contiguous rows by the compiled row sums
(rearrange/kernel/rowsums.py), and maxima, minima, any and all combined from partial
results (rearrange/reductions.py): numpy's own results, bit for bit.

The oracle is numpy's reduction of the same array (and einops on the public path). The
order numpy adds a row in is checked first against a plain-Python model of it (the one
the runner's program encodes), then the runner against numpy; which path ran is read
from a spy on the runner's entry (``rowsums.sum_rows``) and from ``plan_by_layout``.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import rearrange as ra
from rearrange import reductions
from rearrange.kernel import builds, rowsums
from rearrange.reductions import plan_by_layout, reduce_by_layout

einops = pytest.importorskip("einops")

FLOATS = [np.float32, np.float64]
f4, f8 = np.dtype(np.float32), np.dtype(np.float64)


def _bits_equal(got: np.ndarray, expected: np.ndarray) -> None:
    """The same array: dtype, shape, strides, NaN where numpy has NaN, and every other
    value bit for bit (-0.0 is not 0.0). A NaN's sign and payload are not compared: x86
    gives inf - inf a negative NaN and passes on the first NaN operand of an add, and a
    C compiler may swap the operands of an addition (it is commutative in IEEE
    arithmetic), so numpy's own builds differ there."""
    assert got.dtype == expected.dtype and got.shape == expected.shape
    if got.size > 1:    # (a stride of a length-1 axis means nothing: numpy's vary)
        assert ([s for s, n in zip(got.strides, got.shape) if n > 1]
                == [s for s, n in zip(expected.strides, expected.shape) if n > 1])
    if got.dtype.kind == "f":
        nan = np.isnan(expected)
        assert np.array_equal(np.isnan(got), nan)
        got, expected = np.where(nan, 0, got), np.where(nan, 0, expected)
    assert np.asarray(got).tobytes() == np.asarray(expected).tobytes()


def _model_sum(row: np.ndarray) -> np.generic:
    """numpy's pairwise order for one row, in plain Python on numpy scalars of the row's
    dtype (each addition rounded to it), following the runner's program."""
    kind = row.dtype.type
    stack: list[np.generic] = []
    program = rowsums.pairwise_program(len(row)).reshape(-1, 3)
    with np.errstate(invalid="ignore", over="ignore"):
        for start, length, additions in program:
            block = row[start:start + length]
            if length < 8:
                value = kind(-0.0)
                for element in block:
                    value = kind(value + element)
            else:
                r = [block[j] for j in range(8)]
                end = length - length % 8
                for i in range(8, end, 8):
                    r = [kind(r[j] + block[i + j]) for j in range(8)]
                value = kind(kind(kind(r[0] + r[1]) + kind(r[2] + r[3]))
                             + kind(kind(r[4] + r[5]) + kind(r[6] + r[7])))
                for element in block[end:]:
                    value = kind(value + element)
            for _ in range(additions):
                value = kind(stack.pop() + value)
            stack.append(value)
        assert len(stack) == 1
        return kind(kind(0.0) + stack[0])


@st.composite
def rows_of(draw, max_rows=6, max_length=300):
    """(rows, n) float32 or float64 values that expose the adding order: magnitudes from
    1e-30 to 1e30 mixed, exact cancellations, NaN, infinities, -0.0."""
    dtype = draw(st.sampled_from(FLOATS))
    n = draw(st.integers(1, max_length))
    count = draw(st.integers(1, max_rows))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    scale = 10.0 ** rng.integers(-30 if dtype == np.float32 else -200,
                                 31 if dtype == np.float32 else 201, (count, n))
    x = (rng.standard_normal((count, n)) * scale).astype(dtype)
    specials = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1.0, -1.0], dtype)
    for _ in range(draw(st.integers(0, 6))):
        x[rng.integers(0, count), rng.integers(0, n)] = specials[rng.integers(0, 7)]
    if draw(st.booleans()):
        x[0] = -0.0                                 # a row of negative zeros: +0.0
    return x


@settings(max_examples=200, deadline=None)
@given(x=rows_of())
@example(x=np.array([[1e8, 1.0, -1e8]], np.float32))
@example(x=np.full((2, 129), -0.0, np.float64))
def test_numpy_adds_a_row_in_the_modelled_order(x):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        expected = x.sum(axis=1)
    _bits_equal(np.array([_model_sum(row) for row in x], x.dtype), expected)


def test_numpy_adds_float32_rows_in_float32():
    """No wider accumulator: 1e8 + 1 is 1e8 in float32, so the row sums to 0 (1 in
    float64); the runner must not be more exact than numpy."""
    x = np.array([[1e8, 1.0, -1e8]], np.float32)
    assert x.sum(axis=1)[0] == 0.0
    assert x.astype(np.float64).sum(axis=1)[0] == 1.0


@pytest.mark.parametrize("dtype", FLOATS)
def test_numpy_means_are_the_sum_divided_as_numpy_divides(dtype):
    rng = np.random.default_rng(5)
    for n in (3, 7, 56, 129, 1000):
        x = (rng.standard_normal((50, n)) * 10.0 ** rng.integers(-5, 6, (50, n))).astype(dtype)
        sums = x.sum(axis=1)
        np.true_divide(sums, np.intp(n), out=sums, casting="unsafe")
        assert sums.tobytes() == x.mean(axis=1).tobytes()


def test_the_program_is_numpys_recursion():
    """Leaves (start, length, additions after it): 300 splits at 144 (150 less 150 % 8),
    each half again at 72; 129 at 64."""
    for n, leaves in [(1, [[0, 1, 0]]), (128, [[0, 128, 0]]), (129, [[0, 64, 0], [64, 65, 1]]),
                      (300, [[0, 72, 0], [72, 72, 1], [144, 72, 0], [216, 84, 2]])]:
        program = rowsums.pairwise_program(n)
        assert program.reshape(-1, 3).tolist() == leaves
        assert not program.flags.writeable


@pytest.fixture(scope="module")
def runners():
    """Both row-sums runners, compiled or loaded here (the suite runs in eager mode);
    skipped where numba cannot run."""
    try:
        return {u: builds.build_here((rowsums.FAMILY, u)) for u in (4, 8)}
    except Exception as error:      # noqa: BLE001 — numba unavailable here
        pytest.skip(f"no row-sums runner: {error}")


def _sum_rows(run, x: np.ndarray) -> np.ndarray:
    out = np.empty(x.shape[0], x.dtype)
    rowsums.sum_rows(run, out, x.__array_interface__["data"][0], x.strides[0], x.shape[1],
                     False, 1)
    return out


@settings(max_examples=200, deadline=None)
@given(x=rows_of(), gap=st.integers(0, 9))
@example(x=np.full((3, 56), -0.0, np.float32), gap=0)
@example(x=np.array([[np.nan] + [1.0] * 9, [np.inf, -np.inf] * 5], np.float64), gap=1)
def test_the_runner_sums_rows_as_numpy(runners, x, gap):
    wide = np.zeros((x.shape[0], x.shape[1] + gap), x.dtype)
    wide[:, :x.shape[1]] = x
    rows = wide[:, :x.shape[1]]                     # rows with a gap between them
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        expected = rows.sum(axis=1)
    _bits_equal(_sum_rows(runners[x.itemsize], rows), expected)


@pytest.mark.parametrize("reduction", ["sum", "mean"])
@settings(max_examples=60, deadline=None)
@given(x=rows_of(max_rows=40, max_length=140), threads=st.integers(1, 3),
       shape=st.sampled_from([(1,), (2,), (2, 5), (1, 3, 1)]))
def test_the_rows_strategy_equals_numpy(runners, reduction, x, threads, shape):
    """Forced (whatever the size), on arrays of more kept axes and on every thread
    count: numpy's values, dtype and strides."""
    y = np.broadcast_to(x, shape + x.shape).copy()
    axis = (y.ndim - 1,)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        expected = getattr(y, reduction)(axis=axis)
        got = reduce_by_layout("rows", reduction, y, axis, threads)
    _bits_equal(got, expected)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("n", [5, 56, 128, 300])
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_the_runner_on_the_pool_sums_and_divides_as_numpy(runners, dtype, n, threads):
    """The runner called directly on the kernel's threads (chunks of rows claimed by
    each), a sum and a mean per thread count: numpy's bits, rows of every program shape
    (short, one block, split), an odd row count (the quads' and pairs' remainders),
    NaN, inf and -0.0 among them; the input untouched."""
    rng = np.random.default_rng(n * 10 + threads)
    x = (rng.standard_normal((4099, n)) * 100).astype(dtype)
    x[5, 2] = np.nan
    x[7, :] = -0.0
    x[11, 1] = np.inf
    before = x.copy()
    address = x.__array_interface__["data"][0]
    for mean in (False, True):
        got = np.empty(x.shape[0], dtype)
        rowsums.sum_rows(runners[x.itemsize], got, address, x.strides[0], n, mean, threads)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            expected = x.mean(axis=1) if mean else x.sum(axis=1)
        _bits_equal(got, expected)
    assert x.tobytes() == before.tobytes()


def test_the_rows_strategy_passes_the_threads_on_both_sides_of_the_size(runners, monkeypatch):
    """Through reduce_by_layout at 2 threads: an input of at least PARALLEL_MIN_BYTES on
    the pool's two threads, a smaller one on the caller's alone; numpy's bits each,
    sums and means."""
    seen = []
    real = rowsums.sum_rows
    monkeypatch.setattr(rowsums, "sum_rows", lambda *args: (seen.append(args[-2:]),
                                                            real(*args)))
    rows = -(-reductions.PARALLEL_MIN_BYTES // (4 * 56))     # the fewest at two threads
    rng = np.random.default_rng(9)
    for count, threads in ((rows, 2), (rows - 1, 1)):
        x = rng.standard_normal((count, 56)).astype(np.float32)
        assert (x.nbytes >= reductions.PARALLEL_MIN_BYTES) is (threads == 2)
        for reduction in ("sum", "mean"):
            seen.clear()
            got = reduce_by_layout("rows", reduction, x, (1,), 2)
            _bits_equal(got, getattr(x, reduction)(axis=1))
            assert seen == [(reduction == "mean", threads)]


def test_rows_the_runner_cannot_take_keep_numpys_call(runners, monkeypatch):
    """Not contiguous rows, a subclass, unaligned or byte-swapped data: numpy's call (or
    its slabs), never the runner; each equal to numpy's result."""
    calls = []
    monkeypatch.setattr(rowsums, "sum_rows", lambda *args: calls.append(args))

    class Sub(np.ndarray):
        pass
    x = np.random.default_rng(6).random((64, 64, 56), dtype=np.float32)
    raw = np.zeros(x.nbytes + 1, np.uint8)[1:].view(np.float32).reshape(x.shape)
    raw[...] = x
    for y in (x[:, :, ::2], x[:, ::-1], x.transpose(1, 0, 2), x.view(Sub), raw,
              x.astype(">f4")):
        assert reductions._reduce_compiled("rows", "sum", y, 1, 2) is None
        got = reduce_by_layout("rows", "sum", y, (2,), 2)
        _bits_equal(np.asarray(got), np.asarray(y).sum(axis=2))
    assert calls == []


def test_the_runner_runs_once_ready_and_numpy_while_off(runners, monkeypatch):
    """The path taken, through ``reduce``: the runner once it is ready; with kernels off
    (REARRANGE_JIT=off) numpy's slabs — both numpy's result, bit for bit."""
    calls = []
    real = rowsums.sum_rows
    monkeypatch.setattr(rowsums, "sum_rows", lambda *args: (calls.append(args), real(*args)))
    x = np.random.default_rng(7).random((8, 64, 28, 56), dtype=np.float32)
    before = ra.get_jit_mode()
    try:
        for mode, ran in (("eager", True), ("off", False)):
            ra.set_jit_mode(mode)
            calls.clear()
            for reduction in ("sum", "mean"):
                got = ra.reduce(x, "b c h w -> b c h", reduction)
                _bits_equal(got, getattr(x, reduction)(axis=3))
            assert bool(calls) is ran, mode
    finally:
        ra.set_jit_mode(before)


def test_the_choice_on_both_sides_of_each_threshold():
    big = -(-reductions.ROWS_MIN_BYTES // (4 * 56))        # the fewest rows of 56 float32
    assert big >= reductions.ROWS_MIN_COUNT
    assert plan_by_layout("sum", (big, 56), f4, 1, 2, (56, 1)) == "rows"
    assert plan_by_layout("mean", (big, 56), f4, 1, 1, (56, 1)) == "rows"
    assert plan_by_layout("sum", (big - 1, 56), f4, 1, 2, (56, 1)) == "numpy"   # too small
    assert plan_by_layout("sum", (big, 56), f8, 1, 2, (56, 1)) == "rows"
    assert plan_by_layout("sum", (big, 56), np.dtype(np.float16), 1, 2, (56, 1)) == "numpy"
    assert plan_by_layout("sum", (big, 56), np.dtype(np.int32), 1, 2, (56, 1)) == "numpy"
    assert plan_by_layout("sum", (big, 56), np.dtype(">f4"), 1, 2, (56, 1)) == "numpy"
    assert plan_by_layout("prod", (big, 56), f4, 1, 2, (56, 1)) == "numpy"
    assert plan_by_layout("sum", (big, 56), f4, 1, 2) == "numpy"        # no strides
    # the fewest rows: long ones of the most bytes
    few = reductions.ROWS_MIN_COUNT
    n = reductions.ROWS_MAX[f4]
    assert few * n * 4 >= reductions.ROWS_MIN_BYTES
    assert plan_by_layout("sum", (few, n), f4, 1, 2, (n, 1)) == "rows"
    assert plan_by_layout("sum", (few - 1, n), f4, 1, 2, (n, 1)) == "numpy"
    # the longest rows, per dtype
    for dtype in (f4, f8):
        n = reductions.ROWS_MAX[dtype]
        rows = max(few, -(-reductions.ROWS_MIN_BYTES // (dtype.itemsize * n)))
        assert plan_by_layout("sum", (rows, n), dtype, 1, 2, (n, 1)) == "rows"
        assert plan_by_layout("sum", (rows, n + 1), dtype, 1, 2, (n + 1, 1)) != "rows"
    # the shortest rows: shorter ones are windows as views
    short = reductions.ROWS_MIN_LENGTH
    assert plan_by_layout("sum", (1 << 16, short), f4, 1, 2, (short, 1)) == "rows"
    assert plan_by_layout("sum", (1 << 16, short - 1), f4, 1, 2, (short - 1, 1)) == "window"
    # rows that are not one contiguous run each, or not one after the other
    assert plan_by_layout("sum", (big, 56), f4, 1, 2, (112, 2)) == "numpy"     # strided
    assert plan_by_layout("sum", (big, 56), f4, 1, 2, (1, big)) == "numpy"     # columns
    assert plan_by_layout("sum", (big, 56), f4, 1, 2, (-56, 1)) == "numpy"     # reversed
    assert plan_by_layout("sum", (big, 56), f4, 1, 2, (28, 1)) == "numpy"      # overlap
    assert plan_by_layout("sum", (big, 56), f4, 1, 2, (60, 1)) == "rows"       # gaps
    assert plan_by_layout("sum", (8, big, 56), f4, 1, 2, (56 * big, 56, 1)) == "rows"
    assert plan_by_layout("sum", (8, big, 56), f4, 1, 2, (56, 448, 1)) != "rows"
    assert plan_by_layout("sum", (big, 7, 8), f4, 2, 2, (56, 8, 1)) == "numpy"  # 2 axes


def test_background_mode_sums_with_numpy_until_the_runner_is_ready(tmp_path):
    """A fresh process, REARRANGE_JIT unset (background) and an empty cache: the first
    sums are numpy's (the caller's thread never compiles nor imports numba), the runner
    is compiled out of the way, and once ready the sums are the runner's, bit for bit."""
    build_tests = pytest.importorskip("test_jit_builds")
    report = build_tests.run("""
        import threading
        from rearrange.kernel import rowsums
        main = threading.get_ident()
        x = np.random.default_rng(8).random((16, 64, 28, 56), dtype=np.float32)
        first = ra.reduce(x, "b c h w -> b c h", "sum")
        exact = [first.tobytes() == x.sum(axis=3).tobytes()]
        numba_in_call = "numba" in sys.modules
        status = [builds.status(rowsums.FAMILY, 4)]
        assert K.wait(600)
        status.append(builds.status(rowsums.FAMILY, 4))
        ran = []
        real = rowsums.sum_rows
        rowsums.sum_rows = lambda *a: (ran.append(threading.get_ident() == main), real(*a))
        for reduction in ("sum", "mean"):
            got = ra.reduce(x, "b c h w -> b c h", reduction)
            exact.append(got.tobytes() == getattr(x, reduction)(axis=3).tobytes())
        print(json.dumps({"exact": exact, "numba_in_call": numba_in_call,
                          "status": status, "ran": bool(ran)}))
    """, tmp_path / "cache")
    assert report == {"exact": [True, True, True], "numba_in_call": False,
                      "status": ["compiling", "ready"], "ran": True}


# --------------------------------------------------------------------------- partials

@st.composite
def views(draw):
    """A view whose last 1-3 axes are reduced: sliced, reversed, permuted; NaN maybe."""
    ndim = draw(st.integers(2, 4))
    shape = tuple(draw(st.integers(1, 7)) for _ in range(ndim))
    dtype = draw(st.sampled_from([np.bool_, np.int16, np.uint8, np.float32, np.float64]))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    base = (rng.random(tuple(n * 2 for n in shape)) * 20 - 10).astype(dtype)
    if dtype in (np.float32, np.float64):
        for _ in range(draw(st.integers(0, 2))):
            base.flat[draw(st.integers(0, base.size - 1))] = np.nan
    steps = tuple(draw(st.sampled_from([1, 2, -1])) for _ in range(ndim))
    view = base[tuple(slice(None, None, s) for s in steps)]
    view = view[tuple(slice(0, n) for n in shape)]
    view = view.transpose(draw(st.permutations(range(ndim))))
    return view, draw(st.integers(1, ndim))


@settings(max_examples=200, deadline=None)
@given(case=views(), reduction=st.sampled_from(["max", "min", "any", "all"]),
       threads=st.integers(2, 3))
def test_partials_equal_numpy(case, reduction, threads):
    y, reduced = case
    axis = tuple(range(y.ndim - reduced, y.ndim))
    for cut in axis:
        if y.shape[cut] < 1:
            continue
        got = reductions._reduce_in_parts(reduction, y, axis, cut, threads)
        expected = getattr(y, reduction)(axis=axis)
        assert type(got) is type(expected)
        np.testing.assert_array_equal(got, expected)        # NaN equals NaN here
        if isinstance(got, np.ndarray):
            _bits_equal(got, expected)


def test_partials_on_both_sides_of_the_choice():
    big = reductions.PARALLEL_MIN_BYTES // 4
    b, c, h, w = 8, 64, 56, big // (8 * 64 * 56) + 1
    chw = (c * h * w, h * w, w, 1)
    # "b c h w -> c": (c, b, h, w) viewed, b outermost in memory and reduced
    per_channel = ((c, b, h, w), (chw[1], chw[0], chw[2], chw[3]))
    # (float32 and float64 maxima over runs are the compiled row maxima's: test_reduce_runs)
    assert plan_by_layout("max", *per_channel[:1], f4, 3, 2, per_channel[1]) == "runs"
    i4 = np.dtype(np.int32)
    assert plan_by_layout("max", *per_channel[:1], i4, 3, 2, per_channel[1]) == "partials"
    assert plan_by_layout("any", *per_channel[:1], f4, 3, 2, per_channel[1]) == "partials"
    assert plan_by_layout("sum", *per_channel[:1], f4, 3, 2, per_channel[1]) == "slabs"
    assert plan_by_layout("max", *per_channel[:1], i4, 3, 1, per_channel[1]) == "numpy"
    # "b c h w -> w" (a kept innermost axis: no slabs) and "b c h w ->" (nothing kept)
    assert plan_by_layout("max", (w, b, c, h), f4, 3, 2, (1, chw[0], chw[1], chw[2])) \
        == "partials"
    assert plan_by_layout("max", (b, c, h, w), f4, 4, 2, chw) == "partials"
    assert plan_by_layout("max", (b, c, h, w), f4, 4, 1, chw) == "numpy"     # one thread
    # "b c h w -> b h w": b kept and outermost: slabs along it
    assert plan_by_layout("max", (b, h, w, c), f4, 1, 2, (chw[0], chw[2], 1, chw[1])) == "slabs"
    # the outermost reduced axis shorter than the thread count, or the input too small
    assert plan_by_layout("max", (2, 1, 2 * c * h, w), f4, 3, 3,
                          (chw[1], chw[0], chw[2], 1)) != "partials"
    assert plan_by_layout("max", (c, b, h, 4), i4, 3, 2, (4 * h, c * h * 4, 4, 1)) == "numpy"


@pytest.mark.parametrize("reduction", ["max", "min", "any", "all"])
def test_per_channel_reductions_equal_einops(reduction, two_threads):
    """Partial results for any and all, and for maxima and minima of integers (float
    maxima over runs are the compiled row maxima's: tests/test_reduce_runs.py)."""
    rng = np.random.default_rng(9)
    x = rng.random((16, 32, 56, 56), dtype=np.float32)
    x[3, 5, 7, 9] = np.nan
    x[0, 31] = 0.0
    if reduction in ("max", "min"):
        x = (np.nan_to_num(x) * 1000).astype(np.int32)
    spy = []
    real = reductions._reduce_in_parts
    try:
        reductions._reduce_in_parts = lambda *a: (spy.append(a[0]), real(*a))[1]
        got = ra.reduce(x, "b c h w -> c", reduction)
    finally:
        reductions._reduce_in_parts = real
    expected = einops.reduce(x, "b c h w -> c", lambda t, axes: getattr(t, reduction)(axis=axes))
    np.testing.assert_array_equal(got, expected)
    assert got.dtype == expected.dtype
    assert spy == [reduction]


def test_partials_keep_the_input(two_threads):
    x = np.random.default_rng(10).random((32, 64, 32, 32), dtype=np.float32)
    before = x.copy()
    got = reduce_by_layout("partials", "max", x.transpose(1, 0, 2, 3), (1, 2, 3), 2)
    np.testing.assert_array_equal(got, x.max(axis=(0, 2, 3)))
    np.testing.assert_array_equal(x, before)


def test_a_runner_token_is_its_units_width():
    """compile_runner's tokens (float ones are gemm's; the row sums' since they run on
    the pool are unsigned): a token must be the unit's width, checked before numba is
    asked for anything."""
    from rearrange.kernel import jit

    with pytest.raises(ValueError, match="float64 token for 4-byte units"):
        jit.compile_runner(rowsums._run_row_sums, 4, token=np.float64)
    assert rowsums.FLOAT_TOKENS == {4: np.float32, 8: np.float64}
