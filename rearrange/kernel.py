"""The copy kernel: a strided view copied into a fresh C-contiguous array.

When the planner has proved that no strides can express a rearrangement, the executor
allocates a C-contiguous ``dst`` and calls :func:`copy_into` with the strided source view.
Two stages, as everywhere in this package:

* :func:`plan_copy` — pure Python, no numba, a few microseconds. It works in *units*
  (the raw bits moved: 1, 2, 4 or 8 bytes; a 16-byte item is two 8-byte units, a
  3-byte ``V3`` item three 1-byte units), drops size-1 dims, fuses dims that are
  contiguous in both operands, and picks a variant. The result, a :class:`CopyKernel`,
  is what ``explain()`` prints.
* :func:`copy_into` — runs the plan. Small copies and object arrays go to ``np.copyto``;
  everything else to a numba kernel, compiled on the first call (never at import) and
  cached on disk.

Variants (``CopyKernel.reason`` gives the one-line why of a given plan):

``numpy``               object dtype (references need refcounts), copies under 32 KiB
                        (transposes under 64 KiB), 0-d, and row copies under 24 MiB on one thread (numpy's own row
                        loop is as fast there; at run time also under 64 MiB into pages
                        not touched yet, see below).
``empty``               zero-size: nothing to move.
``contiguous-memcpy``   the source is contiguous after fusion: memcpy, split over threads.
``inner-contiguous``    source-fastest dim == destination-fastest dim: panels of rows,
                        each row prefetched where the work unit two ahead reads it; the
                        two outer dims blocked HPTT-style when the rows are short and a
                        panel would read more than 64 source streams; large destinations
                        are written through an L1 staging buffer as whole non-temporal
                        lines.
``strided-rows``        the destination-fastest dim is also the source's smallest stride,
                        but that stride is not 1 (step slices, reversed, broadcast 0).
``tiled-transpose``     source-fastest dim (stride 1) != destination-fastest dim, both
                        long (HPTT): tiles of source rows are loaded into vector registers,
                        transposed with shuffles and stored as whole 64-byte destination
                        lines — non-temporally (bypassing the caches) when the destination
                        is large; the tile columns continue into the dim before the
                        destination-fastest one, so short rows still make long lines. The
                        last tile of a column block ends at the last row (rewriting a few
                        rows with the same values); the columns outside the blocks are
                        copied by a column of tiles over the first (last) block's width,
                        with regular stores, rewriting some of the block's columns.
``small-inner-dim``     one of the two fastest dims is short (NHWC→NCHW with C=3): the
                        short dim is the outer loop of a panel that stays in L1; 2, 3 or
                        4 channels are split by a loop with constant strides (LLVM
                        vectorises it as interleaved loads) or interleaved in vector
                        registers a line of each channel at a time (whole lines out,
                        non-temporal when large and on the line grid). Panels of one small
                        tile (ViT patchify's 16x3) run along an outer dim: the one the
                        source steps through fastest, or with streaming stores the one
                        that continues the tile in the destination.
``tiled``               any other pair of fastest dims: scalar tiles sized for L1.

Threads: copies from 2 MiB are split over threads. The calling thread starts at once and
takes chunks of the destination from a shared counter; worker threads of this module
(Python threads that run the compiled kernel with the GIL released, started on the first
multithreaded copy) take chunks from the same counter as they wake up. The copy returns
when every chunk is done; the caller waits only for chunks a worker has started, never
for a worker the OS has not run yet — on a busy machine a multithreaded copy then costs
about what a single-threaded one does (with OpenMP's barrier it could cost many times
more). The count is :func:`set_num_threads`; its default is the environment variable
``REARRANGE_NUM_THREADS``, else the CPUs this process may run on
(``os.sched_getaffinity``, else ``os.cpu_count()``); workers are capped at one fewer than
the CPUs. numba's own thread pool (OpenMP, TBB) is not used, so nothing here sets or
reads ``OMP_*`` / ``NUMBA_NUM_THREADS``; copies from several Python threads at once share
the workers, and a forked child starts its own.

Fresh destinations: a destination of 24 MiB or more that the process has not touched
yet (a new ``np.empty`` of that size is a fresh mapping, ``mincore`` says) is page-faulted
as it is written, and the faults zero its lines into the caches. ``small-inner-dim`` and
``tiled`` copies then use regular stores (non-temporal ones would first evict those
lines). Row copies and tiled transposes instead populate the destination's pages first
(``MADV_POPULATE_WRITE``, split over the copy's threads, which then fault in parallel;
where that is missing, one atomic write per page) and then stream past the caches —
except one-thread row copies under 64 MiB, which numpy does (its row loop writes the
lines while the fault has them in cache). Each was the fastest way for its case here.

Compilation and disk cache: the first copy imports numba and compiles the kernel for its
unit size (~6 s; ``warmup()`` compiles all four). The kernel is one C-ABI function per unit
size (``numba.cfunc``), called through ctypes by the caller and the workers alike. It is
compiled with ``cache=True``: numba writes the cache next to this file (``__pycache__``)
when that directory is writable, else to the user cache dir (``~/.cache/numba`` on
Linux); ``NUMBA_CACHE_DIR`` overrides both. A read-only install therefore still caches,
per user; with a warm cache a fresh process's first copy costs ~0.25 s (mostly the numba
import).
"""

from __future__ import annotations

import math
import os
import sys
import threading
from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "CopyKernel",
    "plan_copy",
    "copy_into",
    "set_num_threads",
    "get_num_threads",
    "warmup",
]

# ---------------------------------------------------------------------------- tuning
# Measured on a 2-core Xeon (AVX-512) shared with other work; see bench/kernel_bench.py.

NUMPY_MAX_BYTES = 32 << 10       # below this, np.copyto beats the kernel call overhead
TRANSPOSE_NUMPY_MAX_BYTES = 64 << 10  # the same for register-tile transposes
ROWS_NUMPY_MAX_BYTES = 24 << 20  # row copies: numpy's loop is as fast single-threaded
THREAD_MIN_BYTES = 1 << 20       # each extra thread needs at least this much to move
NONTEMPORAL_MIN_BYTES = 24 << 20  # row/panel streams this large bypass the caches
NONTEMPORAL_TILE_MIN_BYTES = 2 << 20  # register-tile transposes: from this size
FRESH_ROWS_NUMPY_MAX_BYTES = 64 << 20  # one-thread row copies into untouched pages: numpy
LINE = 64                        # bytes per cache line (and per non-temporal store)
SMALL_DIM = 16                   # a fastest dim this short makes a "small-inner-dim" panel
TILE_BYTES = 4 << 10             # scalar tiles: bytes per tile (both sides fit in L1)
PANEL_BYTES = 8 << 10            # small-inner-dim panels: bytes per panel
ROW_CHUNK_BYTES = 64 << 10       # a work unit of rows moves about this many bytes
ROW_BLOCK_BYTES = 4096           # short rows: blocks of two outer dims, runs of this size,
ROW_STREAMS_MAX = 64             # when a panel would read more source streams than this
TILE_BLOCK_BYTES = 1024          # the same for the panels of tiled transposes
STAGE_BYTES = 16 << 10           # per-thread staging buffer of the write-combining stream
PREFETCH_ROW_BYTES = 4096        # rows up to this long are prefetched in software,
PREFETCH_UNITS_AHEAD = 2         # where they will be read this many work units later
CHUNKS_PER_THREAD = 8            # threads take work in chunks of 1/(8 * threads) each
TILE_PREFETCH_LINES = {1: 2}     # register tiles, per unit: prefetch this many lines ahead
PAGE = 4096                      # bytes per (small) page
POPULATE_STEP_BYTES = 2 << 20    # destinations are populated in slices of whole huge pages
MADV_POPULATE_WRITE = 23         # Linux >= 5.14: fault pages in writable, one call

# SIMD tile geometry per unit size: (Ka, Kb) elements — Ka along the source-fastest dim
# (one vector load per source row), Kb along the destination-fastest dim (one or two
# whole cache lines per destination row). Chosen by measurement (in-cache and DRAM).
_SIMD_TILE = {1: (64, 64), 2: (32, 32), 4: (16, 32), 8: (8, 16)}
# With groups of two units moving together (16-byte items as two 8-byte units).
_SIMD_TILE_G2 = {1: (16, 32), 2: (16, 16), 4: (8, 16), 8: (4, 8)}
# Tiles of more rows than the 32 vector registers hold (uint8) are transposed in blocks of
# this many rows, each parked on the stack while the next is done (see _tile).
_PARK_ROWS = 16

_UNIT_DTYPES = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


# ---------------------------------------------------------------------------- threads

def _default_threads() -> int:
    env = os.environ.get("REARRANGE_NUM_THREADS", "").strip()
    if env:
        try:
            n = int(env)
        except ValueError:
            n = 0
        if n >= 1:
            return n
        import warnings
        warnings.warn(f"REARRANGE_NUM_THREADS={env!r} is not a positive integer; ignored",
                      RuntimeWarning, stacklevel=2)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


_num_threads = _default_threads()


def set_num_threads(n: int) -> None:
    """Set the number of threads copies may use (at most; small copies use fewer)."""
    global _num_threads
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"set_num_threads: expected a positive integer, got {n!r}")
    _num_threads = int(n)


def get_num_threads() -> int:
    """Threads copies may use: set_num_threads, else REARRANGE_NUM_THREADS, else the CPUs
    this process may run on."""
    return _num_threads


# ---------------------------------------------------------------------------- the plan

@dataclass(frozen=True, slots=True)
class CopyKernel:
    """How one strided → C-contiguous copy is done. Pure metadata, printable by explain()."""

    variant: str                 # numpy | empty | contiguous-memcpy | inner-contiguous |
    #                              strided-rows | tiled-transpose | small-inner-dim | tiled
    unit_bytes: int              # the raw-bits unit moved: 1, 2, 4 or 8 bytes
    fused_shape: tuple[int, ...]  # after dropping size-1 dims and fusing, in units
    src_strides: tuple[int, ...]  # source strides of the fused dims, in units
    tile: tuple[int, int] | None  # tile (source-fastest, destination-fastest) in units
    threads: int                 # threads the copy will use
    reason: str                  # one line: why this variant
    # The source this plan was made for: (shape, byte strides, itemsize). copy_into runs
    # a plan only on a source with exactly this signature (any other is planned afresh):
    # the fused loops, unit and tile are valid for it alone.
    source: tuple = field(default=(), repr=False, compare=False)


