"""einsum's path of three or more operands with its two-operand steps on the compiled
batched product (rearrange/backends/ndarray.py: ``_path_runner``, ``step_product``,
``_compiled_step``) and the runner's blocking (rearrange/kernel/gemm.py: K in blocks,
work units of row blocks x column blocks) — issue #39's chain ``b i j, j k, k l -> b i l``.

The oracles are numpy's ``einsum(optimize=True)`` in float64, ``matmul`` and einops'
``einsum``; the runner sums each element over K in order with a fused multiply-add per
step, so results are compared within the rounding of the sums: per step ``4 K eps`` of
the same einsum over the operands' magnitudes. Which steps ran on the runner is read from
a spy on its entry (``gemm.run_product``), never from a timing.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import einops
import rearrange as ra
from rearrange import kernel
from rearrange.backends import ndarray
from rearrange.backends.ndarray import StepProduct, step_product
from rearrange.kernel import builds, gemm
from test_gemm import products, restored, routed_on_any_build, runners  # noqa: F401 - fixtures

CHAIN = "b i j, j k, k l -> b i l"
NR32 = gemm.tile_shape(4)[1]        # a panel's columns, float32 (64 on AVX-512)
MR = gemm.tile_shape(4)[0]


def _values(rng, shape, dtype=np.float32) -> np.ndarray:
    return rng.standard_normal(shape).astype(dtype)


def _close_einsum(got, subscripts: str, operands, dtype=np.float32) -> None:
    """``got`` equals numpy.einsum(optimize=True) of ``operands`` in float64 within the
    rounding of each step's sums in ``dtype``: 4 eps per summed element of each summed
    letter, on the einsum of the operands' magnitudes (which bounds every partial sum)."""
    wide = [np.asarray(x, np.float64) for x in operands]
    want = np.einsum(subscripts, *wide, optimize=True)
    bound = np.einsum(subscripts, *[np.abs(x) for x in wide], optimize=True)
    terms, out = subscripts.split("->")
    sizes = {c: n for term, x in zip(terms.split(","), operands) for c, n in zip(term, x.shape)}
    summed = sum(sizes[c] for c in sizes if c not in out)
    eps = np.finfo(dtype).eps
    assert got.shape == want.shape and got.dtype == np.dtype(dtype)
    assert np.all(np.abs(got - want) <= 4 * summed * eps * bound + 1e-30)
    # numpy's own float32 path agrees within the same bound (twice: both round)
    own = np.einsum(subscripts, *operands, optimize=True)
    assert np.all(np.abs(got - own) <= 8 * summed * eps * bound + 1e-30)


# ---------------------------------------------------------------------- the runner's blocking


def _layout(x: np.ndarray, how: str) -> np.ndarray:
    if how == "c":
        return x
    if how == "t":
        return np.ascontiguousarray(np.swapaxes(x, -1, -2)).swapaxes(-1, -2)
    if how == "neg":
        return np.ascontiguousarray(x[::-1, ::-1, ::-1])[::-1, ::-1, ::-1]
    if how == "slice":
        big = np.zeros(tuple(2 * n for n in x.shape), x.dtype)
        big[::2, ::2, ::2] = x
        return big[::2, ::2, ::2]
    raise ValueError(how)


def _close(got, left, right) -> None:
    want = np.matmul(left.astype(np.float64), right.astype(np.float64))
    bound = np.matmul(np.abs(left.astype(np.float64)), np.abs(right.astype(np.float64)))
    eps = np.finfo(got.dtype).eps
    assert np.all(np.abs(got - want) <= 4 * max(left.shape[-1], 1) * eps * bound + 1e-30)


@pytest.mark.parametrize("k", [1, 127, 128, 129, 255, 256, 257, 383, 384, 385, 511, 512,
                               513, 1023, 1024])
