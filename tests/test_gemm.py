"""einsum's batched products by the compiled runner (rearrange/kernel/gemm.py, family
"gemm"), routed from numpy's lowering (rearrange/backends/ndarray.py,
``_matmul_contraction``).

The oracles are numpy's ``matmul`` and ``einsum`` and einops' ``einsum``; the runner sums
over K in its own order (a fused multiply-add per step), so results are compared within
the rounding of a K-term sum: ``|got - want| <= 4 K eps (|A| @ |B|)``. Which path ran is
read from a spy on the runner's entry (``gemm.run_product``), never from a timing.
"""

from __future__ import annotations

import math
import threading

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import rearrange as ra
from rearrange import kernel
from rearrange.backends import ndarray
from rearrange.backends.ndarray import compiled_product_takes
from rearrange.kernel import builds, gemm
from rearrange.kernel import threads as kthreads

ATTENTION = "b h t d, b h s d -> b h t s"
NR32 = gemm.tile_shape(4)[1]        # a panel's columns, float32 (64 on AVX-512)


@pytest.fixture(scope="module", autouse=True)
def routed_on_any_build():
    """einsum routes to the runner only where it is built for AVX-512's vectors
    (ndarray.GEMM_MIN_VECTOR_BYTES); these tests route it on any build, so that the
    runner and the routing are tested wherever they run (the gate itself:
    test_routed_only_where_built_for_avx512)."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(ndarray, "GEMM_MIN_VECTOR_BYTES", 0)
        yield


@pytest.fixture(scope="module")
def runners():
    """The gemm runners (float32, float64), compiled or loaded here; skipped only where
    numba cannot run (a runner that fails to compile fails the tests)."""
    from rearrange.kernel.jit import KernelUnavailable

    try:
        return {u: builds.build_here((gemm.FAMILY, u)) for u in gemm.FLOAT_TOKENS}
    except KernelUnavailable as error:
        pytest.skip(f"no gemm runner: {error}")


@pytest.fixture
def products(monkeypatch):
    """The runner's calls, as (left shape, right shape, threads), the runner still
    running them."""
    calls = []
    real = gemm.run_product

    def spy(run, call, left, right, out):
        calls.append((left.shape, right.shape, call.threads))
        return real(run, call, left, right, out)
    monkeypatch.setattr(gemm, "run_product", spy)
    return calls


@pytest.fixture
def restored():
    """The thread count and kernel mode put back after the test, which starts eager
    (the runner built in the call that needs it)."""
    before = (kernel.get_num_threads(), ra.get_jit_mode())
    ra.set_jit_mode("eager")
    yield
    kernel.set_num_threads(before[0])
    ra.set_jit_mode(before[1])


def _close(got: np.ndarray, left: np.ndarray, right: np.ndarray) -> None:
    """``got`` equals ``left @ right`` (numpy.matmul, in float64) within the rounding
    of a K-term sum in ``got``'s dtype."""
    want = np.matmul(left.astype(np.float64), right.astype(np.float64))
    bound = np.matmul(np.abs(left.astype(np.float64)), np.abs(right.astype(np.float64)))
    k = left.shape[-1]
    eps = np.finfo(got.dtype).eps
    assert got.shape == want.shape and got.dtype == left.dtype
    assert np.all(np.abs(got - want) <= 4 * max(k, 1) * eps * bound + 1e-30)


def _values(rng, shape, dtype) -> np.ndarray:
    return rng.standard_normal(shape).astype(dtype)


# ---------------------------------------------------------------------- the runner itself


