"""Batched matrix products, compiled: ``C[b] = A[b] @ B[b]`` for float32 (and float64)
with a short summed dim (K up to :data:`MAX_INNER`), each ``C[b]`` a fresh
C-contiguous (M, N) matrix — the attention einsum ``b h t d, b h s d -> b h t s`` at
(8, 8, 256, 64), which numpy's matmul (OpenBLAS) runs at ~35% of this machine's peak:
with K = 64 OpenBLAS pays a packing pass, a beta = 0 pass over C and a thread sync per
256 x 256 product (docs/performance.md, "A batched product of our own").

The work is cut into *units*: one batch item ``b``, a block of its rows (whole register
tiles, or all its rows) and a block of *panels* — :func:`tile_shape`'s ``NR`` columns of
``C[b]`` each (a multiple of the vector width); :func:`blocking` sizes the blocks. The
thread that claims a unit packs the K x NR part of ``B[b]`` of each of the block's panels
into its own scratch memory (contiguous rows of NR elements, zero past N), unless they
are the panels it packed for its previous unit, then runs panel by panel down the row
block's rows ``MR`` at a time: a register tile of MR x NR accumulators (MR x NV
vectors) — each step one vector load per NV columns of the packed panel, one broadcast
element of A per row (read in place through A's strides, any strides), and MR x NV
fused multiply-adds, two steps an iteration. K runs in blocks of at most
:data:`INNER_BLOCK` steps, all the row block's tiles through one block before the next,
so that the block's part of the panel (32 KiB of float32) stays in L1 while the tiles
read it and the row block's part of A in L2 across the panels: the first block stores
the tile to C, each later one starts from the tile read back from C and stores it again.
A tile that runs past M or N (the last rows, the last panel) is computed in one go over
the whole K into an edge buffer in the scratch memory (A's row addresses clamped to its
last row: nothing outside A is read) and only its part inside C copied out. Asked to
(``streaming``, where :func:`streams` allows), the full tiles' last K block goes out as
non-temporal stores (aligned whole lines: no read-for-ownership); measured no faster for
the attention's 16 MiB, so off by default.

Numerics: each element of C is a sum over K in order k = 0, 1, ..., each product added
by a fused multiply-add where the CPU has one (``llvm.fmuladd``: LLVM fuses where the
target has FMA) — the K blocks do not change it (a partial sum is stored to C and read
back exactly, and the next block goes on adding in order), nor does the thread count —
not BLAS's order or blocking, so results equal numpy.matmul's within float rounding of a
K-term sum (about K * eps * sum |a_k b_k|), not bit for bit.

The runner follows the copy kernel's calling convention (:func:`.jit.compile_runner`:
``run(cp, d, s, itp, pp, tok)``), with a float token: ``cp`` the control block
(C_NWORK: the units, batch-major, then column block, then row block), ``d`` and ``s``
unused (the operands' addresses are in the parameters), ``itp`` the parameters
(:data:`G_M` ... :data:`G_C`, then :data:`ITEM_WORDS` offsets per batch item: the
part a plan keeps, :class:`ProductCall`), ``pp`` the
parameter vector :func:`.threads.execute` reads (its P_SCRATCH: each thread's scratch
bytes). It claims chunks of units on the kernel's pool (:func:`.threads.execute`) as
the other runners do. It is cached, loaded and compiled by :mod:`.builds` as the family
:data:`FAMILY`, unit 4 (float32) or 8 (float64); nothing here imports numba.
"""

from __future__ import annotations

import ctypes
import math
from dataclasses import field
from typing import Any

import numpy as np

from ..records import record

from .abi import C_SCRATCH, C_SLOT, P_LEN, P_SCRATCH
from .pages import untouched
from .plan import LINE, VECTOR_BYTES
from .threads import execute_units

__all__ = ["FAMILY", "FLOAT_TOKENS", "MAX_INNER", "NONTEMPORAL_MIN_BYTES", "runner",
           "blocking", "tile_shape", "streams", "ProductCall", "product_call", "run_product",
           "batched_product"]

