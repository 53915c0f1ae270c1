"""The #39 speed paths on numpy against their oracles, on both sides of every rule:

* ``repeat(copy=True)``: numpy.repeat along each repeated axis (one or several) where the
  broadcast view repeats, the copy kernel where nothing repeats (a permuting copy, r=1)
  or the view is empty; results equal to einops.repeat, fresh, C-contiguous, writeable.
* einsum on numpy's optimize path: numpy.einsum without ``out=`` (its last step's array
  is the result), restored to a fresh C-contiguous array of the plan's dtype where numpy
  hands back a permuted view, a scalar or another dtype; results equal to numpy.einsum
  with the same path, and to numpy.einsum(optimize=True).

Every input is any layout (negative strides, broadcast, non-contiguous, read-only,
size 0), and is left untouched.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import rearrange as ra
from rearrange.contraction import explain_einsum
from rearrange.backends.ndarray import repeated_axes
from rearrange.layout import Layout

einops = pytest.importorskip("einops")


def layouts(base: np.ndarray) -> dict[str, np.ndarray]:
    """``base``'s values in several layouts (each read-only copy kept apart)."""
    readonly = base.copy()
    readonly.flags.writeable = False
    return {
        "contiguous": base,
        "negative strides": base[::-1, ::-1].copy()[::-1, ::-1],
        "flipped": base[::-1],
        "every other column": np.repeat(base, 2, axis=1)[:, ::2],
        "transposed": np.ascontiguousarray(base.T).T,
        "broadcast rows": np.broadcast_to(base[:1], base.shape),
        "read-only": readonly,
    }


def check_fresh(result: np.ndarray, inputs: list[np.ndarray]) -> None:
    assert type(result) is np.ndarray
    assert result.flags.c_contiguous and result.flags.writeable
    for x in inputs:
        assert not np.shares_memory(result, x)


# ---------------------------------------------------------------------- repeat

REPEATS = [
    # pattern, lengths, the repeated axes of the copied view (empty: the kernel's side)
    ("h w -> h r w", {"r": 3}, (1,)),                 # rows of w elements
    ("h w -> h w r", {"r": 4}, (2,)),                 # single elements
    ("h w -> r h w", {"r": 2}, (0,)),                 # the whole array, tiled
    ("h w -> (h 2) w", {}, (1,)),                     # merged after the copy
    ("h w -> h (w r)", {"r": 3}, (2,)),
    ("h w -> a h w b", {"a": 2, "b": 3}, (0, 3)),      # two axes: one pass each
    ("h w -> (a h) (w b) c", {"a": 2, "b": 2, "c": 2}, (0, 3, 4)),
    ("h w -> w h", {}, ()),                           # nothing repeats: the kernel
    ("h w -> h w r", {"r": 1}, ()),                   # r=1 repeats nothing
    ("h w -> (w h) r", {"r": 1}, ()),
]


@pytest.mark.parametrize("pattern, lengths, axes", REPEATS, ids=[r[0] for r in REPEATS])
@pytest.mark.parametrize("layout", list(layouts(np.zeros((2, 2)))))
def test_repeat_copy_equals_einops(pattern: str, lengths: dict, axes: tuple,
                                   layout: str) -> None:
    base = np.arange(6 * 40, dtype=np.float32).reshape(6, 40) - 100.5
    x = layouts(base)[layout]
    before = x.copy()
    result = ra.repeat(x, pattern, copy=True, **lengths)
    expected = einops.repeat(x, pattern, **lengths)
    assert result.shape == expected.shape and result.dtype == expected.dtype
    np.testing.assert_array_equal(result, expected)
    check_fresh(result, [x])
    np.testing.assert_array_equal(x, before)


@pytest.mark.parametrize("pattern, lengths, axes", REPEATS, ids=[r[0] for r in REPEATS])
def test_repeated_axes_pick_the_path(pattern: str, lengths: dict, axes: tuple) -> None:
    """The rule the runner follows, on the view the plan copies: the repeated axes
    (numpy.repeat's side), or none (the kernel's side)."""
    plan = ra.explain(np.zeros((6, 40), np.float32), pattern, op="repeat", copy=True,
                      **lengths)
    copy_index = next(k for k, step in enumerate(plan.steps) if step.is_copy)
    view = plan.steps[copy_index - 1].layout if copy_index else plan.input
    assert repeated_axes(view) == axes


