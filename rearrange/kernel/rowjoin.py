"""Row assembly, compiled: a C-contiguous output viewed as (rows, row bytes), written in
order, each output row the concatenation of *segments* — pack along a ``*`` (one segment
per input: that input's part of the row) and repeat inside a row (``b t c -> b t r c``:
one segment, the same source row ``r`` times).

A segment is ``(base address, row stride, bytes, times)``: output row ``r`` takes, after
the segments before it, the ``bytes`` at ``base + r * stride``, ``times`` times over
(the stride may be 0: every row the same bytes). numpy writes these outputs one input
(one repeat) at a time, each a separate strided pass over the output, through the caches
(docs/performance.md, "repeat and pack at two threads"); here each output row is written
once, in order, by one thread: its whole 64-byte lines as non-temporal stores (no
read-for-ownership) when the output is large and its segments start on lines
(:func:`streams`), else with regular stores. The runner itself takes any alignment:
the lines a segment shares with its neighbours — or with nothing, at the output's ends
— go with regular stores (a line is never written by both kinds of store).

The runner follows the copy kernel's calling convention (:func:`.jit.compile_runner`:
``run(cp, d, s, itp, pp, tok)``, one unit size, bytes: the token is a uint8): ``cp`` the
control block (C_NWORK: the output rows), ``d`` the output's address, ``s`` unused (the
segments carry their own addresses), ``itp`` the parameters (:data:`J_ROW_BYTES` ...,
then :data:`SEGMENT_WORDS` words a segment), ``pp`` unused. It claims chunks of rows
on the kernel's pool (:func:`.threads.execute`: spinning workers, the caller's thread
taking what the workers have not) and populates a fresh destination's pages first, as
the transposes do, then streams past the caches. It is cached, loaded and compiled by
:mod:`.builds` as the family :data:`FAMILY`, unit 1; nothing here imports numba.
"""

from __future__ import annotations

import ctypes

import numpy as np

from .pages import untouched
from .plan import LINE
from .threads import execute_units

__all__ = ["FAMILY", "UNIT", "SEGMENT_WORDS", "NONTEMPORAL_MIN_BYTES", "runner",
           "streams", "join_rows"]

FAMILY = "row-join"
UNIT = 1                # the runner moves bytes: one build, whatever the dtype
# The parameters at itp (int64): the output's row bytes, 1 for non-temporal stores of
# whole lines, the number of segments; then each segment's words.
J_ROW_BYTES, J_NT, J_SEGMENTS = range(3)
_HEAD = 3
SEGMENT_WORDS = 4       # base address, row stride (bytes), bytes, times
# Outputs this large are written with non-temporal stores where their segments start
# on lines (:func:`streams`); smaller ones with regular stores, which leave the result
# in the caches for whoever reads it next. Measured here at two threads, streaming
# against regular stores into line-aligned outputs (paired, docs/performance.md "The
# row assembly"): pack 24 MiB 1.16-1.30x, 12 MiB 0.91-1.18x, 3-6 MiB 0.98-1.09x;
# repeat 16 MiB 0.98-1.06x, 8 MiB 0.82-0.98x, 2 MiB 0.74x.
NONTEMPORAL_MIN_BYTES = 12 << 20

# Placeholders: bound by jit.materialise() (the copy kernel's intrinsics, the loops'
# chunk claims and page population) and by _bind (this module's) before anything is
# compiled.
_copy_bytes = _home = _claim = _publish = _populate = None


def _run_row_join(cp, d, s, itp, pp, tok):
    """One thread's share of the output rows (see the module's docstring)."""
    row_bytes, nt, segments = itp[J_ROW_BYTES], itp[J_NT], itp[J_SEGMENTS]
    chunks = _home(cp)
    _populate(cp)
    done = row_bytes - row_bytes
    while True:
        lo, hi, chunks = _claim(cp, chunks)
        if lo >= hi:
            break
        for r in range(lo, hi):
            at = d + r * row_bytes
            for k in range(segments):
                w = _HEAD + SEGMENT_WORDS * k
                source = itp[w] + r * itp[w + 1]
                n = itp[w + 2]
                for _ in range(itp[w + 3]):
                    _copy_bytes(at, source, n, nt)
                    at += n
        done += hi - lo
    _publish(cp, done)


