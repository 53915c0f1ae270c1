"""get_at, set_at, add_at, subtract_at against einx 0.4.3 (the oracle) on numpy and
torch, and against plain numpy indexing where einx has no answer (size-0 axes).

einx ravels the coordinates into one flat index without checking each axis, so its
result for a negative coordinate is another element than numpy's ``x[..., -1]``; ours
checks and wraps every coordinate on its own axis. The oracle is therefore called with
the coordinates wrapped (``idx % n``), which is what ours must equal.
"""

from __future__ import annotations

import math

import einx
import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
import torch
from hypothesis import given, strategies as st

import rearrange as ra
from rearrange import indexing
from rearrange.errors import ArgumentTypeError, DimensionError, PatternError, RearrangeError

OPS = ("get_at", "set_at", "add_at", "subtract_at")
UPDATES = OPS[1:]


def ours(op, *arrays, pattern, **lengths):
    return getattr(ra, op)(*arrays, pattern, **lengths)


def oracle(op, *arrays, pattern, **lengths):
    """einx on copies (einx's updates write into the array they are given)."""
    copies = [a.copy() if isinstance(a, np.ndarray) else a.clone() for a in arrays]
    return getattr(einx, op)(pattern, *copies, **lengths)


def wrapped(idx, sizes, coordinate_axis=-1):
    """``idx``'s coordinates wrapped into ``0 <= i < n`` (``sizes`` per coordinate along
    ``coordinate_axis``, or one size for an index array of one coordinate)."""
    if np.ndim(sizes) == 0:
        return idx % sizes
    shape = [1] * idx.ndim
    shape[coordinate_axis] = len(sizes)
    modulus = np.asarray(sizes).reshape(shape)
    if isinstance(idx, torch.Tensor):
        modulus = torch.as_tensor(modulus)
    return idx % modulus


def as_torch(*arrays):
    return [torch.from_numpy(a.copy()) if isinstance(a, np.ndarray) else a for a in arrays]


def same(a, b):
    a = a.detach().numpy() if isinstance(a, torch.Tensor) else np.asarray(a)
    b = b.detach().numpy() if isinstance(b, torch.Tensor) else np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, b.shape, a.dtype, b.dtype)
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


rng = np.random.default_rng(38)


def ints(high, shape, low=0):
    return rng.integers(low, high, shape)


def floats(*shape):
    return rng.normal(size=shape).astype(np.float32)


