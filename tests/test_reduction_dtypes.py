"""Every named reduction on every integer, bool, float and complex dtype, on every
backend, against an oracle: numpy's own function (logsumexp: numpy's float64
``log(sum(exp(x)))`` computed stably), and einops on torch where torch's promotion is
the documented result (integer sum and prod). The dtypes asserted are the ones
docs/reduce.md documents."""

from __future__ import annotations

import warnings

import array_api_strict
import dask.array as da
import einops
import numpy as np
import pytest
import torch

import rearrange as ra

REDUCTIONS = ("sum", "mean", "prod", "min", "max", "any", "all", "var", "std", "argmax",
              "argmin", "count_nonzero", "logsumexp")
INTEGERS = ("bool", "uint8", "int8", "int16", "int32", "int64", "uint64")
FLOATS = ("float16", "float32", "float64", "complex64", "complex128")
BACKENDS = ("numpy", "tensor", "torch", "dask", "array_api")

# float16 products of random draws overflow to inf on every backend alike
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")

# What a backend cannot do, as documented in docs/reduce.md: a RearrangeError.
ORDERED = ("min", "max", "argmax", "argmin")
UNSUPPORTED = {
    "torch": {("uint64", r) for r in ORDERED} | {(c, r) for c in ("complex64", "complex128")
                                                   for r in ORDERED},
    "array_api": {(c, r) for c in ("complex64", "complex128") for r in ORDERED},
}


def _values(dtype: str, shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    """Random draws that include the dtype's extreme values."""
    rng = np.random.default_rng(seed)
    size = int(np.prod(shape))
    if dtype == "bool":
        return rng.integers(0, 2, size).astype(bool).reshape(shape)
    kind = np.dtype(dtype).kind
    if kind in "iu":
        info = np.iinfo(dtype)
        edges = np.array([info.min, info.max, 0, 1, info.max - 1], dtype=dtype)
        small = rng.integers(max(info.min, -100), min(info.max, 100), size, dtype=dtype)
        values = np.concatenate([edges, small])[:size]
        return rng.permutation(values).reshape(shape)
    real = rng.standard_normal(size) * 4
    if kind == "c":
        return (real + 1j * rng.standard_normal(size) * 4).astype(dtype).reshape(shape)
    return real.astype(dtype).reshape(shape)


def _logsumexp_oracle(x: np.ndarray, axis: tuple[int, ...]) -> np.ndarray:
    """numpy's float64 log(sum(exp(x))) (complex128 for complex), shifted by the peak of
    the real parts so that exp never overflows."""
    y = x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)
    if y.size == 0:
        with np.errstate(divide="ignore"):
            return np.log(np.sum(np.exp(y), axis=axis))
    peak = np.max(y.real, axis=axis, keepdims=True)
    total = np.sum(np.exp(y - peak), axis=axis)
    with np.errstate(divide="ignore"):
        return np.log(total) + np.squeeze(peak, axis=axis)


