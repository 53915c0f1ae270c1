"""reduce and repeat against their oracles: einops on the corpus, numpy reductions and
broadcasts on random strided layouts, and torch for to_source."""

from __future__ import annotations

import math

import einops
import numpy as np
import pytest
import torch
from hypothesis import given, strategies as st

import rearrange as ra
from corpus import load

REDUCE = load("reduce")
REPEAT = load("repeat")
EINOPS_REDUCTIONS = ("min", "max", "sum", "mean", "prod", "any", "all")
# reduction -> what einops.reduce is given: its own name, or numpy's function over the
# reduced axes. An oracle independent of the numpy reducers that numpy arrays and
# rearrange.Tensor inputs share.
ORACLE_REDUCTIONS = {
    **{name: name for name in EINOPS_REDUCTIONS},
    "var": lambda y, axes: np.var(y, axis=axes),
    "std": lambda y, axes: np.std(y, axis=axes),
    "logsumexp": lambda y, axes: np.logaddexp.reduce(y, axis=axes),
    "count_nonzero": lambda y, axes: np.count_nonzero(y, axis=axes),
}
NUMPY_REDUCTIONS = {**ORACLE_REDUCTIONS, "mean": lambda y, axes: np.mean(y, axis=axes)}


def _data(shape, dtype=np.float64, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    return rng.integers(-5, 6, shape).astype(dtype)


def _einops_reduction(name: str) -> str:
    return name if name in EINOPS_REDUCTIONS else "sum"


# ---------------------------------------------------------------------- corpus


@pytest.mark.parametrize("entry", REDUCE)
def test_reduce_corpus_matches_einops(entry: dict) -> None:
    example = entry["example"]
    lengths = example["axes_lengths"]
    reduction = _einops_reduction(entry["reduction"])
    for dtype in (np.float64, np.int32):
        if reduction == "mean" and dtype is np.int32:
            continue  # einops refuses an integer mean (numpy promotes: tested below)
        x = _data(example["shape"], dtype)
        before = x.copy()
        expected = np.asarray(einops.reduce(x, entry["pattern"], reduction, **lengths))
        got = ra.reduce(x, entry["pattern"], reduction, **lengths)
        assert got.shape == expected.shape == tuple(example["output_shape"])
        assert got.dtype == expected.dtype
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
        np.testing.assert_array_equal(x, before)


@pytest.mark.parametrize("entry", REPEAT)
def test_repeat_corpus_matches_einops(entry: dict) -> None:
    example = entry["example"]
    lengths = example["axes_lengths"]
    x = _data(example["shape"], np.float32)
    before = x.copy()
    expected = einops.repeat(x, entry["pattern"], **lengths)
    got = ra.repeat(x, entry["pattern"], **lengths)
    assert got.shape == expected.shape == tuple(example["output_shape"])
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)
    plan = ra.explain(x, entry["pattern"], op="repeat", **lengths)
    assert plan.output.shape == got.shape
    if plan.is_view:
        assert np.shares_memory(got, x) or x.size == 0
        assert not got.flags.writeable
    else:
        assert not np.shares_memory(got, x) and got.flags.writeable and got.flags.c_contiguous
    copied = ra.repeat(x, entry["pattern"], copy=True, **lengths)
    np.testing.assert_array_equal(copied, expected)
    assert copied.flags.writeable and not np.shares_memory(copied, x)
    np.testing.assert_array_equal(x, before)


# ---------------------------------------------------------------------- random layouts