FAMILY = "gemm"
# The runner's unit size -> its data's type (the token it is compiled for).
FLOAT_TOKENS = {4: np.float32, 8: np.float64}
# The parameters at itp (int64): M, N, K; A's row and summed strides, B's summed and
# column strides, C's row stride (elements: the caller checks they are whole elements);
# panels per batch item; 1 for non-temporal stores of the full tiles; the element's
# bytes; panels per column block, column blocks; rows per row block, row blocks; steps
# per K block (:func:`blocking`); the addresses of A's, B's and C's first elements;
# then ITEM_WORDS words per batch item.
(G_M, G_N, G_K, G_A_ROW, G_A_INNER, G_B_INNER, G_B_COLUMN, G_C_ROW, G_PANELS, G_NT,
 G_ITEM, G_BLOCK_PANELS, G_COLUMN_BLOCKS, G_ROW_BLOCK, G_ROW_BLOCKS,
 G_INNER_BLOCK, G_A, G_B, G_C) = range(19)
_HEAD = 19
ITEM_WORDS = 3          # A[b]'s, B[b]'s and C[b]'s offsets (bytes) from G_A, G_B, G_C
# The longest summed dim: a thread's packed panels (K x NR elements each, 64 KiB of
# float32 at K = 256 on AVX-512, 256 KiB at 1024) stay in L2, a K block of the one being
# read in L1. Measured ahead of numpy.matmul to here (docs/performance.md, "The chain's
# product"); longer K goes to numpy's matmul.
MAX_INNER = 1024
# Results this large may get their full tiles as non-temporal stores where C's rows
# start on lines (:func:`streams`; only where the caller asks: batched_product's
# ``streaming``, off by default — 2.32-4.76 ms against regular stores' 2.40-3.24 for
# the attention's 16 MiB, five alternated samples each).
NONTEMPORAL_MIN_BYTES = 8 << 20
ROW_TILE = 6            # MR: rows of a register tile


def tile_shape(itemsize: int, vector_bytes: int = VECTOR_BYTES) -> tuple[int, int]:
    """(MR, NR): the register tile's rows and columns for ``itemsize``-byte floats at the
    runners' vector width (:data:`.plan.VECTOR_BYTES`, or ``vector_bytes``): 6 rows of 4
    vectors with 32 vector registers (AVX-512: 24 accumulators, 4 panel vectors, a
    broadcast), 6 of 2 with 16 (AVX2). The compiled tile and the Python side both read
    it."""
    lanes = vector_bytes // itemsize
    vectors = 4 if vector_bytes >= 64 else 2
    return ROW_TILE, lanes * vectors


# Blocking (a product with a long K or many rows, e.g. einsum's chain ``b i j, j k, k l``
# at (64, 256, 256): one (16384, 256) @ (256, 256) product): the work unit is a block of
# rows of one batch item against a block of column panels; the thread that claims it packs
# the block's panels (unless they are the ones it packed last) and runs its rows' tiles
# panel by panel, K in blocks of at most INNER_BLOCK steps, so that the block of the
# panel a tile reads (INNER_BLOCK x NR: 32 KiB of float32) stays in L1 across the row
# block's tiles, and the row block's part of A (ROW_BLOCK_BYTES) in L2 across the panels.
# (Measured at one thread on (1, 16384, 256, 256), ratio to torch.matmul in the same
# process, alternated blocks: no blocking 0.70-0.75x; K blocks of 128 with 96-row blocks
# 0.91, with the k loop unrolled by two 1.00-1.01x; blocks of 64 or 256 steps, 96- or
# 192-row blocks within those runs' noise, 0.96-1.03x.)
INNER_BLOCK = 128
ROW_BLOCK_BYTES = 192 << 10
# The packed panels of a column block: at most this many bytes (all of B's N = 256
# columns at K = 256 float32: 256 KiB), at least one panel.
PACK_BYTES = 512 << 10
# Work units: at least this many a thread where the rows allow (blocks of rows cut
# smaller), for the threads to share even a single product.
UNITS_PER_THREAD = 4


