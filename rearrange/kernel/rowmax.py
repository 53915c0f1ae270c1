"""The reductions' compiled runners beside the row sums (:mod:`.rowsums`), both run on
the copy kernel's threads:

* **row maxima** (:data:`FAMILY`): each output the maximum (or minimum) of ``count``
  runs of ``n`` contiguous float32 or float64 elements, the runs ``rstride`` elements
  apart, the outputs' first runs ``ostride`` apart — ``"b c h w -> c"`` (a channel: b
  runs of h * w), ``"b c h w -> b c"`` and ``"b c h w -> b c h"`` (one run an output).
  The value is numpy's ``max`` / ``min`` of the same elements, NaN included;
* **column sums** (:data:`COLUMN_SUMS`): sums and means whose reduced axis lies between
  kept ones (``"b c h w -> b h w"``), in numpy's own order: each output from +0.0, the
  reduced rows added one after the other, each element in the data's type;
* **window maxima** (:data:`WINDOWS`): maxima and minima over small windows whose rows
  are 1 or 2 consecutive elements (pooling, ``"b c (h 2) (w 2) -> b c h w"``): each
  window row read once as vectors into its output row (see :func:`_run_window_max`).
* **window sums** (:data:`WINDOW_SUMS`): sums and means over the same windows (average
  pooling) in the order rearrange/reductions.py's views add them, which is numpy's
  (see :func:`_run_window_sums`).

numpy reduces these layouts through its iterator (a per-channel maximum: one call of its
inner loop a run, ~11% of its time at runs of 3136 and most of it at runs of 56), and
the reductions' slabs and partial results handed their second part to a
ThreadPoolExecutor (27-45 us a hand-off measured here) with the work cut in halves
beforehand, so that a worker the OS woke late held the call up. These runners claim
chunks of outputs from the control block as the copies' runners do, on the kernel's
pool (:func:`.threads.execute`: spinning workers, the caller's thread taking what the
workers have not). The row maxima read a chunk's runs ``k`` of all its outputs before
their runs ``k + 1`` (where the outputs' runs lie side by side, one stretch of memory at
a time), prefetch the head of the next run where it does not follow the current one, and
within a run the lines :data:`PREFETCH_AHEAD_BYTES` ahead (the hardware's streams stop
at every 4 KiB page).

Values: every comparison picks one of its operands, a NaN over any number (``x > acc or
x != x``: LLVM's maxnum would drop the NaN), so the result is numpy's value, and a NaN
where numpy's is. Signed zeros tie: where an output's extreme is a zero, numpy's result
(+0.0 or -0.0) depends on the order of its SIMD lanes, which no other order reproduces.
So an output whose extreme is zero is looked at again: when its zeros are all of one
sign, that sign is the result (the comparisons picked one of them); when both signs are
among them the runner counts it, and the caller computes the whole by numpy's own call
(:func:`reduce_runs`' caller, rearrange/reductions.py).

The runners follow the copy kernel's calling convention (:func:`.jit.compile_runner`:
``run(cp, d, s, itp, pp, tok)``, an unsigned-integer token of the unit's width, as the
pool's workers call runners): ``cp`` the control block (its C_NWORK: the work units),
``d`` the first output, ``s`` the input's first element, ``itp`` the parameters
(:data:`P_OP` ..., :data:`Q_ROWS` ...), ``pp`` unused. Unit 4 reads float32, unit 8
float64. They are cached, loaded and compiled by :mod:`.builds` as the families
:data:`FAMILY`, :data:`COLUMN_SUMS`, :data:`WINDOWS` and :data:`WINDOW_SUMS`; nothing
here imports numba.
"""

from __future__ import annotations

import ctypes
import math

import numpy as np

from .threads import execute_units

__all__ = ["FAMILY", "COLUMN_SUMS", "WINDOWS", "WINDOW_SUMS", "FLOAT_DTYPES", "OP_MAX",
           "OP_MIN", "OP_SUM", "OP_MEAN", "runner", "reduce_runs", "sum_columns",
           "reduce_windows", "sum_windows"]