def _numpy_oracle(x: np.ndarray, reduction: str, axis: tuple[int, ...]) -> np.ndarray:
    """The documented result: numpy's own function, its dtype; logsumexp in float64 for
    integers and bools, in the input's dtype for floats."""
    if reduction == "logsumexp":
        value = _logsumexp_oracle(x, axis)
        if x.dtype.kind in "fc":
            value = value.astype(x.dtype)
        return np.asarray(value)
    if reduction == "count_nonzero":
        return np.asarray(np.count_nonzero(x, axis=axis))
    if reduction in ("argmax", "argmin"):
        return np.asarray(getattr(x, reduction)(axis=axis[0]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)    # mean of an empty slice: nan
        return np.asarray(getattr(x, reduction)(axis=axis))


def _to_backend(x: np.ndarray, backend: str):
    if backend == "numpy":
        return x
    if backend == "tensor":
        return ra.tensor(x)
    if backend == "torch":
        return torch.from_numpy(x.copy())
    if backend == "dask":
        return da.from_array(x, chunks=2 if x.size <= 1000 else "auto")  # many small blocks
    return array_api_strict.asarray(x)


def _from_backend(y, backend: str) -> np.ndarray:
    if backend == "tensor":
        return y.numpy()
    if backend == "torch":
        return y.numpy()
    if backend == "dask":
        return np.asarray(y.compute())
    return np.asarray(y)


def _expected(x: np.ndarray, reduction: str, axis: tuple[int, ...], backend: str,
              pattern: str) -> np.ndarray:
    if backend == "torch" and reduction in ("sum", "prod"):
        # torch's own promotion (every integer sum is int64), which einops gives too
        return einops.reduce(torch.from_numpy(x.copy()), pattern, reduction).numpy()
    return _numpy_oracle(x, reduction, axis)


def _tolerance(dtype: np.dtype) -> dict:
    if dtype in (np.float16, np.complex64) or dtype == np.float32:
        return {"rtol": 2e-3 if dtype == np.float16 else 1e-5, "atol": 1e-6}
    return {"rtol": 1e-9, "atol": 0}


def _rounding(x: np.ndarray, reduction: str, eps: float) -> float:
    """The absolute error of a float sum of ``x``'s elements (mean, var, std of
    integers near their extremes cancel: any summation order is as right)."""
    if x.dtype.kind not in "biu" or x.size == 0 or reduction not in ("mean", "var", "std"):
        return 0.0
    scale = float(np.max(np.abs(x.astype(np.float64))))
    return eps * x.size * (scale * scale if reduction == "var" else scale)


def _assert_matches(got: np.ndarray, expected: np.ndarray, reduction: str,
                    x: np.ndarray | None = None) -> None:
    assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
    assert got.shape == expected.shape
    if x is not None and _rounding(x, reduction, 1e-15):
        np.testing.assert_allclose(got, expected, rtol=1e-9, atol=_rounding(x, reduction, 1e-15))
        return
    if got.dtype.kind == "c" and reduction == "logsumexp":
        # a complex log is defined up to 2*pi*i: compare the real parts and the phases
        np.testing.assert_allclose(got.real, expected.real, **_tolerance(got.dtype))
        np.testing.assert_allclose(np.exp(1j * got.imag), np.exp(1j * expected.imag),
                                   **_tolerance(got.dtype))
    elif got.dtype.kind in "fc":
        np.testing.assert_allclose(got, expected, equal_nan=True, **_tolerance(got.dtype))
    else:
        np.testing.assert_array_equal(got, expected)


CASES = [(backend, dtype, reduction) for backend in BACKENDS for dtype in INTEGERS + FLOATS
         for reduction in REDUCTIONS
         if not (backend == "array_api" and dtype == "float16")]   # not in the standard


# The quick tier (-m "not slow") keeps the two reduced axes for every backend, dtype and
# reduction; the single-axis patterns run in the full suite.
@pytest.mark.parametrize("pattern, axis", [
    pytest.param("a b -> a", (1,), marks=pytest.mark.slow),
    pytest.param("a b -> b", (0,), marks=pytest.mark.slow),
    ("a b c -> a", (1, 2))])
@pytest.mark.parametrize("backend, dtype, reduction", CASES)
def test_reduction_values_and_dtypes(backend, dtype, reduction, pattern, axis) -> None:
    if reduction in ("argmax", "argmin") and len(axis) > 1:
        pattern, axis = "a b c -> a c", (1,)    # one reduced axis: b, numpy's axis 1
    shape = (3, 4, 5) if pattern.startswith("a b c") else (4, 6)
    x = _values(dtype, shape)
    array = _to_backend(x, backend)
    if (dtype, reduction) in UNSUPPORTED.get(backend, ()):
        with pytest.raises(ra.RearrangeError, match=f"reduction {reduction} failed"):
            _from_backend(ra.reduce(array, pattern, reduction), backend)
        return
    got = _from_backend(ra.reduce(array, pattern, reduction), backend)
    expected = _expected(x, reduction, axis, backend, pattern)
    _assert_matches(np.asarray(got), expected, reduction, x)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype, values, expected", [
    ("uint8", [0, 1], np.log1p(np.e)),
    ("uint8", [255, 255], 255 + np.log(2)),
    ("int8", [-100, 100], 100.0),
    ("int8", [-128, 127], 127.0),
    ("int16", [-32768, 32767], 32767.0),
    ("int64", [2 ** 62, 2 ** 62], 2.0 ** 62),
    ("uint64", [2 ** 64 - 1, 0], 2.0 ** 64),
    ("bool", [True, False], np.log1p(np.e)),
])
def test_integer_logsumexp_is_float64_and_never_overflows(backend, dtype, values,
                                                          expected) -> None:
    x = np.array(values, dtype=dtype)
    got = np.asarray(_from_backend(ra.reduce(_to_backend(x, backend), "a ->", "logsumexp"),
                                   backend))
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, expected, rtol=1e-15)


