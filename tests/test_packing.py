"""pack / unpack against einops 0.8.2 and numpy (the oracles), on the corpus of real einops
calls and on Hypothesis-drawn shapes, dtypes and strided layouts.

What is checked: the same values, shapes, dtypes and packed shapes as einops on numpy;
pack always returns a fresh array and never writes its inputs; unpack returns views
(shared memory) wherever a result holds elements; explain_pack / explain_unpack predict
the result and their ``to_source`` code computes it; errors say what is wrong and point
at the pattern.
"""

from __future__ import annotations

import json
import math

import einops
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import rearrange as ra
from corpus import load
from rearrange import packing
from rearrange.packing import PackPlan, explain_pack, explain_unpack
from rearrange.parsing import parse_pack
from rearrange.shapes import ShapeMismatchError

PACK = load("pack", "example")
UNPACK = load("unpack", "example")


def _inputs(shapes: list[list[int]], dtype=np.float32) -> list[np.ndarray]:
    """Distinct values across all inputs, so a misplaced element shows."""
    arrays, start = [], 0
    for shape in shapes:
        size = math.prod(shape)
        arrays.append(np.arange(start, start + size).astype(dtype).reshape(shape))
        start += size
    return arrays


def _flat_shapes(xs, n_before: int, n_after: int) -> list[tuple[int, ...]]:
    return [x.shape[:n_before] + (math.prod(x.shape[n_before:x.ndim - n_after]),)
            + x.shape[x.ndim - n_after:] for x in xs]


def _reference_pack(xs, pattern: str) -> np.ndarray:
    """np.concatenate of the inputs reshaped to one packed dim (einops' own method, with
    explicit sizes so that zero-size named axes work too)."""
    parsed = parse_pack(pattern)
    n_before, n_after = len(parsed.before), len(parsed.after)
    flats = _flat_shapes(xs, n_before, n_after)
    return np.concatenate([np.asarray(x).reshape(f) for x, f in zip(xs, flats)], axis=n_before)


# --------------------------------------------------------------------------- the corpus


@pytest.mark.parametrize("entry", PACK)
def test_pack_same_as_einops(entry: dict) -> None:
    example = entry["example"]
    xs = _inputs(example["shape"])
    before = [x.copy() for x in xs]
    expected, expected_ps = einops.pack(xs, entry["pattern"])
    got, ps = ra.pack(xs, entry["pattern"])
    assert got.shape == expected.shape == tuple(example["output_shape"])
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)
    assert ps == expected_ps == [tuple(s) for s in example["packed_shapes"]]
    assert all(type(s) is tuple for s in ps)
    assert not any(np.shares_memory(got, x) for x in xs)
    for x, original in zip(xs, before):
        np.testing.assert_array_equal(x, original)


@pytest.mark.parametrize("entry", UNPACK)
def test_unpack_same_as_einops(entry: dict) -> None:
    example = entry["example"]
    (x,) = _inputs([example["shape"]])
    packed_shapes = example["packed_shapes"]
    expected = einops.unpack(x, packed_shapes, entry["pattern"])
    got = ra.unpack(x, packed_shapes, entry["pattern"])
    assert [r.shape for r in got] == [e.shape for e in expected] == [
        tuple(s) for s in example["output_shape"]]
    for result, reference in zip(got, expected):
        assert result.dtype == reference.dtype
        np.testing.assert_array_equal(result, reference)
        if result.size:
            assert np.shares_memory(result, x), "a result of unpack is not a view"
            assert np.shares_memory(reference, x)


@pytest.mark.parametrize("entry", PACK)
def test_pack_explain_and_to_source_agree(entry: dict) -> None:
    xs = _inputs(entry["example"]["shape"])
    plan = explain_pack(xs, entry["pattern"])
    got, ps = ra.pack(xs, entry["pattern"])
    assert plan.outputs[0].shape == got.shape and plan.dtype == got.dtype.name
    assert list(plan.packed_shapes) == ps and not plan.is_view
    np.testing.assert_array_equal(eval(plan.to_source("numpy"), {"np": np, "xs": xs}), got)