def _lowbit(x: int) -> int:
    return x & -x if x else 1 << 62


def plan_copy(
    shape: tuple[int, ...],
    src_strides_bytes: tuple[int, ...],
    itemsize: int,
    dtype_kind: str = "f",
    threads: int | None = None,
) -> CopyKernel:
    """Plan the copy of a strided source (shape, byte strides) into a C-contiguous array.

    Pure and cheap (no numba, no data, ~5 µs). ``dtype_kind`` is numpy's ``dtype.kind``;
    pass ``"O"`` for every dtype that holds Python objects (``dtype.hasobject``, also
    structured ones): those are copied by numpy. ``threads`` defaults to
    :func:`get_num_threads`. Assumes both buffers are aligned to the unit; ``copy_into``
    re-plans with a smaller unit for buffers that are not.

    >>> k = plan_copy((4096, 4096), (4, 16384), 4)     # a float32 transpose
    >>> k.variant, k.fused_shape, k.src_strides, k.tile
    ('tiled-transpose', (4096, 4096), (1, 4096), (16, 32))
    >>> plan_copy((64, 3, 224, 224), (150528, 1, 672, 3), 1).variant   # NHWC -> NCHW
    'small-inner-dim'
    """
    return _plan(tuple(shape), tuple(src_strides_bytes), itemsize, dtype_kind,
                 _num_threads if threads is None else threads, LINE)


