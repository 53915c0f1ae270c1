"""The compiled loop nests: one thread's share of a copy (``_run``) and the panels it
runs, plain Python that :mod:`.jit` compiles with numba on first use.

Addresses are int64; offsets are in units and signed (negative source strides). ``s`` is
the address of the source's first element, ``d`` the destination's. Loads from the
source go through ``_ld``, stores to the destination through ``_st``, the staging buffer
through ``_ldb``/``_stb``: three alias scopes, so LLVM vectorises without overlap checks.
Those and the other intrinsics (:mod:`.intrinsics`) are names of this module, ``None``
until :func:`.jit.materialise` binds them; nothing here imports numba.

The stream (``wst``/``wln`` = destination offset of the staged run, units staged;
``buf`` its 64-byte aligned L1 buffer of ``cap`` units) gathers panels that continue the
destination contiguously and writes them out as whole non-temporal lines.
"""

from __future__ import annotations

from .abi import (C_ARRIVED, C_CHUNK, C_DONE, C_LEN, C_MADVISE, C_NCHUNK, C_NRANGE,
                  C_NWORK, C_POP_END, C_POP_N, C_POP_NEXT, C_POP_START, C_POP_STEP, C_RANGE,
                  C_SCRATCH, C_SLOT, DIRECT_NT, KIND_STAGED, KIND_WEAVE, KIND_WOVEN, P_DA,
                  P_DOFF, P_DR, P_G, P_GS, P_ITA, P_ITB, P_ITR, P_JSTART, P_KIND, P_LEN,
                  P_NA, P_NB, P_NKB, P_NR, P_NT, P_NX, P_ORDER, P_PF, P_SA, P_SB, P_SB2,
                  P_SBLK, P_SCRATCH, P_SEAM, P_SOFF, P_SR, P_STAGE, P_SX, P_TA, P_TB, P_TR,
                  STAGED_NT)
from .jit import UNIT_DTYPES, jit
from .mailbox import run_pool
from .pages import PAGE
from .plan import LINE

__all__ = ["runner", "FAMILIES", "RUNS"]

# Placeholders: bound by jit.materialise() before anything is compiled.
_ld = _st = _ldb = _stb = _line_nt = _line_nt_b = _unit = _sfence = _tile = _prefetch = None
_prefetch_l2 = _put = _fetch_add = _call_madvise = _touch = _weave = _weave_b = carray = None
_stack_bytes = _stack_zeros = _stage8 = _gather_nt = _STAGE_WORDS = None


@jit()
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


@jit()
def _stream_at(d, tok, buf, cap, wst, wln, dpos, n):
    """Make room for n units destined for dpos (n <= cap - LINE / unit). Returns the new
    (wst, wln): the n units go to buf[wln:]."""
    if wln and dpos != wst + wln:
        wst, wln = _stream_flush(d, tok, buf, wst, wln, n == n)
    if wln + n > cap:
        wst, wln = _stream_flush(d, tok, buf, wst, wln, n != n)
    if wln == 0:
        wst = dpos
    return wst, wln


@jit(inline="always")
def _prefetch_run(addr, nbytes):
    """Hint: the nbytes from addr will be read soon (a prefetch per line, into L2).

    Into L2, not L1: a run is prefetched a work unit or a stream's 2 KiB ahead, and L2's
    miss queue holds more lines in flight than L1's. Over prefetcht0: the crop's
    NHWC->NCHW 1.31x at 1 thread, 1.10x at 2; attention heads' permute 1.15x, 1.11x;
    3-channel interleaves 1.03-1.14x, 0.98-1.11x (bench/copy_ab.py, checkouts
    interleaved). The register tiles keep prefetcht0."""
    for q in range(0, nbytes, LINE):
        _prefetch_l2(addr + q)


@jit()
def _panel_rows(d, s, tok, doff, soff, er, sr, dr, eb, sb, nt, pf, buf, cap, wst, wln):
    """er destination rows (steps dr / sr) of eb units from source rows of stride sb.
    Returns the stream state (wst, wln)."""
    u = _unit(tok)
    for r in range(er):
        dp = doff + r * dr
        sp = soff + r * sr
        if pf and sb == 1:
            _prefetch_run(s + (sp + pf) * u, eb * u)
        if nt == STAGED_NT:
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
            if nt == DIRECT_NT:
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


