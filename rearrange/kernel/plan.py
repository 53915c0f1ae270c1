"""Planning a copy: pure Python, no numba, no data, a few microseconds.

:func:`plan_copy` works in *units* (the raw bits moved: 1, 2, 4 or 8 bytes; a 16-byte
item is two 8-byte units, a 3-byte ``V3`` item three 1-byte units), drops size-1 dims,
fuses dims that are contiguous in both operands, and picks a variant. The result, a
:class:`CopyKernel`, is what ``explain()`` prints; :mod:`.lowering` turns it into the
compiled loops' parameters.

Variants (``CopyKernel.reason`` gives the one-line why of a given plan):

``numpy``               object dtype (references need refcounts), copies under 32 KiB
                        (transposes under 64 KiB), 0-d, and row copies under 24 MiB on
                        one thread (numpy's own row loop is as fast there; at run time
                        also under 64 MiB into pages not touched yet, see
                        :mod:`rearrange.kernel`).
``empty``               zero-size: nothing to move.
``contiguous-memcpy``   the source is contiguous after fusion: memcpy, split over threads.
``inner-contiguous``    source-fastest dim == destination-fastest dim: panels of rows,
                        short rows prefetched where the work unit two ahead reads them
                        (a crop's rows, one stream with gaps: 2 KiB ahead in it); the
                        two outer dims blocked HPTT-style when the rows are short and a
                        panel would read more than 16 source streams; large destinations
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
                        rows with the same values); the columns after the last block
                        by one more column of tiles ending at the last column, rewriting
                        some of the block's columns (regular stores where that end is off
                        the line grid); those before the first block (shifted onto the
                        line grid) by seam tiles where rows lie back to back, else unit by
                        unit.
``staged-transpose``    a tiled transpose of 1- or 2-byte units whose destination rows lie
                        on the line grid (large ones): a work unit takes the source rows of
                        256 bytes of every destination row over a band of up to 1024 rows;
                        8 source rows at a time are read together along the band and
                        transposed in vector registers into a per-thread staging buffer
                        (256 KiB: it stays in L2), then each destination row leaves it as
                        whole non-temporal lines. A register tile reads 32 or 64 source
                        rows a line each, more streams than the hardware prefetchers
                        follow; 8 long streams they do (8192² into out=, 2 and 1 threads:
                        uint8 1.45x and 1.46x, uint16 1.36x and 1.45x; float32 0.99x and
                        1.08x). The columns outside the blocks are copied as in
                        ``tiled-transpose``.
``small-inner-dim``     one of the two fastest dims is short (NHWC→NCHW with C=3): the
                        short dim is the outer loop of a panel that stays in L1; 2, 3 or
                        4 channels are split by a loop with constant strides (LLVM
                        vectorises it as interleaved loads) or interleaved in vector
                        registers a line of each channel at a time (whole lines out,
                        non-temporal when large and on the line grid). Panels of one small
                        tile (ViT patchify's 16x3) run along an outer dim: the one the
                        source steps through fastest, or with streaming stores the one
                        that continues the tile in the destination.
``staged-interleave``   a large ``small-inner-dim`` copy whose tiles interleave 2-4 source
                        rows of at most a line each (ViT patchify's 16x3): in the destination's
                        order its tiles read many single-line source rows in turn, in the
                        source's order its stores land a few lines apart. A work unit is a
                        block of the destination (tiles along two outer dims, the inner of
                        which continues the tiles' source rows) woven in the source's
                        order into per-thread scratch memory that stays in L2, then
                        written out in the destination's order as whole non-temporal
                        lines.
``tiled``               any other pair of fastest dims: scalar tiles sized for L1.

The thresholds below are the tuning of every stage (the thread pool's own two are in
:mod:`.threads`); the stages import them by name.
"""

from __future__ import annotations

import math
import os
from dataclasses import field

from ..errors import RearrangeError
from ..records import record
from .threads import get_num_threads

__all__ = ["CopyKernel", "plan_copy", "plan_aligned", "copies_with_numpy", "lowbit", "stages",
           "tile_columns_b2", "woven_block", "ROW_VARIANTS", "dst_rows_with_gaps"]

# ---------------------------------------------------------------------------- tuning
# Measured on a 2-core Xeon (AVX-512) shared with other work; see bench/kernel_bench.py.