def _layout(x: np.ndarray, how: str) -> np.ndarray:
    """``x``'s values in another layout: "c" as it is, "t" its last two dims stored
    swapped, "neg" its rows and batch reversed (negative strides), "slice" every other
    element of a larger array, "fortran" column-major throughout."""
    if how == "c":
        return x
    if how == "t":
        return np.ascontiguousarray(np.swapaxes(x, -1, -2)).swapaxes(-1, -2)
    if how == "neg":
        flipped = np.ascontiguousarray(x[::-1, ::-1, ::-1])
        return flipped[::-1, ::-1, ::-1]
    if how == "slice":
        big = np.zeros(tuple(2 * n for n in x.shape), x.dtype)
        big[::2, ::2, ::2] = x
        return big[::2, ::2, ::2]
    if how == "fortran":
        return np.asfortranarray(x)
    raise ValueError(how)


LAYOUTS = ["c", "t", "neg", "slice", "fortran"]


@settings(max_examples=120, deadline=None)
@given(batch=st.integers(1, 4), m=st.integers(1, 40), k=st.integers(0, 70),
       n=st.integers(1, 150), left_layout=st.sampled_from(LAYOUTS),
       right_layout=st.sampled_from(LAYOUTS), dtype=st.sampled_from([np.float32, np.float64]),
       threads=st.integers(1, 3), broadcast=st.booleans(), seed=st.integers(0, 2**16))
@example(batch=2, m=256, k=64, n=256, left_layout="c", right_layout="t", dtype=np.float32,
         threads=2, broadcast=False, seed=0)
@example(batch=1, m=7, k=17, n=65, left_layout="t", right_layout="t", dtype=np.float64,
         threads=1, broadcast=True, seed=1)
def test_batched_product_equals_matmul_whatever_the_layout(runners, batch, m, k, n,
                                                            left_layout, right_layout,
                                                            dtype, threads, broadcast, seed):
    """Any M, N, K (tile edges, K = 0, K not a multiple of the vector: the packing's
    scalar tail), any strides (transposed, negative, sliced, a stride-0 broadcast
    batch), 1-3 threads: numpy.matmul's product within rounding; inputs untouched."""
    rng = np.random.default_rng(seed)
    left = _layout(_values(rng, (batch, m, k), dtype), left_layout)
    right = _layout(_values(rng, (batch, k, n), dtype), right_layout)
    if broadcast:       # one item seen by every batch item: a stride of 0
        right = np.broadcast_to(right[:1], right.shape)
    before = (left.copy(), right.copy())
    out = np.full((batch, m, n), np.nan, dtype)
    gemm.batched_product(runners[np.dtype(dtype).itemsize], left, right, out, threads)
    _close(out, left, right)
    np.testing.assert_array_equal(left, before[0])
    np.testing.assert_array_equal(right, before[1])


def test_batched_product_of_several_batch_dims_and_none(runners):
    """Batch dims of any number (0: one product) and a broadcast middle dim."""
    rng = np.random.default_rng(3)
    left = _values(rng, (2, 3, 20, 33), np.float32)
    right = np.broadcast_to(_values(rng, (2, 1, 33, 70), np.float32), (2, 3, 33, 70))
    out = np.empty((2, 3, 20, 70), np.float32)
    gemm.batched_product(runners[4], left, right, out, 2)
    _close(out, left, right)
    single = _values(rng, (45, 64), np.float64), _values(rng, (64, 130), np.float64)
    out = np.empty((45, 130), np.float64)
    gemm.batched_product(runners[8], *single, out, 2)
    _close(out, *single)


def test_batched_product_streaming_stores(runners):
    """Full tiles as non-temporal stores into a line-aligned result whose rows are
    whole lines (streams' rule); regular stores elsewhere: the same products."""
    rng = np.random.default_rng(4)
    left, right = _values(rng, (4, 50, 64), np.float32), _values(rng, (4, 64, 256), np.float32)
    nbytes = 4 * 50 * 256 * 4
    buffer = np.empty(nbytes + 128, np.uint8)
    start = (-buffer.__array_interface__["data"][0]) % 64
    out = buffer[start:start + nbytes].view(np.float32).reshape(4, 50, 256)
    before = gemm.NONTEMPORAL_MIN_BYTES
    try:
        gemm.NONTEMPORAL_MIN_BYTES = 0
        assert gemm.streams(out.__array_interface__["data"][0], nbytes, 256, 4)
        gemm.batched_product(runners[4], left, right, out, 2, streaming=True)
    finally:
        gemm.NONTEMPORAL_MIN_BYTES = before
    _close(out, left, right)