@jit()
def _panel_tile(d, s, tok, doff, soff, ea, eb, sa, da, sb, order, nt, buf, cap, wst, wln):
    """An ea x eb tile: dst[i*da + j] = src[i*sa + j*sb]. ``order`` 0 runs j innermost
    (contiguous stores), 1 runs i innermost (source-fastest). Staged (the tile is
    contiguous in the destination, da == eb): built in the stream's buffer. Returns the
    stream state (wst, wln)."""
    if nt == STAGED_NT:
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
    if nt == DIRECT_NT:
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


@jit()
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
        _stream_flush(d, tok, buf + i * eb * u, doff + i * da, eb, eb == eb)


@jit(inline="always")
def _deinterleave(t, staged, s, tok, toff, soff, n, da, m):
    """t[c*da + j] = src[j*m + c] for c < m in (2, 3, 4), j < n, into the destination
    (t == d) or the staging buffer (``staged``, a literal at every call site: inlined,
    each call site stores into its own scope). Constant strides, so LLVM vectorises the
    loads as one interleaved group."""
    if m == 2:
        for j in range(n):
            x0 = _ld(s, soff + 2 * j, tok)
            x1 = _ld(s, soff + 2 * j + 1, tok)
            _put(t, toff + j, x0, staged)
            _put(t, toff + da + j, x1, staged)
    elif m == 3:
        for j in range(n):
            x0 = _ld(s, soff + 3 * j, tok)
            x1 = _ld(s, soff + 3 * j + 1, tok)
            x2 = _ld(s, soff + 3 * j + 2, tok)
            _put(t, toff + j, x0, staged)
            _put(t, toff + da + j, x1, staged)
            _put(t, toff + 2 * da + j, x2, staged)
    else:
        for j in range(n):
            x0 = _ld(s, soff + 4 * j, tok)
            x1 = _ld(s, soff + 4 * j + 1, tok)
            x2 = _ld(s, soff + 4 * j + 2, tok)
            x3 = _ld(s, soff + 4 * j + 3, tok)
            _put(t, toff + j, x0, staged)
            _put(t, toff + da + j, x1, staged)
            _put(t, toff + 2 * da + j, x2, staged)
            _put(t, toff + 3 * da + j, x3, staged)


@jit()
def _interleave_rows(d, s, tok, doff, soff, er, sr, dr, n, sb, m, nt, pf):
    """er interleaving tiles (_interleave into the destination, ``nt`` as there), dr / sr
    apart; the source rows of each are prefetched pf units ahead (0: not)."""
    u = _unit(tok)
    for r in range(er):
        sp = soff + r * sr
        if pf:
            for c in range(m):
                _prefetch_run(s + (sp + pf + c * sb) * u, n * u)
        _interleave(d, False, s, tok, doff + r * dr, sp, n, sb, m, nt)


@jit(inline="always")
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
            _put(t, toff + i * m + c, _ld(s, soff + c * sb + i, tok), staged)


@jit()
def _woven_block(d, s, tok, doff, soff, ey, p, buf):
    """A staged interleave's work unit: the tiles of every x (p[P_NX] of them, source step
    p[P_SX]) and of ey along y (step p[P_SR]) woven into ``buf`` (a scratch slot) in the
    destination's layout, tile (y, x) at (y * nx + x) * na * nb units, x by x, so that
    each x reads its nb source rows along y as sequential streams; then the block, ey *
    p[P_DR] units contiguous at doff, written out as whole non-temporal lines."""
    na, nb, nx = p[P_NA], p[P_NB], p[P_NX]
    tile = na * nb
    for x in range(nx):
        for y in range(ey):
            _interleave(buf, True, s, tok, (y * nx + x) * tile,
                        soff + x * p[P_SX] + y * p[P_SR], na, p[P_SB], nb, False)
    _stream_flush(d, tok, buf, doff, ey * p[P_DR], ey == ey)


