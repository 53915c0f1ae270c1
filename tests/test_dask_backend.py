"""dask arrays: results equal numpy's and einops' across random chunkings, stay lazy, and
run out of core; explain reports the chunks dask really produces."""

from __future__ import annotations

import json
import math
import pathlib
import subprocess
import sys
import textwrap

import dask
import dask.array as da
import einops
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rearrange as ra
from rearrange.backends import _dask

NAMES = "abcdefg"
REDUCTIONS = ("sum", "mean", "min", "max", "prod", "any", "all", "var", "std", "logsumexp",
              "argmax", "argmin", "count_nonzero")


def _refuse_compute(dsk, keys, **kwargs):
    raise AssertionError("a rearrange call computed its dask graph")


def computing_refused():
    """Every dask scheduler refuses to run: calls inside may only build graphs."""
    return dask.config.set(scheduler=_refuse_compute)


def lazily(call, *args, **kwargs):
    """``call(...)``, which must return a dask array without computing anything."""
    with computing_refused():
        result = call(*args, **kwargs)
    assert isinstance(result, da.Array), type(result)
    return result


def compute(y: da.Array) -> np.ndarray:
    return y.compute(scheduler="synchronous")


def largest_block(y: da.Array) -> int:
    return math.prod(max(c) for c in y.chunks) * y.dtype.itemsize if y.size else 0


def has_rechunk(y: da.Array) -> bool:
    return any(name.startswith("rechunk") for name in y.dask.layers)


def output_chunks_note(plan: ra.Plan) -> str:
    return next(note for note in plan.notes if note.startswith("dask output chunks"))


# ---------------------------------------------------------------------- strategies

@st.composite
def chunkings(draw, shape):
    """Any chunking of ``shape``: each dim cut at random places."""
    chunks = []
    for size in shape:
        if size == 0:
            chunks.append((0,))
            continue
        cuts = sorted(draw(st.sets(st.integers(1, size - 1), max_size=size - 1)) if size > 1 else [])
        bounds = [0, *cuts, size]
        chunks.append(tuple(b - a for a, b in zip(bounds, bounds[1:])))
    return tuple(chunks)


def partition(draw, items, label):
    """``items`` cut into consecutive non-empty runs."""
    groups, current = [], []
    for item in items:
        if current and draw(st.booleans(), label=label):
            groups.append(current)
            current = []
        current.append(item)
    return groups + [current] if current else groups


def _side_text(tokens) -> str:
    parts = []
    for kind, names in tokens:
        if kind == "unit":
            parts.append(names)                     # "1" or "()"
        elif kind == "ellipsis":
            parts.append("...")
        elif len(names) == 1:
            parts.append(names[0])
        else:
            parts.append("(" + " ".join(names) + ")")
    return " ".join(parts)


@st.composite
def rearrange_cases(draw):
    """A rearrange pattern with splits, merges, a permutation, unit dims and maybe an
    ellipsis, its input shape and axis lengths, and the numpy oracle's three steps."""
    count = draw(st.integers(0, 5), label="axes")
    names = list(NAMES[:count])
    lengths = {n: draw(st.integers(1, 4), label=f"len {n}") for n in names}
    left = partition(draw, names, "left cut")
    # an ellipsis stands for a run of single-axis input dims (possibly none)
    singles = [k for k, g in enumerate(left) if len(g) == 1]
    hidden: list[str] = []
    use_ellipsis = draw(st.booleans(), label="ellipsis")
    if use_ellipsis:
        start = draw(st.integers(0, len(left)), label="ellipsis at")
        stop = start
        while stop < len(left) and stop in singles and draw(st.booleans(), label="ellipsis grows"):
            stop += 1
        hidden = [g[0] for g in left[start:stop]]
        left = left[:start] + [["..."]] + left[stop:]
    left_tokens = [("ellipsis", hidden) if g == ["..."] else ("group", g) for g in left]
    for _ in range(draw(st.integers(0, 1), label="left units")):
        left_tokens.insert(draw(st.integers(0, len(left_tokens))), ("unit", "1"))

    visible = [n for n in names if n not in hidden]
    order = draw(st.permutations(visible + (["..."] if use_ellipsis else [])), label="order")
    right = partition(draw, order, "right cut")
    right_tokens = [("ellipsis", hidden) if g == ["..."] else ("group", g) for g in right]
    for _ in range(draw(st.integers(0, 2), label="right units")):
        right_tokens.insert(draw(st.integers(0, len(right_tokens))),
                            ("unit", draw(st.sampled_from(["1", "()"]), label="unit")))
    pattern = f"{_side_text(left_tokens)} -> {_side_text(right_tokens)}"

    shape, elementary = [], []
    for kind, group in left_tokens:
        if kind == "unit":
            shape.append(1)
        elif kind == "ellipsis":
            shape.extend(lengths[n] for n in group)
            elementary.extend(group)
        else:
            shape.append(math.prod(lengths[n] for n in group))
            elementary.extend(group)
    out_order, out_shape = [], []
    for kind, group in right_tokens:
        if kind == "unit":
            out_shape.append(1)
            continue
        axes = [a for n in group for a in (hidden if n == "..." else [n])]
        out_order.extend(axes)
        if kind == "ellipsis":
            out_shape.extend(lengths[n] for n in axes)
        else:
            out_shape.append(math.prod(lengths[n] for n in axes))
    kwargs = {n: lengths[n] for kind, g in left_tokens if kind == "group" and len(g) > 1
              for n in g[1:]}
    oracle = ([lengths[n] for n in elementary], [elementary.index(n) for n in out_order],
              out_shape)
    return pattern, tuple(shape), kwargs, oracle