def test_repeated_axes_of_layouts() -> None:
    assert repeated_axes(Layout((4, 3, 5), (5, 0, 1))) == (1,)
    assert repeated_axes(Layout((2, 4, 3, 5), (0, 5, 0, 1))) == (0, 2)
    assert repeated_axes(Layout((4, 1, 5), (5, 0, 1))) == ()      # length 1: nothing repeats
    assert repeated_axes(Layout((4, 5), (1, 4))) == ()             # a permuting copy
    assert repeated_axes(Layout((0, 3, 5), (5, 0, 1))) == ()       # empty: the kernel's


@pytest.mark.parametrize("dtype", ["bool", "int8", "int64", "float64", "complex64", "object"])
@pytest.mark.parametrize("pattern, lengths", [("h w -> h r w", {"r": 3}),
                                              ("h w -> a h w b", {"a": 2, "b": 2})])
def test_repeat_copy_dtypes(dtype: str, pattern: str, lengths: dict) -> None:
    x = (np.arange(12).reshape(3, 4) % 5).astype(dtype)
    result = ra.repeat(x, pattern, copy=True, **lengths)
    expected = einops.repeat(x, pattern, **lengths)
    assert result.dtype == expected.dtype
    np.testing.assert_array_equal(result, expected)
    check_fresh(result, [x])


@pytest.mark.parametrize("shape", [(0, 5), (3, 0)])
def test_repeat_copy_of_empty_inputs(shape: tuple[int, int]) -> None:
    x = np.zeros(shape, np.float32)
    for pattern, lengths in (("h w -> h r w", {"r": 3}), ("h w -> a h w b", {"a": 2, "b": 2})):
        result = ra.repeat(x, pattern, copy=True, **lengths)
        expected = einops.repeat(x, pattern, **lengths)
        assert result.shape == expected.shape and result.dtype == expected.dtype
        assert result.flags.c_contiguous


def test_repeat_without_copy_stays_a_read_only_view() -> None:
    x = np.arange(12.0).reshape(3, 4)
    view = ra.repeat(x, "h w -> h r w", r=3)
    assert np.shares_memory(view, x) and not view.flags.writeable


# ---------------------------------------------------------------------- einsum

rng = np.random.default_rng(7)

EINSUMS = [
    # pattern, shapes: every one costs more than the optimize path's threshold
    ("b i j, j k, k l -> b i l", [(4, 32, 48), (48, 40), (40, 24)]),
    ("b i j, j k, k l -> l b i", [(4, 32, 48), (48, 40), (40, 24)]),   # a permuted result
    ("a b, b c, c d, d e -> a e", [(40, 30), (30, 50), (50, 20), (20, 60)]),
    ("i j, i j ->", [(256, 256), (256, 256)]),                           # a scalar
    ("i j, j k -> k i", [(64, 96), (96, 80)]),
    ("b i j, b j k -> b i k", [(8, 32, 48), (8, 48, 40)]),
]


def assert_same_sums(result: np.ndarray, expected: np.ndarray) -> None:
    """Integers exactly; floats to their rounding (a pair's batched matmul may run in
    the other orientation than numpy's: BLAS adds in another order)."""
    expected = np.asarray(expected)
    if expected.dtype.kind in "iub":
        np.testing.assert_array_equal(result, expected)
        return
    single = expected.dtype in (np.float32, np.complex64)
    scale = float(np.abs(expected).max(initial=1.0))
    np.testing.assert_allclose(result, expected, rtol=1e-5 if single else 1e-12,
                               atol=(1e-5 if single else 1e-12) * scale)


@pytest.mark.parametrize("pattern, shapes", EINSUMS, ids=[e[0] for e in EINSUMS])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "complex64"])
def test_optimized_einsum_equals_numpy(pattern: str, shapes: list, dtype: str) -> None:
    operands = [(rng.standard_normal(s) * 4).astype(dtype) for s in shapes]
    befores = [x.copy() for x in operands]
    plan = explain_einsum(operands, pattern)
    result = ra.einsum(*operands, pattern)
    if plan.engine == "numpy.matmul":   # two BLAS inputs: numpy.matmul's engine instead
        # (BLAS adds in its own order: an element that nearly cancels differs by the
        # rounding of the largest terms, not of itself — so an absolute part too, scaled
        # to the result; the operands come from the module's generator, whose draws
        # depend on which tests ran before on this worker)
        expected = np.einsum(plan.subscripts, *operands, optimize=True)
        scale = float(np.abs(expected).max(initial=1.0))
        np.testing.assert_allclose(result, expected, rtol=1e-4, atol=1e-4 * scale)
        if np.ndim(result):
            check_fresh(result, operands)
        return
    assert plan.path is not None        # the optimize path (the side this change is on)
    expected = np.einsum(plan.subscripts, *operands, optimize=plan.optimize)
    if np.ndim(expected) == 0:
        assert np.ndim(result) == 0 and np.asarray(result).dtype == np.asarray(expected).dtype
        assert_same_sums(result, expected)
    else:
        assert result.dtype == expected.dtype == np.dtype(plan.dtype)
        assert_same_sums(result, expected)
        assert_same_sums(result, np.einsum(plan.subscripts, *operands, optimize=True))
        check_fresh(result, operands)
    for x, before in zip(operands, befores):
        np.testing.assert_array_equal(x, before)