# (pattern, arrays, sizes of the indexed axes per coordinate array for wrapping)
# — einx's documented examples first, then ours.
GET_CORPUS = [
    ("[h], p [1] -> p", lambda: [floats(5), ints(5, (7, 1))]),
    ("[h], p -> p", lambda: [floats(5), ints(5, (7,))]),
    ("[a b c d], p [n] -> p", lambda: [floats(3, 4, 5, 6), ints(3, (7, 4))]),
    ("[a b c d], p, p [2], p [1] -> p",
     lambda: [floats(3, 4, 5, 6), ints(3, 7), ints(4, (7, 2)), ints(5, (7, 1))]),
    ("b [h w] c, b p [2] -> b p c", lambda: [floats(2, 3, 4, 5), ints(3, (2, 6, 2))]),
    ("[v] d, b t -> b t d", lambda: [floats(50, 8), ints(50, (4, 6))]),
    ("b [h] c, b p -> p b c", lambda: [floats(2, 3, 4), ints(3, (2, 5))]),
    ("b [h] c, b p -> b (p c)", lambda: [floats(2, 3, 4), ints(3, (2, 5))]),
    ("b [h] c, p -> b p c", lambda: [floats(2, 3, 4), ints(3, (5,))]),
    ("b [h] c, p b -> b p c", lambda: [floats(2, 3, 4), ints(3, (5, 2))]),
    ("b [h] c, b c -> b c", lambda: [floats(2, 3, 4), ints(3, (2, 4))]),
    ("[b h] c, p, p -> p c", lambda: [floats(2, 3, 4), ints(2, 5), ints(3, 5)]),
    ("[b] h [c], p [2] -> p h", lambda: [floats(2, 3, 4), ints(2, (5, 2))]),
    ("b [h c], b [2] p -> b p", lambda: [floats(2, 3, 4), ints(3, (2, 2, 5))]),
    ("b [h] c, b p q -> b p q c", lambda: [floats(2, 3, 4), ints(3, (2, 2, 3))]),
    ("b [h] c, b -> b c", lambda: [floats(2, 3, 4), ints(3, (2,))]),
    ("... [h] c, ... p -> ... p c", lambda: [floats(2, 3, 4), ints(3, (2, 5))]),
    ("b [h] c, b p -> b p c 1", lambda: [floats(2, 3, 4), ints(3, (2, 5))]),
    ("(b [h]) c, b p -> b p c", lambda: [floats(6, 4), ints(3, (2, 5))]),
    ("(b [h w]) c, b p [2] -> c b p", lambda: [floats(24, 5), ints(3, (2, 6, 2))]),
    ("b [h w] c, (b p) [2] -> (b p) c", lambda: [floats(2, 3, 3, 5), ints(3, (12, 2))]),
    ("[h w], [2] -> ", lambda: [floats(3, 4), ints(3, (2,))]),
    ("[h], -> ", lambda: [floats(3), np.array(-2)]),
    ("c [h] b, b p -> b p c", lambda: [floats(4, 3, 2), ints(3, (2, 5))]),
]
GET_LENGTHS = {"(b [h]) c, b p -> b p c": {"b": 2}, "(b [h w]) c, b p [2] -> c b p":
               {"b": 2, "h": 3}, "b [h w] c, (b p) [2] -> (b p) c": {"p": 6}}


@pytest.mark.parametrize("pattern, make", GET_CORPUS, ids=[p for p, _ in GET_CORPUS])
@pytest.mark.parametrize("library", ["numpy", "torch"])
def test_get_at_equals_einx(pattern, make, library):
    arrays = make()
    lengths = GET_LENGTHS.get(pattern, {})
    if library == "torch":
        arrays = as_torch(*arrays)
    same(ours("get_at", *arrays, pattern=pattern, **lengths),
         oracle("get_at", *arrays, pattern=pattern, **lengths))


def distinct(batch, count, sizes):
    """Coordinates ``(batch, count, len(sizes))``: within each batch element ``count``
    different cells of an array of ``sizes`` (a set_at whose coordinates repeat keeps an
    unspecified value on torch)."""
    cells = [rng.permutation(math.prod(sizes))[:count] for _ in range(batch)]
    return np.stack(np.unravel_index(np.stack(cells), sizes), -1)


# einx's documented update examples, then ours; coordinates never repeat within a batch
# element (repeats: the tests below)
UPDATE_CORPUS = [
    ("p [h], p [1], p -> p [h]", lambda: [floats(7, 5), ints(5, (7, 1)), floats(7)]),
    ("p [h], p, p -> p [h]", lambda: [floats(7, 5), ints(5, (7,)), floats(7)]),
    ("b [h w] c, b p [2], b p c", lambda: [floats(2, 3, 4, 5), distinct(2, 6, (3, 4)),
                                            floats(2, 6, 5)]),
    ("b [h w] c, b p [2], b p c -> b [h w] c",
     lambda: [floats(2, 3, 4, 5), distinct(2, 6, (3, 4)), floats(2, 6, 5)]),
    ("[v] d, b t, b t d", lambda: [floats(20, 8), distinct(1, 18, (20,)).reshape(3, 6),
                                   floats(3, 6, 8)]),
    ("[v] d, b t, d", lambda: [floats(20, 8), distinct(1, 18, (20,)).reshape(3, 6),
                               floats(8)]),
    ("[a b c d], p, p [2], p [1], p",
     lambda: (lambda i: [floats(3, 4, 5, 6), i[:, 0], i[:, 1:3], i[:, 3:4], floats(7)])(
         distinct(1, 7, (3, 4, 5, 6))[0])),
    ("c [h] b, b p, p b c", lambda: [floats(4, 3, 2), distinct(2, 3, (3,))[..., 0],
                                     floats(3, 2, 4)]),
    ("b [h] c, p, b p c", lambda: [floats(2, 3, 4), distinct(1, 3, (3,))[0, :, 0],
                                   floats(2, 3, 4)]),
    ("b [h] c, b p, b p c -> c b [h]",
     lambda: [floats(2, 3, 4), distinct(2, 3, (3,))[..., 0], floats(2, 3, 4)]),
    ("(b [h]) c, b p, b p c", lambda: [floats(6, 4), distinct(2, 3, (3,))[..., 0],
                                       floats(2, 3, 4)]),
]