def test_streams_on_both_sides_of_each_rule():
    big = gemm.NONTEMPORAL_MIN_BYTES
    assert gemm.streams(1 << 20, big, 256, 4)
    assert not gemm.streams(1 << 20, big - 1, 256, 4)          # too small
    assert not gemm.streams((1 << 20) + 16, big, 256, 4)       # not on a line
    assert not gemm.streams(1 << 20, big, 100, 4)              # rows not whole lines


def test_batched_product_refuses_what_it_cannot_take(runners):
    left, right = np.zeros((2, 8, 1100), np.float32), np.zeros((2, 1100, 64), np.float32)
    with pytest.raises(ValueError, match="summed dim of 1100"):
        gemm.batched_product(runners[4], left, right, np.empty((2, 8, 64), np.float32), 1)
    with pytest.raises(ValueError, match="shapes"):
        gemm.batched_product(runners[4], left[:, :, :64], right[:, :64, :32],
                             np.empty((2, 8, 64), np.float32), 1)
    packed = np.zeros((2, 8, 64), dtype=[("x", np.float32), ("y", np.uint8)])["x"]
    with pytest.raises(ValueError, match="whole elements"):
        gemm.batched_product(runners[4], packed, np.zeros((2, 64, 64), np.float32),
                             np.empty((2, 8, 64), np.float32), 1)
    empty = np.empty((0, 8, 64), np.float32)        # nothing to write: nothing done
    gemm.batched_product(runners[4], np.zeros((0, 8, 64), np.float32),
                         np.zeros((0, 64, 64), np.float32), empty, 2)