def test_optimized_einsum_of_strided_and_broadcast_inputs() -> None:
    a = rng.standard_normal((4, 48, 32)).astype(np.float32).transpose(0, 2, 1)[:, ::-1]
    b = np.broadcast_to(rng.standard_normal((1, 40)).astype(np.float32), (48, 40))
    c = rng.standard_normal((24, 80)).astype(np.float32).T[::2]
    pattern = "b i j, j k, k l -> b i l"
    plan = explain_einsum([a, b, c], pattern)
    assert plan.path is not None
    result = ra.einsum(a, b, c, pattern)
    assert_same_sums(result, np.einsum(plan.subscripts, a, b, c, optimize=plan.optimize))
    check_fresh(result, [a, b, c])


def test_mixed_dtypes_take_the_plans_dtype() -> None:
    a = rng.integers(-5, 5, (4, 32, 48)).astype(np.int32)
    b = rng.standard_normal((48, 40)).astype(np.float32)
    c = rng.integers(-5, 5, (40, 24)).astype(np.int16)
    pattern = "b i j, j k, k l -> b i l"
    plan = explain_einsum([a, b, c], pattern)
    result = ra.einsum(a, b, c, pattern)
    expected = np.einsum(plan.subscripts, a, b, c, optimize=plan.optimize)
    assert result.dtype == expected.dtype == np.dtype(plan.dtype)
    assert_same_sums(result, expected)
    check_fresh(result, [a, b, c])


def test_pairwise_steps_follow_numpys_operand_list() -> None:
    from rearrange.backends.ndarray import pairwise_steps

    # an intermediate keeps the letters wanted later, in order of first appearance
    steps = pairwise_steps("abc,cd,de->abe", ((1, 2), (0, 1)))
    assert steps == [((2, 1), "de,cd->ec", "cd,de->ec"),
                     ((1, 0), "ec,abc->abe", "abc,ec->abe")]
    four = pairwise_steps("ab,bc,cd,de->ae", ((0, 1), (0, 1), (0, 1)))
    assert [s[1] for s in four] == ["bc,ab->ca", "de,cd->ec", "ec,ca->ae"]
    assert pairwise_steps("...a,ab->...b", ((0, 1),)) is None


@pytest.mark.parametrize("calls", [1, 2, 3])
def test_optimized_einsum_is_the_same_on_every_call(calls: int) -> None:
    """The last pair's order is learnt on the first call: every call gives numpy's sums
    in a fresh C-contiguous array."""
    a = rng.standard_normal((8, 64, 48)).astype(np.float32)
    b = rng.standard_normal((48, 40)).astype(np.float32)
    c = rng.standard_normal((40, 24)).astype(np.float32)
    pattern = "b i j, j k, k l -> b i l"
    expected = np.einsum("bij,jk,kl->bil", a, b, c, optimize=True)
    for _ in range(calls):
        result = ra.einsum(a, b, c, pattern)
        assert_same_sums(result, expected)
        check_fresh(result, [a, b, c])


def test_optimized_einsum_with_an_ellipsis() -> None:
    a = rng.standard_normal((3, 4, 32, 48)).astype(np.float64)
    b = rng.standard_normal((48, 40))
    c = rng.standard_normal((40, 24))
    pattern = "... i j, j k, k l -> ... i l"
    plan = explain_einsum([a, b, c], pattern)
    assert plan.path is not None and "..." in plan.subscripts
    result = ra.einsum(a, b, c, pattern)
    assert_same_sums(result, np.einsum("...ij,jk,kl->...il", a, b, c, optimize=True))
    check_fresh(result, [a, b, c])


def test_below_the_optimize_threshold_einsum_still_writes_into_a_fresh_array() -> None:
    a, b, c = (rng.standard_normal(s) for s in ((2, 3, 4), (4, 5), (5, 2)))
    plan = explain_einsum([a, b, c], "b i j, j k, k l -> b i l")
    assert plan.path is None
    result = ra.einsum(a, b, c, "b i j, j k, k l -> b i l")
    np.testing.assert_allclose(result, np.einsum("bij,jk,kl->bil", a, b, c))
    check_fresh(result, [a, b, c])