FAMILY = "row-max"
COLUMN_SUMS = "column-sums"     # the sums (and means) down columns of rows: same module
WINDOWS = "window-max"          # the maxima (and minima) over small windows: pooling
WINDOW_SUMS = "window-sums"     # the sums (and means) over the same windows: average pooling
PREFETCH_LINES = 16     # cache lines of the next run's head prefetched (1 KiB)
# Outputs that each read this many bytes or more are claimed one at a time (a chunk an
# output: "b c h w -> c" of (32, 64, 56, 56) float32, 64 outputs of 392 KiB, read
# 1.02x faster than in the usual 8 chunks a thread, 2 threads, in-process A/B).
OUTPUT_CHUNK_BYTES = 1 << 16
# How far ahead of a run's reads its lines are prefetched (into L1: 2 KiB, 1 KiB and 3 KiB
# were 1.03-1.06x none at "b c h w -> c" (32, 64, 56, 56) float32, 2 threads; into L2
# 0.92-1.03x, non-temporal 0.5-0.6x).
PREFETCH_AHEAD_BYTES = 2048
# The runner's unit size -> the floats it reads (its token is UNIT_DTYPES' unsigned type).
FLOAT_DTYPES = {4: np.float32, 8: np.float64}
OP_MAX, OP_MIN = 0, 1
OP_SUM, OP_MEAN = 0, 1          # the window sums' W_OP
# The parameters at itp (int64): the reduction, elements in a run, runs an output, the
# stride between runs, between the outputs' first runs and between outputs (elements),
# and the count of outputs whose zeros have both signs (the runner's, atomically).
P_OP, P_N, P_COUNT, P_RSTRIDE, P_OSTRIDE, P_DSTRIDE, P_MIXED = range(7)
_P_LEN = 7
# The column sums' parameters: the rows added (the reduced axis), elements in a row
# (the kept inner axis), elements in a work unit's block, the strides between the rows,
# between the outer outputs' first rows (input) and between output rows (elements);
# 1 for a mean.
(Q_ROWS, Q_WIDTH, Q_BLOCK, Q_ROW_STRIDE, Q_OUTER_STRIDE, Q_OUT_STRIDE, Q_MEAN) = range(7)
COLUMN_BLOCK_BYTES = 16384      # a work unit's block of an output row (in L1 as it is summed)
# The window maxima's (and window sums') parameters: the reduction (OP_MAX / OP_MIN;
# OP_SUM / OP_MEAN), outputs in an output row, the stride
# between the output rows' first windows (input), the window's rows and their stride,
# its columns (1 or 2: consecutive, a row's windows one after the other; elements).
W_OP, W_WIDTH, W_OUTER_STRIDE, W_ROWS, W_ROW_STRIDE, W_COLS = range(6)
_W_LEN = 6

# Placeholders: bound by jit.materialise() (the copy kernel's intrinsics, the loops'
# chunk claims) and by _bind (this module's) before anything is compiled.
_ld = _st = _ldb = _stb = _prefetch = _fetch_add = _home = _claim = _publish = None
_run_max = _run_min = _float_zero = _narrow = _unit_bytes = None
_pairs_max = _pairs_min = _lanes_max = _lanes_min = None


def _run_row_max(cp, d, s, itp, pp, tok):
    """One thread's share of the outputs (see the module's docstring)."""
    op, n, count = itp[P_OP], itp[P_N], itp[P_COUNT]
    rstride, ostride, dstride = itp[P_RSTRIDE], itp[P_OSTRIDE], itp[P_DSTRIDE]
    zero = _float_zero(tok)
    unit = _unit_bytes(tok)
    one = op - op + 1
    chunks = _home(cp)
    done = op - op
    while True:
        lo, hi, chunks = _claim(cp, chunks)
        if lo >= hi:
            break
        # The chunk's runs k of all its outputs, then their runs k + 1, ...: where the
        # outputs' runs lie side by side ("b c h w -> c"), one stretch of memory at a time.
        for k in range(count):
            for o in range(lo, hi):
                start = o * ostride + k * rstride
                # the head of the run after this one, where it is not this one's next
                # lines: the stream's first lines come while this run is read
                after = start + ostride if o + 1 < hi else lo * ostride + (k + 1) * rstride
                if (o + 1 < hi and ostride != n) or (o + 1 == hi and k + 1 < count):
                    for line in range(PREFETCH_LINES):
                        _prefetch(s + (after * unit) + line * 64)
                if op == OP_MAX:
                    v = _run_max(s, start, n, tok)
                else:
                    v = _run_min(s, start, n, tok)
                if k == 0:
                    _stb(d, o * dstride, v)
                    continue
                acc = _ldb(d, o * dstride, zero)   # (one alias scope for the outputs)
                if (v > acc if op == OP_MAX else v < acc) or v != v:
                    _stb(d, o * dstride, v)
        for o in range(lo, hi):
            base = o * ostride
            acc = _ldb(d, o * dstride, zero)
            if acc == zero:         # a zero: of which sign, if its zeros have both?
                positive = False
                negative = False
                for k in range(count):
                    start = base + k * rstride
                    for i in range(n):
                        x = _ld(s, start + i, zero)
                        if x == zero:
                            if math.copysign(1.0, x) < 0:
                                negative = True
                            else:
                                positive = True
                    if positive and negative:
                        break
                if positive and negative:
                    _fetch_add(itp, P_MIXED, one)
        done += hi - lo
    _publish(cp, done)