def numpy_oracle(x: np.ndarray, oracle) -> np.ndarray:
    elementary_shape, order, out_shape = oracle
    return x.reshape(elementary_shape).transpose(order).reshape(out_shape)


# ---------------------------------------------------------------------- rearrange

@given(rearrange_cases(), st.data(), st.sampled_from([None, "96B", "1KiB"]))
def test_rearrange_matches_numpy_and_einops_on_any_chunking(case, data, target) -> None:
    pattern, shape, lengths, oracle = case
    chunks = data.draw(chunkings(shape), label="chunks")
    values = np.arange(math.prod(shape), dtype=np.int16).reshape(shape)
    x = da.from_array(values, chunks=chunks)
    with dask.config.set({"array.chunk-size": target or dask.config.get("array.chunk-size")}):
        y = lazily(ra.rearrange, x, pattern, **lengths)
        with computing_refused():
            plan = ra.explain(x, pattern, **lengths)
    got = compute(y)
    np.testing.assert_array_equal(got, numpy_oracle(values, oracle))
    np.testing.assert_array_equal(got, einops.rearrange(values, pattern, **lengths))
    np.testing.assert_array_equal(got, ra.rearrange(values, pattern, **lengths))
    assert got.dtype == values.dtype
    # a reshape never makes a block larger; explain reports the chunks dask produced
    assert largest_block(y) <= largest_block(x)
    assert output_chunks_note(plan).startswith(f"dask output chunks {_dask._chunks_text(y.chunks)}:")
    assert has_rechunk(y) == any(note.startswith("dask rechunk") for note in plan.notes)


@pytest.mark.parametrize(("pattern", "shape", "chunks", "lengths"), [
    ("b h t d -> b t (h d)", (2, 3, 4, 5), (1, 2, 3, 2), {}),
    ("a b -> (b a)", (6, 4), (4, 3), {}),
    ("(a b) c -> a b c", (12, 5), (5, 2), {"a": 3}),
    ("(a b c) -> c b a", (24,), (7,), {"a": 2, "b": 3}),
    ("a 1 b -> b () a 1", (3, 1, 4), (2, 1, 3), {}),
    ("... -> (...)", (2, 3, 4), (1, 2, 3), {}),
    ("a b -> b a", (0, 3), (1, 2), {}),
    ("a b -> (a b)", (3, 0), (2, 1), {}),
    ("(a b) c -> c a b", (0, 2), (1, 1), {"a": 2}),
    (" -> 1 1", (), (), {}),
])
def test_rearrange_examples_match_einops(pattern, shape, chunks, lengths) -> None:
    values = np.arange(math.prod(shape), dtype=np.float64).reshape(shape)
    x = da.from_array(values, chunks=chunks)
    y = lazily(ra.rearrange, x, pattern, **lengths)
    expected = einops.rearrange(values, pattern, **lengths)
    assert y.shape == expected.shape
    np.testing.assert_array_equal(compute(y), expected)