# ---------------------------------------------------------------------- pack

PACKS = [
    # shapes of the inputs, pattern; whether every input fills its place as it is
    # (numpy.concatenate's side) or some input is split or gets a unit dim (assignment)
    ([(2, 3, 4), (2, 3, 1), (2, 3, 7)], "b t *", True),
    ([(5, 2), (5, 3)], "b *", True),
    ([(4, 2, 3), (6, 2, 3)], "* b c", True),
    ([(2, 3, 4), (2, 3), (2, 3, 5, 6)], "b t *", False),
    ([(2, 3), (2, 3)], "b t *", False),
    ([(2, 4, 5, 3), (2, 3)], "b * c", False),
]


def numpy_pack(inputs: list[np.ndarray], pattern: str) -> np.ndarray:
    """The oracle: each input's ``*`` dims flattened (math.prod: size 0 included),
    then numpy.concatenate along that dim."""
    names = pattern.split()
    before, after = names.index("*"), len(names) - names.index("*") - 1
    pieces = [x.reshape(x.shape[:before] + (math.prod(x.shape[before:x.ndim - after]),)
                        + x.shape[x.ndim - after:]) for x in inputs]
    return np.ascontiguousarray(np.concatenate(pieces, axis=before))


@pytest.mark.parametrize("shapes, pattern, concatenated", PACKS,
                         ids=[p[1] + str(p[0]) for p in PACKS])
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "negative", "broadcast",
                                    "read-only", "empty"])
def test_pack_equals_einops(shapes: list, pattern: str, concatenated: bool, layout: str) -> None:
    from rearrange.backends.ndarray import packed_places

    if layout == "empty":
        shapes = [(0,) + s[1:] for s in shapes] if pattern != "* b c" else \
            [s[:1] + (0,) + s[2:] for s in shapes]
    inputs = []
    for k, s in enumerate(shapes):
        x = np.arange(math.prod(s), dtype=np.float32).reshape(s) * (k + 1) - 3.5
        if layout == "transposed":
            x = np.ascontiguousarray(x.T).T
        elif layout == "negative":
            x = x[::-1].copy()[::-1]
        elif layout == "broadcast" and x.ndim and x.shape[0]:
            x = np.broadcast_to(x[:1], x.shape)
        elif layout == "read-only":
            x.flags.writeable = False
        inputs.append(x)
    befores = [x.copy() for x in inputs]
    plan = ra.explain(inputs, pattern, op="pack")
    assert all(split is None for _, split in packed_places(plan)) == concatenated
    packed, packed_shapes = ra.pack(inputs, pattern)
    expected = numpy_pack(inputs, pattern)
    assert packed.shape == expected.shape and packed.dtype == expected.dtype
    np.testing.assert_array_equal(packed, expected)
    if layout != "empty":   # einops cannot reshape an empty input with -1
        expected, expected_shapes = einops.pack(inputs, pattern)
        np.testing.assert_array_equal(packed, expected)
        assert [tuple(p) for p in packed_shapes] == [tuple(p) for p in expected_shapes]
    check_fresh(packed, inputs)
    for x, before in zip(inputs, befores):
        np.testing.assert_array_equal(x, before)


@pytest.mark.parametrize("dtypes", [("int8", "float32"), ("int64", "uint8"), ("bool", "int16"),
                                    ("float32", "complex64"), ("object", "object")])
def test_pack_promotes_as_einops(dtypes: tuple[str, str]) -> None:
    inputs = [(np.arange(6).reshape(2, 3) % 3).astype(d) for d in dtypes]
    packed, _ = ra.pack(inputs, "b *")
    expected, _ = einops.pack(inputs, "b *")
    assert packed.dtype == expected.dtype
    np.testing.assert_array_equal(packed, expected)
    check_fresh(packed, inputs)


def test_pack_of_tensors_and_numpy_scalars() -> None:
    a = ra.from_numpy(np.arange(6.0).reshape(2, 3))
    b = np.ones((2, 2))
    packed, _ = ra.pack([b, a], "b *")
    assert type(packed) is np.ndarray
    np.testing.assert_array_equal(packed, np.concatenate([b, np.arange(6.0).reshape(2, 3)], 1))
    scalars, _ = ra.pack([np.float32(1), np.float32(2)], "*")
    np.testing.assert_array_equal(scalars, np.array([1, 2], np.float32))
