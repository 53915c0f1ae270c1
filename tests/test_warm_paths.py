"""The warm paths' own conditions, each from both sides: numpy's inline index (its
``.T`` / ``.mT`` forms, lengths given or not, ``copy`` by identity) and the front
door's inline index (the remembered key, the reduction by identity, torch keys of
symbolic sizes). Oracles: numpy's own calls and einops; a warm hit must give exactly
what a cold call gives (values, shape, strides, dtype, view or not)."""

from __future__ import annotations

import einops
import numpy as np
import pytest

import rearrange as ra
from rearrange.caching import PLANS


def _same_array(got: np.ndarray, expected: np.ndarray, source: np.ndarray) -> None:
    assert type(got) is np.ndarray
    assert got.shape == expected.shape and got.dtype == expected.dtype
    assert got.strides == expected.strides
    assert np.shares_memory(got, source) == np.shares_memory(expected, source)
    assert got.flags.writeable == expected.flags.writeable
    np.testing.assert_array_equal(got, expected)


def _cold_then_warm(x: np.ndarray, pattern: str, **kwargs) -> list[np.ndarray]:
    """A cold call and two warm ones (the second and third find the inline index)."""
    ra.cache_clear()
    results = [ra.rearrange(x, pattern, **kwargs)]
    hits = ra.cache_info().plans.hits
    results += [ra.rearrange(x, pattern, **kwargs) for _ in range(2)]
    assert ra.cache_info().plans.hits == hits + 2     # both counted, as the cache's hits
    return results


# Permutations whose inline form is .T (every axis reversed), .mT (the last two swapped,
# rank >= 3) or transpose (anything else), each alone, after a split, before a merge.
@pytest.mark.parametrize("pattern, shape, lengths, numpy_calls", [
    ("h w -> w h", (4, 5), {}, lambda x: x.transpose(1, 0)),
    ("a b c -> c b a", (2, 3, 4), {}, lambda x: x.transpose(2, 1, 0)),
    ("a -> a", (5,), {}, lambda x: x.view()),
    ("a b c -> a c b", (2, 3, 4), {}, lambda x: x.transpose(0, 2, 1)),
    ("a b c -> b a c", (2, 3, 4), {}, lambda x: x.transpose(1, 0, 2)),
    ("a b c -> c a b", (2, 3, 4), {}, lambda x: x.transpose(2, 0, 1)),
    ("b (h d) t -> b h t d", (2, 12, 5), {"h": 3},
     lambda x: x.reshape(2, 3, 4, 5).transpose(0, 1, 3, 2)),
    ("(a b) c -> c b a", (6, 5), {"a": 2}, lambda x: x.reshape(2, 3, 5).transpose(2, 1, 0)),
    ("(a b) c -> b a c", (6, 5), {"a": 2}, lambda x: x.reshape(2, 3, 5).transpose(1, 0, 2)),
    ("h w -> (w h)", (4, 5), {}, lambda x: x.transpose(1, 0).reshape(20)),
    ("a b c -> a (c b)", (2, 3, 4), {}, lambda x: x.transpose(0, 2, 1).reshape(2, 12)),
    ("a b c -> b (a c)", (2, 3, 4), {}, lambda x: x.transpose(1, 0, 2).reshape(3, 8)),
])
@pytest.mark.parametrize("layout", ["contiguous", "strided"])
def test_inline_forms_give_numpys_own_result(pattern, shape, lengths, numpy_calls, layout) -> None:
    x = np.arange(np.prod(shape) * 2, dtype=np.float32).reshape(*shape[:-1], shape[-1] * 2)
    x = x[..., ::2] if layout == "strided" else np.ascontiguousarray(x[..., ::2])
    expected = numpy_calls(x)
    for got in _cold_then_warm(x, pattern, **lengths):
        _same_array(got, expected, x)
        np.testing.assert_array_equal(got, einops.rearrange(x, pattern, **lengths))


def test_a_read_only_input_gives_read_only_views_when_warm() -> None:
    x = np.arange(24.0).reshape(2, 3, 4)
    x.flags.writeable = False
    for pattern, expected in (("a b c -> c b a", x.T), ("a b c -> a c b", x.transpose(0, 2, 1))):
        for got in _cold_then_warm(x, pattern):
            _same_array(got, expected, x)