def test_a_needed_rechunk_fits_the_target_even_when_the_input_blocks_did_not() -> None:
    """1 MiB blocks, target 8 KiB. (b a) needs a whole: the rechunk makes blocks of b
    chunked by 16 and a whole, 16 x 64 elements = 8 KiB. A block that needs no rechunk
    keeps its size (a reshape never grows a block)."""
    values = np.arange(64 * 4096, dtype=np.float64).reshape(64, 4096)
    x = da.from_array(values, chunks=(32, 4096))
    with dask.config.set({"array.chunk-size": "8KiB"}):
        y = lazily(ra.rearrange, x, "a b -> (b a)")
        plan = ra.explain(x, "a b -> (b a)")
        kept = lazily(ra.rearrange, x, "a b -> (a b)")
    assert largest_block(y) == 8 * 1024
    assert "dask rechunk before step 3 (merge): dim 0 4096 -> 256x16, dim 1 2x32 -> 64" in plan.notes
    np.testing.assert_array_equal(compute(y), values.T.reshape(-1))
    assert largest_block(kept) == largest_block(x) and not has_rechunk(kept)


def test_copy_false_raises_where_numpy_does_and_copy_true_is_lazy() -> None:
    values = np.arange(24.0).reshape(2, 3, 4)
    x = da.from_array(values, chunks=(1, 2, 2))
    with pytest.raises(ra.NoViewError, match="cannot merge"):
        ra.rearrange(x, "a b c -> a (c b)", copy=False)
    with pytest.raises(ra.NoViewError):
        ra.rearrange(values, "a b c -> a (c b)", copy=False)   # the same as numpy
    view = lazily(ra.rearrange, x, "a b c -> a (b c)", copy=False)
    np.testing.assert_array_equal(compute(view), values.reshape(2, 12))
    copied = lazily(ra.rearrange, x, "a b c -> a b c", copy=True)
    assert "map_blocks(np.copy)" in " ".join(ra.explain(x, "a b c -> a b c", copy=True).notes)
    assert any(name.startswith("copy-") for name in copied.dask.layers)
    np.testing.assert_array_equal(compute(copied), values)
    same = lazily(ra.rearrange, x, "a b c -> a b c")
    assert not any(name.startswith("copy-") for name in same.dask.layers)


def test_list_of_dask_arrays_is_stacked() -> None:
    parts = [np.arange(6.0).reshape(2, 3) + k for k in range(4)]
    xs = [da.from_array(p, chunks=(1, 2)) for p in parts]
    y = lazily(ra.rearrange, xs, "n a b -> a (n b)")
    np.testing.assert_array_equal(compute(y), einops.rearrange(parts, "n a b -> a (n b)"))


def test_errors_are_rearrange_errors() -> None:
    x = da.zeros((6, 4), chunks=(2, 2))
    with pytest.raises(ra.PatternError):
        ra.rearrange(x, "(a b) c -> a b c", a=4)
    with pytest.raises(ra.PatternError):
        ra.rearrange(x, "a b c -> a b c")
    unknown = x[x[:, 0] > 0]   # boolean indexing: row count unknown until computed
    for call in (lambda: ra.rearrange(unknown, "a b -> b a"),
                 lambda: ra.reduce(unknown, "a b -> b", "sum"),
                 lambda: ra.rearrange([unknown, unknown], "n a b -> a b n"),
                 lambda: ra.einsum(unknown, x, "a b, c b -> a c"),
                 lambda: ra.pack([x, unknown], "* b"),
                 lambda: ra.unpack(unknown, [(2,), (2,)], "a *")):
        with pytest.raises(ra.RearrangeError, match="compute_chunk_sizes"):
            call()
    with pytest.raises(ra.ArgumentTypeError, match="mixing"):
        ra.rearrange([x, np.zeros((6, 4))], "n a b -> a b n")


# ---------------------------------------------------------------------- reduce