def test_runner_family():
    assert ndarray.GEMM == gemm.FAMILY
    assert ndarray.GEMM_MAX_INNER == gemm.MAX_INNER
    with pytest.raises(ValueError, match="2-byte units"):
        gemm.runner(2)
    with pytest.raises(ValueError, match="no 'rows' runner"):
        gemm.runner(4, "rows")
    mr, nr = gemm.tile_shape(4)
    assert mr == gemm.ROW_TILE and nr % (kernel.plan.VECTOR_BYTES // 4) == 0
    assert gemm.tile_shape(8)[1] * 2 == nr


def test_warmup_builds_the_family():
    """``rearrange warmup`` (build_everything) lists the runners for both floats."""
    names = []
    real = builds.build_here
    try:
        builds.build_here = lambda key, lock=True: names.append(key)
        builds.build_everything(1, load=True)
    finally:
        builds.build_here = real
    assert (gemm.FAMILY, 4) in names and (gemm.FAMILY, 8) in names


# ---------------------------------------------------------------------- einsum's routing


def test_the_attention_einsum_runs_on_the_runner(runners, products, restored):
    """The issue's case: q, k (8, 8, 256, 64) float32, at 1 and 2 threads: the runner
    ran (spy), numpy's and einops' result within rounding, the inputs untouched."""
    einops = pytest.importorskip("einops")
    rng = np.random.default_rng(5)
    q, k = _values(rng, (8, 8, 256, 64), np.float32), _values(rng, (8, 8, 256, 64), np.float32)
    before = (q.copy(), k.copy())
    for threads in (1, 2):
        kernel.set_num_threads(threads)
        got = ra.einsum(q, k, ATTENTION)
        _close(got, q, np.swapaxes(k, -1, -2))
        oracle = einops.einsum(q, k, "b h t d, b h s d -> b h t s")
        np.testing.assert_allclose(got, oracle, rtol=1e-4, atol=1e-4)
        assert type(got) is np.ndarray and got.flags.c_contiguous
    assert [c[2] for c in products] == [1, 2]
    assert products[0][:2] == ((8, 8, 256, 64), (8, 8, 64, 256))
    np.testing.assert_array_equal(q, before[0])
    np.testing.assert_array_equal(k, before[1])


# (batch, m, k, n) on both sides of each threshold: taken or not
CASES = [
    ((16, 64, 64, 64), True),                   # 4M multiply-adds: the least taken
    ((15, 64, 64, 64), False),                  # just below
    ((8, 128, 32, 128), True),                  # K = 32: the shortest sum taken
    ((16, 128, 31, 128), False),                # K = 31
    ((1, 256, 1024, 256), True),                # K = 1024: the longest
    ((1, 256, 1025, 256), False),               # K = 1025: numpy's BLAS
    ((8, 16, 64, 512), True),                   # 16 rows
    ((8, 15, 64, 512), False),                  # 15 rows
    ((64, 256, 64, NR32), True),                # one whole panel
    ((64, 512, 64, NR32 - 1), False),           # narrower than a panel
    ((64, 256, 64, 2 * NR32 - NR32 // 2), True),  # a quarter of two panels padded
    ((64, 256, 64, NR32 + 1), False),           # more than a quarter padded
]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("sizes,taken", CASES)
def test_each_threshold_both_sides(runners, products, restored, sizes, taken, threads):
    """Where the rule takes a product the runner runs it, elsewhere numpy.matmul does:
    the same rule at one thread and at two, numpy's einsum's result either way, and
    explain says so exactly there."""
    kernel.set_num_threads(threads)
    batch, m, k, n = sizes
    assert compiled_product_takes(batch, m, k, n, np.float32) is taken
    rng = np.random.default_rng(sum(sizes))
    left, right = _values(rng, (batch, m, k), np.float32), _values(rng, (batch, n, k), np.float32)
    got = ra.einsum(left, right, "b t d, b s d -> b t s")
    _close(got, left, np.swapaxes(right, -1, -2))
    assert len(products) == int(taken)
    if taken:
        assert products[0][2] == threads
    text = str(ra.explain([left, right], "b t d, b s d -> b t s", op="einsum"))
    # (explain's words: the rule for AVX-512's vectors, on every machine)
    assert ("compiled batched product (kernel/gemm.py" in text) is \
        compiled_product_takes(batch, m, k, n, np.float32, 64)
    assert "numpy.matmul: batch b, rows t, summed d, columns s" in text


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.complex64, np.float16])
def test_other_dtypes(runners, products, restored, dtype):
    """float64 runs on its own runner; int32, complex64 and float16 stay numpy's (its
    matmul or einsum), with numpy's results."""
    rng = np.random.default_rng(6)
    shape = (16, 64, 64)
    if np.dtype(dtype).kind == "c":
        left = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
        right = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    elif np.dtype(dtype).kind == "i":
        left, right = rng.integers(-9, 9, shape).astype(dtype), rng.integers(-9, 9, shape).astype(dtype)
    else:
        left, right = _values(rng, shape, dtype), _values(rng, shape, dtype)
    got = ra.einsum(left, right, "b t d, b s d -> b t s")
    want = np.einsum("btd,bsd->bts", left, right)
    assert got.dtype == want.dtype
    if dtype == np.float64:
        _close(got, left, np.swapaxes(right, -1, -2))
        assert len(products) == 1
    else:
        np.testing.assert_allclose(got, want, rtol=1e-2 if dtype == np.float16 else 1e-5,
                                   atol=1e-2 if dtype == np.float16 else 1e-4)
        assert products == []


def test_layouts_through_einsum(runners, products, restored):
    """Operands permuted, sliced, reversed and broadcast before the product (views the
    lowering hands over as they are) and an output order that needs a copy after it:
    numpy.einsum's results, the runner running each."""
    kernel.set_num_threads(2)
    rng = np.random.default_rng(7)
    base = _values(rng, (4, 256, 2, 64), np.float32)
    q = base[:, ::-1, 0]                                     # negative row stride
    k = np.swapaxes(_values(rng, (4, 64, 128), np.float32), 1, 2)   # (b, s, d), d strided
    v = np.broadcast_to(_values(rng, (1, 128, 64), np.float32), (4, 128, 64))
    cases = [
        (q, k, "b t d, b s d -> b t s", "btd,bsd->bts"),
        (q, k, "b t d, b s d -> b s t", "btd,bsd->bst"),    # rows and columns swapped
        (q, v, "b t d, b s d -> t b s", "btd,bsd->tbs"),    # a permuted output
    ]
    for left, right, pattern, subscripts in cases:
        got = ra.einsum(left, right, pattern)
        want = np.einsum(subscripts, left.astype(np.float64), right.astype(np.float64))
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)
    assert len(products) == 3