@pytest.mark.parametrize("threads", [1, 2])
def test_k_blocks_edges(runners, k, threads):
    """K just below, at and above each multiple of the K block (INNER_BLOCK: the tile
    accumulated over blocks, the first storing, later ones adding), whole tiles and edge
    tiles (M, N not multiples of the tile): numpy.matmul's product within rounding."""
    rng = np.random.default_rng(k)
    for dtype in (np.float32, np.float64):
        left, right = _values(rng, (1, 6 * 9 + 5, k), dtype), _values(rng, (1, k, 130), dtype)
        out = np.full((1, left.shape[1], 130), np.nan, dtype)
        gemm.batched_product(runners[np.dtype(dtype).itemsize], left, right, out, threads)
        _close(out, left, right)


@settings(max_examples=60, deadline=None)
@given(batch=st.integers(1, 3), m=st.integers(1, 70), k=st.integers(0, 40),
       n=st.integers(1, 200), inner_block=st.integers(1, 17),
       row_block_bytes=st.sampled_from([1, 200, 1000, 1 << 20]),
       pack_bytes=st.sampled_from([1, 3000, 1 << 20]),
       left_layout=st.sampled_from(["c", "t", "neg", "slice"]),
       right_layout=st.sampled_from(["c", "t", "neg", "slice"]),
       threads=st.integers(1, 3), seed=st.integers(0, 2**16))
def test_any_blocking_gives_the_product(runners, batch, m, k, n, inner_block,
                                        row_block_bytes, pack_bytes, left_layout,
                                        right_layout, threads, seed):
    """Every blocking (K blocks of any size, K not a multiple of them; row blocks of one
    tile up to all rows; one panel a column block up to all of them) and any strides:
    the same product, the operands untouched."""
    rng = np.random.default_rng(seed)
    dtype = np.float32 if seed % 2 else np.float64
    left = _layout(_values(rng, (batch, m, k), dtype), left_layout)
    right = _layout(_values(rng, (batch, k, n), dtype), right_layout)
    before = (left.copy(), right.copy())
    out = np.full((batch, m, n), np.nan, dtype)
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(gemm, "INNER_BLOCK", inner_block)
        monkeypatch.setattr(gemm, "ROW_BLOCK_BYTES", row_block_bytes)
        monkeypatch.setattr(gemm, "PACK_BYTES", pack_bytes)
        gemm.batched_product(runners[np.dtype(dtype).itemsize], left, right, out, threads)
    _close(out, left, right)
    np.testing.assert_array_equal(left, before[0])
    np.testing.assert_array_equal(right, before[1])


@pytest.mark.parametrize("count,panels,m,k,itemsize,threads", [
    (1, 4, 16384, 256, 4, 2), (1, 4, 16384, 256, 4, 1), (64, 4, 256, 64, 4, 2),
    (1, 4, 100, 512, 8, 2), (1, 1000, 5000, 300, 4, 2), (3, 1, 5, 0, 4, 3),
    (1, 2, 7, 129, 4, 2), (2, 9, 3000, 1, 8, 2)])