def _run_column_sums(cp, d, s, itp, pp, tok):
    """One thread's share of the column sums (:data:`COLUMN_SUMS`): work unit ``w`` is
    the block ``w % blocks`` (of ``Q_BLOCK`` elements) of the output row ``w // blocks``,
    summed as numpy sums it: from +0.0, the input's rows added one after the other
    (``out = 0 + row 0``, ``out += row 1``, ...), each element in the input's type; a
    mean is then divided as numpy's mean divides (in float64, rounded to the type)."""
    rows, width, block = itp[Q_ROWS], itp[Q_WIDTH], itp[Q_BLOCK]
    row_stride, outer_stride, out_stride, mean = itp[Q_ROW_STRIDE], itp[Q_OUTER_STRIDE], \
        itp[Q_OUT_STRIDE], itp[Q_MEAN]
    zero = _float_zero(tok)
    blocks = (width + block - 1) // block
    divisor = np.float64(rows)
    chunks = _home(cp)
    done = rows - rows
    while True:
        lo, hi, chunks = _claim(cp, chunks)
        if lo >= hi:
            break
        for w in range(lo, hi):
            outer = w // blocks
            first = (w - outer * blocks) * block
            last = min(width, first + block)
            into = outer * out_stride
            source = outer * outer_stride
            for i in range(first, last):
                _stb(d, into + i, zero + _ld(s, source + i, zero))
            for r in range(1, rows):
                at = source + r * row_stride
                for i in range(first, last):
                    _stb(d, into + i, _ldb(d, into + i, zero) + _ld(s, at + i, zero))
            if mean:
                for i in range(first, last):
                    _stb(d, into + i, _narrow(np.float64(_ldb(d, into + i, zero)) / divisor,
                                              zero))
        done += hi - lo
    _publish(cp, done)


def _run_window_max(cp, d, s, itp, pp, tok):
    """One thread's share of the window maxima (:data:`WINDOWS`): work unit ``o`` is the
    output row ``o`` (``W_WIDTH`` outputs, C order), output ``j`` of it the maximum (or
    minimum) of the window of ``W_ROWS`` rows (``W_ROW_STRIDE`` apart) of ``W_COLS``
    consecutive elements (1 or 2) at input element ``o * W_OUTER_STRIDE + j * W_COLS``:
    a row's windows are its consecutive elements (the planner's :func:`window_layout`
    with ``vectors``; 3x3 and other windows read one by one lost to the views:
    docs/performance.md).

    Each window row is read as vectors (:func:`_pairs_max`, :func:`_lanes_max`) into
    the output row, which stays in L1 while the window's rows are taken in turn: each
    input row read once, each output written once to memory. The elements are taken
    in the order of the window's rows, then its columns (their order in memory), each
    ``x >= acc or x != x`` (``<=``): a NaN wins, and of equal values the later one —
    numpy's result, signed zeros included (its loop over such short windows keeps the
    later of two equal values)."""
    op, width, outer_stride = itp[W_OP], itp[W_WIDTH], itp[W_OUTER_STRIDE]
    rows, row_stride, cols = itp[W_ROWS], itp[W_ROW_STRIDE], itp[W_COLS]
    chunks = _home(cp)
    done = op - op
    while True:
        lo, hi, chunks = _claim(cp, chunks)
        if lo >= hi:
            break
        for o in range(lo, hi):
            source = o * outer_stride
            into = o * width
            for r in range(rows):
                at = source + r * row_stride
                if cols == 2:
                    if op == OP_MAX:
                        _pairs_max(d, into, s, at, width, r, tok)
                    else:
                        _pairs_min(d, into, s, at, width, r, tok)
                elif op == OP_MAX:
                    _lanes_max(d, into, s, at, width, r, tok)
                else:
                    _lanes_min(d, into, s, at, width, r, tok)
        done += hi - lo
    _publish(cp, done)


