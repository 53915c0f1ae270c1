"""rearrange.einsum against its oracles.

* einops 0.8.2 on numpy for every einsum call of the corpus (values, shape, dtype);
* hand-written numpy for the compositions and unit axes einops refuses: each oracle
  reshapes the inputs itself and calls ``np.einsum`` with its own subscripts;
* a brute-force sum over every index combination, on random patterns (compositions,
  units, diagonals, broadcast dims) and random strided inputs (slices, negative steps,
  stride-0 broadcast dims, size-0 and size-1 dims), numpy arrays and rearrange.Tensor;
* errors: class, message, and the caret under the offending text.
"""

from __future__ import annotations

import itertools
import json
import math
import string
import subprocess
import sys

import einops
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import rearrange as ra
from corpus import load
from rearrange.contraction import EinsumPlan, explain_einsum, parse_einsum

RNG = np.random.default_rng(0)


def random_inputs(shapes, dtype=np.float64):
    if np.dtype(dtype).kind == "f":
        return [RNG.standard_normal(shape).astype(dtype) for shape in shapes]
    return [RNG.integers(-5, 6, size=shape).astype(dtype) for shape in shapes]


# --------------------------------------------------------------------------- einops corpus


@pytest.mark.parametrize("entry", load("einsum"))
def test_corpus_matches_einops(entry) -> None:
    shapes = [tuple(shape) for shape in entry["example"]["shape"]]
    inputs = random_inputs(shapes)
    before = [x.copy() for x in inputs]
    expected = einops.einsum(*inputs, entry["pattern"])
    result = ra.einsum(*inputs, entry["pattern"])
    assert np.shape(result) == np.shape(expected) == tuple(entry["example"]["output_shape"])
    assert np.asarray(result).dtype == np.asarray(expected).dtype
    np.testing.assert_allclose(result, expected, rtol=1e-12, atol=1e-12)
    for x, original in zip(inputs, before):
        np.testing.assert_array_equal(x, original)


@pytest.mark.parametrize("entry", load("einsum"))
def test_corpus_integers_exact_and_tensors(entry) -> None:
    shapes = [tuple(shape) for shape in entry["example"]["shape"]]
    inputs = random_inputs(shapes, np.int32)
    expected = einops.einsum(*inputs, entry["pattern"])
    result = ra.einsum(*inputs, entry["pattern"])
    assert np.asarray(result).dtype == np.asarray(expected).dtype
    np.testing.assert_array_equal(result, expected)
    as_tensors = ra.einsum(*[ra.from_numpy(x) for x in inputs], entry["pattern"])
    assert isinstance(as_tensors, ra.Tensor)
    np.testing.assert_array_equal(as_tensors.numpy(), expected)


# einops' own functional cases (einops/tests/test_einsum.py), with numpy's subscripts.
EINOPS_FUNCTIONAL = [
    ("b c h w, b w -> b h", "abcd,ad->ac", [(2, 3, 4, 5), (2, 5)]),
    ("... one two three, three four five -> ... two five", "...abc,cde->...be",
     [(3, 5, 2, 3, 4), (4, 5, 6)]),
    ("one two three ..., three four five -> two five ...", "abc...,cde->be...",
     [(2, 3, 4, 3, 5), (4, 5, 6)]),
    ("first_tensor second_tensor -> first_tensor", "ab->a", [(5, 4)]),
    ("i i -> ", "aa->", [(5, 5)]),
    (" one  two  ,  three four->two  four  ", "ab,cd->bd", [(2, 3), (4, 5)]),
    ("i middle i -> middle", "aba->b", [(5, 10, 5)]),
    ("i ... i -> ...", "a...a->...", [(5, 3, 2, 1, 4, 5)]),
    ("i ... i -> i ...", "a...a->a...", [(5, 3, 2, 1, 4, 5)]),
    ("one one one -> one", "aaa->a", [(5, 5, 5)]),
    ("... -> ...", "...->...", [(5, 4, 3, 2, 1)]),
    ("..., ..., ... -> ...", "...,...,...->...", [(3, 2), (3, 2), (3, 2)]),
    ("index ->", "a->", [(10,)]),
    # numpy's broadcasting, which einops passes through
    ("... i, ... i -> ...", "...a,...a->...", [(3, 1, 4), (5, 4)]),
    ("i j, j -> i", "ab,b->a", [(3, 4), (1,)]),
    ("i j, j -> i", "ab,b->a", [(3, 1), (4,)]),
    ("i j, j -> i", "ab,b->a", [(3, 0), (1,)]),
    ("i, -> i", "a,->a", [(3,), ()]),
    ("i -> ... i", "a->...a", [(3,)]),
    ("_ i -> i", "ab->b", [(2, 3)]),
]


@pytest.mark.parametrize(("pattern", "subscripts", "shapes"), EINOPS_FUNCTIONAL,
                         ids=[case[0] for case in EINOPS_FUNCTIONAL])
def test_functional_cases_match_numpy_and_einops(pattern, subscripts, shapes) -> None:
    inputs = random_inputs(shapes)
    expected = np.einsum(subscripts, *inputs)
    np.testing.assert_allclose(einops.einsum(*inputs, pattern), expected)
    result = ra.einsum(*inputs, pattern)
    assert np.shape(result) == expected.shape
    assert type(result) is type(expected)  # a numpy scalar for a 0-d result, as numpy's
    np.testing.assert_allclose(result, expected, rtol=1e-12, atol=1e-12)


# --------------------------------------------------------------------------- beyond einops