def test_a_products_call_is_found_once_per_plan_and_thread_count(runners, products,
                                                                 restored, monkeypatch):
    """A plan's contraction finds the runner's parameters (gemm.product_call) on its
    first call and keeps them while the thread count stays: repeated calls with new
    values, a second plan of another layout (offset, reversed rows) and float64 in turn,
    then the thread count changed and changed back — numpy's results each time, the
    runner running each at the thread count of its call, and the parameters found again
    only where the thread count changed."""
    found = []
    real = gemm.product_call
    monkeypatch.setattr(gemm, "product_call",
                        lambda left, right, itemsize, threads, streaming=False:
                        found.append((left.strides, threads)) or
                        real(left, right, itemsize, threads, streaming))
    ra.cache_clear()                    # new plans: their contractions find theirs here
    rng = np.random.default_rng(11)
    kernel.set_num_threads(2)
    calls = 0
    for threads in (2, 2, 1, 1, 2):
        kernel.set_num_threads(threads)
        for dtype in (np.float32, np.float64):
            q = _values(rng, (4, 2, 130, 64), dtype)[:, :, 1:129]
            k = _values(rng, (4, 2, 128, 64), dtype)
            flipped = _values(rng, (4, 2, 128, 64), dtype)[:, :, ::-1]
            for left in (q, flipped):
                products.clear()
                got = ra.einsum(left, k, ATTENTION)
                _close(got, left, np.swapaxes(k, -1, -2))
                assert [c[2] for c in products] == [threads]
                calls += 1
    assert calls == 20
    # four plans (two layouts of two dtypes): found at 2 threads, again at 1, again at 2
    assert [t for _, t in found] == [2] * 4 + [1] * 4 + [2] * 4


def test_size_zero_and_size_one_dims(runners, products, restored):
    """A size-0 dim anywhere and size-1 dims: numpy's einsum's result (shape, dtype,
    values), never the runner (nothing to multiply, or too little)."""
    for shapes in [((0, 64, 64), (0, 64, 64)), ((4, 0, 64), (4, 64, 64)),
                   ((4, 64, 0), (4, 64, 0)), ((4, 64, 64), (4, 0, 64)),
                   ((1, 1, 1), (1, 1, 1))]:
        left, right = np.ones(shapes[0], np.float32), np.ones(shapes[1], np.float32)
        got = ra.einsum(left, right, "b t d, b s d -> b t s")
        want = np.einsum("btd,bsd->bts", left, right)
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    assert products == []


def test_arrays_the_runner_cannot_take_keep_numpys_way(runners, products, restored):
    """A subclass, a byte-swapped operand, an unaligned one: numpy.matmul's way, its
    result; the same operands as plain aligned arrays: the runner."""
    rng = np.random.default_rng(8)
    left, right = _values(rng, (16, 64, 64), np.float32), _values(rng, (16, 64, 64), np.float32)

    class Sub(np.ndarray):
        pass

    swapped = right.astype(right.dtype.newbyteorder())
    buffer = np.zeros(right.nbytes + 1, np.uint8)[1:].view(np.float32).reshape(right.shape)
    buffer[...] = right
    assert not buffer.flags.aligned
    for operand in (right.view(Sub), swapped, buffer):
        got = ra.einsum(left, operand, "b t d, b s d -> b t s")
        np.testing.assert_allclose(np.asarray(got), np.einsum("btd,bsd->bts", left, right),
                                   rtol=1e-4, atol=1e-4)
    assert products == []
    ra.einsum(left, right, "b t d, b s d -> b t s")
    assert len(products) == 1