def _run_window_sums(cp, d, s, itp, pp, tok):
    """One thread's share of the window sums (:data:`WINDOW_SUMS`): work unit ``o`` is
    the output row ``o`` (``W_WIDTH`` outputs), output ``j`` of it the sum (``W_OP``:
    :data:`OP_SUM`) or mean (:data:`OP_MEAN`) of the window of ``W_ROWS`` rows
    (``W_ROW_STRIDE`` apart) of ``W_COLS`` consecutive elements (1 or 2) at input
    element ``o * W_OUTER_STRIDE + j * W_COLS``, in the views' order (the "window"
    strategy of rearrange/reductions.py, numpy's for these layouts): each window row's
    two elements added first (``a0 + a1``; a 1-column row is its element), then the
    rows' partial sums one after the other into the output row (``((r0) + r1) + r2``),
    which stays in L1 while the window's rows are taken in turn; then ``+ 0.0`` (a -0.0
    sum becomes +0.0, as numpy's sums start from 0) and, for a mean, the division by
    the window's element count in float64, rounded to the type (float32: the correctly
    rounded quotient, as numpy's float32 division gives). Each add is in the data's
    type: the same bits as the views, NaN and infinities propagating as they do."""
    op, width, outer_stride = itp[W_OP], itp[W_WIDTH], itp[W_OUTER_STRIDE]
    rows, row_stride, cols = itp[W_ROWS], itp[W_ROW_STRIDE], itp[W_COLS]
    zero = _float_zero(tok)
    divisor = np.float64(rows * cols)
    chunks = _home(cp)
    done = op - op
    while True:
        lo, hi, chunks = _claim(cp, chunks)
        if lo >= hi:
            break
        for o in range(lo, hi):
            source = o * outer_stride
            into = o * width
            if cols == 2:
                for j in range(width):
                    _stb(d, into + j, _ld(s, source + 2 * j, zero)
                         + _ld(s, source + 2 * j + 1, zero))
                for r in range(1, rows):
                    at = source + r * row_stride
                    for j in range(width):
                        _stb(d, into + j, _ldb(d, into + j, zero)
                             + (_ld(s, at + 2 * j, zero) + _ld(s, at + 2 * j + 1, zero)))
            else:
                for j in range(width):
                    _stb(d, into + j, _ld(s, source + j, zero))
                for r in range(1, rows):
                    at = source + r * row_stride
                    for j in range(width):
                        _stb(d, into + j, _ldb(d, into + j, zero) + _ld(s, at + j, zero))
            if op == OP_MEAN:
                for j in range(width):
                    _stb(d, into + j, _narrow(np.float64(_ldb(d, into + j, zero) + zero)
                                              / divisor, zero))
            else:
                for j in range(width):
                    _stb(d, into + j, _ldb(d, into + j, zero) + zero)
        done += hi - lo
    _publish(cp, done)


def runner(u: int, family: str = FAMILY, compile: bool = True):
    """The row-max (column-sums, window-max, window-sums) runner for ``u``-byte floats
    (loaded from the disk cache when it is there): as :func:`.loops.runner`, which
    :mod:`.builds` calls it in place of."""
    from . import jit as jit_module      # (looked up per call: tests wrap it)

    runs = {FAMILY: _run_row_max, COLUMN_SUMS: _run_column_sums, WINDOWS: _run_window_max,
            WINDOW_SUMS: _run_window_sums}
    if family not in runs:
        raise ValueError(f"no {family!r} runner here")
    if u not in FLOAT_DTYPES:
        raise ValueError(f"no {family!r} runner for {u}-byte units")
    _bind()
    return jit_module.compile_runner(runs[family], u, compile)


_bound = False          # the intrinsics and chunk claims are bound (by _bind)


def _bind() -> None:
    """Bind the loops' chunk claims (numba's dispatchers, once :func:`.jit.materialise`
    has wrapped them) and this module's intrinsics (:func:`define_run_extremes`) here,
    once (:func:`.jit.bind_once`)."""
    from . import jit as jit_module
    from . import loops

    jit_module.bind_once(globals(), lambda: {
        **define_run_extremes(), "_home": loops._home, "_claim": loops._claim,
        "_publish": loops._publish})