@pytest.mark.parametrize("entry", UNPACK)
def test_unpack_explain_and_to_source_agree(entry: dict) -> None:
    example = entry["example"]
    (x,) = _inputs([example["shape"]])
    plan = explain_unpack(x, example["packed_shapes"], entry["pattern"])
    got = ra.unpack(x, example["packed_shapes"], entry["pattern"])
    assert plan.is_view
    assert [layout.shape for layout in plan.outputs] == [r.shape for r in got]
    for layout, result in zip(plan.outputs, got):
        if result.size:
            assert tuple(s * x.itemsize for s in layout.strides) == result.strides
    for source, result in zip(eval(plan.to_source("numpy"), {"x": x}), got):
        np.testing.assert_array_equal(source, result)


def test_to_source_torch() -> None:
    torch = pytest.importorskip("torch")
    xs = [np.zeros((2, 3), np.int64) + 1, np.arange(8, dtype=np.float32).reshape(2, 2, 2)]
    plan = explain_pack(xs, "b *")
    assert plan.to_source("torch") == (
        "torch.cat([xs[0].to(torch.float64), xs[1].reshape(2, 4).to(torch.float64)], dim=1)")
    packed = eval(plan.to_source("torch"), {"torch": torch,
                                            "xs": [torch.from_numpy(x) for x in xs]})
    np.testing.assert_array_equal(packed.numpy(), ra.pack(xs, "b *")[0])
    assert packed.numpy().dtype == ra.pack(xs, "b *")[0].dtype

    x = torch.arange(2 * 8 * 3).reshape(3, 8, 2).permute(2, 1, 0)  # not contiguous
    plan = explain_unpack(tuple(x.shape), [(3,), (2, 2), ()], "b * d")
    views = eval(plan.to_source("torch"), {"x": x})
    for view, result in zip(views, ra.unpack(x.numpy(), [(3,), (2, 2), ()], "b * d")):
        np.testing.assert_array_equal(view.numpy(), result)


def test_to_source_names() -> None:
    plan = explain_pack([(2, 3), (2, 2, 2)], "b *")
    assert plan.to_source(names=["a", "b"]) == "np.concatenate([a, b.reshape(2, 4)], axis=1)"
    assert plan.to_source(name="inputs") == (
        "np.concatenate([inputs[0], inputs[1].reshape(2, 4)], axis=1)")
    assert explain_unpack((8,), [(8,)], "*").to_source(name="p") == "[p[:]]"
    with pytest.raises(ra.RearrangeError, match="1 names for 2 inputs"):
        plan.to_source(names=["a"])
    with pytest.raises(ra.RearrangeError, match="'numpy' or 'torch'"):
        plan.to_source("jax")


# --------------------------------------------------------------------------- einops' own cases

# einops/tests/test_packing.py: the unpacked axis has length 5 in each.
EINOPS_CASES = [((5,), "*"), ((5, 7), "* seven"), ((7, 5), "seven *"),
                ((5, 3, 4), "* three four"), ((4, 5, 3), "four * three"),
                ((3, 4, 5), "three four *")]
VALID_SHAPES = [
    [[2], [1], [2]], [[2], [1], [-1]], [[2], [-1], [2]], [[-1], [1], [2]], [[2], [3], [-1]],
    [[1, 2], [1, 1], [-1, 1]], [[1, 2], [1, -1], [1, 1]], [[2, -1], [1, 2], [1, 1]],
    [[0], [5], [-1]], [[0], [-1], [5]], [[-1], [5], [0]], [[2, -1], [1, 5]],
]
INVALID_SHAPES = [
    [[2], [1], [1]], [[4], [1], [1]], [[2], [4], [-1]], [[-1], [1], [5]], [[-1, 2], [1], [5]],
    [[2, 2], [2], [5, -1]], [[2, 1], [1], [3, -1]], [[2, 1], [3, -1], [1]],
    [[3, -1], [2, 1], [1]],
    # einops returns overlapping results here (x[2:1] is empty, then x[1:5]); a clear error:
    [[2], [-1], [4]],
]


