"""Pack along a ``*`` and repeat inside a row by the compiled row assembly
(rearrange/kernel/rowjoin.py, family "row-join"), routed from numpy's lowering
(rearrange/backends/ndarray.py): numpy's own results, byte for byte.

The oracles are numpy's ``concatenate`` / ``repeat`` and einops. Which path ran is read
from a spy on the runner's entry (``rowjoin.join_rows``), never from a timing.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import rearrange as ra
from rearrange import kernel
from rearrange.backends import ndarray
from rearrange.backends.ndarray import RepeatRows, repeat_rows, row_join_threads
from rearrange.kernel import builds, rowjoin
from rearrange.kernel import threads as kthreads

einops = pytest.importorskip("einops")

DTYPES = [np.uint8, np.int16, np.float32, np.float64, np.complex128, np.bool_]


@pytest.fixture(scope="module")
def runner():
    """The row-join runner, compiled or loaded here; skipped where numba cannot run."""
    try:
        return builds.build_here((rowjoin.FAMILY, rowjoin.UNIT))
    except Exception as error:      # noqa: BLE001 — numba unavailable here
        pytest.skip(f"no row-join runner: {error}")


@pytest.fixture
def joins(monkeypatch):
    """The runner's calls, as (rows, row bytes, segments, threads), the runner still
    running them."""
    calls = []
    real = rowjoin.join_rows

    def spy(run, out, segments, threads, streaming=None):
        calls.append((out.shape[0], out.nbytes // max(1, out.shape[0]),
                      [tuple(s) for s in segments], threads))
        return real(run, out, segments, threads, streaming)
    monkeypatch.setattr(rowjoin, "join_rows", spy)
    return calls


def _anywhere(monkeypatch) -> None:
    """The row assembly for outputs of any size and rows (its thresholds at their
    least): what the layouts and the runner do, whatever the thresholds say."""
    monkeypatch.setattr(ndarray, "ROW_JOIN_MIN_BYTES", 0)
    monkeypatch.setattr(ndarray, "ROW_JOIN_ONE_THREAD_MIN_BYTES", 0)
    monkeypatch.setattr(ndarray, "ROW_JOIN_MIN_ROWS", 1)
    monkeypatch.setattr(ndarray, "ROW_JOIN_MIN_SEGMENT_BYTES", 1)


@pytest.fixture
def anywhere(monkeypatch):
    _anywhere(monkeypatch)


def _forced(monkeypatch, nt: bool, threads: int) -> list:
    """The hypothesis tests' set-up (one context per example): the row assembly
    anywhere, streaming stores or not, ``threads`` threads; returns the runner's calls."""
    _anywhere(monkeypatch)
    monkeypatch.setattr(rowjoin, "NONTEMPORAL_MIN_BYTES", 0 if nt else 1 << 62)
    monkeypatch.setattr(kthreads, "_num_threads", threads)
    calls = []
    real = rowjoin.join_rows
    monkeypatch.setattr(rowjoin, "join_rows", lambda *a: (calls.append(a), real(*a))[1])
    return calls


@pytest.fixture
def threads_restored():
    before = (kernel.get_num_threads(), ra.get_jit_mode())
    yield
    kernel.set_num_threads(before[0])
    ra.set_jit_mode(before[1])


