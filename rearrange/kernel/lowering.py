"""Lowering: a :class:`~.plan.CopyKernel` as the compiled loops' iteration space and
parameters.

A plan says what to do in fused dims and units; its lowering fixes how, for one
destination: the work units (panels of rows, column blocks of register tiles, or tiles)
as an odometer of ``(count, source step, destination step)`` dims, the panel and its
store mode (regular, non-temporal straight from the source, or staged through an L1
buffer: :mod:`.abi`), the prefetch distance, and how the work is chunked over threads.
It depends on where the destination starts relative to a cache line (non-temporal
stores write whole aligned lines) and on whether its pages are fresh (see
:mod:`rearrange.kernel`). Pure Python, no numba: the runner that executes a lowering is
the caller's business (:mod:`.builds`).
"""

from __future__ import annotations

import math

import numpy as np

from .abi import (DIRECT_NT, KIND_ROWS, KIND_SIMD, KIND_STAGED, KIND_TILE, KIND_WEAVE,
                  KIND_WOVEN, P_DA, P_DOFF, P_DR, P_G, P_GS, P_ITA, P_ITB, P_ITR, P_JSTART,
                  P_KIND, P_LEN, P_NA, P_NB, P_NKB, P_NR, P_NT, P_NX, P_ORDER, P_PF, P_SA,
                  P_SB, P_SB2, P_SBLK, P_SCRATCH, P_SEAM, P_SR, P_STAGE, P_SX, P_TA, P_TB,
                  P_TR, STAGED_NT)
from .loops import FAMILIES
from .plan import (LINE, NONTEMPORAL_MIN_BYTES, NONTEMPORAL_TILE_MIN_BYTES, PANEL_BYTES,
                   PREFETCH_ROW_BYTES, PREFETCH_STREAM_BYTES, PREFETCH_UNITS_AHEAD,
                   ROW_BLOCK_BYTES, ROW_CHUNK_BYTES, ROW_STREAMS_MAX, SIMD_TILE_G2,
                   STAGE_BYTES, STAGED_BAND_ROWS, STAGED_ROW_BYTES, TILE_BLOCK_BYTES,
                   TILE_PREFETCH_LINES, CopyKernel, tile_columns_b2)
from .threads import CHUNKS_PER_THREAD

__all__ = ["lower"]


