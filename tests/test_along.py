"""Brackets in reduce and einsum, and the operations along bracketed axes (softmax,
log_softmax, flip, roll, sort, argsort, argmax, argmin), against einx 0.4.3 as the
oracle on numpy and torch (numpy's own calls where einx cannot run: size-0 axes)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rearrange as ra
from rearrange import ArgumentTypeError, PatternError, RearrangeError

einx = pytest.importorskip("einx")
torch = pytest.importorskip("torch")

RNG = np.random.default_rng(38)


def _values(shape, dtype=np.float32, ties=False):
    if ties:
        return RNG.integers(0, 3, size=shape).astype(dtype)
    return RNG.normal(size=shape).astype(dtype)


def _as_numpy(x):
    return x.detach().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


def _assert_same(ours, theirs):
    ours, theirs = _as_numpy(ours), _as_numpy(theirs)
    assert ours.shape == theirs.shape
    assert ours.dtype == theirs.dtype
    if ours.dtype.kind == "f":
        np.testing.assert_allclose(ours, theirs, rtol=2e-6, atol=1e-6)
    else:
        np.testing.assert_array_equal(ours, theirs)


# (op, pattern, input shape, keywords): einx's documented examples and our own
ALONG_CASES = [
    # einx's docstrings
    ("softmax", "a [b]", (3, 5), {}),
    ("softmax", "a [b] -> a [b]", (3, 5), {}),
    ("log_softmax", "a [b]", (3, 5), {}),
    ("sort", "a [b]", (3, 5), {}),
    ("argsort", "a [b] -> a [b]", (3, 5), {}),
    ("flip", "a [b]", (3, 5), {}),
    ("roll", "a [b]", (3, 5), {"shift": 4}),
    ("argmax", "a [b] -> a", (3, 5), {}),
    ("argmax", "a [b c]", (3, 4, 5), {}),
    ("argmin", "a [b c] -> a [2]", (3, 4, 5), {}),
    # several bracketed axes, outputs in another order, compositions, '...'
    ("softmax", "b [t] h", (2, 7, 3), {}),
    ("softmax", "a [b c]", (2, 3, 4), {}),
    ("softmax", "[a] b [c]", (2, 3, 4), {}),
    ("softmax", "a [b] c -> c a [b]", (2, 3, 4), {}),
    ("softmax", "a ([b] c)", (2, 12), {"b": 3}),
    ("softmax", "... [c]", (2, 3, 4), {}),
    ("log_softmax", "a [b c]", (2, 3, 4), {}),
    ("log_softmax", "a [b] c -> (a [b]) c", (2, 3, 4), {}),
    ("flip", "a [b] c", (2, 3, 4), {}),
    ("flip", "[a b c]", (2, 3, 4), {}),
    ("flip", "a [b] c -> c [b] a", (2, 3, 4), {}),
    ("flip", "a (b [c])", (2, 12), {"b": 3}),
    ("flip", "a ([b] c) -> c a [b]", (2, 12), {"c": 4}),
    ("flip", "[...] c", (2, 3, 4), {}),
    ("roll", "a [b c]", (2, 3, 4), {"shift": 1}),
    ("roll", "a [b c]", (2, 3, 4), {"shift": (1, -2)}),
    ("roll", "[a] b [c]", (2, 3, 4), {"shift": (5, 7)}),
    ("sort", "a [b] c", (2, 3, 4), {}),
    ("sort", "a [b] c -> c a [b]", (2, 3, 4), {}),
    ("argsort", "a [b] c", (2, 3, 4), {}),
    ("argmax", "a [b] c", (2, 3, 4), {}),
    ("argmax", "a [b] c -> c a", (2, 3, 4), {}),
    ("argmax", "a [b] c -> a [1] c", (2, 3, 4), {}),
    ("argmax", "[a b c]", (2, 3, 4), {}),
    ("argmax", "a (b [c])", (2, 12), {"c": 4}),
    ("argmax", "a ([b] c)", (2, 12), {"c": 4}),
    ("argmin", "a [b c] -> [2] a", (2, 3, 4), {}),
    ("argmin", "a [b] [c] -> a [2]", (2, 3, 4), {}),
]


@pytest.mark.parametrize("library", ["numpy", "torch"])
@pytest.mark.parametrize("op,pattern,shape,keywords", ALONG_CASES,
                         ids=[f"{c[0]}:{c[1]}" for c in ALONG_CASES])
def test_along_equals_einx(library, op, pattern, shape, keywords):
    for ties in (False, True):
        x = _values(shape, ties=ties)
        if library == "torch":
            x = torch.from_numpy(x)
        before = _as_numpy(x).copy()
        ours = getattr(ra, op)(x, pattern, **keywords)
        theirs = getattr(einx, op)(pattern, x, **keywords)
        _assert_same(ours, theirs)
        assert type(ours) is type(theirs) or library == "numpy"
        np.testing.assert_array_equal(_as_numpy(x), before)     # the input is untouched


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float16, np.float64])
@pytest.mark.parametrize("op", ["softmax", "log_softmax", "sort", "argmax", "flip"])
def test_dtypes_follow_einx(op, dtype):
    x = (RNG.normal(size=(3, 4)) * 3).astype(dtype)
    _assert_same(getattr(ra, op)(x, "a [b]"), getattr(einx, op)("a [b]", x))


def test_zero_dimensional_inputs_with_empty_brackets():
    x = np.float32(3.0)
    for op in ("flip", "softmax", "log_softmax"):
        _assert_same(getattr(ra, op)(x, "[]"), getattr(einx, op)("[]", x))
    assert ra.roll(x, "[]", shift=2) == 3.0      # (einx's numpy roll fails on no axis)


# ----------------------------------------------------------------------------- views


def test_flip_is_a_view_with_a_negative_stride_on_numpy():
    x = np.arange(24.0).reshape(2, 3, 4)
    y = ra.flip(x, "a [b] c")
    assert np.shares_memory(x, y) and y.strides[1] < 0
    np.testing.assert_array_equal(y, x[:, ::-1])
    z = ra.flip(x, "a [b] c -> c [b] a")             # a view in another axis order
    assert np.shares_memory(x, z)
    np.testing.assert_array_equal(z, x[:, ::-1].transpose(2, 1, 0))
    w = ra.flip(x.reshape(2, 12), "a (b [c])", b=3)    # no strides merge a flipped c back
    assert not np.shares_memory(x, w)
    np.testing.assert_array_equal(w, x[:, :, ::-1].reshape(2, 12))


def test_explain_shows_the_flip_as_a_view_and_what_softmax_computes():
    flip_plan = ra.explain((2, 3, 4), "a [b] c -> c [b] a", op="flip", dtype="float32")
    assert flip_plan.is_view
    text = str(flip_plan)
    assert "flip [b]: numpy: a view" in text and "a view of shape (4, 3, 2)" in text
    soft = ra.explain((2, 12), "a ([b] c)", op="softmax", b=3, dtype="float32")
    assert not soft.is_view
    text = str(soft)
    assert "split 'a (b c) -> a b c': a view of shape (2, 3, 4)" in text
    assert "softmax over [b]" in text
    copy = ra.explain((2, 12), "a (b [c])", op="flip", b=3, dtype="float32")
    assert not copy.is_view and "one copy" in str(copy)
    assert ra.explain(np.zeros((2, 3)), "a [b]", op="roll", shift=1).plan.shift == (1,)


def test_explain_of_reduce_with_brackets():
    plan = ra.explain((2, 3, 4), "a [b] c", op="reduce", reduction="sum")
    assert plan.output.shape == (2, 4)


# ----------------------------------------------------------------------------- layouts


def _layouts():
    """A base array and a basic index into it: slices with steps (negative too), size-0
    and size-1 dims."""
    @st.composite
    def build(draw):
        rank = draw(st.integers(1, 3))
        shape = tuple(draw(st.integers(0, 5)) for _ in range(rank))
        index = []
        for n in shape:
            step = draw(st.sampled_from([1, 1, 2, -1, -2]))
            index.append(slice(None, None, step))
        bracketed = draw(st.lists(st.booleans(), min_size=rank, max_size=rank))
        if not any(bracketed):
            bracketed[draw(st.integers(0, rank - 1))] = True
        return shape, tuple(index), bracketed
    return build()


def _pattern(bracketed):
    names = "abcd"
    return " ".join(f"[{names[k]}]" if b else names[k] for k, b in enumerate(bracketed))


def _numpy_oracle(op, x, axes):
    """numpy's own call for inputs einx cannot take (its solver refuses size-0 axes)."""
    if op == "flip":
        return np.flip(x, axis=axes)
    if op == "roll":
        return np.roll(x, 1, axis=axes)
    if op == "softmax":
        e = np.exp(x - np.max(x, axis=axes, keepdims=True)) if x.size else x
        return e / np.sum(e, axis=axes, keepdims=True) if x.size else x
    raise AssertionError(op)


