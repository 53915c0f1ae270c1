"""einsum on numpy data through BLAS (#39): a batched matrix product of two float or
complex inputs worth BLAS's start-up runs as numpy.matmul on the planner's views; every
other contraction keeps numpy.einsum. Oracles: numpy.einsum and einops on the same data."""

from __future__ import annotations

import numpy as np
import pytest

import rearrange as ra
from rearrange import contraction
from rearrange.contraction import explain_einsum

CASES = [
    # pattern, shapes, lengths, numpy.einsum's subscripts on the inputs split as given
    ("b h t d, b h s d -> b h t s", [(2, 4, 32, 16), (2, 4, 32, 16)], {}, "bhtd,bhsd->bhts"),
    ("b h t d, b h s d -> b t s h", [(2, 4, 32, 16), (2, 4, 32, 16)], {}, "bhtd,bhsd->btsh"),
    ("b h t d, b h s d -> b (h t) s", [(2, 4, 32, 16), (2, 4, 32, 16)], {}, "bhtd,bhsd->bhts"),
    ("b t (h d), b s (h d) -> b h t s", [(2, 32, 64), (2, 32, 64)], {"h": 4}, "bthd,bshd->bhts"),
    ("i j, j k -> k i", [(64, 48), (48, 40)], {}, "ij,jk->ki"),
    ("a b c, c d -> a b d", [(8, 16, 32), (32, 24)], {}, "abc,cd->abd"),
]


def _inputs(shapes, dtype, seed=0):
    rng = np.random.default_rng(seed)
    arrays = []
    for shape in shapes:
        x = rng.standard_normal(shape)
        if np.dtype(dtype).kind == "c":
            x = x + 1j * rng.standard_normal(shape)
        arrays.append(x.astype(dtype))
    return arrays


@pytest.mark.parametrize("pattern, shapes, lengths, subscripts", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64])
def test_matmul_engine_equals_einsum(pattern, shapes, lengths, subscripts, dtype):
    inputs = _inputs(shapes, dtype)
    before = [x.copy() for x in inputs]
    plan = explain_einsum(inputs, pattern, **lengths)
    assert plan.engine == "numpy.matmul"
    got = ra.einsum(*inputs, pattern, **lengths)
    split = [x.reshape(*x.shape[:-1], lengths["h"], -1) if lengths else x for x in inputs]
    expected = np.einsum(subscripts, *split).reshape(got.shape)
    tolerance = 1e-4 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-10
    np.testing.assert_allclose(got, expected, rtol=tolerance, atol=tolerance)
    assert got.dtype == expected.dtype and got.flags.c_contiguous
    for x, y in zip(inputs, before):
        np.testing.assert_array_equal(x, y)
    # the source it prints runs, and gives the same
    names = [f"x{k}" for k in range(len(inputs))]
    source = plan.to_source("numpy", names=names)
    assert "np.matmul(" in source
    np.testing.assert_allclose(eval(source, {"np": np, **dict(zip(names, inputs))}), got,
                               rtol=tolerance, atol=tolerance)


def test_both_sides_of_the_cost_threshold():
    threshold = contraction._OPTIMIZE_MIN_COST
    # a (n, k) @ (k, m) product costs n*k*m multiply-adds
    below = explain_einsum([(31, 32), (32, 32)], "a b, b c -> a c", dtype="float32")
    above = explain_einsum([(32, 32), (32, 32)], "a b, b c -> a c", dtype="float32")
    assert below.cost < threshold <= above.cost
    assert below.engine == "numpy.einsum" and above.engine == "numpy.matmul"
    for shapes in ([(31, 32), (32, 32)], [(32, 32), (32, 32)]):
        x, y = _inputs(shapes, np.float32)
        np.testing.assert_allclose(ra.einsum(x, y, "a b, b c -> a c"), x @ y, rtol=1e-4,
                                   atol=1e-4)


@pytest.mark.parametrize("dtypes", [(np.int64, np.int64), (np.float16, np.float16),
                                    (np.float32, np.float64), (np.bool_, np.bool_)])
def test_other_dtypes_keep_einsum(dtypes):
    rng = np.random.default_rng(1)
    x = (rng.random((64, 64)) * 4).astype(dtypes[0])
    y = (rng.random((64, 64)) * 4).astype(dtypes[1])
    plan = explain_einsum([x, y], "a b, b c -> a c")
    assert plan.engine == "numpy.einsum"
    np.testing.assert_allclose(ra.einsum(x, y, "a b, b c -> a c").astype(np.float64),
                               np.einsum("ab,bc->ac", x, y).astype(np.float64), rtol=1e-2,
                               atol=0.5)


def test_strided_inputs_and_repeated_calls():
    """Caches kept: layouts, dtypes and engines mixed through one pattern."""
    pattern = "b h t d, b h s d -> b h t s"
    for seed, dtype in enumerate([np.float32, np.float64, np.int32, np.float32]):
        q, k = _inputs([(2, 4, 48, 32), (2, 4, 48, 32)], dtype, seed)
        for a, b in ((q, k), (q[:, :, ::-1], k[:, ::-1]), (q.transpose(0, 1, 2, 3).copy(), k)):
            np.testing.assert_allclose(ra.einsum(a, b, pattern),
                                       np.einsum("bhtd,bhsd->bhts", a, b), rtol=1e-4, atol=1e-4)


def test_tensor_inputs_take_the_same_engine():
    q, k = _inputs([(2, 4, 32, 16), (2, 4, 32, 16)], np.float32)
    got = ra.einsum(ra.from_numpy(q), ra.from_numpy(k), "b h t d, b h s d -> b t s h")
    np.testing.assert_allclose(got.numpy(), np.einsum("bhtd,bhsd->btsh", q, k), rtol=1e-4,
                               atol=1e-4)