def test_blocking_keeps_its_invariants(count, panels, m, k, itemsize, threads):
    """K blocks equal, at most INNER_BLOCK, covering K; row blocks whole tiles (or all
    the rows) within ROW_BLOCK_BYTES of A unless one tile is more; column blocks within
    PACK_BYTES unless one panel is more; work for every thread where the rows allow."""
    block_panels, row_block, inner = gemm.blocking(count, panels, m, k, itemsize, threads)
    depth = max(k, 1)
    blocks = -(-depth // inner)
    assert inner <= gemm.INNER_BLOCK and blocks * inner >= depth > (blocks - 1) * inner
    assert row_block == m or (row_block % MR == 0 and row_block < m)
    assert row_block <= max(MR, gemm.ROW_BLOCK_BYTES // (depth * itemsize)) or row_block == m
    nr = gemm.tile_shape(itemsize)[1]
    assert 1 <= block_panels <= panels
    assert block_panels == 1 or block_panels * depth * nr * itemsize <= gemm.PACK_BYTES
    units = count * -(-panels // block_panels) * -(-m // row_block)
    assert units >= min(gemm.UNITS_PER_THREAD * threads, count * -(-panels // block_panels)
                        * -(-m // MR))


# ---------------------------------------------------------------------- a step as a product


@pytest.mark.parametrize("subscripts,left_shape,right_shape", [
    ("ij,jk->ik", (5, 7), (7, 3)),
    ("kl,jk->lj", (7, 3), (5, 7)),           # operands' letters in any order
    ("lj,ij->il", (3, 5), (4, 5)),           # the output (columns, rows): transposed
    ("abc,cd->abd", (2, 3, 4), (4, 5)),      # rows grouped
    ("bij,bjk->bik", (2, 3, 4), (2, 4, 5)),  # a batch letter
    ("hbij,bhjk->bhki", (2, 3, 4, 5), (3, 2, 5, 6)),    # batch letters, transposed
    ("i,i->", (6,), (6,)),                   # a dot product: M = N = 1
    ("ij,kl->ijkl", (2, 3), (4, 5)),         # an outer product: K = 1
])
def test_step_product_is_the_step(subscripts, left_shape, right_shape):
    """A step that is a batched product: its operands permuted and grouped as the form
    says, multiplied (numpy.matmul), reshaped to the output: numpy.einsum's result."""
    rng = np.random.default_rng(1)
    left, right = _values(rng, left_shape, np.float64), _values(rng, right_shape, np.float64)
    form = step_product(subscripts, left_shape, right_shape)
    assert isinstance(form, StepProduct)
    a = left.transpose(form.left_order).reshape(*form.batch, form.rows, form.inner)
    b = right.transpose(form.right_order).reshape(*form.batch, form.inner, form.columns)
    if form.transposed:
        a, b = b.swapaxes(-1, -2), a.swapaxes(-1, -2)
    got = np.matmul(a, b).reshape(form.out_shape)
    np.testing.assert_allclose(got, np.einsum(subscripts, left, right), rtol=1e-12)


@pytest.mark.parametrize("subscripts,left_shape,right_shape", [
    ("ii,ij->ij", (3, 3), (3, 4)),           # a diagonal
    ("ijx,jk->ik", (2, 3, 4), (3, 5)),       # x summed within one operand
    ("ij,jk->ik", (2, 1), (3, 4)),           # a size-1 j broadcast against 3
    ("bij,bjk->ibk", (2, 3, 4), (2, 4, 5)),  # the batch letter not first in the output
    ("ijl,jk->ikl", (2, 3, 4), (3, 5)),     # rows split by a column
    ("i...,i->...", (2, 3), (2,)),           # '...'
    ("ij,jk,kl->il", (2, 3), (3, 4)),        # not two operands
])
def test_step_product_refuses_what_is_not_one(subscripts, left_shape, right_shape):
    assert step_product(subscripts, left_shape, right_shape) is None


# ---------------------------------------------------------------------- through einsum


def test_the_chain_runs_both_products_on_the_runner(runners, products, restored):
    """#39's chain (smaller batch): (j, k) @ (k, l) then (b i, j) @ (j, l), each on the
    runner, at one thread and at two; numpy's and einops' einsum agree; the inputs
    untouched; explain names both steps."""
    rng = np.random.default_rng(2)
    a, m1, m2 = _values(rng, (8, 64, 256)), _values(rng, (256, 256)), _values(rng, (256, 256))
    before = [x.copy() for x in (a, m1, m2)]
    for threads in (1, 2):
        kernel.set_num_threads(threads)
        products.clear()
        got = ra.einsum(a, m1, m2, CHAIN)
        _close_einsum(got, "bij,jk,kl->bil", [a, m1, m2])
        assert got.flags.c_contiguous
        assert sorted((left, right) for left, right, _ in products) == \
            [((256, 256), (256, 256)), ((512, 256), (256, 256))]
        assert all(t == threads for _, _, t in products)
    via_einops = einops.einsum(a, m1, m2, "b i j, j k, k l -> b i l")
    np.testing.assert_allclose(got, via_einops, rtol=1e-3, atol=1e-2)
    for x, y in zip((a, m1, m2), before):
        np.testing.assert_array_equal(x, y)
    text = str(ra.explain([a, m1, m2], CHAIN, op="einsum"))
    assert "path steps 1 " in text and ", 2 " in text and "compiled batched product" in text


def test_a_steps_form_is_found_once_per_plan(runners, products, restored, monkeypatch):
    """A plan's path runner finds each two-operand step's product form and the runner's
    parameters for it on its first call and keeps them: repeated calls (values changed,
    float32 and float64 plans in turn) run both products on the runner with no new
    analysis, each numpy's result."""
    seen, parameters = [], []
    real = ndarray._step_form
    monkeypatch.setattr(ndarray, "_step_form",
                        lambda subscripts, left, right: seen.append(left.dtype) or
                        real(subscripts, left, right))
    real_call = gemm.product_call
    monkeypatch.setattr(gemm, "product_call",
                        lambda *args, **kwargs: parameters.append(args[2]) or
                        real_call(*args, **kwargs))
    ra.cache_clear()                    # new plans: their runners learn their steps here
    rng = np.random.default_rng(4)
    for round_ in range(3):
        for dtype in (np.float32, np.float64):
            a, m1, m2 = (_values(rng, shape, dtype)
                         for shape in ((8, 64, 256), (256, 256), (256, 256)))
            products.clear()
            got = ra.einsum(a, m1, m2, CHAIN)
            _close_einsum(got, "bij,jk,kl->bil", [a, m1, m2], dtype)
            assert len(products) == 2
        assert len(seen) == 4           # two steps of two plans, on the first round only
        assert sorted(parameters) == [4, 4, 8, 8]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("j,runs", [
    (31, []),                                   # step 2's K = 31, step 1's N = 31: numpy
    (32, [((1024, 32), (32, 256))]),            # step 2's K = 32: the runner; step 1 N < NR
    (64, [((256, 256), (256, 64)), ((1024, 64), (64, 256))]),  # both (N = one panel)
])
def test_summed_and_column_bounds_through_the_chain(runners, products, restored, j, runs,
                                                    threads):
    """``i j, j k, k l -> i l`` at i = 1024, k = l = 256: numpy's path takes (j k)(k l)
    first, a (l, k) @ (k, j) product (N = j), then (i, j) @ (j, l) (K = j). The runner
    runs exactly the steps its rule takes: K >= 32 and N at least a panel; the result
    numpy's either way, and explain names exactly those steps."""
    kernel.set_num_threads(threads)
    rng = np.random.default_rng(j)
    x, y, z = _values(rng, (1024, j)), _values(rng, (j, 256)), _values(rng, (256, 256))
    got = ra.einsum(x, y, z, "i j, j k, k l -> i l")
    _close_einsum(got, "ij,jk,kl->il", [x, y, z])
    assert sorted((left, right) for left, right, _ in products) == sorted(runs)
    text = str(ra.explain([x, y, z], "i j, j k, k l -> i l", op="einsum"))
    assert text.count("compiled batched product") == (1 if runs else 0)
    assert ("path steps " in text) is (len(runs) == 2)
    assert ("path step 2 " in text) is (len(runs) == 1)


@pytest.mark.parametrize("k,taken", [(1024, True), (1025, False)])
def test_longest_summed_dim_through_the_chain(runners, products, restored, k, taken):
    """A step summing K = 1024 runs on the runner, 1025 on numpy.einsum
    (GEMM_MAX_INNER)."""
    rng = np.random.default_rng(k)
    x, y, z = _values(rng, (512, k)), _values(rng, (k, 128)), _values(rng, (128, 128))
    got = ra.einsum(x, y, z, "i j, j k, k l -> i l")
    _close_einsum(got, "ij,jk,kl->il", [x, y, z])
    summed = [left[-1] for left, _, _ in products]
    assert (k in summed) is taken


@pytest.mark.parametrize("rows,taken", [(15, False), (16, True)])
def test_fewest_rows_through_a_chain(runners, products, restored, rows, taken):
    """A step with 15 rows stays numpy's (GEMM_MIN_ROWS), 16 go to the runner."""
    rng = np.random.default_rng(rows)
    x, y, z = _values(rng, (rows, 64)), _values(rng, (64, 64)), _values(rng, (64, 8192))
    got = ra.einsum(x, y, z, "i j, j k, k l -> i l")
    _close_einsum(got, "ij,jk,kl->il", [x, y, z])
    assert (rows in [left[-2] for left, _, _ in products]) is taken


def test_small_results_keep_one_numpy_einsum(runners, products, restored):
    """A result below PAIRWISE_MIN_BYTES is contracted by one numpy.einsum call (no
    steps, so no runner), above it step by step with the runner: both numpy's."""
    rng = np.random.default_rng(5)
    m1, m2 = _values(rng, (256, 256)), _values(rng, (256, 256))
    for batch, taken in ((1, False), (4, True)):     # 64 KiB and 256 KiB results
        a = _values(rng, (batch, 64, 256))
        products.clear()
        got = ra.einsum(a, m1, m2, CHAIN)
        _close_einsum(got, "bij,jk,kl->bil", [a, m1, m2])
        assert bool(products) is taken
        assert ("compiled batched product" in str(ra.explain([a, m1, m2], CHAIN,
                                                             op="einsum"))) is taken


def test_output_orders_and_layouts(runners, products, restored):
    """Outputs whose last step is (columns, rows) (the product transposed: still the
    runner) or a mix (numpy.einsum for that step, the first still the runner); operands
    transposed, sliced, reversed (negative strides) and broadcast; batch letters."""
    kernel.set_num_threads(2)
    rng = np.random.default_rng(6)
    a = _values(rng, (4, 64, 512))[:, :, ::-2]                  # negative, sliced j
    m1 = np.ascontiguousarray(_values(rng, (256, 256)).T).T     # column-major
    m2 = _values(rng, (512, 512))[::2, 1::2]                    # sliced
    cases = [
        (CHAIN, "bij,jk,kl->bil", 2),
        ("b i j, j k, k l -> l b i", "bij,jk,kl->lbi", 2),     # (columns, rows)
        ("b i j, j k, k l -> b l i", "bij,jk,kl->bli", 1),     # mixed: numpy's last step
    ]
    for pattern, subscripts, runs in cases:
        products.clear()
        got = ra.einsum(a, m1, m2, pattern)
        _close_einsum(got, subscripts, [a, m1, m2])
        assert len(products) == runs, pattern
    q = _values(rng, (2, 4, 256, 64))
    k = np.swapaxes(_values(rng, (2, 4, 64, 256)), -1, -2)
    v = np.broadcast_to(_values(rng, (1, 4, 256, 64)), (2, 4, 256, 64))
    products.clear()
    got = ra.einsum(q, k, v, "b h t d, b h s d, b h s e -> b h t e")
    _close_einsum(got, "bhtd,bhsd,bhse->bhte", [q, k, v])
    assert len(products) == 2
    via_einops = einops.einsum(q, k, v, "b h t d, b h s d, b h s e -> b h t e")
    np.testing.assert_allclose(got, via_einops, rtol=1e-3, atol=1e-2)


def test_a_grouping_that_is_not_a_view_keeps_numpys_step(runners, products, restored):
    """Rows whose letters cannot be grouped by a reshape of the operand's strides (a
    copy would be needed): that step numpy.einsum's, the result numpy's."""
    rng = np.random.default_rng(7)
    a = np.swapaxes(_values(rng, (64, 8, 256)), 0, 1)           # (b, i, j): b, i swapped
    m1, m2 = _values(rng, (256, 256)), _values(rng, (256, 256))
    got = ra.einsum(a, m1, m2, CHAIN)
    _close_einsum(got, "bij,jk,kl->bil", [a, m1, m2])
    assert [(left, right) for left, right, _ in products] == [((256, 256), (256, 256))]


@pytest.mark.parametrize("dtype", [np.float64, np.float16, np.int32, np.complex64])
def test_other_dtypes_through_the_chain(runners, products, restored, dtype):
    """float64 on its runner; float16, int32, complex64 numpy.einsum's steps, its
    results."""
    rng = np.random.default_rng(8)
    shapes = (4, 64, 256), (256, 256), (256, 256)
    if np.dtype(dtype).kind == "i":
        ops = [rng.integers(-3, 3, s).astype(dtype) for s in shapes]
    elif np.dtype(dtype).kind == "c":
        ops = [(rng.standard_normal(s) + 1j * rng.standard_normal(s)).astype(dtype)
               for s in shapes]
    else:
        ops = [_values(rng, s, dtype) for s in shapes]
    got = ra.einsum(*ops, CHAIN)
    if dtype == np.float64:
        _close_einsum(got, "bij,jk,kl->bil", ops, np.float64)
        assert len(products) == 2
    else:
        want = np.einsum("bij,jk,kl->bil", *ops, optimize=True)
        assert got.dtype == want.dtype
        tolerance = {np.float16: 1.0, np.int32: 0, np.complex64: 1e-2}[dtype]
        np.testing.assert_allclose(got, want, rtol=1e-2 if tolerance else 0, atol=tolerance)
        assert products == []


def test_off_not_ready_and_subclasses(runners, products, monkeypatch, restored):
    """REARRANGE_JIT=off, the runner not ready (builds gives none) and an ndarray
    subclass operand: every step numpy.einsum's, its result; then the runner."""
    rng = np.random.default_rng(9)
    a, m1, m2 = _values(rng, (4, 64, 256)), _values(rng, (256, 256)), _values(rng, (256, 256))
    ra.set_jit_mode("off")
    _close_einsum(ra.einsum(a, m1, m2, CHAIN), "bij,jk,kl->bil", [a, m1, m2])
    ra.set_jit_mode("eager")
    real = builds.runner_for
    monkeypatch.setattr(builds, "runner_for", lambda family, unit: None
                        if family == gemm.FAMILY else real(family, unit))
    _close_einsum(ra.einsum(a, m1, m2, CHAIN), "bij,jk,kl->bil", [a, m1, m2])
    monkeypatch.setattr(builds, "runner_for", real)

    class Sub(np.ndarray):
        pass

    got = ra.einsum(a.view(Sub), m1.view(Sub), m2.view(Sub), CHAIN)
    _close_einsum(np.asarray(got), "bij,jk,kl->bil", [a, m1, m2])
    assert products == []
    ra.einsum(a, m1, m2, CHAIN)
    assert len(products) == 2


class _OldReshape(np.ndarray):
    """An array whose reshape has no ``copy=`` keyword, as numpy's before 2.1."""

    def reshape(self, *shape, **options):
        if options:
            raise TypeError("reshape() got an unexpected keyword argument 'copy'")
        return super().reshape(*shape)


@pytest.mark.parametrize("old", [False, True])
def test_view_as_gives_views_or_none(old):
    """A grouping the strides allow: a view of the same memory, with numpy's reshape
    values; one that needs a copy: None — with numpy's copy= keyword and without."""
    from rearrange.backends.ndarray import _view_as

    x = np.arange(4 * 8 * 16, dtype=np.float32).reshape(4, 8, 16)
    if old:
        x = x.view(_OldReshape)
    grouped = _view_as(x, (32, 16))
    assert grouped is not None and np.shares_memory(grouped, x)
    np.testing.assert_array_equal(np.asarray(grouped), np.asarray(x).reshape(32, 16))
    assert _view_as(x.swapaxes(0, 1), (32, 16)) is None
    assert x.shape == (4, 8, 16)
