"""The copy kernel against numpy's own copy (``np.ascontiguousarray``), byte for byte.

Every dtype class, named layouts (the benchmark's shapes, scaled down) and Hypothesis
layouts (permutations, step slices incl. negative, broadcast stride 0, unaligned buffers,
0-d and zero-size), at 1 and 2 threads. The size thresholds are lowered for most tests
so that small arrays reach the jitted variants (and their threaded and non-temporal
paths) instead of the numpy fallback.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from rearrange import kernel as K
from rearrange.kernel import abi, lowering, pages
from rearrange.kernel import plan as kplan
from rearrange.kernel import threads as kthreads

# Each stage imports the thresholds it reads by name: a test lowers one in all of them.
KERNEL_MODULES = (K, kplan, lowering, kthreads, pages)


def set_everywhere(monkeypatch, name: str, value) -> None:
    """Set a kernel threshold (or helper) in every module of the package that binds it."""
    bound = [m for m in KERNEL_MODULES if hasattr(m, name)]
    assert bound, name
    for module in bound:
        monkeypatch.setattr(module, name, value)


def small_copies_take_the_kernel(monkeypatch) -> None:
    """Copies of a few KiB take the kernel, on several threads (not numpy's copy)."""
    for name, value in (("THREAD_MIN_BYTES", 1), ("NUMPY_MAX_BYTES", 0),
                        ("TRANSPOSE_NUMPY_MAX_BYTES", 0)):
        set_everywhere(monkeypatch, name, value)


def run_in_threads(work, n: int = 2) -> None:
    """work(i) on n Python threads at once, i < n; returns when all are done."""
    import threading

    threads = [threading.Thread(target=work, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

STRUCT = np.dtype([("a", "<i4"), ("b", "<f8")])            # 12 bytes, packed: 4-byte units
DTYPES = [
    np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
    np.uint64, np.float16, np.float32, np.float64, np.complex64, np.complex128,
    np.dtype("datetime64[ns]"), np.dtype(">f4"), STRUCT, np.dtype("V3"), np.dtype(object),
]
DTYPE_IDS = [np.dtype(d).str if np.dtype(d).names is None else "struct12" for d in DTYPES]


def random_array(shape, dtype, rng) -> np.ndarray:
    """Random bytes for every dtype (objects: distinct Python ints)."""
    dtype = np.dtype(dtype)
    n = math.prod(shape)
    if dtype.hasobject:
        return np.array([int(v) for v in rng.integers(0, 1 << 40, n)], dtype=object).reshape(shape)
    raw = rng.integers(0, 256, n * dtype.itemsize, dtype=np.uint8)
    return raw.view(dtype).reshape(shape)


def assert_copies(src: np.ndarray) -> None:
    """copy_into(dst, src) equals numpy's copy, byte for byte (objects: identity)."""
    dst = np.empty(src.shape, src.dtype)
    K.copy_into(dst, src)
    expected = np.ascontiguousarray(src)
    assert dst.flags.c_contiguous
    if src.dtype.hasobject:
        assert all(a is b for a, b in zip(dst.ravel().tolist(), expected.ravel().tolist()))
    else:
        assert dst.tobytes() == expected.tobytes()


@pytest.fixture(params=[1, 2], ids=["1thread", "2threads"])
def threads(request):
    before = K.get_num_threads()
    K.set_num_threads(request.param)
    yield request.param
    K.set_num_threads(before)


@pytest.fixture(params=["cached", "nontemporal", "fresh"])
def small_thresholds(request, monkeypatch):
    """Let tiny arrays reach the kernels, threads and (param) non-temporal stores, or the
    paths for destinations never touched before (populated first, or regular stores)."""
    streaming = request.param != "cached"
    set_everywhere(monkeypatch, "NUMPY_MAX_BYTES", 0)
    set_everywhere(monkeypatch, "TRANSPOSE_NUMPY_MAX_BYTES", 0)
    set_everywhere(monkeypatch, "ROWS_NUMPY_MAX_BYTES", 0)
    set_everywhere(monkeypatch, "THREAD_MIN_BYTES", 1)
    set_everywhere(monkeypatch, "NONTEMPORAL_MIN_BYTES", 0 if streaming else 1 << 62)
    set_everywhere(monkeypatch, "NONTEMPORAL_TILE_MIN_BYTES", 0 if streaming else 1 << 62)
    if request.param == "fresh":
        set_everywhere(monkeypatch, "untouched", lambda addr, nbytes: True)
    return request.param


# ---------------------------------------------------------------------- named layouts
# (name, base shape, view) — the view is applied to a C-contiguous base array.

LAYOUTS = [
    ("transpose", (150, 260), lambda x: x.T),
    ("transpose-odd", (67, 301), lambda x: x.T),
    ("nhwc-nchw-c3", (2, 24, 40, 3), lambda x: x.transpose(0, 3, 1, 2)),
    ("nchw-nhwc-c3", (2, 3, 24, 40), lambda x: x.transpose(0, 2, 3, 1)),
    ("nhwc-nchw-c64", (2, 9, 10, 64), lambda x: x.transpose(0, 3, 1, 2)),
    ("nhwc-nchw-c4", (2, 24, 40, 4), lambda x: x.transpose(0, 3, 1, 2)),
    ("nchw-nhwc-c4", (2, 4, 24, 40), lambda x: x.transpose(0, 2, 3, 1)),
    ("pairs-split", (3, 700, 2), lambda x: x.transpose(0, 2, 1)),
    ("pairs-join", (3, 2, 700), lambda x: x.transpose(0, 2, 1)),
    ("bhtd-bthd", (2, 4, 33, 16), lambda x: x.transpose(0, 2, 1, 3)),
    ("vit-patchify", (2, 3, 32, 48),
     lambda x: x.reshape(len(x), 3, 2, 16, 3, 16).transpose(0, 2, 4, 3, 5, 1)),
    ("pixel-shuffle", (2, 16, 12, 20),
     lambda x: x.reshape(len(x), 4, 2, 2, 12, 20).transpose(0, 1, 4, 2, 5, 3)),
    ("reverse-axes", (9, 10, 11, 12), lambda x: x.transpose(3, 2, 1, 0)),
    ("reverse-axes-64", (3, 5, 64, 130), lambda x: x.transpose(3, 2, 1, 0)),
    ("reverse-axes-b2", (64, 2, 3, 70), lambda x: x.transpose(3, 2, 1, 0)),
    ("tile-cols-cross-b2", (130, 3, 5, 67), lambda x: x.transpose(3, 2, 1, 0)[:, 1:]),
    ("negative-transpose", (130, 140), lambda x: x[::-1].T),
    ("rot90", (130, 140), lambda x: np.rot90(x)),
    ("step-slices", (60, 90), lambda x: x[::2, ::-3]),
    ("broadcast", (1, 300), lambda x: np.broadcast_to(x, (70, 300)).T),
    ("broadcast-inner", (300, 1), lambda x: np.broadcast_to(x, (300, 70))),
    ("contiguous", (40, 50), lambda x: x),
    ("inner-rows", (30, 40, 50), lambda x: x[:, ::2]),
    ("zero-size", (0, 30), lambda x: x.T),
    ("zero-d", (), lambda x: x),
    ("one-item", (1, 1), lambda x: x.T),
]


# Every thread count with every threshold fixture; the quick tier (-m "not slow") keeps
# one thread with cached stores and two threads into fresh pages (streaming stores).
THREAD_CONFIGS = [
    pytest.param(threads, thresholds, id=f"{threads}thread{'s' if threads > 1 else ''}-{thresholds}",
                 marks=() if (threads, thresholds) in ((1, "cached"), (2, "fresh"))
                 else pytest.mark.slow)
    for threads in (1, 2) for thresholds in ("cached", "nontemporal", "fresh")]


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize(("name", "shape", "view"), LAYOUTS, ids=[c[0] for c in LAYOUTS])
@pytest.mark.parametrize(("threads", "small_thresholds"), THREAD_CONFIGS, indirect=True)
def test_layouts_every_dtype(name, shape, view, dtype, threads, small_thresholds) -> None:
    x = random_array(shape, dtype, np.random.default_rng(len(name)))
    assert_copies(view(x))


@pytest.mark.parametrize("dtype", [np.uint8, np.float32, np.float64, np.complex128],
                         ids=["u1", "f4", "f8", "c16"])
@pytest.mark.parametrize(("name", "shape", "view"), LAYOUTS[:17], ids=[c[0] for c in LAYOUTS[:17]])
def test_layouts_default_thresholds(name, shape, view, dtype, threads) -> None:
    """The shipped thresholds: the same layouts with 8 times the first axis."""
    x = random_array((8 * shape[0],) + shape[1:], dtype, np.random.default_rng(1))
    assert_copies(view(x))


@pytest.mark.parametrize("width", [682, 683])
def test_small_inner_dim_panels_take_two_threads_sooner(width) -> None:
    """The shipped thresholds on both sides of the small-inner-dim panels' own (two
    threads from 2 * THREAD_MIN_BYTES // SHUFFLE_THREAD_DIVISOR bytes, 512 KiB):
    (1, 3, 256, 682) uint8 to channels last is 523,776 B, one thread; 683 columns,
    524,544 B, two. A row copy of as many bytes keeps one thread (THREAD_MIN_BYTES).
    Every copy numpy's, byte for byte."""
    x = random_array((1, 3, 256, width), np.uint8, np.random.default_rng(width))
    src = x.transpose(0, 2, 3, 1)
    plan = K.plan_copy(src.shape, src.strides, 1, threads=2)
    assert plan.variant == "small-inner-dim"
    two_from = 2 * (kplan.THREAD_MIN_BYTES // kplan.SHUFFLE_THREAD_DIVISOR)
    assert (src.nbytes >= two_from) == (width == 683)
    assert plan.threads == (2 if width == 683 else 1)
    rows = x.reshape(3, 256, width)[:, ::-1]            # rows of `width` bytes, reversed
    row_plan = K.plan_copy(rows.shape, rows.strides, 1, threads=2)
    assert row_plan.threads == 1 and row_plan.variant != "small-inner-dim"
    before = K.get_num_threads()
    try:
        K.set_num_threads(2)
        assert_copies(src)
        assert_copies(rows)
    finally:
        K.set_num_threads(before)


@pytest.mark.parametrize("offset", [1, 2, 3, 4, 5, 6, 7])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex128, STRUCT],
                         ids=["f4", "f8", "c16", "struct12"])
def test_unaligned_buffers(offset, dtype, small_thresholds) -> None:
    """A uint8 buffer viewed at an odd offset: numpy marks it unaligned; the kernel moves
    smaller units."""
    dtype = np.dtype(dtype)
    n = 70 * 90
    raw = np.random.default_rng(offset).integers(0, 256, n * dtype.itemsize + 8, dtype=np.uint8)
    x = raw[offset:offset + n * dtype.itemsize].view(dtype).reshape(70, 90)
    assert_copies(x.T)
    assert_copies(x[:, ::-2])
    out = np.empty(x.T.shape, dtype)
    k = K.plan_copy(x.T.shape, x.T.strides, dtype.itemsize, dtype.kind)
    K.copy_into(out, x.T, k)                   # a plan made for aligned buffers still works
    assert out.tobytes() == np.ascontiguousarray(x.T).tobytes()


def test_unaligned_destination(small_thresholds) -> None:
    raw = np.zeros(4 * 64 * 80 + 4, np.uint8)
    dst = raw[2:2 + 4 * 64 * 80].view(np.float32).reshape(80, 64)
    x = np.random.default_rng(0).random((64, 80), dtype=np.float32)
    K.copy_into(dst, x.T)
    assert dst.tobytes() == np.ascontiguousarray(x.T).tobytes()


def copy_at(src: np.ndarray, offset: int) -> None:
    """copy_into a destination ``offset`` bytes past a cache-line boundary, checked."""
    raw = np.empty(src.nbytes + 2 * K.LINE, np.uint8)
    start = (-raw.ctypes.data) % K.LINE + offset
    dst = raw[start:start + src.nbytes].view(src.dtype).reshape(src.shape)
    K.copy_into(dst, src)
    assert dst.tobytes() == np.ascontiguousarray(src).tobytes()


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.float32, np.float64],
                         ids=["u1", "u2", "f4", "f8"])