def _values(rng, shape, dtype) -> np.ndarray:
    """Values of ``dtype`` whose every byte pattern matters (complex parts, bools)."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    if dtype.kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, shape, endpoint=True).astype(dtype)


def _shifted(x: np.ndarray, shift: int) -> np.ndarray:
    """``x``'s values at an address ``shift`` items past a 64-byte boundary (modulo 64
    bytes): aligned to its items, not to a line."""
    buffer = np.empty(x.nbytes + 128, np.uint8)
    start = (-buffer.__array_interface__["data"][0]) % 64 + (shift * x.itemsize) % 64
    view = buffer[start:start + x.nbytes].view(x.dtype).reshape(x.shape)
    view[...] = x
    return view


def _unaligned(x: np.ndarray) -> np.ndarray:
    """``x``'s values one byte past an item boundary (numpy's ``aligned`` flag off)."""
    buffer = np.zeros(x.nbytes + 1, np.uint8)[1:].view(x.dtype).reshape(x.shape)
    buffer[...] = x
    assert not buffer.flags.aligned
    return buffer


# ---------------------------------------------------------------------- the runner itself


@settings(max_examples=150, deadline=None)
@given(rows=st.integers(1, 70), sizes=st.lists(st.integers(0, 300), min_size=1, max_size=4),
       times=st.lists(st.integers(1, 4), min_size=4, max_size=4),
       gaps=st.lists(st.integers(0, 70), min_size=4, max_size=4),
       shift=st.integers(0, 63), nt=st.booleans(), threads=st.integers(1, 3))
@example(rows=3, sizes=[256, 128, 384], times=[1, 1, 1, 1], gaps=[0, 0, 0, 0], shift=0,
         nt=True, threads=2)
@example(rows=5, sizes=[1], times=[4, 1, 1, 1], gaps=[0, 0, 0, 0], shift=63, nt=True,
         threads=1)
def test_join_rows_writes_each_row_as_its_segments(runner, rows, sizes, times, gaps, shift,
                                                   nt, threads):
    """Any segment sizes (0 to 300 bytes: lines split between segments, tails of every
    length), repeat counts, gaps between the source rows, a destination at any offset
    from a line, streaming or regular stores (forced: the runner takes any alignment,
    whatever ``streams`` would choose), 1-3 threads: each output row is its
    segments' bytes in order (numpy's concatenate of the same slices), the bytes around
    the output untouched, the sources unchanged."""
    _check_join_rows(runner, rows, sizes, times, gaps, shift, threads, nt)


def _check_join_rows(runner, rows, sizes, times, gaps, shift, threads, nt):
    rng = np.random.default_rng(rows * 7 + len(sizes))
    sources = [rng.integers(0, 256, (rows, n + gap), dtype=np.uint8)
               for n, gap in zip(sizes, gaps)]
    kept = [s.copy() for s in sources]
    row_bytes = sum(n * t for n, t in zip(sizes, times))
    buffer = rng.integers(0, 256, rows * row_bytes + 128, dtype=np.uint8)
    start = (-buffer.__array_interface__["data"][0]) % 64 + shift
    around = buffer.copy()
    out = buffer[start:start + rows * row_bytes].reshape(rows, row_bytes)
    segments = [(s.__array_interface__["data"][0], s.strides[0], n, t)
                for s, n, t in zip(sources, sizes, times)]
    rowjoin.join_rows(runner, out, segments, threads, streaming=nt)
    expected = np.concatenate([np.tile(s[:, :n], (1, t)) for s, n, t in
                               zip(sources, sizes, times)], axis=1)
    assert out.tobytes() == expected.tobytes()
    assert buffer[:start].tobytes() == around[:start].tobytes()
    assert buffer[start + out.size:].tobytes() == around[start + out.size:].tobytes()
    for s, k in zip(sources, kept):
        assert s.tobytes() == k.tobytes()


def test_join_rows_takes_a_row_stride_of_zero_and_refuses_a_wrong_fill(runner):
    """Stride 0: every row the same bytes (a tile); segments that do not add up to the
    row are an error before anything is written; an empty output writes nothing."""
    source = np.arange(200, dtype=np.uint8)
    out = np.empty((300, 400), np.uint8)
    rowjoin.join_rows(runner, out, [(source.__array_interface__["data"][0], 0, 200, 2)], 2)
    np.testing.assert_array_equal(out, np.tile(source, (300, 2)))
    with pytest.raises(ValueError, match="do not fill"):
        rowjoin.join_rows(runner, out, [(source.__array_interface__["data"][0], 0, 200, 1)], 2)
    rowjoin.join_rows(runner, np.empty((0, 5), np.uint8), [], 2)


@pytest.mark.parametrize("spin", [0.0, 200e-6], ids=["sleeping", "spinning"])
def test_through_sleeping_and_spinning_workers(runner, monkeypatch, spin, joins):
    """The runner on a worker woken from the pool's queue and on one spinning on its
    mailbox (its native loop calls the runner): every row written, many calls over (the
    pool's memory reused), a pack and a repeat taking turns."""
    monkeypatch.setattr(kthreads, "_spin", spin)
    monkeypatch.setattr(kthreads, "_num_threads", 2)
    rng = np.random.default_rng(5)
    v = _values(rng, (16, 256, 64), np.float32)          # 4 MiB out
    parts = [_values(rng, (16, 512, n), np.float32) for n in (64, 32, 96)]   # 6 MiB
    expected_repeat = np.repeat(v[:, :, None], 4, axis=2)
    expected_pack = np.concatenate(parts, axis=2)
    for _ in range(12):
        assert ra.repeat(v, "b t c -> b t r c", r=4, copy=True).tobytes() == \
            expected_repeat.tobytes()
        packed, _ = ra.pack(parts, "b t *")
        assert packed.tobytes() == expected_pack.tobytes()
    assert len(joins) == 24 and {call[3] for call in joins} == {2}


# ---------------------------------------------------------------------- the layouts


def test_repeat_rows_of_the_layouts():
    f4 = 4
    # "b t c -> b t r c" on (64, 256, 64): rows of b t, the source row 4 times
    assert repeat_rows((64, 256, 4, 64), (65536, 256, 0, 4), f4) == \
        RepeatRows(16384, 256, 256, 4, 1024)
    # "b t c -> b r t c": rows of b, each the (t c) block r times
    assert repeat_rows((8, 3, 16, 64), (4096, 0, 256, 4), f4) == \
        RepeatRows(8, 4096, 4096, 3, 12288)
    # "h w -> (r h) w": nothing outside the repeats: they are the rows (stride 0)
    assert repeat_rows((5, 16, 64), (0, 256, 4), f4) == RepeatRows(5, 0, 4096, 1, 4096)
    # two repeated axes inside a row: their product
    assert repeat_rows((8, 2, 3, 64), (256, 0, 0, 4), f4) == RepeatRows(8, 256, 256, 6, 1536)
    # a sliced input (rows 1 KiB apart, 256 B each): still rows of one stride
    assert repeat_rows((4, 16, 4, 64), (16384, 1024, 0, 4), f4) == \
        RepeatRows(64, 1024, 256, 4, 1024)
    # size-1 dims are no obstacle
    assert repeat_rows((1, 8, 1, 4, 64), (0, 256, 7, 0, 4), f4) == RepeatRows(8, 256, 256, 4, 1024)
    # not rows of the assembly: single elements repeated ("c -> (c r)"), a plain copy,
    # outer axes that do not fuse, a repeat outside the rows, an empty view
    assert repeat_rows((64, 4), (4, 0), f4) is None
    assert repeat_rows((8, 64), (256, 4), f4) is None
    assert repeat_rows((8, 16, 4, 64), (8192, 256, 0, 4), f4) is None
    assert repeat_rows((3, 8, 64), (0, 256, 4), f4) == RepeatRows(3, 0, 2048, 1, 2048)
    assert repeat_rows((3, 8, 2, 64), (0, 256, 0, 4), f4) is None
    assert repeat_rows((0, 4, 64), (256, 0, 4), f4) is None


def test_row_join_threads_on_both_sides_of_each_threshold():
    big, rows = ndarray.ROW_JOIN_MIN_BYTES, ndarray.ROW_JOIN_MIN_ROWS
    one = ndarray.ROW_JOIN_ONE_THREAD_MIN_BYTES
    for op in ("pack", "repeat"):
        assert row_join_threads(op, big, rows, 2) == 2
        assert row_join_threads(op, big, rows, 3) == 3
        assert row_join_threads(op, big - 1, rows, 2) == 0
        assert row_join_threads(op, big, rows - 1, 2) == 0
        assert row_join_threads(op, 1 << 40, rows - 1, 2) == 0
    assert row_join_threads("pack", one, rows, 1) == 1
    assert row_join_threads("pack", one - 1, rows, 1) == 0
    assert row_join_threads("repeat", 1 << 40, rows, 1) == 0   # numpy.repeat at one thread


def test_the_shortest_segments_on_both_sides(runner, joins, threads_restored):
    """Segments of ROW_JOIN_MIN_SEGMENT_BYTES (8: two float32) go to the runner, one
    byte less... a float32 each (4 bytes) stays numpy's (its loops are faster there);
    an empty input is no segment too short."""
    kernel.set_num_threads(2)
    rng = np.random.default_rng(4)
    for c, taken in ((2, True), (1, False)):
        v = _values(rng, (1 << 16, 1, c), np.float32)           # 2 or 1 MiB out
        joins.clear()
        assert ra.repeat(v, "b t c -> b t r c", r=4, copy=True).tobytes() == \
            np.repeat(v[:, :, None], 4, 2).tobytes()
        assert len(joins) == taken
        parts = [_values(rng, (1 << 16, w), np.float32) for w in (c, 4, 0)]
        joins.clear()
        assert ra.pack(parts, "b *")[0].tobytes() == np.concatenate(parts, axis=1).tobytes()
        assert len(joins) == taken


# ---------------------------------------------------------------------- through the API


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_repeat_and_pack_of_every_dtype_at_the_shipped_thresholds(runner, joins, dtype,
                                                                  threads_restored):
    """At 1 and 2 threads, just above and just below ROW_JOIN_MIN_BYTES (and pack's
    one-thread threshold): numpy's repeat / concatenate and einops' results, byte for
    byte; the runner exactly where the thresholds say; the inputs untouched."""
    rng = np.random.default_rng(np.dtype(dtype).itemsize)
    itemsize = np.dtype(dtype).itemsize
    c = 256 // itemsize                     # 256-byte source rows
    for threads in (1, 2):
        kernel.set_num_threads(threads)
        for limit in (ndarray.ROW_JOIN_MIN_BYTES, ndarray.ROW_JOIN_ONE_THREAD_MIN_BYTES):
            for rows in (limit // 1024, limit // 1024 - 1):     # 4 x 256 B a row
                joins.clear()
                v = _values(rng, (rows, 1, c), dtype)
                before = v.copy()
                got = ra.repeat(v, "b t c -> b t r c", r=4, copy=True)
                assert got.tobytes() == np.repeat(v[:, :, None], 4, axis=2).tobytes()
                np.testing.assert_array_equal(got, einops.repeat(v, "b t c -> b t r c", r=4))
                assert v.tobytes() == before.tobytes()
                taken = threads == 2 and rows * 1024 >= ndarray.ROW_JOIN_MIN_BYTES
                assert len(joins) == taken, (threads, rows)
            # pack: rows of 3 parts (1 + 2 + 1 x 256 B)
            for rows in (limit // 1024, limit // 1024 - 1):
                joins.clear()
                parts = [_values(rng, (rows, k * c), dtype) for k in (1, 2, 1)]
                before = [p.copy() for p in parts]
                packed, shapes = ra.pack(parts, "b *")
                assert packed.tobytes() == np.concatenate(parts, axis=1).tobytes()
                np.testing.assert_array_equal(packed, einops.pack(parts, "b *")[0])
                assert all(p.tobytes() == b.tobytes() for p, b in zip(parts, before))
                minimum = ndarray.ROW_JOIN_MIN_BYTES if threads == 2 else \
                    ndarray.ROW_JOIN_ONE_THREAD_MIN_BYTES
                assert len(joins) == (rows * 1024 >= minimum), (threads, rows)


@st.composite
def pack_cases(draw):
    """Inputs of a pack along ``*`` (one or two dims in it, or none), of one dtype:
    size-0 and size-1 dims, row bytes of any length, starting anywhere a slice puts
    them, some of them sliced (rows of the assembly whose last dim is not in the packed
    part, else not) or reversed along their first dim (a negative row stride)."""
    dtype = draw(st.sampled_from(DTYPES))
    lead = tuple(draw(st.lists(st.integers(0, 5), min_size=1, max_size=2)))
    tail = tuple(draw(st.lists(st.integers(1, 3), min_size=0, max_size=1)))
    count = draw(st.integers(1, 4))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    parts, ways = [], []
    for _ in range(count):
        packed = tuple(draw(st.lists(st.integers(0, 9), min_size=0, max_size=2)))
        x = _values(rng, lead + packed + tail, dtype)
        way = draw(st.sampled_from(["plain", "shifted", "sliced", "reversed"]))
        if way == "shifted":
            x = _shifted(x, draw(st.integers(0, 63)))
        elif way == "sliced":
            wide = _values(rng, x.shape[:-1] + (x.shape[-1] + 3,), dtype)
            wide[..., 1:x.shape[-1] + 1] = x
            x = wide[..., 1:x.shape[-1] + 1]
        elif way == "reversed":
            x = x[::-1].copy()[::-1]
        parts.append(x)
        ways.append(way)
    pattern = " ".join([f"l{k}" for k in range(len(lead))] + ["*"] +
                       [f"t{k}" for k in range(len(tail))])
    return parts, pattern, len(lead), len(tail), ways


@settings(max_examples=120, deadline=None)
@given(case=pack_cases(), threads=st.integers(1, 3), nt=st.booleans())
def test_pack_equals_numpy_whatever_the_layout(runner, case, threads, nt):
    """Forced (every size a row-assembly size): numpy's concatenate of the same inputs
    (each reshaped to one packed dim), byte for byte; the runner wherever every input is
    rows of it (exact, aligned, leading dims one stride apart, its part of a row
    contiguous) and the output not empty, numpy's way for the others; inputs untouched."""
    parts, pattern, axis, ntail, ways = case
    before = [p.copy() for p in parts]
    with pytest.MonkeyPatch.context() as monkeypatch:
        calls = _forced(monkeypatch, nt, threads)
        packed, shapes = ra.pack(parts, pattern)
    lead = parts[0].shape[:axis]
    tail = parts[0].shape[parts[0].ndim - ntail:] if ntail else ()
    flat = [p.reshape(lead + (int(np.prod(p.shape[axis:p.ndim - ntail])),) + tail)
            for p in parts]
    expected = np.concatenate(flat, axis=axis)
    assert packed.shape == expected.shape and packed.tobytes() == expected.tobytes()
    for p, b in zip(parts, before):
        assert p.tobytes() == b.tobytes()
    eligible = packed.size > 0 and all(
        ndarray._pack_segment(p.shape, p.strides, axis, p.itemsize) is not None
        for p in parts)
    assert len(calls) == eligible
    if packed.size > 0 and set(ways) <= ({"plain", "shifted", "reversed"} if axis == 1
                                         else {"plain", "shifted"}):
        assert len(calls) == 1      # C-contiguous inputs (or reversed rows): always rows


@st.composite
def repeat_cases(draw):
    """A repeat whose new axis sits inside a row (or outside every axis: a tile), of
    any dtype, with size-0/1 dims, odd row bytes and shifted or sliced inputs."""
    dtype = draw(st.sampled_from(DTYPES))
    b, t, c = draw(st.integers(0, 5)), draw(st.integers(1, 6)), draw(st.integers(1, 40))
    r = draw(st.integers(1, 5))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    x = _values(rng, (b, t, c), dtype)
    way = draw(st.sampled_from(["plain", "shifted", "sliced"]))
    if way == "shifted":
        x = _shifted(x, draw(st.integers(0, 63)))
    elif way == "sliced":
        wide = _values(rng, (b, t, c + 5), dtype)
        wide[:, :, 2:c + 2] = x
        x = wide[:, :, 2:c + 2]
    pattern = draw(st.sampled_from(["b t c -> b t r c", "b t c -> b r t c",
                                    "b t c -> r b t c", "b t c -> b t (r c)",
                                    "b t c -> b t (c r)"]))
    return x, pattern, r


@settings(max_examples=120, deadline=None)
@given(case=repeat_cases(), threads=st.integers(1, 3), nt=st.booleans())
@example(case=(np.ones((0, 2, 3), np.float32), "b t c -> b t r c", 3), threads=2, nt=True)
def test_repeat_equals_numpy_whatever_the_layout(runner, case, threads, nt):
    """Forced (every size a row-assembly size, one thread included): einops' result,
    byte for byte; the runner where the view is rows of it, at two threads or more
    (numpy.repeat at one); the input untouched."""
    x, pattern, r = case
    before = x.copy()
    with pytest.MonkeyPatch.context() as monkeypatch:
        calls = _forced(monkeypatch, nt, threads)
        got = ra.repeat(x, pattern, r=r, copy=True)
    expected = einops.repeat(x, pattern, r=r)
    assert got.shape == expected.shape and got.tobytes() == expected.tobytes()
    assert x.tobytes() == before.tobytes()
    if pattern.endswith("(c r)") and r > 1 or x.size == 0 or threads == 1:
        assert calls == []          # single elements repeated, nothing to write, numpy.repeat
    elif pattern == "b t c -> b t r c" and r > 1 and x.shape[2] > 1:
        assert len(calls) == 1      # rows of b t: always (c = 1: single elements repeated)


def test_arrays_the_runner_cannot_take_keep_numpys_way(runner, joins, monkeypatch,
                                                       threads_restored):
    """A subclass, unaligned or byte-swapped data, objects, a pack whose inputs need a
    cast, a numpy scalar among them: numpy's way (never the runner), numpy's result;
    then a plain array of the same pattern: the runner (the caches never cleared)."""
    kernel.set_num_threads(2)

    class Sub(np.ndarray):
        pass
    rng = np.random.default_rng(9)
    x = _values(rng, (64, 16, 64), np.float32)                 # 1 MiB out: the runner's
    raw = np.zeros(x.nbytes + 1, np.uint8)[1:].view(np.float32).reshape(x.shape)
    raw[...] = x
    for y in (x.view(Sub), raw, x.astype(">f4"), x.astype(object)):
        before = np.array(y)
        got = ra.repeat(y, "b t c -> b t r c", r=4, copy=True)
        assert np.array_equal(np.asarray(got), np.repeat(np.asarray(y)[:, :, None], 4, 2))
        assert np.array_equal(np.asarray(y), before)
    parts = [_values(rng, (512, 4, n), np.float32) for n in (64, 32, 96)]   # 1.5 MiB
    for items in ([parts[0], parts[1].astype(np.float64), parts[2]],
                  [parts[0].view(Sub), parts[1], parts[2]],
                  [parts[0], parts[1], parts[2].astype(">f4")],
                  [parts[0], parts[1], _unaligned(parts[2])],
                  [parts[0], parts[1][:, :, ::-1], parts[2]],
                  [p.astype(object) for p in parts]):
        before = [np.array(i) for i in items]
        got, _ = ra.pack(items, "b t *")
        assert np.array_equal(np.asarray(got), np.concatenate(
            [np.asarray(i) for i in items], axis=2).astype(got.dtype))
        assert all(np.array_equal(np.asarray(i), b) for i, b in zip(items, before))
    assert joins == []
    ra.repeat(x, "b t c -> b t r c", r=4, copy=True)
    ra.pack(parts, "b t *")
    assert len(joins) == 2


def test_mixed_calls_share_the_caches(runner, joins, anywhere, threads_restored):
    """dtypes, layouts, thread counts and modes mixed in one process, one call after
    another on the same plans (nothing cleared): each call numpy's result, the runner
    exactly where its rules say."""
    rng = np.random.default_rng(12)
    arrays = [_values(rng, (9, 7, 33), np.int16), _values(rng, (9, 7, 33), np.complex128),
              _values(rng, (9, 7, 33), np.bool_),
              _values(rng, (9, 7, 40), np.float32)[:, :, 3:36]]
    for step in range(3):
        for threads in (2, 1):
            kernel.set_num_threads(threads)
            for mode in ("eager", "off"):
                ra.set_jit_mode(mode)
                for x in arrays:
                    joins.clear()
                    got = ra.repeat(x, "b t c -> b t r c", r=3, copy=True)
                    assert got.tobytes() == np.repeat(x[:, :, None], 3, 2).tobytes()
                    assert len(joins) == (mode == "eager" and threads == 2)
                    joins.clear()
                    packed, _ = ra.pack([x, x[:, :, :5], np.ascontiguousarray(x)], "b t *")
                    assert packed.tobytes() == np.concatenate(
                        [x, x[:, :, :5], x], axis=2).tobytes()
                    assert len(joins) == (mode == "eager")


def test_the_runner_not_ready_is_numpys_way(runner, joins, monkeypatch, threads_restored):
    """While builds has no runner to give (compiling, loading: runner_for says None),
    pack and repeat are numpy's ways at once, with numpy's results; then the runner."""
    kernel.set_num_threads(2)
    real = builds.runner_for
    monkeypatch.setattr(builds, "runner_for", lambda family, unit: None
                        if family == rowjoin.FAMILY else real(family, unit))
    rng = np.random.default_rng(2)
    v = _values(rng, (64, 64, 64), np.float32)                       # 4 MiB out
    parts = [_values(rng, (64, 64, n), np.float32) for n in (64, 128)]
    assert ra.repeat(v, "b t c -> b t r c", r=4, copy=True).tobytes() == \
        np.repeat(v[:, :, None], 4, 2).tobytes()
    assert ra.pack(parts, "b t *")[0].tobytes() == np.concatenate(parts, axis=2).tobytes()
    assert joins == []
    monkeypatch.setattr(builds, "runner_for", real)
    assert ra.repeat(v, "b t c -> b t r c", r=4, copy=True).tobytes() == \
        np.repeat(v[:, :, None], 4, 2).tobytes()
    assert ra.pack(parts, "b t *")[0].tobytes() == np.concatenate(parts, axis=2).tobytes()
    assert len(joins) == 2


def test_explain_says_which_copy_runs(runner, threads_restored):
    """explain of a repeat names the row assembly where it runs (and what runs while it
    is not ready), numpy's copies elsewhere: below the threshold, at one thread, with
    kernels off."""
    v = np.zeros((64, 256, 64), np.float32)
    kernel.set_num_threads(2)
    text = str(ra.explain(v, "b t c -> b t r c", op="repeat", r=4, copy=True))
    assert "row-join, 1-byte units, 2 threads: the compiled row assembly: 16,384 rows" in text
    assert "streaming stores where the result is 64-byte aligned" in text
    assert "now    the compiled kernel" in text
    ra.set_jit_mode("off")
    text = str(ra.explain(v, "b t c -> b t r c", op="repeat", r=4, copy=True))
    assert "numpy.copyto in 2 slabs: kernels are off" in text
    ra.set_jit_mode("eager")
    small = np.zeros((8, 16, 64), np.float32)
    text = str(ra.explain(small, "b t c -> b t r c", op="repeat", r=4, copy=True))
    assert "row-join" not in text and "numpy.repeat along dim 2" in text
    kernel.set_num_threads(1)
    text = str(ra.explain(v, "b t c -> b t r c", op="repeat", r=4, copy=True))
    assert "row-join" not in text and "numpy.repeat along dim 2" in text


def test_background_mode_copies_with_numpy_until_the_runner_is_ready(tmp_path):
    """A fresh process, REARRANGE_JIT unset (background) and an empty cache: the first
    pack and repeat are numpy's (the caller's thread never compiles nor imports numba),
    the runner is compiled out of the way, and once ready the results are its."""
    build_tests = pytest.importorskip("test_jit_builds")
    report = build_tests.run("""
        from rearrange.kernel import rowjoin
        ra.set_num_threads(2)
        v = np.random.default_rng(8).random((64, 64, 64), dtype=np.float32)
        parts = [v, v[:, :, :32].copy()]
        want_repeat = np.repeat(v[:, :, None], 4, 2).tobytes()
        want_pack = np.concatenate(parts, axis=2).tobytes()
        first = [ra.repeat(v, "b t c -> b t r c", r=4, copy=True).tobytes() == want_repeat,
                 ra.pack(parts, "b t *")[0].tobytes() == want_pack]
        numba_in_call = "numba" in sys.modules
        status = [builds.status(rowjoin.FAMILY, 1)]
        assert K.wait(600)
        status.append(builds.status(rowjoin.FAMILY, 1))
        ran = []
        real = rowjoin.join_rows
        rowjoin.join_rows = lambda *a: (ran.append("join_rows"), real(*a))[1]
        later = [ra.repeat(v, "b t c -> b t r c", r=4, copy=True).tobytes() == want_repeat,
                 ra.pack(parts, "b t *")[0].tobytes() == want_pack]
        print(json.dumps({"exact": first + later, "numba_in_call": numba_in_call,
                          "status": status, "ran": ran}))
    """, tmp_path / "cache")
    assert report == {"exact": [True] * 4, "numba_in_call": False,
                      "status": ["compiling", "ready"], "ran": ["join_rows"] * 2}


def test_a_fresh_destination_is_populated_then_streamed(runner, monkeypatch):
    """A 64 MiB output (above glibc's largest mmap threshold: a fresh mapping) at a
    line-aligned address, of segments that start on lines, has its pages populated by
    the copy's threads first (execute's populate bytes), then gets its lines as
    streaming stores; 16 bytes past a line it gets regular stores (nothing populated):
    numpy's result both times. (Linux: mincore tells.)"""
    if not sys.platform.startswith("linux"):
        pytest.skip("fresh pages are told by Linux's mincore")
    from rearrange.kernel import threads

    populated = []
    real = threads.execute         # (the row assembly's jobs go through execute_units)
    monkeypatch.setattr(threads, "execute",
                        lambda low, run, d, s, populate, *rest: (
                            populated.append(populate), real(low, run, d, s, populate, *rest))[1])
    rng = np.random.default_rng(14)
    parts = [rng.integers(0, 256, (1 << 16, n), dtype=np.uint8) for n in (256, 128, 640)]
    segments = [(p.__array_interface__["data"][0], p.strides[0], p.shape[1], 1)
                for p in parts]
    expected = np.concatenate(parts, axis=1)
    for shift, streamed in ((0, True), (16, False)):
        buffer = np.empty(expected.nbytes + 128, np.uint8)
        start = (-buffer.__array_interface__["data"][0]) % 64 + shift
        out = buffer[start:start + expected.nbytes].reshape(expected.shape)
        assert rowjoin.streams(out.__array_interface__["data"][0], out.nbytes,
                               segments) is streamed
        populated.clear()
        rowjoin.join_rows(runner, out, segments, 2)
        assert populated == [out.nbytes if streamed else 0]
        assert out.tobytes() == expected.tobytes()


def test_streams_on_both_sides_of_each_rule():
    big = rowjoin.NONTEMPORAL_MIN_BYTES
    lines = [(0, 256, 256, 4)]
    assert rowjoin.streams(1 << 20, big, lines)
    assert not rowjoin.streams(1 << 20, big - 1, lines)             # too small
    assert not rowjoin.streams((1 << 20) + 16, big, lines)          # not on a line
    assert not rowjoin.streams(1 << 20, big, [(0, 256, 256, 1), (0, 32, 32, 1)])
    assert rowjoin.streams(1 << 20, big, [(0, 256, 192, 1), (0, 64, 64, 3)])


def test_python_threads_calling_at_once(runner, joins, threads_restored):
    """Two Python threads packing and repeating at once through the runner (the
    kernel's pool shared between their calls): every result numpy's."""
    import threading

    kernel.set_num_threads(2)
    rng = np.random.default_rng(13)
    v = _values(rng, (16, 256, 64), np.float32)
    parts = [_values(rng, (8, 512, n), np.float32) for n in (64, 96)]
    want = (np.repeat(v[:, :, None], 4, 2).tobytes(), np.concatenate(parts, axis=2).tobytes())
    wrong = []

    def work():
        for _ in range(20):
            if ra.repeat(v, "b t c -> b t r c", r=4, copy=True).tobytes() != want[0]:
                wrong.append("repeat")
            if ra.pack(parts, "b t *")[0].tobytes() != want[1]:
                wrong.append("pack")
    threads = [threading.Thread(target=work) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == [] and len(joins) == 80


def test_torch_and_dask_inputs_never_reach_it(runner, joins, threads_restored):
    """Torch tensors and dask arrays have lowerings of their own: large packs and
    repeats of them never call the runner (their results are their libraries')."""
    kernel.set_num_threads(2)
    v = np.random.default_rng(1).random((64, 64, 64), dtype=np.float32)   # 4 MiB out
    torch = pytest.importorskip("torch")
    tv = torch.from_numpy(v)
    got = ra.repeat(tv, "b t c -> b t r c", r=4, copy=True)
    assert torch.equal(got, tv[:, :, None].expand(64, 64, 4, 64))
    packed, _ = ra.pack([tv, tv[:, :, :32].contiguous()], "b t *")
    assert torch.equal(packed, torch.cat([tv, tv[:, :, :32]], dim=2))
    da = pytest.importorskip("dask.array")
    dv = da.from_array(v, chunks=(32, 64, 64))
    got = ra.repeat(dv, "b t c -> b t r c", r=4)
    np.testing.assert_array_equal(np.asarray(got), np.repeat(v[:, :, None], 4, 2))
    assert joins == []


def test_runner_family():
    assert ndarray.ROW_JOIN == rowjoin.FAMILY       # (the lowering names it without
    #                                                 importing the kernel's modules)
    with pytest.raises(ValueError, match="2-byte units"):
        rowjoin.runner(2)
    with pytest.raises(ValueError, match="no 'rows' runner"):
        rowjoin.runner(1, "rows")


PACKS = [   # (input shapes, pattern): both sides of the size, rows and segment rules
    ([(32, 1024, 64), (32, 1024, 32), (32, 1024, 96)], "b t *"),     # 24 MiB: the runner
    ([(4, 64, 64), (4, 64, 32)], "b t *"),                             # 96 KiB: numpy's
    ([(64, 1024, 256), (64, 1024)], "b t *"),                          # a 4-byte segment
    ([(2, 4096, 64), (2, 4096, 64)], "* c"),                           # 64 KiB, '* c'
    ([(16, 256, 64), (16, 256, 2, 32)], "b t *"),                      # a split input
]


@pytest.mark.parametrize("threads", [1, 2])
def test_explain_of_a_pack_says_which_copy_runs(runner, joins, threads, threads_restored):
    """explain of a pack names the row assembly exactly where the call then runs it (a
    spy on the runner), and numpy's calls (in slabs or on one thread) elsewhere."""
    kernel.set_num_threads(threads)
    for shapes, pattern in PACKS:
        parts = [np.ones(shape, np.float32) for shape in shapes]
        joins.clear()
        packed, _ = ra.pack(parts, pattern)
        np.testing.assert_array_equal(packed, einops_pack(parts, pattern))
        how = ra.explain(parts, pattern, op="pack").how
        assert how is not None
        assert ("row assembly" in how) == bool(joins), (shapes, how, joins)
        if joins:
            assert "until it is compiled, numpy." in how
        elif "slabs" not in how:
            assert "on one thread" in how
    ra.set_jit_mode("off")
    try:
        how = ra.explain([np.ones(s, np.float32) for s in PACKS[0][0]], "b t *", op="pack").how
    finally:
        ra.set_jit_mode("eager")
    assert "REARRANGE_JIT is off" in how and "until it is compiled" not in how


def einops_pack(parts, pattern):
    einops = pytest.importorskip("einops")
    return einops.pack(parts, pattern)[0]
