"""The LLVM-level building blocks of the loops, as numba intrinsics.

Raw loads and stores in three alias scopes (source, destination, staging buffer: never
aliasing each other, which lets LLVM vectorise without overlap checks), whole-line
non-temporal stores, the register-tile transpose (Eklundh's shuffle stages, whole
destination lines out), the 8-row transpose of staged transposes and the line gathered
from their staging buffer, the 2-4 way interleave, prefetch, atomics, a fence, a
spin-wait hint, the cycle counter, and calls by address (libc's madvise; a runner, for
the pool's spinning workers). :func:`define_intrinsics` imports numba and llvmlite and
builds them; :func:`.jit.materialise` calls it once and binds the result in the loops'
module under the names the loops use (``_ld``, ``_st``, ``_tile``, ...), with the table
of where _stage8 puts each column (:func:`stage_words_table`, as ``_STAGE_WORDS``).
"""

from __future__ import annotations

import platform

import numpy as np

from .pages import MADV_POPULATE_WRITE
from .plan import LINE, SIMD_TILE, SIMD_TILE_G2, VECTOR_BYTES

__all__ = ["define_intrinsics", "stage_words_table"]

# x86 has a spin-wait hint (pause); other machines spin without one.
_X86 = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686", "x86")

# Tiles of more rows than the 32 vector registers hold (uint8) are transposed in blocks of
# this many rows, each parked on the stack while the next is done (see _tile).
_PARK_ROWS = 16

# The order in which _stage8 loads its 8 source rows: bit-reversed, so that after its three
# interleave rounds every word (8 units) holds rows 0..7 of one column, in order.
_STAGE8_ROW_ORDER = (0, 4, 2, 6, 1, 5, 3, 7)