@settings(max_examples=60, deadline=None)
@given(layout=_layouts(), op=st.sampled_from(["flip", "roll", "softmax", "log_softmax",
                                              "argmax", "sort"]),
       library=st.sampled_from(["numpy", "torch"]))
def test_layouts_equal_einx(layout, op, library):
    shape, index, bracketed = layout
    base = _values(shape)
    x = base[index]
    axes = tuple(k for k, b in enumerate(bracketed) if b)
    if op == "sort":
        bracketed = [k == axes[0] for k in range(len(shape))]
        axes = axes[:1]
    pattern = _pattern(bracketed)
    if op == "argmax" and len(axes) > 1:    # its coordinates need an output: '-> ... [n]'
        kept = " ".join("abcd"[k] for k, b in enumerate(bracketed) if not b)
        pattern += f" -> {kept} [{len(axes)}]"
    keywords = {"shift": 1} if op == "roll" else {}
    if library == "torch":
        x = torch.from_numpy(x.copy()) if any(s.step < 0 for s in index) \
            else torch.from_numpy(base)[index]
    before = _as_numpy(x).copy()
    if 0 in x.shape:
        if op in ("argmax",) and any(x.shape[a] == 0 for a in axes):
            with pytest.raises(RearrangeError):
                getattr(ra, op)(x, pattern)
            return
        ours = getattr(ra, op)(x, pattern, **keywords)
        assert tuple(ours.shape) == (tuple(x.shape) if op != "argmax" else ours.shape)
        if op in ("flip", "roll", "softmax"):
            _assert_same(ours, _numpy_oracle(op, _as_numpy(x), axes))
    else:
        _assert_same(getattr(ra, op)(x, pattern, **keywords),
                     getattr(einx, op)(pattern, x, **keywords))
    np.testing.assert_array_equal(_as_numpy(x), before)