@st.composite
def strided_arrays(draw, max_dims=4):
    """Arrays that are views with steps, reversals, broadcast (stride-0) and size 0/1 dims."""
    ndim = draw(st.integers(0, max_dims))
    shape = tuple(draw(st.integers(0 if ndim else 1, 4)) for _ in range(ndim))
    base = np.arange(1, 1 + math.prod(s * 2 + 1 for s in shape), dtype=np.float64)
    base = base.reshape(tuple(s * 2 + 1 for s in shape)) if ndim else np.float64(7.0)
    index = []
    for size in shape:
        step = draw(st.sampled_from([1, 2, -1, -2]))
        if step > 0:
            index.append(slice(0, size * step, step))
        else:
            index.append(slice(size * -step - 1 if size else 0, None if size else 0, step)
                         if size else slice(0, 0))
    view = np.asarray(base)[tuple(index)] if ndim else np.asarray(base)
    assert view.shape == shape
    if ndim and draw(st.booleans()):
        dim = draw(st.integers(0, ndim - 1))
        view = np.broadcast_to(view.take([0], axis=dim) if shape[dim] else view, shape) \
            if shape[dim] else view
    return view


NAMES = "abcdef"


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy's, for empty means/vars
@given(strided_arrays(), st.data(), st.sampled_from(
    ["sum", "max", "min", "mean", "prod", "any", "all", "var", "std", "logsumexp",
     "count_nonzero"]))
def test_reduce_matches_numpy_on_random_layouts(x, data, reduction) -> None:
    names = NAMES[:x.ndim]
    reduced = [n for n in names if data.draw(st.booleans(), label=f"reduce {n}")]
    kept = data.draw(st.permutations([n for n in names if n not in reduced]), label="order")
    pattern = f"{' '.join(names)} -> {' '.join(kept)}"
    axis = tuple(names.index(n) for n in reduced)
    kept_dims = [names.index(n) for n in kept]
    if reduction in ("max", "min") and any(x.shape[a] == 0 for a in axis):
        with pytest.raises(ra.RearrangeError, match="total length 0"):
            ra.reduce(x, pattern, reduction)
        return
    before = x.copy()
    got = ra.reduce(x, pattern, reduction)
    if not reduced:
        expected = x.transpose(kept_dims)
    elif reduction == "logsumexp":  # pairwise logaddexp: exact, never overflows
        remaining_dims = [d for d in range(x.ndim) if d not in axis]
        flat = x.transpose(remaining_dims + list(axis)).reshape(
            [x.shape[d] for d in remaining_dims] + [math.prod(x.shape[d] for d in axis)])
        full = (np.logaddexp.reduce(flat, axis=-1) if flat.shape[-1]
                else np.full(flat.shape[:-1], -np.inf))
        remaining = [d for d in range(x.ndim) if d not in axis]
        expected = full.transpose([remaining.index(d) for d in kept_dims])
    else:
        full = getattr(np, reduction)(x, axis=axis)
        remaining = [d for d in range(x.ndim) if d not in axis]
        expected = np.asarray(full).transpose([remaining.index(d) for d in kept_dims])
    assert got.shape == expected.shape
    assert got.dtype == np.asarray(expected).dtype
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-9)
    np.testing.assert_array_equal(x, before)


@given(strided_arrays(max_dims=3), st.data())
def test_repeat_matches_numpy_broadcast_on_random_layouts(x, data) -> None:
    names = list(NAMES[:x.ndim])
    new = {f"r{k}": data.draw(st.integers(1, 3), label=f"r{k}")
           for k in range(data.draw(st.integers(0, 2), label="new axes"))}
    order = data.draw(st.permutations(names + list(new)), label="order")
    # compose a random run of neighbours into one group
    start = data.draw(st.integers(0, len(order)), label="group start")
    stop = data.draw(st.integers(start, len(order)), label="group stop")
    groups = order[:start] + ([f"({' '.join(order[start:stop])})"] if stop > start else []) \
        + order[stop:]
    pattern = f"{' '.join(names)} -> {' '.join(groups)}"
    got = ra.repeat(x, pattern, **new)
    # oracle: numpy broadcast over all axes in output order, then numpy's reshape (copies)
    expanded_shape = [x.shape[names.index(n)] if n in names else new[n] for n in order]
    moved = x.transpose([names.index(n) for n in order if n in names])
    with_units = moved.reshape([x.shape[names.index(n)] if n in names else 1 for n in order])
    expected = np.broadcast_to(with_units, expanded_shape)
    out_shape = (*expanded_shape[:start],
                 *([math.prod(expanded_shape[start:stop])] if stop > start else []),
                 *expanded_shape[stop:])
    expected = np.reshape(expected, out_shape)
    np.testing.assert_array_equal(got, expected)
    plan = ra.explain(x, pattern, op="repeat", **new)
    assert plan.is_view == (not any(step.is_copy for step in plan.steps))
    if plan.is_view:
        assert not got.flags.writeable
    else:
        assert got.flags.writeable and got.flags.c_contiguous