@jit()
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
            # g is 1 or 2: written out, where a loop over x would be vectorised and
            # unrolled into code many times the size of this edge case's.
            _st(d, dp, _ld(s, sp, tok))
            if g == 2:
                _st(d, dp + 1, _ld(s, sp + 1, tok))
            dp += g
            sp += sb
            r += 1
            if r == nb:
                r = 0
                sp += jump


@jit()
def _tile_column(dt0, st0, n, da, sb, split, jump, tok, ka, kb, g, nt, pf):
    """Rows 0..n-1 (n >= ka) of a column of register tiles (``_tile``, g units per
    element, 1 or 2): tile i stores at dt0 + i*ka*da units and loads from st0 + i*ka*g
    units; the last is moved up to end at row n, rewriting rows the one before it wrote
    (with the same values). ``split`` / ``jump``: the tile's source rows after the
    split-th are ``jump`` units further on; ``nt``: non-temporal stores (the rows of
    every tile start on a line); ``pf``: prefetch source lines this many lines ahead (0:
    not). Column blocks and seams share it, so each of the four tile variants (large:
    unrolled shuffles) is emitted once per runner."""
    u = _unit(tok)
    dstep = ka * da * u
    sstep = ka * g * u
    nfull = n // ka
    for i in range(nfull + (n > nfull * ka)):
        dt = dt0 + i * dstep
        st = st0 + i * sstep
        if i == nfull:                  # the last rows: a tile ending at row n
            dt = dt0 + (n - ka) * da * u
            st = st0 + (n - ka) * g * u
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


@jit()
def _column_block(d, s, tok, c0, soff, j0, na, p, nt, pf):
    """Destination columns j0..j0+Kb-1 of a tiled-transpose panel over all its ``na``
    rows (na >= Ka), in register tiles (_tile_column). Columns run over (b2, b): column
    j reads source row (j // nb)*sb2 + (j % nb)*sb. ``c0`` / ``soff``: the panel's
    column-0 offsets; ``nt``: non-temporal stores."""
    u = _unit(tok)
    nb = p[P_NB]
    sb = p[P_SB]
    g = p[P_G]
    kb = p[P_TB]
    # Where (if at all) the block's columns cross into the next b2.
    q = j0 // nb
    jr = j0 - q * nb
    split = nb - jr                     # columns before the crossing (>= kb: none)
    if split < kb:
        pf = 0
    _tile_column(d + (c0 + j0 * g) * u, s + (soff + q * p[P_SB2] + jr * sb) * u, na,
                 p[P_DA], sb, split, p[P_SB2] - nb * sb, tok, p[P_TA], kb, g, nt, pf)


@jit()
def _panel_simd(d, s, tok, doff, soff, jb, na, p):
    """Column block ``jb`` of a tiled transpose (``doff``: the destination offset of its
    first column, ``soff``: the source offset of the panel's column 0), and the columns
    outside the blocks that go with it (_panel_edges)."""
    j0 = p[P_JSTART] + jb * p[P_TB]
    c0 = doff - j0 * p[P_G]
    _column_block(d, s, tok, c0, soff, j0, na, p, p[P_NT], p[P_PF])
    _panel_edges(d, s, tok, c0, soff, jb, jb, na, p)


@jit()
def _panel_edges(d, s, tok, c0, soff, jfirst, jlast, na, p):
    """The columns of a tiled-transpose panel outside its column blocks, copied with
    the work unit of blocks jfirst..jlast that holds the first or the last block (``c0``
    / ``soff``: the panel's column-0 offsets; ``na`` rows, at least Ka). The first block
    starts where destination rows meet a line, for non-temporal stores: where rows lie
    back to back, the lines where they meet are written by seam tiles (_seam_block), else
    one unit at a time. The columns after the last block: by one more column of tiles
    ending at the last column (rewriting columns of the last block with the same
    values), streaming only where that end is on a line."""
    kb = p[P_TB]
    g = p[P_G]
    nt = p[P_NT]
    if jfirst == 0 and p[P_JSTART]:
        if p[P_SEAM]:
            _seam_block(d, s, tok, c0, soff, na, p)
        else:
            _strip_g(d, s, tok, c0, soff, na, na - na, p[P_JSTART], p[P_DA], p[P_NB],
                     p[P_SB], p[P_SB2], g)
    j0 = p[P_JSTART] + jlast * kb
    end = p[P_NB] * p[P_NR] - p[P_SEAM]
    if jlast == p[P_NKB] - 1 and j0 + kb < end:
        # One more column of tiles ending at the last column, rewriting columns of the
        # last block (with the same values; the same work unit wrote them): streaming
        # where it ends on a line, else with regular stores.
        lined = (d + (c0 + end * g) * _unit(tok)) % LINE == 0
        _column_block(d, s, tok, c0, soff, end - kb, na, p, nt if lined else nt - nt,
                      p[P_PF])