# ----------------------------------------------------------------------------- reduce


REDUCE_CASES = [
    ("a [b] c", (2, 3, 4), "mean", {}),
    ("a [b] c", (2, 3, 4), "sum", {}),
    ("b (h [2]) (w [2]) c", (2, 4, 6, 3), "max", {}),
    ("a [b c] -> a", (2, 3, 4), "sum", {}),
    ("a [b] c -> c a", (2, 3, 4), "min", {}),
    ("a (b [2])", (2, 6), "max", {}),
    ("a ([2] b)", (2, 6), "prod", {}),
    ("a (b c [d])", (2, 24), "sum", {"b": 2, "c": 3}),
    ("a ([b])", (2, 3), "sum", {}),
    ("[...] c", (2, 3, 4), "sum", {}),
    ("... [c]", (2, 3, 4), "max", {}),
    ("a [(b c)]", (2, 6), "mean", {"b": 2}),
]


@pytest.mark.parametrize("library", ["numpy", "torch"])
@pytest.mark.parametrize("pattern,shape,reduction,keywords", REDUCE_CASES,
                         ids=[c[0] for c in REDUCE_CASES])
def test_reduce_with_brackets_equals_einx(library, pattern, shape, reduction, keywords):
    for dtype in (np.float32, np.int32):
        x = (_values(shape) * 4).astype(dtype)
        if library == "torch":
            x = torch.from_numpy(x)
            if reduction == "mean" and dtype == np.int32:
                continue        # torch's mean takes floats only (einx's too)
        ours = ra.reduce(x, pattern, reduction, **keywords)
        theirs = getattr(einx, reduction)(pattern, x, **keywords)
        _assert_same(ours, theirs)


def test_reduce_with_brackets_takes_a_callable_and_views_stay_views():
    x = _values((2, 3, 4))
    np.testing.assert_allclose(ra.reduce(x, "a [b] c", lambda v, axes: v.sum(axis=axes)),
                               x.sum(axis=1), rtol=1e-6)


@pytest.mark.parametrize("library", ["numpy", "torch"])
def test_einsum_with_brackets_equals_einx(library):
    x, y = _values((2, 3, 4)), _values((4, 5))
    if library == "torch":
        x, y = torch.from_numpy(x), torch.from_numpy(y)
    for pattern in ("a b [c], [c] d -> a b d", "a b c, c d -> a b d", "a b [c], [c] d -> d (a b)"):
        _assert_same(ra.einsum(x, y, pattern), einx.dot(pattern, x, y))


# ----------------------------------------------------------------------------- errors