@pytest.mark.parametrize("op", UPDATES)
@pytest.mark.parametrize("pattern, make", UPDATE_CORPUS, ids=[p for p, _ in UPDATE_CORPUS])
@pytest.mark.parametrize("library", ["numpy", "torch"])
def test_updates_equal_einx(op, pattern, make, library):
    arrays = make()
    lengths = {"b": 2} if "(b [h])" in pattern else {}
    expected = oracle(op, *as_torch(*arrays), pattern=pattern, **lengths)
    if library == "torch":
        arrays = as_torch(*arrays)
    elif op != "set_at":
        # (einx's numpy set_at calls np.put, which repeats the update array instead of
        # broadcasting it: '[v] d, b t, d' writes v[0] into a whole row. einx on torch
        # broadcasts: the oracle for set_at on both.)
        expected = oracle(op, *arrays, pattern=pattern, **lengths)
    same(ours(op, *arrays, pattern=pattern, **lengths), expected)


@pytest.mark.parametrize("library", ["numpy", "torch"])
def test_add_at_accumulates_repeated_coordinates(library):
    x, idx, values = floats(2, 5, 3), np.array([[1, 1, 1, 4], [0, 0, 2, 0]]), floats(2, 4, 3)
    expected = x.copy()
    for b in range(2):
        for p in range(4):
            expected[b, idx[b, p]] += values[b, p]
    arrays = [x, idx, values] if library == "numpy" else as_torch(x, idx, values)
    same(ra.add_at(*arrays, "b [h] c, b p, b p c"), expected)
    same(ra.subtract_at(*arrays, "b [h] c, b p, b p c"), 2 * x - expected)
    same(ra.add_at(*arrays, "b [h] c, b p, b p c"),
         oracle("add_at", *arrays, pattern="b [h] c, b p, b p c"))


def test_set_at_with_repeated_coordinates_keeps_the_last_on_numpy_as_einx():
    x, idx, values = floats(6), np.array([1, 1, 1, 3]), floats(4)
    result = ra.set_at(x, idx, values, "[n], p, p")
    same(result, oracle("set_at", x, idx, values, pattern="[n], p, p"))
    assert result[1] == values[2]


# --------------------------------------------------------------------- hypothesis


@st.composite
def layouts(draw, shape):
    """A float32 array of ``shape`` with a drawn layout: permuted, sliced with steps
    (negative too), or broadcast (stride 0) along a size-1 axis."""
    order = draw(st.permutations(range(len(shape))))
    steps = [draw(st.sampled_from([1, 2, -1])) for _ in shape]
    base_shape = [shape[i] * abs(steps[i]) for i in order]
    base = np.arange(math.prod(base_shape), dtype=np.float32).reshape(base_shape)
    x = base.transpose(np.argsort(order))
    x = x[tuple(slice(None, None, s) for s in steps)]
    assert x.shape == tuple(shape)
    return x


@st.composite
def gathers(draw):
    b = draw(st.integers(0, 3))
    h = draw(st.integers(1, 4))
    w = draw(st.integers(1, 4))
    c = draw(st.integers(0, 3))
    p = draw(st.integers(0, 5))
    x = draw(layouts((b, h, w, c)))
    i0 = draw(hnp.arrays(np.int64, (b, p), elements=st.integers(-h, h - 1)))
    i1 = draw(hnp.arrays(np.int32, (b, p), elements=st.integers(-w, w - 1)))
    return x, np.stack([i0, i1.astype(np.int64)], -1), i0, i1


