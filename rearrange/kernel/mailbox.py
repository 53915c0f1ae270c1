"""The pool's native side: a worker that spins for its next job, and the caller that
hands one to it, without a system call or Python on either side.

A worker woken through the operating system (a futex: the pool's queue) started 20-35
us after the copy was handed out on the virtual machines measured, a fifth of a 10 MiB
copy's time at two threads. So after each job a worker spins in :func:`_serve` on its
mailbox (:mod:`.abi`'s M_* fields and states) for a bounded time, with the GIL released;
a copy made meanwhile posts to it (:func:`_posted`) and the worker calls the copy's
runner at once (a job of several copies: each one's runner in turn, following C_NEXT:
:func:`_run_job`). The caller takes its post back if the worker has not taken it by the
time the caller's own share is done (:func:`_settled`), else waits for the worker to
finish with it: the job's memory (control block, iteration space, parameters) is the caller's and
must outlive every reader.

A caller whose helpers are all spinning makes its whole job one call here
(:func:`_fork` then :func:`_join`: posts, the caller's own share run as a worker runs
it, the posts settled), with no Python between them; a helper asleep must be handed the
job through the pool's queue before the caller starts its share, so the fork then
returns having made the posts it could, and Python queues the rest.

One C-ABI entry, :func:`run_pool` (the runner signature, compiled for 8-byte units as
the family "pool"), does each of the operations; at exit the pool stops the spins
(:func:`_stop`), so that no worker is in compiled code while the interpreter tears
numba down. Plain Python that :mod:`.jit` compiles with numba; the intrinsics are bound
by :func:`.jit.materialise`.
"""

from __future__ import annotations

from .abi import (ASLEEP, C_BOXES, C_DST, C_HELPERS, C_ITER, C_LEN, C_NEXT, C_PARAMS,
                  C_POSTED, C_POSTS, C_RUNNER, C_SETTLED, C_SRC, C_TICKET, C_UNIT, CLAIMED,
                  IDLE, M_CTRL, M_WORD, MAILBOX_WORDS, OP_FORK, OP_FORK_JOIN, OP_RUN_SERVE,
                  OP_SERVE, OP_SETTLE, OP_STOP, OP_TICKS, POSTED, STATE_BITS, TAKEN)
from .jit import jit

__all__ = ["run_pool"]

# Placeholders: bound by jit.materialise() before anything is compiled.
_cas = _load_acquire = _store_release = _pause = _cycles = _call_runner = carray = None
_int64s_at = _address = None


@jit()
def _run_job(cp):
    """Run the job whose first control block is at address ``cp``: each copy's runner in
    turn, following C_NEXT (what every thread of a job does, worker or caller)."""
    while cp != 0:
        c = carray(_int64s_at(cp), (C_LEN,))
        _call_runner(c[C_RUNNER], c[C_UNIT], cp, c[C_DST], c[C_SRC], c[C_ITER],
                     c[C_PARAMS])
        cp = c[C_NEXT]


@jit()
def _serve(box, budget):
    """Spin on the mailbox ``box`` and run what is posted to it, until ``budget``
    cycle-counter ticks pass without a post; then mark it ASLEEP and return. A post
    counts whether this worker ran it or its caller took it back first (its ticket
    moved on: a descheduled worker's budget runs from its callers' last job, not its
    own).

    Invariant: only this worker moves its mailbox out of ASLEEP, POSTED and TAKEN;
    callers move it only out of IDLE (claiming, or putting it ASLEEP: :func:`_stop`) and
    out of POSTED with their own ticket (taking a post back)."""
    word = _load_acquire(box, M_WORD)
    if word % STATE_BITS == ASLEEP:
        _store_release(box, M_WORD, word - ASLEEP + IDLE)
    ticket = word // STATE_BITS
    start = _cycles()
    while True:
        word = _load_acquire(box, M_WORD)
        state = word % STATE_BITS
        if word // STATE_BITS != ticket:    # posted to since the last look
            ticket = word // STATE_BITS
            start = _cycles()
        if state == POSTED:
            if _cas(box, M_WORD, word, word - POSTED + TAKEN) == word:
                _run_job(box[M_CTRL])
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
def _posted(box, job):
    """Hand the job whose first control block is at address ``job`` to the worker of
    ``box`` if it is spinning (IDLE): the post's word (its ticket, POSTED), else 0."""
    word = _load_acquire(box, M_WORD)
    if word % STATE_BITS != IDLE:
        return 0
    claimed = word + STATE_BITS - IDLE + CLAIMED
    if _cas(box, M_WORD, word, claimed) != word:
        return 0
    box[M_CTRL] = job
    _store_release(box, M_WORD, claimed - CLAIMED + POSTED)     # publishes M_CTRL
    return claimed - CLAIMED + POSTED