NUMPY_MAX_BYTES = 32 << 10       # below this, np.copyto beats the kernel call overhead
TRANSPOSE_NUMPY_MAX_BYTES = 64 << 10  # the same for register-tile transposes
ROWS_NUMPY_MAX_BYTES = 24 << 20  # row copies: numpy's loop is as fast single-threaded,
GAPPED_ROWS_MIN_BYTES = 8 << 20  # but from this size for rows of this many bytes (up
GAPPED_ROW_MIN_BYTES = 512       # to PREFETCH_ROW_BYTES: rows prefetched in software)
GAPPED_ROW_GAP = (128, 4095)     # with gaps of this many bytes, at most a row, between
#                                  them (see plan_aligned)
THREAD_MIN_BYTES = 1 << 20       # each extra thread needs at least this much to move
# ... a small-inner-dim panel's shuffles a quarter of that: in the caches one thread
# interleaves 3 byte planes at ~20 GB/s, so from 512 KiB two threads pay (interleaved
# with XLA, 2026-11-29: NCHW->NHWC uint8 0.57-1.72 MiB 1.16-1.83x, float32 1.29-2.10x,
# pixel shuffle 1.48x, small ViT patchifies 1.36-1.81x; at 0.29 MiB two threads were
# 0.92x). Row copies and transposes, which move more bytes an instruction, keep
# THREAD_MIN_BYTES (at 0.5-0.77 MiB two threads were 0.69-0.91x for some).
# docs/performance.md, "Two threads from 512 KiB for small-inner-dim panels".
SHUFFLE_THREAD_DIVISOR = 4
NONTEMPORAL_MIN_BYTES = 24 << 20  # row/panel streams this large bypass the caches
NONTEMPORAL_TILE_MIN_BYTES = 2 << 20  # register-tile transposes: from this size
LINE = 64                        # bytes per cache line (and per non-temporal store)
SMALL_DIM = 32                   # a fastest dim this short makes a "small-inner-dim" panel
#                                  (17-32: 1.07-1.23x over scalar tiles for bytes, copy_ab)
TILE_BYTES = 4 << 10             # scalar tiles: bytes per tile (both sides fit in L1)
PANEL_BYTES = 8 << 10            # small-inner-dim panels: bytes per panel
ROW_CHUNK_BYTES = 64 << 10       # a work unit of rows moves about this many bytes
ROW_BLOCK_BYTES = 4096           # short rows: blocks of two outer dims, runs of this size,
ROW_STREAMS_MAX = 16             # when a panel would read more source streams than this
TILE_BLOCK_BYTES = 1024          # the same for the panels of tiled transposes
STAGE_BYTES = 16 << 10           # per-thread staging buffer of the write-combining stream
#                                  (in the runner's stack frame: keep it well under the
#                                  smallest thread stacks, 128 KiB on musl)
PREFETCH_ROW_BYTES = 4096        # rows up to this long are prefetched in software,
PREFETCH_UNITS_AHEAD = 2         # where they will be read this many work units later,
PREFETCH_STREAM_BYTES = 2048     # or, when a panel's rows are one forward stream (a
#                                  crop's rows), the row at least this far ahead in it
TILE_PREFETCH_LINES = {1: 2, 4: 2}  # register tiles, per unit: prefetch this many lines ahead
STAGED_BAND_ROWS = 1024          # staged transposes: destination rows per band, and
STAGED_ROW_BYTES = 256           # bytes of each destination row per work unit (a band of
#                                  them is 256 KiB of staging buffer: half a 512 KiB L2;
#                                  128 x 2048 and 512 x 512 were 0.89-0.99x of it,
#                                  256 x 2048 1.0-1.03x with all of such an L2)
STAGED_UNITS = (1, 2)            # the unit sizes staged (4 and 8: 0.6-1.1x the tiles)
WOVEN_BLOCK_BYTES = 64 << 10     # staged interleaves: destination bytes per block at most

# AVX-512 CPUs by LLVM name (NUMBA_CPU_NAME): their vector registers are 64 bytes wide.
_AVX512_CPUS = frozenset({
    "skylake-avx512", "cascadelake", "cooperlake", "cannonlake", "icelake-client",
    "icelake-server", "tigerlake", "rocketlake", "sapphirerapids", "emeraldrapids",
    "graniterapids", "graniterapids-d", "alderlake-avx512", "znver4", "znver5", "x86-64-v4",
    "knl", "knm"})