def _numpy_gather(x, i0, i1):
    """Plain numpy's advanced indexing: per-axis wrap, the oracle for size-0 axes."""
    b = np.arange(x.shape[0])[:, None]
    return x[b, i0, i1]


@given(gathers())
def test_get_at_any_layout_and_index_values(case):
    x, idx, i0, i1 = case
    expected = _numpy_gather(x, i0, i1)
    same(ra.get_at(x, idx, "b [h w] c, b p [2] -> b p c"), expected)
    same(ra.get_at(x, i0, i1, "b [h w] c, b p, b p -> b p c"), expected)
    same(ra.get_at(x.transpose(3, 1, 2, 0), idx, "c [h w] b, b p [2] -> p c b"),
         expected.transpose(1, 2, 0))
    xt, it = torch.from_numpy(x.copy()), torch.from_numpy(idx)
    same(ra.get_at(xt, it, "b [h w] c, b p [2] -> b p c"), expected)
    if min(x.strides) >= 0:     # torch takes the same layout (no negative strides)
        same(ra.get_at(torch.from_numpy(x), it, "b [h w] c, b p [2] -> b p c"), expected)
    if x.size and idx.size:     # einx fails on size-0 arrays
        h, w = x.shape[1:3]
        same(oracle("get_at", x, wrapped(idx, [h, w]), pattern="b [h w] c, b p [2] -> b p c"),
             expected)


@given(gathers(), st.sampled_from(UPDATES))
def test_updates_any_layout_and_index_values(case, op):
    x, idx, i0, i1 = case
    values = np.arange(math.prod(i0.shape) * x.shape[3], dtype=np.float32).reshape(
        i0.shape + x.shape[3:]) + 0.5
    expected = x.copy()
    b = np.arange(x.shape[0])[:, None]
    if op == "set_at":
        expected[b, i0, i1] = values
    else:
        (np.add if op == "add_at" else np.subtract).at(expected, (b, i0, i1), values)
    x_before, idx_before, values_before = x.copy(), idx.copy(), values.copy()
    result = getattr(ra, op)(x, idx, values, "b [h w] c, b p [2], b p c")
    same(result, expected)
    np.testing.assert_array_equal(x, x_before)
    np.testing.assert_array_equal(idx, idx_before)
    np.testing.assert_array_equal(values, values_before)
    if op != "set_at" or len({(bb, *map(int, pos)) for bb in range(x.shape[0])
                              for pos in zip(i0[bb] % max(x.shape[1], 1),
                                             i1[bb] % max(x.shape[2], 1))}) == i0.size:
        xt, it, vt = as_torch(x.copy(), idx, values)
        same(getattr(ra, op)(xt, it, vt, "b [h w] c, b p [2], b p c"), expected)
        if min(x.strides) >= 0:     # x's own layout (index_add into rows of it)
            same(getattr(ra, op)(torch.from_numpy(x), it, vt, "b [h w] c, b p [2], b p c"),
                 expected)
            np.testing.assert_array_equal(x, x_before)


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "uint8", "uint16"])
@pytest.mark.parametrize("library", ["numpy", "torch"])
def test_any_integer_dtype_indexes(dtype, library):
    x, idx = floats(2, 3, 4), ints(3, (2, 5)).astype(dtype)
    expected = x[np.arange(2)[:, None], idx.astype(np.int64)]
    if library == "torch":
        if not hasattr(torch, dtype):
            pytest.skip(f"torch has no {dtype}")
        x, idx = as_torch(x, idx)     # (uint8 would be a mask to torch's indexing)
    same(ra.get_at(x, idx, "b [h] c, b p -> b p c"), expected)
    same(ra.add_at(x, idx, floats(2, 5, 4) * 0 + 1, "b [h] c, b p, b p c"),
         oracle("add_at", *as_torch(np.asarray(x), idx.astype(np.int64) if isinstance(
             idx, np.ndarray) else idx.long(), np.ones((2, 5, 4), np.float32)),
             pattern="b [h] c, b p, b p c"))