@pytest.mark.parametrize(("shape", "pattern"), EINOPS_CASES)
@pytest.mark.parametrize("packed_shapes", VALID_SHAPES, ids=str)
def test_unpack_einops_cases(shape, pattern, packed_shapes) -> None:
    x = np.random.default_rng(0).random(shape)
    expected = einops.unpack(x, packed_shapes, pattern)
    got = ra.unpack(x, packed_shapes, pattern)
    for result, reference in zip(got, expected, strict=True):
        assert result.shape == reference.shape
        np.testing.assert_array_equal(result, reference)
    repacked, _ = ra.pack(got, pattern)
    np.testing.assert_array_equal(repacked, x)


@pytest.mark.parametrize(("shape", "pattern"), EINOPS_CASES)
@pytest.mark.parametrize("packed_shapes", INVALID_SHAPES, ids=str)
def test_unpack_einops_error_cases(shape, pattern, packed_shapes) -> None:
    x = np.zeros(shape)
    with pytest.raises(ShapeMismatchError):
        ra.unpack(x, packed_shapes, pattern)


def test_pack_einops_trivial_cases() -> None:
    """einops' test_numpy_trivial: pack as np.stack / np.concatenate."""
    rng = np.random.default_rng(1)
    r, g, b = rng.random((3, 13, 17))
    embeddings = rng.random((13, 17, 32))
    for pattern, expected in [
        ("h w *", np.stack([r, g, b], axis=2)), ("h * w", np.stack([r, g, b], axis=1)),
        ("* h w", np.stack([r, g, b], axis=0)), ("h *", np.concatenate([r, g, b], axis=1)),
        ("* w", np.concatenate([r, g, b], axis=0)),
    ]:
        np.testing.assert_array_equal(ra.pack([r, g, b], pattern)[0], expected)
    i = np.index_exp[:, :, None]
    np.testing.assert_array_equal(
        ra.pack([r, g, b, embeddings], "h w *")[0],
        np.concatenate([r[i], g[i], b[i], embeddings], axis=2))
    ra.pack([r, g, b], "some_name_for_H some_name_for_w1 *")
    ra.pack([r, g, b, embeddings], "h H *")
    for pattern in ["h w nonexisting_axis *", "h _w *", "h_ w *", "1h_ w *", "1 w *", "h h *"]:
        with pytest.raises(ra.PatternError):
            ra.pack([r, g, b, embeddings], pattern)


# --------------------------------------------------------------------------- dtypes, types

DTYPES = [np.bool_, np.int8, np.uint8, np.int32, np.int64, np.uint64, np.float16, np.float32,
          np.float64, np.complex64]


@given(st.lists(st.sampled_from(DTYPES), min_size=1, max_size=3))
def test_pack_promotes_as_numpy(dtypes) -> None:
    xs = [np.ones((2, k + 1), dtype) for k, dtype in enumerate(dtypes)]
    expected, _ = einops.pack(xs, "b *")
    got, _ = ra.pack(xs, "b *")
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)


def test_pack_strings_and_objects_as_numpy() -> None:
    for xs in ([np.array(["ab"]), np.array(["c"])], [np.array([1, None]), np.zeros(1)],
               [np.zeros(2), np.array(["a"])]):
        expected, _ = einops.pack(xs, "*")
        got, _ = ra.pack(xs, "*")
        assert got.dtype == expected.dtype
        np.testing.assert_array_equal(got, expected)


def test_pack_numpy_scalars_and_zero_d() -> None:
    items = [np.float32(1), np.array(2.0), np.arange(3)]
    got, ps = ra.pack(items, "*")  # einops takes no numpy scalar: give it 0-d arrays
    expected, expected_ps = einops.pack([np.asarray(item) for item in items], "*")
    np.testing.assert_array_equal(got, expected)
    assert got.dtype == expected.dtype and ps == expected_ps == [(), (), (3,)]


def test_pack_single_input_is_a_fresh_copy() -> None:
    x = np.arange(6.0).reshape(2, 3)
    packed, ps = ra.pack([x], "b *")
    assert ps == [(3,)] and not np.shares_memory(packed, x) and packed.flags.c_contiguous
    np.testing.assert_array_equal(packed, x)
    packed[0, 0] = 100
    assert x[0, 0] == 0


