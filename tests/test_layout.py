"""``Layout`` against a brute-force model: the storage position of every element.

The model of a layout is ``positions(layout)``: an int64 numpy array of ``layout.shape``
whose entry at index ``i`` is ``offset + sum(i_k * strides[k])``. A Layout op is correct
when the positions of its result equal the *numpy* op applied to the positions of its
input: permute is ``np.transpose``, split is ``reshape``, select / slice / index are basic
indexing (negative steps included), expand is ``np.broadcast_to``.

``try_view`` is checked against the definition of a view rather than torch's algorithm:
a view of ``new_shape`` exists iff ``positions.reshape(new_shape)`` (row-major) is affine,
i.e. every new dim steps through storage by one constant amount. Size-1 dims have no step
to check and a zero-element layout is always viewable.

Layouts come from two sources: random shapes/strides/offsets (strides negative, zero, or
chained to the next dim so that views exist often), and numpy arrays over ``arange``
built with slicing (negative steps), transposes, new axes and ``broadcast_to`` -- there the
array's values *are* the storage positions, which also checks the model itself.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math

import numpy as np
import pytest
from hypothesis import assume, event, example, given, note
from hypothesis import strategies as st

import rearrange
from rearrange import Layout
from rearrange.errors import ArgumentTypeError, DimensionError, LayoutError, RearrangeError

torch = pytest.importorskip("torch")  # an oracle for errors and size-1 strides only

MAX_NDIM = 4
# Sizes 0..5, zero drawn less often: four dims would otherwise be empty half the time.
SIZES = st.sampled_from((1, 2, 3, 0, 4, 5, 2, 3, 1))
STRIDES = st.integers(-12, 12)
OFFSETS = st.integers(0, 40)


# ---------------------------------------------------------------------- the model

def positions(layout: Layout) -> np.ndarray:
    """Storage position of every element of ``layout``, as an array of its shape."""
    result = np.full(layout.shape, layout.offset, dtype=np.int64)
    for index, stride in zip(np.indices(layout.shape, dtype=np.int64), layout.strides):
        result += index * stride
    return result


def view_exists(reshaped: np.ndarray) -> bool:
    """Whether some strides address ``reshaped`` (positions in the new shape): every dim
    of size >= 2 must step by one constant amount everywhere."""
    if reshaped.size == 0:
        return True
    for axis in range(reshaped.ndim):
        if reshaped.shape[axis] >= 2:
            steps = np.diff(reshaped, axis=axis)
            if not np.all(steps == steps.flat[0]):
                return False
    return True


def is_dense_in_order(block: np.ndarray, offset: int) -> bool:
    """``block`` (positions, any shape, numel > 0) walks ``offset, offset + 1, ...`` in
    row-major order."""
    return np.array_equal(block.ravel(), offset + np.arange(block.size))


def assert_same(result: object, expected: np.ndarray) -> None:
    """``result`` is a Layout addressing exactly ``expected`` (shape and positions)."""
    assert isinstance(result, Layout)
    expected = np.asarray(expected)
    assert result.shape == expected.shape
    np.testing.assert_array_equal(positions(result), expected)


def address(array: np.ndarray) -> int:
    return array.__array_interface__["data"][0]


def layout_of(array: np.ndarray, base: np.ndarray) -> Layout:
    """The Layout of numpy view ``array`` over the flat, contiguous ``base``."""
    itemsize = base.itemsize
    offset, remainder = divmod(address(array) - address(base), itemsize)
    assert remainder == 0 and all(s % itemsize == 0 for s in array.strides)
    return Layout(array.shape, tuple(s // itemsize for s in array.strides), offset)


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


# ---------------------------------------------------------------------- strategies

@st.composite
def random_layouts(draw, min_ndim: int = 0) -> Layout:
    """Any shape/strides/offset; a stride is often chained (``stride[k] = stride[k+1] *
    size[k+1]``) so that merges and views are possible, not only rejected."""
    shape = draw(st.lists(SIZES, min_size=min_ndim, max_size=MAX_NDIM))
    strides = [0] * len(shape)
    for k in reversed(range(len(shape))):
        if k < len(shape) - 1 and draw(st.booleans()):
            strides[k] = strides[k + 1] * shape[k + 1]
        else:
            strides[k] = draw(STRIDES)
    return Layout(tuple(shape), tuple(strides), draw(OFFSETS))


@functools.cache  # strategies are immutable; building one is the slow part
def slices(size: int):
    """Any slice of a dim of ``size``; bounds are often omitted so results are often
    non-empty, and otherwise range past both ends."""
    bound = size + 2
    ends = st.one_of(st.none(), st.none(), st.integers(-bound, bound))
    steps = st.none() | st.sampled_from((1, -1, 2, -2, 3, -3))
    return st.builds(slice, ends, ends, steps)


@st.composite
def numpy_views(draw, min_ndim: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``(base, view)``: ``base`` is ``arange(n)`` and ``view`` a numpy view of it made by
    slicing (any step), transposing, inserting axes and ``broadcast_to``."""
    shape = draw(st.lists(SIZES, min_size=min_ndim, max_size=MAX_NDIM))
    base = np.arange(math.prod(shape), dtype=np.int64)
    view = base.reshape(shape)
    moves = st.sampled_from(["slice", "transpose", "newaxis", "broadcast"])
    for move in draw(st.lists(moves, max_size=4)):
        if move == "slice":
            # The trailing ``...`` keeps a 0-d result a view rather than a scalar.
            view = view[tuple(draw(slices(size)) for size in view.shape) + (Ellipsis,)]
        elif move == "transpose":
            view = np.transpose(view, draw(st.permutations(range(view.ndim))))
        elif move == "newaxis" and view.ndim < MAX_NDIM:
            view = np.expand_dims(view, draw(st.integers(0, view.ndim)))
        elif move == "broadcast":
            leading = draw(st.lists(SIZES, max_size=MAX_NDIM - view.ndim))
            target = [draw(SIZES) if size == 1 else size for size in view.shape]
            view = np.broadcast_to(view, tuple(leading) + tuple(target))
    return base, view