def test_kernels_off_and_the_runner_not_ready(runners, products, monkeypatch, restored):
    """With REARRANGE_JIT=off, and while builds has no runner to give (compiling,
    loading), numpy.matmul runs at once (its result); then the runner."""
    rng = np.random.default_rng(9)
    left, right = _values(rng, (16, 64, 64), np.float32), _values(rng, (16, 64, 64), np.float32)
    want = np.einsum("btd,bsd->bts", left, right)
    ra.set_jit_mode("off")
    np.testing.assert_allclose(ra.einsum(left, right, "b t d, b s d -> b t s"), want,
                               rtol=1e-4, atol=1e-4)
    text = str(ra.explain([left, right], "b t d, b s d -> b t s", op="einsum"))
    assert "numpy.matmul until then and with REARRANGE_JIT=off" in text
    ra.set_jit_mode("eager")
    real = builds.runner_for
    monkeypatch.setattr(builds, "runner_for", lambda family, unit: None
                        if family == gemm.FAMILY else real(family, unit))
    np.testing.assert_allclose(ra.einsum(left, right, "b t d, b s d -> b t s"), want,
                               rtol=1e-4, atol=1e-4)
    assert products == []
    monkeypatch.setattr(builds, "runner_for", real)
    np.testing.assert_allclose(ra.einsum(left, right, "b t d, b s d -> b t s"), want,
                               rtol=1e-4, atol=1e-4)
    assert len(products) == 1


def test_mixed_calls_share_the_caches(runners, products, restored):
    """Dtypes, layouts and thread counts mixed call after call (the plan and kernel
    caches never cleared): every result right, the runner where the rule says."""
    rng = np.random.default_rng(10)
    arrays = {dt: (_values(rng, (16, 64, 64), dt), _values(rng, (16, 64, 64), dt))
              for dt in (np.float32, np.float64)}
    small = _values(rng, (2, 8, 8), np.float32)
    expected = 0
    for round_ in range(3):
        for dt, (left, right) in arrays.items():
            kernel.set_num_threads(1 + round_ % 2)
            for pattern, r in (("b t d, b s d -> b t s", right),
                               ("b t d, b d s -> b t s", np.swapaxes(right, 1, 2))):
                got = ra.einsum(left, r, pattern)
                _close(got, left, np.swapaxes(right, -1, -2))
                expected += 1
            got = ra.einsum(small, small, "b t d, b s d -> b t s")
            np.testing.assert_allclose(got, np.einsum("btd,bsd->bts", small, small),
                                       rtol=1e-5, atol=1e-5)
    assert len(products) == expected