def _vector_bytes() -> int:
    """The width in bytes of the vector registers the runners are compiled for: 64 where
    the target has AVX-512, else 32 (AVX2's; a target with narrower vectors runs the same
    tiles with each vector split by LLVM). Decided as numba decides the target: its
    NUMBA_CPU_FEATURES if set, else NUMBA_CPU_NAME (generic: none), else the host CPU's
    flags. REARRANGE_VECTOR_BYTES (32 or 64) overrides it, e.g. to test either geometry
    on one machine. Read once per process, before any plan: the plans and the compiled
    runners of a process always agree, and the geometry is part of the runners' cache
    key (:func:`.jit.source_stamp`)."""
    forced = os.environ.get("REARRANGE_VECTOR_BYTES", "").strip()
    if forced in ("32", "64"):
        return int(forced)
    features = os.environ.get("NUMBA_CPU_FEATURES")
    name = os.environ.get("NUMBA_CPU_NAME", "").strip().lower()
    if features is not None and features.strip():
        return 64 if "+avx512f" in features else 32
    if name == "generic":                     # numba: no features at all
        return 32
    if name and features is not None:         # features set empty: the name's own
        return 64 if name in _AVX512_CPUS else 32
    return _host_vector_bytes()               # numba: the host's features


def _host_vector_bytes() -> int:
    """64 if the host CPU has AVX-512 (Linux: its flags in /proc/cpuinfo), else 32. (Read
    as bytes: no text codec to import at ``import rearrange``.)"""
    try:
        with open("/proc/cpuinfo", "rb") as info:
            for line in info:
                if line.startswith(b"flags"):
                    return 64 if b" avx512f" in line else 32
    except OSError:
        pass
    return 32


VECTOR_BYTES = _vector_bytes()

# SIMD tile geometry per unit size: (Ka, Kb) elements — Ka along the source-fastest dim
# (one vector load per source row), Kb along the destination-fastest dim (one or two
# whole cache lines per destination row). Chosen by measurement (in-cache and DRAM): on
# AVX-512 (Xeon) the 64-byte geometry; on AVX2 (EPYC znver3), where 64-byte source rows
# took two registers each and spilled, one 32-byte register per row for 1-, 2- and
# 4-byte units (1.4-1.8x faster 8192² transposes, interleaved A/B), while 8-byte units
# keep the 64-byte tiles (half-width ones were 7-10% slower there). 4-byte units take
# 8x16 tiles on AVX-512 too (znver4, bench/tile_geometry_ab.py): a tile column reads 16
# source rows, not 32 — as many streams as the prefetchers follow, and where the rows
# are a multiple of 4 KiB apart they share one 8-way L1 set, whose lines read ahead of
# 32 rows evicted each other: 1.15-1.59x over 16x32 on 13 transposes at 2 threads
# (NHWC->NCHW with 64 channels 1.45x, 64^4 reversal 1.18x), 1.12-1.66x at 1 thread but
# NHWC->NCHW with 256 channels, 0.95x.
# Invariant: Kb * unit is a multiple of LINE (whole-line, non-temporal destination rows).
_SIMD_TILES = {64: {1: (64, 64), 2: (32, 32), 4: (8, 16), 8: (8, 16)},
               32: {1: (32, 64), 2: (16, 32), 4: (8, 16), 8: (8, 16)}}
# With groups of two units moving together (16-byte items as two 8-byte units).
_SIMD_TILES_G2 = {64: {1: (16, 32), 2: (16, 16), 4: (8, 16), 8: (4, 8)},
                  32: {1: (16, 32), 2: (8, 16), 4: (4, 16), 8: (4, 8)}}
SIMD_TILE = _SIMD_TILES[VECTOR_BYTES]
SIMD_TILE_G2 = _SIMD_TILES_G2[VECTOR_BYTES]


# ---------------------------------------------------------------------------- the plan