@st.composite
def reduce_cases(draw):
    ndim = draw(st.integers(1, 4), label="ndim")
    shape = tuple(draw(st.integers(1, 4), label=f"dim {d}") for d in range(ndim))
    names = list(NAMES[:ndim])
    reduction = draw(st.sampled_from(REDUCTIONS), label="reduction")
    if reduction in ("argmax", "argmin"):
        reduced = [draw(st.sampled_from(names), label="reduced")]
    else:
        reduced = [n for n in names if draw(st.booleans(), label=f"reduce {n}")]
    kept = draw(st.permutations([n for n in names if n not in reduced]), label="order")
    groups = partition(draw, kept, "kept cut")
    right = " ".join(g[0] if len(g) == 1 else "(" + " ".join(g) + ")" for g in groups)
    pattern = f"{' '.join(names)} -> {right}"
    order = [names.index(n) for n in kept] + [names.index(n) for n in reduced]
    out_shape = [math.prod(shape[names.index(n)] for n in g) for g in groups]
    return pattern, shape, reduction, order, len(reduced), out_shape


def _numpy_reduction(reduction, y, axes):
    if not axes:   # nothing reduced: a rearrange
        return y
    if reduction == "logsumexp":
        flat = y.reshape(*y.shape[:y.ndim - len(axes)], -1).astype(np.float64)
        return np.logaddexp.reduce(flat, axis=-1)
    if reduction in ("argmax", "argmin"):
        return getattr(y, reduction)(axis=axes[0])
    if reduction == "count_nonzero":
        return np.asarray(np.count_nonzero(y, axis=axes))
    return getattr(y, reduction)(axis=axes)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@given(reduce_cases(), st.data(), st.sampled_from([np.float64, np.float32, np.int32, np.bool_]))
def test_reduce_matches_numpy_on_any_chunking(case, data, dtype) -> None:
    pattern, shape, reduction, order, reduced_count, out_shape = case
    chunks = data.draw(chunkings(shape), label="chunks")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16), label="seed"))
    values = rng.integers(-3, 4, size=shape).astype(dtype) if dtype != np.bool_ else \
        rng.integers(0, 2, size=shape).astype(bool)
    if dtype in (np.float64, np.float32):
        values = (values + rng.standard_normal(shape)).astype(dtype)
    x = da.from_array(values, chunks=chunks)
    y = lazily(ra.reduce, x, pattern, reduction)
    got = compute(y)
    through_numpy = ra.reduce(values, pattern, reduction)
    transposed = values.transpose(order)
    axes = tuple(range(len(order) - reduced_count, len(order)))
    direct = np.asarray(_numpy_reduction(reduction, transposed, axes)).reshape(out_shape)
    assert got.dtype == through_numpy.dtype, (got.dtype, through_numpy.dtype)
    tolerance = {"rtol": 1e-5, "atol": 1e-5} if got.dtype in (np.float32, np.float16) else \
        {"rtol": 1e-10, "atol": 1e-10}
    np.testing.assert_allclose(got, through_numpy, **tolerance)
    np.testing.assert_allclose(got.astype(np.float64), np.asarray(direct, dtype=np.float64),
                               **tolerance)


def test_reduce_with_a_callable_gets_the_dask_array() -> None:
    values = np.arange(60.0).reshape(3, 4, 5)
    x = da.from_array(values, chunks=(2, 3, 2))
    seen = []

    def peak_to_peak(y, axes):
        seen.append(type(y))
        return y.max(axis=axes) - y.min(axis=axes)

    y = lazily(ra.reduce, x, "a b c -> c a", peak_to_peak)
    assert seen == [da.Array]
    np.testing.assert_array_equal(compute(y), np.ptp(values.transpose(2, 0, 1), axis=2))
    with pytest.raises(ra.RearrangeError, match="callable returned"):
        ra.reduce(x, "a b c -> c a", lambda y, axes: y.sum())


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_reduce_of_zero_size_is_numpy_result(reduction) -> None:
    pattern = "a b -> a" if reduction not in ("argmax", "argmin") else "a b -> b"
    values = np.zeros((3, 0))
    x = da.from_array(values, chunks=(2, 1))
    try:
        expected = ra.reduce(values, pattern, reduction)
    except ra.RearrangeError as error:
        with pytest.raises(ra.RearrangeError, match="total length 0"):
            ra.reduce(x, pattern, reduction)
        assert "total length 0" in str(error)
        return
    got = compute(lazily(ra.reduce, x, pattern, reduction))
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)