def test_python_threads_calling_at_once(runners, products, restored):
    """Two Python threads running the product at once (the kernel's pool shared
    between their calls, each its own scratch memory): every result right."""
    kernel.set_num_threads(2)
    rng = np.random.default_rng(11)
    left, right = _values(rng, (16, 128, 64), np.float32), _values(rng, (16, 128, 64), np.float32)
    want = ra.einsum(left, right, "b t d, b s d -> b t s")
    _close(want, left, np.swapaxes(right, -1, -2))
    wrong = []

    def work():
        for _ in range(10):
            if not np.array_equal(ra.einsum(left, right, "b t d, b s d -> b t s"), want):
                wrong.append(1)
    threads = [threading.Thread(target=work) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == [] and len(products) == 21


def test_through_sleeping_and_spinning_workers(runners, products, monkeypatch, restored):
    """Pool workers asleep (no spin) or spinning: the same product."""
    kernel.set_num_threads(2)
    rng = np.random.default_rng(12)
    left, right = _values(rng, (32, 96, 64), np.float32), _values(rng, (32, 192, 64), np.float32)
    results = []
    for spin in (0, kthreads._spin):
        monkeypatch.setattr(kthreads, "_spin", spin)
        results.append(ra.einsum(left, right, "b t d, b s d -> b t s"))
    _close(results[0], left, np.swapaxes(right, -1, -2))
    np.testing.assert_array_equal(results[0], results[1])
    assert len(products) == 2


def test_torch_dask_and_array_api_inputs_never_reach_it(runners, products, restored):
    """Torch tensors, dask arrays and array-API arrays have lowerings of their own:
    their products never call the runner (their libraries' results)."""
    rng = np.random.default_rng(13)
    left, right = _values(rng, (16, 64, 64), np.float32), _values(rng, (16, 64, 64), np.float32)
    want = np.einsum("btd,bsd->bts", left, right)
    torch = pytest.importorskip("torch")
    got = ra.einsum(torch.from_numpy(left), torch.from_numpy(right), "b t d, b s d -> b t s")
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-4)
    da = pytest.importorskip("dask.array")
    got = ra.einsum(da.from_array(left, chunks=8), da.from_array(right, chunks=8),
                    "b t d, b s d -> b t s")
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-4)
    xps = pytest.importorskip("array_api_strict")
    got = ra.einsum(xps.asarray(left), xps.asarray(right), "b t d, b s d -> b t s")
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-4)
    assert products == []


@settings(max_examples=40, deadline=None)
@given(batch=st.integers(1, 3), m=st.integers(14, 70), k=st.integers(28, 80),
       n=st.integers(NR32 - 4, 3 * NR32), threads=st.integers(1, 2),
       transposed=st.booleans(), dtype=st.sampled_from([np.float32, np.float64]))
def test_einsum_on_either_side_of_the_rule(runners, batch, m, k, n, threads, transposed,
                                           dtype):
    """Shapes around the rule's edges through einsum: numpy's einsum's result, and the
    runner ran exactly where compiled_product_takes says (the rule explain reads)."""
    calls = []
    real = gemm.run_product
    before = kernel.get_num_threads()
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(gemm, "run_product",
                            lambda *a, **kw: (calls.append(1), real(*a, **kw))[1])
        monkeypatch.setattr(kthreads, "_num_threads", threads)
        rng = np.random.default_rng(batch * m * k * n)
        left = _values(rng, (batch, m, k), dtype)
        right = _values(rng, (batch, k, n) if not transposed else (batch, n, k), dtype)
        pattern = "b t d, b d s -> b t s" if not transposed else "b t d, b s d -> b t s"
        got = ra.einsum(left, right, pattern)
    assert kernel.get_num_threads() == before
    _close(got, left, right if not transposed else np.swapaxes(right, -1, -2))
    assert len(calls) == int(compiled_product_takes(batch, m, k, n, dtype))
    assert math.prod((batch, m, n)) == got.size