@record
class CopyKernel:
    """How one strided → C-contiguous copy is done. Pure metadata, printable by explain()."""

    variant: str                 # numpy | empty | contiguous-memcpy | inner-contiguous |
    #                              strided-rows | tiled-transpose | staged-transpose |
    #                              small-inner-dim | staged-interleave | tiled
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
    # Whose copy runs while the compiled loops are not ready (or are off): the array's
    # own library's.
    fallback: str = field(default="numpy's copy", compare=False)
    # staged-interleave: tiles along the block's outer dim per block (plan.woven_block),
    # decided here so that the lowering depends on the plan alone; 0 for other variants.
    block: int = 0
    # The destination's strides of the fused dims, in units, when it is not C-contiguous
    # (rows with gaps: a slice of a C-ordered array, see plan_copy); () when it is. Only
    # row variants (ROW_VARIANTS) are planned for such a destination.
    dst_strides: tuple[int, ...] = ()


def copies_with_numpy(total: int, itemsize: int, kind: str) -> bool:
    """Whether :func:`plan_copy` gives the ``numpy`` or the ``empty`` variant for a source
    of ``total`` items of ``itemsize`` bytes and numpy's ``kind``, whatever its strides
    and the thread count: object dtypes, zero-size sources and copies under
    NUMPY_MAX_BYTES (the first exits of :func:`plan_aligned`, which asks this)."""
    return kind == "O" or total * itemsize < NUMPY_MAX_BYTES


def lowbit(x: int) -> int:
    """The lowest set bit of x (x = 0: larger than any alignment)."""
    return x & -x if x else 1 << 62


def plan_copy(
    shape: tuple[int, ...],
    src_strides_bytes: tuple[int, ...],
    itemsize: int,
    dtype_kind: str = "f",
    threads: int | None = None,
    *,
    dst_strides_bytes: tuple[int, ...] | None = None,
) -> CopyKernel:
    """Plan the copy of a strided source (shape, byte strides) into a C-contiguous array
    or, given ``dst_strides_bytes``, into a destination with those strides that is a
    slice of a C-ordered array (rows with gaps: every stride positive and at least the
    extent of the dims after it; see :func:`dst_rows_with_gaps`).

    Pure and cheap (no numba, no data, ~5 µs). ``dtype_kind`` is numpy's ``dtype.kind``;
    pass ``"O"`` for every dtype that holds Python objects (``dtype.hasobject``, also
    structured ones): those are copied by numpy. ``threads`` defaults to
    :func:`get_num_threads`. Assumes both buffers are aligned to the unit; ``copy_into``
    re-plans with a smaller unit for buffers that are not.

    >>> k = plan_copy((4096, 4096), (4, 16384), 4)     # a float32 transpose
    >>> k.variant, k.fused_shape, k.src_strides, k.tile
    ('tiled-transpose', (4096, 4096), (1, 4096), (8, 16))
    >>> plan_copy((64, 3, 224, 224), (150528, 1, 672, 3), 1).variant   # NHWC -> NCHW
    'small-inner-dim'

    A destination whose rows have gaps (here: the left half of a (1024, 4096) float32
    array) takes the row variants; any other copy into it is numpy's:

    >>> k = plan_copy((1024, 2048), (8192, 4), 4, threads=2, dst_strides_bytes=(16384, 4))
    >>> k.variant, k.fused_shape, k.src_strides, k.dst_strides
    ('inner-contiguous', (1024, 2048), (2048, 1), (4096, 1))
    """
    return plan_aligned(tuple(shape), tuple(src_strides_bytes), itemsize, dtype_kind,
                        get_num_threads() if threads is None else threads, LINE,
                        None if dst_strides_bytes is None else tuple(dst_strides_bytes))


# The variants that copy whole rows of the source to rows of the destination: the ones
# planned for a destination whose rows have gaps.
ROW_VARIANTS = frozenset({"contiguous-memcpy", "inner-contiguous", "strided-rows"})


def dst_rows_with_gaps(shape, strides, itemsize) -> bool:
    """Is a destination of this shape and byte strides a slice of a C-ordered array that
    the kernel may write: every dim longer than 1 with a positive stride at least the
    extent of the (longer than 1) dims after it, the last of them at least an item (so
    no two items share a byte)? A C-contiguous destination is one."""
    extent = itemsize
    for n, s in zip(reversed(shape), reversed(strides)):
        if n > 1:
            if s < extent:
                return False
            extent = s * n
    return True


