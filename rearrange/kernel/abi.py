"""The contract between the Python side and the compiled loops: what the int64 control
block and parameter vector hold, field by field, and what the panel kinds and store modes
mean. :mod:`.lowering` fills the parameters, :mod:`.threads` the control block, and
:mod:`.loops` reads both (numba freezes these integers into the machine code).
"""

from __future__ import annotations

import ctypes

# Panel kinds understood by the jitted driver (KIND_WEAVE: small-inner-dim tiles that
# interleave 2-4 source rows, stored straight from registers; KIND_STAGED: transposes of
# 1- and 2-byte units through a per-thread staging buffer, see loops._panel_staged;
# KIND_WOVEN: interleaving tiles woven into a block of the destination in the per-thread
# scratch memory, see loops._woven_block).
KIND_ROWS, KIND_SIMD, KIND_TILE, KIND_WEAVE, KIND_STAGED, KIND_WOVEN = 0, 1, 2, 3, 4, 5
# Store modes: regular, non-temporal straight from the source (whole aligned lines), or
# staged: panels contiguous in the destination are gathered in an L1 buffer and leave it
# as whole non-temporal lines.
REGULAR, DIRECT_NT, STAGED_NT = 0, 1, 2
# The control block one copy's threads share (int64): work units done, their count,
# units per chunk, chunks in all; the populate slices (claimed, count, first byte, end,
# bytes per slice), the address of madvise (0: touch the pages instead), and the scratch
# memory of the copy (address; slots claimed: each thread that runs the copy claims one
# slot of P_SCRATCH bytes, so the slots outnumber the threads never). Then the job as a
# worker posted to (see the mailboxes below) calls it: the runner's address and unit
# size, the destination and source addresses, the iteration space and the parameters;
# the address of the control block of the job's next copy (C_NEXT, 0: none: a job may be
# several copies, a concatenation's parts, which each of its threads runs in turn, in
# one fork-join); a post's word in and out (C_TICKET). Then the chunks' ranges: threads arrived so far
# (the n-th to arrive makes range n % ranges its home), the number of ranges, and one
# counter per range (RANGES_MAX of them: chunks claimed from it). Last, the native
# fork-join's words (mailbox.run_pool's OP_FORK / OP_JOIN, read and written in the job's
# first control block only): the helpers the job wants posted (at most POSTS_MAX), the
# mailboxes to try for them (boxes 0 .. C_BOXES - 1: those with a worker), the posts
# made (the fork's report), the posts settled (the join's report: fewer than C_POSTS
# when its spins ran out waiting for a worker, whose post and the ones after it are the
# caller's to settle), and the posts themselves, a pair each (mailbox index, the post's
# word: its ticket, POSTED). Invariant: the caller that wrote a pair owns that post
# until it is settled; the workers never read these words.
(C_DONE, C_NWORK, C_CHUNK, C_NCHUNK, C_POP_NEXT, C_POP_N, C_POP_START, C_POP_END,
 C_POP_STEP, C_MADVISE, C_SCRATCH, C_SLOT, C_RUNNER, C_UNIT, C_DST, C_SRC, C_ITER,
 C_PARAMS, C_NEXT, C_TICKET, C_ARRIVED, C_NRANGE, C_RANGE) = range(23)
RANGES_MAX = 64
C_HELPERS, C_BOXES, C_POSTS, C_SETTLED, C_POSTED = range(C_RANGE + RANGES_MAX,
                                                         C_RANGE + RANGES_MAX + 5)
POSTS_MAX = 32
C_LEN = C_POSTED + 2 * POSTS_MAX
# Layout of the int64 parameter vector handed to the kernels (P_SCRATCH: bytes of
# scratch memory per thread, 0: none; P_GS: bytes between the row groups of a staged
# transpose's buffer; P_SBLK: column blocks per work unit of a staged transpose; P_NX,
# P_SX: the tiles' rows of a woven block, their count and source step).
(P_KIND, P_NA, P_SA, P_DA, P_NB, P_SB, P_TA, P_TB, P_NR, P_SR, P_DR, P_TR,
 P_ORDER, P_NT, P_JSTART, P_NKB, P_G, P_SOFF, P_DOFF, P_ITA, P_ITB, P_ITR,
 P_PF, P_SB2, P_STAGE, P_SEAM, P_SCRATCH, P_GS, P_SBLK, P_NX, P_SX, P_LEN) = range(32)

# The ctypes type of a control block: made and passed faster than a numpy array.
ControlBlock = ctypes.c_int64 * C_LEN

# The pool's mailboxes (:mod:`.threads`, :mod:`.mailbox`): one per worker, MAILBOX_WORDS
# int64 apart (two cache lines, so that no two workers' words share one). M_WORD is
# ticket * STATE_BITS + state: a worker spinning for work is IDLE; a caller that finds it
# so CLAIMs it (the ticket goes up by one), writes the address of its control block
# (M_CTRL; the job is in it, C_RUNNER..C_NEXT) and marks it POSTED; the worker marks it
# TAKEN, runs the job, and is IDLE again; a worker whose spin ran out is ASLEEP (it
# waits on the pool's queue). A caller whose post was not taken yet takes it back
# (POSTED -> IDLE, its own ticket only), else waits until the worker is done with it.
M_WORD, M_CTRL = 0, 1
MAILBOX_WORDS = 16
ASLEEP, IDLE, CLAIMED, POSTED, TAKEN = range(5)
STATE_BITS = 8
# What the pool runner (mailbox.run_pool) does, its second argument (OP_STOP: a
# spinning worker's mailbox put ASLEEP from outside, which ends its spin at once;
# OP_FORK: a job posted to the helpers it wants, as many as are spinning (C_POSTS);
# OP_FORK_JOIN: the fork, then, if every post was made, the caller's share run and the
# posts settled (C_SETTLED): the whole job in one call from the caller; OP_RUN_SERVE: a
# worker's job from the queue run, then its spin, in one call: no GIL between them).
OP_SERVE, OP_SETTLE, OP_TICKS, OP_STOP, OP_FORK, OP_FORK_JOIN, OP_RUN_SERVE = range(7)