def layouts(min_ndim: int = 0):
    from_numpy = numpy_views(min_ndim).map(lambda pair: layout_of(pair[1], pair[0]))
    return random_layouts(min_ndim) | from_numpy


@st.composite
def shapes_with_numel(draw, numel: int, max_ndim: int = MAX_NDIM) -> tuple[int, ...]:
    """A shape of ``numel`` elements (a zero anywhere when ``numel == 0``), 1s included."""
    ndim = draw(st.integers(0 if numel == 1 else 1, max_ndim))
    if numel == 0:
        shape = draw(st.lists(SIZES, min_size=ndim, max_size=ndim))
        shape[draw(st.integers(0, ndim - 1))] = 0
        return tuple(shape)
    shape = []
    remaining = numel
    for _ in range(ndim - 1):
        size = draw(st.sampled_from(divisors(remaining)))
        shape.append(size)
        remaining //= size
    if ndim:
        shape.append(remaining)
    return tuple(draw(st.permutations(shape)))


@functools.cache
def dims(ndim: int):
    """A dim in torch's accepted range ``[-ndim, ndim)`` (ndim >= 1)."""
    return st.integers(-ndim, ndim - 1)


@functools.cache
def distinct_dims(ndim: int, min_size: int = 0):
    """Distinct dims, each written either way (``d`` or ``d - ndim``)."""
    return st.lists(
        st.integers(0, max(ndim - 1, 0)), min_size=min_size, max_size=ndim, unique=True
    ).flatmap(
        lambda chosen: st.tuples(*(st.sampled_from([d, d - ndim]) for d in chosen))
    )


# ---------------------------------------------------------------------- the model itself

@given(numpy_views())
def test_model_matches_numpy_addressing(pair):
    base, view = pair
    np.testing.assert_array_equal(positions(layout_of(view, base)), view)


# ---------------------------------------------------------------------- construction

CONSTRUCTION_ERRORS = [
    pytest.param(((2, 3), (1,)), RearrangeError, "same length", id="lengths-differ"),
    pytest.param(((), (1,)), RearrangeError, "same length", id="strides-for-0d"),
    pytest.param(((-1,), (1,)), RearrangeError, "non-negative", id="negative-size"),
    pytest.param(((2, -3), (1, 1)), RearrangeError, "at dim 1", id="negative-size-dim1"),
    pytest.param(((2.0,), (1,)), ArgumentTypeError, "shape[0]", id="float-size"),
    pytest.param((("2",), (1,)), ArgumentTypeError, "shape[0]", id="str-size"),
    pytest.param(((True,), (1,)), ArgumentTypeError, "bool", id="bool-size"),
    pytest.param(((2,), (1.5,)), ArgumentTypeError, "strides[0]", id="float-stride"),
    pytest.param(((2,), (1,), 0.5), ArgumentTypeError, "offset", id="float-offset"),
    pytest.param(((2,), (1,), None), ArgumentTypeError, "offset", id="none-offset"),
    pytest.param((5, (1,)), ArgumentTypeError, "sequence", id="int-shape"),
    pytest.param(((2,), None), ArgumentTypeError, "sequence", id="none-strides"),
]


@pytest.mark.parametrize(("args", "error", "fragment"), CONSTRUCTION_ERRORS)
def test_construction_errors(args, error, fragment):
    with pytest.raises(error) as caught:
        Layout(*args)
    assert isinstance(caught.value, rearrange.RearrangeError)
    assert fragment in str(caught.value)


def test_argument_type_error_is_also_a_type_error():
    with pytest.raises(TypeError):
        Layout((2.0,), (1,))


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        pytest.param(([2, 3], [3, 1]), Layout((2, 3), (3, 1), 0), id="lists"),
        pytest.param(
            ((np.int64(2),), (np.int32(-3),), np.int16(4)), Layout((2,), (-3,), 4),
            id="numpy-ints",
        ),
        pytest.param(((), ()), Layout((), (), 0), id="0d"),
    ],
)
def test_construction_normalises_to_int_tuples(args, expected):
    layout = Layout(*args)
    assert layout == expected and hash(layout) == hash(expected)
    assert type(layout.shape) is tuple and type(layout.strides) is tuple
    assert all(type(v) is int for v in (*layout.shape, *layout.strides, layout.offset))


def test_layout_is_frozen():
    layout = Layout.contiguous((2, 3))
    with pytest.raises(dataclasses.FrozenInstanceError):
        layout.offset = 1  # type: ignore[misc]