def plan_aligned(shape, strides, itemsize, kind, threads, align,
                 dst_strides=None) -> CopyKernel:
    """plan_copy for buffers aligned to ``align`` bytes (a power of two), with the
    thread count given: the unit never exceeds the alignment. ``dst_strides``: the
    destination's byte strides (None: C-contiguous)."""
    if len(shape) != len(strides):
        raise RearrangeError(f"plan_copy: shape {shape} and strides {strides} differ in "
                             f"length")
    if threads < 1:
        raise RearrangeError(f"plan_copy: threads must be positive, got {threads}")
    if dst_strides is not None:
        if len(dst_strides) != len(shape) or not dst_rows_with_gaps(shape, dst_strides,
                                                                    itemsize):
            raise RearrangeError(f"plan_copy: destination strides {dst_strides} are not "
                                 f"those of a slice of a C-ordered array of shape {shape}")
        if is_c_contiguous(shape, dst_strides, itemsize):
            dst_strides = None
    if dst_strides is None:
        return _plan(shape, strides, itemsize, kind, threads, align, None)
    kernel = _plan(shape, strides, itemsize, kind, threads, align, dst_strides)
    if kernel.variant in ROW_VARIANTS or kernel.variant in ("numpy", "empty"):
        return kernel
    return CopyKernel("numpy", kernel.unit_bytes, kernel.fused_shape, kernel.src_strides,
                      None, 1, f"a destination whose rows have gaps: the kernel writes "
                      f"rows only ({kernel.variant} would transpose)", kernel.source,
                      dst_strides=kernel.dst_strides)


def is_c_contiguous(shape, strides, itemsize) -> bool:
    """Do ``strides`` (bytes) lay ``shape`` out C-contiguously (axes of length 1 may
    have any stride)?"""
    step = itemsize
    for n, s in zip(reversed(shape), reversed(strides)):
        if n > 1 and s != step:
            return False
        step *= n
    return True