# --------------------------------------------------------------------- errors

ERRORS = [
    # (pattern, arrays, error class, text in the message)
    ("b [h] c, b p -> b p c", lambda: [floats(2, 3, 4), ints(3, (3, 5))], PatternError,
     "axis 'b'"),
    ("b [h] c, b p -> b p c", lambda: [floats(2, 3, 4), ints(3, (2, 5, 1))], PatternError,
     "expression has 2 axes; the array has 3"),
    ("b [h] c, b p -> b p c", lambda: [floats(2, 3, 4), ints(3, (2, 5)).astype(np.float32)],
     ArgumentTypeError, "dtype float32"),
    ("b [h] c, b p -> b p c", lambda: [floats(2, 3, 4), ints(2, (2, 5)).astype(bool)],
     ArgumentTypeError, "dtype bool"),
    ("b [h] c, b p -> b p c", lambda: [floats(2, 3, 4), np.array([[0, 3]] * 2)],
     DimensionError, "index 3 is out of bounds for axis 'h' with size 3"),
    ("b [h] c, b p -> b p c", lambda: [floats(2, 3, 4), np.array([[0, -4]] * 2)],
     DimensionError, "index -4 is out of bounds for axis 'h'"),
    ("b [h w] c, b p [2] -> b p c", lambda: [floats(2, 3, 4, 5), np.array([[[0, 4]]] * 2)],
     DimensionError, "index 4 is out of bounds for axis 'w' with size 4"),
    ("b [h] c, b p -> b [p] c", lambda: [floats(2, 3, 4), ints(3, (2, 5))], PatternError,
     "output has no brackets"),
    ("b [h] c, b p -> b p", lambda: [floats(2, 3, 4), ints(3, (2, 5))], PatternError,
     "['c'] must appear in the output"),
    ("b h c, b p -> b p c", lambda: [floats(2, 3, 4), ints(3, (2, 5))], PatternError,
     "marks no axis to index"),
    ("b [h] c, b p [2] -> b p c", lambda: [floats(2, 3, 4), ints(3, (2, 5, 2))],
     PatternError, "give 2 coordinate(s)"),
    ("b [h] c, [b] [p] -> b c", lambda: [floats(2, 3, 4), ints(3, (2, 5))], PatternError,
     "at most one coordinate axis"),
    ("b [h] c, b p", lambda: [floats(2, 3, 4), ints(3, (2, 5))], PatternError,
     "needs an output expression"),
    ("b [h] c, b p -> b p c h", lambda: [floats(2, 3, 4), ints(3, (2, 5))], PatternError,
     "consumed by the coordinates"),
    ("b [h] (c1 + c2), b p -> b p c", lambda: [floats(2, 3, 4), ints(3, (2, 5))],
     PatternError, "concatenation"),
    ("b [h] c, b p, b -> b p c", lambda: [floats(2, 3, 4), ints(3, (2, 5))], PatternError,
     "3 input expressions"),
    ("b [h] c, b [h] -> b c", lambda: [floats(2, 3, 4), ints(3, (2, 3))], PatternError,
     "give 3 coordinate(s)"),
]


@pytest.mark.parametrize("pattern, make, error, text", ERRORS,
                         ids=[f"{p}-{t}" for p, _, _, t in ERRORS])
@pytest.mark.parametrize("library", ["numpy", "torch"])
def test_bad_inputs_name_what_was_found(pattern, make, error, text, library):
    arrays = make()
    if library == "torch":
        arrays = as_torch(*arrays)
    with pytest.raises(error) as caught:
        ra.get_at(*arrays, pattern)
    assert text in str(caught.value)
    assert isinstance(caught.value, RearrangeError)