def _attention_oracle(x, y):
    b, hd, t = x.shape
    return np.einsum("bhdt,bhsd->bhts", x.reshape(b, 4, hd // 4, t), y)


# pattern, input shapes, axis lengths, an oracle written with plain numpy
COMPOSITIONS = [
    ("b (h d), (h d) e -> b e", [(2, 12), (12, 5)], {"h": 3}, lambda x, w: x @ w),
    # h and d always together: their split does not matter, no length needed
    ("b (h d), (h d) e -> b e", [(2, 12), (12, 5)], {}, lambda x, w: x @ w),
    ("b (a h d), (a h d) e -> b (h d) e", [(2, 12), (12, 5)], {"a": 2},
     lambda x, w: np.einsum("bak,ake->bke", x.reshape(2, 2, 6), w.reshape(2, 6, 5)).reshape(2, 6, 5)),
    ("b (h d), (h d) e -> b h e", [(2, 12), (12, 5)], {"h": 3},
     lambda x, w: np.einsum("bhd,hde->bhe", x.reshape(2, 3, 4), w.reshape(3, 4, 5))),
    ("b (h d) t, b h s d -> b h t s", [(2, 12, 5), (2, 4, 6, 3)], {}, _attention_oracle),
    ("b (h d) t, b h s d -> b h t s", [(2, 12, 5), (2, 4, 6, 3)], {"h": 4}, _attention_oracle),
    ("a b, b c -> (a c)", [(2, 3), (3, 4)], {}, lambda x, y: (x @ y).reshape(-1)),
    ("a b, b c -> (c a)", [(2, 3), (3, 4)], {}, lambda x, y: (x @ y).T.reshape(-1)),
    ("a b, b c -> a 1 c", [(2, 3), (3, 4)], {}, lambda x, y: (x @ y)[:, None, :]),
    ("a b, b c -> () a c ()", [(2, 3), (3, 4)], {}, lambda x, y: (x @ y)[None, :, :, None]),
    ("a 1 b, () b c -> a c", [(2, 1, 3), (1, 3, 4)], {}, lambda x, y: x[:, 0] @ y[0]),
    ("(a b) c -> (c b) a", [(6, 4)], {"a": 2},
     lambda x: x.reshape(2, 3, 4).transpose(2, 1, 0).reshape(12, 2)),
    ("(a b), (b c) -> a c", [(6,), (12,)], {"b": 3},
     lambda x, y: np.einsum("ab,bc->ac", x.reshape(2, 3), y.reshape(3, 4))),
    ("(i j) i -> j", [(6, 2)], {"i": 2},
     lambda x: np.einsum("iji->j", x.reshape(2, 3, 2))),
    ("b (h w) c, c k -> b h w k", [(2, 6, 3), (3, 5)], {"w": 2},
     lambda x, w: np.einsum("bhwc,ck->bhwk", x.reshape(2, 3, 2, 3), w)),
    ("... (h d), h d e -> ... (h e)", [(7, 2, 6), (2, 3, 4)], {},
     lambda x, w: np.einsum("...hd,hde->...he", x.reshape(7, 2, 2, 3), w).reshape(7, 2, 8)),
    ("... d, d e -> (...) e", [(3, 2, 4), (4, 5)], {}, lambda x, w: (x @ w).reshape(6, 5)),
    ("... d, d e -> (... e)", [(3, 2, 4), (4, 5)], {}, lambda x, w: (x @ w).reshape(30)),
    ("a b, b -> a (b)", [(3, 4), (4,)], {}, lambda x, v: x * v),
    ("(a b) -> ", [(6,)], {"a": 3}, lambda x: x.sum()),
    (" -> 1 ()", [()], {}, lambda x: np.reshape(x, (1, 1))),
    ("a, a -> ()", [(4,), (4,)], {}, lambda x, y: np.reshape(x @ y, (1,))),
    # a size-1 dim broadcasts against the axis's length in another input
    ("i j, j -> (i j)", [(3, 4), (1,)], {}, lambda x, v: (x * v).reshape(12)),
    ("b (h d), h -> b d", [(2, 6), (1,)], {"h": 2},
     lambda x, v: x.reshape(2, 2, 3).sum(1) * v[0]),
    # zero-size dims
    ("a (b c), c -> a b", [(0, 6), (3,)], {}, lambda x, v: np.zeros((0, 2))),
    ("a (b c), c -> (a b)", [(2, 0), (0,)], {"b": 4}, lambda x, v: np.zeros(8)),
]


@pytest.mark.parametrize(("pattern", "shapes", "lengths", "oracle"), COMPOSITIONS,
                         ids=[f"{c[0]} {c[2]}" if c[2] else c[0] for c in COMPOSITIONS])
@pytest.mark.parametrize("kind", ["numpy", "tensor"])
def test_compositions_and_units_match_numpy_oracle(pattern, shapes, lengths, oracle, kind) -> None:
    inputs = random_inputs(shapes)
    before = [x.copy() for x in inputs]
    expected = np.asarray(oracle(*inputs))
    if kind == "numpy":
        result = np.asarray(ra.einsum(*inputs, pattern, **lengths))
    else:
        tensor = ra.einsum(*[ra.from_numpy(x) for x in inputs], pattern, **lengths)
        assert isinstance(tensor, ra.Tensor) and tensor.is_contiguous()
        result = tensor.numpy()
    assert result.shape == expected.shape and result.dtype == expected.dtype
    np.testing.assert_allclose(result, expected, rtol=1e-12, atol=1e-12)
    for x, original in zip(inputs, before):
        np.testing.assert_array_equal(x, original)
        assert not np.shares_memory(result, x)


# einops' rearrange needs every composed axis's length: not the fused (h d) cases
EINOPS_ROUNDTRIP = [c for c in COMPOSITIONS[:10] if "(h d), (h d)" not in c[0]
                    and "(a h d)" not in c[0]]


@pytest.mark.parametrize(("pattern", "shapes", "lengths", "oracle"), EINOPS_ROUNDTRIP,
                         ids=[c[0] for c in EINOPS_ROUNDTRIP])
def test_compositions_match_einops_rearrange_around_einsum(pattern, shapes, lengths, oracle) -> None:
    """A second oracle: einops' own rearrange to elementary axes, einsum, rearrange."""
    inputs = random_inputs(shapes)
    left, right = pattern.split("->")
    sides = [side.strip() for side in left.split(",")]
    every = dict(lengths)
    for side, x in zip(sides, inputs):
        every.update(einops.parse_shape(x, " ".join("_" if "(" in g or g in ("1", "()") else g
                                                    for g in _groups(side))))
    for side, x in zip(sides, inputs):
        for group in _groups(side):
            if group.startswith("("):
                members = group[1:-1].split()
                known = [m for m in members if m in every]
                if len(known) == len(members) - 1:
                    size = x.shape[_groups(side).index(group)]
                    missing = next(m for m in members if m not in every)
                    every[missing] = size // math.prod(every[m] for m in known)
    flat_sides = [" ".join(_elementary(side)) for side in sides]
    split = [einops.rearrange(x, f"{side} -> {flat}", **{k: v for k, v in every.items()
                                                         if k in flat.split()})
             for x, side, flat in zip(inputs, sides, flat_sides)]
    output_elementary = " ".join(_elementary(right))
    contracted = einops.einsum(*split, f"{', '.join(flat_sides)} -> {output_elementary}")
    expected = einops.rearrange(contracted, f"{output_elementary} -> {right.strip()}")
    np.testing.assert_allclose(ra.einsum(*inputs, pattern, **lengths), expected,
                               rtol=1e-12, atol=1e-12)


def _groups(side: str) -> list[str]:
    """'b (h d) 1' -> ['b', '(h d)', '1']"""
    groups, depth, current = [], 0, ""
    for char in side.strip() + " ":
        if char == "(":
            depth += 1
        if char == ")":
            depth -= 1
        if char == " " and depth == 0:
            if current:
                groups.append(current)
            current = ""
        else:
            current += char
    return groups


def _elementary(side: str) -> list[str]:
    return [name for group in _groups(side) for name in group.strip("()").split()
            if name not in ("1", "")]


def test_result_dtype_follows_numpy_promotion() -> None:
    x = np.arange(6, dtype=np.int8).reshape(2, 3)
    y = np.arange(12, dtype=np.uint8).reshape(3, 4)
    expected = np.einsum("ab,bc->ac", x, y)
    result = ra.einsum(x, y, "a b, b c -> (a c)")
    assert result.dtype == expected.dtype == np.int16
    np.testing.assert_array_equal(result, expected.reshape(-1))
    booleans = np.array([[True, False], [True, True]])
    np.testing.assert_array_equal(ra.einsum(booleans, booleans, "a b, b c -> a c"),
                                  np.einsum("ab,bc->ac", booleans, booleans))


def test_large_contractions_take_numpys_optimize_path() -> None:
    x, y, z = random_inputs([(20, 30, 40), (40, 30, 50), (20, 20, 30)])
    pattern = "a b c, c b d, a g k -> a b k"
    plan = explain_einsum([x, y, z], pattern)
    assert plan.path is not None and plan.optimize[0] == "einsum_path"
    np.testing.assert_allclose(ra.einsum(x, y, z, pattern), einops.einsum(x, y, z, pattern))
    small = explain_einsum([(2, 3), (3, 4)], "a b, b c -> a c")
    assert small.path is None and small.optimize is False
    big_ints = random_inputs([(40, 40), (40, 40)], np.int64)
    np.testing.assert_array_equal(ra.einsum(*big_ints, "a b, b c -> a c"),
                                  big_ints[0] @ big_ints[1])
    assert explain_einsum(big_ints, "a b, b c -> a c").path is not None


def test_object_arrays_use_the_plain_loop() -> None:
    x = np.array([[1, 2], [3, 4]] * 100, dtype=object).reshape(200, 2)
    y = np.array([[5, 6, 7], [8, 9, 10]] * 50, dtype=object).reshape(2, 150)
    plan = explain_einsum([x, y], "a b, b c -> a c")
    assert plan.path is None and plan.dtype == "object"
    np.testing.assert_array_equal(ra.einsum(x, y, "a b, b c -> a c"), np.einsum("ab,bc->ac", x, y))


def test_tensor_input_values_and_type() -> None:
    base = ra.arange(2 * 6 * 5, dtype=ra.float64).view(2, 6, 5)
    x = base[:, 1:5, :].transpose(1, 2)  # offset 5, strides (30, 1, 5): (2, 5, 4)
    w = ra.arange(4 * 3, dtype=ra.float64).view(3, 4).t()  # (4, 3), strides (1, 4)
    result = ra.einsum(x, w, "b t (h d), (h d) k -> b h t k", h=2)
    assert isinstance(result, ra.Tensor) and result.is_contiguous()
    expected = np.einsum("bthd,hdk->bhtk", x.numpy().reshape(2, 5, 2, 2),
                         w.numpy().reshape(2, 2, 3))
    np.testing.assert_allclose(result.numpy(), expected)
    assert ra.einsum(ra.arange(3.0), ra.arange(3.0), "i, i ->").numpy().shape == ()


def test_warm_calls_reuse_the_plan() -> None:
    x, w = random_inputs([(2, 12), (12, 5)])
    first = ra.einsum(x, w, "b (h d), (h d) e -> b h e", h=3)
    before = ra.cache_info().plans
    second = ra.einsum(x, w, "b (h d), (h d) e -> b h e", h=3)
    after = ra.cache_info().plans
    assert after.currsize == before.currsize and after.misses == before.misses
    assert after.hits == before.hits + 1
    np.testing.assert_array_equal(first, second)
    assert not np.shares_memory(first, second)
    # a non-integer length never hits a cached plan
    with pytest.raises(ra.PatternError, match=r"axis length h=3.0 must be a positive integer"):
        ra.einsum(x, w, "b (h d), (h d) e -> b h e", h=3.0)


def test_import_stays_light() -> None:
    code = ("import sys, numpy as np, rearrange as ra\n"
            "ra.einsum\n"
            "heavy = [m for m in ('lark', 'torch', 'einops', 'numba', 'dask') if m in sys.modules]\n"
            "assert not heavy, heavy\n"
            "print(ra.einsum(np.ones(3), np.ones(3), 'i, i ->'))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "3.0"


# --------------------------------------------------------------------------- Hypothesis

NAMES = ["b", "h", "dim", "t2", "_", "chan"]


@st.composite
def einsum_cases(draw):
    """(pattern, input shapes, axis lengths, input groups, output groups, broadcast dims).

    Groups are lists of names ([] is a unit dim). Axes of length 0 only stand alone (a
    group holding one can leave the others' lengths unknowable); every composed axis
    has its length given, so the pattern is always solvable.
    """
    names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=4, unique=True))
    lengths = {n: draw(st.integers(1, 3) | st.just(0) if k == 0 else st.integers(1, 3))
               for k, n in enumerate(names)}
    inputs = []
    for _ in range(draw(st.integers(1, 3))):
        axes = draw(st.lists(st.sampled_from(names), max_size=4))
        groups = []
        for axis in axes:
            if groups and groups[-1] and lengths[axis] and all(lengths[a] for a in groups[-1]) \
                    and axis not in groups[-1] and draw(st.booleans()):
                groups[-1].append(axis)
            else:
                groups.append([axis])
        for _ in range(draw(st.integers(0, 1))):
            groups.insert(draw(st.integers(0, len(groups))), [])
        inputs.append(groups)
    used = list(dict.fromkeys(a for groups in inputs for g in groups for a in g))
    out_axes = draw(st.permutations(used).flatmap(
        lambda p: st.integers(0, len(p)).map(lambda n: list(p[:n]))))
    output = []
    for axis in out_axes:
        if output and output[-1] and draw(st.booleans()):
            output[-1].append(axis)
        else:
            output.append([axis])
    for _ in range(draw(st.integers(0, 1))):
        output.insert(draw(st.integers(0, len(output))), [])
    bracketed_singles = draw(st.booleans())

    def spell(groups, allow_paren_single):
        words = []
        for g in groups:
            if not g:
                words.append(draw(st.sampled_from(["1", "()", "(1)"])))
            elif len(g) == 1 and not (allow_paren_single and bracketed_singles):
                words.append(g[0])
            else:
                words.append("(" + " ".join(g) + ")")
        return " ".join(words)

    # Composed axes must have a known length; a bare axis of length > 1 may show up as a
    # size-1 dim (broadcast) where another input or a composition carries it in full.
    composed = {a for groups in inputs for g in groups if len(g) > 1 for a in g}
    # Without the composed axes' lengths the pattern may be ambiguous: no broadcast dims
    # then, so that every solution the planner finds is the true one.
    give_lengths = draw(st.booleans())
    full = set(composed) if give_lengths else set()  # axes some input has in full (so far)
    shapes, broadcast = [], []
    for groups in inputs:
        shape, flags = [], []
        counts = {a: sum(g.count(a) for g in groups) for a in names}  # >1: a diagonal
        for g in groups:
            axis = g[0] if len(g) == 1 else None
            if (axis in full and lengths[axis] > 1 and counts[axis] == 1
                    and draw(st.booleans())):
                shape.append(1)
                flags.append(True)
            else:
                shape.append(math.prod(lengths[a] for a in g))
                flags.append(False)
        full.update(g[0] for g, flag in zip(groups, flags) if len(g) == 1 and not flag)
        shapes.append(tuple(shape))
        broadcast.append(flags)
    given_lengths = {a: lengths[a] for a in composed} if give_lengths else {}
    pattern = (", ".join(spell(groups, False) for groups in inputs) + " -> "
               + spell(output, True))
    return pattern, shapes, given_lengths, lengths, inputs, output, broadcast


@st.composite
def strided_array(draw, shape, seed):
    """An int64 array of ``shape`` whose strides come from slices (steps of 1-2, either
    direction), stride-0 broadcasting, or a transposed base."""
    rng = np.random.default_rng(seed)
    kinds = [draw(st.sampled_from(["plain", "step", "reverse", "broadcast"])) for _ in shape]
    base_shape = [1 if kind == "broadcast" else size * (2 if kind == "step" else 1) + 1
                  for kind, size in zip(kinds, shape)]
    order = draw(st.permutations(range(len(shape))))
    base = rng.integers(-3, 4, size=[base_shape[d] for d in order]).astype(np.int64)
    base = base.transpose(np.argsort(order)) if len(shape) else base
    index = []
    for kind, size in zip(kinds, shape):
        if kind == "broadcast":
            index.append(slice(0, 1))
        elif kind == "step":
            index.append(slice(1, 1 + 2 * size, 2))
        elif kind == "reverse":
            index.append(slice(size, 0, -1) if size else slice(0, 0))
        else:
            index.append(slice(1, 1 + size))
    array = base[tuple(index)]
    return np.broadcast_to(array, shape)


def brute_force(arrays, inputs, output, lengths, broadcast):
    """The einsum by definition: every assignment of every axis, the product of the
    inputs' elements it selects, summed into the output element it selects."""
    axes = sorted({a for groups in inputs for g in groups for a in g})

    def position(group, env):
        index = 0
        for axis in group:
            index = index * lengths[axis] + env[axis]
        return index

    out_shape = tuple(math.prod(lengths[a] for a in g) for g in output)
    result = np.zeros(out_shape, np.int64)
    for values in itertools.product(*(range(lengths[a]) for a in axes)):
        env = dict(zip(axes, values))
        term = 1
        for array, groups, flags in zip(arrays, inputs, broadcast):
            term *= array[tuple(0 if flag else position(g, env) for g, flag in zip(groups, flags))]
        result[tuple(position(g, env) for g in output)] += term
    return result


@settings(max_examples=150)
@given(case=einsum_cases(), data=st.data(), as_tensor=st.booleans())
def test_random_patterns_on_strided_inputs_match_brute_force(case, data, as_tensor) -> None:
    pattern, shapes, given_lengths, lengths, inputs, output, broadcast = case
    arrays = [data.draw(strided_array(shape, seed=k), label=f"x{k}")
              for k, shape in enumerate(shapes)]
    before = [x.copy() for x in arrays]
    expected = brute_force(arrays, inputs, output, lengths, broadcast)
    if not given_lengths and any(len(g) > 1 for groups in inputs for g in groups):
        # the lengths of composed axes are inferred, or (when the shapes leave them open
        # and their split matters) the call says which to pass
        try:
            ra.einsum(*arrays, pattern)
        except ra.PatternError as error:
            assert "cannot infer the length" in str(error)
            return
    if as_tensor:
        result = ra.einsum(*[ra.from_numpy(x) for x in arrays], pattern, **given_lengths)
        assert isinstance(result, ra.Tensor)
        result = result.numpy()
    else:
        result = np.asarray(ra.einsum(*arrays, pattern, **given_lengths))
    assert result.shape == expected.shape
    assert result.dtype == np.int64
    np.testing.assert_array_equal(result, expected)
    for x, original in zip(arrays, before):
        np.testing.assert_array_equal(x, original)
    plan = explain_einsum(arrays, pattern, **given_lengths)
    assert plan.output.shape == expected.shape and plan.is_view is False
    assert json.loads(plan.dump()) == plan.to_dict()
    from_source = eval(plan.to_source("numpy"), {"np": np, **{f"x{k}": x for k, x in enumerate(arrays)}})
    np.testing.assert_array_equal(from_source, expected)


# --------------------------------------------------------------------------- explain


def test_explain_from_shapes_and_arrays_agree() -> None:
    x, w = random_inputs([(2, 12, 5), (2, 4, 6, 3)])
    pattern = "b (h d) t, b h s d -> b h t s"
    from_arrays = explain_einsum([x, w], pattern)
    from_shapes = explain_einsum([x.shape, w.shape], pattern, dtype="float64")
    assert str(from_arrays) == str(from_shapes)
    assert isinstance(from_arrays, EinsumPlan) and not from_arrays.is_view
    assert from_arrays.subscripts == "abcd,abec->abde"
    assert dict(from_arrays.axis_lengths) == {"b": 2, "h": 4, "d": 3, "t": 5, "s": 6}
    assert from_arrays.summed == ("d",)
    assert [(s.op, s.on, s.kind) for s in from_arrays.steps] == [
        ("split", "x0", "view"), ("einsum", "out", "new")]
    assert explain_einsum((3, 4), "a b -> b a").inputs[0].shape == (3, 4)  # one shape, bare


def test_explain_with_strides_and_dtypes_per_input() -> None:
    plan = explain_einsum([(4, 6), (6,)], "(a b) c, c -> b a", strides=[(1, 4), (2,)],
                          dtype=["float32", "float64"], a=2)
    assert plan.inputs[0].strides == (1, 4) and plan.inputs[1].strides == (2,)
    assert plan.dtype == "float64" and plan.input_dtypes == ("float32", "float64")
    assert plan.steps[0].layout.strides == (2, 1, 4)  # the split of a transposed input


@pytest.mark.parametrize(("pattern", "shapes", "lengths"), [
    ("b (h d) t, b h s d -> b h t s", [(2, 12, 5), (2, 4, 6, 3)], {}),
    ("a b, b c -> (a c)", [(2, 3), (3, 4)], {}),
    ("a b, b c -> a 1 c", [(2, 3), (1, 4)], {}),
    ("... (h d), h d e -> ... (h e)", [(7, 2, 6), (2, 3, 4)], {}),
    ("_ i, i -> ", [(2, 3), (3,)], {}),
    ("(i j) i -> j", [(6, 2)], {"i": 2}),
    ("a b, b c -> a c", [(40, 40), (40, 40)], {}),
], ids=lambda v: str(v))
def test_to_source_runs_in_numpy_and_torch(pattern, shapes, lengths) -> None:
    inputs = random_inputs(shapes)
    expected = np.asarray(ra.einsum(*inputs, pattern, **lengths))
    plan = explain_einsum(inputs, pattern, **lengths)
    names = [f"in{k}" for k in range(len(inputs))]
    numpy_source = plan.to_source("numpy", names=names)
    torch_source = plan.to_source("torch", names=names)
    # a batched matrix product of floats worth BLAS is numpy's matmul (#39)
    assert ("np.matmul(" if plan.engine == "numpy.matmul" else "np.einsum(") in numpy_source
    assert "torch.einsum(" in torch_source
    from_numpy = eval(numpy_source, {"np": np, **dict(zip(names, inputs))})
    from_torch = eval(torch_source, {"torch": torch,
                                     **{n: torch.from_numpy(x) for n, x in zip(names, inputs)}})
    np.testing.assert_allclose(from_numpy, expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(from_torch.numpy(), expected, rtol=1e-10, atol=1e-10)


def test_to_source_arguments() -> None:
    plan = explain_einsum([(2, 3), (3, 4)], "a b, b c -> a c")
    assert plan.to_source() == "np.einsum('ab,bc->ac', x0, x1)"
    with pytest.raises(ra.RearrangeError, match="'numpy' or 'torch'"):
        plan.to_source("jax")
    with pytest.raises(ra.ArgumentTypeError, match="names must be 2 str"):
        plan.to_source(names=["x"])


def test_parse_einsum_spans_and_cache() -> None:
    parsed = parse_einsum("b (h d), , 1 -> b ()")
    assert [parsed.text[s.start:s.end] for s in parsed.inputs] == ["b (h d)", "", "1"]
    assert parsed.inputs[1].start == parsed.inputs[1].end == 9  # at the comma that ends it
    assert parsed.output.groups[1].members == () and parsed.output.groups[1].bracketed
    assert parse_einsum("b (h d), , 1 -> b ()") is parsed


# --------------------------------------------------------------------------- errors

# pattern, input shapes, axis lengths, the message's first line, where the caret starts
# (an index into the pattern) and the text it underlines
PATTERN_ERRORS = [
    ("a b, b c -> a d", [(2, 3), (3, 4)], {},
     "axis 'd' appears only in the output; every output axis must appear in some input",
     14, "d"),
    ("a b, b c -> a c a", [(2, 3), (3, 4)], {},
     "axis 'a' appears twice in the output; each output axis appears once (an input may "
     "repeat an axis to take a diagonal)", 16, "a"),
    ("a b, b c -> a c", [(2, 3), (4, 5)], {},
     "axis 'b' has length 4 in input 1, but it has length 3 in input 0; lengths must agree "
     "(or be 1, which broadcasts)", 5, "b"),
    ("a b -> a b", [(2, 3)], {"b": 4},
     "axis 'b' has length 3 in input 0, but b=4 was given; lengths must agree (or be 1, "
     "which broadcasts)", 2, "b"),
    ("a b, b -> a", [(2, 1), (1,)], {"b": 3},
     "axis 'b' has length 1 in input 0, but b=3 was given and no input has it at length 3",
     2, "b"),
    ("i i -> i", [(2, 3)], {},
     "axis 'i' appears twice in input 0 with lengths 2 and 3; a repeated axis takes the "
     "diagonal, which needs equal lengths", 2, "i"),
    ("i i -> i", [(1, 3)], {},
     "axis 'i' appears twice in input 0 with lengths 1 and 3; a repeated axis takes the "
     "diagonal, which needs equal lengths", 2, "i"),
    ("b (h d) -> b h d", [(2, 12)], {},
     "cannot infer the lengths of (h d) from dim 1 of input 0 (size 12): 2 axes are "
     "unknown; pass all but one of them (h=, d=...)", 2, "(h d)"),
    ("b (h d), (d h) e -> b e", [(2, 12), (12, 5)], {},
     "cannot infer the lengths of (h d) from dim 1 of input 0 (size 12): 2 axes are "
     "unknown; pass all but one of them (h=, d=...)", 2, "(h d)"),
    ("b (h d) -> b h d", [(2, 12)], {"h": 5},
     "dim 1 of input 0 has size 12, which (h d) cannot split: 12 is not divisible by 5",
     2, "(h d)"),
    ("b (h d), h -> b d", [(2, 12), (5,)], {},
     "dim 1 of input 0 has size 12, which (h d) cannot split: 12 is not divisible by 5",
     2, "(h d)"),
    ("b (h d) -> b h d", [(2, 12)], {"h": 3, "d": 5},
     "dim 1 of input 0 has size 12, but (h d) with h=3, d=5 has 15 elements", 2, "(h d)"),
    ("h, (h d) -> h", [(0,), (0,)], {},
     "cannot infer the length of d in (h d) from dim 0 of input 1 (size 0): the other axes "
     "have no elements; pass d=", 3, "(h d)"),
    ("h d, (h d) -> h", [(0, 0), (0,)], {},
     "cannot split (h d): h and d have length 0, and rearrange infers at most one unknown "
     "axis per group", 5, "(h d)"),
    ("a 1 b -> a b", [(2, 3, 4)], {},
     "a unit axis matches dim 1 of input 0, which has size 3 (expected 1)", 2, "1"),
    ("a b, b c -> a c", [(2, 3), (3, 4), (4,)], {},
     "the pattern describes 2 inputs, but 3 tensors were given", 0, "a b, b c"),
    ("a b c -> a", [(2, 3)], {},
     "input 0 has 2 dims, but its pattern describes 3: one group per dim is expected",
     0, "a b c"),
    ("x, a b c ... -> a", [(2,), (2, 3)], {},
     "input 1 has 2 dims, but its pattern needs at least 3 besides the ellipsis",
     3, "a b c ..."),
    ("... a -> a", [(2, 3)], {},
     "'...' stands for 1 dim (2,) of input 0, but the output has no '...'; einsum sums only "
     "named axes: name these dims, or keep '...' in the output", 0, "..."),
    ("... a, ... a -> ... a", [(3, 2), (4, 2)], {},
     "'...' stands for dims (3,) in input 0 and (4,) in input 1, which do not broadcast",
     7, "..."),
    ("(... a) -> a", [(2, 3)], {},
     "'...' inside parentheses in input 0; it may be grouped only in the output", 1, "..."),
    ("a ... ... -> a", [(2, 3, 4)], {},
     "'...' appears twice in input 0; a side may hold one ellipsis at most", 6, "..."),
    ("a 2 -> a", [(5, 2)], {},
     "anonymous axis 2 is not allowed in einsum (only 1 is); name the axis and pass its "
     "length as a keyword", 2, "2"),
    ("a 2j -> a", [(5, 1)], {},
     "invalid axis name '2j': expected a Python identifier, which does not start with a digit",
     2, "2j"),
    ("a b_ -> a", [(5, 1)], {},
     "invalid axis name 'b_': axis names must not start or end with '_'", 2, "b_"),
    ("i j k", [(5, 3, 2)], {},
     "pattern must contain '->' between the input and the output axes; found none", 0, "i j k"),
    ("a b -> a -> b", [(2, 3)], {}, "pattern must contain '->' exactly once; found a second '->'",
     9, "->"),
    ("a..., a -> a", [(2, 3), (3,)], {}, "expected a space between 'a' and '...'", 0, "a..."),
    ("a (b, c) -> a", [(2, 3), (3,)], {},
     "unbalanced parentheses: '(' is not closed before ','", 2, "("),
    ("a ((b)) -> a", [(2, 3)], {},
     "nested parentheses: a group holds axes, '1' and '...', not another group", 3, "("),
    ("a b -> a", [(2, 3)], {"b": 0}, "axis length b=0 must be a positive integer", 2, "b"),
    ("a b -> a", [(2, 3)], {"b": 2.0}, "axis length b=2.0 must be a positive integer", 2, "b"),
    ("a b -> a", [(2, 3)], {"b": True}, "axis length b=True must be a positive integer", 2, "b"),
    (" ".join(string.ascii_letters) + " extra ->", [(1,) * 53], {},
     "too many axes: the pattern has 53 distinct axes, numpy.einsum names at most 52 (one "
     "letter each); 'extra' is the 53rd", 104, "extra"),
]


@pytest.mark.parametrize(("pattern", "shapes", "lengths", "first_line", "caret_at", "pointed"),
                         PATTERN_ERRORS,
                         ids=[f"{c[0]} {c[2]}" if c[2] else c[0] for c in PATTERN_ERRORS])
def test_pattern_error_message(pattern, shapes, lengths, first_line, caret_at, pointed) -> None:
    inputs = random_inputs(shapes)
    before = [x.copy() for x in inputs]
    with pytest.raises(ra.PatternError) as caught:
        ra.einsum(*inputs, pattern, **lengths)
    lines = str(caught.value).splitlines()
    assert lines[0] == first_line
    assert lines[1] == "  " + pattern
    assert lines[2] == "  " + " " * caret_at + "^" * len(pointed)
    assert pattern[caret_at:caret_at + len(pointed)] == pointed
    described = ", ".join(str(tuple(s)) for s in shapes)
    assert lines[-1].startswith(f"  while computing einsum with pattern '{pattern}': "
                                f"input shapes {described}, axis lengths {{")
    for name, value in lengths.items():
        assert f"{name}={value!r}" in lines[-1]
    for x, original in zip(inputs, before):
        np.testing.assert_array_equal(x, original)
    # explain raises the same error from shapes alone
    with pytest.raises(ra.PatternError) as from_shapes:
        explain_einsum([tuple(s) for s in shapes] if shapes else [()], pattern, **lengths)
    assert str(from_shapes.value).splitlines()[:3] == lines[:3]


def test_unknown_axis_length_keyword() -> None:
    with pytest.raises(ra.PatternError, match=r"^axis length given for 'z', which is not an "
                                              r"axis of the pattern's inputs \(its axes: a, b\)"):
        ra.einsum(np.zeros((2, 3)), "a b -> a", z=4)


X = np.ones((5, 4, 3))


@pytest.mark.parametrize(("call", "message"), [
    (lambda: ra.einsum("i j k -> i", X),
     "rearrange.einsum takes the tensors first and the pattern last; the last argument must "
     "be the pattern string, got numpy.ndarray (argument 0 is a str: put the pattern last)"),
    (lambda: ra.einsum("i j k -> i"),
     "rearrange.einsum takes at least two arguments: one or more tensors, followed by the "
     "pattern, e.g. einsum(x, y, 'a b, b c -> a c'); got only one argument (the str "
     "'i j k -> i')"),
    (lambda: ra.einsum(X), "rearrange.einsum takes at least two arguments: one or more "
     "tensors, followed by the pattern, e.g. einsum(x, y, 'a b, b c -> a c'); got only one "
     "argument (numpy.ndarray)"),
    (lambda: ra.einsum(), "rearrange.einsum takes at least two arguments: one or more "
     "tensors, followed by the pattern, e.g. einsum(x, y, 'a b, b c -> a c'); got no arguments"),
    (lambda: ra.einsum(X, X, 3), "rearrange.einsum takes the tensors first and the pattern "
     "last; the last argument must be the pattern string, got int"),
    (lambda: ra.einsum([1.0, 2.0], "a -> a"),
     "rearrange.einsum takes arrays of one type (a numpy array, a rearrange.Tensor, a torch "
     "tensor, a dask array or an array-API array (jax, cupy, array-api-strict, ...)), then the "
     "pattern; argument 0 is list"),
    (lambda: ra.einsum(torch.ones(3), np.ones(3), "a, a -> a"),
     "rearrange.einsum takes inputs of one array type; argument 0 is torch.Tensor, argument 1 "
     "is numpy.ndarray"),
    (lambda: ra.einsum(np.ones(3), ra.ones(3), "a, a -> a"),
     "rearrange.einsum takes numpy arrays or rearrange.Tensors, not a mix: argument 0 is a "
     "numpy array and argument 1 a rearrange.Tensor; convert one (rearrange.from_numpy(a), "
     "t.numpy())"),
    (lambda: explain_einsum("abc", "a -> a"),
     "explain_einsum takes a list of inputs (arrays, rearrange.Tensors or shapes); got the "
     "str 'abc'"),
    (lambda: explain_einsum([], "a -> a"),
     "explain_einsum needs at least one input; for one 0-d input pass [()]"),
    (lambda: explain_einsum([(2,)], 7), "pattern must be a str, got int"),
    (lambda: explain_einsum([(2,), (2,)], "a, a -> a", strides=[(1,)]),
     "strides: expected one tuple per input (2), got 1"),
    (lambda: explain_einsum([(2,), (2,)], "a, a -> a", dtype=["float32"]),
     "dtype: expected one dtype, or one per input (2), got 1"),
    (lambda: parse_einsum(b"a -> a"), "an einsum pattern must be a str, not bytes"),
], ids=["pattern-first", "pattern-only", "tensor-only", "nothing", "pattern-int", "list",
        "torch", "mixed", "explain-str", "explain-empty", "explain-pattern-int",
        "explain-strides", "explain-dtypes", "parse-bytes"])
def test_bad_arguments(call, message) -> None:
    with pytest.raises(ra.ArgumentTypeError) as caught:
        call()
    assert str(caught.value) == message
    assert isinstance(caught.value, TypeError) and isinstance(caught.value, ValueError)


# Plans with compositions, unit dims, ellipses, a diagonal and `_` (a name rearrange
# refuses), each with an oracle of plain numpy calls.
OBJECT_PLANS = [
    ("b (h d), (h d) e -> b h e", [(2, 12), (12, 5)], {"h": 3},
     lambda x, w: np.einsum("bhd,hde->bhe", x.reshape(2, 3, 4), w.reshape(3, 4, 5))),
    ("a () b, b c -> a 1 c", [(2, 1, 3), (3, 4)], {},
     lambda x, y: np.einsum("ab,bc->ac", x[:, 0], y)[:, None]),
    ("... (i j), (i j) -> (... i) j", [(4, 2, 6), (6,)], {"j": 2},
     lambda x, y: np.einsum("...ij,ij->...ij", x.reshape(4, 2, 3, 2),
                            y.reshape(3, 2)).reshape(24, 2)),
    ("(i j) i, j -> (j i)", [(6, 3), (2,)], {},
     lambda x, y: np.einsum("iji,j->ji", x.reshape(3, 2, 3), y).reshape(6)),
    ("(_ i) j, j -> (i _)", [(6, 4), (4,)], {"i": 3},
     lambda x, y: np.einsum("aij,j->ia", x.reshape(2, 3, 4), y).reshape(6)),
]


def _refuse_parsing(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Make every parser but einsum's fail, recording what it was asked to parse."""
    import rearrange.calls
    import rearrange.parsing

    asked: list[str] = []
    get_parser = rearrange.parsing.get_parser

    def refuse(text, *rest):
        asked.append(text)
        raise AssertionError(f"pattern text parsed while planning an einsum: {text!r}")

    def einsum_parser_only(start: str):
        if start != "einsum":
            refuse(start)
        return get_parser(start)

    ra.cache_clear()     # every plan below is made afresh
    for module, name in [(rearrange.parsing, "parse_transform_cached"),
                         (rearrange.parsing, "_build_transform"),
                         (rearrange.calls, "parse_transform"),
                         (rearrange.calls, "build_recipe")]:
        monkeypatch.setattr(module, name, refuse)
    for kind in rearrange.parsing._BUILDERS:       # the one parse cache's builders
        if kind != "einsum":
            monkeypatch.setitem(rearrange.parsing._BUILDERS, kind, refuse)
    monkeypatch.setattr(rearrange.parsing, "get_parser", einsum_parser_only)
    return asked


@pytest.mark.parametrize(("pattern", "shapes", "lengths", "oracle"), OBJECT_PLANS,
                         ids=[p[0] for p in OBJECT_PLANS])
def test_planning_parses_no_rearrange_pattern(pattern, shapes, lengths, oracle,
                                              monkeypatch) -> None:
    # The einsum planner builds its rearranges as recipes, and foreign einsum lowers their
    # plans: no text is written to be parsed again, for any array type.
    import array_api_strict
    import dask.array as da

    arrays = [np.arange(math.prod(s), dtype=np.float64).reshape(s) + k
              for k, s in enumerate(shapes)]
    expected = oracle(*arrays)
    def rearranges(plan: EinsumPlan) -> list:
        return [(s.op, s.on, s.layout.shape, s.reason) for s in plan.steps if s.op != "einsum"]

    asked = _refuse_parsing(monkeypatch)
    plan = explain_einsum(shapes, pattern, dtype="float64", **lengths)
    assert any(p is not None for p in plan.preparations) or plan.output_plan is not None
    assert str(plan) and plan.to_dict()["input_patterns"]
    terms = [term.replace(".", "") for term in plan.subscripts.split("->")[0].split(",")]
    diagonal = any(len(set(term)) != len(term) for term in terms)
    for kind, convert in [("numpy", lambda a: a), ("tensor", ra.from_numpy),
                          ("torch", torch.from_numpy),
                          ("dask", lambda a: da.from_array(a, chunks=2)),
                          ("array-api", array_api_strict.asarray)]:
        if kind == "array-api" and diagonal:
            continue    # array_api_strict has no einsum: a diagonal is refused
        inputs = [convert(a) for a in arrays]
        explained = explain_einsum(inputs, pattern, **lengths)
        assert rearranges(explained) == rearranges(plan), kind
        result = np.asarray(ra.asnumpy(ra.einsum(*inputs, pattern, **lengths)))
        np.testing.assert_array_equal(result, expected, err_msg=kind)
    assert asked == []


def test_axis_names_rearrange_refuses_are_planned_and_shown_as_written() -> None:
    # `_` is an einsum name (as in einops) that rearrange reserves, `axis0` a name the
    # old generated patterns used for aliases, `(h d)` the name of a fused run: none is
    # renamed, in the steps, the preparations or the output's rearrange.
    plan = explain_einsum([(2, 6), (3, 2)], "axis0 (_ h), _ h -> (h axis0)")
    data = plan.to_dict()
    assert data["input_patterns"] == ["axis0 (_ h) -> axis0 _ h", None]
    assert data["output_pattern"] == "h axis0 -> (h axis0)"
    assert [s.reason for s in plan.steps if s.op != "einsum"] == [
        "(_ h) -> _ h: always a view", "compose (h axis0): every group passes the stride test"]
    assert dict(plan.letters) == {"a": "axis0", "b": "_", "c": "h"}

    diagonal = explain_einsum([(6, 3, 3)], "(_ j) _ _ -> (j _)", j=2)
    assert diagonal.to_dict()["input_patterns"] == ["(_ j) _ _ -> _ j _ _"]
    assert diagonal.subscripts == "abaa->ba"
    assert diagonal.steps[0].reason == "(_ j) -> _ j: always a view"
    x = np.arange(54.0).reshape(6, 3, 3)
    expected = np.einsum("ajaa->ja", x.reshape(3, 2, 3, 3)).reshape(6)
    np.testing.assert_array_equal(ra.einsum(x, "(_ j) _ _ -> (j _)", j=2), expected)
    np.testing.assert_array_equal(
        ra.einsum(torch.from_numpy(x), "(_ j) _ _ -> (j _)", j=2).numpy(), expected)

    fused = explain_einsum([(2, 12, 1), (12, 5)], "b (h d) 1, (h d) e -> b e")
    assert dict(fused.axis_lengths)["(h d)"] == 12
    assert fused.to_dict()["input_patterns"] == ["b (h d) 1 -> b (h d)", None]
    assert "sum over (h d)" in str(fused)