def _plan(shape, strides, itemsize, kind, threads, align, dst_strides) -> CopyKernel:
    """plan_aligned's choice, for a C-contiguous destination (``dst_strides`` None) or
    one whose rows have gaps (then the last fused dim must be contiguous in it for the
    row variants)."""
    signature = ((shape, strides, itemsize) if dst_strides is None else
                 (shape, strides, itemsize, dst_strides))
    total = math.prod(shape)
    small = copies_with_numpy(total, itemsize, kind)   # then one of the next three exits
    if kind == "O":
        return CopyKernel("numpy", itemsize, tuple(shape), (), None, 1,
                          "object dtype: numpy copies references", signature)
    if total == 0:
        return CopyKernel("empty", itemsize, (0,), (0,), None, 1, "zero-size: nothing to copy",
                          signature)
    nbytes = total * itemsize
    # The unit: the largest power of two (<= 8) dividing the itemsize, every stride of a
    # dim that moves, and the buffers' alignment.
    bits = itemsize | align | 8
    for n, s in zip(shape, strides):
        if n > 1:
            bits |= s & -s if s else 1 << 62   # lowbit(s)
    for n, s in zip(shape, dst_strides or ()):
        if n > 1:
            bits |= s & -s
    u = min(bits & -bits, 8)
    fshape, fstr, fdst = _fuse(shape, strides, itemsize, u, dst_strides)
    if fdst and fdst[-1] != 1:
        return CopyKernel("numpy", u, fshape, fstr, None, 1, "the destination's fastest "
                          "dim has gaps: numpy's copy", signature, dst_strides=fdst)

    if small or not fshape:
        why = "a single item" if not fshape else f"{nbytes} B < {NUMPY_MAX_BYTES} B"
        return CopyKernel("numpy", u, fshape, fstr, None, 1,
                          f"{why}: np.copyto costs less than a kernel call", signature)

    def make(variant, tile, reason, min_threads_bytes=THREAD_MIN_BYTES, block=0):
        t = max(1, min(threads, nbytes // min_threads_bytes))
        return CopyKernel(variant, u, fshape, fstr, tile, t, reason, signature, block=block,
                          dst_strides=fdst)
    d = len(fshape)
    nb, sb = fshape[-1], fstr[-1]
    if d == 1 and sb == 1:
        return make("contiguous-memcpy", None, "source contiguous after fusion: memcpy")
    # Group: a short contiguous last dim that rides along (16-byte items as 2 x 8 bytes).
    g = 1
    if sb == 1 and d >= 2 and nb == 2 and u in SIMD_TILE_G2:
        g = 2
    single = threads == 1 or nbytes < 2 * THREAD_MIN_BYTES

    def rows(variant, reason):
        # Rows that follow each other with a gap (a crop's), read from memory: the
        # hardware prefetchers stop at every gap, the kernel's software prefetch runs
        # across them. One thread, 16 MiB into out=, against numpy's row loop: rows of
        # 512 B to 4 KiB with gaps of 2 lines up to a row 1.11-2.05x (a crop's 2016 B
        # rows 1.54-1.67x); gaps of one line 0.93-1.29x, of a page 0.99x, shorter rows
        # 0.95-1.06x, rows of 8 KiB 0.98-1.16x. In the caches numpy's loop is faster
        # (0.27-1.00x up to 4 MiB; 8 MiB 0.97-1.38x). docs/performance.md, "Rows with
        # gaps".
        row = fshape[-1] * u
        gap = (fstr[-2] - fshape[-1]) * u if d >= 2 and fstr[-1] == 1 else 0
        gapped = (nbytes >= GAPPED_ROWS_MIN_BYTES and
                  GAPPED_ROW_MIN_BYTES <= row <= PREFETCH_ROW_BYTES and
                  GAPPED_ROW_GAP[0] <= gap <= min(row, GAPPED_ROW_GAP[1]))
        if gapped:
            reason += f" with gaps of {gap} B: the kernel prefetches across them"
        elif single and nbytes < ROWS_NUMPY_MAX_BYTES:
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
    simd = (SIMD_TILE if g == 1 else SIMD_TILE_G2).get(u)
    ncols = nb
    if simd is not None and bdim >= 1 and bdim - 1 != adim and nb >= simd[1]:
        ncols *= fshape[bdim - 1]     # tile columns continue into the dim before b
    if sa == g and simd is not None and na >= simd[0] and ncols >= simd[1]:
        ka, kb = simd
        if nbytes < TRANSPOSE_NUMPY_MAX_BYTES:
            return CopyKernel("numpy", u, fshape, fstr, None, 1,
                              f"a transpose of {nbytes} B < {TRANSPOSE_NUMPY_MAX_BYTES} B: "
                              f"numpy's loop in L1/L2 costs less than a kernel call", signature)
        if stages(fshape, adim, bdim, u, g, kb):
            return make("staged-transpose", (ka, kb),
                        f"source-fastest dim {adim} (stride 1) != destination-fastest dim "
                        f"{bdim}: {u}-byte units, 8 source rows at a time through vector "
                        f"registers into an L2 staging buffer, whole-line streaming stores")
        return make("tiled-transpose", (ka, kb),
                    f"source-fastest dim {adim} (stride {sa}) != destination-fastest dim "
                    f"{bdim}: {ka}x{kb} tiles through vector registers, whole-line stores")
    if g > 1:
        return rows("inner-contiguous", f"source- and destination-fastest dim {d - 1} "
                                        f"(stride 1): rows of {fshape[-1] * u} B")
    if min(na, nb) <= SMALL_DIM:
        # The long side of a panel: a multiple of a line's worth of units (at least 16),
        # so that the vector loops run without a scalar remainder but at the dim's end.
        run = max(16, LINE // u)
        if na <= nb:   # short source-fastest dim: deinterleave, long rows of the destination
            ta, tb = na, min(nb, max(64, PANEL_BYTES // (u * na) // run * run))
        else:          # short destination-fastest dim: interleave into an L1-sized block
            ta, tb = min(na, max(64, PANEL_BYTES // (u * nb) // run * run)), nb
            ty = woven_block(fshape, fstr, u) if nbytes >= NONTEMPORAL_MIN_BYTES and \
                adim == d - 2 else 0
            if ty:
                block = ty * fshape[-3] * na * nb * u
                return make("staged-interleave", (ta, tb),
                            f"source-fastest dim {adim} ({na}) != destination-fastest dim "
                            f"{bdim} ({nb}): {na}x{nb} tiles woven in the source's order "
                            f"into {block >> 10} KiB blocks of the destination in L2, "
                            f"whole-line streaming stores", block=ty)
        return make("small-inner-dim", (ta, tb),
                    f"source-fastest dim {adim} ({na}) != destination-fastest dim {bdim} "
                    f"({nb}): short dim outermost, {ta}x{tb} panels in L1",
                    min_threads_bytes=max(1, THREAD_MIN_BYTES // SHUFFLE_THREAD_DIVISOR))
    t = 16
    while (2 * t) * (2 * t) * u <= TILE_BYTES:
        t *= 2
    return make("tiled", (min(t, na), min(t, nb)),
                f"source-fastest dim {adim} (stride {sa}) != destination-fastest dim {bdim}:"
                f" {t}x{t} scalar tiles ({t * t * u // 1024} KiB) through L1")


def tile_columns_b2(shape, adim, bdim, kb, u, g) -> int:
    """The dim whose rows a tiled transpose's tile columns continue into after b (the
    destination-fastest dim) when b is short, or -1: the dim before b, unless it is a or
    b's rows are long (a work unit's worth of bytes)."""
    b2 = bdim - 1
    if b2 >= 0 and b2 != adim and shape[bdim] >= kb and shape[bdim] * u * g < ROW_CHUNK_BYTES:
        return b2
    return -1


def stages(shape, adim, bdim, u, g, kb) -> bool:
    """Whether a tiled transpose (fused ``shape``, source-fastest dim ``adim``, destination-
    fastest ``bdim``) is staged: units of STAGED_UNITS, a line of rows, large enough for
    streaming stores, and every destination row of a column block a whole line on the
    line grid (every destination stride but those of the tile columns' dims a multiple of
    LINE; the destination's start is met by the first block's offset, see lowering)."""
    nbytes = math.prod(shape) * u
    if u not in STAGED_UNITS or g != 1 or shape[adim] < LINE // u or \
            nbytes < NONTEMPORAL_TILE_MIN_BYTES:
        return False
    b2 = tile_columns_b2(shape, adim, bdim, kb, u, g)
    dstride = 1
    for i in range(len(shape) - 1, -1, -1):
        if i not in (bdim, b2) and dstride * u % LINE:
            return False
        dstride *= shape[i]
    return True


def woven_block(shape, strides, u) -> int:
    """Tiles along the second outer dim per block of a staged interleave (fused ``shape``
    and source ``strides`` in units of ``u``), or 0 where the copy is not one: the last
    dim (b) is 2-4 channels that the dim before it (a: stride 1, at most a line long)
    interleaves, the two dims before those (x, then y) are the block's tile rows, and y
    continues the tiles' source rows (stride na), so that the block read x by x is nb
    source streams of y's run. A block (every x, a run of y) fits WOVEN_BLOCK_BYTES."""
    d = len(shape)
    if d < 4:
        return 0
    na, nb = shape[-2], shape[-1]
    if strides[-2] != 1 or not 2 <= nb <= 4 or na * u > LINE or na <= nb or \
            strides[-4] != na or strides[-3] == 0:
        return 0
    row = shape[-3] * na * nb * u
    return min(shape[-4], WOVEN_BLOCK_BYTES // row)


def _fuse(shape, strides, itemsize, u, dst_strides=None):
    """(shape, strides, destination strides) in units of u, size-1 dims dropped, an item
    of itemsize > u as an innermost dim of consecutive units, and dims contiguous in both
    operands fused: (n0, s0), (n1, s1) -> (n0 * n1, s1) when s0 == s1 * n1 (and so for
    the destination; a C-contiguous one, ``dst_strides`` None, always is: its fused
    strides are then ())."""
    sizes: list[int] = []      # the fused dims, innermost first
    steps: list[int] = []
    dsteps: list[int] = []
    if itemsize > u:
        sizes.append(itemsize // u)
        steps.append(1)
        dsteps.append(1)
    for n, s, t in zip(reversed(shape), reversed(strides),
                       reversed(dst_strides or (0,) * len(shape))):
        if n > 1:
            s //= u
            t //= u
            if sizes and steps[-1] * sizes[-1] == s and (
                    dst_strides is None or dsteps[-1] * sizes[-1] == t):
                sizes[-1] *= n
            else:
                sizes.append(n)
                steps.append(s)
                dsteps.append(t)
    return (tuple(reversed(sizes)), tuple(reversed(steps)),
            () if dst_strides is None else tuple(reversed(dsteps)))
