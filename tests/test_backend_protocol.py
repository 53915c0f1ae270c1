"""Every backend implements the declared interface (rearrange.backends.protocol.Backend),
and each of its functions does what the interface says, against numpy as the oracle."""

from __future__ import annotations

import importlib
import inspect

import numpy as np
import pytest

import rearrange as ra
from rearrange.backends import ArrayInfo, backend_for
from rearrange.backends.protocol import OPTIONAL_HOOKS, Backend, hook

MODULES = ["ndarray", "tensor", "_numpy_subclass", "_torch", "_dask", "_array_api"]


def _module(name: str):
    return importlib.import_module(f"rearrange.backends.{name}")


@pytest.mark.parametrize("name", MODULES)
def test_every_backend_declares_the_interface(name: str) -> None:
    module = _module(name)
    assert isinstance(module, Backend)
    for function in ("matches", "cache_key", "describe", "lower", "stack", "reshape",
                     "concat", "einsum"):
        declared = inspect.signature(getattr(Backend, function))
        given = inspect.signature(getattr(module, function))
        # the same parameters after ``self``, by kind; defaults may be added
        want = [(p.kind, p.name) for p in list(declared.parameters.values())[1:]]
        got = [(p.kind, p.name) for p in given.parameters.values()]
        assert [k for k, _ in got] == [k for k, _ in want], (name, function, given)
    for optional in OPTIONAL_HOOKS:
        assert callable(hook(module, optional)) or OPTIONAL_HOOKS[optional] is None


def _samples():
    """(backend module name, array of shape (2, 3, 4) with values 0..23, its library's
    ``asarray``)."""
    base = np.arange(24.0, dtype=np.float32).reshape(2, 3, 4)
    out = [("ndarray", base.copy()),
           ("tensor", ra.from_numpy(base.copy())),
           ("_numpy_subclass", np.ma.masked_array(base.copy()))]
    torch = pytest.importorskip("torch")
    out.append(("_torch", torch.from_numpy(base.copy())))
    da = pytest.importorskip("dask.array")
    out.append(("_dask", da.from_array(base.copy(), chunks=(1, 3, 4))))
    xp = pytest.importorskip("array_api_strict")
    out.append(("_array_api", xp.asarray(base.copy())))
    return out


def _values(x) -> np.ndarray:
    return np.asarray(ra.asnumpy(x))


@pytest.fixture(scope="module")
def samples():
    return _samples()


def test_each_sample_finds_its_backend(samples) -> None:
    """backend_for picks the sample's own backend (numpy arrays and Tensors: None, the
    fronts' own paths), although several modules' ``matches`` may accept an array
    (array-API accepts anything with ``__array_namespace__``): the order decides."""
    for name, x in samples:
        expected = None if name in ("ndarray", "tensor") else _module(name)
        assert backend_for(x) is expected, name
        assert _module(name).matches(x)
    assert not _module("ndarray").matches(np.ma.masked_array([1.0]))
    assert not _module("tensor").matches(np.zeros(2))


@pytest.mark.parametrize("index", range(6))
def test_required_functions_against_numpy(samples, index: int) -> None:
    name, x = samples[index]
    backend = _module(name)
    base = np.arange(24.0, dtype=np.float32).reshape(2, 3, 4)
    key = backend.cache_key(x)
    hash(key)
    info = backend.describe(x)
    assert isinstance(info, ArrayInfo) and info.layout.shape == (2, 3, 4)
    assert info.dtype == "float32" and info.itemsize == 4
    np.testing.assert_array_equal(_values(backend.stack([x, x])), np.stack([base, base]))
    np.testing.assert_array_equal(_values(backend.reshape(x, (6, 4))), base.reshape(6, 4))
    np.testing.assert_array_equal(_values(backend.concat([x, x], 1)),
                                  np.concatenate([base, base], 1))
    np.testing.assert_array_equal(_values(backend.einsum("abc,abc->a", x, x)),
                                  np.einsum("abc,abc->a", base, base))
    for pattern, reduction in (("a b c -> c (a b)", None), ("a b c -> a c", "sum")):
        plan = ra.explain(x, pattern, op="reduce" if reduction else "rearrange",
                          reduction=reduction)
        result = backend.lower(plan, reduction, x)(x)
        expected = (ra.reduce(base, pattern, reduction) if reduction
                    else ra.rearrange(base, pattern))
        np.testing.assert_allclose(_values(result), expected)
