"""Sums over rows, compiled: each row of a (rows, n) float32 or float64 view whose rows
are contiguous, added in exactly numpy's order, so that the result is numpy's
``x.sum(axis=-1)`` bit for bit (and a mean, divided as numpy divides, numpy's mean).

numpy reduces a short row slowly (~43 ns a row of 56 float32: its iterator's outer loop
and the call of its inner loop per row, for 7 vector adds); the adds themselves are what
this runner keeps, one row after the other, with nothing between them.

numpy's order (``pairwise_sum`` in its ``loops_utils.h``, numpy 1.9 to 2.4; checked
against numpy's call by tests/test_reduce_rows.py, NaN, inf and -0.0 included): a row
of ``n`` elements is added

* ``n < 8``: one after the other from -0.0 (which keeps a -0.0 as it is);
* ``8 <= n <= 128``: in eight accumulators ``r[j]``, each starting at ``a[j]`` and adding
  ``a[j + 8], a[j + 16], ...`` up to ``n - n % 8``, combined as
  ``((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))``, then the rest one by one;
* ``n > 128``: the first ``n2 = n / 2 - (n / 2) % 8`` elements and the rest, each summed
  so, added (left + right);

and the reduction's result is ``0 + that`` (its output starts from the identity, +0.0:
a sum is never -0.0). The accumulators have the data's own type (float32 adds in
float32). The split for ``n > 128`` is the same for every row of a call: it is computed
once, here (:func:`pairwise_program`), as its leaves in order — each a block of at most
128 elements summed as above — and after each leaf the number of additions that
combine it with the partial sums before it (a post-order walk of numpy's recursion,
with a stack of partial sums). A block is added as one vector of eight lanes (the
eight accumulators: :func:`define_block_sums`); rows of one block each are summed four
(then two) at a time, so that their chains of vector adds overlap.

The runner follows the copy kernel's calling convention (:func:`.jit.compile_runner`:
``run(cp, d, s, itp, pp, tok)``, an unsigned-integer token of the unit's width, as the
pool's workers call runners), and runs on the kernel's threads (:func:`.threads.execute`)
as the runners of :mod:`.rowmax` do: ``cp`` the control block (its C_NWORK: the rows),
from which each thread claims chunks of rows, ``d`` the address of the first sum
(written every ``P_DSTRIDE`` elements), ``s`` the address of the first row's first
element, ``itp`` the call's parameters (:data:`P_N` ...), ``pp`` the program. (Until
2026-11-28 the rows were cut in slabs handed to a ThreadPoolExecutor, 27-45 us a
hand-off, the halves fixed beforehand.) It is cached, loaded and compiled by
:mod:`.builds` as the family :data:`FAMILY`, unit 4 (float32) or 8 (float64); nothing
here imports numba.
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np

from .threads import execute_units

__all__ = ["FAMILY", "FLOAT_TOKENS", "runner", "pairwise_program", "sum_rows"]

FAMILY = "row-sums"
# The runner's unit size -> its data's type (its token is the unsigned type as wide).
FLOAT_TOKENS = {4: np.float32, 8: np.float64}
# The call's parameters, at itp (int64): elements in a row, the source's row stride and
# the destination's stride (in elements), leaves in the program, 1 for a mean.
P_N, P_SSTRIDE, P_DSTRIDE, P_LEAVES, P_MEAN = range(5)
# The deepest stack of partial sums a program may need: numpy's recursion halves a row
# at each level, so 2**62 elements need fewer.
STACK_SLOTS = 64
BLOCK = 128                 # numpy's PW_BLOCKSIZE: rows this long are one leaf

# Placeholders: bound by jit.materialise() (the copy kernel's intrinsics) and by
# _bind_block_sum (this module's) before anything is compiled.
_ld = _st = _ldb = _stb = _stack_bytes = _block_sum = _block_sum_pair = _block_sum_quad = None
_home = _claim = _publish = _float_zero = _narrow = None


def _run_row_sums(cp, d, s, itp, pp, tok):
    """One thread's share of the row sums (see the module's docstring): work unit ``r``
    is row ``r``, its sum written at ``d[r * itp[P_DSTRIDE]]``; chunks of rows claimed
    from the control block ``cp`` (the copies' claims); a mean divided as numpy's mean
    divides its sum (in float64, rounded to the type) once the chunk's sums are in."""
    n, sstride, dstride = itp[P_N], itp[P_SSTRIDE], itp[P_DSTRIDE]
    leaves, mean = itp[P_LEAVES], itp[P_MEAN]
    zero = _float_zero(tok)      # +0.0 of the data's type, the reduction's identity
    negative_zero = -zero        # the start of a short leaf, as numpy's
    divisor = np.float64(n)
    stack = _stack_bytes(STACK_SLOTS * 8)       # partial sums of the leaves before
    chunks = _home(cp)
    done = n - n
    while True:
        lo, hi, chunks = _claim(cp, chunks)
        if lo >= hi:
            break
        if leaves == 1 and pp[1] >= 8:      # one block a row (8 to 128): no partial sums
            m = pp[1]
            row = lo
            while row + 3 < hi:     # four rows at a time: four chains of adds
                a, b, c, e = _block_sum_quad(s, row * sstride, m, sstride, zero)
                _st(d, row * dstride, zero + a)
                _st(d, (row + 1) * dstride, zero + b)
                _st(d, (row + 2) * dstride, zero + c)
                _st(d, (row + 3) * dstride, zero + e)
                row += 4
            while row + 1 < hi:     # two rows at a time: two chains of adds
                first, second = _block_sum_pair(s, row * sstride, (row + 1) * sstride, m,
                                                zero)
                _st(d, row * dstride, zero + first)
                _st(d, (row + 1) * dstride, zero + second)
                row += 2
            if row < hi:
                _st(d, row * dstride, zero + _block_sum(s, row * sstride, m, zero))
        else:
            for row in range(lo, hi):
                base = row * sstride
                depth = n - n        # (a runtime zero: an int64 like the others)
                for leaf in range(leaves):
                    start = base + pp[3 * leaf]
                    m = pp[3 * leaf + 1]
                    if m < 8:
                        v = negative_zero
                        for i in range(m):
                            v += _ld(s, start + i, zero)
                    else:
                        v = _block_sum(s, start, m, zero)
                    for _ in range(pp[3 * leaf + 2]):   # left (the stack's top) + right
                        depth -= 1
                        v = _ldb(stack, depth, zero) + v
                    _stb(stack, depth, v)
                    depth += 1
                _st(d, row * dstride, zero + _ldb(stack, 0, zero))
        if mean:
            for row in range(lo, hi):
                _st(d, row * dstride, _narrow(np.float64(_ld(d, row * dstride, zero))
                                              / divisor, zero))
        done += hi - lo
    _publish(cp, done)


def runner(u: int, family: str = FAMILY, compile: bool = True):
    """The row-sums runner for ``u``-byte floats (loaded from the disk cache when it is
    there): as :func:`.loops.runner`, which :mod:`.builds` calls it in place of."""
    from . import jit as jit_module      # (looked up per call: tests wrap it)

    if family != FAMILY:
        raise ValueError(f"no {family!r} runner here")
    if u not in FLOAT_TOKENS:
        raise ValueError(f"no {family!r} runner for {u}-byte units")
    _bind_block_sum()
    # (the unsigned token of the unit's width, as the pool's workers call runners)
    return jit_module.compile_runner(_run_row_sums, u, compile)


_bound = False          # the intrinsics are bound (by _bind_block_sum)


def _bind_block_sum() -> None:
    """Define this module's intrinsics (:func:`define_block_sums`) and bind them here,
    with the loops' chunk claims (numba's dispatchers, once :func:`.jit.materialise` has
    wrapped them), once (:func:`.jit.bind_once`)."""
    from . import jit as jit_module
    from . import loops

    jit_module.bind_once(globals(), lambda: {
        **define_block_sums(), "_home": loops._home, "_claim": loops._claim,
        "_publish": loops._publish})


def define_block_sums() -> dict:
    """The intrinsics the runner adds blocks with (:data:`BLOCK` elements at most, 8 at
    least), each in numpy's order for a block (the module's docstring): the eight
    accumulators are the lanes of one vector, each lane adding its own elements in turn
    (the same additions, in the same order, as numpy's scalar ``r[j] += a[i + j]``),
    then combined pairwise by lane shuffles, then the rest added one by one. No
    fast-math: every addition is IEEE's, in that order. (numba cannot write a vector of
    floats; LLVM did not vectorise the eight scalar accumulators by itself.)

    * ``_block_sum(s, start, m, tok)``: the sum of the ``m`` elements of ``tok``'s type
      from address ``s`` + ``start`` elements;
    * ``_block_sum_pair(s, first, second, m, tok)``: the sums of two such blocks (at
      ``first`` and ``second``), their additions interleaved: two independent chains of
      vector adds where one row's would leave the adder waiting on each add's latency."""
    from llvmlite import ir
    from numba.core import types
    from numba.extending import intrinsic

    i64 = ir.IntType(64)
    i32 = ir.IntType(32)

    def emit(context, builder, address, starts, count, token_type):
        """The sums of the blocks at ``starts`` (elements from ``address``), each
        ``count`` long, computed side by side."""
        scalar = context.get_value_type(token_type)
        align = token_type.bitwidth // 8
        lanes = ir.VectorType(scalar, 8)
        origin = builder.inttoptr(address, scalar.as_pointer())
        bases = [builder.gep(origin, [start]) for start in starts]

        def vector_at(base, index):
            return builder.load(builder.bitcast(builder.gep(base, [index]),
                                                lanes.as_pointer()), align=align)

        end = builder.sub(count, builder.srem(count, ir.Constant(i64, 8)))
        entry = builder.block
        head = builder.append_basic_block("block_sum.head")
        body = builder.append_basic_block("block_sum.body")
        combine = builder.append_basic_block("block_sum.combine")
        rest = builder.append_basic_block("block_sum.rest")
        rest_body = builder.append_basic_block("block_sum.rest_body")
        done = builder.append_basic_block("block_sum.done")
        firsts = [vector_at(base, ir.Constant(i64, 0)) for base in bases]
        builder.branch(head)

        builder.position_at_end(head)       # for (i = 8; i < end; i += 8) r += a[i:i+8]
        i = builder.phi(i64)
        i.add_incoming(ir.Constant(i64, 8), entry)
        accs = []
        for first in firsts:
            acc = builder.phi(lanes)
            acc.add_incoming(first, entry)
            accs.append(acc)
        builder.cbranch(builder.icmp_signed("<", i, end), body, combine)

        builder.position_at_end(body)
        i.add_incoming(builder.add(i, ir.Constant(i64, 8)), body)
        for acc, base in zip(accs, bases):
            acc.add_incoming(builder.fadd(acc, vector_at(base, i)), body)
        builder.branch(head)

        builder.position_at_end(combine)    # ((r0+r1)+(r2+r3)) + ((r4+r5)+(r6+r7))

        def pairwise(vector, width):        # lane k: lane 2k + lane 2k+1
            def picks(parity):
                return ir.Constant(ir.VectorType(i32, width),
                                   list(range(parity, 2 * width, 2)))
            return builder.fadd(builder.shuffle_vector(vector, vector, picks(0)),
                                builder.shuffle_vector(vector, vector, picks(1)))
        combined = []
        for acc in accs:
            pairs = pairwise(pairwise(acc, 4), 2)
            combined.append(builder.fadd(
                builder.extract_element(pairs, ir.Constant(i32, 0)),
                builder.extract_element(pairs, ir.Constant(i32, 1))))
        builder.branch(rest)

        builder.position_at_end(rest)       # then the rest, one by one
        j = builder.phi(i64)
        j.add_incoming(i, combine)
        totals = []
        for value in combined:
            total = builder.phi(scalar)
            total.add_incoming(value, combine)
            totals.append(total)
        builder.cbranch(builder.icmp_signed("<", j, count), rest_body, done)

        builder.position_at_end(rest_body)
        j.add_incoming(builder.add(j, ir.Constant(i64, 1)), rest_body)
        for total, base in zip(totals, bases):
            total.add_incoming(builder.fadd(total, builder.load(builder.gep(base, [j]),
                                                                align=align)), rest_body)
        builder.branch(rest)

        builder.position_at_end(done)
        return totals

    @intrinsic
    def _block_sum(typingctx, s, start, m, tok):
        sig = tok(types.int64, types.int64, types.int64, tok)

        def codegen(context, builder, signature, args):
            address, start, count, _ = args
            return emit(context, builder, address, [start], count, signature.args[-1])[0]
        return sig, codegen

    @intrinsic
    def _block_sum_pair(typingctx, s, first, second, m, tok):
        sig = types.UniTuple(tok, 2)(types.int64, types.int64, types.int64, types.int64, tok)

        def codegen(context, builder, signature, args):
            address, first, second, count, _ = args
            sums = emit(context, builder, address, [first, second], count,
                        signature.args[-1])
            return context.make_tuple(builder, signature.return_type, sums)
        return sig, codegen

    @intrinsic
    def _block_sum_quad(typingctx, s, first, m, stride, tok):
        sig = types.UniTuple(tok, 4)(types.int64, types.int64, types.int64, types.int64, tok)

        def codegen(context, builder, signature, args):
            address, first, count, stride, _ = args
            starts = [first]
            for _ in range(3):
                starts.append(builder.add(starts[-1], stride))
            sums = emit(context, builder, address, starts, count, signature.args[-1])
            return context.make_tuple(builder, signature.return_type, sums)
        return sig, codegen

    @intrinsic
    def _float_zero(typingctx, tok):
        """+0.0 of the float type as wide as ``tok`` (an unsigned token: 4 or 8 bytes)."""
        ftype = types.float32 if tok.bitwidth == 32 else types.float64

        def codegen(context, builder, signature, args):
            return ir.Constant(context.get_value_type(ftype), 0.0)
        return ftype(tok), codegen

    @intrinsic
    def _narrow(typingctx, value, zero):
        """``value`` (a float64) rounded to ``zero``'s float type (as numpy casts)."""
        def codegen(context, builder, signature, args):
            if signature.args[1].bitwidth == 64:
                return args[0]
            return builder.fptrunc(args[0], context.get_value_type(signature.args[1]))
        return zero(types.float64, zero), codegen

    return {"_block_sum": _block_sum, "_block_sum_pair": _block_sum_pair,
            "_block_sum_quad": _block_sum_quad, "_float_zero": _float_zero,
            "_narrow": _narrow}


_programs: dict[int, tuple[np.ndarray, int]] = {}
_programs_lock = threading.Lock()
_Parameters = ctypes.c_int64 * 5        # P_N ... P_MEAN


def pairwise_program(n: int) -> np.ndarray:
    """numpy's pairwise order for rows of ``n`` elements as the runner reads it: an int64
    array of (start, length, additions) per leaf, left to right — each leaf a block of at
    most :data:`BLOCK` elements, then ``additions`` partial sums popped and added before
    it (``left + right``). Read-only; cached per ``n``."""
    return _program(n)[0]


def _program(n: int) -> tuple[np.ndarray, int]:
    """:func:`pairwise_program` and its address."""
    entry = _programs.get(n)
    if entry is not None:
        return entry
    leaves: list[list[int]] = []

    def walk(start: int, length: int, level: int) -> None:
        if length <= BLOCK:
            leaves.append([start, length, 0])
            return
        if level + 1 >= STACK_SLOTS:    # (never below 2**66 elements)
            raise ValueError(f"rows of {n} elements need more than {STACK_SLOTS} partial sums")
        half = length // 2
        half -= half % 8
        walk(start, half, level + 1)    # (kept on the stack while the right part runs)
        walk(start + half, length - half, level + 1)
        leaves[-1][2] += 1          # the right part's last leaf completes this node

    walk(0, n, 0)
    program = np.array(leaves, dtype=np.int64).reshape(-1)
    program.flags.writeable = False
    entry = (program, program.__array_interface__["data"][0])
    with _programs_lock:
        if len(_programs) >= 256:
            _programs.clear()
        _programs[n] = entry
    return entry


def sum_rows(run, sums: np.ndarray, source: int, row_stride: int, n: int, mean: bool,
             threads: int) -> None:
    """``sums`` = the sums (or, ``mean``, the means) of its ``sums.size`` rows as numpy
    adds (and divides) them, by the compiled ``run`` (:func:`runner`, for ``sums``'
    dtype) on ``threads`` threads (the kernel's pool, :func:`.threads.execute`: the
    caller's thread takes the chunks of rows the workers have not): row ``r`` is the
    ``n`` contiguous elements at address ``source + r * row_stride`` (bytes; the caller
    vouches for them), ``sums`` a writeable 1-d array. The runner releases the GIL."""
    rows = sums.size
    if rows == 0:
        return
    program, address = _program(n)
    itemsize = sums.itemsize
    params = _Parameters(n, row_stride // itemsize, sums.strides[0] // itemsize,
                         len(program) // 3, int(mean))
    execute_units(run, rows, threads, params, ctypes.addressof(params),
                  sums.__array_interface__["data"][0], source, pp_address=address)