def define_run_extremes() -> dict:
    """The intrinsics the runner reads runs with:

    * ``_run_max(s, start, n, tok)`` / ``_run_min``: the maximum (minimum) of the ``n``
      floats (float32 for a 4-byte ``tok``, float64 for 8) at address ``s`` + ``start``
      elements, ``n`` >= 1: four vectors of 64 bytes a step, each lane keeping its own
      extreme, then the lanes combined and the rest taken one by one (each step of
      four also prefetches the lines :data:`PREFETCH_AHEAD_BYTES` on, clamped to the
      run: nothing outside it is touched). Each step is
      ``x > acc or x != x ? x : acc`` (``<`` for the minimum): one of its operands, a
      NaN over anything;
    * ``_pairs_max(d, dstart, s, sstart, count, row, tok)`` / ``_pairs_min`` and
      ``_lanes_max`` / ``_lanes_min``: one window row of ``count`` windows of 2 (1)
      consecutive floats into ``count`` outputs (the window maxima's, see
      ``emit_window_row``);
    * ``_float_zero(tok)``: +0.0 of the float type ``tok``'s width names;
    * ``_narrow(value, zero)``: a float64 rounded to ``zero``'s type (as numpy casts)."""
    from llvmlite import ir
    from numba.core import cgutils, types
    from numba.extending import intrinsic

    i64 = ir.IntType(64)
    i32 = ir.IntType(32)

    def float_type(token):
        return types.float32 if token.bitwidth == 32 else types.float64

    def emit(context, builder, address, start, count, ftype, minimum):
        scalar = context.get_value_type(ftype)
        size = ftype.bitwidth // 8
        width = 64 // size
        lanes = ir.VectorType(scalar, width)
        comparison = "<" if minimum else ">"

        def pick(acc, x):           # x if it wins or is NaN, else acc (NaN stays)
            wins = builder.or_(builder.fcmp_ordered(comparison, x, acc),
                               builder.fcmp_unordered("uno", x, x))
            return builder.select(wins, x, acc)

        base = builder.gep(builder.inttoptr(address, scalar.as_pointer()), [start])

        def vector_at(index):
            return builder.load(builder.bitcast(builder.gep(base, [index]),
                                                lanes.as_pointer()), align=size)

        i8p = ir.IntType(8).as_pointer()
        bytes_base = builder.bitcast(base, i8p)
        step_lines = 4 * width * size // 64
        last_line = builder.sub(builder.mul(count, ir.Constant(i64, size)),   # (body: n >= step)
                                ir.Constant(i64, size + 64 * (step_lines - 1)))
        prefetch = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]),
            "llvm.prefetch.p0i8")
        entry = builder.block
        first = builder.load(base, align=size)
        splat = builder.insert_element(ir.Constant(lanes, ir.Undefined), first,
                                       ir.Constant(i32, 0))
        splat = builder.shuffle_vector(splat, splat, ir.Constant(ir.VectorType(i32, width),
                                                                 [0] * width))
        step = 4 * width
        main_end = builder.sub(count, builder.srem(count, ir.Constant(i64, step)))
        head = builder.append_basic_block("run.head")
        body = builder.append_basic_block("run.body")
        combine = builder.append_basic_block("run.combine")
        vhead = builder.append_basic_block("run.vhead")
        vbody = builder.append_basic_block("run.vbody")
        reduce = builder.append_basic_block("run.reduce")
        thead = builder.append_basic_block("run.thead")
        tbody = builder.append_basic_block("run.tbody")
        done = builder.append_basic_block("run.done")
        builder.branch(head)

        builder.position_at_end(head)       # four vectors a step
        i = builder.phi(i64)
        i.add_incoming(ir.Constant(i64, 0), entry)
        accs = []
        for _ in range(4):
            acc = builder.phi(lanes)
            acc.add_incoming(splat, entry)
            accs.append(acc)
        builder.cbranch(builder.icmp_signed("<", i, main_end), body, combine)

        builder.position_at_end(body)
        # The step's lines PREFETCH_AHEAD_BYTES on, into L1, the last of them never past
        # the run's last element (the first clamped; a step is within the run): the
        # hardware's streams stop at each 4 KiB page, and so a run's next page is on its
        # way before it is read.
        offset = builder.mul(i, ir.Constant(i64, size))
        ahead = builder.add(offset, ir.Constant(i64, PREFETCH_AHEAD_BYTES))
        ahead = builder.select(builder.icmp_signed("<", ahead, last_line), ahead, last_line)
        at = builder.gep(bytes_base, [ahead])
        for line in range(step_lines):
            builder.call(prefetch, [builder.gep(at, [ir.Constant(i64, 64 * line)]),
                                    ir.Constant(i32, 0), ir.Constant(i32, 3),
                                    ir.Constant(i32, 1)])
        for k, acc in enumerate(accs):
            acc.add_incoming(pick(acc, vector_at(builder.add(i, ir.Constant(i64, k * width)))),
                             body)
        i.add_incoming(builder.add(i, ir.Constant(i64, step)), body)
        builder.branch(head)

        builder.position_at_end(combine)
        combined = pick(pick(accs[0], accs[1]), pick(accs[2], accs[3]))
        builder.branch(vhead)

        builder.position_at_end(vhead)      # then one vector a step
        j = builder.phi(i64)
        j.add_incoming(i, combine)
        vacc = builder.phi(lanes)
        vacc.add_incoming(combined, combine)
        next_j = builder.add(j, ir.Constant(i64, width))
        builder.cbranch(builder.icmp_signed("<=", next_j, count), vbody, reduce)

        builder.position_at_end(vbody)
        vacc.add_incoming(pick(vacc, vector_at(j)), vbody)
        j.add_incoming(next_j, vbody)
        builder.branch(vhead)

        builder.position_at_end(reduce)     # the lanes, halved until one is left
        folded = vacc
        half = width // 2
        while half >= 1:
            upper = builder.shuffle_vector(folded, folded, ir.Constant(
                ir.VectorType(i32, width), [half + k if k < half else k for k in range(width)]))
            folded = pick(folded, upper)
            half //= 2
        lane = builder.extract_element(folded, ir.Constant(i32, 0))
        builder.branch(thead)

        builder.position_at_end(thead)      # then the rest, one by one
        t = builder.phi(i64)
        t.add_incoming(j, reduce)
        total = builder.phi(scalar)
        total.add_incoming(lane, reduce)
        builder.cbranch(builder.icmp_signed("<", t, count), tbody, done)

        builder.position_at_end(tbody)
        total.add_incoming(pick(total, builder.load(builder.gep(base, [t]), align=size)),
                           tbody)
        t.add_incoming(builder.add(t, ir.Constant(i64, 1)), tbody)
        builder.branch(thead)

        builder.position_at_end(done)
        return total

    def make_run(minimum):
        @intrinsic
        def run_extreme(typingctx, s, start, n, tok):
            ftype = float_type(tok)
            sig = ftype(types.int64, types.int64, types.int64, tok)

            def codegen(context, builder, signature, args):
                address, first, count, _ = args
                return emit(context, builder, address, first, count, ftype, minimum)
            return sig, codegen
        return run_extreme

    @intrinsic
    def _float_zero(typingctx, tok):
        ftype = float_type(tok)

        def codegen(context, builder, signature, args):
            return ir.Constant(context.get_value_type(ftype), 0.0)
        return ftype(tok), codegen

    @intrinsic
    def _unit_bytes(typingctx, tok):
        """The width of ``tok``'s type in bytes (an int64 constant)."""
        def codegen(context, builder, signature, args):
            return ir.Constant(i64, signature.args[0].bitwidth // 8)
        return types.int64(tok), codegen

    @intrinsic
    def _narrow(typingctx, value, zero):
        """``value`` (a float64) rounded to ``zero``'s float type."""
        def codegen(context, builder, signature, args):
            target = context.get_value_type(signature.args[1])
            if signature.args[1].bitwidth == 64:
                return args[0]
            return builder.fptrunc(args[0], target)
        return zero(types.float64, zero), codegen

    def emit_window_row(context, builder, args, ftype, minimum, cols):
        """``d[dstart + j]`` = the extreme of ``cols`` consecutive floats at ``s[sstart +
        j * cols]`` (1 or 2), combined with ``d[dstart + j]`` unless ``row`` is 0, for
        ``j < count``: vectors of 32 bytes (a window row's 56 float32 outputs: 7), then
        one by one. Each step ``x >= acc or x != x ? x : acc`` (``<=``): the later of
        equal values, a NaN over anything."""
        d, dstart, s, sstart, count, row, _ = args
        scalar = context.get_value_type(ftype)
        size = ftype.bitwidth // 8
        width = 32 // size
        lanes = ir.VectorType(scalar, width)
        comparison = "<=" if minimum else ">="

        def pick(acc, x):
            wins = builder.or_(builder.fcmp_ordered(comparison, x, acc),
                               builder.fcmp_unordered("uno", x, x))
            return builder.select(wins, x, acc)

        def vector_at(base, index):
            return builder.bitcast(builder.gep(base, [index]), lanes.as_pointer())

        into = builder.gep(builder.inttoptr(d, scalar.as_pointer()), [dstart])
        source = builder.gep(builder.inttoptr(s, scalar.as_pointer()), [sstart])
        first = builder.icmp_signed("==", row, ir.Constant(i64, 0))
        vector_end = builder.sub(count, builder.srem(count, ir.Constant(i64, width)))
        entry = builder.block
        vhead = builder.append_basic_block("window.vhead")
        vbody = builder.append_basic_block("window.vbody")
        thead = builder.append_basic_block("window.thead")
        tbody = builder.append_basic_block("window.tbody")
        done = builder.append_basic_block("window.done")
        builder.branch(vhead)

        builder.position_at_end(vhead)
        i = builder.phi(i64)
        i.add_incoming(ir.Constant(i64, 0), entry)
        builder.cbranch(builder.icmp_signed("<", i, vector_end), vbody, thead)

        builder.position_at_end(vbody)
        if cols == 2:
            at = builder.mul(i, ir.Constant(i64, 2))
            low = builder.load(vector_at(source, at), align=size)
            high = builder.load(vector_at(source, builder.add(at, ir.Constant(i64, width))),
                                align=size)
            even = builder.shuffle_vector(low, high, ir.Constant(
                ir.VectorType(i32, width), [2 * k for k in range(width)]))
            odd = builder.shuffle_vector(low, high, ir.Constant(
                ir.VectorType(i32, width), [2 * k + 1 for k in range(width)]))
            window = pick(even, odd)
        else:
            window = builder.load(vector_at(source, i), align=size)
        target = vector_at(into, i)
        combined = pick(builder.load(target, align=size), window)
        builder.store(builder.select(first, window, combined), target, align=size)
        i.add_incoming(builder.add(i, ir.Constant(i64, width)), vbody)
        builder.branch(vhead)

        builder.position_at_end(thead)
        t = builder.phi(i64)
        t.add_incoming(i, vhead)
        builder.cbranch(builder.icmp_signed("<", t, count), tbody, done)

        builder.position_at_end(tbody)
        if cols == 2:
            at = builder.mul(t, ir.Constant(i64, 2))
            window = pick(builder.load(builder.gep(source, [at]), align=size),
                          builder.load(builder.gep(source, [builder.add(
                              at, ir.Constant(i64, 1))]), align=size))
        else:
            window = builder.load(builder.gep(source, [t]), align=size)
        target = builder.gep(into, [t])
        combined = pick(builder.load(target, align=size), window)
        builder.store(builder.select(first, window, combined), target, align=size)
        t.add_incoming(builder.add(t, ir.Constant(i64, 1)), tbody)
        builder.branch(thead)

        builder.position_at_end(done)
        return count

    def make_window_row(minimum, cols):
        @intrinsic
        def window_row(typingctx, d, dstart, s, sstart, count, row, tok):
            ftype = float_type(tok)
            sig = types.int64(types.int64, types.int64, types.int64, types.int64,
                              types.int64, types.int64, tok)

            def codegen(context, builder, signature, args):
                return emit_window_row(context, builder, args, ftype, minimum, cols)
            return sig, codegen
        return window_row

    return {"_run_max": make_run(False), "_run_min": make_run(True),
            "_pairs_max": make_window_row(False, 2), "_pairs_min": make_window_row(True, 2),
            "_lanes_max": make_window_row(False, 1), "_lanes_min": make_window_row(True, 1),
            "_float_zero": _float_zero, "_narrow": _narrow, "_unit_bytes": _unit_bytes}


_Parameters = ctypes.c_int64 * _P_LEN
def reduce_runs(run, out: np.ndarray, source: int, op: int, n: int, count: int,
                rstride: int, ostride: int, threads: int) -> int:
    """``out`` (a writeable 1-d view of the outputs, of the runner's float type) =
    numpy's maxima (``op``: :data:`OP_MAX`) or minima of ``out.size`` outputs by the
    compiled ``run`` (:func:`runner`) on ``threads`` threads (the kernel's pool): output
    ``o`` reduces ``count`` runs of ``n`` contiguous elements, run ``k`` at address
    ``source + (o * ostride + k * rstride) * itemsize`` (strides in elements; the caller
    vouches for the memory). Returns how many outputs' zeros have both signs (their
    values are then the caller's to compute: 0 in all but such data)."""
    outputs = out.size
    params = _Parameters(op, n, count, rstride, ostride, out.strides[0] // out.itemsize, 0)
    execute_units(run, outputs, threads, params, ctypes.addressof(params),
                  out.__array_interface__["data"][0], source,
                  chunks=outputs if n * count * out.itemsize >= OUTPUT_CHUNK_BYTES else None)
    return params[P_MIXED]

def sum_columns(run, out: np.ndarray, source: int, rows: int, width: int, row_stride: int,
                outer_stride: int, mean: bool, threads: int) -> None:
    """``out`` (a writeable C-contiguous (outer, width) array of the runner's float type)
    = numpy's sums (or means, ``mean``) of ``rows`` rows of ``width`` contiguous elements
    each, by the compiled column-sums ``run`` on ``threads`` threads: output row ``o``
    sums the rows at address ``source + (o * outer_stride + r * row_stride) * itemsize``,
    ``r`` from 0 (strides in elements; the caller vouches for the memory)."""
    outer = out.shape[0]
    block = max(1, COLUMN_BLOCK_BYTES // out.itemsize)
    units = outer * -(-width // block)
    params = _Parameters(rows, width, block, row_stride, outer_stride, width, int(mean))
    execute_units(run, units, threads, params, ctypes.addressof(params),
                  out.__array_interface__["data"][0], source)


_WindowParameters = ctypes.c_int64 * _W_LEN


def reduce_windows(run, out: np.ndarray, source: int, op: int, width: int,
                   outer_stride: int, rows: int, row_stride: int, cols: int,
                   threads: int) -> None:
    """``out`` (a writeable C-contiguous (output rows, ``width``) array of the runner's
    float type) = numpy's maxima (``op``: :data:`OP_MAX`) or minima over windows, by the
    compiled window-max ``run`` on ``threads`` threads: output ``(o, j)`` reduces the
    ``rows`` x ``cols`` elements (``cols`` 1 or 2) at address ``source + (o *
    outer_stride + r * row_stride + j * cols + c) * itemsize`` (strides in elements; the
    caller vouches for the memory)."""
    _windows_job(run, out, source, op, width, outer_stride, rows, row_stride, cols,
                 threads, "read as vectors")


def sum_windows(run, out: np.ndarray, source: int, mean: bool, width: int,
                outer_stride: int, rows: int, row_stride: int, cols: int,
                threads: int) -> None:
    """``out`` (a writeable C-contiguous (output rows, ``width``) array of the runner's
    float type) = the sums (or means, ``mean``) over windows in the views' order (see
    :func:`_run_window_sums`), by the compiled window-sums ``run`` on ``threads``
    threads: output ``(o, j)`` adds the ``rows`` x ``cols`` elements (``cols`` 1 or 2)
    at address ``source + (o * outer_stride + r * row_stride + j * cols + c) *
    itemsize`` (strides in elements; the caller vouches for the memory)."""
    _windows_job(run, out, source, OP_MEAN if mean else OP_SUM, width, outer_stride, rows,
                 row_stride, cols, threads, "summed here")


def _windows_job(run, out: np.ndarray, source: int, op: int, width: int,
                 outer_stride: int, rows: int, row_stride: int, cols: int, threads: int,
                 taken: str) -> None:
    """A window runner's job (:func:`reduce_windows`, :func:`sum_windows`: one parameter
    block, ``op`` the reduction), an output row a work unit; windows of other than 1 or
    2 columns are refused (``taken``: what the runner does with them)."""
    if cols not in (1, 2):
        raise ValueError(f"windows of {cols} columns are not {taken}")
    params = _WindowParameters(op, width, outer_stride, rows, row_stride, cols)
    execute_units(run, out.shape[0], threads, params, ctypes.addressof(params),
                  out.__array_interface__["data"][0], source)