# ---------------------------------------------------------------------- semantics

def test_integer_mean_follows_numpy_promotion() -> None:
    x = np.arange(12, dtype=np.int16).reshape(3, 4)
    got = ra.reduce(x, "a b -> a", "mean")
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, x.mean(axis=1))


def test_argmax_argmin_over_one_axis() -> None:
    x = _data((3, 5, 4))
    np.testing.assert_array_equal(ra.reduce(x, "a b c -> c a", "argmax"), x.argmax(axis=1).T)
    np.testing.assert_array_equal(ra.reduce(x, "a (b 1) c -> a c", "argmin"), x.argmin(axis=1))
    with pytest.raises(ra.PatternError, match="argmax gives the position along one reduced axis; "
                       "this pattern reduces 2") as info:
        ra.reduce(x, "a b c -> a", "argmax")
    assert "^^^^^" in str(info.value)


def test_callable_reduction_gets_trailing_axes() -> None:
    x = _data((2, 3, 4, 5))
    seen = []

    def spy(y, axes):
        seen.append((y.shape, axes))
        return y.max(axis=axes)

    got = ra.reduce(x, "a b c d -> d a", spy)
    np.testing.assert_array_equal(got, einops.reduce(x, "a b c d -> d a", "max"))
    assert seen == [((5, 2, 3, 4), (2, 3))]
    plan = ra.explain(x, "a b c d -> d a", op="reduce", reduction=spy)
    assert plan.reduction == "spy"
    assert plan.to_source() == "reduction(x.transpose(3, 0, 1, 2), (2, 3))"


def test_callable_returning_wrong_shape_is_reported() -> None:
    with pytest.raises(ra.RearrangeError, match=r"returned \(2, 3\); expected an array of shape \(2,\)"):
        ra.reduce(np.zeros((2, 3, 4)), "a b c -> a", lambda y, axes: y.sum(axis=-1))


def test_reduce_without_reduced_axes_is_rearrange() -> None:
    x = _data((2, 3))
    got = ra.reduce(x, "a b -> b a", "sum")
    assert np.shares_memory(got, x)
    assert ra.explain(x, "a b -> b a", op="reduce", reduction="sum").reduction is None


def test_repeat_view_is_read_only_and_copy_true_is_writable() -> None:
    x = np.arange(6.0).reshape(2, 3)
    view = ra.repeat(x, "a b -> a r b", r=4)
    assert np.shares_memory(view, x) and view.strides[1] == 0
    with pytest.raises(ValueError, match="read-only"):
        view[0, 0, 0] = 1.0
    fresh = ra.repeat(x, "a b -> a r b", r=4, copy=True)
    fresh[0, 0, 0] = 1.0
    assert x[0, 0] == 0.0


def test_repeat_copy_false_refuses_an_interleaving() -> None:
    with pytest.raises(ra.NoViewError, match=r"cannot merge \(b r\)"):
        ra.repeat(np.zeros((2, 3)), "a b -> a (b r)", r=2, copy=False)


def test_repeat_of_merged_new_axes_stays_a_view() -> None:
    x = np.arange(3.0)
    got = ra.repeat(x, "w -> (r s) w", r=2, s=3)
    assert np.shares_memory(got, x) and got.strides == (0, 8)
    np.testing.assert_array_equal(got, einops.repeat(x, "w -> (r s) w", r=2, s=3))


