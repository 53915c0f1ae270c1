"""The copy kernel's one job for several copies (:func:`rearrange.kernel.copy_parts_into`,
a concatenation's parts) against numpy's ``copyto`` of each pair, byte for byte: every
byte outside the destinations untouched, the sources unchanged, and the copies the kernel
takes run in one fork-join of its pool (one :func:`.threads.execute_parts`), the others
by numpy's copy under :func:`~rearrange.kernel.copy_into`'s rules.

The parts differ in layout, size, dtype (so the job's copies run different runners, unit
sizes and panel families) and in which side of the kernel's thresholds they fall on.
"""

from __future__ import annotations

import numpy as np
import pytest

from rearrange import kernel as K
from rearrange.errors import ArgumentTypeError, RearrangeError
from rearrange.kernel import abi
from rearrange.kernel import threads as kthreads

from test_kernel import (LAYOUTS, THREAD_CONFIGS, _mailbox_state,  # noqa: F401 - fixtures
                         lone_pool, random_array, set_everywhere, small_thresholds, threads)

FILL = 0xA5


# (name, base shape, dtype, view of the base, the destination's gaps per dim: a slice of
# a larger C-ordered array when any is positive). The first ones use the runners that
# take scratch memory (staged transposes) and so need one region per copy of a job.
PARTS = [
    ("u8-transpose", (64, 96), np.uint8, lambda x: x.T, (0, 0)),
    ("u16-transpose", (40, 136), np.uint16, lambda x: x.T, (0, 0)),
    ("f4-rows-into-gaps", (40, 70), np.float32, lambda x: x, (0, 30)),
    ("f8-transpose", (33, 70), np.float64, lambda x: x.T, (0, 0)),
    ("i2-strided-rows", (40, 140), np.int16, lambda x: x[:, ::2], (0, 9)),
    ("u8-nhwc-nchw", (2, 24, 40, 3), np.uint8, lambda x: x.transpose(0, 3, 1, 2),
     (0, 0, 0, 0)),
    ("c16-block", (30, 20), np.complex128, lambda x: x, (7, 0)),
    ("f4-reversed-rows", (40, 70), np.float32, lambda x: x[::-1, ::-1], (0, 30)),
    ("object", (6, 5), object, lambda x: x.T, (0, 0)),
    ("tiny-f4", (3, 2), np.float32, lambda x: x.T, (0, 0)),
]


def filled(shape, dtype) -> np.ndarray:
    """A C-ordered array of every byte FILL (objects: None)."""
    dtype = np.dtype(dtype)
    if dtype.hasobject:
        return np.full(shape, None, dtype)
    return np.full(int(np.prod(shape)) * dtype.itemsize, FILL, np.uint8).view(
        dtype).reshape(shape)


