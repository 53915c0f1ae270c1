"""einsum of array-API arrays: the namespace's own einsum where it has one (jax.numpy),
checked against einops and ``jnp.einsum`` on the corpus and on diagonals; the
broadcast-product stand-in where it has none (array_api_strict), which refuses a
diagonal with a RearrangeError; and what explain says about each."""

from __future__ import annotations

import math
import warnings

import array_api_strict as xps
import einops
import numpy as np
import pytest

import rearrange as ra
from corpus import load

jax = pytest.importorskip("jax")
jnp = jax.numpy

EINSUM = load("einsum")


def _jax_inputs(shapes: list, seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    return [jnp.asarray(rng.standard_normal(shape).astype(np.float32)) for shape in shapes]


@pytest.mark.parametrize("entry", EINSUM)
def test_jax_corpus_matches_einops(entry: dict) -> None:
    xs = _jax_inputs(entry["example"]["shape"])
    lengths = entry["example"]["axes_lengths"]
    got = ra.einsum(*xs, entry["pattern"], **lengths)
    assert isinstance(got, jax.Array)
    try:
        expected = einops.einsum(*xs, entry["pattern"], **lengths)
    except NotImplementedError:   # compositions and unit axes: numpy's plan is the oracle
        expected = ra.einsum(*map(np.asarray, xs), entry["pattern"], **lengths)
    assert got.shape == tuple(np.shape(expected)) == tuple(entry["example"]["output_shape"])
    assert got.dtype == jnp.float32
    np.testing.assert_allclose(np.asarray(got), np.asarray(expected), rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("pattern, subscripts, shapes", [
    ("i i -> i", "ii->i", [(4, 4)]),
    ("i i ->", "ii->", [(5, 5)]),
    ("b i i -> b i", "bii->bi", [(2, 3, 3)]),
    ("i i j, j -> i", "iij,j->i", [(3, 3, 4), (4,)]),
    ("a b a -> b", "aba->b", [(3, 2, 3)]),
])
def test_jax_diagonals_match_jnp_einsum(pattern, subscripts, shapes) -> None:
    xs = _jax_inputs(shapes)
    got = ra.einsum(*xs, pattern)
    expected = jnp.einsum(subscripts, *xs)
    np.testing.assert_allclose(np.asarray(got), np.asarray(expected), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.asarray(got), ra.einsum(*map(np.asarray, xs), pattern),
                               rtol=1e-5, atol=1e-5)


def test_jax_einsum_uses_jnp_einsum(monkeypatch) -> None:
    """The contraction is the namespace's einsum: no product of every axis is built."""
    calls = []
    original = jnp.einsum
    monkeypatch.setattr(jnp, "einsum", lambda *a, **k: calls.append(a[0]) or original(*a, **k))
    q = _jax_inputs([(2, 4, 16, 8)])[0]
    ra.einsum(q, q, "b h t d, b h s d -> b h t s")
    assert calls == ["abcd,abed->abce"]


def test_explain_says_which_einsum_runs() -> None:
    q = _jax_inputs([(2, 4, 16, 8)])[0]
    plan = ra.explain([q, q], "b h t d, b h s d -> b h t s", op="einsum")
    assert plan.engine == "jax.numpy.einsum" and plan.to_dict()["engine"] == plan.engine
    assert "result   a new array: jax.numpy.einsum" in str(plan)
    assert plan.path is None
    a = xps.ones((2, 3))
    plan = ra.explain([a, a], "b h, b h -> b", op="einsum")
    assert plan.engine == "broadcast product (array_api_strict has no einsum)"
    assert "product of 6 elements (48 bytes)" in plan.steps[-1].reason
    diagonal = ra.explain([xps.ones((3, 3))], "i i -> i", op="einsum")
    assert "refused" in diagonal.steps[-1].reason and "diagonal" in diagonal.steps[-1].reason


def test_strict_namespace_keeps_the_broadcast_product_and_refuses_diagonals() -> None:
    x = np.arange(24, dtype=np.float64).reshape(2, 3, 4)
    a = xps.asarray(x)
    got = ra.einsum(a, a, "b h w, b h w -> b")
    assert isinstance(got, type(a))
    np.testing.assert_allclose(np.asarray(got), ra.einsum(x, x, "b h w, b h w -> b"))
    with pytest.raises(ra.RearrangeError, match=r"diagonal\) needs an einsum, and this array "
                                                r"namespace \(array_api_strict\) has none"):
        ra.einsum(xps.asarray(np.ones((3, 3))), "i i -> i")


def test_explain_of_foreign_inputs_refuses_strides_and_dtype() -> None:
    q = _jax_inputs([(2, 3)])[0]
    with pytest.raises(ra.ArgumentTypeError, match="carry their own"):
        ra.explain([q, q], "a b, a b -> a", op="einsum", dtype="float32")


def test_attention_scores_take_no_full_product() -> None:
    """The product of every axis of the attention case is 4*8*256*256*64*4 bytes =
    512 MiB; jnp.einsum makes no such temporary, so the call is quick (timed in
    bench/array_api_einsum.py)."""
    q = _jax_inputs([(4, 8, 256, 64)])[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = ra.einsum(q, q, "b h t d, b h s d -> b h t s")
    assert got.shape == (4, 8, 256, 256)
    expected = jnp.einsum("bhtd,bhsd->bhts", q, q)
    np.testing.assert_allclose(np.asarray(got), np.asarray(expected), rtol=1e-5, atol=1e-4)
    assert math.prod(got.shape) * 64 * 4 == 512 * 2 ** 20