def runner(u: int = UNIT, family: str = FAMILY, compile: bool = True):
    """The row-join runner (loaded from the disk cache when it is there): as
    :func:`.loops.runner`, which :mod:`.builds` calls it in place of."""
    from . import jit as jit_module      # (looked up per call: tests wrap it)

    if family != FAMILY:
        raise ValueError(f"no {family!r} runner here")
    if u != UNIT:
        raise ValueError(f"no {family!r} runner for {u}-byte units")
    _bind()
    return jit_module.compile_runner(_run_row_join, u, compile)


_bound = False          # the intrinsics and chunk claims are bound (by _bind)


def _bind() -> None:
    """Bind the loops' chunk claims and page population (numba's dispatchers, once
    :func:`.jit.materialise` has wrapped them) and :func:`define_copy_bytes` here, once
    (:func:`.jit.bind_once`)."""
    from . import jit as jit_module
    from . import loops

    jit_module.bind_once(globals(), lambda: {
        **define_copy_bytes(), "_home": loops._home, "_claim": loops._claim,
        "_publish": loops._publish, "_populate": loops._populate})


def define_copy_bytes() -> dict:
    """``_copy_bytes(dst, src, n, nt)``: ``n`` bytes from address ``src`` to ``dst``
    (any alignment, not overlapping). With ``nt`` (nonzero) the 64-byte lines of the
    destination that lie whole inside ``[dst, dst + n)`` are stored non-temporally
    (one vector load, unaligned, and one aligned streaming store each); the bytes before
    the first such line and after the last go with regular stores. Without, 64 bytes a
    step with regular (unaligned) stores. The bytes left below 64 go as 32, 16, 8, 4, 2
    and 1 by the bits of the count. The caller orders the streaming stores (an sfence:
    :func:`.loops._publish`) before its work is seen as done."""
    from llvmlite import ir
    from numba.core import types
    from numba.extending import intrinsic

    i32, i64 = ir.IntType(32), ir.IntType(64)
    line = ir.VectorType(i64, 8)

    def pointer(builder, address, llty):
        return builder.inttoptr(address, llty.as_pointer())

    def emit_lines(builder, dst, src, count, nt):
        """``count`` (a multiple of 64) bytes, a line at a time; returns (dst, src) after
        them."""
        entry = builder.block
        head = builder.append_basic_block("lines.head")
        body = builder.append_basic_block("lines.body")
        done = builder.append_basic_block("lines.done")
        builder.branch(head)
        builder.position_at_end(head)
        i = builder.phi(i64)
        i.add_incoming(ir.Constant(i64, 0), entry)
        builder.cbranch(builder.icmp_signed("<", i, count), body, done)
        builder.position_at_end(body)
        value = builder.load(pointer(builder, builder.add(src, i), line), align=1)
        store = builder.store(value, pointer(builder, builder.add(dst, i), line),
                              align=64 if nt else 1)
        if nt:
            store.set_metadata("nontemporal",
                               builder.module.add_metadata([ir.Constant(i32, 1)]))
        i.add_incoming(builder.add(i, ir.Constant(i64, 64)), body)
        builder.branch(head)
        builder.position_at_end(done)
        return builder.add(dst, count), builder.add(src, count)

    def emit_small(builder, dst, src, count):
        """``count`` < 64 bytes: 32, 16, 8, 4, 2, 1 by its bits (regular stores)."""
        offset = ir.Constant(i64, 0)
        for size in (32, 16, 8, 4, 2, 1):
            llty = ir.IntType(8 * size) if size <= 8 else ir.VectorType(i64, size // 8)
            bit = builder.and_(count, ir.Constant(i64, size))
            with builder.if_then(builder.icmp_unsigned("!=", bit, ir.Constant(i64, 0))):
                value = builder.load(pointer(builder, builder.add(src, offset), llty),
                                     align=1)
                builder.store(value, pointer(builder, builder.add(dst, offset), llty),
                              align=1)
            offset = builder.add(offset, bit)

    @intrinsic
    def _copy_bytes(typingctx, dst, src, n, nt):
        sig = types.void(types.int64, types.int64, types.int64, types.int64)

        def codegen(context, builder, signature, args):
            dst, src, n, nt = args
            low = ir.Constant(i64, 63)
            with builder.if_else(builder.icmp_signed("!=", nt, ir.Constant(i64, 0))) as \
                    (streaming, regular):
                with streaming:
                    # regular stores up to dst's next line (all of n if it ends first)
                    head = builder.and_(builder.sub(ir.Constant(i64, 0), dst), low)
                    head = builder.select(builder.icmp_signed("<", n, head), n, head)
                    emit_small(builder, dst, src, head)
                    rest = builder.sub(n, head)
                    whole = builder.and_(rest, ir.Constant(i64, ~63))
                    after_dst, after_src = emit_lines(builder, builder.add(dst, head),
                                                      builder.add(src, head), whole, True)
                    emit_small(builder, after_dst, after_src, builder.and_(rest, low))
                with regular:
                    whole = builder.and_(n, ir.Constant(i64, ~63))
                    after_dst, after_src = emit_lines(builder, dst, src, whole, False)
                    emit_small(builder, after_dst, after_src, builder.and_(n, low))
            return context.get_dummy_value()
        return sig, codegen

    return {"_copy_bytes": _copy_bytes}


def _parameters(row_bytes: int, nt: bool, segments: list[tuple[int, int, int, int]]):
    words = [row_bytes, int(nt), len(segments)]
    for segment in segments:
        words.extend(segment)
    return (ctypes.c_int64 * len(words))(*words)


def streams(daddr: int, nbytes: int, segments: list[tuple[int, int, int, int]]) -> bool:
    """Whether an output of ``nbytes`` at ``daddr`` made of ``segments`` gets its lines
    as streaming stores: from :data:`NONTEMPORAL_MIN_BYTES`, and only where every
    segment starts on a line (the output 64-byte aligned, every segment's bytes a
    multiple of 64). Where segments share lines those are written with regular stores
    between the streaming ones, and that lost: repeat (64, 256, 64) x4 into an output
    16 or 32 bytes past a line 0.65x regular stores, pack 1.0x; aligned, pack 1.29x,
    repeat 1.01x (docs/performance.md "The row assembly"). numpy's allocations of this
    size are 16-byte aligned: about one in four is aligned to a line."""
    return nbytes >= NONTEMPORAL_MIN_BYTES and daddr % LINE == 0 and \
        all(n % LINE == 0 for _, _, n, _ in segments)


def join_rows(run, out: np.ndarray, segments: list[tuple[int, int, int, int]],
              threads: int, streaming: bool | None = None) -> None:
    """Write ``out`` (a writeable C-contiguous array, viewed as ``out.shape[0]`` rows of
    ``out.nbytes // out.shape[0]`` bytes) by the compiled row-join ``run``
    (:func:`runner`) on ``threads`` threads (the kernel's pool): row ``r`` the
    concatenation of each segment ``(base, stride, bytes, times)``'s ``bytes`` at address
    ``base + r * stride``, ``times`` times over. The segments' bytes times their counts
    add up to the row's bytes; the caller vouches for the memory they name (alive, not
    overlapping ``out``) and keeps it alive for the call.

    ``streaming`` (None: :func:`streams`' rule) says whether whole lines go out as
    streaming stores."""
    rows = out.shape[0] if out.ndim else 1
    if rows == 0 or out.nbytes == 0:
        return
    row_bytes = out.nbytes // rows
    if sum(n * times for _, _, n, times in segments) != row_bytes:
        raise ValueError("the segments do not fill the output's rows")
    daddr = out.__array_interface__["data"][0]
    nt = streams(daddr, out.nbytes, segments) if streaming is None else streaming
    # A fresh destination (a new mapping: mincore) has its pages populated first, split
    # over the threads, then streamed to (the transposes' way: .kernel's docstring).
    populate = out.nbytes if nt and untouched(daddr, out.nbytes) else 0
    params = _parameters(row_bytes, nt, segments)
    execute_units(run, rows, threads, params, ctypes.addressof(params), daddr,
                  populate_bytes=populate)