@pytest.mark.parametrize("op, pattern, lengths, reduction", [
    ("reduce", "b (h 2) (w 2) c -> b h w c", {}, "max"),
    ("reduce", "b h w c -> b c", {}, "mean"),
    ("reduce", "b h w c -> (b c)", {}, "logsumexp"),
    ("reduce", "b h w c -> b c h", {}, "var"),
    ("reduce", "b h w c -> c", {}, "prod"),
    ("reduce", "b h w c -> b w", {}, "argmax") ,
    ("reduce", "b h w c -> ", {}, "count_nonzero"),
    ("reduce", "b h w c -> b h", {}, "std"),
    ("repeat", "b h w c -> b h w c r", {"r": 3}, None),
    ("repeat", "b h w c -> (r b) h w c", {"r": 2}, None),
    ("repeat", "b h w c -> b (h 2) (w 2) c", {}, None),
])
@pytest.mark.parametrize("dtype", [np.float64, np.int64])
def test_to_source_runs_in_numpy_and_torch(op, pattern, lengths, reduction, dtype) -> None:
    x = _data((2, 4, 4, 5), dtype)
    if reduction == "argmax":
        pattern = "b h w c -> b w c"
    plan = ra.explain(x, pattern, op=op, reduction=reduction, **lengths)
    got = ra.reduce(x, pattern, reduction, **lengths) if op == "reduce" else \
        ra.repeat(x, pattern, **lengths)
    if op == "repeat":
        expected = einops.repeat(x, pattern, **lengths)
    elif reduction == "argmax":
        expected = x.argmax(axis=1)
    else:   # numpy's function: einops refuses an integer mean
        expected = einops.reduce(x, pattern, NUMPY_REDUCTIONS[reduction])
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    from_numpy = eval(plan.to_source("numpy"), {"x": x, "np": np})
    from_torch = eval(plan.to_source("torch"), {"x": torch.from_numpy(x), "torch": torch})
    np.testing.assert_allclose(from_numpy, got, rtol=1e-12)
    np.testing.assert_allclose(from_torch.numpy(), got, rtol=1e-9)


@pytest.mark.parametrize("reduction", list(ORACLE_REDUCTIONS))
@pytest.mark.parametrize("pattern", ["b (h 2) w -> w b", "b h w -> h", "b h w -> (w b)"])
def test_tensor_reductions_match_einops(pattern, reduction) -> None:
    x = _data((2, 6, 4))
    t = ra.from_numpy(x)
    got = ra.reduce(t, pattern, reduction)
    assert isinstance(got, ra.Tensor) and got.is_contiguous()
    expected = np.asarray(einops.reduce(x, pattern, ORACLE_REDUCTIONS[reduction]))
    assert got.numpy().dtype == expected.dtype
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-12)


def test_tensor_inputs_match_einops() -> None:
    x = _data((2, 6, 4))
    t = ra.from_numpy(x)
    view = ra.repeat(t, "b h w -> b h r w", r=3)
    assert isinstance(view, ra.Tensor) and view.stride() == (24, 4, 0, 1)
    assert view.untyped_storage().data_ptr() == t.untyped_storage().data_ptr()
    np.testing.assert_array_equal(view.numpy(), einops.repeat(x, "b h w -> b h r w", r=3))
    copied = ra.repeat(t, "b h w -> b (h r) w", r=3)
    assert copied.is_contiguous()
    np.testing.assert_array_equal(copied.numpy(), einops.repeat(x, "b h w -> b (h r) w", r=3))


def test_lists_are_stacked() -> None:
    xs = [np.arange(4.0), np.arange(4.0) + 1]
    np.testing.assert_array_equal(ra.reduce(xs, "n w -> w", "sum"), einops.reduce(xs, "n w -> w", "sum"))
    np.testing.assert_array_equal(ra.repeat(xs, "n w -> n w r", r=2), einops.repeat(xs, "n w -> n w r", r=2))