@pytest.mark.parametrize("channels", [2, 3, 4])
@pytest.mark.parametrize("n", [5, 16, 17, 64, 67, 300])
def test_interleave_into_channels_last(n, channels, dtype, threads, small_thresholds) -> None:
    """Channels-first to channels-last with 2-4 channels: interleaved a line of units
    per channel at a time in vector registers (lengths below, at and past multiples of a
    line, tiles split along the long dim), with the channels reversed (a negative source
    stride), the outer dim reversed, an unaligned source, and destinations on and off
    the line grid (whole-line streaming stores, or staged)."""
    x = random_array((6, channels, n), dtype, np.random.default_rng(n * channels))
    view = x.transpose(0, 2, 1)
    k = K.plan_copy(view.shape, view.strides, view.itemsize, view.dtype.kind)
    assert k.variant == "small-inner-dim" and k.tile[1] == channels < k.tile[0]
    for v in (view, x[:, ::-1].transpose(0, 2, 1), x[::-2].transpose(0, 2, 1)):
        for offset in (0, x.itemsize, 1):
            copy_at(v, offset)
    raw = random_array((x.nbytes + 1,), np.uint8, np.random.default_rng(n))
    copy_at(raw[1:].view(dtype).reshape(x.shape).transpose(0, 2, 1), 0)


def test_small_tiles_run_along_an_outer_dim(monkeypatch) -> None:
    """Panels of small interleaving tiles. ViT patchify's 16x3 tiles read one line per
    source row: streaming, they are woven into blocks of the destination (every p1, a
    run of w) in scratch memory (staged-interleave); into fresh pages, and below the
    streaming size, a panel runs along w (the source's fastest outer dim) with regular
    stores and prefetches. Pixel shuffle's 64x2 tiles read 4 lines per source row: with
    streaming stores the panel runs along r1 (continuing the tile in the destination),
    its lines leave from registers when the destination is on the line grid and through
    the staging buffer when it is not."""
    x = np.zeros((2, 3, 64, 64), np.float32)
    v = x.reshape(2, 3, 4, 16, 4, 16).transpose(0, 2, 4, 3, 5, 1)
    k = K.plan_copy(v.shape, v.strides, 4, threads=1)
    assert k.variant == "small-inner-dim" and k.tile == (16, 3)      # 96 KiB: cached
    set_everywhere(monkeypatch, "NONTEMPORAL_MIN_BYTES", 0)
    k = K.plan_copy(v.shape, v.strides, 4, threads=1)
    assert k.variant == "staged-interleave" and k.tile == (16, 3)
    p = lowering.lower(k, 0)[3]
    assert p[abi.P_KIND] == abi.KIND_WOVEN
    assert (p[abi.P_NX], p[abi.P_SX], p[abi.P_NR], p[abi.P_TR]) == (16, 64, 4, 4)
    assert (p[abi.P_SR], p[abi.P_DR], p[abi.P_SCRATCH]) == (16, 768, 4 * 768 * 4)
    set_everywhere(monkeypatch, "WOVEN_BLOCK_BYTES", 256)   # the plan's blocks are its own
    assert lowering.lower(k, 0)[3][abi.P_TR] == k.block == 4
    for fresh in (False, True):
        p = lowering.lower(k, 0, fresh)[3]
        assert p[abi.P_KIND] == (abi.KIND_WEAVE if fresh else abi.KIND_WOVEN)
    assert (p[abi.P_NR], p[abi.P_SR], p[abi.P_DR], p[abi.P_NT]) == (4, 16, 768, abi.REGULAR)
    assert p[abi.P_PF] == kplan.PREFETCH_UNITS_AHEAD * 64          # two p1 rows ahead
    x = np.zeros((2, 16, 8, 64), np.float32)
    v = x.reshape(2, 4, 2, 2, 8, 64).transpose(0, 1, 4, 2, 5, 3)
    k = K.plan_copy(v.shape, v.strides, 4, threads=1)
    assert k.variant == "small-inner-dim" and k.tile == (64, 2)
    p = lowering.lower(k, 0)[3]
    assert (p[abi.P_NR], p[abi.P_SR], p[abi.P_DR], p[abi.P_NT]) == (2, 1024, 128, abi.DIRECT_NT)
    assert p[abi.P_PF] == 0 and p[abi.P_KIND] == abi.KIND_WEAVE
    staged = lowering.lower(k, 4)[3]
    assert staged[abi.P_NT] == abi.STAGED_NT and staged[abi.P_KIND] == abi.KIND_TILE
    for offset in (0, 4):
        copy_at(np.random.default_rng(offset).random(x.shape, dtype=np.float32).reshape(
            2, 4, 2, 2, 8, 64).transpose(0, 1, 4, 2, 5, 3), offset)


@pytest.mark.parametrize("threads_", [1, 2])
def test_a_crops_deinterleaving_tiles_are_prefetched(threads_) -> None:
    """NHWC->NCHW of a centre crop: each tile deinterleaves one source run (a cropped
    row of pixels, gaps between the runs), the panel runs along h, and the runs are one
    forward stream: each tile prefetches the run PREFETCH_STREAM_BYTES or more ahead in
    it (here 4 rows of 576 B), not the work unit two on. A copy of the crop in its own
    layout (rows) prefetches the same way; attention heads' rows (separate streams) are
    prefetched where the work unit PREFETCH_UNITS_AHEAD later reads them. Copies
    through those paths match numpy's."""
    base = np.random.default_rng(3).random((3, 40, 48, 3), dtype=np.float32)
    crop = base[:, 5:-5, 6:-6, :]
    v = crop.transpose(0, 3, 1, 2)
    k = K.plan_copy(v.shape, v.strides, 4, threads=threads_)
    assert k.variant == "small-inner-dim" and k.tile == (3, 36)
    p = lowering.lower(k, 0)[3]
    assert p[abi.P_KIND] == abi.KIND_TILE and p[abi.P_SR] == 48 * 3
    assert kplan.PREFETCH_STREAM_BYTES == 2048 and p[abi.P_PF] == 4 * p[abi.P_SR]
    big = np.random.default_rng(4).random((8, 200, 240, 3), dtype=np.float32)
    rows_crop = big[:, 5:-5, 6:-6, :]            # rows of 2736 B, 2880 B apart
    rows = lowering.lower(K.plan_copy(rows_crop.shape, rows_crop.strides, 4, threads=2), 0)
    assert rows[3][abi.P_KIND] == abi.KIND_ROWS and rows[3][abi.P_PF] == 240 * 3
    heads = np.random.default_rng(5).random((2, 32, 256, 64), dtype=np.float32).transpose(
        0, 2, 1, 3)
    hp = lowering.lower(K.plan_copy(heads.shape, heads.strides, 4, threads=2), 0)
    assert hp[3][abi.P_KIND] == abi.KIND_ROWS and hp[3][abi.P_PF] > 0
    assert hp[3][abi.P_PF] == kplan.PREFETCH_UNITS_AHEAD * hp[2][-2]
    for src in (v, rows_crop, heads):
        out = np.empty(src.shape, np.float32)
        K.copy_into(out, src, K.plan_copy(src.shape, src.strides, 4, threads=threads_))
        np.testing.assert_array_equal(out, src)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.float32, np.float64, np.complex128],
                         ids=["u1", "u2", "f4", "f8", "c16"])
