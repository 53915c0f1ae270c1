"""The pool's native side: a worker that spins for its next job, and the caller that
hands one to it, without a system call or Python on either side.

A worker woken through the operating system (a futex: the pool's queue) started 20-35
us after the copy was handed out on the virtual machines measured, a fifth of a 10 MiB
copy's time at two threads. So after each job a worker spins in :func:`_serve` on its
mailbox (:mod:`.abi`'s M_* fields and states) for a bounded time, with the GIL released;
a copy made meanwhile posts to it (:func:`_post`) and the worker calls the copy's runner
at once (a job of several copies: each one's runner in turn, following C_NEXT). The caller takes its post back if the worker has not taken it by the time the
caller's own share is done (:func:`_settle`), else waits for the worker to finish with
it: the job's memory (control block, iteration space, parameters) is the caller's and
must outlive every reader.

One C-ABI entry, :func:`run_pool` (the runner signature, compiled for 8-byte units as
the family "pool"), does each of the operations; at exit the pool stops the spins
(:func:`_stop`), so that no worker is in compiled code while the interpreter tears
numba down. Plain Python that :mod:`.jit` compiles with numba; the intrinsics are bound
by :func:`.jit.materialise`.
"""

from __future__ import annotations

from .abi import (ASLEEP, C_DST, C_ITER, C_LEN, C_NEXT, C_PARAMS, C_RUNNER, C_SRC,
                  C_TICKET, C_UNIT, CLAIMED, IDLE, M_CTRL, M_WORD, OP_POST, OP_SERVE,
                  OP_SETTLE, OP_STOP, OP_TICKS, POSTED, STATE_BITS, TAKEN)
from .jit import jit

__all__ = ["run_pool"]

# Placeholders: bound by jit.materialise() before anything is compiled.
_cas = _load_acquire = _store_release = _pause = _cycles = _call_runner = carray = None
_int64s_at = _address = None


@jit()
def _serve(box, budget):
    """Spin on the mailbox ``box`` and run what is posted to it, until ``budget``
    cycle-counter ticks pass without a post; then mark it ASLEEP and return.

    Invariant: only this worker moves its mailbox out of ASLEEP, POSTED and TAKEN;
    callers move it only out of IDLE (claiming, or putting it ASLEEP: :func:`_stop`) and
    out of POSTED with their own ticket (taking a post back)."""
    word = _load_acquire(box, M_WORD)
    if word % STATE_BITS == ASLEEP:
        _store_release(box, M_WORD, word - ASLEEP + IDLE)
    start = _cycles()
    while True:
        word = _load_acquire(box, M_WORD)
        state = word % STATE_BITS
        if state == POSTED:
            if _cas(box, M_WORD, word, word - POSTED + TAKEN) == word:
                cp = box[M_CTRL]
                while cp != 0:      # the job's copies, each from its control block
                    c = carray(_int64s_at(cp), (C_LEN,))
                    _call_runner(c[C_RUNNER], c[C_UNIT], cp, c[C_DST], c[C_SRC],
                                 c[C_ITER], c[C_PARAMS])
                    cp = c[C_NEXT]
                _store_release(box, M_WORD, word - POSTED + IDLE)
                start = _cycles()
        elif state == IDLE and _cycles() - start >= budget:
            if _cas(box, M_WORD, word, word - IDLE + ASLEEP) == word:
                return
        elif state == ASLEEP:           # stopped from outside
            return
        else:
            _pause()


@jit()
def _post(box, cp):
    """Hand the job of control block ``cp`` to the worker of ``box`` if it is spinning
    (IDLE); cp[C_TICKET] = the post's word (its ticket, POSTED), or 0 if it was not."""
    word = _load_acquire(box, M_WORD)
    cp[C_TICKET] = 0
    if word % STATE_BITS != IDLE:
        return
    claimed = word + STATE_BITS - IDLE + CLAIMED
    if _cas(box, M_WORD, word, claimed) != word:
        return
    box[M_CTRL] = _address(cp)
    _store_release(box, M_WORD, claimed - CLAIMED + POSTED)     # publishes M_CTRL
    cp[C_TICKET] = claimed - CLAIMED + POSTED


@jit()
def _settle(box, cp, spins):
    """After the caller's share of a copy: take back the post whose word is
    cp[C_TICKET] if the worker has not taken it, else wait (at most ``spins`` pauses)
    until the worker is done with it. cp[C_TICKET] = 1 when the job is no longer the
    worker's, 0 if the spins ran out first (the caller yields and settles again)."""
    posted = cp[C_TICKET]
    if _cas(box, M_WORD, posted, posted - POSTED + IDLE) == posted:
        cp[C_TICKET] = 1
        return
    taken = posted - POSTED + TAKEN
    for _ in range(spins):
        if _load_acquire(box, M_WORD) != taken:
            cp[C_TICKET] = 1
            return
        _pause()
    cp[C_TICKET] = 0


@jit()
def _stop(box):
    """End the spin of the worker of ``box`` if it is spinning (IDLE -> ASLEEP): it
    returns from :func:`_serve` at once. A mailbox with a post in it is left alone."""
    word = _load_acquire(box, M_WORD)
    if word % STATE_BITS == IDLE:
        _cas(box, M_WORD, word, word - IDLE + ASLEEP)


def run_pool(cp, op, arg, itp, pp, tok):
    """The pool's entry (the runner signature): ``cp`` a mailbox, ``op`` one of OP_*,
    ``arg`` the spin budget (serve: cycle-counter ticks; settle: pauses), ``itp`` the
    copy's control block (post, settle; ticks: itp[C_TICKET] = the cycle counter)."""
    if op == OP_SERVE:
        _serve(cp, arg)
    elif op == OP_POST:
        _post(cp, itp)
    elif op == OP_SETTLE:
        _settle(cp, itp, arg)
    elif op == OP_TICKS:
        itp[C_TICKET] = _cycles()
    elif op == OP_STOP:
        _stop(cp)