def blocking(count: int, panels: int, m: int, k: int, itemsize: int, threads: int
             ) -> tuple[int, int, int]:
    """(panels a column block, rows a row block, steps a K block) for ``count`` products
    of ``m`` rows, ``panels`` panels and a summed dim of ``k`` on ``threads`` threads. The
    K blocks are equal (K = 256: two of 128, K = 160: two of 80); a row block a whole
    number of tiles, or all the rows."""
    mr, nr = tile_shape(itemsize)
    depth = max(k, 1)
    block_panels = max(1, min(panels, PACK_BYTES // (depth * nr * itemsize)))
    column_blocks = -(-panels // block_panels)
    row_block = max(mr, ROW_BLOCK_BYTES // (depth * itemsize) // mr * mr)
    wanted = -(-UNITS_PER_THREAD * threads // (count * column_blocks))
    if wanted > 1:
        # (whole tiles, rounded down: at least ``wanted`` blocks, or one a tile)
        row_block = min(row_block, max(mr, -(-m // wanted) // mr * mr))
    row_block = min(row_block, m)
    inner_blocks = -(-depth // INNER_BLOCK)
    return block_panels, row_block, -(-depth // inner_blocks)


def _scratch_bytes(k: int, itemsize: int, block_panels: int = 1) -> int:
    """A thread's scratch memory: the packed panels (block_panels of K x NR), then the
    edge tile (MR x NR), each a whole number of lines."""
    mr, nr = tile_shape(itemsize)
    panel = -(-max(k, 1) * nr * itemsize // LINE) * LINE
    return block_panels * panel + -(-mr * nr * itemsize // LINE) * LINE


# Placeholders: bound by jit.materialise() (the copy kernel's intrinsics, the loops'
# chunk claims) and by _bind (this module's) before anything is compiled.
_ld = _st = _ldb = _stb = _fetch_add = _home = _claim = _publish = _populate = None
_product_tile = _transpose_block = _product_columns = _product_rows = _product_lanes = None


def _run_gemm(cp, d, s, itp, pp, tok):
    """One thread's share of the work units (see the module's docstring)."""
    m, n, k = itp[G_M], itp[G_N], itp[G_K]
    a_row, a_inner = itp[G_A_ROW], itp[G_A_INNER]
    b_inner, b_column, c_row = itp[G_B_INNER], itp[G_B_COLUMN], itp[G_C_ROW]
    panels, nt, item = itp[G_PANELS], itp[G_NT], itp[G_ITEM]
    block_panels, column_blocks = itp[G_BLOCK_PANELS], itp[G_COLUMN_BLOCKS]
    row_block, row_blocks = itp[G_ROW_BLOCK], itp[G_ROW_BLOCKS]
    inner_block = itp[G_INNER_BLOCK]
    a_first, b_first, c_first = itp[G_A], itp[G_B], itp[G_C]
    nr = _product_columns(tok)              # NR elements (tile_shape's)
    lanes = _product_lanes(tok)             # elements of a vector
    mr = _product_rows(tok)                 # MR rows
    panel_bytes = max(k, 1) * nr * item     # a packed panel (a whole number of lines)
    per_item = column_blocks * row_blocks
    chunks = _home(cp)
    _populate(cp)
    done = m - m
    slot = done - 1
    # the column block whose panels are in this thread's scratch (none yet)
    packed_item = packed_block = slot
    while True:
        lo, hi, chunks = _claim(cp, chunks)
        if lo >= hi:
            break
        if slot < 0:                    # this thread's packed panels, then edge tile
            slot = cp[C_SCRATCH] + _fetch_add(cp, C_SLOT, 1) * pp[P_SCRATCH]
        edge = slot + block_panels * panel_bytes    # (on a line: _scratch_bytes)
        for w in range(lo, hi):
            b, rest = w // per_item, w % per_item
            block, r = rest // row_blocks, rest % row_blocks
            at = _HEAD + ITEM_WORDS * b
            a0, b0, c0 = a_first + itp[at], b_first + itp[at + 1], c_first + itp[at + 2]
            p_lo = block * block_panels
            p_hi = min(panels, p_lo + block_panels)
            if b != packed_item or block != packed_block:
                packed_item, packed_block = b, block
                for p in range(p_lo, p_hi):
                    # panel p at its place: packed[kk * nr + j] = B[kk, first + j], zero
                    # past N
                    packed = slot + (p - p_lo) * panel_bytes
                    cols = min(nr, n - p * nr)
                    source = b0 + p * nr * b_column * item
                    whole = 0
                    if b_inner == 1 and b_column != 1:
                        # B's columns contiguous (B^T's rows: ``b h s d`` read as (d, s)):
                        # blocks of lanes x lanes transposed in registers, K's whole blocks
                        whole = k - k % lanes
                        for g in range(0, nr, lanes):
                            inside = min(lanes, cols - g)   # B's columns here (<= 0: none)
                            for kk in range(0, whole, lanes):
                                if inside > 0:
                                    _transpose_block(packed + (kk * nr + g) * item, nr,
                                                     source + (g * b_column + kk) * item,
                                                     b_column, inside, tok)
                                else:               # past N: zeros, nothing of B read
                                    for t in range(kk, kk + lanes):
                                        for j in range(g, g + lanes):
                                            _stb(packed, t * nr + j, tok)
                    for kk in range(whole, k):
                        row = kk * nr
                        at = source + kk * b_inner * item
                        for j in range(cols):
                            _stb(packed, row + j, _ld(at, j * b_column, tok))
                        for j in range(cols, nr):
                            _stb(packed, row + j, tok)      # (tok: +0.0, the caller's)
            top = r * row_block
            bottom = min(m, top + row_block)
            for p in range(p_lo, p_hi):
                panel = slot + (p - p_lo) * panel_bytes
                first = p * nr
                cols = min(nr, n - first)
                # full tiles: rows [top, full), K in blocks of inner_block (the first
                # block stores the tile, later ones add theirs to it, read back from C)
                full = top + (bottom - top) // mr * mr if cols == nr else top
                for kb in range(0, max(k, 1), inner_block):    # (K = 0: one, storing 0)
                    depth = min(inner_block, k - kb)
                    stream = nt if kb + depth >= k else nt - nt    # the last block's stores
                    for i in range(top, full, mr):
                        _product_tile(a0 + (i * a_row + kb * a_inner) * item, a_row,
                                      a_inner, panel + kb * nr * item,
                                      c0 + (i * c_row + first) * item, c_row, depth, mr,
                                      stream, kb, tok)
                for i in range(full, bottom, mr):
                    # into the edge tile (nr a row, the whole K at once), then its part
                    # of C
                    rows = min(mr, bottom - i)
                    _product_tile(a0 + i * a_row * item, a_row, a_inner, panel, edge, nr,
                                  k, rows, nt - nt, nt - nt, tok)
                    for q in range(rows):
                        for j in range(cols):
                            _st(c0, (i + q) * c_row + first + j,
                                _ldb(edge, q * nr + j, tok))
        done += hi - lo
    _publish(cp, done)


def runner(u: int, family: str = FAMILY, compile: bool = True):
    """The batched-product runner for ``u``-byte floats (loaded from the disk cache when
    it is there): as :func:`.loops.runner`, which :mod:`.builds` calls it in place of."""
    from . import jit as jit_module      # (looked up per call: tests wrap it)

    if family != FAMILY:
        raise ValueError(f"no {family!r} runner here")
    if u not in FLOAT_TOKENS:
        raise ValueError(f"no {family!r} runner for {u}-byte units")
    _bind()
    return jit_module.compile_runner(_run_gemm, u, compile, token=FLOAT_TOKENS[u])


_bound = False          # the intrinsics and chunk claims are bound (by _bind)


def _bind() -> None:
    """Bind the loops' chunk claims and page population (numba's
    dispatchers, once :func:`.jit.materialise` has wrapped them) and
    :func:`define_tile` here, once (:func:`.jit.bind_once`)."""
    from . import jit as jit_module
    from . import loops

    jit_module.bind_once(globals(), lambda: {
        **define_tile(), "_home": loops._home, "_claim": loops._claim,
        "_publish": loops._publish, "_populate": loops._populate})


def define_tile() -> dict:
    """The register tile and the panel's transposes, as LLVM IR (numba cannot write a
    vector of floats):

    * ``_product_tile(a, a_row, a_inner, panel, c, c_row, k, rows, nt, tok)``: C's MR x
      NR tile at address ``c`` (rows ``c_row`` elements apart) = the sum over ``kk < k`` of
      A's column ``kk`` (row ``i`` at address ``a + (i * a_row + kk * a_inner)``
      elements, rows ``i >= rows`` read as row ``rows - 1``: never past A) times the
      packed panel's row ``kk`` (NR elements at ``panel + kk * NR`` elements, on a
      vector boundary). The MR x NV accumulators stay in registers for the whole sum;
      each element of A is loaded once and broadcast. ``nt`` nonzero: the rows are
      stored as non-temporal whole vectors (the caller vouches that they are aligned
      lines), else regular unaligned stores.
    * ``_transpose_block(dst, dst_row, src, src_row, rows, tok)``: the lanes x lanes
      block whose row ``i`` is the lanes elements at ``src + i * src_row`` elements
      (rows ``i >= rows`` zeros: the last row read in their place, never past it;
      ``rows`` >= 1), transposed: its column
      ``t`` stored as the vector at ``dst + t * dst_row`` elements (on a vector
      boundary) — log2(lanes) rounds of interleaving shuffles in registers.
    * ``_product_columns(tok)``, ``_product_rows(tok)``, ``_product_lanes(tok)``: NR, MR
      and a vector's elements for ``tok``'s type (:func:`tile_shape`)."""
    from llvmlite import ir
    from numba.core import types
    from numba.extending import intrinsic

    i32, i64 = ir.IntType(32), ir.IntType(64)

    def constant_of(value_of):
        @intrinsic
        def constant(typingctx, tok):
            def codegen(context, builder, signature, args):
                return ir.Constant(i64, value_of(signature.args[0].bitwidth // 8))
            return types.int64(tok), codegen
        return constant

    @intrinsic
    def _product_tile(typingctx, a, a_row, a_inner, panel, c, c_row, k, rows, nt, add,
                      tok):
        sig = types.void(*([types.int64] * 10), tok)

        def codegen(context, builder, signature, args):
            a, a_row, a_inner, panel, c, c_row, k, rows, nt, add, _ = args
            scalar = context.get_value_type(signature.args[-1])
            itemsize = signature.args[-1].bitwidth // 8
            mr, nr = tile_shape(itemsize)
            lanes = VECTOR_BYTES // itemsize
            nv = nr // lanes
            vector = ir.VectorType(scalar, lanes)
            module = builder.module
            name = f"llvm.fmuladd.v{lanes}f{itemsize * 8}"
            fmuladd = module.globals.get(name) or ir.Function(
                module, ir.FunctionType(vector, [vector] * 3), name=name)
            size = ir.Constant(i64, itemsize)

            def address(base, elements):
                return builder.add(base, builder.mul(elements, size))

            def pointer(at, llty):
                return builder.inttoptr(at, llty.as_pointer())

            last = builder.sub(rows, ir.Constant(i64, 1))
            a_rows = []
            for i in range(mr):         # row i, clamped to the last row there is
                index = ir.Constant(i64, i)
                index = builder.select(builder.icmp_signed("<", index, rows), index, last)
                a_rows.append(address(a, builder.mul(index, a_row)))
            a_step = builder.mul(a_inner, size)
            panel_step = ir.Constant(i64, nr * itemsize)
            c_step = builder.mul(c_row, size)
            entry = builder.block
            reload = builder.append_basic_block("tile.reload")
            head = builder.append_basic_block("tile.head")
            body = builder.append_basic_block("tile.body")
            done = builder.append_basic_block("tile.done")
            builder.cbranch(builder.icmp_signed("!=", add, ir.Constant(i64, 0)), reload,
                            head)
            builder.position_at_end(reload)     # add: the sums start from C's tile
            loaded = []
            for i in range(mr):
                row = builder.add(c, builder.mul(ir.Constant(i64, i), c_step))
                for j in range(nv):
                    loaded.append(builder.load(pointer(builder.add(
                        row, ir.Constant(i64, j * VECTOR_BYTES)), vector), align=itemsize))
            builder.branch(head)
            builder.position_at_end(head)
            kk = builder.phi(i64)
            kk.add_incoming(ir.Constant(i64, 0), entry)
            kk.add_incoming(ir.Constant(i64, 0), reload)
            zero = ir.Constant(vector, [ir.Constant(scalar, 0.0)] * lanes)
            sums = []
            for index in range(mr * nv):
                acc = builder.phi(vector)
                acc.add_incoming(zero, entry)
                acc.add_incoming(loaded[index], reload)
                sums.append(acc)
            undefined = ir.Constant(vector, ir.Undefined)
            splat = ir.Constant(ir.VectorType(i32, lanes), [0] * lanes)

            def step(kk, sums):
                """The sums after step kk: A's column kk times the panel's row kk."""
                row_at = builder.add(panel, builder.mul(kk, panel_step))
                columns = [builder.load(pointer(builder.add(row_at, ir.Constant(
                    i64, j * VECTOR_BYTES)), vector), align=VECTOR_BYTES)
                    for j in range(nv)]
                a_offset = builder.mul(kk, a_step)
                updated = []
                for i in range(mr):
                    element = builder.load(pointer(builder.add(a_rows[i], a_offset),
                                                   scalar), align=itemsize)
                    broadcast = builder.shuffle_vector(
                        builder.insert_element(undefined, element, ir.Constant(i32, 0)),
                        undefined, splat)
                    for j in range(nv):
                        updated.append(builder.call(fmuladd, [broadcast, columns[j],
                                                              sums[i * nv + j]]))
                return updated
            # two steps an iteration while two remain, then the last one if K is odd
            # (the order of the sum is k = 0, 1, ... either way)
            one = ir.Constant(i64, 1)
            tail = builder.append_basic_block("tile.tail")
            last_step = builder.append_basic_block("tile.last")
            builder.cbranch(builder.icmp_signed("<", builder.add(kk, one), k), body, tail)
            builder.position_at_end(body)
            updated = step(builder.add(kk, one), step(kk, sums))
            for acc, value in zip(sums, updated):
                acc.add_incoming(value, body)
            kk.add_incoming(builder.add(kk, ir.Constant(i64, 2)), body)
            builder.branch(head)
            builder.position_at_end(tail)
            builder.cbranch(builder.icmp_signed("<", kk, k), last_step, done)
            builder.position_at_end(last_step)
            finished = step(kk, sums)
            builder.branch(done)
            builder.position_at_end(done)
            results = []
            for acc, value in zip(sums, finished):
                result = builder.phi(vector)
                result.add_incoming(acc, tail)
                result.add_incoming(value, last_step)
                results.append(result)
            sums = results
            streaming = builder.icmp_signed("!=", nt, ir.Constant(i64, 0))
            line_mark = module.add_metadata([ir.Constant(i32, 1)])
            with builder.if_else(streaming) as (nontemporal, regular):
                for stream in (True, False):
                    with (nontemporal if stream else regular):
                        for i in range(mr):
                            row = builder.add(c, builder.mul(ir.Constant(i64, i), c_step))
                            for j in range(nv):
                                store = builder.store(sums[i * nv + j], pointer(
                                    builder.add(row, ir.Constant(i64, j * VECTOR_BYTES)),
                                    vector), align=VECTOR_BYTES if stream else itemsize)
                                if stream:
                                    store.set_metadata("nontemporal", line_mark)
            return context.get_dummy_value()
        return sig, codegen

    @intrinsic
    def _transpose_block(typingctx, dst, dst_row, src, src_row, rows, tok):
        sig = types.void(*([types.int64] * 5), tok)

        def codegen(context, builder, signature, args):
            dst, dst_row, src, src_row, rows, _ = args
            scalar = context.get_value_type(signature.args[-1])
            itemsize = signature.args[-1].bitwidth // 8
            lanes = VECTOR_BYTES // itemsize
            vector = ir.VectorType(scalar, lanes)
            size = ir.Constant(i64, itemsize)
            zero = ir.Constant(vector, [ir.Constant(scalar, 0.0)] * lanes)
            last = builder.sub(rows, ir.Constant(i64, 1))
            block = []
            for row in range(lanes):    # rows past ``rows``: the last row again, zeroed
                index = ir.Constant(i64, row)
                inside = builder.icmp_signed("<", index, rows)
                index = builder.select(inside, index, last)
                at = builder.add(src, builder.mul(builder.mul(index, src_row), size))
                value = builder.load(builder.inttoptr(at, vector.as_pointer()),
                                     align=itemsize)
                block.append(builder.select(inside, value, zero))
            low = [x for pair in zip(range(lanes // 2), range(lanes, lanes + lanes // 2))
                   for x in pair]
            high = [x + lanes // 2 for x in low]
            masks = [ir.Constant(ir.VectorType(i32, lanes), m) for m in (low, high)]
            for _ in range(lanes.bit_length() - 1):     # log2(lanes) interleaving rounds
                mixed = []
                for row in range(lanes // 2):
                    first, second = block[row], block[row + lanes // 2]
                    mixed += [builder.shuffle_vector(first, second, mask) for mask in masks]
                block = mixed
            for row, value in enumerate(block):
                at = builder.add(dst, builder.mul(builder.mul(ir.Constant(i64, row),
                                                              dst_row), size))
                builder.store(value, builder.inttoptr(at, vector.as_pointer()),
                              align=VECTOR_BYTES)
            return context.get_dummy_value()
        return sig, codegen

    return {"_product_tile": _product_tile, "_transpose_block": _transpose_block,
            "_product_columns": constant_of(lambda u: tile_shape(u)[1]),
            "_product_rows": constant_of(lambda u: tile_shape(u)[0]),
            "_product_lanes": constant_of(lambda u: VECTOR_BYTES // u)}


def streams(daddr: int, nbytes: int, n: int, itemsize: int) -> bool:
    """Whether a result of ``nbytes`` at ``daddr`` with rows of ``n`` elements gets its
    full tiles as non-temporal stores: from :data:`NONTEMPORAL_MIN_BYTES`, the result
    64-byte aligned and its rows whole lines (then every full tile's vectors are
    aligned: NR elements are a whole number of vectors)."""
    return nbytes >= NONTEMPORAL_MIN_BYTES and daddr % LINE == 0 and \
        (n * itemsize) % LINE == 0


def _item_offsets(shape: tuple[int, ...], strides: tuple[int, ...]) -> np.ndarray:
    """The offsets (bytes) of a batch's items from its first (C order over ``shape``;
    strides in bytes, any sign, 0 for a broadcast dim)."""
    if len(shape) == 1:
        return np.arange(shape[0], dtype=np.int64) * strides[0]
    offsets = np.zeros(shape, np.int64)
    for axis, (count, stride) in enumerate(zip(shape, strides)):
        if count > 1 and stride:
            place = [1] * len(shape)
            place[axis] = count
            offsets += (np.arange(count, dtype=np.int64) * stride).reshape(place)
    return offsets.reshape(-1)


@record
class ProductCall:
    """The batched product's parameters for one layout of its operands at one thread
    count, found once (:func:`product_call`) so that a call adds only where the arrays
    are (:func:`run_product`): the operands' shapes and strides (bytes) it was made for,
    the result's shape, the thread count, and the runner's parameter words but for
    the operands' addresses (each batch item's A, B and C are offsets from them)."""
    left_shape: tuple[int, ...]
    left_strides: tuple[int, ...]
    right_shape: tuple[int, ...]
    right_strides: tuple[int, ...]
    out_shape: tuple[int, ...]
    threads: int
    streaming: bool
    work: int                       # work units (C_NWORK)
    # (read only) _HEAD words, then ITEM_WORDS an item; the ctypes parameter vector
    # (P_SCRATCH): neither compared nor shown (the fields above decide them)
    words: np.ndarray = field(compare=False, repr=False)
    parameters: Any = field(compare=False, repr=False)

    def fits(self, left: np.ndarray, right: np.ndarray, threads: int) -> bool:
        """Whether ``left`` and ``right`` have the layout this call was made for, at
        ``threads`` threads."""
        return threads == self.threads and left.strides == self.left_strides and \
            right.strides == self.right_strides and left.shape == self.left_shape and \
            right.shape == self.right_shape


def product_call(left: np.ndarray, right: np.ndarray, itemsize: int, threads: int,
                 streaming: bool = False) -> ProductCall:
    """:func:`run_product`'s parameters for ``left @ right`` on ``threads`` threads:
    ``left`` (*batch, M, K), ``right`` (*batch, K, N), ``itemsize``-byte floats, any
    strides that are whole elements (negative, zero), the batch shapes equal, K <=
    :data:`MAX_INNER`; ValueError where they are not. ``streaming``: the full tiles go
    out as non-temporal stores where :func:`streams` allows (measured no faster for the
    attention product's 16 MiB: off by default)."""
    *batch, m, k = left.shape
    n = right.shape[-1]
    if k > MAX_INNER:
        raise ValueError(f"a summed dim of {k} (at most {MAX_INNER})")
    batch = tuple(batch)
    if batch != right.shape[:-2] or right.shape[-2] != k:
        raise ValueError("the operands' shapes do not make a product")
    a_row, a_inner = left.strides[-2:]
    b_inner, b_column = right.strides[-2:]
    if a_row % itemsize or a_inner % itemsize or b_inner % itemsize or \
            b_column % itemsize:
        raise ValueError("strides that are not whole elements")
    panels = -(-n // tile_shape(itemsize)[1])
    count = math.prod(batch)
    words = np.zeros(_HEAD + ITEM_WORDS * count, np.int64)
    block_panels, row_block, inner_block = blocking(count, panels, m, k, itemsize, threads)
    column_blocks = -(-panels // block_panels)
    row_blocks = -(-m // row_block)
    words[:_HEAD] = (m, n, k, a_row // itemsize, a_inner // itemsize, b_inner // itemsize,
                     b_column // itemsize, n, panels, 0, itemsize, block_panels,
                     column_blocks, row_block, row_blocks, inner_block, 0, 0, 0)
    if batch:
        items = words[_HEAD:].reshape(count, ITEM_WORDS)
        items[:, 0] = _item_offsets(batch, left.strides[:-2])
        items[:, 1] = _item_offsets(batch, right.strides[:-2])
        items[:, 2] = np.arange(count, dtype=np.int64) * (m * n * itemsize)
    words.flags.writeable = False
    parameters = (ctypes.c_int64 * P_LEN)()
    parameters[P_SCRATCH] = _scratch_bytes(k, itemsize, block_panels)
    return ProductCall(left.shape, left.strides, right.shape, right.strides,
                       (*batch, m, n), threads, streaming,
                       count * column_blocks * row_blocks, words, parameters)


def run_product(run, call: ProductCall, left: np.ndarray, right: np.ndarray,
                out: np.ndarray) -> None:
    """``out[...] = left @ right`` by the compiled ``run`` (:func:`runner`, for their
    dtype) with ``call``'s parameters (:func:`product_call` of operands laid out as
    these: the caller sees to it, :meth:`ProductCall.fits`); ``out`` a writeable
    C-contiguous array of ``call``'s result shape and the operands' dtype, not
    overlapping either."""
    if out.shape != call.out_shape or not out.flags.c_contiguous:
        raise ValueError(f"the operands' shapes make a {call.out_shape} result, not a "
                         f"C-contiguous {out.shape} one")
    if out.size == 0:
        return
    daddr = out.__array_interface__["data"][0]
    words = call.words.copy()
    words[G_A] = left.__array_interface__["data"][0]
    words[G_B] = right.__array_interface__["data"][0]
    words[G_C] = daddr
    populate = 0
    if call.streaming and streams(daddr, out.nbytes, call.out_shape[-1], out.itemsize):
        words[G_NT] = 1
        # A fresh destination streamed to has its pages populated first, split over
        # the threads (the row assembly's way).
        populate = out.nbytes if untouched(daddr, out.nbytes) else 0
    execute_units(run, call.work, call.threads, words, words.__array_interface__["data"][0],
                  daddr, populate_bytes=populate, pp=call.parameters)


def batched_product(run, left: np.ndarray, right: np.ndarray, out: np.ndarray,
                    threads: int, streaming: bool = False) -> None:
    """``out[...] = left @ right`` by the compiled ``run`` (:func:`runner`, for their
    dtype) on ``threads`` threads (the kernel's pool): :func:`product_call`'s operands,
    ``out`` a writeable C-contiguous (*batch, M, N) array of the same float dtype, not
    overlapping either. ``streaming``: as :func:`product_call`'s."""
    if out.size == 0:
        return
    call = product_call(left, right, out.itemsize, threads, streaming)
    run_product(run, call, left, right, out)
