"""The cold path (a pattern never seen before) decides exactly as the warm one and as the
general planner: the parts it builds lazily or skips are checked against what they
stand for.

* A call's first and second runs of a pattern (planned, then from the plan cache) give
  the same values, shape, strides and view-ness, on strided, reversed, broadcast,
  size-0 and size-1 inputs; the values against einops.
* A parsed pattern built from the scanner's record has the sides lark gives, whether
  they are read first or never; the recipe of a name-only pattern (made from that
  record, its axes built when read) equals the general recipe.
* A copy step whose kernel is described when first read has the kernel the planner
  describes at once, whatever the thread count meanwhile.
* The shortcuts of the planner's helpers (numpy layouts, dtype names, ``view_of``,
  row-major strides) equal what they replace.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import pickle

import einops
import numpy as np
import pytest
from hypothesis import given, note
from hypothesis import strategies as st
from test_view_optimality import EXAMPLES, rearrange_cases

import rearrange as ra
from rearrange import calls, parsing, plan as planning, recipe as recipes
from rearrange.backends import ndarray
from rearrange.kernel import get_num_threads, set_num_threads
from rearrange.kernel.plan import NUMPY_MAX_BYTES, copies_with_numpy, plan_copy
from rearrange.layout import Layout, row_major_strides, view_of

_fresh = itertools.count()


def _renamed(pattern: str, lengths: dict[str, int]) -> tuple[str, dict[str, int]]:
    """``pattern`` with every axis name made new (never seen by any cache)."""
    suffix = f"_{next(_fresh)}x"
    renamed = " ".join(
        token + suffix if token.isidentifier() else token
        for token in pattern.replace("(", " ( ").replace(")", " ) ").split())
    return renamed, {name + suffix: length for name, length in lengths.items()}


def _same_result(first: np.ndarray, second: np.ndarray, x: np.ndarray) -> None:
    assert type(first) is type(second)
    assert first.shape == second.shape and first.dtype == second.dtype
    assert first.strides == second.strides
    assert np.shares_memory(first, x) == np.shares_memory(second, x)
    np.testing.assert_array_equal(first, second)


def _check_first_and_second(pattern: str, lengths: dict[str, int], x: np.ndarray) -> None:
    pattern, lengths = _renamed(pattern, lengths)
    for copy in (None, True, False):
        try:
            first = ra.rearrange(x, pattern, copy=copy, **lengths)
        except ra.NoViewError as error:
            with pytest.raises(ra.NoViewError) as again:
                ra.rearrange(x, pattern, copy=copy, **lengths)
            assert str(again.value) == str(error)
            continue
        second = ra.rearrange(x, pattern, copy=copy, **lengths)
        _same_result(first, second, x)
        np.testing.assert_array_equal(first, einops.rearrange(x, pattern, **lengths))


@pytest.mark.parametrize("case", EXAMPLES, ids=[case[0] for case in EXAMPLES])
def test_first_and_second_call_agree_on_examples(case) -> None:
    pattern, lengths, x = case
    _check_first_and_second(pattern, lengths, x)


@given(rearrange_cases())
def test_first_and_second_call_agree(case) -> None:
    pattern, lengths, x = case
    note(f"{pattern} {lengths} shape {x.shape} strides {x.strides}")
    _check_first_and_second(pattern, lengths, x)


LAYOUTS = [
    ("b h t d -> b t h d", (2, 8, 16, 4), lambda a: a),
    ("b h t d -> b t (h d)", (2, 8, 16, 4), lambda a: a),
    ("b h t d -> b t (h d)", (2, 8, 16, 4), lambda a: a[:, ::-1]),
    ("b h t d -> (b t) (h d)", (2, 1, 16, 4), lambda a: a[..., ::-1]),
    ("b h t d -> b (t h d)", (2, 0, 3, 4), lambda a: a),
    ("b h t d -> b t (h d)", (1, 8, 1, 4), lambda a: np.broadcast_to(a, (3, 8, 5, 4))),
    ("b (h d) t -> b t h d", (2, 32, 16), lambda a: a[:, :, ::2]),
    ("h w -> w h", (160, 96), lambda a: a),          # copy=True: a kernel copy of 60 KiB
    ("h w -> (w h)", (96, 160), lambda a: a),        # a kernel transpose (60 KiB)
]


@pytest.mark.parametrize("pattern, shape, view", LAYOUTS)
@pytest.mark.parametrize("dtype", [np.float32, np.uint8, np.complex128, object])
def test_first_and_second_call_agree_on_layouts(pattern, shape, view, dtype) -> None:
    base = np.arange(math.prod(shape)).astype(dtype).reshape(shape)
    x = view(base)
    lengths = {"h": 4} if "(h d)" in pattern.split("->")[0] else {}
    _check_first_and_second(pattern, lengths, x)


# --------------------------------------------------------------------------- the parse


def _transform_patterns() -> list[str]:
    """Transform patterns of the einops corpus and of the parser's own test set."""
    from corpus import CORPUS_PATH
    import json

    texts = {json.loads(line)["pattern"] for line in CORPUS_PATH.read_text().splitlines()
             if json.loads(line)["op"] in parsing.TRANSFORM_OPS}
    texts |= {"b h t d -> b t (h d)", "b (h d) t -> b t h d", "a b -> (b a) 1", "() a -> a",
              "a  b\t->\n(a\nb)", "(a b)c -> c(b a)", "a b -> a b c", "a b c -> a",
              " -> ", "a -> ", "β γ -> (γ β)"}
    return sorted(text for text in texts if isinstance(text, str))