@given(st.lists(SIZES, max_size=MAX_NDIM), OFFSETS)
def test_contiguous_constructor_walks_storage_in_order(shape, offset):
    layout = Layout.contiguous(shape, offset)
    assert layout.is_contiguous()
    np.testing.assert_array_equal(
        positions(layout), offset + np.arange(math.prod(shape)).reshape(shape)
    )


# ---------------------------------------------------------------------- inspection

@given(layouts(), st.data())
def test_numel_extent_and_position_read_the_model(layout, data):
    where = positions(layout)
    assert layout.numel == where.size
    if where.size == 0:
        assert layout.extent() is None
        return
    assert layout.extent() == (int(where.min()), int(where.max()))
    index = tuple(data.draw(st.integers(0, size - 1)) for size in layout.shape)
    assert layout.position(index) == where[index]


@given(layouts())
def test_is_contiguous_iff_row_major_walk_is_consecutive(layout):
    where = positions(layout)
    expected = where.size == 0 or is_dense_in_order(where, layout.offset)
    assert layout.is_contiguous() == expected


@given(numpy_views())
def test_is_contiguous_agrees_with_numpy_flag(pair):
    base, view = pair
    assert layout_of(view, base).is_contiguous() == view.flags.c_contiguous


def non_overlapping_and_dense_model(layout: Layout) -> bool:
    """torch's flag, brute force: contiguous (so any zero-element layout), or some order
    of the dims walks ``offset, offset + 1, ...`` (size-1 dims never step, so any
    position for them fits)."""
    where = positions(layout)
    return where.size == 0 or any(
        is_dense_in_order(np.transpose(where, order), layout.offset)
        for order in itertools.permutations(range(layout.ndim))
    )


@given(layouts())
def test_is_non_overlapping_and_dense_iff_some_dim_order_is_contiguous(layout):
    verdict = layout.is_non_overlapping_and_dense()
    assert verdict == non_overlapping_and_dense_model(layout)
    where = positions(layout)
    if verdict and where.size:  # then a gap-free block, each position addressed once
        low = int(where.min())
        np.testing.assert_array_equal(np.sort(where.ravel()), low + np.arange(where.size))


# ---------------------------------------------------------------------- axis moves

@given(layouts(), st.data())
def test_permute_is_np_transpose(layout, data):
    order = data.draw(st.permutations(range(layout.ndim)))
    order = [data.draw(st.sampled_from([d, d - layout.ndim])) for d in order]
    assert_same(layout.permute(order), np.transpose(positions(layout), order))


@given(layouts(min_ndim=1), st.data())
def test_transpose_is_np_swapaxes(layout, data):
    dim0, dim1 = data.draw(dims(layout.ndim)), data.draw(dims(layout.ndim))
    assert_same(layout.transpose(dim0, dim1), np.swapaxes(positions(layout), dim0, dim1))


@given(layouts(min_ndim=1), st.data())
def test_movedim_is_np_moveaxis(layout, data):
    source = data.draw(distinct_dims(layout.ndim))
    destination = data.draw(distinct_dims(layout.ndim, min_size=len(source)).map(
        lambda chosen: chosen[: len(source)]
    ))
    if len(source) == 1 and data.draw(st.booleans()):
        source, destination = source[0], destination[0]  # the scalar form
    expected = np.moveaxis(positions(layout), source, destination)
    assert_same(layout.movedim(source, destination), expected)


# ---------------------------------------------------------------------- unit dims

@given(layouts())
def test_squeeze_all_is_np_squeeze(layout):
    assert_same(layout.squeeze(), np.squeeze(positions(layout)))


@given(layouts(min_ndim=1), st.data())
def test_squeeze_dims_removes_only_the_listed_size_1_dims(layout, data):
    chosen = data.draw(distinct_dims(layout.ndim, min_size=1))
    argument = chosen[0] if len(chosen) == 1 and data.draw(st.booleans()) else chosen
    where = positions(layout)
    expected = np.squeeze(where, axis=tuple(d for d in chosen if where.shape[d] == 1))
    assert_same(layout.squeeze(argument), expected)


@given(layouts(), st.data())
def test_unsqueeze_is_np_expand_dims(layout, data):
    dim = data.draw(st.integers(-layout.ndim - 1, layout.ndim))
    assert_same(layout.unsqueeze(dim), np.expand_dims(positions(layout), dim))


@st.composite
def expand_sizes(draw, shape: tuple[int, ...]) -> tuple[int, ...]:
    """Valid ``expand`` sizes: new leading dims, size-1 dims to any size, -1 to keep."""
    leading = draw(st.lists(SIZES, max_size=2))
    kept = [
        draw(st.sampled_from([-1, size]) | (SIZES if size == 1 else st.nothing()))
        for size in shape
    ]
    return tuple(leading) + tuple(kept)


@given(layouts(), st.data())
def test_expand_is_np_broadcast_to(layout, data):
    sizes = data.draw(expand_sizes(layout.shape))
    leading = len(sizes) - layout.ndim
    target = tuple(
        layout.shape[k - leading] if size == -1 else size for k, size in enumerate(sizes)
    )
    result = layout.expand(sizes)
    assert_same(result, np.broadcast_to(positions(layout), target))
    # New and stretched dims do not advance, unless size 1 (any stride addresses those).
    assert all(
        stride == 0 for k, stride in enumerate(result.strides)
        if result.shape[k] != 1 and (k < leading or layout.shape[k - leading] == 1)
    )