def test_lengths_given_or_not_never_reuse_the_other_record() -> None:
    """The inline record keeps the call's lengths (None for none): a call with lengths
    after one without (and the reverse) is checked by the planner, not served."""
    x = np.arange(20.0).reshape(4, 5)
    for _ in range(2):
        assert ra.rearrange(x, "h w -> w h").shape == (5, 4)
        assert ra.rearrange(x, "h w -> w h", h=4).shape == (5, 4)
        with pytest.raises(ra.RearrangeError, match="h"):
            ra.rearrange(x, "h w -> w h", h=5)
    y = np.arange(120.0).reshape(2, 12, 5)
    for _ in range(2):
        assert ra.rearrange(y, "b (h d) t -> b h t d", h=3).shape == (2, 3, 5, 4)
        with pytest.raises(ra.RearrangeError):
            ra.rearrange(y, "b (h d) t -> b h t d")        # h and d: one is needed
        assert ra.rearrange(y, "b (h d) t -> b h t d", h=4).shape == (2, 4, 5, 3)
        assert ra.rearrange(y, "b (h d) t -> b h t d", d=4).shape == (2, 3, 5, 4)


@pytest.mark.parametrize("kind", ["numpy", "Tensor", "torch"])
def test_copy_flags_are_matched_by_identity(kind) -> None:
    """copy=1 equals True (and 0 False) and hashes alike, but is no copy flag: after a
    copy=True (copy=False) call it is refused exactly as when cold, never served the
    cached plan; and copy=False is never served copy=None's plan."""
    x = np.arange(20.0).reshape(4, 5)
    if kind == "Tensor":
        x = ra.from_numpy(x)
    elif kind == "torch":
        x = pytest.importorskip("torch").from_numpy(x)
    ra.cache_clear()
    for flag, impostor in ((True, 1), (False, 0)):
        for _ in range(2):
            ra.rearrange(x, "h w -> w h", copy=flag)
            ra.repeat(x, "h w -> w h c", c=2, copy=flag)
            with pytest.raises(ra.ArgumentTypeError, match=f"copy must be None, True or False, got {impostor}"):
                ra.rearrange(x, "h w -> w h", copy=impostor)
            with pytest.raises(ra.ArgumentTypeError, match=f"copy must be None, True or False, got {impostor}"):
                ra.repeat(x, "h w -> w h c", c=2, copy=impostor)
    for _ in range(2):
        ra.rearrange(x, "h w -> (w h)")
        with pytest.raises(ra.NoViewError):
            ra.rearrange(x, "h w -> (w h)", copy=False)


def test_a_same_layout_of_another_dtype_is_planned_again() -> None:
    """Shape and byte strides equal, dtype not: the inline record is not used."""
    c = np.zeros((4, 6), np.complex64)
    real = c.real                                   # float32 with complex64's strides
    packed = np.arange(24, dtype=np.int64).reshape(4, 6)
    assert (real.shape, real.strides) == (packed.shape, packed.strides)
    for x in (packed, real, packed, real):
        misses = ra.cache_info().plans.misses
        got = ra.rearrange(x, "a b -> (b a)")
        _same_array(got, x.transpose(1, 0).reshape(24).copy(), x)
        assert got.dtype == x.dtype
    assert ra.cache_info().plans.misses == misses   # both kept, both found again


# ---------------------------------------------------------------------- the front door

class _EqualToEverything:
    """An unhashable reduction that says it equals anything: the plan cache cannot hold
    it, so no remembered runner may serve it."""

    __hash__ = None     # type: ignore[assignment]

    def __eq__(self, other: object) -> bool:
        return True

    def __call__(self, x, axes):
        return x.prod(axis=axes) if isinstance(x, np.ndarray) else x.prod(dim=axes[-1])