@jit()
def _settled(box, posted, spins):
    """After the caller's share of a job: take back the post whose word is ``posted`` if
    the worker of ``box`` has not taken it, else wait (at most ``spins`` pauses) until
    the worker is done with it. True when the job is no longer the worker's, False if
    the spins ran out first (the caller yields and settles again)."""
    if _cas(box, M_WORD, posted, posted - POSTED + IDLE) == posted:
        return True
    taken = posted - POSTED + TAKEN
    for _ in range(spins):
        if _load_acquire(box, M_WORD) != taken:
            return True
        _pause()
    return False


@jit()
def _mailbox(boxes, worker):
    """The mailbox of ``worker``, the pool's mailboxes starting at ``boxes``."""
    return _int64s_at(_address(boxes) + worker * (8 * MAILBOX_WORDS))


@jit()
def _fork(boxes, cp):
    """Post the job of control block ``cp`` to the workers of the mailboxes 0 ..
    cp[C_BOXES] - 1 that are spinning, in order, until cp[C_HELPERS] posts are made:
    cp[C_POSTS] = the posts made, each a pair at C_POSTED (mailbox, word). True when
    every helper wanted was posted to."""
    job = _address(cp)
    made = 0
    for worker in range(cp[C_BOXES]):
        if made == cp[C_HELPERS]:
            break
        posted = _posted(_mailbox(boxes, worker), job)
        if posted != 0:
            cp[C_POSTED + 2 * made] = worker
            cp[C_POSTED + 2 * made + 1] = posted
            made += 1
    cp[C_POSTS] = made
    return made == cp[C_HELPERS]


@jit()
def _join(boxes, cp, spins):
    """The caller's share of the forked job of control block ``cp`` (each copy in turn,
    as a worker runs it), then its posts settled in order, each with at most ``spins``
    pauses of waiting: cp[C_SETTLED] = the posts settled (fewer than cp[C_POSTS] when
    the spins ran out on a worker that has taken its post and is not done)."""
    _run_job(_address(cp))
    for i in range(cp[C_POSTS]):
        if not _settled(_mailbox(boxes, cp[C_POSTED + 2 * i]), cp[C_POSTED + 2 * i + 1],
                        spins):
            cp[C_SETTLED] = i
            return
    cp[C_SETTLED] = cp[C_POSTS]


@jit()
def _stop(box):
    """End the spin of the worker of ``box`` if it is spinning (IDLE -> ASLEEP): it
    returns from :func:`_serve` at once. A mailbox with a post in it is left alone."""
    word = _load_acquire(box, M_WORD)
    if word % STATE_BITS == IDLE:
        _cas(box, M_WORD, word, word - IDLE + ASLEEP)


def run_pool(cp, op, arg, itp, pp, tok):
    """The pool's entry (the runner signature): ``cp`` a mailbox (fork, fork-join: the
    pool's first; run-serve: the worker's), ``op`` one of OP_*, ``arg`` the spin budget
    (serve, run-serve: cycle-counter ticks, 0: none; settle, fork-join: pauses per
    post), ``itp`` the job's first control block (settle: the post's word in, 1
    (settled) or 0 out, at C_TICKET; fork, fork-join: the C_HELPERS .. C_POSTED words;
    run-serve: the job from the queue the worker runs before its spin; ticks:
    itp[C_TICKET] = the cycle counter)."""
    if op == OP_SERVE:
        _serve(cp, arg)
    elif op == OP_RUN_SERVE:
        _run_job(_address(itp))
        if arg > 0:
            _serve(cp, arg)
    elif op == OP_FORK_JOIN:
        if _fork(cp, itp):
            _join(cp, itp, arg)
    elif op == OP_FORK:
        _fork(cp, itp)
    elif op == OP_SETTLE:
        itp[C_TICKET] = 1 if _settled(cp, itp[C_TICKET], arg) else 0
    elif op == OP_TICKS:
        itp[C_TICKET] = _cycles()
    elif op == OP_STOP:
        _stop(cp)