def test_pack_read_only_inputs() -> None:
    x = np.arange(6.0).reshape(2, 3)
    x.flags.writeable = False
    packed, _ = ra.pack((x, x), "b *")
    assert packed.flags.writeable
    np.testing.assert_array_equal(packed, np.concatenate([x, x], axis=1))


def test_tensors() -> None:
    xs = _inputs([[2, 3, 3], [2, 2, 2, 3], [2, 3]])
    tensors = [ra.from_numpy(x) for x in xs]
    packed, ps = ra.pack(tensors, "b * d")
    expected, expected_ps = einops.pack(xs, "b * d")
    assert isinstance(packed, ra.Tensor) and packed.is_contiguous() and ps == expected_ps
    np.testing.assert_array_equal(packed.numpy(), expected)
    assert packed.dtype == expected.dtype
    views = ra.unpack(packed, ps, "b * d")
    assert all(isinstance(v, ra.Tensor) for v in views)
    for view, x in zip(views, xs):
        assert view.untyped_storage().data_ptr() == packed.untyped_storage().data_ptr()
        np.testing.assert_array_equal(view.numpy(), x)
    # the type of the result follows the first input, as einops' backend does
    mixed, _ = ra.pack([xs[0], tensors[1]], "b * d")
    assert isinstance(mixed, np.ndarray)
    mixed, _ = ra.pack([tensors[0], xs[1]], "b * d")
    assert isinstance(mixed, ra.Tensor)