def test_update_errors():
    x, idx = floats(2, 3, 4), ints(3, (2, 5))
    with pytest.raises(PatternError, match="the update array .* has no brackets"):
        ra.set_at(x, idx, floats(2, 5, 4), "b [h] c, b p, b p [c]")
    with pytest.raises(PatternError, match="neither an index array's axis"):
        ra.add_at(x, idx, floats(2, 5, 6), "b [h] c, b p, b p q")
    with pytest.raises(PatternError, match="at least 3 input expressions"):
        ra.set_at(x, idx, "b [h] c, b p")
    with pytest.raises(ArgumentTypeError, match="pattern last"):
        ra.get_at(x, idx)
    with pytest.raises(ArgumentTypeError, match="rearrange.Tensor"):
        ra.get_at(ra.zeros(2, 3), idx, "b [h], b p -> b p")
    with pytest.raises(ArgumentTypeError, match="numpy arrays"):
        ra.get_at(x, torch.from_numpy(idx), "b [h] c, b p -> b p c")
    with pytest.raises(DimensionError, match="out of bounds for axis 'h'"):
        ra.add_at(x, idx + 3, floats(2, 5, 4), "b [h] c, b p, b p c")
    with pytest.raises(DimensionError, match="out of bounds for axis 'h'"):
        ra.add_at(*as_torch(x, idx + 3, floats(2, 5, 4)), "b [h] c, b p, b p c")


def test_dask_is_refused_with_a_clear_error():
    dask_array = pytest.importorskip("dask.array")
    with pytest.raises(ArgumentTypeError, match="dask"):
        ra.get_at(dask_array.zeros((2, 3)), np.zeros((2, 1), int), "b [h], b p -> b p")


# --------------------------------------------------------------------- the plan


def test_the_gather_reads_a_view_of_x_not_a_copy():
    plan = ra.explain_indexing((50000, 512), (32, 128), "[v] d, b t -> b t d")
    assert plan.route == "rows" and plan.take and plan.rows_view == (50000, 512)
    x = floats(2, 3, 4, 5)
    plan = ra.explain_indexing(x, ints(3, (2, 6, 2)), "b [h w] c, b p [2] -> b p c")
    assert plan.route == "rows" and plan.multipliers == (12, 4, 1)
    # c in front, x stored as (b h w c): the rows view is C-contiguous again
    plan = ra.explain_indexing(x.transpose(3, 0, 1, 2), ints(3, (2, 6, 2)),
                               "c b [h w], b p [2] -> b p c")
    assert plan.route == "rows" and plan.take
    # every other c: batch and indexed axes still merge into rows, but the rows view is
    # not C-contiguous, so no np.take (which would copy all of x): rows[row]
    plan = ra.explain_indexing(floats(2, 3, 4, 10)[..., ::2], ints(3, (2, 6, 2)),
                               "b [h w] c, b p [2] -> b p c")
    assert plan.route == "rows" and not plan.take
    # strides that cannot merge: one index per axis on the permuted view
    plan = ra.explain_indexing(x[:, :, :3], ints(2, (2, 6, 2)),
                               "b [h w] c, b p [2] -> b p c")
    assert plan.route == "axes"
    assert "advanced indexing" in str(plan)


def test_rows_view_shares_memory_with_x(monkeypatch):
    x = floats(4, 6, 5)
    seen = []
    real_take = np.take

    def spy(source, *args, **kwargs):
        seen.append(np.shares_memory(source, x))
        return real_take(source, *args, **kwargs)
    monkeypatch.setattr(indexing.np, "take", spy)
    ra.cache_clear()
    ra.get_at(x, ints(6, (4, 7)), "b [h] c, b p -> b p c")
    assert seen == [True]


def test_inputs_are_never_modified_torch():
    x, idx, values = as_torch(floats(2, 3, 4), ints(3, (2, 5)), floats(2, 5, 4))
    before = [t.clone() for t in (x, idx, values)]
    for op in UPDATES:
        ra.get_at(x, idx, "b [h] c, b p -> b p c")
        getattr(ra, op)(x, idx, values, "b [h] c, b p, b p c")
    for t, b in zip((x, idx, values), before):
        assert torch.equal(t, b)


