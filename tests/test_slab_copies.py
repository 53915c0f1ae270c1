"""repeat ``copy=True`` and pack on several threads (rearrange.slabs): numpy's copies on
slabs of the output, against einops and numpy, on both sides of every rule.

A spy on the numpy backend's ``in_slabs`` says whether the slab copy ran: from
``2 * SLAB_MIN_BYTES`` of output at two threads or more (the threshold is lowered here so
that small arrays take it), never for object arrays, at one thread, or with no dim to
cut. Inputs come in every layout Hypothesis draws (slices, negative strides, broadcast
stride 0, size-0 and size-1 axes) and dtype (bool, complex and object included), and
are left untouched.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import rearrange as ra
from rearrange import kernel, slabs
from rearrange.backends import ndarray
from rearrange.tensor import Tensor, from_numpy

einops = pytest.importorskip("einops")

DTYPES = ["float32", "float64", "int8", "uint16", "int64", "bool", "complex64",
          "complex128", ">f4", "object"]


@pytest.fixture
def spy(monkeypatch):
    """The slab counts of every slab copy run (an empty list: none ran)."""
    counts: list[int] = []
    real = ndarray.in_slabs

    def spied(work, length, count):
        counts.append(count)
        return real(work, length, count)
    monkeypatch.setattr(ndarray, "in_slabs", spied)
    return counts


@pytest.fixture
def threads():
    """The kernel's thread count, restored after the test."""
    before = kernel.get_num_threads()
    yield kernel.set_num_threads
    kernel.set_num_threads(before)


@pytest.fixture
def small_slabs(monkeypatch):
    """Slab copies from 2 x 64 bytes of output."""
    monkeypatch.setattr(slabs, "SLAB_MIN_BYTES", 64)
    return 64


@pytest.fixture
def no_row_join(monkeypatch):
    """The compiled row assembly (tests/test_rowjoin.py) off: at the shipped slab
    thresholds it takes these outputs (from ROW_JOIN_MIN_BYTES at two threads)."""
    monkeypatch.setattr(ndarray, "ROW_JOIN_MIN_BYTES", 1 << 62)


def values(shape, dtype, rng) -> np.ndarray:
    dtype = np.dtype(dtype)
    raw = rng.integers(-100, 100, size=shape)
    if dtype.hasobject:
        out = np.empty(shape, object)
        out.reshape(-1)[:] = [int(v) for v in raw.reshape(-1)] if raw.size else []
        return out
    if dtype.kind == "c":
        return (raw + 1j * rng.integers(-9, 9, size=shape)).astype(dtype)
    if dtype.kind == "u":
        return np.abs(raw).astype(dtype)
    return raw.astype(dtype)