PATTERNS = _transform_patterns()


@pytest.mark.parametrize("op", parsing.TRANSFORM_OPS)
def test_scanned_patterns_have_lark_sides(op) -> None:
    checked = 0
    for text in PATTERNS:
        try:
            parsed = parsing._build_transform(text, op)
        except ra.RearrangeError:
            continue
        if parsed.scanned is None:
            continue
        checked += 1
        left, right = parsing._transform_sides_lark(text)
        eager = parsing.TransformPattern(text, left, right)
        # read nothing first: equality, repr and pickling build the sides
        assert parsing._build_transform(text, op) == eager
        assert repr(parsing._build_transform(text, op)) == repr(eager)
        assert pickle.loads(pickle.dumps(parsing._build_transform(text, op))) == eager
        # the sides themselves, and names read off them
        assert (parsed.left, parsed.right) == (left, right)
        assert parsed.left.names == left.names and parsed.right.names == right.names
        assert hash(parsed) == hash(eager)
    assert checked > 20


def test_a_pattern_with_given_sides_has_no_record() -> None:
    parsed = parsing._build_transform("a b -> b a", "rearrange")
    other = dataclasses.replace(parsed, text="b a -> a b")
    assert other.scanned is None and other.left == parsed.left
    assert recipes._named_recipe(other, 2) is None   # never a recipe of another text


def test_unknown_attribute_of_a_scanned_pattern() -> None:
    parsed = parsing._build_transform("a b -> b a", "rearrange")
    assert parsed.scanned is not None
    with pytest.raises(AttributeError, match="no attribute 'sides'"):
        parsed.sides  # noqa: B018
    assert not hasattr(parsed, "sides")


@pytest.mark.parametrize("op", parsing.TRANSFORM_OPS)
def test_named_recipes_equal_general_recipes(op) -> None:
    checked = 0
    for text in PATTERNS:
        try:
            parsed = parsing._build_transform(text, op)
        except ra.RearrangeError:
            continue
        for ndim in range(7):
            fast = recipes._named_recipe(parsed, ndim)
            if fast is None:
                continue
            checked += 1
            general = recipes._general_recipe(parsed, ndim)
            for field in ("names", "input_groups", "output_groups", "input_spans",
                          "output_spans", "reduced", "added", "fixed_lengths", "permutation",
                          "ndim", "pattern"):
                assert getattr(fast, field) == getattr(general, field), (text, ndim, field)
            assert fast.axes == general.axes      # built when first read
            assert fast == general
    assert checked > 20


def test_named_recipe_axes_and_errors_from_the_record() -> None:
    """An error that quotes an axis reads the lazily built axes: same message."""
    x = np.zeros((6, 4))
    with pytest.raises(ra.PatternError) as error:
        ra.rearrange(x, "(a9 b9) c9 -> a9 b9 c9", a9=4)
    parsed = parsing.TransformPattern("(a9 b9) c9 -> a9 b9 c9",
                                      *parsing._transform_sides_lark("(a9 b9) c9 -> a9 b9 c9"))
    with pytest.raises(ra.PatternError) as general:
        recipes.solve_lengths(recipes._general_recipe(parsed, 2), (6, 4), {"a9": 4})
    assert str(general.value) in str(error.value)