def test_runners_are_cached():
    ra.cache_clear()
    x, idx = floats(2, 3, 4), ints(3, (2, 5))
    ra.get_at(x, idx, "b [h] c, b p -> b p c")
    ra.get_at(x, idx, "b [h] c, b p -> b p c")
    info = ra.cache_info().plans
    assert info.hits >= 1


# --------------------------------------------------------------------- torch


def test_autograd_through_x_and_values():
    x = torch.randn(2, 3, 4, dtype=torch.float64, requires_grad=True)
    values = torch.randn(2, 5, 4, dtype=torch.float64, requires_grad=True)
    idx = torch.tensor([[0, 2, 2, 1, -1], [1, 1, 0, 0, 2]])
    torch.autograd.gradcheck(lambda x: ra.get_at(x, idx, "b [h] c, b p -> b p c"), (x,))
    for op in ("add_at", "subtract_at"):
        torch.autograd.gradcheck(
            lambda x, v: getattr(ra, op)(x, idx, v, "b [h] c, b p, b p c"), (x, values))
    unique = torch.tensor([[0, 2, 1], [1, 0, 2]])
    torch.autograd.gradcheck(
        lambda x, v: ra.set_at(x, unique, v, "b [h] c, b p, b p c"), (x, values[:, :3]))


@pytest.mark.slow
def test_compiles_to_one_graph_over_changing_shapes():
    torch._dynamo.reset()
    compiles = []

    def backend(graph, example_inputs):
        compiles.append(graph)
        return graph.forward

    def gather_then_add(x, idx, values):
        y = ra.get_at(x, idx, "b [h w] c, b p [2] -> b p c")
        return ra.add_at(x, idx, y * values, "b [h w] c, b p [2], b p c"), y

    compiled = torch.compile(gather_then_add, backend=backend, dynamic=True, fullgraph=True)
    # (no size of 2 in the first call: dynamo would give b the coordinate axis' symbol,
    # "duck sizing", and recompile when they differ — torch's policy, not ours)
    for b, h, w, c, p in [(3, 4, 5, 6, 7), (5, 6, 8, 3, 9), (4, 7, 3, 4, 5)]:
        x = torch.randn(b, h, w, c)
        idx = torch.stack([torch.randint(-h, h, (b, p)), torch.randint(-w, w, (b, p))], -1)
        values = torch.randn(b, p, c)
        for got, want in zip(compiled(x, idx, values), gather_then_add(x, idx, values)):
            torch.testing.assert_close(got, want)
    assert len(compiles) == 1


@pytest.mark.slow
def test_inductor_and_export():
    def embed(table, ids):
        return ra.get_at(table, ids, "[v] d, b t -> b t d")

    table, ids = torch.randn(50, 8), torch.randint(0, 50, (4, 6))
    compiled = torch.compile(embed, dynamic=True, fullgraph=True)
    torch.testing.assert_close(compiled(table, ids), table[ids])

    class Embed(torch.nn.Module):
        def forward(self, table, ids):
            return embed(table, ids)

    exported = torch.export.export(Embed(), (table, ids))
    torch.testing.assert_close(exported.module()(table, ids), table[ids])


# --------------------------------------------------------------------- jax


def test_jax():
    jnp = pytest.importorskip("jax.numpy")
    x, idx, values = floats(2, 3, 4), ints(3, (2, 5), low=-3), floats(2, 5, 4)
    expected = ra.get_at(x, idx, "b [h] c, b p -> b p c")
    same(np.asarray(ra.get_at(jnp.asarray(x), jnp.asarray(idx), "b [h] c, b p -> b p c")),
         expected)
    for op in UPDATES[1:]:
        same(np.asarray(getattr(ra, op)(jnp.asarray(x), jnp.asarray(idx),
                                        jnp.asarray(values), "b [h] c, b p, b p c")),
             getattr(ra, op)(x, idx, values, "b [h] c, b p, b p c"))
    with pytest.raises(DimensionError):
        ra.get_at(jnp.asarray(x), jnp.asarray(idx + 3), "b [h] c, b p -> b p c")