@jit(inline="always")
def _stage_word(i, tok):
    """Where the word (8 units: 8 rows) of source column i lies in its row group of a
    staged transpose's buffer: 512 bytes per LINE bytes of columns, in _stage8's order."""
    u = _unit(tok)
    per = LINE // u
    return (i // per) * 8 * LINE + _STAGE_WORDS[u, i % per]


@jit()
def _panel_staged(d, s, tok, doff, soff, jb, na, p, buf):
    """Column blocks jb .. jb + P_SBLK - 1 (those there are) of a staged transpose
    (every destination row's blocks whole lines on the line grid) over ``na`` rows (at
    least a line's worth of units, and Ka), through ``buf``, this thread's staging
    buffer of 8-row groups P_GS bytes apart; then the columns outside the blocks that go
    with them (_panel_edges). ``doff`` / ``soff`` as in _panel_simd.

    First every 8 source rows (destination columns) are read together along the band,
    a line of each at a time into consecutive 512-byte chunks of their group, transposed
    by _stage8 (eight long read streams: the hardware prefetchers follow them, where a
    register tile's 32 or 64 rows of a line each were not); the last rows after the
    whole lines come from one more chunk, the band's last line of each source row. Then
    each destination row gets its whole lines, non-temporally, each gathered from the
    words of 8 / unit groups. The buffer stays in the L2 cache between the two."""
    u = _unit(tok)
    per = LINE // u                     # units per source line (and per chunk)
    kb = p[P_TB]
    nb = p[P_NB]
    sb = p[P_SB]
    gs = p[P_GS]
    j0 = p[P_JSTART] + jb * kb
    c0 = doff - j0
    nblk = min(p[P_SBLK], p[P_NKB] - jb)
    jump = p[P_SB2] - nb * sb
    tail = na - na % per                # rows from here on: in the last chunk
    for grp in range(nblk * kb // 8):
        # The group's 8 source rows; at most one crossing into the next b2 (nb >= Kb).
        j = j0 + 8 * grp
        q = j // nb
        jr = j - q * nb
        row = s + (soff + q * p[P_SB2] + jr * sb) * u
        bp = buf + grp * gs
        for i in range(0, tail, per):
            _stage8(bp + 8 * u * i, row + u * i, u * sb, nb - jr, u * jump, tok)
        if tail < na:
            _stage8(bp + 8 * u * tail, row + u * (na - per), u * sb, nb - jr, u * jump, tok)
    lines = nblk * kb * u // LINE       # per destination row
    step = (8 // u) * gs                # groups per line
    dp = d + (c0 + j0) * u
    for i in range(na):
        if i < tail:
            w = buf + _stage_word(i, tok)
        else:
            w = buf + 8 * u * tail + _stage_word(i - (na - per), tok)
        for line in range(lines):
            _gather_nt(dp + line * LINE, w + line * step, gs, tok)
        dp += p[P_DA] * u
    _panel_edges(d, s, tok, c0, soff, jb, jb + nblk - 1, na, p)


@jit()
def _seam_block(d, s, tok, c0, soff, na, p):
    """The lines where destination rows of a tiled-transpose panel meet (rows back to
    back, da == ncols*g, starting w = p[P_SEAM] columns past a line), as whole lines
    (non-temporal where the panel's stores are): from the line before the start of row
    a, Kb columns: the last w of row a-1, then the first of row a (the first block's
    too, rewritten with the same values). The two parts read different source rows, and
    columns a-1 / a: the tile's jump. Rows 1 to na-1 in tiles, the last one moved up;
    the head of row 0 and the tail of row na-1, and all heads and tails when na <= Ka,
    one unit at a time."""
    u = _unit(tok)
    g = p[P_G]
    ka = p[P_TA]
    da = p[P_DA]
    nb = p[P_NB]
    sb = p[P_SB]
    sb2 = p[P_SB2]
    w = p[P_SEAM]
    ncols = nb * p[P_NR]
    tail = (p[P_NR] - 1) * sb2 + (nb - w) * sb      # source row of column ncols - w
    jump = g - tail - w * sb
    n = na - 1
    if n < ka:
        _strip_g(d, s, tok, c0, soff, na, na - na, p[P_JSTART], da, nb, sb, sb2, g)
        _strip_g(d, s, tok, c0, soff, na, ncols - w, ncols, da, nb, sb, sb2, g)
        return
    # Row a's seam tile stores from row a, w columns before column 0, and loads from
    # source column a - 1's row ``tail``.
    _tile_column(d + (c0 + da - w * g) * u, s + (soff + tail) * u, n, da, sb, w, jump,
                 tok, ka, p[P_TB], g, p[P_NT], n - n)
    one = na - n          # runtime ones and zeros: literal ones would compile _strip_g anew
    _strip_g(d, s, tok, c0, soff, one, one - one, p[P_JSTART], da, nb, sb, sb2, g)
    _strip_g(d, s, tok, c0 + n * da, soff + n * g, one, ncols - w, ncols, da, nb, sb, sb2, g)


@jit()
def _populate(cp):
    """The destination pages this thread claims to populate (slices of the control
    block's range): madvise where the block names it, else a write per page."""
    c = carray(cp, (C_LEN,))
    npop = c[C_POP_N]
    while npop:
        k = _fetch_add(cp, C_POP_NEXT, 1)
        if k >= npop:
            break
        a = c[C_POP_START] + k * c[C_POP_STEP]
        e = min(c[C_POP_END], a + c[C_POP_STEP])
        if c[C_MADVISE] == 0 or _call_madvise(c[C_MADVISE], a, e - a) != 0:
            for q in range(a, e, PAGE):
                _touch(q)


@jit()
def _home(cp):
    """This thread's home range of chunks: the n-th thread to arrive takes range
    n % ranges (the caller, which starts before its workers are woken, range 0)."""
    c = carray(cp, (C_LEN,))
    return _fetch_add(cp, C_ARRIVED, 1) % c[C_NRANGE]


@jit()
def _claim(cp, r):
    """The next chunk of work units [lo, hi) for a thread taking chunks from range r,
    and the range it came from: its home range's chunks in order, then those the other
    threads have not taken yet, range after range. lo >= hi: none left.

    Ranges are consecutive runs of chunks, one per thread: a thread that finds its home
    range as it left it in the copy before writes the part of the destination it wrote
    then (the cache lines it holds), and stealing from the others keeps the threads
    busy to the end."""
    c = carray(cp, (C_LEN,))
    nwork, chunk, nchunk, nrange = c[C_NWORK], c[C_CHUNK], c[C_NCHUNK], c[C_NRANGE]
    for _ in range(nrange):
        first = r * nchunk // nrange
        k = first + _fetch_add(cp, C_RANGE + r, 1)
        if k < (r + 1) * nchunk // nrange:
            return k * chunk, min(nwork, (k + 1) * chunk), r
        r = (r + 1) % nrange
    return nwork, nwork, r


@jit()
def _seek(it, idx, lo, soff, doff):
    """Set the odometer ``idx`` to work unit ``lo``; returns its source and destination
    offsets (from the first unit's ``soff``, ``doff``)."""
    rem = lo
    for k in range(it[0] - 1, -1, -1):
        n = it[1 + 3 * k]
        q = rem // n
        r = rem - q * n
        idx[k] = r
        soff += r * it[2 + 3 * k]
        doff += r * it[3 + 3 * k]
        rem = q
    return soff, doff


@jit()
def _advance(it, idx, soff, doff):
    """The odometer one work unit on (the last dim fastest); returns the new offsets."""
    k = it[0] - 1
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
    return soff, doff


@jit()
def _extent(p, idx, itx, tile, whole):
    """Units of a tiled dim in the current work unit: ``p[whole]`` when the dim is not
    iterated (``itx`` < 0), else a tile of ``p[tile]``, the last one taking the rest."""
    n = p[whole]
    if itx >= 0:
        n = min(p[tile], n - idx[itx] * p[tile])
    return n


@jit()
def _scratch_slot(cp, p):
    """The address of this thread's slot (p[P_SCRATCH] bytes) of the copy's scratch
    memory: each thread that runs the copy claims its own."""
    return carray(cp, (C_LEN,))[C_SCRATCH] + _fetch_add(cp, C_SLOT, 1) * p[P_SCRATCH]


@jit()
def _publish(cp, done):
    """Count this thread's work units as done: the stores (non-temporal ones too) are
    ordered before the count that publishes them."""
    _sfence()
    _fetch_add(cp, C_DONE, done)


# The runners: one thread's share of a copy. Each first populates the destination pages
# it claims, then copies the chunks of work units it claims (its home range first, see
# _claim), both from the shared control block ``cp`` (C_* fields; the copy's threads all
# run the same runner on the same block).
# Work units are the iteration space ``it`` ([m, (count, src step, dst step) x m], the
# last dim fastest), each one panel; ``it`` and ``p`` arrive as pointers. A thread that
# starts after the others have claimed everything returns without touching either array.
# There is one runner per panel family, each compiled (jit.compile_runner) per unit size
# as a C-ABI function: a copy compiles only the loops its own family needs.

def _run_rows(cp, d, s, itp, pp, tok):
    """Rows (KIND_ROWS): contiguous-memcpy, inner-contiguous and strided-rows plans."""
    chunk_range = _home(cp)          # the range this thread takes chunks from
    _populate(cp)
    it = carray(itp, (1 + 3 * itp[0],))
    p = carray(pp, (P_LEN,))
    idx = carray(_stack_zeros(it[0] + 1), (it[0] + 1,))
    buf = _stack_bytes(p[P_STAGE])        # the stream's buffer
    cap = p[P_STAGE] // _unit(tok)
    zero = itp[0] - itp[0]  # runtime zeros: literal ones would type the helpers' calls twice
    wst, wln, done = zero, zero, zero
    itb, itr = p[P_ITB], p[P_ITR]
    while True:
        lo, hi, chunk_range = _claim(cp, chunk_range)
        if lo >= hi:
            break
        done += hi - lo
        soff, doff = _seek(it, idx, lo, p[P_SOFF], p[P_DOFF])
        for _ in range(lo, hi):
            er = _extent(p, idx, itr, P_TR, P_NR)
            eb = _extent(p, idx, itb, P_TB, P_NB)
            wst, wln = _panel_rows(d, s, tok, doff, soff, er, p[P_SR], p[P_DR], eb,
                                   p[P_SB], p[P_NT], p[P_PF], buf, cap, wst, wln)
            soff, doff = _advance(it, idx, soff, doff)
    _stream_flush(d, tok, buf, wst, wln, wln == wln)
    _publish(cp, done)


def _run_transpose(cp, d, s, itp, pp, tok):
    """Register-tile transposes (KIND_SIMD) and staged ones (KIND_STAGED, whose work
    units are P_SBLK column blocks each): tiled- and staged-transpose plans."""
    chunk_range = _home(cp)          # the range this thread takes chunks from
    _populate(cp)
    it = carray(itp, (1 + 3 * itp[0],))
    p = carray(pp, (P_LEN,))
    idx = carray(_stack_zeros(it[0] + 1), (it[0] + 1,))
    done = itp[0] - itp[0]
    ita, itb = p[P_ITA], p[P_ITB]
    staged = p[P_KIND] == KIND_STAGED
    buf = done                          # this thread's slot of the scratch memory
    if staged:
        buf = _scratch_slot(cp, p)
    while True:
        lo, hi, chunk_range = _claim(cp, chunk_range)
        if lo >= hi:
            break
        done += hi - lo
        soff, doff = _seek(it, idx, lo, p[P_SOFF], p[P_DOFF])
        for _ in range(lo, hi):
            ea = p[P_NA]
            if ita >= 0:        # a band of rows (the last one takes the rest)
                ea = p[P_TR] if idx[ita] < it[1 + 3 * ita] - 1 else ea - idx[ita] * p[P_TR]
            if staged:
                _panel_staged(d, s, tok, doff, soff, p[P_SBLK] * idx[itb], ea, p, buf)
            else:
                _panel_simd(d, s, tok, doff, soff, idx[itb], ea, p)
            soff, doff = _advance(it, idx, soff, doff)
    _publish(cp, done)


def _run_tiles(cp, d, s, itp, pp, tok):
    """Tiles of a small inner dim (KIND_TILE), interleaves of 2-4 source rows (KIND_WEAVE)
    and blocks of them woven in scratch memory (KIND_WOVEN): small-inner-dim,
    staged-interleave and tiled plans."""
    chunk_range = _home(cp)          # the range this thread takes chunks from
    _populate(cp)
    it = carray(itp, (1 + 3 * itp[0],))
    p = carray(pp, (P_LEN,))
    idx = carray(_stack_zeros(it[0] + 1), (it[0] + 1,))
    buf = _stack_bytes(p[P_STAGE])        # the stream's buffer
    cap = p[P_STAGE] // _unit(tok)
    zero = itp[0] - itp[0]
    wst, wln, done = zero, zero, zero
    weave = p[P_KIND] == KIND_WEAVE
    woven = p[P_KIND] == KIND_WOVEN
    ita, itb, itr = p[P_ITA], p[P_ITB], p[P_ITR]
    block = zero                        # this thread's slot of the scratch memory
    if woven:
        block = _scratch_slot(cp, p)
    while True:
        lo, hi, chunk_range = _claim(cp, chunk_range)
        if lo >= hi:
            break
        done += hi - lo
        soff, doff = _seek(it, idx, lo, p[P_SOFF], p[P_DOFF])
        for _ in range(lo, hi):
            er = _extent(p, idx, itr, P_TR, P_NR)
            ea = _extent(p, idx, ita, P_TA, P_NA)
            if woven:
                _woven_block(d, s, tok, doff, soff, er, p, block)
            elif weave:
                _interleave_rows(d, s, tok, doff, soff, er, p[P_SR], p[P_DR], ea,
                                 p[P_SB], p[P_NB], p[P_NT] == DIRECT_NT, p[P_PF])
            else:
                eb = _extent(p, idx, itb, P_TB, P_NB)
                for r in range(er):
                    if p[P_PF]:         # this tile's source run, pf units on
                        _prefetch_run(s + (soff + r * p[P_SR] + p[P_PF]) * _unit(tok),
                                      ea * eb * _unit(tok))
                    wst, wln = _panel_tile(d, s, tok, doff + r * p[P_DR], soff + r * p[P_SR],
                                           ea, eb, p[P_SA], p[P_DA], p[P_SB], p[P_ORDER],
                                           p[P_NT], buf, cap, wst, wln)
            soff, doff = _advance(it, idx, soff, doff)
    _stream_flush(d, tok, buf, wst, wln, wln == wln)
    _publish(cp, done)


# Panel family of each plan variant that runs compiled loops.
FAMILIES = {"contiguous-memcpy": "rows", "inner-contiguous": "rows", "strided-rows": "rows",
            "tiled-transpose": "transpose", "staged-transpose": "transpose",
            "small-inner-dim": "tiles", "staged-interleave": "tiles", "tiled": "tiles"}
# The runner of each family; "pool" is not a copy's (see .mailbox): what the pool's
# workers spin in, and its callers post through.
RUNS = {"rows": _run_rows, "transpose": _run_transpose, "tiles": _run_tiles,
        "pool": run_pool}


def runner(u: int, family: str, compile: bool = True):
    """The ``family`` runner compiled for u-byte units (loaded from the disk cache when
    it is there): a C-ABI function called through ctypes, which releases the GIL for the
    call. Compiles in the calling thread (``compile=False``: None unless it loads);
    :mod:`.builds` decides when that may happen."""
    from . import jit as jit_module      # (looked up per call: tests wrap it)

    return jit_module.compile_runner(RUNS[family], u, compile)