# --------------------------------------------------------------------------- the copy kernel


COPIES = [
    ((2, 16, 8, 4), (512, 4, 64, 1), np.float32),
    ((0, 3), (3, 1), np.float32),
    ((3, 5), (1, 3), object),
    ((64, 128), (1, 64), np.float32),        # 32 KiB: the kernel's, described at once
    ((200, 100), (1, 200), np.uint8),
]


@pytest.mark.parametrize("shape, strides, dtype", COPIES)
def test_deferred_kernel_is_the_kernel_described_at_once(shape, strides, dtype) -> None:
    dtype = np.dtype(dtype)
    describe = calls._copy_describer(dtype.name, dtype.itemsize, "elements")
    source = Layout(shape, strides)
    step = planning._copy_step(Layout.contiguous(shape), "why", describe, source)
    small = copies_with_numpy(math.prod(shape), dtype.itemsize, dtype.kind)
    assert (step.deferred is not None) == small
    at_once = describe(source)
    threads = get_num_threads()
    try:
        set_num_threads(1 if threads > 1 else 2)    # described later, for another count
        assert step.kernel == at_once
    finally:
        set_num_threads(threads)
    assert step.deferred is None and step.kernel is step.kernel
    assert step == planning.Step("copy", Layout.contiguous(shape), True, "why", kernel=at_once)


def test_a_replaced_kernel_is_not_deferred() -> None:
    describe = calls._copy_describer("float32", 4, "elements")
    source = Layout((4, 5), (1, 4))
    step = planning._copy_step(Layout.contiguous((4, 5)), "why", describe, source)
    assert step.deferred is not None
    given = dataclasses.replace(step, kernel=None)      # as the array API backend does
    assert given.kernel is None and given.deferred is None
    assert not ndarray._kernel_copies(given)
    assert pickle.loads(pickle.dumps(step)).kernel == describe(source)