@pytest.mark.parametrize("call,message,caret", [
    (lambda x: ra.reduce(x, "a [b] c -> a [b]", "sum"), "output of reduce has none", "^^^"),
    (lambda x: ra.reduce(x, "a [b] c -> a b c", "sum"), "'b' is reduced", "^"),
    (lambda x: ra.reduce(x, "a [b] c -> a", "sum"), "'c' are not in brackets", "^"),
    (lambda x: ra.einsum(x, x, "a b [c], c b -> a"), "bracketed everywhere or nowhere", "^"),
    (lambda x: ra.einsum(x, x, "a b [c], [c] b a -> a [c]"), "output of einsum has none",
     "^^^"),
    (lambda x: ra.einsum(x, x, "a b [c], [c] b a -> a c"), "'c' is contracted", "^"),
    (lambda x: ra.softmax(x, "a b c"), "needs the axes it acts on in brackets", "^^^^^"),
    (lambda x: ra.sort(x, "a [b c]"), "exactly one axis in brackets", "^"),
    (lambda x: ra.softmax(x, "a [b] c -> c a b"), "bracketed everywhere or nowhere", "^"),
    (lambda x: ra.softmax(x, "a [b] c -> a [b]"), "'c' of the input are not in the output",
     "^^^^^"),
    (lambda x: ra.flip(x, "a [b] c -> a [b] d"), "'d' of the output is not in the input", "^"),
    (lambda x: ra.argmax(x, "a [b] [c]"), "needs exactly one '[ ]'", "^^^^^^^^^"),
    (lambda x: ra.argmax(x, "a [b c] -> a"), "needs their coordinates as '[2]'", "^"),
    (lambda x: ra.argmax(x, "a [b c] -> a [3]"), "'[2]' for 2 axes", "^^^"),
    (lambda x: ra.softmax(x, "a [(b + c)] d", b=1), "no concatenation", "^^^^^^^"),
    (lambda x: ra.softmax(x, "a [b], c"), "one input expression", "^"),
    (lambda x: ra.flip(x, "a [b] c", d=2), "not an axis of the input", "^^^^^^^"),
    (lambda x: ra.softmax(x, "a [b] [b]"), "appears twice", "^"),
    (lambda x: ra.softmax(x, "a [b]"), "expression has 2 axes; the array has 3", "^"),
])
def test_bad_patterns_are_pattern_errors_with_a_caret(call, message, caret):
    x = _values((2, 3, 4))
    with pytest.raises(PatternError) as info:
        call(x)
    assert message in str(info.value)
    assert caret in str(info.value)


def test_bad_arguments_are_argument_type_errors():
    x = _values((2, 3, 4))
    with pytest.raises(ArgumentTypeError, match="needs shift="):
        ra.roll(x, "a [b] c", shift=None)
    with pytest.raises(ArgumentTypeError, match="2 values for 1 axes"):
        ra.roll(x, "a [b] c", shift=(1, 2))
    with pytest.raises(ArgumentTypeError, match="shift must be"):
        ra.roll(x, "a [b] c", shift=1.5)
    with pytest.raises(PatternError, match="shift= applies to roll"):
        ra.flip(x, "a [b] c", shift=1)
    with pytest.raises(ArgumentTypeError, match="does not take a rearrange.Tensor"):
        ra.softmax(ra.zeros(2, 3), "a [b]")
    with pytest.raises(ArgumentTypeError, match="pattern must be a str"):
        ra.flip(x, 3)
    with pytest.raises(ArgumentTypeError, match="takes a numpy array"):
        ra.flip("abc", "[a]")
    with pytest.raises(RearrangeError, match="empty axis"):
        ra.argmax(np.zeros((2, 0)), "a [b]")


# ----------------------------------------------------------------------------- torch


def test_torch_autograd_equals_einx():
    weights = torch.arange(24.0).reshape(2, 3, 4)
    for op, pattern in [("softmax", "a [b c]"), ("softmax", "a [b] c"),
                        ("log_softmax", "[a] b [c]"), ("flip", "a [b] c -> c a [b]"),
                        ("roll", "a [b c]"), ("sort", "a b [c]")]:
        keywords = {"shift": (1, 2)} if op == "roll" else {}
        ours = torch.randn(2, 3, 4, requires_grad=True)
        theirs = ours.detach().clone().requires_grad_()
        (getattr(ra, op)(ours, pattern, **keywords) * weights.reshape(
            getattr(ra, op)(ours, pattern, **keywords).shape)).sum().backward()
        (getattr(einx, op)(pattern, theirs, **keywords) * weights.reshape(
            getattr(einx, op)(pattern, theirs, **keywords).shape)).sum().backward()
        torch.testing.assert_close(ours.grad, theirs.grad)