def make_pairs(names, rng):
    """Per part name: (its source, the buffer around its destination, the destination's
    index in it); every buffer byte FILL."""
    made = []
    for name in names:
        _, shape, dtype, view, gaps = next(p for p in PARTS if p[0] == name)
        src = view(random_array(shape, dtype, rng))
        base = filled(tuple(n + g for n, g in zip(src.shape, gaps)), dtype)
        index = tuple(slice(g // 2, g // 2 + n) for g, n in zip(gaps, src.shape))
        made.append((src, base, index))
    return made


def assert_as_numpy(made, sources_before):
    """Each buffer as numpy's copyto of its pair makes it (nothing written outside the
    destination), each source unchanged."""
    for (src, base, index), before in zip(made, sources_before):
        expected = filled(base.shape, base.dtype)
        np.copyto(expected[index], src, casting="no")
        if base.dtype.hasobject:
            assert all(a is b for a, b in zip(base.ravel().tolist(),
                                              expected.ravel().tolist()))
            assert src.ravel().tolist() == before
        else:
            assert base.tobytes() == expected.tobytes()
            assert src.tobytes() == before


def snapshot(src):
    return src.ravel().tolist() if src.dtype.hasobject else src.tobytes()


def kernel_takes(src, dst) -> bool:
    """Whether copy_into's rules give this pair to the kernel (not numpy's copy)."""
    gaps = None if dst.flags.c_contiguous else dst.strides
    plan = K.plan_copy(src.shape, src.strides, src.itemsize, dst_strides_bytes=gaps)
    return not src.dtype.hasobject and plan.variant not in ("numpy", "empty") and not (
        plan.variant == "contiguous-memcpy" and plan.threads == 1)


@pytest.fixture
def dispatches(monkeypatch):
    """Every run of the kernel: ("one", destination address) for execute, ("job",
    [destination addresses]) for execute_parts, in order."""
    seen = []

    def one(low, run, daddr, saddr, populate_bytes):
        seen.append(("one", daddr))
        return kthreads.execute(low, run, daddr, saddr, populate_bytes)

    def job(parts, meanwhile=None):
        seen.append(("job", [part[2] for part in parts]))
        return kthreads.execute_parts(parts, meanwhile)

    monkeypatch.setattr(K, "execute", one)
    monkeypatch.setattr(K, "execute_parts", job)
    return seen


def address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


@pytest.mark.parametrize(("threads", "small_thresholds"), THREAD_CONFIGS, indirect=True)
@pytest.mark.parametrize("names", [
    ["f4-rows-into-gaps"],
    ["u8-transpose", "u16-transpose"],                  # two with scratch memory
    ["f4-rows-into-gaps", "f4-reversed-rows"],          # a concatenation's two parts
    [p[0] for p in PARTS],                              # many: every family and dtype
    [p[0] for p in reversed(PARTS)],
], ids=["one", "two-scratch", "two-rows", "many", "many-reversed"])
def test_parts_equal_numpys_copies(names, threads, small_thresholds, dispatches):
    rng = np.random.default_rng(len(names))
    made = make_pairs(names, rng)
    before = [snapshot(src) for src, _, _ in made]
    pairs = [(base[index], src) for src, base, index in made]
    kernel = [address(dst) for dst, src in pairs if kernel_takes(src, dst)]
    K.copy_parts_into(pairs)
    assert_as_numpy(made, before)
    # The kernel's copies in one run: a job of them all, or a lone copy as copy_into's.
    if len(kernel) > 1:
        assert dispatches == [("job", kernel)]
    else:
        assert dispatches == [("one", a) for a in kernel]


@pytest.mark.parametrize("threads", [1, 2], indirect=True)
def test_both_sides_of_the_thresholds_in_one_job(threads, monkeypatch, dispatches):
    """Parts under the kernel's threshold (numpy's copy, on the calling thread while the
    workers start) and over it in one call: only those over it are in the job, and all
    are copied. Sizes on both sides of the thresholds, lowered to 16 KiB."""
    set_everywhere(monkeypatch, "THREAD_MIN_BYTES", 1)
    set_everywhere(monkeypatch, "NUMPY_MAX_BYTES", 16 << 10)
    set_everywhere(monkeypatch, "TRANSPOSE_NUMPY_MAX_BYTES", 16 << 10)
    rng = np.random.default_rng(5)
    shapes = [(32, 32), (128, 96), (63, 40), (200, 48), (8, 8), (72, 64)]
    sources = [random_array(s, np.float32, rng).T for s in shapes]
    out = np.full(sum(s.shape[0] for s in sources) * 200, np.nan, np.float32)
    pairs, at = [], 0
    for src in sources:        # each destination its own C-contiguous block of out
        pairs.append((out[at:at + src.size].reshape(src.shape), src))
        at += src.size
    over = [address(dst) for dst, src in pairs if src.nbytes > 16 << 10]
    assert [kernel_takes(src, dst) for dst, src in pairs] == \
        [src.nbytes > 16 << 10 for _, src in pairs]
    K.copy_parts_into(pairs)
    assert dispatches == [("job", over)]
    for dst, src in pairs:
        np.testing.assert_array_equal(dst, src)
    assert np.isnan(out[at:]).all()


@pytest.mark.parametrize("spin", [0.0, 200e-6], ids=["queued", "spinning"])
def test_a_job_through_sleeping_and_spinning_workers(spin, monkeypatch):
    """The job's copies reach a worker woken from the pool's queue (Python runs them in
    turn) and one spinning on its mailbox (its native loop follows C_NEXT); either way
    every part is copied, many times over (the pool's memory reused)."""
    monkeypatch.setattr(kthreads, "_spin", spin)
    monkeypatch.setattr(kthreads, "_num_threads", 2)
    set_everywhere(monkeypatch, "THREAD_MIN_BYTES", 1)
    set_everywhere(monkeypatch, "TRANSPOSE_NUMPY_MAX_BYTES", 0)
    set_everywhere(monkeypatch, "NUMPY_MAX_BYTES", 0)
    rng = np.random.default_rng(7)
    sources = [random_array((96, 64 + 8 * k), dtype, rng).T
               for k, dtype in enumerate([np.float32, np.uint8, np.float64, np.int16] * 2)]
    for _ in range(25):
        pairs = [(np.empty(src.shape, src.dtype), src) for src in sources]
        K.copy_parts_into(pairs)
        for dst, src in pairs:
            assert dst.tobytes() == np.ascontiguousarray(src).tobytes()


@pytest.mark.parametrize("threads", [1, 2], indirect=True)
def test_a_concatenations_parts_at_the_shipped_thresholds(threads, dispatches):
    """'a b, a c -> (b + c) a' of two 8 MiB inputs as the notation lays it out: rows of
    each input into the output's rows (gaps between them), both parts in one job at two
    threads (at one, rows of 8 KiB are numpy's: its row loop is as fast); a third part
    under the thresholds is numpy's copy."""
    rng = np.random.default_rng(11)
    x, y = rng.random((1024, 2048), np.float32), rng.random((1024, 2048), np.float32)
    z = rng.random((1024, 3), np.float32)
    out = np.empty((1024, 4099), np.float32)
    pairs = [(out[:, :2048], x), (out[:, 2048:4096], y), (out[:, 4096:], z)]
    kernel = threads == 2
    assert [kernel_takes(src, dst) for dst, src in pairs] == [kernel, kernel, False]
    K.copy_parts_into(pairs)
    np.testing.assert_array_equal(out, np.concatenate([x, y, z], axis=1))
    assert dispatches == ([("job", [address(out), address(out) + 2048 * 4])] if kernel
                          else [])


def test_every_pair_is_checked_before_any_is_copied():
    x = np.arange(12.0).reshape(3, 4)
    out = np.zeros((4, 3))
    with pytest.raises(RearrangeError, match="copy_parts_into: dst .* does not match"):
        K.copy_parts_into([(out, x.T), (np.zeros((2, 2)), x)])
    assert not out.any()
    with pytest.raises(ArgumentTypeError, match="copy_parts_into: dst and src"):
        K.copy_parts_into([(out, x.T), (out, [1, 2])])
    with pytest.raises(RearrangeError, match="writeable"):
        frozen = np.zeros((4, 3))
        frozen.flags.writeable = False
        K.copy_parts_into([(frozen, x.T)])
    with pytest.raises(RearrangeError, match="C-contiguous or a slice"):
        K.copy_parts_into([(np.zeros((3, 4)).T, x.T)])
    K.copy_parts_into([])           # nothing to copy


def test_a_subclass_pair_is_numpys_copy(monkeypatch, dispatches):
    """The kernel copies exact ndarrays only: a pair with a subclass is numpy's copy,
    the others in the same call still the kernel's."""
    monkeypatch.setattr(kthreads, "_num_threads", 2)
    set_everywhere(monkeypatch, "THREAD_MIN_BYTES", 1)
    set_everywhere(monkeypatch, "TRANSPOSE_NUMPY_MAX_BYTES", 0)

    class Tagged(np.ndarray):
        pass

    x = np.random.default_rng(3).random((120, 80), np.float32)
    plain, other = np.empty((80, 120), np.float32), np.empty((80, 120), np.float32)
    tagged_dst = np.empty((80, 120), np.float32).view(Tagged)
    K.copy_parts_into([(plain, x.T), (tagged_dst, x.T), (np.empty((80, 120), np.float32),
                                                         x.view(Tagged).T), (other, x.T)])
    for dst in (plain, tagged_dst, other):
        np.testing.assert_array_equal(np.asarray(dst), x.T)
    assert dispatches == [("job", [address(plain), address(other)])]


def test_a_spinning_worker_runs_every_copy_of_a_posted_job(lone_pool, monkeypatch):
    """The worker's side on this thread: posted a job of several copies (different
    runners, unit sizes and families), its mailbox's serve loop runs each one's runner
    in turn, following C_NEXT from the first control block to the last, and does every
    work unit of all of them; then the caller finds nothing left, and every copy is
    whole."""
    box = lone_pool.box_pointers[0]
    run = lone_pool.run_pool
    submit = lone_pool.submit
    served = []

    def submit_and_serve(job, helpers, join=False):
        posts = submit(job, helpers)        # posted only: the worker's side is the test's
        assert len(posts) == 1 and _mailbox_state(lone_pool) == abi.POSTED
        run(box, abi.OP_SERVE, 1000, None, None, 0)      # runs the job, then sleeps
        assert _mailbox_state(lone_pool) == abi.ASLEEP
        served.append([(args[0][abi.C_DONE], args[0][abi.C_NWORK]) for _, args in job.steps])
        return posts

    lone_pool.submit = submit_and_serve
    box[abi.M_WORD] = abi.IDLE
    rng = np.random.default_rng(21)
    sources = [view(random_array(shape, dtype, rng)) for shape, dtype, view in LAYOUTS]
    outs = [np.full(src.shape, 7, src.dtype) for src in sources]
    monkeypatch.setattr(kthreads, "_num_threads", 2)
    K.copy_parts_into(list(zip(outs, sources)))
    assert len(served) == 1 and len(served[0]) == len(LAYOUTS)
    assert all(done == nwork > 0 for done, nwork in served[0])
    for out, src in zip(outs, sources):
        assert out.tobytes() == np.ascontiguousarray(src).tobytes()