@pytest.mark.parametrize("threads", [1, 2, 8])
@pytest.mark.parametrize("itemsize, kind", [(1, "u"), (4, "f"), (8, "O"), (16, "c"), (3, "V")])
def test_copies_with_numpy_is_numpys_copy(threads, itemsize, kind) -> None:
    for shape in [(0,), (1,), (7, 3), (NUMPY_MAX_BYTES // itemsize - 1,),
                  (NUMPY_MAX_BYTES // itemsize,), (64, 512), (3, 4096)]:
        strides = tuple(s * itemsize for s in row_major_strides(shape))
        for source in (strides, strides[::-1] if len(shape) > 1 else strides):
            kernel = plan_copy(shape[::-1] if source is not strides else shape, source,
                               itemsize, kind, threads)
            if copies_with_numpy(math.prod(shape), itemsize, kind):
                assert kernel.variant in ("numpy", "empty"), (shape, kernel)


def test_explain_shows_a_deferred_kernel() -> None:
    x = np.zeros((2, 8, 16, 4), np.float32)
    plan = ra.explain(x, "b h t d -> b t (h d)")
    assert "kernel numpy: 4096 B < 32768 B" in str(plan)
    assert plan.to_dict()["steps"][1]["kernel"]["variant"] == "numpy"


# --------------------------------------------------------------------------- helpers


@given(st.lists(st.integers(0, 5), max_size=5), st.data())
def test_view_of_is_try_view(shape, data) -> None:
    shape = tuple(shape)
    strides = tuple(data.draw(st.lists(st.integers(-40, 40), min_size=len(shape),
                                       max_size=len(shape))))
    layout = Layout(shape, strides, 3)
    numel = math.prod(shape)
    splits = [s for s in (shape, (numel,), (1, numel, 1), shape[::-1]) if math.prod(s) == numel]
    for new_shape in splits:
        assert view_of(layout, tuple(new_shape), numel) == layout.try_view(new_shape)


def test_row_major_strides() -> None:
    for shape in [(), (0,), (2, 0, 3), (1, 1), (4, 3, 2), (5, 1, 0, 2)]:
        expected, step = [], 1
        for size in reversed(shape):
            expected.insert(0, step)
            step *= max(size, 1)
        assert row_major_strides(shape) == tuple(expected)


DTYPES = [np.float32, np.dtype(">f4"), np.int64, np.bool_, "U3", "S0", "V7", object,
          np.dtype([("a", "<f4"), ("b", "<i8")]),
          np.dtype([("a", "<f4"), ("b", "<i8")], align=True),
          np.dtype("f8", metadata={"unit": "m"}), "M8[s]", "m8"]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_numpy_description(dtype) -> None:
    x = np.zeros((3, 4), dtype)
    for view in (x, x[:, ::-1], x.T, x[::2, 1:], np.broadcast_to(x[:1], (5, 4))):
        info = ndarray.describe(view)
        assert info.dtype == view.dtype.name and info.itemsize == view.itemsize
        itemsize = view.itemsize
        if itemsize and all(s % itemsize == 0 for s in view.strides):
            expected = Layout(view.shape, tuple(s // itemsize for s in view.strides)), "elements"
        else:
            expected = Layout(view.shape, view.strides), "bytes"
        assert (info.layout, info.unit) == expected


def test_structured_field_views_are_described_in_bytes() -> None:
    x = np.zeros(6, [("a", "<f4"), ("b", "<i2")])
    layout, unit = calls.numpy_layout(x["a"])     # 4-byte items 6 bytes apart
    assert unit == "bytes" and layout == Layout((6,), (6,))
    layout, unit = calls.numpy_layout(x["b"])     # 2-byte items 6 bytes apart
    assert unit == "elements" and layout == Layout((6,), (3,))


def test_a_cold_call_leaves_few_objects_for_the_garbage_collector() -> None:
    """What a never-seen pattern leaves in the caches is visited by the garbage
    collector's next pass (tuples from CPython's free list do not even count towards
    triggering it): the scanner's record is five tuples whatever the pattern's length,
    and recipes share their one-axis groups. Was 62 objects a call for this pattern."""
    import gc

    x = np.zeros((2, 8, 16, 4), dtype=np.float32)
    for k in range(20):    # warm every module-level structure first
        ra.rearrange(x, f"b gcw{k} t d -> b t gcw{k} d")
    calls = 50
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        before = len(gc.get_objects(0))
        for k in range(calls):
            ra.rearrange(x, f"b gcn{k} t d -> b t gcn{k} d")
        per_call = (len(gc.get_objects(0)) - before) / calls
    finally:
        if enabled:
            gc.enable()
    assert per_call <= 30, per_call


@st.composite
def _lengths_problems(draw):
    """A name-only pattern of 1-4 input dims, each 0-3 axes (units included), a shape
    that may or may not fit it, and given lengths that may or may not be right (or
    ints at all)."""
    dims = draw(st.lists(st.integers(0, 3), min_size=1, max_size=4))
    names = [f"x{k}" for k in range(sum(dims))]
    groups, at = [], 0
    for count in dims:
        members = names[at:at + count]
        at += count
        groups.append(members[0] if count == 1 and draw(st.booleans())
                      else "(" + " ".join(members) + ")")
    text = " ".join(groups) + " -> " + " ".join(names)
    lengths = {name: draw(st.integers(1, 4)) for name in names}
    shape = tuple(math.prod(lengths[n] for n in names[sum(dims[:k]):sum(dims[:k + 1])])
                  * draw(st.sampled_from([1, 1, 1, 2, 0])) for k in range(len(dims)))
    given = {name: draw(st.sampled_from([length, length, length + 1, 0, -1, 2.0, True]))
             for name, length in lengths.items() if draw(st.booleans())}
    if draw(st.booleans()):
        given["y9"] = 3          # not an axis of the pattern
    return text, shape, given


@given(_lengths_problems())
def test_plain_lengths_are_the_general_paths(problem) -> None:
    """solve_lengths' plain path gives the general path's lengths, and declines (None)
    wherever the general one raises, or sees anything but plain ints."""
    text, shape, given = problem
    note(repr(problem))
    recipe = recipes.build_recipe(parsing.parse_transform(text, "rearrange"), len(shape))
    plain = recipes._solve_plain(recipe.input_groups, recipe.names, shape, given)
    try:
        general = recipes._solve_general(recipe, shape, given, None)
    except ra.RearrangeError:
        assert plain is None
        return
    assert plain is None or plain == general
    if plain is None:   # declined only for what is not plain: a length that is no int
        assert any(type(v) is not int for v in given.values())