EXPAND_ERRORS = [
    pytest.param((2, 3), (3,), id="too-few-sizes"),
    pytest.param((2, 3), (4, 3), id="non-singleton"),
    pytest.param((3,), (-1, 3), id="-1-leading"),
    pytest.param((1,), (-2,), id="negative"),
    pytest.param((), (2, -3), id="0d-negative"),
    pytest.param((), (-1,), id="0d-minus-1"),
]


@pytest.mark.parametrize(("shape", "sizes"), EXPAND_ERRORS)
def test_expand_errors_are_torchs(shape, sizes):
    with pytest.raises(RuntimeError) as expected:
        torch.ones(shape).expand(sizes)
    with pytest.raises(LayoutError) as caught:
        Layout.contiguous(shape).expand(sizes, type_name="torch.FloatTensor")
    assert str(caught.value) == str(expected.value)


# Wrong dims: the same builtin class as torch (via LayoutError / DimensionError) and the
# same message, so code written against torch reads the same text.
DIM_ERRORS = [
    pytest.param((2, 3), "permute", ((0, 0),), id="permute-duplicate"),
    pytest.param((2, 3), "permute", ((0,),), id="permute-too-short"),
    pytest.param((2, 3), "permute", ((0, 2),), id="permute-out-of-range"),
    pytest.param((2, 3), "transpose", (0, -3), id="transpose-out-of-range"),
    pytest.param((2, 3), "movedim", ((0, 0), (0, 1)), id="movedim-repeated-source"),
    pytest.param((2, 3), "movedim", ((0, 1), (1, 1)), id="movedim-repeated-destination"),
    pytest.param((2, 3), "movedim", ((0, 1), (0,)), id="movedim-lengths"),
    pytest.param((2, 3), "squeeze", ((0, 0),), id="squeeze-repeated"),
    pytest.param((2, 3), "squeeze", (2,), id="squeeze-out-of-range"),
    pytest.param((2, 3), "unsqueeze", (3,), id="unsqueeze-out-of-range"),
    pytest.param((), "unsqueeze", (-2,), id="0d-unsqueeze-out-of-range"),
]


@pytest.mark.parametrize(("shape", "method", "args"), DIM_ERRORS)
def test_dim_errors_are_torchs(shape, method, args):
    with pytest.raises((RuntimeError, IndexError)) as expected:
        getattr(torch.ones(shape), method)(*args)
    with pytest.raises(expected.type) as caught:
        getattr(Layout.contiguous(shape), method)(*args)
    assert isinstance(caught.value, RearrangeError)
    assert str(caught.value) == str(expected.value)


# ---------------------------------------------------------------------- split / merge

@given(layouts(min_ndim=1), st.data())
def test_split_is_reshape_of_one_dim(layout, data):
    dim = data.draw(dims(layout.ndim))
    wrapped = dim % layout.ndim
    sizes = data.draw(shapes_with_numel(layout.shape[wrapped], max_ndim=3))
    new_shape = layout.shape[:wrapped] + sizes + layout.shape[wrapped + 1 :]
    assert_same(layout.split(dim, sizes), positions(layout).reshape(new_shape))


@given(layouts(), st.data())
def test_try_view_exists_iff_reshaped_positions_are_affine(layout, data):
    new_shape = data.draw(shapes_with_numel(layout.numel))
    reshaped = positions(layout).reshape(new_shape)
    result = layout.try_view(new_shape)
    event("trivial" if layout.numel <= 1 else "view" if view_exists(reshaped) else "no view")
    assert (result is not None) == view_exists(reshaped), (layout, new_shape, result)
    if result is not None:
        assert_same(result, reshaped)
        assert result.offset == layout.offset or layout.numel == 0


@st.composite
def merge_ranges(draw, ndim: int) -> tuple[int, int]:
    start = draw(st.integers(0, ndim - 1))
    return start, draw(st.integers(start + 1, ndim))


def merged_shape(shape: tuple[int, ...], start: int, stop: int) -> tuple[int, ...]:
    return shape[:start] + (math.prod(shape[start:stop]),) + shape[stop:]


@given(layouts(min_ndim=1), st.data())
def test_try_merge_exists_iff_merged_positions_are_affine(layout, data):
    start, stop = data.draw(merge_ranges(layout.ndim))
    reshaped = positions(layout).reshape(merged_shape(layout.shape, start, stop))
    result = layout.try_merge(start, stop)
    event("trivial" if layout.numel <= 1 else "view" if view_exists(reshaped) else "no view")
    assert (result is not None) == view_exists(reshaped)
    if result is not None:
        assert_same(result, reshaped)


@given(layouts(min_ndim=1), st.data())
def test_merge_obstacle_agrees_with_try_merge(layout, data):
    start, stop = data.draw(merge_ranges(layout.ndim))
    obstacle = layout.merge_obstacle(start, stop)
    assert (obstacle is None) == (layout.try_merge(start, stop) is not None)
    if obstacle is None:
        return
    # The obstacle is the first (outermost) pair of neighbouring non-unit dims that
    # cannot merge: everything before the inner dim merges, adding it does not.
    outer, inner = obstacle
    where = positions(layout)
    assert start <= outer < inner < stop
    assert layout.shape[outer] != 1 and layout.shape[inner] != 1
    assert all(size == 1 for size in layout.shape[outer + 1 : inner])
    assert layout.strides[outer] != layout.strides[inner] * layout.shape[inner]
    assert view_exists(where.reshape(merged_shape(layout.shape, start, inner)))
    assert not view_exists(where.reshape(merged_shape(layout.shape, start, inner + 1)))