def test_integer_mean_is_float64_and_logsumexp_is_stable() -> None:
    values = np.array([[1, 2, 4], [3, 5, 9]], dtype=np.int32)
    mean = compute(ra.reduce(da.from_array(values, chunks=1), "a b -> a", "mean"))
    assert mean.dtype == np.float64
    np.testing.assert_array_equal(mean, values.mean(axis=1))
    big = np.array([[1000.0, 1000.0, -np.inf], [-np.inf, -np.inf, -np.inf]])
    got = compute(ra.reduce(da.from_array(big, chunks=(1, 2)), "a b -> a", "logsumexp"))
    np.testing.assert_allclose(got, [1000.0 + np.log(2.0), -np.inf])


# ---------------------------------------------------------------------- repeat

@st.composite
def repeat_cases(draw):
    ndim = draw(st.integers(0, 3), label="ndim")
    shape = tuple(draw(st.integers(1, 4), label=f"dim {d}") for d in range(ndim))
    names = list(NAMES[:ndim])
    added = {n: draw(st.integers(1, 3), label=f"new {n}") for n in "xyz"[:draw(st.integers(1, 2))]}
    order = draw(st.permutations(names + list(added)), label="order")
    groups = partition(draw, order, "cut")
    right = " ".join(g[0] if len(g) == 1 else "(" + " ".join(g) + ")" for g in groups)
    return f"{' '.join(names)} -> {right}", shape, added


@given(repeat_cases(), st.data(), st.sampled_from([None, "64B"]))
def test_repeat_matches_numpy_and_einops_on_any_chunking(case, data, target) -> None:
    pattern, shape, added = case
    chunks = data.draw(chunkings(shape), label="chunks")
    values = np.arange(math.prod(shape), dtype=np.int64).reshape(shape)
    x = da.from_array(values, chunks=chunks)
    limit = target or dask.config.get("array.chunk-size")
    with dask.config.set({"array.chunk-size": limit}), computing_refused():
        y = lazily(ra.repeat, x, pattern, **added)
        plan = ra.explain(x, pattern, op="repeat", **added)
    got = compute(y)
    np.testing.assert_array_equal(got, einops.repeat(values, pattern, **added))
    np.testing.assert_array_equal(got, ra.repeat(values, pattern, **added))
    # broadcast axes grow a block only up to the target
    assert largest_block(y) <= max(largest_block(x), dask.utils.parse_bytes(limit))
    assert output_chunks_note(plan).startswith(f"dask output chunks {_dask._chunks_text(y.chunks)}:")


@pytest.mark.parametrize(("pattern", "shape", "chunks", "lengths"), [
    ("h w -> (h 2) (w 2)", (3, 4), (2, 3), {}),
    ("h w -> h w c", (3, 4), (1, 4), {"c": 3}),
    ("a b -> c a b", (0, 3), (1, 2), {"c": 2}),
    ("a b -> (c a) b", (0, 3), (1, 2), {"c": 2}),
    (" -> a b", (), (), {"a": 2, "b": 3}),
])
def test_repeat_examples_match_einops(pattern, shape, chunks, lengths) -> None:
    values = np.arange(math.prod(shape), dtype=np.float64).reshape(shape)
    y = lazily(ra.repeat, da.from_array(values, chunks=chunks), pattern, **lengths)
    expected = einops.repeat(values, pattern, **lengths)
    assert y.shape == expected.shape
    np.testing.assert_array_equal(compute(y), expected)


# ---------------------------------------------------------------------- pack, unpack, einsum

@pytest.mark.parametrize(("pattern", "shapes", "chunks"), [
    ("i j *", [(2, 3, 4), (2, 3), (2, 3, 2, 5)], [(1, 2, 3), (2, 1), (1, 3, 1, 2)]),
    ("* k", [(4, 6), (6,), (2, 3, 6)], [(3, 4), (5,), (1, 2, 3)]),
    ("b * c", [(2, 0, 3), (2, 3)], [(1, 1, 2), (2, 2)]),
])
def test_pack_and_unpack_match_numpy(pattern, shapes, chunks) -> None:
    arrays = [np.arange(math.prod(s), dtype=np.float32).reshape(s) + k for k, s in enumerate(shapes)]
    xs = [da.from_array(a, chunks=c) for a, c in zip(arrays, chunks)]
    with computing_refused():
        packed, packed_shapes = ra.pack(xs, pattern)
        unpacked = ra.unpack(packed, packed_shapes, pattern)
    expected, expected_shapes = ra.pack(arrays, pattern)
    assert isinstance(packed, da.Array) and packed_shapes == expected_shapes
    np.testing.assert_array_equal(compute(packed), expected)
    np.testing.assert_array_equal(compute(packed), einops.pack(arrays, pattern)[0])
    for got, original in zip(unpacked, arrays):
        assert isinstance(got, da.Array)
        np.testing.assert_array_equal(compute(got), original)