@pytest.mark.parametrize("backend", ("numpy", "torch", "dask"))
def test_float16_logsumexp_of_many_terms_is_finite(backend) -> None:
    x = np.zeros((2, 100_000), dtype=np.float16)
    got = np.asarray(_from_backend(ra.reduce(_to_backend(x, backend), "a b -> a", "logsumexp"),
                                   backend))
    assert got.dtype == np.float16
    np.testing.assert_allclose(got, np.log(100_000), rtol=1e-3)


# Reductions over zero elements: numpy's identities where it has them, nan for the
# moments (mean, var, std), and a RearrangeError where numpy has no identity.
EMPTY = {"sum": 0, "prod": 1, "any": False, "all": True, "count_nonzero": 0,
         "logsumexp": -np.inf, "mean": np.nan, "var": np.nan, "std": np.nan}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", ("int8", "bool", "float32"))
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_reduction_over_zero_elements(backend, dtype, reduction) -> None:
    x = np.zeros((3, 0), dtype=dtype)
    array = _to_backend(x, backend)
    if reduction not in EMPTY:
        with pytest.raises(ra.RearrangeError):
            _from_backend(ra.reduce(array, "a b -> a", reduction), backend)
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        got = np.asarray(_from_backend(ra.reduce(array, "a b -> a", reduction), backend))
    expected = _expected(x, reduction, (1,), backend, "a b -> a")
    _assert_matches(got, expected, reduction)
    np.testing.assert_array_equal(got, np.full(3, EMPTY[reduction]))


# ---------------------------------------------------------------------- jax

JAX_DTYPES = ("bool", "uint8", "int8", "int16", "int32", "float16", "float32", "complex64")
JAX_QUICK = ("bool", "int32", "float32", "complex64")    # the quick tier's (-m "not slow")


@pytest.mark.parametrize("dtype", [d if d in JAX_QUICK else pytest.param(d, marks=pytest.mark.slow)
                                   for d in JAX_DTYPES])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_jax_without_x64_gives_its_default_dtypes(dtype, reduction) -> None:
    """jax without ``jax_enable_x64`` has no float64 or int64: integer means (var,
    std, logsumexp) are its default float, float32, and sums its default int, as
    docs/reduce.md says; the values are numpy's to float32 precision."""
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    if jax.config.jax_enable_x64:
        pytest.skip("jax_enable_x64 is set")
    x = _values(dtype, (4, 6))
    if dtype == "int32":
        x = x // 4    # jax sums int32 in int32: keep numpy's int64 sum in range
    if np.dtype(dtype).kind in "iu":
        x = np.clip(x, -50, 50).astype(dtype) if reduction == "prod" else x
    array = jnp.asarray(x)
    if dtype == "complex64" and reduction in ("argmax", "argmin"):   # jax has min, max
        with pytest.raises(ra.RearrangeError):
            ra.reduce(array, "a b -> a", reduction)
        return
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # no "float64 truncated to float32"
        got = np.asarray(ra.reduce(array, "a b -> a", reduction))
    expected = _numpy_oracle(x, reduction, (1,))
    if reduction in ("mean", "var", "std", "logsumexp") and dtype in INTEGERS:
        assert got.dtype == np.float32
    elif reduction in ("sum", "prod"):
        assert got.dtype == jnp.sum(array).dtype
    elif expected.dtype.kind in "fcb":
        assert got.dtype == expected.dtype
    if reduction == "prod" and dtype in INTEGERS:
        expected = expected.astype(got.dtype)    # wraps in 32 bits as jax multiplies
    np.testing.assert_allclose(got.astype(expected.dtype) if got.dtype.kind != "b" else got,
                               expected, rtol=2e-3 if dtype == "float16" else 1e-5,
                               atol=max(1e-5, _rounding(x, reduction, 1e-7)))