# Merges that are *almost* possible: neighbours of a C-contiguous block, each dim
# reversed half the time (same stride magnitudes, either sign), sometimes stepped or
# broadcast (stride 0), sizes 0 and 1 often. The generic strategies above rarely put a
# reversed dim next to a plain one; here it is the common case.
DIM_KINDS = ("plain", "reverse", "plain", "reverse", "step", "reverse-step", "broadcast")
MERGE_SIZES = st.sampled_from((2, 3, 1, 2, 3, 4, 0, 2, 3))


@st.composite
def merge_cases(draw) -> tuple[np.ndarray, np.ndarray, int, int]:
    """``(base, view, start, stop)``: ``view`` is a numpy view of ``base = arange(n)``,
    so its values are its storage positions; dims ``start .. stop-1`` are to merge."""
    shape = draw(st.lists(MERGE_SIZES, min_size=2, max_size=MAX_NDIM))
    kinds = [draw(st.sampled_from(DIM_KINDS)) for _ in shape]
    step = {"plain": 1, "reverse": -1, "step": 2, "reverse-step": -2, "broadcast": 1}
    base_shape = [1 if k == "broadcast" else n * abs(step[k]) for n, k in zip(shape, kinds)]
    base = np.arange(math.prod(base_shape), dtype=np.int64)
    view = base.reshape(base_shape)[tuple(slice(None, None, step[k]) for k in kinds)]
    view = np.broadcast_to(view, shape)
    if view.ndim >= 2 and draw(st.integers(0, 4)) == 0:   # sometimes two dims swapped
        d = draw(st.integers(0, view.ndim - 2))
        view = np.swapaxes(view, d, d + 1)
    start = draw(st.integers(0, view.ndim - 2))          # at least two dims merge
    return base, view, start, draw(st.integers(start + 2, view.ndim))


def _merge_example(view_of, shape, start, stop):
    base = np.arange(math.prod(shape), dtype=np.int64)
    return (base, view_of(base.reshape(shape)), start, stop)


@example(_merge_example(lambda a: a[:, ::-1], (2, 3), 0, 2))        # inner reversed
@example(_merge_example(lambda a: a[::-1, :], (2, 3), 0, 2))        # outer reversed
@example(_merge_example(lambda a: a[::-1, ::-1], (2, 3), 0, 2))     # both: a view
@example(_merge_example(lambda a: a[:, ::-1, :], (2, 3, 4), 1, 3))  # reversed then plain
@example(_merge_example(lambda a: a[:, :, ::-1], (2, 1, 3), 0, 3))  # across a unit dim
@example(_merge_example(lambda a: a[:, ::-1], (1, 3), 0, 2))        # size 1 never obstructs
@example(_merge_example(lambda a: a[:, ::-1], (0, 3), 0, 2))        # no elements: merges
@example(_merge_example(lambda a: a[::-2, :], (4, 3), 0, 2))        # reversed step
@example(_merge_example(lambda a: np.broadcast_to(a[:, ::-1], (4, 3)), (1, 3), 0, 2))
@example(_merge_example(lambda a: np.broadcast_to(a[::-1], (2, 3, 2))[::-1], (3, 2), 0, 3))
@given(merge_cases())
def test_merge_matches_numpy_reshape_of_arange(case):
    """merge_obstacle and try_merge against numpy: the merged dims' element order is
    ``view.reshape(...)`` of the arange view (its values are storage positions); a merge
    exists iff that order steps through storage by one constant amount."""
    base, view, start, stop = case
    layout = layout_of(view, base)
    note(f"{layout} merge {start}..{stop}")
    merged = view.reshape(merged_shape(view.shape, start, stop))   # numpy copies if it must
    exists = view_exists(merged)
    event("reversed stride" if any(s < 0 for s in layout.strides[start:stop]) else "no reversal")
    event("view" if exists else "no view")
    assert (layout.merge_obstacle(start, stop) is None) == exists
    result = layout.try_merge(start, stop)
    assert (result is not None) == exists
    if result is not None:
        assert_same(result, merged)