def test_einsum_with_compositions_matches_numpy() -> None:
    rng = np.random.default_rng(7)
    q, k = rng.standard_normal((2, 6, 8)), rng.standard_normal((2, 6, 8))
    xq, xk = da.from_array(q, chunks=(1, 4, 3)), da.from_array(k, chunks=(2, 3, 8))
    scores = lazily(ra.einsum, xq, xk, "b t (h d), b s (h d) -> b h t s", h=2)
    heads = lambda a: a.reshape(2, 6, 2, 4)   # noqa: E731 - (h d) split, h outer
    expected = np.einsum("bthd,bshd->bhts", heads(q), heads(k))
    np.testing.assert_allclose(compute(scores), expected, rtol=1e-12)


def test_parse_shape_and_check_shape_read_the_dask_shape() -> None:
    x = da.zeros((2, 3, 4), chunks=1)
    with computing_refused():
        assert ra.parse_shape(x, "b _ c") == {"b": 2, "c": 4}
        ra.check_shape(x, "b h w", b=2)


# ---------------------------------------------------------------------- explain

def test_explain_reports_chunks_and_rechunks() -> None:
    x = da.zeros((2, 8, 128, 64), dtype=np.float32, chunks=(1, 4, 64, 32))
    with computing_refused():
        plan = ra.explain(x, "b h t d -> b t (h d)")
    y = lazily(ra.rearrange, x, "b h t d -> b t (h d)")
    assert plan.notes[1] == ("dask input chunks (2x1, 2x4, 2x64, 2x32): 16 blocks, the largest "
                             "32 KiB; target 128 MiB a block (array.chunk-size)")
    # after the permute (b t h d), merging (h d) needs d whole; h chunked by 2 keeps the
    # input's 4 x 32 elements of (h d) a block
    assert "dask rechunk before step 3 (merge): dim 2 2x4 -> 4x2, dim 3 2x32 -> 64" in plan.notes
    by_hand = x.transpose(0, 2, 1, 3).rechunk({2: 2, 3: 64}).reshape(2, 128, 512)
    assert by_hand.chunks == y.chunks and has_rechunk(y)
    assert output_chunks_note(plan).startswith(f"dask output chunks {_dask._chunks_text(y.chunks)}:")
    assert all(step.kernel is None for step in plan.steps)   # dask copies, not our kernel
    assert "note     dask rechunk" in str(plan)
    assert plan.to_dict()["notes"] == list(plan.notes)


def test_explain_without_rechunk_says_so() -> None:
    x = da.zeros((4, 6, 8), chunks=(2, 6, 8))
    plan = ra.explain(x, "a b c -> a (b c)")
    assert any(note.startswith("dask no rechunk") for note in plan.notes)
    assert not has_rechunk(ra.rearrange(x, "a b c -> a (b c)"))


def test_explain_for_reduce_and_repeat_ops() -> None:
    x = da.zeros((4, 6), chunks=(2, 3))
    reduce_plan = ra.explain(x, "a b -> b", op="reduce", reduction="max")
    assert output_chunks_note(reduce_plan).startswith("dask output chunks (2x3,)")
    repeat_plan = ra.explain(x, "a b -> a b c", op="repeat", c=5)
    assert output_chunks_note(repeat_plan).startswith("dask output chunks (2x2, 2x3, 5)")