def test_tensor_views_follow_layout() -> None:
    base = ra.arange(48).view(2, 8, 3).permute(0, 2, 1)  # shape (2, 3, 8), non-contiguous
    views = ra.unpack(base, [(2, 2), (-1,)], "b d *")
    expected = ra.unpack(base.numpy(), [(2, 2), (-1,)], "b d *")
    for view, reference in zip(views, expected):
        assert view.stride() == tuple(s // 8 for s in reference.strides)
        np.testing.assert_array_equal(view.numpy(), reference)
    plan = explain_unpack(base, [(2, 2), (-1,)], "b d *")
    assert [v.layout for v in views] == list(plan.outputs)


def test_unpack_byte_strided_array() -> None:
    record = np.zeros(6, dtype=[("a", "i4"), ("b", "f8")])
    record["b"] = np.arange(6)
    field = record["b"]  # strides of 12 bytes: not a multiple of the itemsize
    plan = explain_unpack(field, [(2, 2), (-1,)], "*")
    assert plan.stride_unit == "bytes" and plan.outputs[1].strides == (12,)
    first, second = ra.unpack(field, [(2, 2), (-1,)], "*")
    assert np.shares_memory(first, record) and second.strides == (12,)
    np.testing.assert_array_equal(first, [[0, 1], [2, 3]])
    packed, _ = ra.pack([field, record["a"]], "*")
    np.testing.assert_array_equal(packed, np.concatenate([field, record["a"]]))
    assert explain_pack([field, record["a"]], "*").stride_unit == "bytes"


# --------------------------------------------------------------------------- Hypothesis


@st.composite
def strided(draw, shape: tuple[int, ...], dtype=np.float64) -> np.ndarray:
    """An array of ``shape`` whose values are distinct (unless broadcast), as a view with
    steps, reversed dims, broadcast (stride 0) dims or a transposed memory order."""
    modes = [draw(st.sampled_from(["plain", "step", "reverse", "broadcast"])) for _ in shape]
    base_shape = tuple(2 * n if mode == "step" else 1 if mode == "broadcast" else n
                       for n, mode in zip(shape, modes))
    order = draw(st.permutations(range(len(shape))))
    base = np.arange(math.prod(base_shape)).astype(dtype)
    base = base.reshape([base_shape[k] for k in order]).transpose(np.argsort(order))
    key = tuple(slice(None, None, 2) if mode == "step" else slice(None, None, -1)
                if mode == "reverse" else slice(None) for mode in modes)
    view = base[key] if key else base  # base[()] would be a numpy scalar
    return np.broadcast_to(view, shape) if "broadcast" in modes else view


@st.composite
def pack_case(draw):
    n_before, n_after = draw(st.integers(0, 2)), draw(st.integers(0, 2))
    sizes = draw(st.lists(st.integers(0, 3), min_size=n_before + n_after,
                          max_size=n_before + n_after))
    before, after = tuple(sizes[:n_before]), tuple(sizes[n_before:])
    count = draw(st.integers(1, 4))
    dtype = draw(st.sampled_from([np.float64, np.int32, np.uint8]))
    xs = []
    for _ in range(count):
        packed = tuple(draw(st.lists(st.integers(0, 3), max_size=3)))
        xs.append(draw(strided(before + packed + after, dtype)))
    names = [f"a{k}" for k in range(n_before)], [f"z{k}" for k in range(n_after)]
    return xs, " ".join([*names[0], "*", *names[1]])


@given(pack_case(), st.booleans())
def test_pack_random_layouts_against_numpy(case, as_tensors) -> None:
    xs, pattern = case
    inputs = [ra.from_numpy(x) for x in xs] if as_tensors else xs
    packed, ps = ra.pack(inputs, pattern)
    result = packed.numpy() if as_tensors else packed
    expected = _reference_pack(xs, pattern)
    assert result.shape == expected.shape and result.dtype == expected.dtype
    np.testing.assert_array_equal(result, expected)
    assert result.flags.c_contiguous and not any(np.shares_memory(result, x) for x in xs)
    # unpack undoes it, with views of the packed array
    parsed = parse_pack(pattern)
    assert ps == [x.shape[len(parsed.before):x.ndim - len(parsed.after)] for x in xs]
    for view, x in zip(ra.unpack(packed, ps, pattern), xs):
        view = view.numpy() if as_tensors else view
        np.testing.assert_array_equal(view, x)
        if view.size:
            assert np.shares_memory(view, result)
    plan = explain_pack(xs, pattern)
    assert plan.outputs[0].shape == expected.shape and plan.copies == len(xs)


@st.composite
def unpack_case(draw):
    n_before, n_after = draw(st.integers(0, 2)), draw(st.integers(0, 2))
    shapes = draw(st.lists(st.lists(st.integers(0, 3), max_size=3).map(tuple), max_size=4))
    total = sum(math.prod(s) for s in shapes)
    sizes = draw(st.lists(st.integers(0, 3), min_size=n_before + n_after,
                          max_size=n_before + n_after))
    x = draw(strided((*sizes[:n_before], total, *sizes[n_before:])))
    given_shapes = list(shapes)
    # one length may be replaced by -1 when the others of its shape do not multiply to 0
    candidates = [(k, j) for k, s in enumerate(shapes) for j in range(len(s))
                  if math.prod(v for i, v in enumerate(s) if i != j) > 0]
    if candidates and draw(st.booleans()):
        k, j = draw(st.sampled_from(candidates))
        given_shapes[k] = shapes[k][:j] + (-1,) + shapes[k][j + 1:]
    pattern = " ".join([*(f"a{k}" for k in range(n_before)), "*",
                        *(f"z{k}" for k in range(n_after))])
    return x, shapes, given_shapes, pattern


@given(unpack_case(), st.booleans())
def test_unpack_random_layouts_are_views(case, as_tensor) -> None:
    x, shapes, given_shapes, pattern = case
    n_before = len(parse_pack(pattern).before)
    source = ra.from_numpy(x) if as_tensor else x
    results = ra.unpack(source, given_shapes, pattern)
    plan = explain_unpack(source, given_shapes, pattern)
    assert list(plan.packed_shapes) == shapes and plan.is_view
    position = 0
    for result, shape, layout in zip(results, shapes, plan.outputs, strict=True):
        size = math.prod(shape)
        key = (slice(None),) * n_before + (slice(position, position + size),)
        expected = x[key].reshape(x.shape[:n_before] + shape + x.shape[n_before + 1:])
        position += size
        array = result.numpy() if as_tensor else result
        np.testing.assert_array_equal(array, expected)
        assert array.shape == layout.shape
        if array.size:
            assert np.shares_memory(array, x)
            assert all(n == 1 or s == w * x.itemsize
                       for n, s, w in zip(array.shape, array.strides, layout.strides))
        if as_tensor:
            assert result.layout == layout
    if results and not as_tensor:
        repacked, ps = ra.pack(results, pattern)
        np.testing.assert_array_equal(repacked, x)
        assert ps == shapes


def test_zero_size_named_axes() -> None:
    """einops fails here (numpy cannot reshape a zero-size array with -1); pack does not."""
    xs = [np.zeros((0, 3, 4)), np.zeros((0, 2, 4))]
    packed, ps = ra.pack(xs, "b * d")
    assert packed.shape == (0, 5, 4) and ps == [(3,), (2,)]
    assert [r.shape for r in ra.unpack(packed, ps, "b * d")] == [(0, 3, 4), (0, 2, 4)]


# --------------------------------------------------------------------------- caching


def test_warm_calls_hit_the_cache() -> None:
    ra.cache_clear()
    xs = [np.zeros((2, 3)), np.zeros((2, 2, 2))]
    packed, ps = ra.pack(xs, "b *")
    ra.unpack(packed, ps, "b *")
    misses = ra.cache_info().plans.misses
    hits = ra.cache_info().plans.hits
    for _ in range(3):
        packed, ps = ra.pack([np.ones((2, 3)), np.ones((2, 2, 2))], "b *")
        ps.append((9,))  # the caller owns the list it gets
        ra.unpack(packed, ps[:2], "b *")
    assert ra.cache_info().plans.misses == misses
    assert ra.cache_info().plans.hits == hits + 6
    assert ra.pack(xs, "b *")[1] == [(3,), (2, 2)]


def test_warm_torch_calls_hit_the_cache() -> None:
    """pack/unpack of torch tensors are planned once per shapes, as numpy's are (they
    were planned on every call: 0.13x einops' speed for pack)."""
    torch = pytest.importorskip("torch")
    ra.cache_clear()
    xs = [torch.zeros(2, 3), torch.zeros(2, 2, 2)]
    packed, ps = ra.pack(xs, "b *")
    ra.unpack(packed, ps, "b *")
    misses = ra.cache_info().plans.misses
    for _ in range(3):
        packed, ps = ra.pack([torch.ones(2, 3), torch.ones(2, 2, 2)], "b *")
        parts = ra.unpack(packed, ps, "b *")
    info = ra.cache_info().plans
    assert info.misses == misses and info.currsize == 2, info
    assert [tuple(p.shape) for p in parts] == [(2, 3), (2, 2, 2)]
    assert bool((parts[1] == 1).all())
    with pytest.raises(ra.RearrangeError):     # a cache hit still checks plain ints
        ra.unpack(packed, [(3.0,), (2, 2)], "b *")


def test_cache_hits_need_plain_ints() -> None:
    x = np.zeros((2, 5))
    ra.unpack(x, [(2,), (3,)], "b *")
    with pytest.raises(ra.ArgumentTypeError, match="tuple or list of ints"):
        ra.unpack(x, [(2.0,), (3,)], "b *")
    with pytest.raises(ra.ArgumentTypeError, match=r"\(True,\)"):
        ra.unpack(np.zeros((2, 1)), [(True,)], "b *")
    ra.unpack(x, [np.array([2]), (np.int64(3),)], "b *")  # numpy ints are ints


def test_same_shapes_different_types_do_not_share_entries() -> None:
    xs = [np.zeros((2, 3), np.float32)]
    assert isinstance(ra.pack(xs, "b *")[0], np.ndarray)
    assert isinstance(ra.pack([ra.from_numpy(xs[0])], "b *")[0], ra.Tensor)
    assert ra.pack([np.zeros((2, 3), np.int8)], "b *")[0].dtype == np.int8


# --------------------------------------------------------------------------- plans


def test_plan_to_dict_and_dump() -> None:
    plan = explain_pack([np.zeros((2, 3), np.float32), np.zeros((2, 2, 2), np.int64)], "b *")
    data = json.loads(plan.dump())
    assert data == plan.to_dict()
    assert data["op"] == "pack" and data["dtype"] == "float64" and not data["is_view"]
    assert data["packed_shapes"] == [[3], [2, 2]] and data["axis"] == 1
    assert data["bytes_moved"] == 6 * 4 + 8 * 8 + 14 * 8
    assert [s["op"] for s in data["steps"]] == ["slice", "copy", "slice", "split", "copy"]
    assert data["steps"][4]["reason"] == "input 1 copied into its place, cast from int64 to float64"
    assert isinstance(plan, PackPlan) and plan.copies == 2 and plan.views == 3
    unpacked = explain_unpack((2, 7), [(3,), (2, 2)], "b *")
    assert unpacked.is_view and unpacked.bytes_moved == 0 and unpacked.dtype is None
    assert explain_pack([(2, 3)], "b *").bytes_moved is None


def test_plan_dump_to_file(tmp_path) -> None:
    plan = explain_unpack((2, 7), [(3,), (2, 2)], "b *", dtype="float32")
    path = tmp_path / "plan.json"
    with path.open("w") as fp:
        assert plan.dump(fp) is None
    assert json.loads(path.read_text()) == plan.to_dict()


def test_plans_are_frozen() -> None:
    plan = explain_unpack((2, 7), [(3,), (2, 2)], "b *")
    with pytest.raises(AttributeError):
        plan.pattern = "x"  # type: ignore[misc]


def test_explain_mixes_arrays_and_shapes() -> None:
    plan = explain_pack([np.zeros((2, 3), np.int32), (2, 4)], "b *", dtype="float32")
    assert plan.dtype == "float64" and plan.input_dtypes == ("int32", "float32")
    assert explain_pack([np.zeros((2, 3)), (2, 4)], "b *").dtype is None
    tensor_plan = explain_unpack(ra.zeros(2, 5), [(5,)], "b *")
    assert tensor_plan.dtype == "float32"


# --------------------------------------------------------------------------- errors


def _error(call, cls):
    with pytest.raises(cls) as info:
        call()
    return str(info.value)


@pytest.mark.parametrize(("pattern", "message"), [
    ("b d", "a pack pattern needs one '*' where the packed axes go; found none\n  b d\n  ^^^"),
    ("* b *", "a pack pattern has exactly one '*'; found a second '*'\n  * b *\n      ^"),
    ("b h h *", "axis 'h' appears twice; each axis may appear once in a pack pattern\n"
                "  b h h *\n      ^"),
    ("b (h) *", "unexpected '(': a pack pattern holds axis names and one '*'; groups are not "
                "allowed\n  b (h) *\n    ^"),
    ("... *", "unexpected '...': a pack pattern holds axis names and one '*'; '*' already "
              "stands for any number of axes\n  ... *\n  ^^^"),
    ("b -> *", "unexpected '->': a pack pattern holds axis names and one '*'; pack and unpack "
               "patterns describe one tensor\n  b -> *\n    ^^"),
    ("b*", "expected a space between 'b' and '*'\n  b*\n  ^^"),
    ("_b *", "invalid axis name '_b': axis names must not start or end with '_'\n  _b *\n  ^^"),
    ("2 *", "invalid axis name '2': expected a Python identifier, which does not start with a "
            "digit\n  2 *\n  ^"),
])
def test_pattern_errors(pattern, message) -> None:
    text = _error(lambda: ra.pack([np.zeros((2, 3, 4))], pattern), ra.PatternError)
    assert text == (f"{message}\n  while packing with pattern '{pattern}': input shapes "
                    "[(2, 3, 4)]")
    text = _error(lambda: ra.unpack(np.zeros((2, 3, 4)), [(3,)], pattern), ra.PatternError)
    assert text.startswith(message + "\n  while unpacking with pattern")


def test_pack_shape_errors() -> None:
    text = _error(lambda: ra.pack([np.zeros((2, 3, 3)), np.zeros((2, 2, 4))], "b * d"),
                  ShapeMismatchError)
    assert text == (
        "input 1 has d=4 (shape (2, 2, 4)), but input 0 has d=3 (shape (2, 3, 3)): the inputs "
        "must agree on every axis but '*'\n  b * d\n      ^\n"
        "  while packing with pattern 'b * d': input shapes [(2, 3, 3), (2, 2, 4)]")
    text = _error(lambda: ra.pack([np.zeros((2, 3)), np.zeros(2)], "b * d"), ShapeMismatchError)
    assert text.startswith(
        "input 1 has shape (2,), 1 dim, but the pattern names 2 axes besides '*' (b, d): every "
        "input needs at least 2\n  b * d\n  ^^^^^")


def test_unpack_shape_errors() -> None:
    x = np.zeros((2, 5))
    text = _error(lambda: ra.unpack(x, [(2,), (2,)], "b *"), ShapeMismatchError)
    assert text == (
        "the packed shapes [(2,), (2,)] take 4 along '*', but the input (shape (2, 5)) has 5 "
        "along '*'\n  b *\n    ^\n"
        "  while unpacking with pattern 'b *': input shape (2, 5), packed_shapes [(2,), (2,)]")
    text = _error(lambda: ra.unpack(x, [(2,), (2, -1)], "b *"), ShapeMismatchError)
    assert text.startswith("cannot infer -1 in (2, -1): 3 remain along '*' (5 minus 2 for the "
                           "other shapes) and 3 is not divisible by 2\n  b *\n    ^\n")
    text = _error(lambda: ra.unpack(x, [(0, -1), (5,)], "b *"), ShapeMismatchError)
    assert "its other lengths multiply to 0, so -1 could be any length" in text
    text = _error(lambda: ra.unpack(x, [(6,), (-1,)], "b *"), ShapeMismatchError)
    assert text.startswith("the packed shapes [(6,), (-1,)] other than (-1,) take 6 along '*'")
    text = _error(lambda: ra.unpack(x, [(5,)], "b * d"), ShapeMismatchError)
    assert text.startswith("the input has shape (2, 5), 2 dims, but the pattern describes 3: "
                           "the named axes and one packed dim for '*'\n  b * d\n  ^^^^^")


def test_argument_errors() -> None:
    x = np.zeros((2, 5))
    cases = [
        (lambda: ra.pack([], "b *"), ra.RearrangeError, "pack() got an empty list"),
        (lambda: ra.pack(x, "b *"), ra.ArgumentTypeError,
         "pack() takes a list or tuple of arrays; got numpy.ndarray"),
        (lambda: ra.pack([[1, 2]], "*"), ra.ArgumentTypeError,
         "pack(): item 0 is a builtins.list; expected a numpy array, a rearrange.Tensor, a torch "
         "tensor, a dask array or an array-API array"),
        (lambda: ra.pack([x], 3), ra.ArgumentTypeError, "pattern must be a str, got int 3"),
        (lambda: ra.pack([ra.zeros(1), np.array(["a"])], "*"), ra.ArgumentTypeError,
         "a rearrange.Tensor cannot hold dtype"),
        (lambda: ra.pack([x, np.array([np.datetime64("2020")])], "*"), ra.ArgumentTypeError,
         "pack(): the inputs' dtypes (float64, datetime64[Y]) have no common dtype"),
        (lambda: ra.unpack(x, "ab", "b *"), ra.ArgumentTypeError,
         "packed_shapes must be a list of shapes"),
        (lambda: ra.unpack(x, [5], "b *"), ra.ArgumentTypeError,
         "packed_shapes[0] must be a tuple or list of ints; got 5"),
        (lambda: ra.unpack(x, [(-2,)], "b *"), ra.RearrangeError, "negative length"),
        (lambda: ra.unpack(x, [(-1,), (-1,)], "b *"), ra.RearrangeError,
         "hold 2 times -1; at most one length can be inferred"),
        (lambda: ra.unpack([1, 2], [(2,)], "*"), ra.ArgumentTypeError,
         "unpack(): the packed array is a builtins.list"),
        (lambda: explain_pack((2, 3), "b *"), ra.ArgumentTypeError,
         "not one shape; for one input of shape (2, 3), pass [(2, 3)]"),
    ]
    for call, cls, fragment in cases:
        assert fragment in _error(call, cls)


def test_error_classes() -> None:
    assert issubclass(ShapeMismatchError, ra.PatternError)
    assert issubclass(ShapeMismatchError, RuntimeError)  # what einops raises
    with pytest.raises(ValueError):
        ra.unpack(np.zeros((2, 5)), [(2,)], "b *")