# A corpus of named cases, each with the answer worked out by hand; the oracle checks
# the hand answer too.
TRY_VIEW_CASES = [
    pytest.param(Layout.contiguous((2, 3, 4)), (24,), True, id="contiguous-flatten"),
    pytest.param(Layout.contiguous((2, 3, 4)), (4, 6), True, id="contiguous-regroup"),
    pytest.param(Layout((4, 2, 3), (1, 12, 4)), (4, 6), True, id="permuted-kept-neighbours"),
    pytest.param(Layout((4, 2, 3), (1, 12, 4)), (24,), False, id="permuted-flatten"),
    pytest.param(Layout((4, 2, 3), (1, 12, 4)), (8, 3), False, id="permuted-merge-moved"),
    pytest.param(Layout((2, 2, 3), (6, 1, 2)), (12,), False, id="permute-then-view"),
    pytest.param(Layout((3, 4), (1, 3)), (12,), False, id="transposed-flatten"),
    pytest.param(Layout((3, 4), (1, 3)), (3, 2, 2), True, id="transposed-split"),
    pytest.param(Layout((3, 4), (1, 3)), (1, 3, 4, 1), True, id="transposed-unit-dims"),
    pytest.param(Layout((4, 3), (6, 1), 2), (12,), False, id="sliced-columns-flatten"),
    pytest.param(Layout((4, 3), (6, 1), 2), (2, 2, 3), True, id="sliced-columns-split"),
    pytest.param(Layout((4, 3), (0, 1)), (12,), False, id="expanded-rows-flatten"),
    pytest.param(Layout((4, 3), (0, 1)), (2, 2, 3), True, id="expanded-rows-split"),
    pytest.param(Layout((2, 3), (0, 0)), (6,), True, id="fully-broadcast"),
    pytest.param(Layout((6,), (-1,), 5), (2, 3), True, id="reversed-split"),
    pytest.param(Layout((2, 3), (-3, -1), 5), (6,), True, id="reversed-flatten"),
    pytest.param(Layout((2, 3), (3, -1), 2), (6,), False, id="rows-reversed-flatten"),
    pytest.param(Layout((2, 1, 3), (3, 100, 1)), (6,), True, id="odd-unit-stride"),
    pytest.param(Layout((3, 1), (1, 7)), (3,), True, id="odd-unit-stride-last"),
    pytest.param(Layout((2, 2), (1, 2)), (4,), False, id="column-major"),
    pytest.param(Layout((0, 3), (1, 5)), (3, 0), True, id="zero-elements"),
    pytest.param(Layout((0, 3), (1, 5)), (0,), True, id="zero-elements-flatten"),
    pytest.param(Layout((), (), 7), (1, 1), True, id="0d-to-unit"),
    pytest.param(Layout((1,), (9,), 7), (), True, id="unit-to-0d"),
]


@pytest.mark.parametrize(("layout", "new_shape", "is_view"), TRY_VIEW_CASES)
def test_try_view_corpus(layout, new_shape, is_view):
    reshaped = positions(layout).reshape(new_shape)
    assert view_exists(reshaped) == is_view
    result = layout.try_view(new_shape)
    assert (result is not None) == is_view
    if is_view:
        assert_same(result, reshaped)


MERGE_OBSTACLE_CASES = [
    pytest.param(Layout.contiguous((2, 3, 4)), 0, 3, None, id="contiguous"),
    pytest.param(Layout((2, 2, 3), (6, 1, 2)), 0, 3, (0, 1), id="permuted-outer"),
    pytest.param(Layout((2, 2, 3), (6, 1, 2)), 1, 3, (1, 2), id="permuted-inner"),
    pytest.param(Layout((4, 3), (6, 1)), 0, 2, (0, 1), id="sliced-columns"),
    pytest.param(Layout((2, 1, 3), (1, 5, 2)), 0, 3, (0, 2), id="across-unit-dim"),
    pytest.param(Layout((3, 1), (1, 7)), 0, 2, None, id="odd-unit-stride"),
    pytest.param(Layout((0, 3), (1, 5)), 0, 2, None, id="zero-elements"),
    pytest.param(Layout((4, 3), (0, 1)), 0, 2, (0, 1), id="broadcast"),
    pytest.param(Layout((2, 3), (3, -1), 2), 0, 2, (0, 1), id="inner-reversed"),
    pytest.param(Layout((2, 3), (-3, 1), 3), 0, 2, (0, 1), id="outer-reversed"),
    pytest.param(Layout((2, 3), (-3, -1), 5), 0, 2, None, id="both-reversed"),
    pytest.param(Layout((2, 1, 3), (3, 7, -1), 2), 0, 3, (0, 2), id="reversed-across-unit-dim"),
    pytest.param(Layout((4, 3), (0, -1), 2), 0, 2, (0, 1), id="broadcast-reversed"),
    pytest.param(Layout((2, 3), (0, 0)), 0, 2, None, id="fully-broadcast"),
]


@pytest.mark.parametrize(("layout", "start", "stop", "obstacle"), MERGE_OBSTACLE_CASES)
def test_merge_obstacle_corpus(layout, start, stop, obstacle):
    assert layout.merge_obstacle(start, stop) == obstacle
    assert (layout.try_merge(start, stop) is None) == (obstacle is not None)


@given(layouts(), st.data())
def test_try_view_rejects_a_wrong_element_count(layout, data):
    new_shape = data.draw(st.lists(SIZES, max_size=MAX_NDIM).filter(
        lambda shape: math.prod(shape) != layout.numel
    ))
    with pytest.raises(LayoutError, match="is invalid for input of size"):
        layout.try_view(new_shape)


# ---------------------------------------------------------------------- indexing

@given(layouts(min_ndim=1), st.data())
def test_select_is_numpy_integer_index(layout, data):
    dim = data.draw(dims(layout.ndim))
    index = data.draw(st.integers(-6, 6))
    where = positions(layout)
    try:
        expected = where[(slice(None),) * (dim % layout.ndim) + (index,)]
    except IndexError:
        with pytest.raises(DimensionError):
            layout.select(dim, index)
        return
    assert_same(layout.select(dim, index), expected)


@given(layouts(min_ndim=1), st.data())
def test_slice_dim_is_numpy_slice(layout, data):
    dim = data.draw(dims(layout.ndim))
    key = data.draw(slices(layout.shape[dim]))
    expected = positions(layout)[(slice(None),) * (dim % layout.ndim) + (key,)]
    assert_same(layout.slice_dim(dim, key.start, key.stop, key.step), expected)