def test_backend_module_does_not_import_dask() -> None:
    code = ("import sys, array, rearrange as ra; from rearrange.backends import _dask;"
            "print(_dask.matches(array.array('d', [1.0])), 'dask' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip() == "False False", result.stderr


# ---------------------------------------------------------------------- out of core

OUT_OF_CORE = textwrap.dedent("""
    import json, os, sys, time
    import numpy as np, dask, dask.array as da
    import rearrange as ra

    B, H, T, D = 4, 16, 4096, 2048          # int32: 2 GiB in, 2 GiB out
    path = sys.argv[1]
    dask.config.set({"array.chunk-size": "16MiB", "scheduler": "synchronous"})

    def block(block_info=None):
        # x[b, h, t, d] = its flat C index, made block by block
        (b0, b1), (h0, h1), (t0, t1), (d0, d1) = block_info[None]["array-location"]
        b, h, t, d = (r.astype(np.int32) for r in np.ogrid[b0:b1, h0:h1, t0:t1, d0:d1])
        return ((b * H + h) * T + t) * D + d

    # 16 MiB blocks chunked along d too, so the merge (h d) must rechunk
    x = da.map_blocks(block, dtype=np.int32, chunks=((1,) * B, (4,) * 4, (1024,) * 4, (1024,) * 2))
    y = ra.rearrange(x, "b h t d -> b t (h d)")

    class FileStore:
        # rows written with pwrite: a memmap's written pages would count in this
        # process's resident set while mapped, hiding what the computation holds
        shape, dtype, ndim = y.shape, y.dtype, y.ndim

        def __setitem__(self, key, value):
            value = np.ascontiguousarray(value)
            b0, t0, c0 = (k.start or 0 for k in key)
            fd = os.open(path, os.O_WRONLY)
            try:
                for i in range(value.shape[0]):
                    for j in range(value.shape[1]):
                        row = ((b0 + i) * self.shape[1] + t0 + j) * self.shape[2] + c0
                        os.pwrite(fd, memoryview(value[i, j]), row * value.itemsize)
            finally:
                os.close(fd)

    def peak_rss():
        # VmHWM: this process image's own high-water mark. (getrusage's ru_maxrss would
        # also count the pytest process this one was forked from, whose peak exec keeps.)
        with open("/proc/self/status") as status:
            line = next(line for line in status if line.startswith("VmHWM:"))
        return int(line.split()[1]) * 1024

    with open(path, "wb") as f:
        f.truncate(y.nbytes)
    start = time.perf_counter()
    da.store(y, FileStore(), lock=False)
    seconds = time.perf_counter() - start
    print(json.dumps({
        "bytes": int(y.nbytes), "seconds": seconds,
        "peak_rss": peak_rss(),
        "largest_block": max(y.chunks[0]) * max(y.chunks[1]) * max(y.chunks[2]) * y.dtype.itemsize,
        "notes": list(ra.explain(x, "b h t d -> b t (h d)").notes),
    }))
""")


@pytest.mark.slow
def test_out_of_core_transposed_merge_stays_far_below_the_array_size(tmp_path) -> None:
    """A 2 GiB lazy array, rearranged 'b h t d -> b t (h d)' and stored block by block
    into a file: the process's peak memory stays under a quarter of the array (measured:
    about 115 MiB, of which 50 MiB is Python, numpy and dask). The synchronous scheduler
    makes the peak deterministic; with threads it depends on timing (about 200 MiB)."""
    path = tmp_path / "out.int32"
    repo = pathlib.Path(ra.__file__).resolve().parent.parent
    env = {"PYTHONPATH": str(repo), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}
    try:
        result = subprocess.run([sys.executable, "-c", OUT_OF_CORE, str(path)], env=env,
                                capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr
        report = json.loads(result.stdout)
        print(json.dumps({k: v for k, v in report.items() if k != "notes"}))
        assert report["bytes"] == 2 * 1024**3
        assert report["peak_rss"] < report["bytes"] / 4, report
        assert report["largest_block"] <= 16 * 1024**2
        assert any(note.startswith("dask rechunk") for note in report["notes"])

        B, H, T, D = 4, 16, 4096, 2048
        out = np.memmap(path, dtype=np.int32, mode="r", shape=(B, T, H * D))
        for b, t0 in ((0, 0), (1, 1021), (3, 4090)):
            h, t, d = np.ogrid[0:H, t0:t0 + 6, 0:D]
            source = ((b * H + h) * T + t) * D + d            # x[b, :, t0:t0+6, :]
            expected = source.transpose(1, 0, 2).reshape(6, H * D)
            np.testing.assert_array_equal(out[b, t0:t0 + 6], expected)
        del out
    finally:
        path.unlink(missing_ok=True)