def interleave_mask(n: int, k: int, high: bool) -> list[int]:
    """The shuffle of two n-byte vectors a, b (b's bytes numbered n..2n-1) that
    interleaves their k-byte elements from the low (or ``high``) half of each lane of
    max(16, 2k) bytes: x86's unpack for k < 16 (one instruction, lane-local, on SSE2, AVX2
    and AVX-512), a 16- or 32-byte block shuffle (one instruction; free on a pair of
    32-byte registers) above."""
    lane = max(16, 2 * k)
    mask = []
    for first in range(0, n, lane):
        base = first + (lane // 2 if high else 0)
        for e in range(lane // 2 // k):
            mask += [base + e * k + x for x in range(k)]
            mask += [n + base + e * k + x for x in range(k)]
    return mask


def stage_rounds(u: int) -> list[tuple[list[int], list[int]]]:
    """_stage8's three rounds for u-byte units: (low, high) interleave masks of elements of
    u, 2u and 4u bytes; round r pairs vector q with q + 4 (q < 4) into 2q and 2q + 1."""
    return [(interleave_mask(LINE, k, False), interleave_mask(LINE, k, True))
            for k in (u, 2 * u, 4 * u)]


def stage_word_offsets(u: int) -> list[int]:
    """Byte offset, in the 8 lines _stage8 stores, of the word (8 units: rows 0..7 in
    order) of each of the LINE // u source columns. Found by running the rounds on
    labels, so it cannot disagree with them; raises if some word is not one column's 8
    rows in order."""
    cols = LINE // u
    rows = [[(r, b // u, b % u) for b in range(LINE)] for r in _STAGE8_ROW_ORDER]
    for lo, hi in stage_rounds(u):
        new = [None] * 8
        for q in range(4):
            both = rows[q] + rows[q + 4]
            new[2 * q] = [both[i] for i in lo]
            new[2 * q + 1] = [both[i] for i in hi]
        rows = new
    flat = [x for row in rows for x in row]
    offsets = [0] * cols
    for w in range(0, 8 * LINE, 8 * u):
        word = flat[w:w + 8 * u]
        c = word[0][1]
        if word != [(r, c, b) for r in range(8) for b in range(u)]:
            raise AssertionError(f"_stage8 for {u}-byte units: the word at {w} is not a column")
        offsets[c] = w
    return offsets


def stage_words_table(units) -> np.ndarray:
    """loops._stage_word's table: row u (one of the unit sizes ``units``), column
    c < LINE // u: stage_word_offsets(u). Bound with the intrinsics (not built at import:
    a millisecond); numba compiles it in as a constant."""
    table = np.zeros((max(units) + 1, LINE), dtype=np.int64)
    for u in units:
        table[u, :LINE // u] = stage_word_offsets(u)
    return table

# Vector width (bytes) -> unit sizes whose register tiles (_tile) and 2-4 way interleaves
# (_weave) are shuffled 16-byte lane by lane (unpack_rounds, in_lanes): on 32-byte
# vectors, bytes and 2-byte units (float32 tiles were slower through unpack rounds).
_LANE_SHUFFLE_UNITS = {32: (1, 2)}


def define_intrinsics() -> dict:
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

    def store_codegen(space):
        # (addr, idx, val, ...): val stored at addr + idx units, in ``space``.
        def codegen(context, builder, signature, args):
            llty = context.get_value_type(signature.args[2])
            p = builder.gep(ptr(builder, args[0], llty), [args[1]])
            st = builder.store(args[2], p, align=signature.args[2].bitwidth // 8)
            mark(st, builder.module, space)
            return context.get_dummy_value()
        return codegen

    def make_store(space):
        @intrinsic
        def store(typingctx, addr, idx, val):
            return types.void(types.int64, types.int64, val), store_codegen(space)
        return store

    @intrinsic(prefer_literal=True)
    def _put(typingctx, addr, idx, val, staged):
        """A store to the staging buffer (``staged``, a literal: typed apart) or the
        destination: one call site in the loops for either scope."""
        if not isinstance(staged, types.BooleanLiteral):
            return None
        space = "stage" if staged.literal_value else "dst"
        return types.void(types.int64, types.int64, val, staged), store_codegen(space)

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

    def make_prefetch(locality: int, doc: str):
        @intrinsic
        def prefetch(typingctx, addr):
            sig = types.void(types.int64)

            def codegen(context, builder, signature, args):
                i8p = ir.IntType(8).as_pointer()
                fn = cgutils.get_or_insert_function(
                    builder.module, ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]),
                    "llvm.prefetch.p0i8")
                builder.call(fn, [builder.inttoptr(args[0], i8p), ir.Constant(i32, 0),
                                  ir.Constant(i32, locality), ir.Constant(i32, 1)])
                return context.get_dummy_value()
            return sig, codegen
        prefetch.__doc__ = doc
        return prefetch

    # LLVM's locality 3 is x86's prefetcht0 (into L1), 2 is prefetcht1 (into L2).
    _prefetch = make_prefetch(3, "Hint: the line at addr will be read soon (into L1).")
    _prefetch_l2 = make_prefetch(2, "Hint: the line at addr will be read soon (into L2).")

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
    def _cas(typingctx, block, field, expected, new):
        """Atomically: if block[field] == expected, set it to new (sequentially
        consistent). Returns the value found."""
        sig = types.int64(block, types.int64, types.int64, types.int64)

        def codegen(context, builder, signature, args):
            p = builder.gep(args[0], [args[1]])
            pair = builder.cmpxchg(p, args[2], args[3], "seq_cst", "seq_cst")
            return builder.extract_value(pair, 0)
        return sig, codegen

    @intrinsic
    def _load_acquire(typingctx, block, field):
        """block[field], read atomically: no later read or write of this thread moves
        before it."""
        sig = types.int64(block, types.int64)

        def codegen(context, builder, signature, args):
            return builder.load_atomic(builder.gep(args[0], [args[1]]), "acquire", 8)
        return sig, codegen

    @intrinsic
    def _store_release(typingctx, block, field, val):
        """block[field] = val, written atomically after every earlier read and write of
        this thread."""
        sig = types.void(block, types.int64, types.int64)

        def codegen(context, builder, signature, args):
            builder.store_atomic(args[2], builder.gep(args[0], [args[1]]), "release", 8)
            return context.get_dummy_value()
        return sig, codegen

    @intrinsic
    def _int64s_at(typingctx, addr):
        """The int64 array at address addr, as a pointer (for carray)."""
        sig = types.CPointer(types.int64)(types.int64)

        def codegen(context, builder, signature, args):
            return builder.inttoptr(args[0], ir.IntType(64).as_pointer())
        return sig, codegen

    @intrinsic
    def _address(typingctx, pointer):
        """The address a pointer holds."""
        sig = types.int64(pointer)

        def codegen(context, builder, signature, args):
            return builder.ptrtoint(args[0], ir.IntType(64))
        return sig, codegen

    @intrinsic
    def _pause(typingctx):
        """A spin-wait hint (x86's pause: the core yields to its sibling and leaves the
        loop without a memory-order flush); nothing elsewhere."""
        sig = types.void()

        def codegen(context, builder, signature, args):
            if _X86:
                fn = cgutils.get_or_insert_function(
                    builder.module, ir.FunctionType(ir.VoidType(), []),
                    "llvm.x86.sse2.pause")
                builder.call(fn, [])
            return context.get_dummy_value()
        return sig, codegen

    @intrinsic
    def _cycles(typingctx):
        """x86's time-stamp counter; 0 on other machines (LLVM reads arm64's from a
        register user code may not be allowed to read: the workers do not spin there)."""
        sig = types.int64()

        def codegen(context, builder, signature, args):
            if not _X86:
                return ir.Constant(ir.IntType(64), 0)
            fn = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(ir.IntType(64), []), "llvm.readcyclecounter")
            return builder.call(fn, [])
        return sig, codegen

    @intrinsic
    def _call_runner(typingctx, fn, unit, cp, d, s, itp, pp):
        """Call the runner at address fn (compiled for ``unit``-byte units, 1, 2, 4 or 8:
        its token argument has that width) with (cp, d, s, itp, pp, 0)."""
        sig = types.void(types.int64, types.int64, types.int64, types.int64, types.int64,
                         types.int64, types.int64)

        def codegen(context, builder, signature, args):
            i64 = ir.IntType(64)
            i64p = i64.as_pointer()
            f, u, cp, d, s, itp, pp = args
            for width in (1, 2, 4, 8):
                tok = ir.IntType(8 * width)
                fnty = ir.FunctionType(ir.VoidType(), [i64p, i64, i64, i64p, i64p, tok])
                with builder.if_then(builder.icmp_signed("==", u, ir.Constant(i64, width))):
                    builder.call(builder.inttoptr(f, fnty.as_pointer()),
                                 [builder.inttoptr(cp, i64p), d, s, builder.inttoptr(itp, i64p),
                                  builder.inttoptr(pp, i64p), ir.Constant(tok, 0)])
            return context.get_dummy_value()
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
    def _stack_bytes(typingctx, nbytes):
        """The address of nbytes in the calling function's stack frame, LINE-aligned:
        valid until that function returns. Call it outside loops (each call grows the
        frame)."""
        sig = types.int64(types.int64)

        def codegen(context, builder, signature, args):
            mem = builder.alloca(ir.IntType(8), size=args[0])
            mem.align = LINE
            return builder.ptrtoint(mem, ir.IntType(64))
        return sig, codegen

    @intrinsic
    def _stack_zeros(typingctx, n):
        """n int64 zeros in the calling function's stack frame (a pointer for carray),
        valid until it returns; as _stack_bytes, outside loops."""
        sig = types.CPointer(types.int64)(types.int64)

        def codegen(context, builder, signature, args):
            i64 = ir.IntType(64)
            mem = builder.alloca(i64, size=args[0])
            cgutils.memset(builder, mem, builder.mul(args[0], ir.Constant(i64, 8)), 0)
            return mem
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

    def lane_masks(n):
        """For vectors of n elements in two 16-byte lanes of e = n/2: the unpacks of two
        rows (low and high halves of each lane, interleaved) and the pairs of lanes (the
        first row's lane 0 or 1, then the second's)."""
        e = n // 2
        lo = [x for lane in (0, e) for k in range(e // 2) for x in (lane + k, n + lane + k)]
        hi = [x for lane in (0, e) for k in range(e // 2, e)
              for x in (lane + k, n + lane + k)]
        return [ir.Constant(ir.VectorType(i32, n), m) for m in (
            lo, hi, list(range(e)) + list(range(n, n + e)),
            list(range(e, n)) + list(range(n + e, 2 * n)))]

    def unpack_rounds(builder, rows, masks):
        """e vectors whose 16-byte lanes are e x e blocks, transposed lane by lane:
        log2(e) rounds that interleave the elements of rows i and i + e/2 into rows 2i
        and 2i + 1 (one unpack instruction each) leave every block transposed, its rows
        in order."""
        e = len(rows)
        for _ in range(e.bit_length() - 1):
            new = [None] * e
            for i in range(e // 2):
                new[2 * i] = builder.shuffle_vector(rows[i], rows[i + e // 2], masks[0])
                new[2 * i + 1] = builder.shuffle_vector(rows[i], rows[i + e // 2], masks[1])
            rows = new
        return rows

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
        ka, kb = (SIMD_TILE if g == 1 else SIMD_TILE_G2)[u]

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

            # A block of rows parked in a stack buffer while the next is done: a real
            # round trip (the buffer's pointer comes back through an empty asm that
            # clobbers memory), where LLVM spilled every row around every stage.
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

            registers = kb * -(-ka * g * u // VECTOR_BYTES)
            if g == 1 and u in _LANE_SHUFFLE_UNITS.get(VECTOR_BYTES, ()):
                # Invariant: ka * u == 32, one vector per source row (AVX2's tiles).
                # Each ka x ka square is two halves of e = 16/u rows, each transposed
                # within its 16-byte lanes by unpack rounds (the first half parked
                # meanwhile when it takes 16 registers), then paired by one lane shuffle
                # per output row: one instruction per shuffle, where LLVM lowered
                # Eklundh's byte and word stages to two or three (8192² transposes:
                # uint8 1.1x, uint16 1.14x).
                e = 16 // u
                masks = lane_masks(ka)

                def lane_square(first):
                    a = unpack_rounds(builder, load_rows(first, first + e), masks)
                    if e >= _PARK_ROWS:
                        a = parked(a)
                    b = unpack_rounds(builder, load_rows(first + e, first + 2 * e), masks)
                    if e >= _PARK_ROWS:
                        a = unpark(a, e)
                    return ([builder.shuffle_vector(a[j], b[j], masks[2]) for j in range(e)]
                            + [builder.shuffle_vector(a[j], b[j], masks[3])
                               for j in range(e)])

                squares = [lane_square(q * ka) for q in range(kb // ka)]
            # more rows than vector registers, in squares taller than a parked block
            elif registers > (32 if VECTOR_BYTES == 64 else 16) and ka > _PARK_ROWS:
                # kb rows (uint8: 64) do not fit the 32 vector registers, and LLVM
                # spilled them all around: blocks of rows are transposed within
                # themselves in turn (the stages with strides below the block's
                # height), each parked while the next is done, then paired by the
                # stage with the block's height; recursively from blocks of _PARK_ROWS
                # rows (uint8 8192^2: 7% from halves, 3% more from quarters).
                def block(first, n):
                    if n <= _PARK_ROWS:
                        return eklundh(builder, load_rows(first, first + n), ka, g,
                                       [n >> b for b in range(1, n.bit_length())])
                    h = n // 2
                    a = parked(block(first, h))
                    b = block(first + h, h)
                    return eklundh(builder, unpark(a, h) + b, ka, g, [h])

                squares = [block(q * ka, ka) for q in range(kb // ka)]
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

    @intrinsic
    def _stage8(typingctx, baddr, saddr, sstride, split, jump, tok):
        """8 source rows of LINE bytes (row r at saddr + r*sstride, plus ``jump`` from
        row ``split`` on; any alignment) transposed into the 8 lines at baddr (aligned):
        the word (8 units of tok's size) of column c, its rows 0..7 in order, at byte
        stage_word_offsets(unit)[c]. Three rounds of interleaves (stage_rounds), 24
        shuffles for 512 bytes."""
        sig = types.void(types.int64, types.int64, types.int64, types.int64, types.int64,
                         tok)
        u = tok.bitwidth // 8

        def codegen(context, builder, signature, args):
            ba, sa, ss, sp, jp = args[:5]
            vt = ir.VectorType(ir.IntType(8), LINE)
            zero = ir.Constant(jp.type, 0)
            rows = []
            for r in _STAGE8_ROW_ORDER:
                rc = ir.Constant(ss.type, r)
                a = builder.add(sa, builder.add(builder.mul(rc, ss), builder.select(
                    builder.icmp_signed(">=", rc, sp), jp, zero)))
                v = builder.load(ptr(builder, a, vt), align=1)
                mark(v, builder.module, "src")
                rows.append(v)
            for lo, hi in stage_rounds(u):
                mlo = ir.Constant(ir.VectorType(i32, LINE), lo)
                mhi = ir.Constant(ir.VectorType(i32, LINE), hi)
                new = [None] * 8
                for q in range(4):
                    new[2 * q] = builder.shuffle_vector(rows[q], rows[q + 4], mlo)
                    new[2 * q + 1] = builder.shuffle_vector(rows[q], rows[q + 4], mhi)
                rows = new
            bp = ptr(builder, ba, vt)
            for q in range(8):
                st = builder.store(rows[q], builder.gep(bp, [ir.Constant(i32, q)]),
                                   align=LINE)
                mark(st, builder.module, "stage")
            return context.get_dummy_value()
        return sig, codegen

    @intrinsic
    def _gather_nt(typingctx, daddr, baddr, gstride, tok):
        """The line at daddr (64-aligned), stored non-temporally, from the LINE // (8 *
        unit) words (8 units each, 8-aligned) at baddr + k*gstride: 8 * LINE / (8 * unit)
        rows of one column of a staged transpose."""
        sig = types.void(types.int64, types.int64, types.int64, tok)
        wq = tok.bitwidth // 8                  # int64s per word (8 units of u bytes)

        def codegen(context, builder, signature, args):
            da, ba, gs = args[:3]
            i64 = ir.IntType(64)
            wt = ir.VectorType(i64, wq)
            words = []
            for k in range(LINE // (8 * wq)):
                a = builder.add(ba, builder.mul(gs, ir.Constant(gs.type, k)))
                w = builder.load(ptr(builder, a, wt), align=8)
                mark(w, builder.module, "stage")
                words.append(w)
            line = concat(builder, words)
            st = builder.store(line, ptr(builder, da, line.type), align=LINE)
            mark(st, builder.module, "dst")
            st.set_metadata("nontemporal", builder.module.add_metadata([ir.Constant(i32, 1)]))
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

            def in_lanes(builder, rows, m):
                """The m interleaved lines of m source lines, 16-byte lane by lane: each
                half (a vector register) of a line is interleaved within its two
                16-byte lanes by shuffles that stay in them (pshufb), and only then are
                whole lanes put in order, one two-source lane shuffle per register. LLVM
                lowered the direct line-wide picks to lane-crossing permutes and blends
                with spills."""
                per = 16 // u                   # units per 16-byte lane
                half = 2 * per                  # units per register
                out = []                        # registers of the m lines, in order
                for q in range(lanes // half):
                    xs = [builder.shuffle_vector(r, r, ir.Constant(
                        ir.VectorType(i32, half), list(range(q * half, (q + 1) * half))))
                          for r in rows]
                    # ys[j]: lane h holds units j*per .. j*per+per-1 of the m*per units
                    # that interleave the source units of lane h.
                    ys = []
                    for j in range(m):
                        picks = [((j * per + l) % m, h * per + (j * per + l) // m)
                                 for h in range(2) for l in range(per)]
                        ys.append(gather(builder, xs, picks))
                    for k in range(m):
                        a, b = divmod(2 * k, m), divmod(2 * k + 1, m)
                        # flat lane f = h*m + j is lane h of ys[j]
                        lo = [a[0] * per + l for l in range(per)]
                        hi = [half + b[0] * per + l for l in range(per)]
                        out.append(builder.shuffle_vector(ys[a[1]], ys[b[1]], ir.Constant(
                            ir.VectorType(i32, half), lo + hi)))
                per_line = lanes // half
                return [concat(builder, out[k * per_line:(k + 1) * per_line])
                        for k in range(m)]

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
                lines = (in_lanes(builder, rows, m) if u in _LANE_SHUFFLE_UNITS.get(
                    VECTOR_BYTES, ()) else None)
                for k in range(m):
                    if lines is None:
                        picks = [((k * lanes + l) % m, (k * lanes + l) // m)
                                 for l in range(lanes)]
                        line = gather(builder, rows, picks)
                    else:
                        line = lines[k]
                    st = builder.store(line, builder.gep(dp, [ir.Constant(i32, k)]),
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
            "_stb": make_store("stage"), "_put": _put, "_line_nt": make_line_nt("src"),
            "_line_nt_b": make_line_nt("stage"), "_unit": _unit, "_sfence": _sfence,
            "_tile": _tile, "_prefetch": _prefetch, "_prefetch_l2": _prefetch_l2,
            "_fetch_add": _fetch_add, "_call_madvise": _call_madvise, "_touch": _touch,
            "_cas": _cas, "_load_acquire": _load_acquire, "_store_release": _store_release,
            "_pause": _pause, "_cycles": _cycles, "_call_runner": _call_runner,
            "_int64s_at": _int64s_at, "_address": _address,
            "_weave": make_weave("dst"), "_weave_b": make_weave("stage"),
            "_stack_bytes": _stack_bytes,
            "_stack_zeros": _stack_zeros, "_stage8": _stage8,
            "_gather_nt": _gather_nt}