@st.composite
def basic_keys(draw, shape: tuple[int, ...]):
    """A basic-indexing key: ints (some out of range), slices (any step), None and
    ``...`` -- sometimes more items or ellipses than the layout allows."""
    item = (
        st.integers(-6, 6)
        | st.integers(0, 4).flatmap(slices)
        | st.none()
        | st.just(Ellipsis)
    )
    items = draw(st.lists(item, max_size=len(shape) + 2))
    if len(items) == 1 and draw(st.booleans()):
        return items[0]  # a bare item, not a tuple
    return tuple(items)


@given(layouts(), st.data())
def test_index_is_numpy_basic_indexing(layout, data):
    key = data.draw(basic_keys(layout.shape))
    where = positions(layout)
    try:
        expected = np.asarray(where[key])
    except IndexError:
        with pytest.raises(DimensionError):
            layout.index(key)
        return
    assert_same(layout.index(key), expected)


INDEX_CASES = [
    pytest.param(Layout.contiguous((6,)), slice(None, None, -1), id="reverse"),
    pytest.param(Layout.contiguous((6,)), slice(4, 0, -2), id="reverse-step-2"),
    pytest.param(Layout.contiguous((6,)), slice(0, 4, -1), id="reverse-empty"),
    pytest.param(Layout.contiguous((2, 3)), (Ellipsis, slice(None, None, -1)), id="ellipsis"),
    pytest.param(Layout.contiguous((2, 3)), (None, 1, None, slice(-1, None)), id="nones"),
    pytest.param(Layout((3, 2), (-2, 1), 4), (slice(None, None, -1), 0), id="negative-stride"),
    pytest.param(Layout((4, 3), (0, 1)), (slice(1, 3), slice(None, None, -2)), id="broadcast"),
    pytest.param(Layout((), (), 5), (), id="0d-empty-key"),
    pytest.param(Layout((), (), 5), (None, Ellipsis), id="0d-newaxis"),
]


@pytest.mark.parametrize(("layout", "key"), INDEX_CASES)
def test_index_corpus(layout, key):
    assert_same(layout.index(key), np.asarray(positions(layout)[key]))


# Each error is also the builtin class torch raises for the same key.
INDEX_ERRORS = [
    pytest.param((0, 0, 0), DimensionError, "too many indices", id="too-many"),
    pytest.param((Ellipsis, Ellipsis), DimensionError, "single ellipsis", id="two-ellipses"),
    pytest.param((2,), DimensionError, "out of bounds for dimension 0", id="out-of-range"),
    pytest.param((0, -4), DimensionError, "out of bounds for dimension 1", id="negative-out"),
    pytest.param((None, 5), DimensionError, "for dimension 1", id="dim-counts-None"),
    pytest.param((1.5,), DimensionError, "only integers", id="float"),
    pytest.param((True,), DimensionError, "only integers", id="bool"),
    pytest.param(("a",), ArgumentTypeError, "only integers", id="string"),
]


@pytest.mark.parametrize(("key", "error", "fragment"), INDEX_ERRORS)
def test_index_errors(key, error, fragment):
    with pytest.raises(error) as caught:
        Layout.contiguous((2, 3)).index(key)
    assert fragment in str(caught.value)


# ---------------------------------------------------------------------- 0-d layouts

SCALAR = Layout((), (), 3)

SCALAR_OPS = [
    pytest.param(lambda l: l.transpose(0, -1), (), id="transpose"),
    pytest.param(lambda l: l.movedim(0, -1), (), id="movedim"),
    pytest.param(lambda l: l.permute(()), (), id="permute"),
    pytest.param(lambda l: l.squeeze(), (), id="squeeze"),
    pytest.param(lambda l: l.squeeze(0), (), id="squeeze-0"),
    pytest.param(lambda l: l.unsqueeze(0), (1,), id="unsqueeze-0"),
    pytest.param(lambda l: l.unsqueeze(-1), (1,), id="unsqueeze--1"),
    pytest.param(lambda l: l.expand((2, 3)), (2, 3), id="expand"),
    pytest.param(lambda l: l.try_view((1, 1, 1)), (1, 1, 1), id="try_view"),
    pytest.param(lambda l: l.index(None), (1,), id="index-None"),
]


@pytest.mark.parametrize(("op", "shape"), SCALAR_OPS)
def test_scalar_ops_keep_the_one_position(op, shape):
    assert_same(op(SCALAR), np.full(shape, SCALAR.offset))


SCALAR_ERRORS = [
    pytest.param(lambda l: l.transpose(0, 1), DimensionError, id="transpose-1"),
    pytest.param(lambda l: l.select(0, 0), DimensionError, id="select"),
    pytest.param(lambda l: l.slice_dim(0, None, None, None), DimensionError, id="slice"),
    pytest.param(lambda l: l.split(0, (1,)), DimensionError, id="split"),
    pytest.param(lambda l: l.permute((0,)), LayoutError, id="permute-1"),
]


@pytest.mark.parametrize(("op", "error"), SCALAR_ERRORS)
def test_scalar_op_errors(op, error):
    with pytest.raises(error):
        op(SCALAR)