def _chain(x):
    return (ra.softmax(x, "a [b] c") + ra.log_softmax(x, "a [b c]") + ra.flip(x, "a [b] c")
            + ra.roll(x, "a [b] c", shift=1) + ra.sort(x, "a b [c]"),
            ra.argmax(x, "a [b c]"), ra.reduce(x, "a [b] c", "max"))


@pytest.mark.slow
def test_torch_compile_one_graph_over_changing_shapes():
    torch._dynamo.reset()
    compiled = torch.compile(_chain, dynamic=True, fullgraph=True)
    for shape in [(2, 3, 4), (3, 5, 7), (1, 6, 2)]:
        x = torch.randn(*shape)
        for ours, eager in zip(compiled(x), _chain(x)):
            torch.testing.assert_close(ours, eager)


def test_torch_export_with_a_dynamic_dim():
    class Model(torch.nn.Module):
        def forward(self, x):
            return ra.softmax(x, "a ([b] c)", c=4) + ra.flip(x, "a [(b c)]", c=4)

    exported = torch.export.export(Model(), (torch.randn(2, 12),),
                                   dynamic_shapes={"x": {0: torch.export.Dim("n")}})
    x = torch.randn(5, 12)
    torch.testing.assert_close(exported.module()(x), Model()(x))


# ----------------------------------------------------------------------------- dask, jax


@pytest.mark.parametrize("op,pattern,keywords", [
    ("softmax", "a [b] c", {}), ("log_softmax", "[a] b [c]", {}), ("flip", "a [b c]", {}),
    ("roll", "a [b] c", {"shift": 2}), ("sort", "a [b] c", {}), ("argsort", "a b [c]", {}),
    ("argmax", "a [b c]", {}), ("argmin", "a [b] c -> c a", {}),
])
def test_dask_and_jax_equal_einx_on_numpy(op, pattern, keywords):
    x = _values((4, 6, 5))
    theirs = getattr(einx, op)(pattern, x, **keywords)
    da = pytest.importorskip("dask.array")
    ours = getattr(ra, op)(da.from_array(x, chunks=2), pattern, **keywords)
    assert isinstance(ours, da.Array)
    _assert_same(ours.compute(), theirs)
    jnp = pytest.importorskip("jax.numpy")
    ours = getattr(ra, op)(jnp.asarray(x), pattern, **keywords)
    ours = np.asarray(ours)
    if ours.dtype.kind == "i":
        ours = ours.astype(np.int64)    # jax's default integers are 32-bit
    _assert_same(ours, theirs)


def test_cached_runners_serve_other_sizes_and_refuse_bad_lengths():
    for shape in [(2, 12), (3, 6), (1, 0)]:
        x = _values(shape)
        expected = x.reshape(shape[0], 3, -1)[:, :, ::-1].reshape(shape)
        np.testing.assert_array_equal(ra.flip(x, "a (b [c])", b=3), expected)
        np.testing.assert_array_equal(ra.flip(x, "a (b [c])", b=np.int64(3)), expected)
        with pytest.raises(ArgumentTypeError, match="must be integers"):
            ra.flip(x, "a (b [c])", b=3.0)
    assert ra.roll(np.arange(4), "[i]", shift=[1]).tolist() == [3, 0, 1, 2]   # unhashable


@settings(max_examples=40, deadline=None)
@given(layout=_layouts(), reduction=st.sampled_from(["sum", "max", "mean", "prod"]),
       library=st.sampled_from(["numpy", "torch"]))
def test_reduce_with_brackets_over_layouts_equals_einx(layout, reduction, library):
    shape, index, bracketed = layout
    x = _values(shape)[index]
    if library == "torch":
        x = torch.from_numpy(x.copy())
    before = _as_numpy(x).copy()
    pattern = _pattern(bracketed)
    axes = tuple(k for k, b in enumerate(bracketed) if b)
    if reduction == "max" and any(x.shape[a] == 0 for a in axes):
        with pytest.raises(RearrangeError):      # reduce's own rule: no max of nothing
            ra.reduce(x, pattern, reduction)
        return
    ours = ra.reduce(x, pattern, reduction)
    if 0 in x.shape or (library == "torch" and reduction == "prod"):
        # einx's solver refuses size-0 axes, its torch prod passes dim=None: numpy's own
        theirs = getattr(np, reduction)(_as_numpy(x), axis=axes)
        np.testing.assert_allclose(_as_numpy(ours), theirs, rtol=1e-5)
    else:
        _assert_same(ours, getattr(einx, reduction)(pattern, x))
    np.testing.assert_array_equal(_as_numpy(x), before)
