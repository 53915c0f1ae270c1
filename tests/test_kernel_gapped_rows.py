"""The copy kernel into a destination whose rows have gaps (a slice of a C-ordered array,
e.g. a concatenation's part), against numpy's ``copyto`` into the same slice, byte for
byte, with every byte outside the slice untouched.

Into such a destination the kernel plans with both operands' strides (dims fused only
where both are contiguous) and runs row copies only; a copy that would transpose is
numpy's. The thresholds are lowered (the fixtures of tests/test_kernel.py) so that
small arrays reach the compiled rows, their threads and non-temporal stores.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from rearrange import kernel as K
from rearrange.errors import RearrangeError
from rearrange.kernel import plan as kplan

from test_kernel import (DTYPES, DTYPE_IDS, THREAD_CONFIGS, random_array, set_everywhere,
                         small_thresholds, strided_views, threads)  # noqa: F401 - fixtures

FILL = 0xA5


def gapped_destination(shape, dtype, gaps, rng, offset=0):
    """A slice of shape ``shape`` of a larger C-ordered array: per dim, ``gaps[k]`` more
    items in the base around the slice (an inner concatenation axis' other parts), the
    base starting ``offset`` bytes into its buffer, every byte FILL (objects: None).
    Returns (the buffer, the base, the slice's index)."""
    dtype = np.dtype(dtype)
    base_shape = tuple(n + g for n, g in zip(shape, gaps))
    starts = tuple(int(rng.integers(0, g + 1)) for g in gaps)
    index = tuple(slice(s, s + n) for s, n in zip(starts, shape)) + (Ellipsis,)
    if dtype.hasobject:
        base = np.full(base_shape, None, dtype)
        return base, base, index
    nbytes = math.prod(base_shape) * dtype.itemsize
    raw = np.full(nbytes + 8, FILL, np.uint8)
    base = raw[offset:offset + nbytes].view(dtype).reshape(base_shape)
    return raw, base, index


def assert_copies_into_gaps(src, gaps, rng, offset=0):
    """copy_into(slice, src) writes what numpy's copyto writes, and nothing else."""
    raw, base, index = gapped_destination(src.shape, src.dtype, gaps, rng, offset)
    expected_raw = raw.copy()
    if src.dtype.hasobject:
        expected_base = expected_raw
    else:
        expected_base = expected_raw[offset:offset + base.nbytes].view(src.dtype).reshape(
            base.shape)
    np.copyto(expected_base[index], src, casting="no")
    K.copy_into(base[index], src)
    if src.dtype.hasobject:
        assert all(a is b for a, b in zip(raw.ravel().tolist(),
                                          expected_raw.ravel().tolist()))
    else:
        assert raw.tobytes() == expected_raw.tobytes()


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize(("threads", "small_thresholds"), THREAD_CONFIGS, indirect=True)
@pytest.mark.parametrize("name, shape, view, gaps", [
    ("rows", (40, 70), lambda x: x, (0, 30)),                 # a part of 'a (b + c)'
    ("block", (40, 70), lambda x: x, (30, 0)),                # a part of '(b + c) a': C
    ("rows-3d", (3, 20, 50), lambda x: x, (0, 0, 17)),
    ("outer-gaps", (3, 20, 50), lambda x: x, (2, 0, 0)),
    ("middle-gaps", (3, 20, 50), lambda x: x, (0, 5, 0)),
    ("strided-rows", (40, 140), lambda x: x[:, ::2], (0, 9)),
    ("reversed-rows", (40, 70), lambda x: x[::-1, ::-1], (0, 30)),
    ("broadcast-rows", (1, 70), lambda x: np.broadcast_to(x, (40, 70)), (0, 30)),
    ("transpose", (70, 40), lambda x: x.T, (0, 30)),          # numpy's copy
    ("single-row", (1, 300), lambda x: x, (4, 10)),
])
def test_named_layouts(name, shape, view, gaps, dtype, threads, small_thresholds):
    rng = np.random.default_rng(3)
    src = view(random_array(shape, dtype, rng))
    assert_copies_into_gaps(src, gaps, rng)


@pytest.mark.parametrize("offset", [1, 3, 4, 8])
def test_unaligned_destinations(offset, small_thresholds):
    rng = np.random.default_rng(5)
    for dtype in (np.float32, np.float64, np.complex128):
        src = random_array((30, 45), dtype, rng)
        assert_copies_into_gaps(src, (0, 13), rng, offset)


@st.composite
def gapped_cases(draw):
    src = draw(strided_views())
    gaps = tuple(draw(st.sampled_from([0, 0, 1, 2, 7, 16])) for _ in range(src.ndim))
    offset = draw(st.sampled_from([0, 0, 1, 4]))
    return src, gaps, offset


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(case=gapped_cases(), seed=st.integers(0, 2**32 - 1))
def test_hypothesis_gapped_destinations(case, seed, threads, small_thresholds):
    src, gaps, offset = case
    assert_copies_into_gaps(src, gaps, np.random.default_rng(seed), offset)


def test_plan_fuses_only_what_both_sides_have_contiguous():
    # (8, 1024, 2048) float32, C-contiguous, into the left half of (8, 1024, 4096)
    k = K.plan_copy((8, 1024, 2048), (1 << 23, 8192, 4), 4, threads=2,
                    dst_strides_bytes=(1 << 24, 16384, 4))
    assert (k.variant, k.fused_shape, k.src_strides, k.dst_strides) == (
        "inner-contiguous", (8192, 2048), (2048, 1), (4096, 1))
    # into the first half of (16, 1024, 2048): one block
    k = K.plan_copy((8, 1024, 2048), (1 << 23, 8192, 4), 4, threads=2,
                    dst_strides_bytes=(1 << 23, 8192, 4))
    assert (k.variant, k.fused_shape, k.dst_strides) == ("contiguous-memcpy", (1 << 24,), ())
    # into every other plane of (16, 1024, 2048): the planes apart, each one block
    k = K.plan_copy((8, 1024, 2048), (1 << 23, 8192, 4), 4, threads=2,
                    dst_strides_bytes=(1 << 24, 8192, 4))
    assert (k.variant, k.fused_shape, k.dst_strides) == ("inner-contiguous", (8, 1 << 21),
                                                         (1 << 22, 1))
    # the same source into a C-contiguous destination: one memcpy
    k = K.plan_copy((8, 1024, 2048), (1 << 23, 8192, 4), 4, threads=2)
    assert (k.variant, k.fused_shape, k.dst_strides) == ("contiguous-memcpy", (1 << 24,), ())
    # strides that are C-contiguous after all: planned as a C-contiguous destination
    k = K.plan_copy((1024, 1, 2048), (8192, 4, 4), 4, threads=2,
                    dst_strides_bytes=(8192, 12345, 4))
    assert k.dst_strides == () and k.variant == "contiguous-memcpy"


def test_plan_into_gaps_runs_rows_only():
    transpose = K.plan_copy((2048, 1024), (4, 8192), 4, threads=2,
                            dst_strides_bytes=(8192, 4))
    assert transpose.variant == "numpy" and "rows only (tiled-transpose" in transpose.reason
    strided_dst = K.plan_copy((1024, 1024), (8192, 8), 4, threads=2,
                              dst_strides_bytes=(16384, 8))
    assert strided_dst.variant == "numpy" and "fastest dim has gaps" in strided_dst.reason
    broadcast = K.plan_copy((1024, 2048), (0, 4), 4, threads=2,
                            dst_strides_bytes=(16384, 4))
    assert broadcast.variant == "inner-contiguous"
    strided = K.plan_copy((1024, 2048), (16384, 8), 4, threads=2,
                          dst_strides_bytes=(16384, 4))
    assert strided.variant == "strided-rows"


@pytest.mark.parametrize("nthreads", [1, 2])
def test_the_row_thresholds_hold_into_gaps(nthreads, monkeypatch):
    """Both sides of the thresholds a gapped destination meets (those of row copies):
    under ROWS_NUMPY_MAX_BYTES on one thread, or under 2 * THREAD_MIN_BYTES, numpy's
    copy; from them on, the kernel (and its runner runs: a spy on it). The copy is the
    same either way."""
    rng = np.random.default_rng(11)
    src = random_array((64, 512), np.float32, rng)          # 128 KiB
    shape, strides = src.shape, src.strides
    gapped = (1024 * 4, 4)
    set_everywhere(monkeypatch, "ROWS_NUMPY_MAX_BYTES", src.nbytes + 1)
    set_everywhere(monkeypatch, "THREAD_MIN_BYTES", src.nbytes // 2 + 1)
    below = K.plan_copy(shape, strides, 4, threads=nthreads, dst_strides_bytes=gapped)
    assert below.variant == "numpy" and "row loop" in below.reason
    set_everywhere(monkeypatch, "ROWS_NUMPY_MAX_BYTES", src.nbytes)     # one thread
    set_everywhere(monkeypatch, "THREAD_MIN_BYTES", src.nbytes // 2)    # two threads
    at = K.plan_copy(shape, strides, 4, threads=nthreads, dst_strides_bytes=gapped)
    assert at.variant == "inner-contiguous" and at.threads == nthreads, at.reason
    from rearrange.kernel import builds

    ran = []
    original = builds.runner_for

    def spy(*args):
        runner = original(*args)
        ran.append(runner is not None)
        return runner
    monkeypatch.setattr(builds, "runner_for", spy)
    before = K.get_num_threads()
    K.set_num_threads(nthreads)
    try:
        assert_copies_into_gaps(src, (0, 512), rng)
    finally:
        K.set_num_threads(before)
    assert ran == [True]


def test_copy_into_refuses_destinations_that_are_no_slice_of_a_c_ordered_array():
    src = np.zeros((4, 3))
    with pytest.raises(RearrangeError, match="C-contiguous or a slice"):
        K.copy_into(np.empty((3, 4)).T, src)                     # Fortran order
    with pytest.raises(RearrangeError, match="C-contiguous or a slice"):
        overlapping = np.lib.stride_tricks.as_strided(np.empty(3), (4, 3), (0, 8))
        K.copy_into(overlapping, src)                            # stride 0: overlapping
    with pytest.raises(RearrangeError, match="not those of a slice"):
        K.plan_copy((4, 3), (24, 8), 8, dst_strides_bytes=(8, 24))


def test_a_plan_for_a_contiguous_destination_is_not_run_into_gaps():
    """A plan made for a C-contiguous destination, handed in with one whose rows have
    gaps, is set aside (its signature names no destination strides)."""
    rng = np.random.default_rng(2)
    src = random_array((256, 2048), np.float32, rng)
    contiguous_plan = K.plan_copy(src.shape, src.strides, 4, threads=2)
    assert contiguous_plan.variant == "contiguous-memcpy"
    base = np.zeros((256, 4096), np.float32)
    K.copy_into(base[:, 1024:3072], src, contiguous_plan)
    np.testing.assert_array_equal(base[:, 1024:3072], src)
    assert not base[:, :1024].any() and not base[:, 3072:].any()


def test_plan_copy_docstring_examples_hold():
    import doctest

    runner = doctest.DocTestRunner()
    for test in doctest.DocTestFinder().find(kplan.plan_copy, "plan_copy",
                                             globs={"plan_copy": kplan.plan_copy}):
        runner.run(test)
    assert runner.failures == 0 and runner.tries >= 5


def test_rows_with_gaps_are_recognised():
    assert kplan.dst_rows_with_gaps((1024, 2048), (16384, 4), 4)     # left half of 4096
    assert kplan.dst_rows_with_gaps((1024, 2048), (8192, 4), 4)      # C-contiguous
    assert kplan.dst_rows_with_gaps((1, 2048), (4, 4), 4)            # a unit dim: any
    assert not kplan.dst_rows_with_gaps((1024, 2048), (4, 4096), 4)  # Fortran order
    assert not kplan.dst_rows_with_gaps((1024, 2048), (4096, 4), 4)  # rows overlap
    assert not kplan.dst_rows_with_gaps((16, 2), (8, 2), 4)          # items overlap