def _plan(shape, strides, itemsize, kind, threads, align) -> CopyKernel:
    if len(shape) != len(strides):
        raise ValueError(f"plan_copy: shape {shape} and strides {strides} differ in length")
    if threads < 1:
        raise ValueError(f"plan_copy: threads must be positive, got {threads}")
    signature = (shape, strides, itemsize)
    if kind == "O":
        return CopyKernel("numpy", itemsize, tuple(shape), (), None, 1,
                          "object dtype: numpy copies references", signature)
    total = math.prod(shape)
    if total == 0:
        return CopyKernel("empty", itemsize, (0,), (0,), None, 1, "zero-size: nothing to copy",
                          signature)
    nbytes = total * itemsize
    # The unit: the largest power of two (<= 8) dividing the itemsize, every stride of a
    # dim that moves, and the buffers' alignment.
    bits = itemsize | align | 8
    for n, s in zip(shape, strides):
        if n > 1:
            bits |= _lowbit(s)
    u = min(_lowbit(bits), 8)
    fshape, fstr = _fuse(shape, strides, itemsize, u)

    def make(variant, tile, reason, min_threads_bytes=THREAD_MIN_BYTES):
        t = max(1, min(threads, nbytes // min_threads_bytes))
        return CopyKernel(variant, u, fshape, fstr, tile, t, reason, signature)

    if nbytes < NUMPY_MAX_BYTES or not fshape:
        why = "a single item" if not fshape else f"{nbytes} B < {NUMPY_MAX_BYTES} B"
        return CopyKernel("numpy", u, fshape, fstr, None, 1,
                          f"{why}: np.copyto costs less than a kernel call", signature)
    d = len(fshape)
    nb, sb = fshape[-1], fstr[-1]
    if d == 1 and sb == 1:
        return make("contiguous-memcpy", None, "source contiguous after fusion: memcpy")
    # Group: a short contiguous last dim that rides along (16-byte items as 2 x 8 bytes).
    g = 1
    if sb == 1 and d >= 2 and nb == 2 and u in _SIMD_TILE_G2:
        g = 2
    single = threads == 1 or nbytes < 2 * THREAD_MIN_BYTES

    def rows(variant, reason):
        if single and nbytes < ROWS_NUMPY_MAX_BYTES:
            return CopyKernel("numpy", u, fshape, fstr, None, 1,
                              f"{reason}: numpy's row loop is as fast below "
                              f"{ROWS_NUMPY_MAX_BYTES >> 20} MiB on one thread", signature)
        return make(variant, None, reason)

    if sb == 1 and g == 1:
        return rows("inner-contiguous", f"source- and destination-fastest dim {d - 1} "
                                        f"(stride 1): rows of {nb * u} B")
    # The destination-fastest dim (b) and the source-fastest other dim (a).
    bdim = d - 1 if g == 1 else d - 2
    nb, sb = fshape[bdim], fstr[bdim]
    adim = -1
    for k in range(bdim):
        s = fstr[k]
        if s != 0 and (adim < 0 or abs(s) < abs(fstr[adim])):
            adim = k
    if adim < 0 or abs(fstr[adim]) >= abs(sb) or (g > 1 and fstr[adim] != g):
        if g > 1:
            return rows("inner-contiguous", f"source- and destination-fastest dim {d - 1} "
                                            f"(stride 1): rows of {fshape[-1] * u} B")
        what = "broadcast (stride 0)" if sb == 0 else f"stride {sb}"
        return rows("strided-rows", f"destination-fastest dim {d - 1} is also the "
                                    f"source's fastest ({what}): strided rows")
    na, sa = fshape[adim], fstr[adim]
    simd = (_SIMD_TILE if g == 1 else _SIMD_TILE_G2).get(u)
    ncols = nb
    if simd is not None and bdim >= 1 and bdim - 1 != adim and nb >= simd[1]:
        ncols *= fshape[bdim - 1]     # tile columns continue into the dim before b
    if sa == g and simd is not None and na >= simd[0] and ncols >= 2 * simd[1]:
        ka, kb = simd
        if nbytes < TRANSPOSE_NUMPY_MAX_BYTES:
            return CopyKernel("numpy", u, fshape, fstr, None, 1,
                              f"a transpose of {nbytes} B < {TRANSPOSE_NUMPY_MAX_BYTES} B: "
                              f"numpy's loop in L1/L2 costs less than a kernel call", signature)
        return make("tiled-transpose", (ka, kb),
                    f"source-fastest dim {adim} (stride {sa}) != destination-fastest dim "
                    f"{bdim}: {ka}x{kb} tiles through vector registers, whole-line stores")
    if g > 1:
        return rows("inner-contiguous", f"source- and destination-fastest dim {d - 1} "
                                        f"(stride 1): rows of {fshape[-1] * u} B")
    if min(na, nb) <= SMALL_DIM:
        if na <= nb:   # short source-fastest dim: deinterleave, long rows of the destination
            ta, tb = na, min(nb, max(64, PANEL_BYTES // (u * na) // 16 * 16))
        else:          # short destination-fastest dim: interleave into an L1-sized block
            ta, tb = min(na, max(64, PANEL_BYTES // (u * nb) // 16 * 16)), nb
        return make("small-inner-dim", (ta, tb),
                    f"source-fastest dim {adim} ({na}) != destination-fastest dim {bdim} "
                    f"({nb}): short dim outermost, {ta}x{tb} panels in L1")
    t = 16
    while (2 * t) * (2 * t) * u <= TILE_BYTES:
        t *= 2
    return make("tiled", (min(t, na), min(t, nb)),
                f"source-fastest dim {adim} (stride {sa}) != destination-fastest dim {bdim}:"
                f" {t}x{t} scalar tiles ({t * t * u // 1024} KiB) through L1")


def _fuse(shape, strides, itemsize, u):
    """(shape, strides) in units of u, size-1 dims dropped, an item of itemsize > u as an
    innermost dim of consecutive units, and dims contiguous in both operands fused (the
    destination is C-contiguous, so only the source decides): (n0, s0), (n1, s1) ->
    (n0 * n1, s1) when s0 == s1 * n1."""
    dims = [(n, s // u) for n, s in zip(shape, strides) if n > 1]
    if itemsize > u:
        dims.append((itemsize // u, 1))
    fused: list[list[int]] = []
    for n, s in reversed(dims):
        if fused and fused[-1][1] * fused[-1][0] == s:
            fused[-1][0] *= n
        else:
            fused.append([n, s])
    fused.reverse()
    return tuple(n for n, _ in fused), tuple(s for _, s in fused)


# ---------------------------------------------------------------------------- execution

# Panel kinds understood by the jitted driver (_WEAVE: small-inner-dim tiles that
# interleave 2-4 source rows, stored straight from registers).
_ROWS, _SIMD, _TILE, _WEAVE = 0, 1, 2, 3
# Store modes: regular, non-temporal straight from the source (whole aligned lines), or
# staged: panels contiguous in the destination are gathered in an L1 buffer and leave it
# as whole non-temporal lines.
_REGULAR, _DIRECT_NT, _STAGED_NT = 0, 1, 2
# The control block one copy's threads share (int64): chunks claimed, work units done,
# then the populate slices (claimed, count, first byte, end, bytes per slice) and the
# address of madvise (0: touch the pages instead).
(_C_NEXT, _C_DONE, _C_NWORK, _C_CHUNK, _C_POP_NEXT, _C_POP_N, _C_POP_START, _C_POP_END,
 _C_POP_STEP, _C_MADVISE, _C_LEN) = range(11)
# Layout of the int64 parameter vector handed to the kernels.
(_P_KIND, _P_NA, _P_SA, _P_DA, _P_NB, _P_SB, _P_TA, _P_TB, _P_NR, _P_SR, _P_DR, _P_TR,
 _P_ORDER, _P_NT, _P_JSTART, _P_NKB, _P_G, _P_SOFF, _P_DOFF, _P_ITA, _P_ITB, _P_ITR,
 _P_PF, _P_SB2, _P_STAGE, _P_SEAM, _P_LEN) = range(27)


def copy_into(dst: np.ndarray, src: np.ndarray, kernel: CopyKernel | None = None) -> None:
    """Write ``src`` (any strides: negative, zero, unaligned) into ``dst`` (C-contiguous,
    writeable, same shape and dtype, not overlapping ``src``).

    ``kernel`` is a plan from :func:`plan_copy` for this source layout (it saves the
    planning, a few microseconds); without one the copy is planned here.

    >>> import numpy as np
    >>> x = np.arange(12.0).reshape(3, 4)
    >>> out = np.empty((4, 3))
    >>> copy_into(out, x.T)
    >>> bool((out == x.T).all())
    True
    """
    if not isinstance(dst, np.ndarray) or not isinstance(src, np.ndarray):
        raise TypeError("copy_into: dst and src must be numpy arrays")
    if dst.shape != src.shape or dst.dtype != src.dtype:
        raise ValueError(f"copy_into: dst {dst.shape} {dst.dtype} does not match "
                         f"src {src.shape} {src.dtype}")
    if not dst.flags.c_contiguous or not dst.flags.writeable:
        raise ValueError("copy_into: dst must be C-contiguous and writeable")
    dtype = src.dtype
    # Native code runs only on a plan made for this very source: a plan handed in for
    # another shape, stride or item size (a stale cache entry, a caller's mistake) is
    # set aside and the source planned here, so the loops never leave its bounds.
    # The same check covers plans from this module's own cache.
    signature = (src.shape, src.strides, dtype.itemsize)
    if kernel is None or kernel.source != signature:
        kind = "O" if dtype.hasobject else dtype.kind
        key = (src.shape, src.strides, dtype.itemsize, kind, _num_threads)
        kernel = _plans.get(key)
        if kernel is None or kernel.source != signature:
            if len(_plans) >= 256:
                _plans.clear()
            kernel = _plans[key] = _plan(src.shape, src.strides, dtype.itemsize, kind,
                                         _num_threads, LINE)
    if kernel.variant == "numpy" or dtype.hasobject:
        np.copyto(dst, src, casting="no")
        return
    if kernel.variant == "empty":
        return
    saddr = src.__array_interface__["data"][0]
    daddr = dst.__array_interface__["data"][0]
    aligned = not (saddr | daddr) % kernel.unit_bytes
    if not aligned:
        kernel = _plan(src.shape, src.strides, dtype.itemsize, dtype.kind, kernel.threads,
                       _lowbit(saddr | daddr))
        if kernel.variant in ("numpy", "empty"):
            np.copyto(dst, src, casting="no")
            return
    if kernel.variant == "contiguous-memcpy" and kernel.threads == 1:
        np.copyto(dst, src, casting="no")           # numpy's memcpy: the same thing
        return
    # A destination the process has not touched yet (a fresh np.empty of this size is a
    # new mapping) is page-faulted as it is written; the faults zero its lines into the
    # caches. Panels then use regular stores (non-temporal ones would first have to
    # evict those lines); row copies and tiled transposes have their pages populated
    # first instead (all of them, across the copy's threads), then stream past the
    # caches.
    populate = False
    fresh = (kernel.variant != "contiguous-memcpy" and
             dst.nbytes >= NONTEMPORAL_MIN_BYTES and _untouched(daddr, dst.nbytes))
    if fresh and kernel.variant in ("inner-contiguous", "strided-rows", "tiled-transpose"):
        if kernel.variant != "tiled-transpose" and kernel.threads == 1 and \
                dst.nbytes < FRESH_ROWS_NUMPY_MAX_BYTES:
            # One thread, rows, a destination the last-level cache may hold: numpy's
            # row loop into the pages as they fault is as fast (up to 64 MiB here).
            np.copyto(dst, src, casting="no")
            return
        populate, fresh = True, False
    if aligned:     # plans are kept (by the caller, or in _plans): so are their lowerings
        key = (id(kernel), daddr % LINE, fresh)
        low = _lowered.get(key)
        if low is None or low[0] is not kernel:
            if len(_lowered) >= 256:
                _lowered.clear()
            low = _lowered[key] = (kernel,) + _lower(kernel, daddr % LINE, fresh)
        low = low[1:]
    else:
        low = _lower(kernel, daddr % LINE, fresh)
    _execute(low, daddr, saddr, dst.nbytes if populate else 0)


# Plans made by copy_into itself: (shape, strides, itemsize, kind, threads) -> plan.
_plans: dict[tuple, CopyKernel] = {}
# Lowered plans: (id(plan), destination address mod LINE, fresh) -> (plan, lowering). The
# entry holds the plan, so its id cannot be reused while the entry lives; every plan
# looked up here was checked against its source by copy_into.
_lowered: dict[tuple[int, int], tuple] = {}


def _execute(low: tuple, daddr: int, saddr: int, populate_bytes: int) -> None:
    """Run a lowered copy: on this thread, joined by pool workers if it has several.

    The calling thread works from the start and takes whatever the workers have not
    taken: a worker that the OS wakes late finds nothing left and touches nothing, so a
    busy machine costs the copy at most its single-thread time, not a wait for a
    descheduled thread. It waits only for chunks a worker has started."""
    nwork, threads, itv, pv, runner, ita, pa, quantum = low
    ctrl = _ControlBlock()
    ctrl[_C_NWORK] = nwork
    if populate_bytes:
        start = -(-daddr // PAGE) * PAGE
        end = (daddr + populate_bytes) // PAGE * PAGE
        if end > start:
            step = max(POPULATE_STEP_BYTES, -(-(end - start) // (threads * 4)))
            step = -(-step // POPULATE_STEP_BYTES) * POPULATE_STEP_BYTES
            ctrl[_C_POP_N] = -(-(end - start) // step)
            ctrl[_C_POP_START], ctrl[_C_POP_END], ctrl[_C_POP_STEP] = start, end, step
            ctrl[_C_MADVISE] = _madvise_address()
    args = (ctrl, daddr, saddr, ita, pa, 0)
    if threads > 1:
        chunk = -(-nwork // min(nwork, threads * CHUNKS_PER_THREAD))
        ctrl[_C_CHUNK] = -(-chunk // quantum) * quantum
        job = _Job(runner, args, (itv, pv))
        _pool.submit(job, threads - 1)
        runner(*args)
        if ctrl[_C_DONE] != nwork:
            _wait(job)
    else:
        ctrl[_C_CHUNK] = nwork
        runner(*args)


def _wait(job: "_Job") -> None:
    """Until the workers' chunks are done, whatever interrupts the wait (KeyboardInterrupt
    is raised after it): a worker must not write the destination after the copy returns."""
    interrupted = None
    while True:
        try:
            job.finished.wait()
            break
        except BaseException as error:  # noqa: BLE001 - re-raised below
            interrupted = error
    if interrupted is not None:
        raise interrupted


class _Job:
    """One multithreaded copy as the pool workers see it. It holds what the runner
    reads (the control block in ``args``, the iteration space and parameters in
    ``keep``), so that a worker that starts after the copy has returned still reads
    valid memory."""

    __slots__ = ("runner", "args", "keep", "finished")

    def __init__(self, runner, args, keep):
        self.runner = runner
        self.args = args
        self.keep = keep
        self.finished = threading.Event()

    def work(self) -> None:
        self.runner(*self.args)
        ctrl = self.args[0]
        if ctrl[_C_DONE] == ctrl[_C_NWORK]:
            self.finished.set()


class _Pool:
    """Worker threads (Python threads that call the compiled runner with the GIL
    released), started as copies ask for them: the largest thread count asked for minus
    one, at most one fewer than the CPUs. After fork the child starts its own."""

    def __init__(self) -> None:
        import queue
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.workers: list[threading.Thread] = []
        self.lock = threading.Lock()

    def submit(self, job: _Job, helpers: int) -> None:
        helpers = min(helpers, _MAX_HELPERS)
        if len(self.workers) < helpers:
            with self.lock:
                while len(self.workers) < helpers:
                    t = threading.Thread(target=self._serve, name="rearrange-copy",
                                         daemon=True)
                    t.start()
                    self.workers.append(t)
        for _ in range(helpers):
            self.jobs.put(job)

    def _serve(self) -> None:
        jobs = self.jobs
        while True:
            jobs.get().work()


# More workers than CPUs would only take turns.
_MAX_HELPERS = max(1, os.cpu_count() or 1) - 1
_pool = _Pool()


def _reset_pool_in_child() -> None:
    global _pool
    _pool = _Pool()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_pool_in_child)


_madvise_addr: int | None = None


def _madvise_address() -> int:
    """The address of libc's madvise where MADV_POPULATE_WRITE may exist (Linux), else 0:
    the runner then writes a byte per page instead (also where the kernel refuses)."""
    global _madvise_addr
    if _madvise_addr is None:
        _madvise_addr = 0
        if sys.platform.startswith("linux"):
            try:
                import ctypes
                _madvise_addr = ctypes.cast(ctypes.CDLL(None).madvise, ctypes.c_void_p).value
            except (OSError, AttributeError):
                pass
    return _madvise_addr


_mincore = None


def _untouched(addr: int, nbytes: int) -> bool:
    """True if the pages in the middle and at the end of [addr, addr + nbytes) are not
    resident yet (Linux mincore; the first page is not asked: the allocator writes its
    header there). False where that cannot be known."""
    global _mincore
    if _mincore is None:
        _mincore = False
        try:
            import ctypes
            import mmap
            f = ctypes.CDLL(None, use_errno=True).mincore
            f.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p)
            f.restype = ctypes.c_int
            _mincore = (f, ctypes.create_string_buffer, mmap.PAGESIZE)
        except (OSError, AttributeError, ImportError):
            pass
    if not _mincore:
        return False
    f, make, page = _mincore
    for a in (addr + nbytes // 2, addr + nbytes - 1):
        vec = make(1)
        if f(a - a % page, page, vec) != 0 or vec.raw[0] & 1:
            return False
    return True


def _lower(k: CopyKernel, dmod: int, fresh: bool = False):
    """A plan as the kernels' iteration space and parameters, for a destination at an
    address = dmod (mod LINE), untouched (``fresh``) or not: (work units, threads,
    iteration dims, parameters, the runner, the two arrays' addresses, the number of
    work units a chunk of a multithreaded copy is a multiple of)."""
    u = k.unit_bytes
    shape, sstr = k.fused_shape, k.src_strides
    d = len(shape)
    dstr = [1] * d
    for i in range(d - 2, -1, -1):
        dstr[i] = dstr[i + 1] * shape[i + 1]
    p = [0] * _P_LEN
    p[_P_ITA] = p[_P_ITB] = p[_P_ITR] = -1
    p[_P_STAGE] = STAGE_BYTES          # the kernel's buffer: the size planned with
    nbytes = math.prod(shape) * u
    nt = nbytes >= NONTEMPORAL_MIN_BYTES and not fresh
    stage = STAGE_BYTES // u
    it: list[int] = []          # iteration dims: (count, src step, dst step) triples
    quantum = 1

    def outer(skip):
        for i in range(d):
            if i not in skip:
                it.extend((shape[i], sstr[i], dstr[i]))

    v = k.variant
    if v in ("contiguous-memcpy", "inner-contiguous", "strided-rows"):
        nb, sb = shape[-1], sstr[-1]
        outer({d - 1})
        if it and it[-3] > ROW_STREAMS_MAX:
            _block_rows(it, nb * u, ROW_BLOCK_BYTES)
        # The panel: rows along the innermost remaining dim (nr of them, tr per work
        # unit), or chunks of one long row.
        nr, sr, dr = 1, 0, 0
        if it:
            nr, sr, dr = it[-3:]
            del it[-3:]
        rows_total = nr * math.prod(it[0::3])
        tb = nb
        if rows_total < 8 * k.threads and nb * u > ROW_CHUNK_BYTES:
            tb = max(ROW_CHUNK_BYTES // u, -(-nb // -(-8 * k.threads // rows_total)))
            tb = -(-tb // (LINE // u)) * (LINE // u)
        tr = max(1, min(nr, (ROW_CHUNK_BYTES // u) // max(1, min(nb, tb))))
        if tr < nr:
            p[_P_ITR] = len(it) // 3
            it.extend((-(-nr // tr), tr * sr, tr * dr))
        if tb < nb:
            p[_P_ITB] = len(it) // 3
            it.extend((-(-nb // tb), tb * sb, tb))
        p[_P_KIND] = _ROWS
        p[_P_NB], p[_P_SB], p[_P_TB] = nb, sb, tb
        p[_P_NR], p[_P_SR], p[_P_DR], p[_P_TR] = nr, sr, dr, tr
        if nt:
            if dr == nb and nb * 2 <= stage:
                p[_P_NT] = _STAGED_NT
            elif sb == 1 and nb * u >= 2 * LINE:
                p[_P_NT] = _DIRECT_NT
        if sb == 1 and nb * u <= PREFETCH_ROW_BYTES and it:
            # Each panel row is prefetched where the work unit PREFETCH_UNITS_AHEAD
            # later reads its row (the source rows of short-row copies are many
            # interleaved streams, more than the hardware prefetchers follow).
            p[_P_PF] = PREFETCH_UNITS_AHEAD * it[-2]
    elif v == "tiled-transpose":
        g = 2 if (k.tile == _SIMD_TILE_G2.get(u) and sstr[-1] == 1 and shape[-1] == 2) else 1
        bdim = d - 1 if g == 1 else d - 2
        adim = min((i for i in range(bdim) if sstr[i] != 0), key=lambda i: abs(sstr[i]))
        ka, kb = k.tile
        na, nb, sb, da = shape[adim], shape[bdim], sstr[bdim], dstr[adim]
        # The tile columns run over b and, when b is short, over the dim before it too
        # (b2: contiguous with b in the destination, any stride in the source): the
        # destination rows get long enough to be written in whole lines.
        b2 = bdim - 1
        nb2, sb2 = 1, 0
        if b2 >= 0 and b2 != adim and nb >= kb and nb * u * g < ROW_CHUNK_BYTES:
            nb2, sb2 = shape[b2], sstr[b2]
        else:
            b2 = -1
        ncols = nb * nb2
        outer({adim, bdim, b2} | ({d - 1} if g == 2 else set()))
        _block_rows(it, na * u * g, TILE_BLOCK_BYTES)
        # Non-temporal stores need every tile row to start on a line: the rows of all
        # panels must be whole lines apart, and the first tile column is shifted to the
        # first line boundary (the columns before it: see _panel_simd).
        lined = all(it[i] * u % LINE == 0 for i in range(2, len(it), 3))
        head = (-dmod) % LINE
        jstart = 0
        nt = nbytes >= NONTEMPORAL_TILE_MIN_BYTES
        if nt and lined and (da * u) % LINE == 0 and head % (u * g) == 0 and \
                ncols - head // (u * g) >= kb:
            jstart = head // (u * g)
        else:
            nt = False
        nkb = (ncols - jstart) // kb
        if k.threads > 1 and not nt:
            # Destination rows (or the first block) off the line grid: threads copying
            # neighbouring column blocks would share the lines where the blocks meet.
            # They take bands of rows instead (whole bands per chunk of work).
            band = -(-na // (k.threads * CHUNKS_PER_THREAD))
            band = max(ka, -(-band // ka) * ka)
            if na // band > 1:
                p[_P_ITA] = len(it) // 3
                it.extend((na // band, band * g, band * da))
                p[_P_TR] = band
                quantum = nkb
        # Column blocks (source offsets: computed) run innermost, unless an outer dim
        # continues the source rows of the tiles (a full reversal's second dim): it goes
        # innermost, so that a column block reads its kb source rows as long sequential
        # streams (the destination's lines then leave in runs of kb units, not whole
        # rows; the streams matter more: 1.5x on a 64^4 reversal).
        cont = [i for i in range(len(it) // 3) if abs(it[3 * i + 1]) == na * g]
        if cont and p[_P_ITA] < 0:
            i = cont[-1]
            it[:] = it[:3 * i] + it[3 * i + 3:] + [nkb, 0, kb * g] + it[3 * i:3 * i + 3]
            p[_P_ITB] = len(it) // 3 - 2
        else:
            p[_P_ITB] = len(it) // 3
            it.extend((nkb, 0, kb * g))
        p[_P_KIND] = _SIMD
        p[_P_NA], p[_P_SA], p[_P_DA] = na, g, da
        p[_P_NB], p[_P_SB], p[_P_SB2] = nb, sb, sb2
        p[_P_NR] = nb2
        p[_P_TA], p[_P_TB] = ka, kb
        p[_P_NT], p[_P_JSTART], p[_P_NKB], p[_P_G] = int(nt), jstart, nkb, g
        p[_P_DOFF] = jstart * g
        p[_P_PF] = TILE_PREFETCH_LINES.get(u, 0) if g == 1 else 0
        if jstart and da == ncols * g:
            # Destination rows back to back, off the line grid: the line where one row
            # ends and the next begins is written whole, by tiles of "seam" columns
            # (the last ones of a row, then the first ones of the next).
            p[_P_SEAM] = (LINE - head) // (u * g)    # columns of the row that ends
    else:  # small-inner-dim, tiled
        bdim = d - 1
        adim = min((i for i in range(bdim) if sstr[i] != 0), key=lambda i: abs(sstr[i]))
        ta, tb = k.tile
        na, nb = shape[adim], shape[bdim]
        outer({adim, bdim})
        nba, nbb = -(-na // ta), -(-nb // tb)
        weave = ta > tb and sstr[adim] == 1 and dstr[adim] == tb == nb and 2 <= nb <= 4
        nr = 1
        if nba == nbb == 1 and ta * tb * u * 2 <= PANEL_BYTES and it:
            # A panel that would be one small tile (ViT's 16x3, pixel shuffle's 64x2)
            # takes a run of them along an outer dim, which shares the cost of a work
            # unit. Streaming stores want the innermost dim (it continues the tile in the
            # destination: whole lines leave in order), unless a tile reads at most a
            # line per source row: in the destination's order that makes many
            # interleaved single-line source streams (ViT: 48), which the prefetchers do
            # not follow. Then, and whenever stores are regular, the run goes along the
            # dim the source steps through fastest, the source is prefetched where the
            # work unit PREFETCH_UNITS_AHEAD later reads it, and the stores are regular
            # (streaming ones were slower on these runs of a few lines far apart).
            along_source = not nt or ta * u <= LINE
            r = len(it) // 3 - 1
            if along_source:
                nt = False
                r = min(range(len(it) // 3), key=lambda i: abs(it[3 * i + 1]))
            nr, sr, dr = it[3 * r:3 * r + 3]
            del it[3 * r:3 * r + 3]
            tr = max(1, min(nr, PANEL_BYTES // (ta * tb * u)))
            if tr < nr:
                p[_P_ITR] = len(it) // 3
                it.extend((-(-nr // tr), tr * sr, tr * dr))
            p[_P_SR], p[_P_DR], p[_P_TR] = sr, dr, tr
            if along_source and weave and it:
                p[_P_PF] = PREFETCH_UNITS_AHEAD * it[-2]
        p[_P_NR] = nr
        if nbb > 1:
            p[_P_ITB] = len(it) // 3
            it.extend((nbb, tb * sstr[bdim], tb))
        if nba > 1:
            p[_P_ITA] = len(it) // 3
            it.extend((nba, ta * sstr[adim], ta * dstr[adim]))
        p[_P_KIND] = _TILE
        p[_P_NA], p[_P_SA], p[_P_DA] = na, sstr[adim], dstr[adim]
        p[_P_NB], p[_P_SB] = nb, sstr[bdim]
        p[_P_TA], p[_P_TB] = ta, tb
        p[_P_ORDER] = 0 if ta <= tb else 1      # the short side of the tile outermost
        # Interleaving tiles whose every start is on a line leave as whole lines.
        lined = dmod == 0 and all(it[i] * u % LINE == 0 for i in range(2, len(it), 3)) and \
            p[_P_DR] * u % LINE == 0
        if nt and weave and lined:
            p[_P_NT] = _DIRECT_NT
        elif nt and (dstr[adim] == tb == nb) and ta * tb * 2 <= stage:
            p[_P_NT] = _STAGED_NT               # tiles are contiguous in the destination
        elif nt and ta <= tb and ta * tb <= stage and tb * u >= 4 * LINE:
            p[_P_NT] = _DIRECT_NT               # tiles of long rows: staged row by row
        if weave and p[_P_NT] != _STAGED_NT:
            p[_P_KIND] = _WEAVE
    nwork = math.prod(it[0::3])
    itv = np.array([len(it) // 3] + it, dtype=np.int64)
    pv = np.array(p, dtype=np.int64)
    return (nwork, min(k.threads, nwork), itv, pv, _runner(u),
            itv.__array_interface__["data"][0], pv.__array_interface__["data"][0], quantum)


def _divisor_near(n: int, target: int) -> int:
    """The divisor of n closest to target (ties: the larger)."""
    best = 1
    for t in range(1, min(n, 2 * target) + 1):
        if n % t == 0 and abs(t - target) <= abs(best - target):
            best = t
    return best


def _block_rows(it: list[int], row_bytes: int, block_bytes: int) -> None:
    """Reorder short-row iteration HPTT-style: the outer dim the source steps through
    fastest (a) and the destination's fastest (b, the last one) are split into blocks
    and the block loops moved out, so that both sides see runs of ~ROW_BLOCK_BYTES."""
    m = len(it) // 3
    if m < 2 or row_bytes * 2 > block_bytes:
        return
    b = m - 1
    cand = [k for k in range(m - 1) if it[3 * k + 1] != 0]
    if not cand:
        return
    a = min(cand, key=lambda k: abs(it[3 * k + 1]))
    if abs(it[3 * a + 1]) >= abs(it[3 * b + 1]):
        return
    want = max(2, block_bytes // row_bytes)
    ta = _divisor_near(it[3 * a], want)
    tb = _divisor_near(it[3 * b], want)
    if ta == 1 or tb == 1:
        return
    na, sa, da = it[3 * a:3 * a + 3]
    nb, sb, db = it[3 * b:3 * b + 3]
    new = []
    for k in range(m):
        if k not in (a, b):
            new += it[3 * k:3 * k + 3]
    new += [na // ta, sa * ta, da * ta, nb // tb, sb * tb, db * tb, ta, sa, da, tb, sb, db]
    it[:] = new


# ---------------------------------------------------------------------------- lazy JIT
# The kernels below are plain Python functions. ``@_jit`` registers them; the first call
# of any of them imports numba, defines the intrinsics, wraps every registered function
# with numba.njit (cache=True) and rebinds the module globals to the dispatchers, so that
# jitted callers see jitted callees. Nothing here runs at import.

_build_lock = threading.Lock()
_built = False
_registry: dict[str, tuple] = {}


class _LazyKernel:
    __slots__ = ("func", "options", "__name__", "__doc__")

    def __init__(self, func, options):
        self.func = func
        self.options = options
        self.__name__ = func.__name__
        self.__doc__ = func.__doc__

    def __call__(self, *args):
        _materialise()
        return globals()[self.__name__](*args)

    def __repr__(self):
        return f"<lazy numba kernel {self.__name__}>"


def _jit(**options):
    """Register a plain function as a numba kernel, compiled lazily with ``options``."""
    def wrap(func):
        lazy = _LazyKernel(func, options)
        _registry[func.__name__] = (func, options)
        return lazy
    return wrap


def _materialise() -> None:
    global _built
    if _built:
        return
    with _build_lock:
        if _built:
            return
        import numba

        g = globals()
        g.update(_define_intrinsics())
        g["carray"] = numba.carray
        g["_numba"] = numba
        for name, (func, options) in _registry.items():
            g[name] = numba.njit(cache=True, nogil=True, error_model="numpy", **options)(func)
        _built = True


def warmup() -> list[str]:
    """Compile (or load from the disk cache) the kernel for every unit size now.

    Returns what it compiled: ``['_run[uint8]', '_run[uint16]', '_run[uint32]',
    '_run[uint64]']``.
    """
    return [f"_run[{_UNIT_DTYPES[u].__name__}]" for u in _UNIT_DTYPES if _runner(u)]


_runners: dict[int, object] = {}
_compiled_runs: dict[int, object] = {}
# The ctypes type of a control block, set with the first runner: made and passed faster
# than a numpy array.
_ControlBlock = None


def _runner(u: int):
    """_run compiled for u-byte units: a C-ABI function (cached on disk), called through
    ctypes, which releases the GIL for the call."""
    global _ControlBlock
    f = _runners.get(u)
    if f is None:
        _materialise()
        with _build_lock:
            f = _runners.get(u)
            if f is None:
                import ctypes
                from numba import types
                i64p = types.CPointer(types.int64)
                unit = _numba.from_dtype(np.dtype(_UNIT_DTYPES[u]))
                sig = types.void(i64p, types.int64, types.int64, i64p, i64p, unit)
                compiled = _numba.cfunc(sig, cache=True, nopython=True,
                                        error_model="numpy")(_run)
                c_unit = {1: ctypes.c_uint8, 2: ctypes.c_uint16, 4: ctypes.c_uint32,
                          8: ctypes.c_uint64}[u]
                proto = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_int64), ctypes.c_int64,
                                         ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p,
                                         c_unit)
                _ControlBlock = ctypes.c_int64 * _C_LEN
                _compiled_runs[u] = compiled      # keeps the machine code alive
                f = _runners[u] = proto(compiled.address)
    return f


def _define_intrinsics() -> dict:
    """The LLVM-level building blocks: raw loads/stores with alias scopes (source and
    destination never alias, which lets LLVM vectorise), whole-line non-temporal stores,
    and the register tile transpose."""
    from llvmlite import ir
    from numba.core import cgutils, types
    from numba.extending import intrinsic

    i32 = ir.IntType(32)
    spaces = ("src", "dst", "stage")

    def mark(inst, module, space):
        # Three alias scopes: source, destination and staging buffer never alias each
        # other; accesses within one scope keep their order.
        dom = module.add_metadata([ir.MetaDataString(module, "rearrange.copy")])
        scope = {sp: module.add_metadata([ir.MetaDataString(module, f"rearrange.copy.{sp}"),
                                          dom]) for sp in spaces}
        inst.set_metadata("alias.scope", module.add_metadata([scope[space]]))
        inst.set_metadata("noalias", module.add_metadata(
            [scope[sp] for sp in spaces if sp != space]))

    def ptr(builder, addr, llty):
        return builder.inttoptr(addr, llty.as_pointer())

    def make_load(space):
        @intrinsic
        def load(typingctx, addr, idx, tok):
            sig = tok(types.int64, types.int64, tok)

            def codegen(context, builder, signature, args):
                llty = context.get_value_type(signature.args[2])
                p = builder.gep(ptr(builder, args[0], llty), [args[1]])
                v = builder.load(p, align=signature.args[2].bitwidth // 8)
                mark(v, builder.module, space)
                return v
            return sig, codegen
        return load

    def make_store(space):
        @intrinsic
        def store(typingctx, addr, idx, val):
            sig = types.void(types.int64, types.int64, val)

            def codegen(context, builder, signature, args):
                llty = context.get_value_type(signature.args[2])
                p = builder.gep(ptr(builder, args[0], llty), [args[1]])
                st = builder.store(args[2], p, align=signature.args[2].bitwidth // 8)
                mark(st, builder.module, space)
                return context.get_dummy_value()
            return sig, codegen
        return store

    def make_line_nt(space):
        @intrinsic
        def line_nt(typingctx, daddr, saddr):
            """64 bytes from saddr (any alignment) to daddr (64-aligned), non-temporal."""
            sig = types.void(types.int64, types.int64)

            def codegen(context, builder, signature, args):
                vt = ir.VectorType(ir.IntType(64), 8)
                v = builder.load(ptr(builder, args[1], vt), align=1)
                mark(v, builder.module, space)
                st = builder.store(v, ptr(builder, args[0], vt), align=LINE)
                mark(st, builder.module, "dst")
                st.set_metadata("nontemporal",
                                builder.module.add_metadata([ir.Constant(i32, 1)]))
                return context.get_dummy_value()
            return sig, codegen
        return line_nt

    @intrinsic
    def _unit(typingctx, tok):
        sig = types.int64(tok)

        def codegen(context, builder, signature, args):
            return ir.Constant(ir.IntType(64), signature.args[0].bitwidth // 8)
        return sig, codegen

    @intrinsic
    def _prefetch(typingctx, addr):
        """Hint: the line at addr will be read soon."""
        sig = types.void(types.int64)

        def codegen(context, builder, signature, args):
            i8p = ir.IntType(8).as_pointer()
            fn = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]),
                "llvm.prefetch.p0i8")
            builder.call(fn, [builder.inttoptr(args[0], i8p), ir.Constant(i32, 0),
                              ir.Constant(i32, 3), ir.Constant(i32, 1)])
            return context.get_dummy_value()
        return sig, codegen

    @intrinsic
    def _fetch_add(typingctx, block, field, val):
        """Atomically add val to block[field] (an int64 array given by pointer); returns
        the previous value."""
        sig = types.int64(block, types.int64, types.int64)

        def codegen(context, builder, signature, args):
            p = builder.gep(args[0], [args[1]])
            return builder.atomic_rmw("add", p, args[2], "monotonic")
        return sig, codegen

    @intrinsic
    def _touch(typingctx, addr):
        """Fault the page at addr in, writable: an atomic add of 0 to its first byte,
        which leaves the byte as it is even while another thread writes it."""
        sig = types.void(types.int64)

        def codegen(context, builder, signature, args):
            i8 = ir.IntType(8)
            builder.atomic_rmw("add", builder.inttoptr(args[0], i8.as_pointer()),
                               ir.Constant(i8, 0), "monotonic")
            return context.get_dummy_value()
        return sig, codegen

    @intrinsic
    def _call_madvise(typingctx, fn, addr, length):
        """madvise(addr, length, MADV_POPULATE_WRITE) through libc's function at address
        fn; returns its result (0 on success)."""
        sig = types.int64(types.int64, types.int64, types.int64)

        def codegen(context, builder, signature, args):
            i64 = ir.IntType(64)
            i8p = ir.IntType(8).as_pointer()
            fnty = ir.FunctionType(i32, [i8p, i64, i32])
            f = builder.inttoptr(args[0], fnty.as_pointer())
            r = builder.call(f, [builder.inttoptr(args[1], i8p), args[2],
                                 ir.Constant(i32, MADV_POPULATE_WRITE)])
            return builder.sext(r, i64)
        return sig, codegen

    @intrinsic
    def _sfence(typingctx):
        sig = types.void()

        def codegen(context, builder, signature, args):
            # Orders the non-temporal stores before the thread's work is seen as done.
            builder.fence("seq_cst")
            return context.get_dummy_value()
        return sig, codegen

    def eklundh(builder, rows, k, g, hs=None):
        """Transpose k x k elements (each g lanes) held as k vectors of k*g lanes: the
        stages (each swaps one bit of the row index with the same bit of the column
        index, so they commute) for the strides ``hs``, all of them by default."""
        r = list(rows)
        n = k * g
        for h in hs or [k >> b for b in range(1, k.bit_length())]:
            lo, hi = [], []
            for blk in range(0, k, 2 * h):
                for e in range(blk, blk + h):
                    lo += range(e * g, e * g + g)
                for e in range(blk, blk + h):
                    lo += range(n + e * g, n + e * g + g)
                for e in range(blk + h, blk + 2 * h):
                    hi += range(e * g, e * g + g)
                for e in range(blk + h, blk + 2 * h):
                    hi += range(n + e * g, n + e * g + g)
            mlo = ir.Constant(ir.VectorType(i32, n), lo)
            mhi = ir.Constant(ir.VectorType(i32, n), hi)
            new = list(r)
            for i in range(len(r)):
                if not i & h:
                    new[i] = builder.shuffle_vector(r[i], r[i + h], mlo)
                    new[i + h] = builder.shuffle_vector(r[i], r[i + h], mhi)
            r = new
        return r

    def concat(builder, vecs):
        while len(vecs) > 1:
            n = vecs[0].type.count
            m = ir.Constant(ir.VectorType(i32, 2 * n), list(range(2 * n)))
            vecs = [builder.shuffle_vector(vecs[i], vecs[i + 1], m)
                    for i in range(0, len(vecs), 2)]
        return vecs[0]

    @intrinsic(prefer_literal=True)
    def _tile(typingctx, daddr, dstride, saddr, sstride, split, jump, tok, group,
              nontemporal):
        """dst[c*dstride + r*g + x] = src[row(r) + c*g + x] for c < Ka, r < Kb, x < g,
        row(r) = r*sstride (+ jump from row ``split`` on): Kb source rows of Ka elements
        (g units each) in, Ka destination rows out, each row of Kb elements a whole
        number of cache lines (non-temporal if asked: then every destination row must
        start on a line)."""
        if not isinstance(group, types.IntegerLiteral) or not isinstance(
                nontemporal, types.BooleanLiteral):
            return None
        sig = types.void(types.int64, types.int64, types.int64, types.int64, types.int64,
                         types.int64, tok, group, nontemporal)
        g = group.literal_value
        nt = nontemporal.literal_value
        u = tok.bitwidth // 8
        ka, kb = (_SIMD_TILE if g == 1 else _SIMD_TILE_G2)[u]

        def codegen(context, builder, signature, args):
            t = context.get_value_type(signature.args[6])
            da, ds, sa, ss, split, jump = args[:6]
            sp = ptr(builder, sa, t)
            dp = ptr(builder, da, t)
            vin = ir.VectorType(t, ka * g)
            zero = ir.Constant(jump.type, 0)

            def load_rows(first, last):
                rows = []
                for r in range(first, last):
                    rc = ir.Constant(ss.type, r)
                    off = builder.add(builder.mul(rc, ss), builder.select(
                        builder.icmp_signed(">=", rc, split), jump, zero))
                    p = builder.gep(sp, [off])
                    v = builder.load(builder.bitcast(p, vin.as_pointer()), align=u)
                    mark(v, builder.module, "src")
                    rows.append(v)
                return rows

            if kb > 32:
                # kb rows (uint8: 64) do not fit the 32 vector registers, and LLVM
                # spilled them all around: blocks of rows are transposed within
                # themselves in turn (the stages with strides below the block's
                # height), each parked in a stack buffer while the next is done (a
                # real round trip: the buffer's pointer comes back through an empty asm
                # that clobbers memory), then paired by the stage with the block's
                # height; recursively from blocks of _PARK_ROWS rows (uint8 8192^2:
                # 7% from halves, 3% more from quarters).
                def parked(vals):
                    buf = cgutils.alloca_once(builder, ir.ArrayType(vin, len(vals)))
                    for i, v in enumerate(vals):
                        builder.store(v, builder.gep(buf, [ir.Constant(i32, 0),
                                                           ir.Constant(i32, i)]), align=u)
                    return builder.asm(ir.FunctionType(buf.type, [buf.type]), "",
                                       "=r,0,~{memory}", [buf], side_effect=True)

                def unpark(buf, n):
                    return [builder.load(builder.gep(buf, [ir.Constant(i32, 0),
                                                           ir.Constant(i32, i)]), align=u)
                            for i in range(n)]

                def block(first, n):
                    if n <= _PARK_ROWS:
                        return eklundh(builder, load_rows(first, first + n), ka, g,
                                       [n >> b for b in range(1, n.bit_length())])
                    h = n // 2
                    a = parked(block(first, h))
                    b = block(first + h, h)
                    return eklundh(builder, unpark(a, h) + b, ka, g, [h])

                squares = [block(0, kb)]
            else:
                rows = load_rows(0, kb)
                squares = [eklundh(builder, rows[q * ka:(q + 1) * ka], ka, g)
                           for q in range(kb // ka)]
            ntmd = builder.module.add_metadata([ir.Constant(i32, 1)])
            vout = ir.VectorType(t, kb * g)
            for c in range(ka):
                v = concat(builder, [sq[c] for sq in squares])
                p = builder.gep(dp, [builder.mul(ir.Constant(ds.type, c), ds)])
                st = builder.store(v, builder.bitcast(p, vout.as_pointer()),
                                   align=LINE if nt else u)
                mark(st, builder.module, "dst")
                if nt:
                    st.set_metadata("nontemporal", ntmd)
            return context.get_dummy_value()
        return sig, codegen

    def gather(builder, rows, picks):
        """A vector whose lane l is rows[c][i] for (c, i) = picks[l]: the first source's
        lanes permuted into place, then one two-source shuffle per further source that
        keeps the lanes already placed (LLVM folds the first into the second)."""
        n = len(picks)
        order = sorted({c for c, _ in picks})
        vec = ir.VectorType(i32, n)
        acc = builder.shuffle_vector(rows[order[0]], rows[order[0]], ir.Constant(
            vec, [i if c == order[0] else 0 for c, i in picks]))
        for c0 in order[1:]:
            acc = builder.shuffle_vector(acc, rows[c0], ir.Constant(
                vec, [n + i if c == c0 else l for l, (c, i) in enumerate(picks)]))
        return acc

    def make_weave(space):
        @intrinsic
        def weave(typingctx, daddr, saddr, sstride, tok, ways, nontemporal):
            """dst[i*m + c] = src[c*sstride + i] for c < m (``ways``: 2, 3 or 4; any other
            value stores nothing), i < V = 64 / unit: the first V units of m source rows
            (any alignment) interleaved into m whole lines at daddr, stored non-temporally
            if ``nontemporal`` (then daddr must be 64-aligned)."""
            sig = types.void(types.int64, types.int64, types.int64, tok, types.int64,
                             types.boolean)
            u = tok.bitwidth // 8
            lanes = LINE // u

            def emit(builder, t, da, sa, ss, m, nt):
                vt = ir.VectorType(t, lanes)
                sp = ptr(builder, sa, t)
                rows = []
                for c in range(m):
                    p = builder.gep(sp, [builder.mul(ir.Constant(ss.type, c), ss)])
                    v = builder.load(builder.bitcast(p, vt.as_pointer()), align=u)
                    mark(v, builder.module, "src")
                    rows.append(v)
                dp = ptr(builder, da, vt)
                for k in range(m):
                    picks = [((k * lanes + l) % m, (k * lanes + l) // m) for l in range(lanes)]
                    st = builder.store(gather(builder, rows, picks),
                                       builder.gep(dp, [ir.Constant(i32, k)]),
                                       align=LINE if nt else u)
                    mark(st, builder.module, space)
                    if nt:
                        st.set_metadata("nontemporal",
                                        builder.module.add_metadata([ir.Constant(i32, 1)]))

            def codegen(context, builder, signature, args):
                t = context.get_value_type(signature.args[3])
                da, sa, ss, ways, nt = args[0], args[1], args[2], args[4], args[5]
                for m in (2, 3, 4):
                    is_m = builder.icmp_signed("==", ways, ir.Constant(ways.type, m))
                    with builder.if_then(is_m):
                        with builder.if_else(nt) as (streaming, regular):
                            with streaming:
                                emit(builder, t, da, sa, ss, m, True)
                            with regular:
                                emit(builder, t, da, sa, ss, m, False)
                return context.get_dummy_value()
            return sig, codegen
        return weave

    return {"_ld": make_load("src"), "_st": make_store("dst"), "_ldb": make_load("stage"),
            "_stb": make_store("stage"), "_line_nt": make_line_nt("src"),
            "_line_nt_b": make_line_nt("stage"), "_unit": _unit, "_sfence": _sfence,
            "_tile": _tile, "_prefetch": _prefetch, "_fetch_add": _fetch_add,
            "_call_madvise": _call_madvise, "_touch": _touch, "_weave": make_weave("dst"),
            "_weave_b": make_weave("stage")}


# Placeholders: rebound by _materialise() before anything is compiled.
_ld = _st = _ldb = _stb = _line_nt = _line_nt_b = _unit = _sfence = _tile = _prefetch = None
_fetch_add = _call_madvise = _touch = _weave = _weave_b = carray = None
_numba = None


# ---------------------------------------------------------------------------- kernels
# Addresses are int64; offsets are in units and signed (negative source strides).
# ``s`` is the address of the source's first element, ``d`` the destination's. Loads from
# the source go through _ld, stores to the destination through _st, the staging buffer
# through _ldb/_stb: three alias scopes, so LLVM vectorises without overlap checks.
#
# The stream (``ws`` = [destination offset of the staged run, units staged], ``buf`` its
# 64-byte aligned L1 buffer of ``cap`` units) gathers panels that continue the
# destination contiguously and writes them out as whole non-temporal lines.

@_jit()
def _stream_flush(d, tok, buf, wst, wln, final):
    """Write the staged run (wln units for destination offset wst) out: its whole lines
    non-temporally, the partial first line with regular stores; the partial last line
    too if ``final``, else it is kept (moved to the buffer's front) for the run's
    continuation. Returns the new (wst, wln)."""
    u = _unit(tok)
    if wln == 0:
        return wst, wln
    head = min(wln, ((-(d + wst * u)) % LINE) // u)
    for j in range(head):
        _st(d, wst + j, _ldb(buf, j, tok))
    step = LINE // u
    j = head
    while j + step <= wln:
        _line_nt_b(d + (wst + j) * u, buf + j * u)
        j += step
    if final:
        for i in range(j, wln):
            _st(d, wst + i, _ldb(buf, i, tok))
        return wst, 0
    for i in range(j, wln):
        _stb(buf, i - j, _ldb(buf, i, tok))
    return wst + j, wln - j


@_jit()
def _stream_at(d, tok, buf, cap, wst, wln, dpos, n):
    """Make room for n units destined for dpos (n <= cap - LINE / unit). Returns the new
    (wst, wln): the n units go to buf[wln:]."""
    if wln and dpos != wst + wln:
        wst, wln = _stream_flush(d, tok, buf, wst, wln, True)
    if wln + n > cap:
        wst, wln = _stream_flush(d, tok, buf, wst, wln, False)
    if wln == 0:
        wst = dpos
    return wst, wln


@_jit()
def _panel_rows(d, s, tok, doff, soff, er, sr, dr, eb, sb, nt, pf, buf, cap, wst, wln):
    """er destination rows (steps dr / sr) of eb units from source rows of stride sb.
    Returns the stream state (wst, wln)."""
    u = _unit(tok)
    for r in range(er):
        dp = doff + r * dr
        sp = soff + r * sr
        if pf and sb == 1:
            a = s + (sp + pf) * u
            for q in range(0, eb * u, LINE):
                _prefetch(a + q)
        if nt == _STAGED_NT:
            wst, wln = _stream_at(d, tok, buf, cap, wst, wln, dp, eb)
            if sb == 1:
                for j in range(eb):
                    _stb(buf, wln + j, _ld(s, sp + j, tok))
            elif sb == 0:
                v = _ld(s, sp, tok)
                for j in range(eb):
                    _stb(buf, wln + j, v)
            else:
                for j in range(eb):
                    _stb(buf, wln + j, _ld(s, sp + j * sb, tok))
            wln += eb
        elif sb == 1:
            j = 0
            if nt == _DIRECT_NT:
                j = min(eb, ((-(d + dp * u)) % LINE) // u)
                for i in range(j):
                    _st(d, dp + i, _ld(s, sp + i, tok))
                step = LINE // u
                while j + step <= eb:
                    _line_nt(d + (dp + j) * u, s + (sp + j) * u)
                    j += step
            for i in range(j, eb):
                _st(d, dp + i, _ld(s, sp + i, tok))
        elif sb == 0:
            v = _ld(s, sp, tok)
            for i in range(eb):
                _st(d, dp + i, v)
        else:
            for i in range(eb):
                _st(d, dp + i, _ld(s, sp + i * sb, tok))
    return wst, wln


@_jit()
def _panel_tile(d, s, tok, doff, soff, ea, eb, sa, da, sb, order, nt, buf, cap, wst, wln):
    """An ea x eb tile: dst[i*da + j] = src[i*sa + j*sb]. ``order`` 0 runs j innermost
    (contiguous stores), 1 runs i innermost (source-fastest). Staged (the tile is
    contiguous in the destination, da == eb): built in the stream's buffer. Returns the
    stream state (wst, wln)."""
    if nt == _STAGED_NT:
        wst, wln = _stream_at(d, tok, buf, cap, wst, wln, doff, ea * eb)
        pos = wln
        if order == 1 and sa == 1 and 2 <= eb <= 4:
            _interleave(buf, True, s, tok, pos, soff, ea, sb, eb, False)
        elif order == 0:
            for i in range(ea):
                sp = soff + i * sa
                bp = pos + i * eb
                for j in range(eb):
                    _stb(buf, bp + j, _ld(s, sp + j * sb, tok))
        else:
            for j in range(eb):
                sp = soff + j * sb
                bp = pos + j
                for i in range(ea):
                    _stb(buf, bp + i * eb, _ld(s, sp + i * sa, tok))
        return wst, pos + ea * eb
    if nt == _DIRECT_NT:
        _tile_rows_nt(d, s, tok, doff, soff, ea, eb, sa, da, sb, order, buf)
        return wst, wln
    if order == 0 and sa == 1 and sb == ea and 2 <= ea <= 4:
        _deinterleave(d, False, s, tok, doff, soff, eb, da, ea)
    elif order == 0:
        for i in range(ea):
            dp = doff + i * da
            sp = soff + i * sa
            for j in range(eb):
                _st(d, dp + j, _ld(s, sp + j * sb, tok))
    else:
        for j in range(eb):
            dp = doff + j
            sp = soff + j * sb
            for i in range(ea):
                _st(d, dp + i * da, _ld(s, sp + i * sa, tok))
    return wst, wln


@_jit()
def _tile_rows_nt(d, s, tok, doff, soff, ea, eb, sa, da, sb, order, buf):
    """An ea x eb tile built in the buffer, then written out row by row, each row's
    whole lines non-temporally."""
    if order == 0 and sa == 1 and sb == ea and 2 <= ea <= 4:
        _deinterleave(buf, True, s, tok, 0, soff, eb, eb, ea)
    else:
        for i in range(ea):
            sp = soff + i * sa
            for j in range(eb):
                _stb(buf, i * eb + j, _ld(s, sp + j * sb, tok))
    u = _unit(tok)
    for i in range(ea):
        _stream_flush(d, tok, buf + i * eb * u, doff + i * da, eb, True)


@_jit(inline="always")
def _deinterleave(t, staged, s, tok, toff, soff, n, da, m):
    """t[c*da + j] = src[j*m + c] for c < m in (2, 3, 4), j < n, into the destination
    (t == d) or the staging buffer (``staged``, a constant at every call site: inlined,
    the branch folds away). Constant strides, so LLVM vectorises the loads as one
    interleaved group."""
    if m == 2:
        for j in range(n):
            x0 = _ld(s, soff + 2 * j, tok)
            x1 = _ld(s, soff + 2 * j + 1, tok)
            if staged:
                _stb(t, toff + j, x0)
                _stb(t, toff + da + j, x1)
            else:
                _st(t, toff + j, x0)
                _st(t, toff + da + j, x1)
    elif m == 3:
        for j in range(n):
            x0 = _ld(s, soff + 3 * j, tok)
            x1 = _ld(s, soff + 3 * j + 1, tok)
            x2 = _ld(s, soff + 3 * j + 2, tok)
            if staged:
                _stb(t, toff + j, x0)
                _stb(t, toff + da + j, x1)
                _stb(t, toff + 2 * da + j, x2)
            else:
                _st(t, toff + j, x0)
                _st(t, toff + da + j, x1)
                _st(t, toff + 2 * da + j, x2)
    else:
        for j in range(n):
            x0 = _ld(s, soff + 4 * j, tok)
            x1 = _ld(s, soff + 4 * j + 1, tok)
            x2 = _ld(s, soff + 4 * j + 2, tok)
            x3 = _ld(s, soff + 4 * j + 3, tok)
            if staged:
                _stb(t, toff + j, x0)
                _stb(t, toff + da + j, x1)
                _stb(t, toff + 2 * da + j, x2)
                _stb(t, toff + 3 * da + j, x3)
            else:
                _st(t, toff + j, x0)
                _st(t, toff + da + j, x1)
                _st(t, toff + 2 * da + j, x2)
                _st(t, toff + 3 * da + j, x3)


@_jit()
def _interleave_rows(d, s, tok, doff, soff, er, sr, dr, n, sb, m, nt, pf):
    """er interleaving tiles (_interleave into the destination, ``nt`` as there), dr / sr
    apart; the source rows of each are prefetched pf units ahead (0: not)."""
    u = _unit(tok)
    for r in range(er):
        sp = soff + r * sr
        if pf:
            a = s + (sp + pf) * u
            for c in range(m):
                for q in range(0, n * u, LINE):
                    _prefetch(a + c * sb * u + q)
        _interleave(d, False, s, tok, doff + r * dr, sp, n, sb, m, nt)


@_jit(inline="always")
def _interleave(t, staged, s, tok, toff, soff, n, sb, m, nt):
    """t[i*m + c] = src[c*sb + i] for c < m in (2, 3, 4), i < n, into the destination
    (t == d) or the staging buffer (``staged``): a line's worth of units from each of the
    m source rows at a time, through vector registers into m whole lines (non-temporal
    if ``nt``: then t + toff*unit is a multiple of LINE); the last n % (LINE / unit)
    scalar."""
    u = _unit(tok)
    v = LINE // u
    nv = n - n % v
    for i in range(0, nv, v):
        if staged:
            _weave_b(t + (toff + i * m) * u, s + (soff + i) * u, sb, tok, m, False)
        else:
            _weave(t + (toff + i * m) * u, s + (soff + i) * u, sb, tok, m, nt)
    for i in range(nv, n):
        for c in range(m):
            x = _ld(s, soff + c * sb + i, tok)
            if staged:
                _stb(t, toff + i * m + c, x)
            else:
                _st(t, toff + i * m + c, x)


@_jit()
def _strip_g(d, s, tok, doff, soff, ea, j0, j1, da, nb, sb, sb2, g):
    """Columns j0..j1-1 of a tiled-transpose panel, scalar: dst[i*da + j*g + x] =
    src[i*g + (j // nb)*sb2 + (j % nb)*sb + x] for i < ea; doff / soff are the panel's
    column-0 offsets. Destination rows outermost: each is written as one contiguous run
    from a few source rows."""
    q0 = j0 // nb
    r0 = j0 - q0 * nb
    jump = sb2 - nb * sb
    for i in range(ea):
        sp = soff + i * g + q0 * sb2 + r0 * sb
        dp = doff + i * da + j0 * g
        r = r0
        for j in range(j1 - j0):
            for x in range(g):
                _st(d, dp + x, _ld(s, sp + x, tok))
            dp += g
            sp += sb
            r += 1
            if r == nb:
                r = 0
                sp += jump


@_jit()
def _column_block(d, s, tok, c0, soff, j0, na, p, nt, pf):
    """Destination columns j0..j0+Kb-1 of a tiled-transpose panel over all its ``na``
    rows (na >= Ka), in register tiles; the last tile is moved up to end at row na,
    rewriting rows the one before it wrote (with the same values). Columns run over
    (b2, b): column j reads source row (j // nb)*sb2 + (j % nb)*sb. ``c0`` / ``soff``:
    the panel's column-0 offsets; ``nt``: non-temporal stores (the rows of every tile
    start on a line)."""
    u = _unit(tok)
    da = p[_P_DA]
    nb = p[_P_NB]
    sb = p[_P_SB]
    g = p[_P_G]
    ka = p[_P_TA]
    kb = p[_P_TB]
    # Where (if at all) the block's columns cross into the next b2.
    q = j0 // nb
    jr = j0 - q * nb
    split = nb - jr                     # columns before the crossing (>= kb: none)
    jump = p[_P_SB2] - nb * sb
    dstep = ka * da * u
    sstep = ka * g * u
    da0 = d + (c0 + j0 * g) * u
    sa0 = s + (soff + q * p[_P_SB2] + jr * sb) * u
    nfull = na // ka
    if split < kb:
        pf = 0
    for i in range(nfull + (na > nfull * ka)):
        dt = da0 + i * dstep
        st = sa0 + i * sstep
        if i == nfull:                  # the last rows: a tile ending at row na
            dt = da0 + (na - ka) * da * u
            st = sa0 + (na - ka) * g * u
        elif pf and (i * sstep) % LINE == 0:
            # The source lines pf lines ahead of this tile: a tile reads kb rows, more
            # streams than the hardware prefetchers follow.
            for r in range(kb):
                _prefetch(st + pf * LINE + r * sb * u)
        if g == 1:
            if nt:
                _tile(dt, da, st, sb, split, jump, tok, 1, True)
            else:
                _tile(dt, da, st, sb, split, jump, tok, 1, False)
        else:
            if nt:
                _tile(dt, da, st, sb, split, jump, tok, 2, True)
            else:
                _tile(dt, da, st, sb, split, jump, tok, 2, False)


@_jit()
def _panel_simd(d, s, tok, doff, soff, jb, na, p):
    """Column block ``jb`` of a tiled transpose (``doff``: the destination offset of its
    first column, ``soff``: the source offset of the panel's column 0). The first and
    the last block also copy the columns before and after the blocks (the first block
    starts where destination rows meet a line, for non-temporal stores): where rows
    lie back to back, the lines where they meet by seam tiles (_seam_block), and the
    columns after the last block, which then end on a line, by one more column of
    tiles ending there (rewriting columns of the last block with the same values);
    else (and for those columns when they do not end on a line) one unit at a time."""
    kb = p[_P_TB]
    g = p[_P_G]
    j0 = p[_P_JSTART] + jb * kb
    c0 = doff - j0 * g
    nt = p[_P_NT]
    _column_block(d, s, tok, c0, soff, j0, na, p, nt, p[_P_PF])
    if jb == 0 and j0:
        if p[_P_SEAM]:
            _seam_block(d, s, tok, c0, soff, na, p)
        else:
            _strip_g(d, s, tok, c0, soff, na, 0, j0, p[_P_DA], p[_P_NB], p[_P_SB],
                     p[_P_SB2], g)
    end = p[_P_NB] * p[_P_NR] - p[_P_SEAM]
    if jb == p[_P_NKB] - 1 and j0 + kb < end:
        if nt and (d + (c0 + end * g) * _unit(tok)) % LINE == 0:
            _column_block(d, s, tok, c0, soff, end - kb, na, p, nt, p[_P_PF])
        else:
            _strip_g(d, s, tok, c0, soff, na, j0 + kb, end, p[_P_DA], p[_P_NB], p[_P_SB],
                     p[_P_SB2], g)


@_jit()
def _seam_block(d, s, tok, c0, soff, na, p):
    """The lines where destination rows of a tiled-transpose panel meet (rows back to
    back, da == ncols*g, starting w = p[_P_SEAM] columns past a line), non-temporally:
    from the line before the start of row a, Kb columns: the last w of row a-1, then
    the first of row a (the first block's too, rewritten with the same values). The two
    parts read different source rows, and columns a-1 / a: the tile's jump. Rows 1 to
    na-1 in tiles, the last one moved up; the head of row 0 and the tail of row na-1,
    and all heads and tails when na <= Ka, one unit at a time."""
    u = _unit(tok)
    g = p[_P_G]
    ka = p[_P_TA]
    da = p[_P_DA]
    nb = p[_P_NB]
    sb = p[_P_SB]
    sb2 = p[_P_SB2]
    w = p[_P_SEAM]
    ncols = nb * p[_P_NR]
    tail = (p[_P_NR] - 1) * sb2 + (nb - w) * sb      # source row of column ncols - w
    jump = g - tail - w * sb
    n = na - 1
    if n < ka:
        _strip_g(d, s, tok, c0, soff, na, 0, p[_P_JSTART], da, nb, sb, sb2, g)
        _strip_g(d, s, tok, c0, soff, na, ncols - w, ncols, da, nb, sb, sb2, g)
        return
    nfull = n // ka
    for i in range(nfull + (n > nfull * ka)):
        a = 1 + i * ka if i < nfull else na - ka
        dt = d + (c0 + a * da - w * g) * u
        st = s + (soff + tail + (a - 1) * g) * u
        if g == 1:
            _tile(dt, da, st, sb, w, jump, tok, 1, True)
        else:
            _tile(dt, da, st, sb, w, jump, tok, 2, True)
    _strip_g(d, s, tok, c0, soff, 1, 0, p[_P_JSTART], da, nb, sb, sb2, g)
    _strip_g(d, s, tok, c0 + n * da, soff + n * g, 1, ncols - w, ncols, da, nb, sb, sb2, g)


def _run(cp, d, s, itp, pp, tok):
    """One thread's share of a copy: the pages of the destination it claims to populate,
    then the chunks of work units it claims, both from the shared control block ``c``
    (_C_* fields; the copy's threads all run this on the same block). Work units are the
    iteration space ``it`` ([m, (count, src step, dst step) x m], the last dim fastest),
    each one panel of kind p[_P_KIND]. Compiled as a C-ABI function per unit (_runner);
    ``c``, ``it`` and ``p`` arrive as pointers. A thread that starts after the others have
    claimed everything returns without touching either array."""
    c = carray(cp, (_C_LEN,))
    npop = c[_C_POP_N]
    while npop:
        k = _fetch_add(cp, _C_POP_NEXT, 1)
        if k >= npop:
            break
        a = c[_C_POP_START] + k * c[_C_POP_STEP]
        e = min(c[_C_POP_END], a + c[_C_POP_STEP])
        if c[_C_MADVISE] == 0 or _call_madvise(c[_C_MADVISE], a, e - a) != 0:
            for q in range(a, e, PAGE):
                _touch(q)
    nwork = c[_C_NWORK]
    chunk = c[_C_CHUNK]
    it = carray(itp, (1 + 3 * itp[0],))
    p = carray(pp, (_P_LEN,))
    m = it[0]
    idx = np.zeros(m + 1, np.int64)
    u = _unit(tok)
    stage = np.empty(p[_P_STAGE] + LINE, np.uint8)
    buf = stage.ctypes.data
    buf += (-buf) % LINE
    cap = p[_P_STAGE] // u
    wst = nwork - nwork      # runtime zeros: literal ones would type the helpers' calls twice
    wln = nwork - nwork
    kind = p[_P_KIND]
    nt = p[_P_NT]
    ita = p[_P_ITA]
    itb = p[_P_ITB]
    itr = p[_P_ITR]
    done = nwork - nwork
    while True:
        lo = _fetch_add(cp, _C_NEXT, 1) * chunk
        if lo >= nwork:
            break
        hi = min(nwork, lo + chunk)
        done += hi - lo
        soff = p[_P_SOFF]
        doff = p[_P_DOFF]
        rem = lo
        for k in range(m - 1, -1, -1):
            n = it[1 + 3 * k]
            q = rem // n
            r = rem - q * n
            idx[k] = r
            soff += r * it[2 + 3 * k]
            doff += r * it[3 + 3 * k]
            rem = q
        for w in range(lo, hi):
            er = p[_P_NR]
            if itr >= 0:
                er = min(p[_P_TR], er - idx[itr] * p[_P_TR])
            if kind == _ROWS:
                eb = p[_P_NB]
                if itb >= 0:
                    eb = min(p[_P_TB], eb - idx[itb] * p[_P_TB])
                wst, wln = _panel_rows(d, s, tok, doff, soff, er, p[_P_SR], p[_P_DR], eb,
                                       p[_P_SB], nt, p[_P_PF], buf, cap, wst, wln)
            elif kind == _SIMD:
                ea = p[_P_NA]
                if ita >= 0:        # a band of rows (the last one takes the rest)
                    ea = p[_P_TR] if idx[ita] < it[1 + 3 * ita] - 1 else \
                        ea - idx[ita] * p[_P_TR]
                _panel_simd(d, s, tok, doff, soff, idx[itb], ea, p)
            else:
                ea = p[_P_NA]
                if ita >= 0:
                    ea = min(p[_P_TA], ea - idx[ita] * p[_P_TA])
                if kind == _WEAVE:
                    _interleave_rows(d, s, tok, doff, soff, er, p[_P_SR], p[_P_DR], ea,
                                     p[_P_SB], p[_P_NB], nt == _DIRECT_NT, p[_P_PF])
                else:
                    eb = p[_P_NB]
                    if itb >= 0:
                        eb = min(p[_P_TB], eb - idx[itb] * p[_P_TB])
                    for r in range(er):
                        wst, wln = _panel_tile(d, s, tok, doff + r * p[_P_DR],
                                               soff + r * p[_P_SR], ea, eb, p[_P_SA],
                                               p[_P_DA], p[_P_SB], p[_P_ORDER], nt, buf, cap,
                                               wst, wln)
            # Odometer: the next work unit.
            k = m - 1
            while k >= 0:
                idx[k] += 1
                soff += it[2 + 3 * k]
                doff += it[3 + 3 * k]
                if idx[k] < it[1 + 3 * k]:
                    break
                soff -= it[1 + 3 * k] * it[2 + 3 * k]
                doff -= it[1 + 3 * k] * it[3 + 3 * k]
                idx[k] = 0
                k -= 1
    _stream_flush(d, tok, buf, wst, wln, True)
    # The stores (non-temporal ones too) are ordered before the count that publishes them.
    _sfence()
    _fetch_add(cp, _C_DONE, done)