@pytest.mark.parametrize("kind", ["Tensor", "torch"])
def test_the_remembered_key_serves_only_its_own_reduction(kind) -> None:
    values = np.arange(1.0, 13.0).reshape(3, 4)
    x = ra.from_numpy(values) if kind == "Tensor" else \
        pytest.importorskip("torch").from_numpy(values)

    def as_numpy(result):
        return result.numpy()       # a Tensor's or a torch tensor's values
    ra.cache_clear()
    for _ in range(2):
        np.testing.assert_array_equal(as_numpy(ra.reduce(x, "a b -> a", "sum")), values.sum(1))
    hits = ra.cache_info().plans.hits
    np.testing.assert_array_equal(as_numpy(ra.reduce(x, "a b -> a", "sum")), values.sum(1))
    assert ra.cache_info().plans.hits == hits + 1       # the remembered key, found
    for _ in range(2):
        got = ra.reduce(x, "a b -> a", _EqualToEverything())
        np.testing.assert_array_equal(as_numpy(got), values.prod(1))
    np.testing.assert_array_equal(as_numpy(ra.reduce(x, "a b -> a", "max")), values.max(1))


def test_torch_keys_remember_eager_layouts_and_never_compare_symbolic_sizes() -> None:
    """An eager call is remembered (its key a tuple); a tensor of symbolic sizes gets
    an unhashable key, so a remembered one is never compared with it (a comparison of
    ints with SymInts would guard the trace on the sizes)."""
    torch = pytest.importorskip("torch")
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import (DimDynamic, ShapeEnv,
                                                       StatelessSymbolicContext)

    from rearrange.backends import _torch as torch_backend

    pattern = "b h t d -> b h (t d)"
    x = torch.randn(2, 3, 4, 5)
    ra.cache_clear()
    ra.rearrange(x, pattern)
    assert isinstance(torch_backend.cache_key(x), tuple)
    assert PLANS.last_transform[pattern][0][-1] == torch_backend.cache_key(x)

    shape_env = ShapeEnv()
    with FakeTensorMode(shape_env=shape_env) as mode:
        context = StatelessSymbolicContext(dynamic_sizes=[DimDynamic.DYNAMIC] * 4)
        fake = mode.from_tensor(x, symbolic_context=context)
        assert isinstance(torch_backend.cache_key(fake), list)
        result = ra.rearrange(fake, pattern)
    assert len(result.shape) == 3
    assert not shape_env.guards, shape_env.guards      # no size was compared with 2, 3, 4, 5


@pytest.mark.parametrize("has_mt", [True, False], ids=["numpy 2 (.mT)", "numpy 1.26 (no .mT)"])
def test_the_inline_form_of_each_permutation(monkeypatch, has_mt) -> None:
    """Which form each permutation takes (both sides of each test), and that a numpy
    without ``ndarray.mT`` gets ``transpose`` instead, with the same results."""
    from rearrange import api

    if has_mt and not hasattr(np.ndarray, "mT"):
        pytest.skip("this numpy has no ndarray.mT")
    monkeypatch.setattr(api, "_HAS_MT", has_mt)
    mt = api._RUN_MT if has_mt else api._RUN_TRANSPOSE
    reshape_mt = api._RUN_RESHAPE_MT if has_mt else api._RUN_RESHAPE_TRANSPOSE
    assert api._permutation_kind((1, 0)) == "T"
    assert api._permutation_kind((2, 1, 0)) == "T"
    assert api._permutation_kind((0,)) == "T"
    assert api._permutation_kind((0, 2, 1)) == ("mT" if has_mt else "transpose")
    assert api._permutation_kind((0, 1, 3, 2)) == ("mT" if has_mt else "transpose")
    assert api._permutation_kind((1, 0, 2)) == "transpose"
    assert api._permutation_kind((0, 1)) == "transpose"       # identity: no plan has it
    ra.cache_clear()
    for pattern, shape, lengths, how in (("a b c -> a c b", (2, 3, 4), {}, mt),
                                         ("b (h d) t -> b h t d", (2, 12, 5), {"h": 3}, reshape_mt),
                                         ("a b c -> c b a", (2, 3, 4), {}, api._RUN_T)):
        x = np.arange(np.prod(shape), dtype=np.int16).reshape(shape)
        expected = einops.rearrange(x, pattern, **lengths)
        for _ in range(2):
            got = ra.rearrange(x, pattern, **lengths)
            assert got.strides == expected.strides and np.shares_memory(got, x)
            np.testing.assert_array_equal(got, expected)
        assert PLANS.last[pattern][5] == how