def assert_same(got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype
    assert got.flags.c_contiguous and got.flags.writeable
    if got.dtype.hasobject:
        assert got.tolist() == want.tolist()
    else:
        assert got.tobytes() == np.ascontiguousarray(want).tobytes()


# ----------------------------------------------------------------------------- repeat

REPEATS = [
    ("b t c -> b t r c", {"r": 4}),                 # #39's case: one repeated axis
    ("h w -> h w r", {"r": 3}),                     # single elements repeated
    ("h w -> r h w", {"r": 3}),                     # whole arrays tiled: slabs of r
    ("h w c -> (h 2) (w 2) c", {}),                 # two repeated axes, merged after
    ("b h w -> (r b) (h s) w", {"r": 2, "s": 2}),
]


@pytest.mark.parametrize("pattern, lengths", REPEATS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_repeat_slabs_equal_einops_on_both_sides(pattern, lengths, dtype, spy, threads,
                                                 small_slabs):
    rng = np.random.default_rng(1)
    ndim = len(pattern.split("->")[0].split())
    x = values((16, 9, 5)[:ndim], dtype, rng)
    kept = x.copy()
    want = einops.repeat(x, pattern, **lengths)
    assert want.nbytes >= 2 * small_slabs
    for count, slabbed in ((2, dtype != "object"), (1, False)):
        threads(count)
        spy.clear()
        got = ra.repeat(x, pattern, copy=True, **lengths)
        assert_same(got, want)
        assert bool(spy) is slabbed
        assert not np.shares_memory(got, x)
    assert_same(x, kept)


def test_repeat_threshold_both_sides(spy, threads, no_row_join):
    """From 2 x SLAB_MIN_BYTES of output at 2 threads: slabs; a byte less: numpy.repeat."""
    threads(2)
    rows = 2 * slabs.SLAB_MIN_BYTES // (4 * 4 * 64 * 4)    # t=4, r=4, c=64, float32
    for b, slabbed in ((rows, True), (rows - 1, False)):
        x = np.random.default_rng(2).random((b, 4, 64), dtype=np.float32)
        spy.clear()
        got = ra.repeat(x, "b t c -> b t r c", r=4, copy=True)
        assert_same(got, np.repeat(x[:, :, None, :], 4, axis=2))
        assert spy == ([2] if slabbed else [])


def test_repeat_slab_count_is_capped_by_the_axis_and_the_threads(spy, threads, small_slabs):
    x = np.arange(2 * 40, dtype=np.float64).reshape(2, 40)
    for count, expected in ((8, 2), (3, 2), (2, 2), (1, None)):
        threads(count)
        spy.clear()
        assert_same(ra.repeat(x, "a b -> a b r", r=3, copy=True),
                    einops.repeat(x, "a b -> a b r", r=3))
        assert spy == ([] if expected is None else [expected])
    # a leading axis of length 1 is not cut: the next one is
    threads(4)
    spy.clear()
    y = np.arange(40.0).reshape(1, 40)
    assert_same(ra.repeat(y, "a b -> a b r", r=3, copy=True),
                einops.repeat(y, "a b -> a b r", r=3))
    assert spy == [4]


@st.composite
def strided_inputs(draw):
    """A (possibly) non-contiguous view of shape 3-d with lengths 0-5: slices with steps,
    negative strides, a broadcast (stride-0) axis, any of DTYPES."""
    shape = tuple(draw(st.integers(0, 5)) for _ in range(3))
    dtype = draw(st.sampled_from(DTYPES))
    steps = tuple(draw(st.sampled_from([1, 2, -1, -2])) for _ in range(3))
    base = values(tuple(max(n, 1) * abs(s) for n, s in zip(shape, steps)), dtype,
                  np.random.default_rng(draw(st.integers(0, 99))))
    view = base[tuple(slice(None, None, s) for s in steps)]
    view = view[tuple(slice(0, n) for n in shape)]
    broadcast = draw(st.sampled_from([None, 0, 1, 2]))
    if broadcast is not None and view.shape[broadcast] > 0:
        one = view[(slice(None),) * broadcast + (slice(0, 1),)]
        view = np.broadcast_to(one, view.shape)
    return view


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(x=strided_inputs(), pattern_lengths=st.sampled_from(REPEATS[1:2] + [
    ("a b c -> a r b c", {"r": 3}), ("a b c -> (a r) b (c s)", {"r": 2, "s": 3}),
    ("a b c -> c b a r", {"r": 2})]), count=st.sampled_from([1, 2, 3]))
def test_repeat_layouts_equal_einops(x, pattern_lengths, count, spy, threads, small_slabs):
    pattern, lengths = pattern_lengths
    if len(pattern.split("->")[0].split()) == 2:
        x = x[:, :, 0] if x.shape[2] else np.zeros(x.shape[:2], x.dtype)
    kept = x.copy()
    threads(count)
    spy.clear()
    got = ra.repeat(x, pattern, copy=True, **lengths)
    assert_same(got, einops.repeat(x, pattern, **lengths))
    if x.dtype.hasobject or count == 1 or got.size == 0:
        assert not spy
    if x.dtype.hasobject:
        assert kept.tolist() == x.tolist()
    else:
        assert kept.tobytes() == np.ascontiguousarray(x).tobytes()


def test_explain_says_which_repeat_copy_runs(threads, small_slabs):
    x = np.zeros((8, 16), np.float32)
    threads(2)
    plan = ra.explain(x, "h w -> h w r", op="repeat", r=4, copy=True)
    reason = next(s for s in plan.steps if s.is_copy).kernel.reason
    assert reason.startswith("numpy.copyto of the broadcast view in 2 slabs along dim 0")
    threads(1)
    plan = ra.explain(x, "h w -> h w r", op="repeat", r=4, copy=True)
    assert next(s for s in plan.steps if s.is_copy).kernel.reason.startswith(
        "numpy.repeat along dim 2")
    threads(2)      # object arrays: numpy.repeat whatever the size
    plan = ra.explain(x.astype(object), "h w -> h w r", op="repeat", r=4, copy=True)
    assert next(s for s in plan.steps if s.is_copy).kernel.reason.startswith(
        "numpy.repeat along dim 2")


# ----------------------------------------------------------------------------- pack

PACKS = [
    # (shapes, pattern): one dim in * (numpy.concatenate per slab), several (assigned)
    ([(6, 5, 4), (6, 5, 2), (6, 5, 7)], "b t *"),
    ([(6, 5, 3, 2), (6, 5), (6, 5, 4)], "b t *"),
    ([(1, 16, 8), (1, 16, 2, 2)], "a b *"),         # leading length 1: cut along b
    ([(6, 2, 3, 4), (6, 4)], "b * c"),
]


@pytest.mark.parametrize("shapes, pattern", PACKS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_pack_slabs_equal_einops_on_both_sides(shapes, pattern, dtype, spy, threads,
                                               small_slabs):
    rng = np.random.default_rng(3)
    xs = [values(shape, dtype, rng) for shape in shapes]
    kept = [x.copy() for x in xs]
    want, want_shapes = einops.pack(xs, pattern)
    assert want.nbytes >= 2 * small_slabs
    for count, slabbed in ((2, dtype != "object"), (1, False)):
        threads(count)
        spy.clear()
        got, got_shapes = ra.pack(xs, pattern)
        assert_same(got, want)
        assert [tuple(s) for s in got_shapes] == [tuple(s) for s in want_shapes]
        assert bool(spy) is slabbed
    for x, k in zip(xs, kept):
        assert x.tolist() == k.tolist()


def test_pack_threshold_both_sides(spy, threads, no_row_join):
    threads(2)
    rows = 2 * slabs.SLAB_MIN_BYTES // (8 * 64 * 4)        # t=8, 64 packed, float32
    for b, slabbed in ((rows, True), (rows - 1, False)):
        rng = np.random.default_rng(4)
        xs = [rng.random((b, 8, w), dtype=np.float32) for w in (16, 8, 40)]
        spy.clear()
        got, _ = ra.pack(xs, "b t *")
        assert_same(got, np.concatenate(xs, axis=2))
        assert spy == ([2] if slabbed else [])


def test_pack_without_a_dim_before_the_packed_one_is_one_thread(spy, threads, small_slabs):
    threads(2)
    xs = [np.arange(12.0).reshape(3, 4), np.arange(8.0).reshape(2, 4)]
    got, _ = ra.pack(xs, "* c")
    assert_same(got, np.concatenate(xs))
    assert spy == []


@pytest.mark.parametrize("dtypes", [("float32", "float64"), ("int8", "float32"),
                                    ("bool", "int16"), ("complex64", "float64")])
def test_pack_slabs_cast_as_einops(dtypes, spy, threads, small_slabs):
    threads(2)
    rng = np.random.default_rng(5)
    xs = [values((6, 4, 3), dtypes[0], rng), values((6, 4, 2, 2), dtypes[1], rng)]
    got, _ = ra.pack(xs, "b t *")
    want, _ = einops.pack(xs, "b t *")
    assert_same(got, want)
    assert spy == [2]


def test_pack_slabs_of_tensors(spy, threads, small_slabs):
    threads(2)
    xs = [np.arange(60.0).reshape(6, 10), np.arange(36.0).reshape(6, 6)]
    got, _ = ra.pack([from_numpy(x) for x in xs], "b *")
    assert isinstance(got, Tensor)
    assert np.array_equal(got.numpy(), np.concatenate(xs, axis=1))
    assert spy == [2]


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(first=strided_inputs(), second=strided_inputs(), count=st.sampled_from([1, 2, 3]),
       split=st.booleans())
def test_pack_layouts_equal_einops(first, second, count, split, spy, threads, small_slabs):
    # the second input takes the first's leading dims, its own packed part
    b, t = first.shape[:2]
    second = np.broadcast_to(second.reshape(-1)[:1], (b, t) + (2,) * (1 + split)) \
        if second.size else values((b, t) + (2,) * (1 + split), first.dtype,
                                   np.random.default_rng(0))
    xs = [first, second]
    kept = [x.copy() for x in xs]
    threads(count)
    spy.clear()
    got, _ = ra.pack(xs, "b t *")
    # numpy's concatenation, as einops.pack makes it (which cannot reshape a size-0
    # input with -1)
    want = np.concatenate([x.reshape(b, t, int(np.prod(x.shape[2:]))) for x in xs], axis=2)
    assert_same(got, want)
    if got.dtype.hasobject or count == 1 or got.size == 0:
        assert not spy
    for x, k in zip(xs, kept):
        assert x.tolist() == k.tolist()


# ----------------------------------------------------------------------------- slabs


def test_in_slabs_covers_the_range_once_and_raises_after_every_slab():
    seen: list[tuple[int, int]] = []
    lock = threading.Lock()

    def work(lo, hi):
        with lock:
            seen.append((lo, hi))
    slabs.in_slabs(work, 10, 3)
    assert sorted(seen) == [(k, k + 1) for k in range(10)]       # 10 chunks of 1 at most
    seen.clear()
    slabs.in_slabs(work, 100, 2)
    bounds = slabs.slab_bounds(100, 2 * slabs.CHUNKS_PER_THREAD)
    assert sorted(seen) == list(zip(bounds, bounds[1:]))
    finished: list[int] = []

    def failing(lo, hi):
        if lo == 2:
            raise ValueError(f"slab {lo}")
        with lock:
            finished.append(lo)
    with pytest.raises(ValueError, match="slab 2"):
        slabs.in_slabs(failing, 8, 2)
    assert sorted(finished) == [0, 1, 3, 4, 5, 6, 7]


@pytest.mark.parametrize("nbytes, length, threads, expected", [
    (0, 10, 2, 1), (2 * slabs.SLAB_MIN_BYTES - 1, 10, 2, 1),
    (2 * slabs.SLAB_MIN_BYTES, 10, 2, 2), (10 * slabs.SLAB_MIN_BYTES, 3, 8, 3),
    (10 * slabs.SLAB_MIN_BYTES, 10, 1, 1)])
def test_slab_threads(nbytes, length, threads, expected):
    assert slabs.slab_threads(nbytes, length, threads) == expected