def test_reversal_runs_the_source_continuation_inside_column_blocks(dtype, threads,
                                                                    small_thresholds) -> None:
    """A full reversal: the second dim continues the tiles' source rows, so it runs
    innermost, inside the column-block loop (long source streams), also reversed;
    the last tile of a column ends off the tile grid, column blocks cross into the next
    b2, destinations on and off the line grid."""
    x = random_array((70, 3, 5, 67), dtype, np.random.default_rng(7))
    v = x.transpose(3, 2, 1, 0)
    k = K.plan_copy(v.shape, v.strides, v.itemsize, v.dtype.kind, threads=1)
    assert k.variant == "tiled-transpose"
    low = lowering.lower(k, 0)
    itv, p = low[2], low[3]
    assert p[abi.P_ITB] == itv[0] - 2 and itv[-2] == k.src_strides[1]
    for view in (v, x[:, :, ::-1].transpose(3, 2, 1, 0)):
        for offset in (0, x.itemsize):
            copy_at(view, offset)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.float32, np.float64, np.complex128],
                         ids=["u1", "u2", "f4", "f8", "c16"])
@pytest.mark.parametrize("extra_rows", [0, 1, 150])
def test_transpose_rows_meeting_off_the_line_grid(dtype, extra_rows, threads,
                                                  monkeypatch) -> None:
    """Streaming tiled (and staged) transposes into rows that lie back to back and start
    off the line grid: the lines where rows meet are written whole by seam tiles (the last columns of
    one row, then the first of the next), the head of row 0 and the tail of the last row
    one unit at a time; panels one tile tall (every row's edges by units), one row
    taller, and tall; a 2-D transpose and columns over (b2, b)."""
    set_everywhere(monkeypatch, "NUMPY_MAX_BYTES", 0)
    set_everywhere(monkeypatch, "TRANSPOSE_NUMPY_MAX_BYTES", 0)
    set_everywhere(monkeypatch, "THREAD_MIN_BYTES", 1)
    set_everywhere(monkeypatch, "NONTEMPORAL_TILE_MIN_BYTES", 0)
    item = np.dtype(dtype).itemsize
    ka = kplan.SIMD_TILE_G2[8][0] if item == 16 else kplan.SIMD_TILE[item][0]
    na = ka + extra_rows
    rng = np.random.default_rng(na)
    views = [random_array((192, na), dtype, rng).T,
             random_array((64, 3, 1, na), dtype, rng).transpose(3, 2, 1, 0)]
    for v in views:
        k = K.plan_copy(v.shape, v.strides, v.itemsize, v.dtype.kind)
        # 1- and 2-byte units, a line of rows or more: staged (its bands' edges are the
        # same seams)
        assert k.variant == ("staged-transpose" if item in (1, 2) and na * item >= 64 else
                             "tiled-transpose")
        for offset in sorted({item, 16, 48}):
            assert lowering.lower(k, offset)[3][abi.P_SEAM] == offset // item   # units x group
            copy_at(v, offset)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.float32, np.float64, np.complex128],
                         ids=["u1", "u2", "f4", "f8", "c16"])
@pytest.mark.parametrize("extra", [0, 1, -1])
def test_transposes_into_rows_one_tile_column_long(dtype, extra, threads, monkeypatch) -> None:
    """Destination rows of one tile column (Kb units, the channels of NCHW->NHWC) up to
    one unit short of two go through the register tiles or the staging buffer, not
    scalar tiles: one column block per row, the rest one more column of tiles ending at
    the last column; batch dims, reversed source rows, destinations on and off the line
    grid, against numpy."""
    set_everywhere(monkeypatch, "NUMPY_MAX_BYTES", 0)
    set_everywhere(monkeypatch, "TRANSPOSE_NUMPY_MAX_BYTES", 0)
    set_everywhere(monkeypatch, "THREAD_MIN_BYTES", 1)
    set_everywhere(monkeypatch, "NONTEMPORAL_TILE_MIN_BYTES", 0)
    item = np.dtype(dtype).itemsize
    ka, kb = kplan.SIMD_TILE_G2[8] if item == 16 else kplan.SIMD_TILE[item]
    cols = kb + extra if extra >= 0 else 2 * kb - 1
    rng = np.random.default_rng(cols)
    views = [random_array((3, cols, 9, 2 * ka + 3), dtype, rng).transpose(0, 2, 3, 1),
             random_array((cols, 5 * ka), dtype, rng).T,
             random_array((2, cols, 4 * ka), dtype, rng)[:, ::-1].transpose(0, 2, 1)]
    for v in views:
        k = K.plan_copy(v.shape, v.strides, v.itemsize, v.dtype.kind)
        assert k.variant in ("tiled-transpose", "staged-transpose"), (v.shape, k.reason)
        for offset in sorted({0, item, 16, 48}):
            copy_at(v, offset)


@pytest.mark.parametrize("dtype", [np.uint8, np.float16], ids=["u1", "u2"])
@pytest.mark.parametrize("rows", [64, 100, 128, 138, 198, 300])
def test_staged_transpose_geometries(rows, dtype, threads, monkeypatch) -> None:
    """Staged transposes of 1- and 2-byte units (bands of 128 rows here) against numpy:
    rows a band or less, a remainder under 64 rows joining the last band and one of its
    own, rows off the chunks of a line; work units of whole column blocks and the last
    one short; columns over (b2, b) whose 8-row groups cross into the next b2 (b of 70
    and 100 columns); reversed source rows; batch dims; destinations on and off the line
    grid (seams where rows meet)."""
    set_everywhere(monkeypatch, "NUMPY_MAX_BYTES", 0)
    set_everywhere(monkeypatch, "TRANSPOSE_NUMPY_MAX_BYTES", 0)
    set_everywhere(monkeypatch, "THREAD_MIN_BYTES", 1)
    set_everywhere(monkeypatch, "NONTEMPORAL_TILE_MIN_BYTES", 0)
    set_everywhere(monkeypatch, "STAGED_BAND_ROWS", 128)
    rng = np.random.default_rng(rows)
    views = [random_array((256, rows), dtype, rng).T,                # whole work units
             random_array((448, rows), dtype, rng).T,                # and a short one
             random_array((320, rows), dtype, rng)[::-1].T,          # reversed source rows
             random_array((2, 64, 70, rows), dtype, rng).transpose(0, 3, 1, 2),
             random_array((16, 100, rows), dtype, rng).transpose(2, 0, 1)[:, ::-1]]
    item = np.dtype(dtype).itemsize
    for v in views:
        k = K.plan_copy(v.shape, v.strides, item)
        assert k.variant == "staged-transpose", (v.shape, v.strides)
        for offset in sorted({0, item, 16, 62}):
            copy_at(v, offset)


def patches(x: np.ndarray, p: int) -> np.ndarray:
    """ViT patchify's copy of (b, c, h, w): (b, h/p, w/p, p1, p2, c), as a view."""
    b, c, h, w = x.shape
    return x.reshape(b, c, h // p, p, w // p, p).transpose(0, 2, 4, 3, 5, 1)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.float32, np.float64],
                         ids=["u1", "u2", "f4", "f8"])