def _guarded(values: np.ndarray, at_end: bool, keep: list) -> np.ndarray:
    """A C-contiguous copy of ``values`` in memory with an inaccessible page right
    before it (``at_end`` False) or right after it: a read outside it faults."""
    import ctypes
    import mmap

    page = mmap.PAGESIZE
    data_pages = -(-values.nbytes // page)
    region = mmap.mmap(-1, (data_pages + 2) * page)
    base = ctypes.addressof(ctypes.c_char.from_buffer(region))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    for guard in (base, base + (data_pages + 1) * page):
        assert libc.mprotect(guard, page, 0) == 0          # PROT_NONE
    start = page + (data_pages * page - values.nbytes if at_end else 0)
    view = np.frombuffer(region, np.uint8, values.nbytes, start).view(values.dtype)
    view = view.reshape(values.shape)
    view[...] = values
    keep.append(region)
    return view


@pytest.mark.parametrize("at_end", [False, True])
@pytest.mark.parametrize("transposed", [False, True])
def test_nothing_outside_the_operands_is_read(runners, at_end, transposed):
    """Operands against inaccessible pages, in shapes with edge tiles, edge panels
    (column groups wholly past N) and a K tail: the runner reads only their elements
    (a stray read would fault the process)."""
    import sys

    if not sys.platform.startswith("linux"):
        pytest.skip("mprotect'ed guard pages: Linux")
    rng = np.random.default_rng(15)
    keep: list = []
    for m, k, n in ((7, 19, 5), (13, 37, gemm.tile_shape(4)[1] + 3), (6, 16, 1)):
        left = _guarded(_values(rng, (2, m, k), np.float32), at_end, keep)
        right = _values(rng, (2, k, n), np.float32)
        if transposed:      # B's columns contiguous: the in-register transposes
            right = np.swapaxes(_guarded(np.ascontiguousarray(np.swapaxes(right, 1, 2)),
                                         at_end, keep), 1, 2)
        else:
            right = _guarded(right, at_end, keep)
        out = np.empty((2, m, n), np.float32)
        gemm.batched_product(runners[4], left, right, out, 2)
        _close(out, left, right)


def test_background_mode_uses_numpy_until_the_runner_is_ready(tmp_path):
    """A fresh process, REARRANGE_JIT unset (background) and an empty cache: the first
    products are numpy.matmul's (the caller's thread never compiles nor imports numba),
    the runner is compiled out of the way, and once ready the products are its."""
    build_tests = pytest.importorskip("test_jit_builds")
    report = build_tests.run("""
        from rearrange.backends import ndarray
        from rearrange.kernel import gemm
        ndarray.GEMM_MIN_VECTOR_BYTES = 0       # routed on any build (as the module's)
        ra.set_num_threads(2)
        rng = np.random.default_rng(16)
        q = rng.standard_normal((4, 2, 128, 64), dtype=np.float32)
        k = rng.standard_normal((4, 2, 128, 64), dtype=np.float32)
        want = np.einsum("bhtd,bhsd->bhts", q.astype(np.float64), k.astype(np.float64))
        ran = []
        real = gemm.run_product
        gemm.run_product = lambda *a, **kw: (ran.append(1), real(*a, **kw))[1]

        def close():
            got = ra.einsum(q, k, "b h t d, b h s d -> b h t s")
            return bool(np.allclose(got, want, rtol=1e-4, atol=1e-4))
        first = [close(), close()]
        numba_in_call = "numba" in sys.modules
        status = [builds.status(gemm.FAMILY, 4)]
        ran_before = len(ran)
        assert K.wait(600)
        status.append(builds.status(gemm.FAMILY, 4))
        later = [close(), close()]
        print(json.dumps({"close": first + later, "numba_in_call": numba_in_call,
                          "status": status, "ran": [ran_before, len(ran)]}))
    """, tmp_path / "cache")
    assert report == {"close": [True] * 4, "numba_in_call": False,
                      "status": ["compiling", "ready"], "ran": [0, 2]}


def test_routed_only_where_built_for_avx512(monkeypatch):
    """The rule takes the attention product where the runners are built for 64-byte
    vectors, never for 32-byte ones (AVX2: not measured ahead)."""
    monkeypatch.setattr(ndarray, "GEMM_MIN_VECTOR_BYTES", 64)
    assert compiled_product_takes(64, 256, 64, 256, np.float32, 64)
    assert not compiled_product_takes(64, 256, 64, 256, np.float32, 32)
    monkeypatch.setattr(kernel.plan, "VECTOR_BYTES", 32)       # the build's width
    assert not compiled_product_takes(64, 256, 64, 256, np.float32)
    monkeypatch.setattr(kernel.plan, "VECTOR_BYTES", 64)
    assert compiled_product_takes(64, 256, 64, 256, np.float32)
    text = str(ra.explain([(8, 8, 256, 64), (8, 8, 256, 64)], ATTENTION, op="einsum",
                          dtype="float32"))
    assert "where the kernel is built for AVX-512, in its place the compiled batched" in text