def lower(k: CopyKernel, dmod: int, fresh: bool = False):
    """A plan as the kernels' iteration space and parameters, for a destination at an
    address = dmod (mod LINE), untouched (``fresh``) or not: (work units, threads,
    iteration dims, parameters, the runner's panel family, the addresses of the
    iteration dims and parameters, the number of work units a chunk of a multithreaded
    copy is a multiple of)."""
    u = k.unit_bytes
    shape, sstr = k.fused_shape, k.src_strides
    d = len(shape)
    dstr = [1] * d
    for i in range(d - 2, -1, -1):
        dstr[i] = dstr[i + 1] * shape[i + 1]
    if k.dst_strides:       # rows with gaps (plan: row variants only, rows contiguous)
        dstr = list(k.dst_strides)
    p = [0] * P_LEN
    p[P_ITA] = p[P_ITB] = p[P_ITR] = -1
    p[P_STAGE] = STAGE_BYTES          # the kernel's buffer: the size planned with
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
            p[P_ITR] = len(it) // 3
            it.extend((-(-nr // tr), tr * sr, tr * dr))
        if tb < nb:
            p[P_ITB] = len(it) // 3
            it.extend((-(-nb // tb), tb * sb, tb))
        p[P_KIND] = KIND_ROWS
        p[P_NB], p[P_SB], p[P_TB] = nb, sb, tb
        p[P_NR], p[P_SR], p[P_DR], p[P_TR] = nr, sr, dr, tr
        if nt:
            if dr == nb and nb * 2 <= stage:
                p[P_NT] = STAGED_NT
            elif sb == 1 and nb * u >= 2 * LINE:
                p[P_NT] = DIRECT_NT
        if sb == 1 and nb * u <= PREFETCH_ROW_BYTES and it:
            # Short source rows are prefetched in software: many interleaved streams,
            # or one stream with gaps; the hardware prefetchers follow neither.
            p[P_PF] = _prefetch_distance(sr, nb, it[-2], u)
    elif v in ("tiled-transpose", "staged-transpose"):
        g = 2 if (k.tile == SIMD_TILE_G2.get(u) and sstr[-1] == 1 and shape[-1] == 2) else 1
        bdim = d - 1 if g == 1 else d - 2
        adim = min((i for i in range(bdim) if sstr[i] != 0), key=lambda i: abs(sstr[i]))
        ka, kb = k.tile
        na, nb, sb, da = shape[adim], shape[bdim], sstr[bdim], dstr[adim]
        # The tile columns run over b and, when b is short, over the dim before it too
        # (b2: contiguous with b in the destination, any stride in the source): the
        # destination rows get long enough to be written in whole lines.
        b2 = tile_columns_b2(shape, adim, bdim, kb, u, g)
        nb2, sb2 = (shape[b2], sstr[b2]) if b2 >= 0 else (1, 0)
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
        # plan.stages guarantees the line grid a staged transpose needs (nt).
        staged = v == "staged-transpose" and nt
        if staged:
            # Work units: STAGED_ROW_BYTES of every destination row (P_SBLK column
            # blocks), each over a band of STAGED_BAND_ROWS rows, the bands innermost (a
            # thread's next unit continues the same source rows); a remainder under
            # LINE rows joins the last band.
            nblk = max(1, STAGED_ROW_BYTES // (kb * u))
            nbands = max(1, na // STAGED_BAND_ROWS + (na % STAGED_BAND_ROWS >= LINE))
            band = min(na, STAGED_BAND_ROWS)
            rows = max(band, na - (nbands - 1) * band)
            p[P_SBLK] = nblk
            p[P_GS] = -(-rows * u // LINE) * 8 * LINE + LINE    # chunks of 8 lines
            p[P_SCRATCH] = nblk * kb // 8 * p[P_GS]
            it.extend((-(-nkb // nblk), 0, nblk * kb))
            p[P_ITB] = len(it) // 3 - 1
            if nbands > 1:
                p[P_ITA] = len(it) // 3
                it.extend((nbands, band, band * da))
                p[P_TR] = band
        elif k.threads > 1 and not nt:
            # Destination rows (or the first block) off the line grid: threads copying
            # neighbouring column blocks would share the lines where the blocks meet.
            # They take bands of rows instead (whole bands per chunk of work).
            band = -(-na // (k.threads * CHUNKS_PER_THREAD))
            band = max(ka, -(-band // ka) * ka)
            if na // band > 1:
                p[P_ITA] = len(it) // 3
                it.extend((na // band, band * g, band * da))
                p[P_TR] = band
                quantum = nkb
        # Column blocks (source offsets: computed) run innermost, unless an outer dim
        # continues the source rows of the tiles (a full reversal's second dim): it goes
        # innermost, so that a column block reads its kb source rows as long sequential
        # streams (the destination's lines then leave in runs of kb units, not whole
        # rows; the streams matter more: 1.5x on a 64^4 reversal). (Staged transposes
        # have their work units above.)
        if not staged:
            cont = [i for i in range(len(it) // 3) if abs(it[3 * i + 1]) == na * g]
            if cont and p[P_ITA] < 0:
                i = cont[-1]
                it[:] = it[:3 * i] + it[3 * i + 3:] + [nkb, 0, kb * g] + it[3 * i:3 * i + 3]
                p[P_ITB] = len(it) // 3 - 2
            else:
                p[P_ITB] = len(it) // 3
                it.extend((nkb, 0, kb * g))
        p[P_KIND] = KIND_STAGED if staged else KIND_SIMD
        p[P_NA], p[P_SA], p[P_DA] = na, g, da
        p[P_NB], p[P_SB], p[P_SB2] = nb, sb, sb2
        p[P_NR] = nb2
        p[P_TA], p[P_TB] = ka, kb
        p[P_NT], p[P_JSTART], p[P_NKB], p[P_G] = int(nt), jstart, nkb, g
        p[P_DOFF] = jstart * g
        p[P_PF] = TILE_PREFETCH_LINES.get(u, 0) if g == 1 else 0
        if jstart and da == ncols * g:
            # Destination rows back to back, off the line grid: the line where one row
            # ends and the next begins is written whole, by tiles of "seam" columns
            # (the last ones of a row, then the first ones of the next).
            p[P_SEAM] = (LINE - head) // (u * g)    # columns of the row that ends
    elif v == "staged-interleave" and not fresh:
        # Work units: blocks of the destination, the tiles of every x (dim d-3) and of a
        # run of k.block along y (dim d-4): contiguous in the destination. A block is
        # woven into the thread's scratch memory x by x, each x reading its channel rows
        # along y's run (plan.woven_block: y continues them), so that the block's source
        # is nb sequential streams; then it leaves in the destination's order as whole
        # non-temporal lines (its partial first and last lines: regular stores). Into
        # fresh pages it is lowered as small-inner-dim (regular stores as the pages
        # fault): populating them first and streaming was 0.81-0.92x of that.
        ty = k.block
        ny, sy, dy = shape[-4], sstr[-4], dstr[-4]
        outer({d - 4, d - 3, d - 2, d - 1})
        if ty < ny:
            p[P_ITR] = len(it) // 3
            it.extend((-(-ny // ty), ty * sy, ty * dy))
        p[P_KIND] = KIND_WOVEN
        p[P_NA], p[P_NB], p[P_SB] = shape[-2], shape[-1], sstr[-1]
        p[P_NX], p[P_SX] = shape[-3], sstr[-3]
        p[P_NR], p[P_TR], p[P_SR], p[P_DR] = ny, ty, sy, dy
        p[P_SCRATCH] = -(-ty * dy * u // LINE) * LINE
    else:  # small-inner-dim, tiled (and staged-interleave into fresh pages)
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
            # dim the source steps through fastest, the source is prefetched (below),
            # and the stores are regular (streaming ones were slower on these runs of a
            # few lines far apart).
            along_source = not nt or ta * u <= LINE
            r = len(it) // 3 - 1
            if along_source:
                nt = False
                r = min(range(len(it) // 3), key=lambda i: abs(it[3 * i + 1]))
            nr, sr, dr = it[3 * r:3 * r + 3]
            del it[3 * r:3 * r + 3]
            tr = max(1, min(nr, PANEL_BYTES // (ta * tb * u)))
            if tr < nr:
                p[P_ITR] = len(it) // 3
                it.extend((-(-nr // tr), tr * sr, tr * dr))
            p[P_SR], p[P_DR], p[P_TR] = sr, dr, tr
            # Prefetched: interleaves' source rows, and tiles whose source is one run
            # (a deinterleave's pixels, a crop's rows: runs with gaps between them,
            # which the hardware prefetchers stop at).
            if along_source and it and weave:
                p[P_PF] = PREFETCH_UNITS_AHEAD * it[-2]
            elif along_source and it and sstr[adim] == 1 and sstr[bdim] == ta:
                p[P_PF] = _prefetch_distance(sr, ta * tb, it[-2], u)
        p[P_NR] = nr
        if nbb > 1:
            p[P_ITB] = len(it) // 3
            it.extend((nbb, tb * sstr[bdim], tb))
        if nba > 1:
            p[P_ITA] = len(it) // 3
            it.extend((nba, ta * sstr[adim], ta * dstr[adim]))
        p[P_KIND] = KIND_TILE
        p[P_NA], p[P_SA], p[P_DA] = na, sstr[adim], dstr[adim]
        p[P_NB], p[P_SB] = nb, sstr[bdim]
        p[P_TA], p[P_TB] = ta, tb
        p[P_ORDER] = 0 if ta <= tb else 1      # the short side of the tile outermost
        # Interleaving tiles whose every start is on a line leave as whole lines.
        lined = dmod == 0 and all(it[i] * u % LINE == 0 for i in range(2, len(it), 3)) and \
            p[P_DR] * u % LINE == 0
        if nt and weave and lined:
            p[P_NT] = DIRECT_NT
        elif nt and (dstr[adim] == tb == nb) and ta * tb * 2 <= stage:
            p[P_NT] = STAGED_NT               # tiles are contiguous in the destination
        elif nt and ta <= tb and ta * tb <= stage and tb * u >= 4 * LINE:
            p[P_NT] = DIRECT_NT               # tiles of long rows: staged row by row
        if weave and p[P_NT] != STAGED_NT:
            p[P_KIND] = KIND_WEAVE
    nwork = math.prod(it[0::3])
    itv = np.array([len(it) // 3] + it, dtype=np.int64)
    pv = np.array(p, dtype=np.int64)
    return (nwork, min(k.threads, nwork), itv, pv, FAMILIES[k.variant],
            itv.__array_interface__["data"][0], pv.__array_interface__["data"][0], quantum)


def _prefetch_distance(sr: int, run: int, unit_step: int, u: int) -> int:
    """How far ahead (in source units) a panel prefetches each of its rows, a run of
    ``run`` units read sr units after the one before it, when the next work unit starts
    unit_step units on. Rows at most a row's length apart are one forward stream with
    gaps (a crop's): the row PREFETCH_STREAM_BYTES or more ahead in it (the work unit
    two on would be far ahead: 1.15x on a crop's NHWC->NCHW, 2 threads). Rows further
    apart are separate streams, each continued by the next work units: where the work
    unit PREFETCH_UNITS_AHEAD later reads it."""
    if 0 < sr <= 2 * run:
        return sr * -(-PREFETCH_STREAM_BYTES // (sr * u))
    return PREFETCH_UNITS_AHEAD * unit_step


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