@pytest.mark.parametrize("channels", [2, 3, 4])
def test_staged_interleave_geometries(channels, dtype, threads, monkeypatch) -> None:
    """Staged interleaves (blocks of 8 KiB here) against numpy: patches of a line (the
    vector weave) and shorter (scalar), blocks of every w and runs of w with a short last
    one, every other image, images and rows reversed, a source off its alignment;
    destinations on and off the line grid. Into fresh pages the same plans run as
    panels of regular stores."""
    set_everywhere(monkeypatch, "NUMPY_MAX_BYTES", 0)
    set_everywhere(monkeypatch, "THREAD_MIN_BYTES", 1)
    set_everywhere(monkeypatch, "NONTEMPORAL_MIN_BYTES", 0)
    set_everywhere(monkeypatch, "WOVEN_BLOCK_BYTES", 8192)
    item = np.dtype(dtype).itemsize
    line = K.LINE // item                       # units of a patch row of one line
    rng = np.random.default_rng(channels * item)
    for p in sorted({min(line, 16), line // 2, 5}):
        if p <= channels:
            continue
        base = random_array((4, channels, 3 * p, 7 * p), dtype, rng)
        raw = random_array((base.nbytes + item,), np.uint8, rng)
        unaligned = (raw[1:1 + base.nbytes].view(dtype).reshape(base.shape) if item > 1 else
                     base[:, :, ::-1])
        for x in (base, base[::2], base[::-1, :, ::-1], unaligned):
            v = patches(x, p)
            k = K.plan_copy(v.shape, v.strides, item)
            aligned = x is not unaligned or item == 1
            assert k.variant == "staged-interleave" or not aligned, (v.shape, v.strides)
            for offset in sorted({0, item, 16, 62 // item * item}):
                copy_at(v, offset)
            with pytest.MonkeyPatch.context() as fresh_pages:
                set_everywhere(fresh_pages, "untouched", lambda addr, nbytes: True)
                copy_at(v, item)


def test_staged_copies_from_python_threads_at_once(monkeypatch) -> None:
    """Each copy's threads stage through scratch memory of the Python thread that made
    the copy: staged transposes and interleaves made at the same time from several
    Python threads never share it."""
    import threading
    set_everywhere(monkeypatch, "NONTEMPORAL_MIN_BYTES", 0)
    rng = np.random.default_rng(3)
    sources = [random_array((1536, 2048), np.uint8, rng).T,
               random_array((2048, 1600), np.uint8, rng).T,
               patches(random_array((4, 3, 64, 224), np.float32, rng), 16)]
    assert [K.plan_copy(v.shape, v.strides, v.itemsize).variant for v in sources] == \
        ["staged-transpose"] * 2 + ["staged-interleave"]
    failures = []

    def work(src):
        out = np.empty(src.shape, src.dtype)
        for _ in range(30):
            out[...] = 0
            K.copy_into(out, src)
            if out.tobytes() != np.ascontiguousarray(src).tobytes():   # NaNs: as bytes
                failures.append(src.shape)

    workers = [threading.Thread(target=work, args=(v,)) for v in sources]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert not failures


# ---------------------------------------------------------------------- hypothesis
HYP_DTYPES = [np.uint8, np.int16, np.float32, np.float64, np.complex128, STRUCT, np.dtype("V3")]
SIZES = [0, 1, 1, 2, 3, 4, 5, 7, 16, 17, 33, 64, 67, 130]


@st.composite
def strided_views(draw):
    """A view with random shape, permutation, step slices, broadcast dims, alignment."""
    dtype = np.dtype(draw(st.sampled_from(HYP_DTYPES)))
    ndim = draw(st.integers(0, 5))
    shape = [draw(st.sampled_from(SIZES)) for _ in range(ndim)]
    # The base array holds every non-empty dim (a size-0 dim may be broadcast from 1):
    # cap those, or an empty view of a broadcast 0 asked for a 25 GiB base in CI.
    while math.prod(n for n in shape if n) > 60_000:
        shape[shape.index(max(shape))] //= 2
    steps = [draw(st.sampled_from([1, 1, 1, 2, 3, -1, -2])) for _ in range(ndim)]
    bcast = [draw(st.booleans()) and draw(st.booleans()) for _ in range(ndim)]
    base_shape = tuple(1 if b else n * abs(s) for n, s, b in zip(shape, steps, bcast))
    offset = draw(st.sampled_from([0, 0, 1, 3]))
    nbytes = math.prod(base_shape) * dtype.itemsize
    raw = np.random.default_rng(draw(st.integers(0, 2**32 - 1))).integers(
        0, 256, nbytes + 8, dtype=np.uint8)
    x = raw[offset:offset + nbytes].view(dtype).reshape(base_shape)
    x = x[tuple(slice(None) if b else slice(None, None, s) for s, b in zip(steps, bcast))]
    x = x[tuple(slice(0, n) for n in shape)] if ndim else x
    x = np.broadcast_to(x, tuple(shape))
    perm = draw(st.permutations(range(ndim)))
    return x.transpose(perm)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])  # settings, not state
@given(src=strided_views())
def test_hypothesis_layouts(src, threads, small_thresholds) -> None:
    assert_copies(src)


@st.composite
def transposed_views(draw):
    """Views that reach the register-tile transpose: two long dims (odd sizes, not tile
    multiples), the source-contiguous one not last, plus short outer dims, step slices
    and reversal on the other dims, and any alignment."""
    dtype = np.dtype(draw(st.sampled_from(HYP_DTYPES)))
    long_ = st.integers(16, 300)
    rows, cols = draw(long_), draw(long_)
    extra = draw(st.lists(st.integers(1, 4), max_size=2))
    shape = extra + [rows, cols]
    step = draw(st.sampled_from([1, 1, 2, -1]))
    offset = draw(st.sampled_from([0, 0, 1, 2, 4]))
    base = list(shape)
    base[-2] *= abs(step)
    nbytes = math.prod(base) * dtype.itemsize
    raw = np.random.default_rng(draw(st.integers(0, 2**32 - 1))).integers(
        0, 256, nbytes + 8, dtype=np.uint8)
    x = raw[offset:offset + nbytes].view(dtype).reshape(base)
    x = x[..., ::step, :][..., :rows, :]
    perm = list(draw(st.permutations(range(len(shape)))))
    if perm[-1] == len(shape) - 1:                  # keep the contiguous dim off the end
        perm[-1], perm[-2] = perm[-2], perm[-1]
    return x.transpose(perm)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(src=transposed_views())
def test_hypothesis_transposes(src, threads, small_thresholds) -> None:
    assert_copies(src)


@st.composite
def staged_views(draw):
    """Views that reach the staged transpose (1- and 2-byte items): rows from a line's
    worth of units up, destination rows a whole number of lines over b or over (b2, b)
    (b2 crossings inside 8-row groups when b is not a multiple of 8), an optional batch
    dim, a reversed or step-sliced column dim, and a source start off its alignment."""
    dtype = np.dtype(draw(st.sampled_from([np.uint8, np.bool_, np.float16, np.int16])))
    u = dtype.itemsize
    per_line = K.LINE // u
    na = draw(st.integers(per_line, 300))
    if draw(st.booleans()):           # columns over b alone
        cols = (per_line * draw(st.integers(2, 6)),)
    else:                             # over (b2, b): b at least a block, rows whole lines
        nb = draw(st.integers(kplan.SIMD_TILE[u][1], 150))
        cols = (per_line // math.gcd(nb, per_line) * draw(st.integers(2, 3)), nb)
    batch = (draw(st.integers(1, 3)),) if draw(st.booleans()) else ()
    step = draw(st.sampled_from([1, 1, -1, 2]))
    shape = batch + cols[:-1] + (cols[-1] * abs(step), na)
    offset = draw(st.sampled_from([0, 0, 1]))
    n = math.prod(shape)
    raw = np.random.default_rng(draw(st.integers(0, 2**32 - 1))).integers(
        0, 256, (n + 1) * u, dtype=np.uint8)
    x = raw[offset * u:(offset + n) * u].view(dtype).reshape(shape)
    x = x[..., ::step, :]
    # (batch, *cols, na) -> (batch, na, *cols): the destination's rows run over the cols.
    nd = x.ndim
    return x.transpose(*range(len(batch)), nd - 1, *range(len(batch), nd - 1))


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(src=staged_views(), dst_offset=st.sampled_from([0, 1, 8, 31]))
def test_hypothesis_staged_transposes(src, dst_offset, threads, monkeypatch) -> None:
    """Staged transposes (bands of 128 rows here) byte for byte against numpy, into
    destinations on and off the line grid."""
    set_everywhere(monkeypatch, "NUMPY_MAX_BYTES", 0)
    set_everywhere(monkeypatch, "TRANSPOSE_NUMPY_MAX_BYTES", 0)
    set_everywhere(monkeypatch, "THREAD_MIN_BYTES", 1)
    set_everywhere(monkeypatch, "NONTEMPORAL_TILE_MIN_BYTES", 0)
    set_everywhere(monkeypatch, "STAGED_BAND_ROWS", 128)
    k = K.plan_copy(src.shape, src.strides, src.itemsize, src.dtype.kind)
    assert k.variant == "staged-transpose", (src.shape, src.strides, k.reason)
    copy_at(src, dst_offset * src.itemsize)


@st.composite
def woven_views(draw):
    """Sources a staged interleave copies: (batch..., y, x, a, channels) views of
    (batch..., channels, x-rows, y * a) arrays — patches along y of a units, at most a
    line, interleaving 2-4 channels — with a batch dim stepped or reversed, x reversed,
    or a source off its alignment."""
    dtype = np.dtype(draw(st.sampled_from(["u1", "u2", "f2", "f4", "i8", "f8", "?"])))
    u = dtype.itemsize
    m = draw(st.integers(2, 4))
    a = draw(st.integers(m + 1, max(m + 1, K.LINE // u)))
    ny, nx = draw(st.integers(1, 9)), draw(st.integers(1, 12))
    batch = draw(st.lists(st.integers(1, 3), max_size=2))
    step = draw(st.sampled_from([1, 2, -1]))
    shape = (*batch, m, nx, ny * a)
    n = math.prod(shape)
    offset = draw(st.integers(0, 1)) if u > 1 else 0
    raw = np.random.default_rng(draw(st.integers(0, 2**32 - 1))).integers(
        0, 256, (n + 1) * u, dtype=np.uint8)
    x = raw[offset:offset + n * u].view(dtype).reshape(shape)
    if batch:
        x = x[::step]
    if draw(st.booleans()):
        x = x[..., ::-1, :]
    nb = len(batch)
    x = x.reshape(*x.shape[:nb], m, nx, ny, a)
    # (batch, m, x, y, a) -> (batch, y, x, a, m)
    return x.transpose(*range(nb), nb + 2, nb + 1, nb + 3, nb)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(src=woven_views(), dst_offset=st.sampled_from([0, 1, 8, 31]),
       block=st.sampled_from([256, 2048, 64 << 10]))
def test_hypothesis_staged_interleaves(src, dst_offset, block, threads, monkeypatch) -> None:
    """Staged interleaves (blocks of 256 B to 64 KiB) byte for byte against numpy, into
    destinations on and off the line grid. Sources the planner does not stage (size-1
    dims fused away, a block row over the block size, units the misaligned source
    splits) are copied by whatever it plans instead: checked the same."""
    set_everywhere(monkeypatch, "NUMPY_MAX_BYTES", 0)
    set_everywhere(monkeypatch, "THREAD_MIN_BYTES", 1)
    set_everywhere(monkeypatch, "NONTEMPORAL_MIN_BYTES", 0)
    set_everywhere(monkeypatch, "WOVEN_BLOCK_BYTES", block)
    copy_at(src, dst_offset * src.itemsize % K.LINE)


def test_hypothesis_staged_interleaves_mostly_stage() -> None:
    """The strategy above makes staged interleaves, not only other plans: of its aligned
    sources with every dim longer than 1, each plans as one."""
    seen = []

    @settings(max_examples=60, deadline=None, derandomize=True)
    @given(src=woven_views())
    def plans(src):
        if src.ctypes.data % src.itemsize == 0 and min(src.shape) > 1:
            with pytest.MonkeyPatch.context() as mp:
                set_everywhere(mp, "NONTEMPORAL_MIN_BYTES", 0)
                set_everywhere(mp, "NUMPY_MAX_BYTES", 0)
                k = K.plan_copy(src.shape, src.strides, src.itemsize)
            seen.append(k.variant)

    plans()
    assert seen and set(seen) == {"staged-interleave"}, seen


# ---------------------------------------------------------------------- the plan

def test_plan_stages_rows_of_any_whole_number_of_lines() -> None:
    """Staging asks for destination rows of whole lines, counted in bytes: float16 rows
    of 4112 items (8224 bytes: 128 lines and half of one) are not staged, rows of 4128
    (8256 bytes: 129 lines, an odd number of them) are."""
    for cols, variant in ((4112, "tiled-transpose"), (4128, "staged-transpose")):
        x = np.zeros((cols, 1024), np.float16)
        assert K.plan_copy(x.T.shape, x.T.strides, 2).variant == variant


def test_plan_transpose_tiles_fastest_dims() -> None:
    k = K.plan_copy((4096, 4096), (4, 16384), 4, threads=2)
    assert (k.variant, k.unit_bytes, k.fused_shape, k.src_strides) == (
        "tiled-transpose", 4, (4096, 4096), (1, 4096))
    assert k.tile == kplan.SIMD_TILE[4] and k.threads == 2
    assert "source-fastest dim 0" in k.reason


@pytest.mark.parametrize("env, vector_bytes", [
    ({"REARRANGE_VECTOR_BYTES": "64"}, 64),
    ({"REARRANGE_VECTOR_BYTES": "32"}, 32),
    ({"NUMBA_CPU_NAME": "generic"}, 32),
    ({"NUMBA_CPU_NAME": "haswell", "NUMBA_CPU_FEATURES": ""}, 32),
    ({"NUMBA_CPU_NAME": "skylake-avx512", "NUMBA_CPU_FEATURES": ""}, 64),
    ({"NUMBA_CPU_NAME": "haswell", "NUMBA_CPU_FEATURES": "+avx2,+fma"}, 32),
    ({"NUMBA_CPU_FEATURES": "+avx2,+avx512f,+avx512bw"}, 64),
])
def test_register_tiles_follow_the_vector_width_numba_compiles_for(env, vector_bytes) -> None:
    # The plans' tile geometry and the runners' must agree: both come from the width
    # numba targets (its environment), fixed for the process; 2-byte tiles load one
    # vector per source row and store whole lines (float32's are 8x16 on both widths).
    script = ("from rearrange.kernel import plan; import rearrange.kernel as K; "
              "k = K.plan_copy((4096, 4096), (2, 8192), 2, threads=1); "
              "print(plan.VECTOR_BYTES, k.tile[0], k.tile[1])")
    clean = {k: v for k, v in os.environ.items()
             if k not in ("REARRANGE_VECTOR_BYTES", "NUMBA_CPU_NAME", "NUMBA_CPU_FEATURES")}
    out = subprocess.run([sys.executable, "-c", script], env={**clean, **env},
                         capture_output=True, text=True, check=True).stdout.split()
    width, ka, kb = map(int, out)
    assert width == vector_bytes
    assert ka * 2 == width                      # one vector per source row
    assert (kb * 2) % kplan.LINE == 0


def test_plan_fuses_and_drops_size_one_dims(monkeypatch) -> None:
    x = np.zeros((8, 1, 16, 32, 4), np.float32).transpose(2, 1, 0, 3, 4)
    k = K.plan_copy(x.shape, x.strides, 4, threads=1)
    assert k.fused_shape == (16, 8, 128) and k.src_strides == (128, 2048, 1)
    assert k.variant == "numpy" and "row loop" in k.reason    # small, one thread
    set_everywhere(monkeypatch, "ROWS_NUMPY_MAX_BYTES", 0)
    assert K.plan_copy(x.shape, x.strides, 4, threads=1).variant == "inner-contiguous"


@pytest.mark.parametrize("row, gap, kernel", [
    (2016, 672, True),          # a crop of (224, 224, 3) float32 images
    (512, 128, True), (4096, 1024, True), (1024, 1024, True),
    (1024, 64, False),          # a gap of one line: the hardware prefetchers bridge it
    (4096, 4096, False),        # a gap of a page
    (256, 256, False),          # rows too short to gain
    (8192, 1024, False),        # rows the kernel does not prefetch
])
def test_plan_rows_with_gaps_take_the_kernel_on_one_thread(row, gap, kernel,
                                                           monkeypatch) -> None:
    """Below ROWS_NUMPY_MAX_BYTES one thread copies rows with numpy's loop, except rows
    of 512 B to 4 KiB with gaps of 2 lines up to a row between them, from
    GAPPED_ROWS_MIN_BYTES on (here lowered to the test's size), which the kernel
    prefetches across; the copy is the same either way. Below that size, numpy's."""
    base = random_array((64, (row + gap) // 4), np.float32, np.random.default_rng(7))
    x = base[:, : row // 4]
    assert K.plan_copy(x.shape, x.strides, 4, threads=1).variant == "numpy"
    set_everywhere(monkeypatch, "GAPPED_ROWS_MIN_BYTES", x.nbytes)
    k = K.plan_copy(x.shape, x.strides, 4, threads=1)
    assert k.variant == ("inner-contiguous" if kernel else "numpy"), k.reason
    assert (f"gaps of {gap} B" in k.reason) == kernel
    out = np.empty(x.shape, np.float32)
    K.copy_into(out, x, k)
    assert out.tobytes() == np.ascontiguousarray(x).tobytes()


def test_plan_contiguous_is_memcpy_and_splits_wide_items() -> None:
    k = K.plan_copy((1000, 300), (300 * 16, 16), 16, "c", threads=1)
    assert (k.variant, k.unit_bytes, k.fused_shape, k.src_strides) == (
        "contiguous-memcpy", 8, (600000,), (1,))
    t = K.plan_copy((1000, 300), (16, 1000 * 16), 16, "c", threads=1)   # complex128 .T
    assert (t.variant, t.unit_bytes, t.fused_shape, t.src_strides) == (
        "tiled-transpose", 8, (1000, 300, 2), (2, 2000, 1))


def test_plan_odd_itemsize_uses_bytes_or_largest_power_of_two() -> None:
    assert K.plan_copy((100, 200), (3, 300), 3, "V").unit_bytes == 1
    k = K.plan_copy((100, 200), (12, 1200), 12, "V")
    assert k.unit_bytes == 4 and k.fused_shape == (100, 200, 3)


def test_plan_small_inner_dim_for_nhwc_to_nchw() -> None:
    x = np.zeros((64, 224, 224, 3), np.uint8).transpose(0, 3, 1, 2)
    k = K.plan_copy(x.shape, x.strides, 1, "u")
    assert k.variant == "small-inner-dim" and k.fused_shape == (64, 3, 50176)
    assert k.tile[0] == 3


def test_plan_numpy_for_objects_and_tiny_copies() -> None:
    k = K.plan_copy((100, 100), (8, 800), 8, "O")
    assert (k.variant, k.reason) == ("numpy", "object dtype: numpy copies references")
    assert K.plan_copy((10, 10), (4, 40), 4).variant == "numpy"
    assert K.plan_copy((), (), 8).variant == "numpy"
    assert K.plan_copy((0, 5), (4, 0), 4).variant == "empty"
    # Transposes: numpy below 64 KiB (in L1/L2 its loop beats a kernel call).
    assert K.plan_copy((128, 64), (4, 512), 4).variant == "numpy"          # 32 KiB
    assert K.plan_copy((128, 128), (4, 512), 4).variant == "tiled-transpose"  # 64 KiB


def test_plan_broadcast_and_strided_rows(monkeypatch) -> None:
    set_everywhere(monkeypatch, "ROWS_NUMPY_MAX_BYTES", 0)
    assert K.plan_copy((100, 1000), (0, 8), 8).variant == "inner-contiguous"
    k = K.plan_copy((1000, 100), (8, 0), 8)
    assert k.variant == "strided-rows" and "broadcast" in k.reason
    assert K.plan_copy((1000, 100), (1600, -16), 8).variant == "strided-rows"


def test_plan_threads_follow_size() -> None:
    assert K.plan_copy((64, 64), (4, 256), 4, threads=8).threads == 1
    assert K.plan_copy((4096, 4096), (4, 16384), 4, threads=8).threads == 8


@pytest.mark.parametrize("dtype", [np.uint8, np.float32, np.complex128], ids=["u1", "f4", "c16"])
@pytest.mark.parametrize("rows", [1001, 1003])
def test_transpose_off_the_line_grid_is_split_in_bands_of_rows(rows, dtype, monkeypatch) -> None:
    """Destination rows that do not start on a cache line: two threads get bands of rows
    (whole bands per chunk), not neighbouring column blocks that share lines."""
    set_everywhere(monkeypatch, "THREAD_MIN_BYTES", 1)
    x = random_array((rows, 3 * rows // 2), dtype, np.random.default_rng(rows))
    plan = K.plan_copy(x.T.shape, x.T.strides, x.itemsize, threads=2)
    assert plan.variant == "tiled-transpose"
    low = lowering.lower(plan, 0)
    params, quantum = low[3], low[-1]
    assert params[abi.P_ITA] >= 0 and params[abi.P_TR] % plan.tile[0] == 0
    assert quantum == params[abi.P_NKB]
    out = np.empty(x.T.shape, dtype)
    K.copy_into(out, x.T, plan)
    assert out.tobytes() == np.ascontiguousarray(x.T).tobytes()


def test_copy_into_checks_arguments() -> None:
    x = np.zeros((3, 4))
    with pytest.raises(ValueError, match="does not match"):
        K.copy_into(np.empty((3, 4), np.float32), x)
    with pytest.raises(ValueError, match="C-contiguous"):
        K.copy_into(np.empty((4, 3)).T, x)
    with pytest.raises(TypeError):
        K.copy_into([0], x)



def test_a_plan_for_another_source_is_never_run() -> None:
    """A plan handed in for other strides (or another item size) is set aside: the
    source is planned afresh and copied right, never read through the wrong plan."""
    y = np.arange(300 * 400, dtype=np.float32).reshape(300, 400)
    wrong = K.plan_copy((400, 300), (4, 1200), 4)          # y.T has (4, 1600)
    out = np.empty((400, 300), np.float32)
    K.copy_into(out, y.T, wrong)
    np.testing.assert_array_equal(out, y.T)
    other_itemsize = K.plan_copy((400, 300), (4, 1600), 2)
    K.copy_into(out, y.T, other_itemsize)
    np.testing.assert_array_equal(out, y.T)


# ---------------------------------------------------------------------- threads, import

def test_set_num_threads_validates() -> None:
    before = K.get_num_threads()
    try:
        K.set_num_threads(3)
        assert K.get_num_threads() == 3
        for bad in (0, -1, 1.5, True, "2"):
            with pytest.raises(ValueError):
                K.set_num_threads(bad)
    finally:
        K.set_num_threads(before)


def _python(code: str, **env) -> str:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    full_env = {**os.environ, "PYTHONPATH": root, **env}
    return subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                          text=True, env=full_env).stdout.strip()


def test_import_and_planning_do_not_import_numba() -> None:
    out = _python("import sys, rearrange.kernel as k; k.plan_copy((4096, 4096), (4, 16384), 4);"
                  "print('numba' in sys.modules)")
    assert out == "False"


def test_explaining_a_copy_imports_no_numba() -> None:
    """``import rearrange`` loads none of the heavy libraries, and explaining a plan with a
    copy (the kernel's plan printed) loads no numba: planning is pure Python."""
    code = ("import sys, rearrange\n"
            "heavy = ('numba', 'llvmlite', 'torch', 'jax', 'dask')\n"
            "print([m for m in heavy if m in sys.modules])\n"
            "text = str(rearrange.explain((4096, 4096), 'a b -> b a', dtype='float32', copy=True))\n"
            "print('tiled-transpose' in text, [m for m in heavy if m in sys.modules])")
    assert _python(code).splitlines() == ["[]", "True []"]


def test_thread_default_from_environment() -> None:
    assert _python("import rearrange.kernel as k; print(k.get_num_threads())",
                   REARRANGE_NUM_THREADS="3") == "3"


def test_concurrent_copies_from_python_threads(monkeypatch) -> None:
    """Two Python threads copying at once: one may run its copy single-threaded, both
    results are right."""
    small_copies_take_the_kernel(monkeypatch)
    xs = [random_array((300, 400), np.float32, np.random.default_rng(i)) for i in range(2)]
    outs = [np.empty((400, 300), np.float32) for _ in xs]
    errors = []

    def work(i):
        try:
            for _ in range(50):
                K.copy_into(outs[i], xs[i].T, K.plan_copy((400, 300), xs[i].T.strides, 4,
                                                          threads=2))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    run_in_threads(work)
    assert not errors
    for x, out in zip(xs, outs):
        assert out.tobytes() == np.ascontiguousarray(x.T).tobytes()


def test_copy_in_a_forked_child_after_a_parallel_copy() -> None:
    """The child of a fork (which inherits no worker threads) starts its own, copies
    right, and does not hang."""
    code = """
import os, sys, numpy as np, rearrange.kernel as K, rearrange.kernel.threads as T
x = np.random.default_rng(0).random((1024, 1024), dtype=np.float32)
out = np.empty((1024, 1024), np.float32)
K.copy_into(out, x.T, K.plan_copy(x.T.shape, x.T.strides, 4, threads=2))
pid = os.fork()
if pid == 0:
    o = np.empty_like(out)
    for _ in range(20):
        K.copy_into(o, x.T, K.plan_copy(x.T.shape, x.T.strides, 4, threads=2))
    os._exit(0 if (o == x.T).all() and len(T._pool.workers) == 1 else 1)
_, status = os.waitpid(pid, 0)
print(os.waitstatus_to_exitcode(status))
"""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, env={**os.environ, "PYTHONPATH": root})
    assert out.stdout.strip() == "0", out.stderr


def test_multithreaded_copies_leave_the_environment_and_numba_threads_alone() -> None:
    """Copies run on the kernel's own workers: no OpenMP / numba thread pool is started
    and no environment variable is set."""
    code = """
import os, numpy as np, rearrange.kernel as K
x = np.random.default_rng(0).random((2048, 2048), dtype=np.float32)
before = dict(os.environ)
out = np.empty((2048, 2048), np.float32)
K.copy_into(out, x.T, K.plan_copy(x.T.shape, x.T.strides, 4, threads=2))
from numba.np.ufunc import parallel
print(dict(os.environ) == before, parallel._is_initialized, bool((out == x.T).all()))
"""
    assert _python(code) == "True False True"


@pytest.mark.parametrize("threads", [1, 2, 5])
def test_workers_that_never_come_or_come_late(threads, monkeypatch) -> None:
    """The calling thread does every chunk no worker has taken (its own range, then
    every other thread's); a worker that starts after the copy returned finds nothing
    left and writes nothing."""
    small_copies_take_the_kernel(monkeypatch)
    jobs = []
    monkeypatch.setattr(kthreads._pool, "submit",
                        lambda job, helpers, join=False: jobs.append(job) or [])
    # Waiting would be for a worker that never comes: chunks the caller left undone.
    monkeypatch.setattr(kthreads, "_wait", lambda job: pytest.fail("chunks left undone"))
    x = random_array((300, 400), np.float32, np.random.default_rng(5))
    out = np.empty((400, 300), np.float32)
    K.copy_into(out, x.T, K.plan_copy(out.shape, x.T.strides, 4, threads=threads))
    assert out.tobytes() == np.ascontiguousarray(x.T).tobytes()
    assert len(jobs) == (threads > 1)
    out[...] = -1
    for job in jobs:
        job.work()                          # the late worker
        assert job.done()
    assert (out == -1).all()


@pytest.mark.parametrize("threads", [2, 5])
def test_a_worker_that_arrives_first_takes_every_range(threads, monkeypatch) -> None:
    """The ranges of chunks do not depend on who arrives first: a worker that runs the
    whole copy before the calling thread starts (its home is then range 0, and it
    takes every other range) leaves the caller nothing, and the copy is whole."""
    small_copies_take_the_kernel(monkeypatch)
    monkeypatch.setattr(kthreads._pool, "submit",
                        lambda job, helpers, join=False: job.work() or [])
    monkeypatch.setattr(kthreads, "_wait", lambda job: pytest.fail("chunks left undone"))
    for shape, view in (((300, 400), lambda x: x.T),
                        ((4, 3, 40, 50), lambda x: x.transpose(0, 2, 3, 1)),
                        ((6, 70, 80), lambda x: x[:, ::2])):
        x = random_array(shape, np.float32, np.random.default_rng(6))
        src = view(x)
        out = np.full(src.shape, -1, np.float32)
        K.copy_into(out, src, K.plan_copy(src.shape, src.strides, 4, threads=threads))
        assert out.tobytes() == np.ascontiguousarray(src).tobytes()


def _pool_runner():
    from rearrange.kernel import builds

    return builds.runner_for(*builds.POOL_KEY)


def _mailbox_state(pool, worker: int = 0) -> int:
    return pool.box_pointers[worker][abi.M_WORD] % abi.STATE_BITS


@pytest.fixture
def lone_pool(monkeypatch):
    """A pool whose one worker never starts (a thread object that is not run): its
    mailbox is driven by the test. Spinning is on (the pool runner loaded)."""
    import threading

    pool = kthreads._Pool()
    pool.workers = [threading.Thread(target=lambda: None)]
    pool.run_pool = _pool_runner()
    pool.tick_rate = 1e9
    monkeypatch.setattr(kthreads, "_pool", pool)
    monkeypatch.setattr(kthreads, "_wait", lambda job: pytest.fail("chunks left undone"))
    small_copies_take_the_kernel(monkeypatch)
    return pool


LAYOUTS = (((300, 400), np.float32, lambda x: x.T),
           ((4, 3, 40, 50), np.uint8, lambda x: x.transpose(0, 2, 3, 1)),
           ((6, 70, 80), np.int16, lambda x: x[:, ::-2]),
           ((2, 3, 60, 70), np.float64, lambda x: x[::-1, :, ::-1]))


def test_a_post_nobody_takes_is_taken_back(lone_pool) -> None:
    """A spinning (IDLE) worker gets the copy as a post; when the caller has done every
    chunk and the worker has not taken the post, the caller takes it back (all in the
    pool's native fork-join: submit returns None): the mailbox is IDLE again under the
    post's ticket, and the copy is whole. A mailbox ASLEEP gets no post (the job is
    queued)."""
    box = lone_pool.box_pointers[0]
    posts = []
    submit = lone_pool.submit
    lone_pool.submit = lambda job, helpers, join=False: posts.append(
        submit(job, helpers, join)) or posts[-1]
    for ticket, (shape, dtype, view) in enumerate(LAYOUTS, start=1):
        box[abi.M_WORD] = (ticket - 1) * abi.STATE_BITS + abi.IDLE
        src = view(random_array(shape, dtype, np.random.default_rng(ticket)))
        out = np.full(src.shape, 7, dtype)
        K.copy_into(out, src, K.plan_copy(src.shape, src.strides, out.itemsize, threads=2))
        assert out.tobytes() == np.ascontiguousarray(src).tobytes()
        assert posts[-1] is None and lone_pool.native_joins == ticket
        assert box[abi.M_WORD] == ticket * abi.STATE_BITS + abi.IDLE
    box[abi.M_WORD] = abi.ASLEEP
    src = LAYOUTS[0][2](random_array(LAYOUTS[0][0], np.float32, np.random.default_rng(0)))
    out = np.empty(src.shape, np.float32)
    K.copy_into(out, src, K.plan_copy(src.shape, src.strides, 4, threads=2))
    assert posts[-1] == [] and lone_pool.jobs.qsize() == 1
    assert out.tobytes() == np.ascontiguousarray(src).tobytes()


def test_a_post_is_run_by_the_spinning_worker(lone_pool) -> None:
    """The worker's side on this thread: posted to, the mailbox's serve loop runs the
    whole copy, then sleeps when its spin runs out (ASLEEP); the caller finds every
    chunk done, settles at once, and the copy is whole."""
    box = lone_pool.box_pointers[0]
    run = lone_pool.run_pool
    submit = lone_pool.submit

    def submit_and_serve(job, helpers, join=False):
        posts = submit(job, helpers)        # posted only: the worker's side is the test's
        assert len(posts) == 1 and _mailbox_state(lone_pool) == abi.POSTED
        run(box, abi.OP_SERVE, 1000, None, None, 0)      # runs the job, then sleeps
        assert _mailbox_state(lone_pool) == abi.ASLEEP
        ctrl = job.steps[0][1][0]           # the job's one copy: its control block
        assert ctrl[abi.C_DONE] == ctrl[abi.C_NWORK]
        return posts

    lone_pool.submit = submit_and_serve
    for ticket, (shape, dtype, view) in enumerate(LAYOUTS):
        box[abi.M_WORD] = ticket * abi.STATE_BITS + abi.IDLE
        src = view(random_array(shape, dtype, np.random.default_rng(10 + ticket)))
        out = np.full(src.shape, 7, dtype)
        K.copy_into(out, src, K.plan_copy(src.shape, src.strides, out.itemsize, threads=2))
        assert out.tobytes() == np.ascontiguousarray(src).tobytes()


@pytest.fixture
def spinning_pool(monkeypatch):
    """A fresh pool whose workers spin 0.5 s after each copy (long enough for a test to
    see it), small copies on the kernel, and the list of each copy's posts (None: the
    copy was one native fork-join, its post made and settled there)."""
    small_copies_take_the_kernel(monkeypatch)
    pool = kthreads._Pool()
    monkeypatch.setattr(kthreads, "_pool", pool)
    monkeypatch.setattr(kthreads, "_spin", 0.5)
    posts = []
    submit = pool.submit
    pool.submit = lambda job, helpers, join=False: posts.append(
        submit(job, helpers, join)) or posts[-1]
    return pool, posts


def test_workers_spin_for_the_next_copy_then_sleep(spinning_pool) -> None:
    """A real worker: after its first copy (from the queue) it spins, and the next copy
    is posted to it; once its spin has run out it sleeps on the queue again, and the copy
    after that wakes it from there. Every copy is whole."""
    import time

    pool, posts = spinning_pool

    def copy(seed: int) -> None:
        shape, dtype, view = LAYOUTS[seed % len(LAYOUTS)]
        src = view(random_array(shape, dtype, np.random.default_rng(seed)))
        out = np.empty(src.shape, dtype)
        K.copy_into(out, src, K.plan_copy(src.shape, src.strides, out.itemsize, threads=2))
        assert out.tobytes() == np.ascontiguousarray(src).tobytes()

    def until(state: int, seconds: float = 10.0) -> None:
        deadline = time.monotonic() + seconds
        while _mailbox_state(pool) != state:
            assert time.monotonic() < deadline, f"mailbox never {state}"
            time.sleep(0.001)

    copy(0)
    until(abi.IDLE)
    assert pool.tick_rate > 0 and len(pool.workers) == 1
    copy(1)
    until(abi.ASLEEP)
    copy(2)
    until(abi.IDLE)
    assert posts == [[], None, []]


def test_spins_stop_at_exit(spinning_pool) -> None:
    """What the pool does at exit: a worker in its (here 0.5 s) spin leaves it at once,
    no worker spins after, and copies still run (through the queue)."""
    import time

    pool, posts = spinning_pool
    x = random_array((300, 400), np.float32, np.random.default_rng(4))
    out = np.empty((400, 300), np.float32)
    plan = K.plan_copy(x.T.shape, x.T.strides, 4, threads=2)
    K.copy_into(out, x.T, plan)
    deadline = time.monotonic() + 10
    while not pool.spinning[0] or _mailbox_state(pool) != abi.IDLE:
        assert time.monotonic() < deadline
        time.sleep(0.001)
    start = time.monotonic()
    pool.stop_spinning()
    assert time.monotonic() - start < 0.04
    assert not any(pool.spinning) and _mailbox_state(pool) == abi.ASLEEP
    for _ in range(3):
        out[...] = 0
        K.copy_into(out, x.T, plan)
        assert out.tobytes() == np.ascontiguousarray(x.T).tobytes()
        time.sleep(0.01)
    assert not any(pool.spinning) and [len(p) for p in posts[-3:]] == [0, 0, 0]


def test_copies_from_two_python_threads_through_spinning_workers(monkeypatch) -> None:
    """Two Python threads copying at once through the one spinning worker: posts,
    queued jobs and copies the caller runs alone interleave (pauses between some copies
    let the spin run out), layouts and dtypes mixed, the plan caches never cleared;
    every result is numpy's."""
    import time

    small_copies_take_the_kernel(monkeypatch)
    monkeypatch.setattr(kthreads, "_pool", kthreads._Pool())
    monkeypatch.setattr(kthreads, "_spin", 200e-6)
    errors = []

    def work(i: int) -> None:
        rng = np.random.default_rng(i)
        try:
            for k in range(60):
                shape, dtype, view = LAYOUTS[(k + i) % len(LAYOUTS)]
                src = view(random_array(shape, dtype, rng))
                out = np.empty(src.shape, dtype)
                K.copy_into(out, src)
                if out.tobytes() != np.ascontiguousarray(src).tobytes():
                    errors.append((i, k))
                if k % 7 == 0:
                    time.sleep(0.002)
        except Exception as error:  # pragma: no cover - reported below
            errors.append(error)

    monkeypatch.setattr(kthreads, "_num_threads", 2)
    run_in_threads(work)
    assert not errors


def test_copies_go_on_when_the_pool_runner_fails(monkeypatch) -> None:
    """A pool runner that cannot be built (its compile raises) turns spinning off, once:
    multithreaded copies still run, through the queue, and are whole."""
    small_copies_take_the_kernel(monkeypatch)
    pool = kthreads._Pool()
    monkeypatch.setattr(kthreads, "_pool", pool)
    calls = []

    def failing():
        calls.append(1)
        raise RuntimeError("no compiler here")

    monkeypatch.setattr(kthreads, "_pool_runner", failing)
    x = random_array((300, 400), np.float32, np.random.default_rng(8))
    plan = K.plan_copy(x.T.shape, x.T.strides, 4, threads=2)
    for _ in range(3):
        out = np.empty((400, 300), np.float32)
        K.copy_into(out, x.T, plan)
        assert out.tobytes() == np.ascontiguousarray(x.T).tobytes()
    assert calls == [1] and pool.run_pool is None and pool.no_runner


def test_spinning_is_off_without_a_cycle_counter() -> None:
    """A counter that does not move (a machine without one) has a rate of 0 ticks per
    second: workers then only sleep on the queue. The real counter's rate is positive."""
    def still(box, op, arg, block, params, token):
        block[abi.C_TICKET] = 12345

    assert kthreads._tick_rate(still) == 0
    assert kthreads._tick_rate(_pool_runner()) > 0


def test_set_spin_seconds_turns_posting_off_and_on(spinning_pool) -> None:
    """set_spin_seconds(0): copies are queued, not posted (the worker then sleeps after
    each); back to a spin, they are posted again (a native fork-join each). Bad values
    are refused."""
    import time

    pool, posts = spinning_pool
    x = random_array((300, 400), np.float32, np.random.default_rng(3))
    out = np.empty((400, 300), np.float32)
    plan = K.plan_copy(x.T.shape, x.T.strides, 4, threads=2)
    for spin in (0.5, 0.0, 0.5):
        kthreads.set_spin_seconds(spin)
        deadline = time.monotonic() + 10
        K.copy_into(out, x.T, plan)
        while spin and _mailbox_state(pool) != abi.IDLE:
            assert time.monotonic() < deadline
            K.copy_into(out, x.T, plan)
            time.sleep(0.001)
        posts.clear()
        K.copy_into(out, x.T, plan)
        assert posts[-1] == (None if spin else [])
        assert out.tobytes() == np.ascontiguousarray(x.T).tobytes()
    for bad in (-1, 2, True, "0.1", float("nan")):
        with pytest.raises(ValueError, match="set_spin_seconds"):
            kthreads.set_spin_seconds(bad)


@pytest.mark.slow
def test_spin_from_environment() -> None:
    code = ("import warnings, rearrange.kernel.threads as t\n"
            "print(t.spin_seconds())")
    assert _python(code, REARRANGE_SPIN_US="0") == "0.0"
    assert float(_python(code, REARRANGE_SPIN_US="50")) == pytest.approx(50e-6)
    for bad in ("soon", "inf", "-5"):
        out = subprocess.run([sys.executable, "-W", "error", "-c", code],
                             capture_output=True, text=True,
                             env={**os.environ, "REARRANGE_SPIN_US": bad,
                                  "PYTHONPATH": os.path.dirname(os.path.dirname(
                                      os.path.abspath(__file__)))})
        assert f"REARRANGE_SPIN_US={bad!r} is not a number of microseconds" in out.stderr
        assert out.returncode != 0
    copies = """
import numpy as np, rearrange.kernel as K, rearrange.kernel.threads as T
x = np.random.default_rng(0).random((1024, 1024), dtype=np.float32)
out = np.empty((1024, 1024), np.float32)
for _ in range(20):
    K.copy_into(out, x.T, K.plan_copy(x.T.shape, x.T.strides, 4, threads=2))
print(bool((out == x.T).all()), T._pool.tick_rate, T._pool.box_pointers[0][0] % 8)
"""
    assert _python(copies, REARRANGE_SPIN_US="0") == "True -1.0 0"   # never measured


@pytest.mark.parametrize("madvise", [True, False], ids=["madvise", "touch"])
@pytest.mark.parametrize("threads", [1, 2])
def test_transpose_into_a_fresh_destination_populates_it_first(threads, madvise,
                                                               monkeypatch) -> None:
    """A transpose into pages never touched (here a new 32 MiB mapping, taken as fresh)
    populates them first — MADV_POPULATE_WRITE, or a write per page where that is
    missing — then copies; the pages around the destination are not written. A row copy
    into such pages does not populate them (regular stores as they fault)."""
    if not madvise:
        monkeypatch.setattr(kthreads, "madvise_address", lambda: 0)   # as without madvise
    set_everywhere(monkeypatch, "THREAD_MIN_BYTES", 1)
    monkeypatch.setattr(kthreads, "_num_threads", threads)
    populated = []

    def execute(low, run, daddr, saddr, populate_bytes):
        populated.append(populate_bytes)
        return kthreads.execute(low, run, daddr, saddr, populate_bytes)

    monkeypatch.setattr(K, "execute", execute)
    # Fresh as far as copy_into knows (mincore's answer for a new mapping depends on
    # where the allocator put it: test_untouched_destination_is_detected tests that).
    monkeypatch.setattr(K, "untouched", lambda addr, nbytes: True)
    rng = np.random.default_rng(2)
    for src, variant in ((random_array((2048, 4096), np.float32, rng).T, "tiled-transpose"),
                         (random_array((4, 8, 1024, 256), np.float32, rng).transpose(
                             0, 2, 1, 3), "inner-contiguous")):
        plan = K.plan_copy(src.shape, src.strides, 4)
        assert (plan.variant, plan.threads) == (variant, threads)
        raw = np.empty(src.nbytes + 3 * 4096, np.uint8)
        raw[:4096] = 7
        raw[-4096:] = 7
        dst = raw[4096 + 64:4096 + 64 + src.nbytes].view(np.float32).reshape(src.shape)
        populated.clear()
        K.copy_into(dst, src)
        assert dst.tobytes() == np.ascontiguousarray(src).tobytes()
        assert (raw[:4096] == 7).all() and (raw[-4096:] == 7).all()
        assert populated == [src.nbytes if variant == "tiled-transpose" else 0]


def test_untouched_destination_is_detected() -> None:
    """A fresh large np.empty is a new mapping: its pages are not resident until written
    (then panels use regular stores, rows and transposes populate the pages first).
    Where mincore is unavailable: always False."""
    a = np.empty(64 << 20, np.uint8)
    addr = a.__array_interface__["data"][0]
    fresh = pages.untouched(addr, a.nbytes)
    a[...] = 1
    assert not pages.untouched(addr, a.nbytes)
    assert fresh or not sys.platform.startswith("linux")


def test_warmup_compiles_every_family_and_unit_size() -> None:
    done = K.warmup()
    assert set(done) == {f"{family}[uint{8 * u}]" for family in ("rows", "transpose", "tiles")
                         for u in (1, 2, 4, 8)} | {"pool[uint64]"} | {
        f"{family}[float{8 * u}]" for family in ("row-sums", "row-max", "column-sums",
                                                 "window-max", "window-sums")
        for u in (4, 8)} | {"row-join[uint8]", "gemm[float32]", "gemm[float64]"}
    from rearrange.kernel import builds

    assert all(builds.status(family, u) == "ready"
               for family in ("rows", "transpose", "tiles") for u in (1, 2, 4, 8))
    assert builds.status(*builds.POOL_KEY) == "ready"
    assert all(builds.status(family, u) == "ready"
               for family in ("row-sums", "row-max", "column-sums", "window-max",
                              "window-sums")
               for u in (4, 8))
    assert builds.status("row-join", 1) == "ready"
    assert all(builds.status("gemm", u) == "ready" for u in (4, 8))


# ---------------------------------------------------------------------- large

def _available_memory() -> int:
    """Bytes this machine can hand out without swapping (MemAvailable on Linux)."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 0


@pytest.mark.slow
@pytest.mark.skipif(_available_memory() < 6 << 30,
                    reason="needs 4.3 GB of memory (two 2 GiB arrays) and 6 GiB available")
def test_transpose_over_2_to_the_31_elements() -> None:
    """About 10 s and 4.3 GB at peak here: run by default wherever the memory is there."""
    rows, cols = 2**16, 2**15 + 8                  # 2**31 + 2**19 elements, 64-bit indices
    x = np.empty((rows, cols), np.uint8)
    x[...] = (np.arange(cols, dtype=np.uint32) * 7 % 251).astype(np.uint8)
    x += (np.arange(rows, dtype=np.uint32) % 253).astype(np.uint8)[:, None]
    out = np.empty((cols, rows), np.uint8)
    K.copy_into(out, x.T)
    rng = np.random.default_rng(0)
    for i in list(rng.integers(0, cols, 16)) + [0, cols - 1]:
        assert np.array_equal(out[i], x[:, i])
    for j in list(rng.integers(0, rows, 4)) + [rows - 1]:
        assert np.array_equal(out[:, j], x[j])