# ---------------------------------------------------------------------- torch's strides
#
# The model sees positions only, so it cannot check the strides Layout gives size-1 dims
# (any stride addresses them) or the offset of an empty slice. Layout promises torch's
# exact choice there; torch is the oracle, over layouts with non-negative strides (the
# only ones torch can build).

def torch_view_of(layout: Layout):
    """A torch tensor with ``layout``'s sizes, strides and storage offset."""
    needed = layout.offset + sum(size * stride for size, stride in zip(layout.shape, layout.strides))
    return torch.empty(needed + 1).as_strided(layout.shape, layout.strides, layout.offset)


def torch_layout(tensor) -> Layout:
    return Layout(tuple(tensor.shape), tensor.stride(), tensor.storage_offset())


non_negative_layouts = layouts().map(
    lambda l: Layout(l.shape, tuple(abs(s) for s in l.strides), l.offset)
)


def torch_view(tensor, shape):
    """torch's view layout, or None where torch refuses (a view would need a copy)."""
    try:
        return torch_layout(tensor.view(shape))
    except RuntimeError:
        return None


def torch_slice(tensor, dim_and_slice):
    dim, key = dim_and_slice
    return torch_layout(tensor[(slice(None),) * dim + (key,)])


def layout_slice(layout, dim_and_slice):
    dim, key = dim_and_slice
    return layout.slice_dim(dim, key.start, key.stop, key.step)


def torch_is_non_overlapping_and_dense(tensor, _) -> bool:
    """torch's C++ flag, read through ``empty_like``: a tensor with the flag keeps its
    strides; one without gets dense strides, which can never equal its own. (The Python
    ``torch._prims_common`` helper differs from the flag on size-1 dims of stride 0.)"""
    return torch.empty_like(tensor).stride() == tensor.stride()


def preserved_strides(layout: Layout, _) -> tuple[int, ...]:
    """The strides of a copy that preserves the layout's format (``clone``): its own when
    non-overlapping and dense, else :meth:`Layout.dense_strides_like`."""
    if layout.is_non_overlapping_and_dense():
        return layout.strides
    return layout.dense_strides_like()


@st.composite
def positive_slices(draw, layout):
    assume(layout.ndim)
    dim = draw(st.integers(0, layout.ndim - 1))
    key = draw(slices(layout.shape[dim]))
    return dim, slice(key.start, key.stop, abs(key.step) if key.step else None)


# (argument strategy for a layout, the Layout op, the same op on a torch tensor)
TORCH_OPS = [
    pytest.param(
        lambda l: shapes_with_numel(l.numel), Layout.try_view, torch_view, id="try_view"
    ),
    pytest.param(
        lambda l: st.integers(-l.ndim - 1, l.ndim), Layout.unsqueeze,
        lambda t, dim: torch_layout(t.unsqueeze(dim)), id="unsqueeze",
    ),
    pytest.param(
        lambda l: expand_sizes(l.shape), Layout.expand,
        lambda t, sizes: torch_layout(t.expand(sizes)), id="expand",
    ),
    pytest.param(
        lambda l: st.none() | distinct_dims(l.ndim, min_size=1) if l.ndim else st.none(),
        Layout.squeeze,
        lambda t, dims: torch_layout(t.squeeze() if dims is None else t.squeeze(dims)),
        id="squeeze",
    ),
    pytest.param(positive_slices, layout_slice, torch_slice, id="slice"),
    pytest.param(
        lambda l: st.none(), lambda l, _: l.is_contiguous(),
        lambda t, _: t.is_contiguous(), id="is_contiguous",
    ),
    pytest.param(
        lambda l: st.none(), lambda l, _: l.is_non_overlapping_and_dense(),
        torch_is_non_overlapping_and_dense,
        id="is_non_overlapping_and_dense",
    ),
    pytest.param(
        lambda l: st.none(), preserved_strides,
        lambda t, _: torch.empty_like(t).stride(), id="dense_strides_like",
    ),
]


@pytest.mark.parametrize(("arguments", "layout_op", "torch_op"), TORCH_OPS)
@given(layout=non_negative_layouts, data=st.data())
def test_strides_and_offsets_are_torchs(arguments, layout_op, torch_op, layout, data):
    argument = data.draw(arguments(layout))
    assert layout_op(layout, argument) == torch_op(torch_view_of(layout), argument)


@given(st.lists(st.integers(0, 4), max_size=6), st.data())
def test_a_contiguous_layout_merges_into_the_contiguous_layout(shape, data):
    """The planner merges a C-contiguous copy into the output's C-contiguous layout
    without view_of (plan.plan_transform): the layout view_of gives it, size-0 and
    size-1 dims included."""
    from rearrange.layout import view_of

    shape = tuple(shape)
    # a regrouping of the same elements: runs of consecutive dims merged, units inserted
    cuts = sorted(data.draw(st.sets(st.integers(1, max(1, len(shape) - 1)))))
    pieces = [shape[a:b] for a, b in zip([0, *cuts], [*cuts, len(shape)]) if a < b]
    new_shape = []
    for piece in pieces:
        new_shape.append(math.prod(piece))
        if data.draw(st.booleans()):
            new_shape.append(1)
    new_shape = tuple(new_shape)
    numel = math.prod(shape)
    assert math.prod(new_shape) == numel
    assert view_of(Layout.contiguous(shape), new_shape, numel) == Layout.contiguous(new_shape)
