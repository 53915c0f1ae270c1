"""The planner returns a view exactly when one exists: checked against a brute force.

The brute-force oracle: lay out the storage position of every input element (an
``arange`` with the input's strides), rearrange those positions with einops, and ask
whether the result is *affine* — every output dim of size >= 2 steps through storage by
one constant amount. Some strides express the result iff that holds. The planner must
return a view in exactly those cases, with exactly those strides.
"""

from __future__ import annotations

import math

import einops
import numpy as np
from hypothesis import assume, example, given, note
from hypothesis import strategies as st

import rearrange as ra

NAMES = "abcde"


def storage_positions(array: np.ndarray) -> np.ndarray:
    """Position of each element in storage, in elements, relative to element 0."""
    itemsize = array.itemsize
    positions = np.zeros(array.shape, dtype=np.int64)
    for dim, (size, stride) in enumerate(zip(array.shape, array.strides)):
        index_shape = [1] * array.ndim
        index_shape[dim] = size
        positions = positions + (np.arange(size) * (stride // itemsize)).reshape(index_shape)
    return positions


def affine_strides(positions: np.ndarray) -> tuple[int | None, ...] | None:
    """The constant step of every dim (None for size <= 1), or None if not affine."""
    if positions.size == 0:
        return tuple(None for _ in positions.shape)
    steps = []
    for dim, size in enumerate(positions.shape):
        if size < 2:
            steps.append(None)
            continue
        diffs = np.diff(positions, axis=dim)
        if not (diffs == diffs.flat[0]).all():
            return None
        steps.append(int(diffs.flat[0]))
    return tuple(steps)


@st.composite
def rearrange_cases(draw: st.DrawFn):
    """A random pattern without ellipsis, its axis lengths, and a strided input for it."""
    n_axes = draw(st.integers(0, 4))
    names = list(NAMES[:n_axes])
    lengths = {n: draw(st.sampled_from([1, 2, 3, 4, 0]) if draw(st.booleans()) else st.sampled_from([2, 3]))
               for n in names}

    def grouping(order: list[str]) -> list[list[str]]:
        groups: list[list[str]] = []
        for name in order:
            if groups and draw(st.booleans()):
                groups[-1].append(name)
            else:
                groups.append([name])
        for _ in range(draw(st.integers(0, 2))):  # unit axes
            groups.insert(draw(st.integers(0, len(groups))), [])
        return groups

    left_order = draw(st.permutations(names))
    left = grouping(left_order)
    # The output keeps the input's order half the time: merges of neighbours, not only
    # of axes a transpose brought together.
    right = grouping(left_order if draw(st.booleans()) else draw(st.permutations(names)))

    def spell(groups: list[list[str]], bare_unit: bool) -> str:
        parts = []
        for g in groups:
            if not g:
                parts.append("1" if bare_unit else "()")
            elif len(g) == 1:
                parts.append(g[0])
            else:
                parts.append("(" + " ".join(g) + ")")
        return " ".join(parts)

    pattern = f"{spell(left, draw(st.booleans()))} -> {spell(right, draw(st.booleans()))}"
    given_lengths = {}
    for g in left:
        if len(g) > 1:
            skip = draw(st.sampled_from(g))
            given_lengths.update({n: lengths[n] for n in g if n != skip})
    assume(all(v > 0 for v in given_lengths.values()))
    shape = [math.prod(lengths[n] for n in g) for g in left]

    # The input: each dim plain, stepped (maybe reversed) or broadcast, in a random
    # storage order.
    # Reversals are drawn as often as plain dims, and the storage order is the pattern's
    # own half the time: a reversed dim must often sit next to a plain one in storage and
    # be merged with it, where |stride| alone would wrongly allow the merge.
    kinds = [draw(st.sampled_from(["plain", "reverse", "plain", "reverse", "step", "broadcast"]))
             for _ in shape]
    steps = [{"plain": 1, "step": 2, "reverse": -1, "broadcast": 1}[k] for k in kinds]
    base_shape = [1 if k == "broadcast" else s * abs(step) for s, k, step in zip(shape, kinds, steps)]
    order = (list(range(len(shape))) if draw(st.booleans())
             else draw(st.permutations(range(len(shape)))))
    base = np.arange(math.prod(base_shape), dtype=np.int32).reshape([base_shape[d] for d in order])
    base = base.transpose(np.argsort(order)) if shape else base
    sliced = base[tuple(slice(None, None, step) for step in steps) + (Ellipsis,)]
    x = np.broadcast_to(sliced, shape) if any(k == "broadcast" for k in kinds) else sliced
    return pattern, given_lengths, x


def _arange(shape, view=lambda a: a):
    return view(np.arange(math.prod(shape), dtype=np.int32).reshape(shape))


# Merges next to a reversed, broadcast, size-0 or size-1 dim, always run.
EXAMPLES = [
    ("a b -> (a b)", {}, _arange((2, 3), lambda a: a[:, ::-1])),
    ("a b -> (a b)", {}, _arange((2, 3), lambda a: a[::-1])),
    ("a b -> (a b)", {}, _arange((2, 3), lambda a: a[::-1, ::-1])),
    ("a b c -> a (b c)", {}, _arange((2, 3, 4), lambda a: a[:, ::-1])),
    ("a b c -> (a b c)", {}, _arange((2, 1, 3), lambda a: a[..., ::-1])),
    ("a (b c) -> (c a) b", {"b": 2}, _arange((3, 4), lambda a: a[::-1])),
    ("a b -> (b a)", {}, _arange((1, 3), lambda a: np.broadcast_to(a[:, ::-1], (2, 3)))),
    ("a b -> (a b)", {}, _arange((0, 3), lambda a: a[:, ::-1])),
    ("a b -> (a b) 1", {}, _arange((1, 3), lambda a: a[:, ::-1])),
]


def with_examples(test):
    for case in EXAMPLES:
        test = example(case)(test)
    return test


@with_examples
@given(rearrange_cases())
def test_view_exactly_when_strides_exist(case) -> None:
    pattern, lengths, x = case
    note(f"pattern={pattern!r} lengths={lengths} shape={x.shape} strides={x.strides}")
    positions = einops.rearrange(storage_positions(x), pattern, **lengths)
    oracle = affine_strides(positions)
    plan = ra.explain(x, pattern, **lengths)
    note(str(plan))
    assert plan.is_view == (oracle is not None)
    if oracle is not None:
        for size, got, want in zip(plan.output.shape, plan.output.strides, oracle):
            assert want is None or got == want


@with_examples
@given(rearrange_cases())
def test_values_memory_and_copy_modes(case) -> None:
    pattern, lengths, x = case
    expected = einops.rearrange(x, pattern, **lengths)
    is_view = ra.explain(x, pattern, **lengths).is_view

    got = ra.rearrange(x, pattern, **lengths)
    np.testing.assert_array_equal(got, expected)
    assert got.shape == expected.shape and got.dtype == expected.dtype
    if x.size and got.size:
        assert np.shares_memory(got, x) == is_view
    assert got.flags.writeable == (x.flags.writeable or not is_view)

    fresh = ra.rearrange(x, pattern, copy=True, **lengths)
    np.testing.assert_array_equal(fresh, expected)
    assert fresh.flags.c_contiguous and fresh.flags.writeable
    assert not np.shares_memory(fresh, x)

    for _ in range(2):      # planned, then from the cache
        out = np.full(expected.shape, -1, expected.dtype)
        assert ra.rearrange(x, pattern, out=out, **lengths) is out
        np.testing.assert_array_equal(out, expected)

    if is_view:
        np.testing.assert_array_equal(ra.rearrange(x, pattern, copy=False, **lengths), expected)
    else:
        try:
            ra.rearrange(x, pattern, copy=False, **lengths)
        except ra.NoViewError as error:
            assert "cannot merge" in str(error)
        else:
            raise AssertionError("copy=False returned although no view exists")


@with_examples
@given(rearrange_cases())
def test_tensor_input_matches_numpy(case) -> None:
    pattern, lengths, x = case
    t = ra.from_numpy(x)
    got = ra.rearrange(t, pattern, **lengths)
    assert isinstance(got, ra.Tensor)
    np.testing.assert_array_equal(got.numpy(), einops.rearrange(x, pattern, **lengths))
    plan = ra.explain(t, pattern, **lengths)
    assert (got.storage().data_ptr() == t.storage().data_ptr()) == plan.is_view
    out = ra.full(got.shape, -1, dtype=ra.int32)
    assert ra.rearrange(t, pattern, out=out, **lengths) is out
    np.testing.assert_array_equal(out.numpy(), got.numpy())
    if plan.is_view:
        assert got.stride() == plan.output.strides