# ---------------------------------------------------------------------- errors

@pytest.mark.parametrize("call, error, message", [
    (lambda x: ra.reduce(x, "a b -> a", "median"), ra.RearrangeError,
     "unknown reduction 'median'; expected one of 'min', 'max'"),
    (lambda x: ra.reduce(x, "a b -> a", 3), ra.ArgumentTypeError,
     "reduction must be a str or a callable"),
    (lambda x: ra.reduce(x, "a b -> a c", "sum"), ra.PatternError,
     "axis 'c' appears only on the right side; reduce cannot create axes"),
    (lambda x: ra.repeat(x, "a b -> a", ), ra.PatternError,
     "axis 'b' appears only on the left side; repeat cannot remove axes"),
    (lambda x: ra.repeat(x, "a b -> a b c"), ra.PatternError,
     "axis 'c' is new on the right side, so its length cannot come from the input; pass it as c=..."),
    (lambda x: ra.repeat(x, "a b -> a b c", c=2.0), ra.PatternError,
     "axis length c=2.0 must be a positive integer"),
    (lambda x: ra.repeat(x, "a b -> a b c", c=0), ra.PatternError,
     "axis length c=0 must be a positive integer"),
    (lambda x: ra.reduce(x, "(a 4) b -> b", "sum"), ra.PatternError,
     "input dim 0 of size 2 cannot be split into (a 4)"),
    (lambda x: ra.repeat(x, "a b -> a b", copy="yes"), ra.ArgumentTypeError,
     "copy must be None, True or False"),
    (lambda x: ra.reduce("x", "a b -> a", "sum"), ra.ArgumentTypeError,
     "reduce() takes a numpy array"),
    (lambda x: ra.explain(x, "a b -> a", op="squeeze"), ra.RearrangeError,
     "explain: op must be one of"),
])
def test_errors_say_what_was_found_and_expected(call, error, message) -> None:
    x = np.zeros((2, 3))
    with pytest.raises(error) as info:
        call(x)
    assert message in str(info.value)


def test_pattern_errors_point_at_the_text() -> None:
    with pytest.raises(ra.PatternError) as info:
        ra.repeat(np.zeros((2, 3)), "a b -> a b copies")
    lines = str(info.value).splitlines()
    assert lines[1:3] == ["  a b -> a b copies", "             ^^^^^^"]
    assert "while repeating with pattern 'a b -> a b copies'" in lines[3]


def test_axes_named_copy_or_out_take_their_lengths_from_those_keywords() -> None:
    """einops patterns may name axes ``copy`` or ``out``: an int there is a length."""
    x = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(ra.repeat(x, "a b -> copy a b", copy=2),
                                  einops.repeat(x, "a b -> copy a b", copy=2))
    np.testing.assert_array_equal(ra.rearrange(np.arange(12).reshape(6, 2), "(out i) j -> out i j", out=3),
                                  einops.rearrange(np.arange(12).reshape(6, 2), "(out i) j -> out i j", out=3))
    with pytest.raises(ra.ArgumentTypeError, match="copy must be None, True or False, got 1"):
        ra.repeat(x, "a b -> a b r", r=2, copy=1)   # 1 is not True, and no axis is named copy
    with pytest.raises(ra.ArgumentTypeError, match="copy must be None, True or False, got 0"):
        ra.rearrange(x, "a b -> b a", copy=0)


def test_reduce_accepts_einops_rearrange_and_repeat_names() -> None:
    x = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(ra.reduce(x, "a b -> b a", "rearrange"), x.T)
    np.testing.assert_array_equal(ra.reduce(x, "a b -> a b r", "repeat", r=2),
                                  einops.repeat(x, "a b -> a b r", r=2))
