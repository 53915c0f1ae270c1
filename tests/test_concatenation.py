"""Concatenation, split and diagonals in ``rearrange`` (issue #38), against einx 0.4.3
on numpy and torch, numpy's own calls, and torch's."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import rearrange as ra
from rearrange import NoViewError, PatternError
from rearrange.concatenation import plan_notation

einx = pytest.importorskip("einx")


def einx_rearrange(pattern, *xs, **lengths):
    with warnings.catch_warnings():    # einx deprecates rearrange for einx.id
        warnings.simplefilter("ignore", DeprecationWarning)
        return einx.rearrange(pattern, *xs, **lengths)


def ours(pattern, *xs, **lengths):
    return ra.rearrange(xs if len(xs) > 1 or "," in pattern.split("->")[0] else xs[0],
                        pattern, **lengths)


def assert_same(result, expected):
    if isinstance(expected, tuple):
        assert isinstance(result, tuple) and len(result) == len(expected)
        for r, e in zip(result, expected):
            assert_same(r, e)
        return
    r, e = np.asarray(result), np.asarray(expected)
    assert r.shape == e.shape and r.dtype == e.dtype
    np.testing.assert_array_equal(r, e)



def _spy_on_kernel_jobs(monkeypatch) -> tuple[list, list]:
    """(calls, jobs): the source shapes of each ``kernel.copy_parts_into`` call and the
    part count of each job the kernel's pool runs (``kernel.execute_parts``), recorded
    while both still run."""
    from rearrange import kernel

    calls: list = []
    jobs: list = []
    original, execute_parts = kernel.copy_parts_into, kernel.execute_parts
    monkeypatch.setattr(kernel, "copy_parts_into",
                        lambda pairs: (calls.append([src.shape for _, src in pairs]),
                                       original(pairs)))
    monkeypatch.setattr(kernel, "execute_parts",
                        lambda parts, *rest: (jobs.append(len(parts)),
                                              execute_parts(parts, *rest)))
    return calls, jobs


def arange(*shape, dtype=np.float32):
    return np.arange(np.prod(shape, dtype=int), dtype=dtype).reshape(shape)


# einx's documented examples (docs: "einx.rearrange"), and ours in the same spirit
EXAMPLES = [
    ("a b, a c -> a (b + c)", [(4, 2), (4, 3)], {}),
    ("a, b -> (a + b)", [(3,), (5,)], {}),
    ("a b c1, a b c2 -> a b (c1 + c2)", [(2, 3, 4), (2, 3, 5)], {}),
    ("b c1 t, b t c2 -> b t (c1 + c2)", [(2, 3, 4), (2, 4, 5)], {}),
    ("a b, a b -> (1 + 1) a b", [(2, 3), (2, 3)], {}),
    ("a b, a c -> (b + c) a", [(4, 2), (4, 3)], {}),
    ("a b, a b -> a (b + b)", [(2, 3), (2, 3)], {}),
    ("a b, c -> a (b + c)", [(2, 3), (4,)], {}),            # the second is broadcast
    ("h w c, h w -> h w (c + 1)", [(2, 3, 3), (2, 3)], {}),
    ("a (b + c) -> a b, a c", [(3, 7)], {"b": 2}),
    ("a b (c1 + c2) -> a b c1, a b c2", [(2, 3, 9)], {"c1": 4}),
    ("(a + b) c -> c a, b c", [(5, 3)], {"a": 2}),
    ("a (b + c) -> (a b), c a", [(3, 7)], {"b": 2}),
    ("a a -> a", [(4, 4)], {}),
    ("b i i -> b i", [(2, 3, 3)], {}),
    ("a b a -> b a", [(3, 2, 3)], {}),
    ("(a b) a -> a b", [(6, 3)], {"b": 2}),
    ("... a a -> ... a", [(2, 2, 3, 3)], {}),
    ("... c1, ... c2 -> ... (c1 + c2)", [(2, 3, 1), (2, 3, 2)], {}),
]


@pytest.mark.parametrize("pattern,shapes,lengths", EXAMPLES)
def test_matches_einx_on_numpy(pattern, shapes, lengths):
    xs = [arange(*s) + 100 * k for k, s in enumerate(shapes)]
    assert_same(ours(pattern, *xs, **lengths), einx_rearrange(pattern, *xs, **lengths))


@pytest.mark.parametrize("pattern,shapes,lengths", EXAMPLES)
def test_matches_einx_on_torch(pattern, shapes, lengths):
    torch = pytest.importorskip("torch")
    xs = [torch.arange(float(np.prod(s))).reshape(s) + 100 * k for k, s in enumerate(shapes)]
    result = ours(pattern, *xs, **lengths)
    expected = einx_rearrange(pattern, *xs, **lengths)
    assert_same(tuple(r.numpy() for r in result) if isinstance(result, tuple) else result.numpy(),
                tuple(e.numpy() for e in expected) if isinstance(expected, tuple)
                else expected.numpy())


def test_list_without_comma_keeps_einops_meaning():
    xs = [arange(2, 3), arange(2, 3) + 1]
    assert_same(ra.rearrange(xs, "n a b -> a (n b)"), np.stack(xs).transpose(1, 0, 2)
                .reshape(2, 6))


# --------------------------------------------------------------------------- views


def test_split_returns_views():
    z = arange(2, 3, 9)
    a, b = ra.rearrange(z, "a b (c1 + c2) -> a b c1, a b c2", c1=4)
    assert np.shares_memory(a, z) and np.shares_memory(b, z)
    assert_same(a, z[..., :4])
    assert_same(b, z[..., 4:])


def test_split_rearranged_output_copies_where_no_view():
    z = arange(3, 7)
    merged, moved = ra.rearrange(z, "a (b + c) -> (b a), c a", b=2)
    assert not np.shares_memory(merged, z)       # (b a) of a slice: no strides express it
    assert np.shares_memory(moved, z)
    assert_same(merged, z[:, :2].T.reshape(-1))


@pytest.mark.parametrize("pattern,shape,expected", [
    ("a a -> a", (4, 4), lambda x: np.diagonal(x)),
    ("b i i -> b i", (2, 3, 3), lambda x: np.diagonal(x, 0, 1, 2)),
    ("a b a -> b a", (3, 2, 3), lambda x: np.diagonal(x, 0, 0, 2)),
])
def test_diagonal_is_a_view(pattern, shape, expected):
    x = arange(*shape)
    result = ra.rearrange(x, pattern)
    assert np.shares_memory(result, x)
    assert_same(result, expected(x))
    for k, stride in enumerate(result.strides):    # one stride per axis: a strided view
        assert stride in {sum(x.strides[j] for j in range(x.ndim)
                              if j in _positions(pattern, k))}


def _positions(pattern, k):
    left, right = pattern.split(" -> ")
    names = left.split()
    return [j for j, name in enumerate(names) if name == right.split()[k]]


def test_diagonal_lengths_must_agree():
    with pytest.raises(PatternError, match="'a'"):
        ra.rearrange(arange(3, 4), "a a -> a")


def test_diagonal_on_torch_is_a_view_and_differentiable():
    torch = pytest.importorskip("torch")
    x = torch.arange(18.0).reshape(2, 3, 3).requires_grad_()
    d = ra.rearrange(x, "b i i -> b i")
    assert d._base is not None
    assert torch.equal(d, torch.diagonal(x, 0, 1, 2))
    d.sum().backward()
    assert torch.equal(x.grad, torch.eye(3).expand(2, 3, 3))


# --------------------------------------------------------------------------- layouts


def memory_order(array):
    """The axes longer than 1, outermost in memory first (by |stride|, numpy's rule)."""
    return tuple(sorted((k for k in range(array.ndim) if array.shape[k] > 1),
                        key=lambda k: -abs(array.strides[k])))


LAYOUT_KINDS = ["c", "f", "slice", "flip", "broadcast", "transposed-copy"]
LAYOUT_DTYPES = [np.float32, np.float64, np.int32, np.int16]


@st.composite
def layouts(draw):
    """Two inputs 'a b', 'a c' of any layout each (C or F order, step slices, negative
    strides, broadcast, lengths 0 and 1; orders mixed between them) and dtypes that
    promote."""
    a = draw(st.sampled_from([0, 1, 2, 3, 5]))
    b = draw(st.sampled_from([1, 2, 4, 5]))
    c = draw(st.sampled_from([1, 2, 3]))
    arrays = []
    for k, n in enumerate((b, c)):
        kind = draw(st.sampled_from(LAYOUT_KINDS))
        dtype = draw(st.sampled_from(LAYOUT_DTYPES))
        base = arange(a, n, dtype=dtype) + 100 * k
        if kind == "f":
            base = np.asfortranarray(base)
        elif kind == "slice":
            base = (arange(a, 2 * n, dtype=dtype) + 100 * k)[:, ::2]
        elif kind == "flip":
            base = (arange(a, n, dtype=dtype) + 100 * k)[::-1, ::-1]
        elif kind == "broadcast":
            base = np.broadcast_to(arange(1, n, dtype=dtype) + 100 * k, (a, n))
        elif kind == "transposed-copy":
            base = np.ascontiguousarray(base.T).T
        arrays.append(base)
    pattern = draw(st.sampled_from(sorted(NUMPY_ORACLES)))
    return pattern, arrays


NUMPY_ORACLES = {
    "a b, a c -> a (b + c)": lambda x, y: np.concatenate([x, y], axis=1),
    "a b, a c -> (b + c) a": lambda x, y: np.concatenate([x.T, y.T]),
    "a b, a c -> 1 a (b + c)": lambda x, y: np.concatenate([x, y], axis=1)[None],
    "a b, a c -> (b + c) (a 1)": lambda x, y: np.concatenate([x.T, y.T]),
    "a b, a c -> (b + c) 1 a": lambda x, y: np.concatenate([x.T, y.T])[:, None],
}


def check_layout(pattern, arrays, result, expected):
    """The plan's layout: where it says the inputs agree, numpy's concatenate (order
    'K') lays its result out the same way; else the result is C-contiguous."""
    layout = ra.explain(list(arrays), pattern).layouts[0]
    if layout.is_c_order:
        assert result.flags.c_contiguous, layout
    else:
        assert layout.reason.startswith("as the inputs are laid out"), layout
    if "inputs are laid out" in layout.reason:
        assert memory_order(result) == memory_order(expected), (layout, expected.strides)
    return layout


@settings(max_examples=80, deadline=None)
@given(layouts())
def test_layouts_match_einx_and_numpy_and_inputs_untouched(case):
    pattern, arrays = case
    before = [a.copy() for a in arrays]
    result = ra.rearrange(arrays, pattern)
    expected = NUMPY_ORACLES[pattern](*arrays)
    assert_same(result, expected)
    check_layout(pattern, arrays, result, expected)
    assert not any(np.shares_memory(result, a) for a in arrays)
    if 0 not in arrays[0].shape:        # (einx cannot size an axis of length 0)
        assert_same(result, einx_rearrange(pattern, *arrays))
    for a, b in zip(arrays, before):
        assert_same(a, b)


@pytest.mark.parametrize("pattern, shapes, view, oracle, order", [
    # C-ordered inputs: the output laid out as they are (numpy's concatenate of the
    # transposes is Fortran-ordered: rows of each input into gapped rows, or blocks)
    ("a b, a c -> (b + c) a", [(4, 6), (4, 3)], lambda x: x,
     lambda x, y: np.concatenate([x.T, y.T]), (1, 0)),
    ("b a, c a -> a (b + c)", [(6, 4), (3, 4)], lambda x: x,
     lambda x, y: np.concatenate([x.T, y.T], 1), (1, 0)),
    ("h w c1, h w c2 -> (c1 + c2) h w", [(3, 5, 2), (3, 5, 4)],
     lambda x: x, lambda x, y: np.concatenate([x.transpose(2, 0, 1),
                                               y.transpose(2, 0, 1)]), (1, 2, 0)),
    # a part 1 long along an axis does not vote there (numpy skips it too)
    ("a b, a -> (b + 1) a", [(4, 6), (4,)], lambda x: x,
     lambda x, y: np.concatenate([x.T, y[None]]), (1, 0)),
    # Fortran-ordered inputs into an output in their order: C order
    ("a b, a c -> (b + c) a", [(4, 6), (4, 3)], np.asfortranarray,
     lambda x, y: np.concatenate([x.T, y.T]), (0, 1)),
    # inputs that disagree: C order
    ("a b, a c -> (b + c) a", [(4, 6), (4, 3)], None,
     lambda x, y: np.concatenate([x.T, y.T]), (0, 1)),
])
def test_the_output_is_laid_out_as_its_inputs_are(pattern, shapes, view, oracle, order):
    if view is None:            # the first C-ordered, the second Fortran-ordered
        arrays = [arange(*shapes[0]), np.asfortranarray(arange(*shapes[1]) + 100)]
    else:
        arrays = [view(arange(*s) + 100 * k) for k, s in enumerate(shapes)]
    result = ra.rearrange(arrays, pattern)
    expected = oracle(*arrays)
    assert_same(result, expected)
    plan = ra.explain(arrays, pattern)
    assert plan.layouts[0].order == order
    assert memory_order(result) == order
    if view is not None:        # agreeing inputs: numpy's concatenate agrees
        assert memory_order(result) == memory_order(expected)
    assert result.strides == tuple(s * result.itemsize for s in plan.output_strides(0))


@pytest.mark.parametrize("arrays, pattern, reason", [
    ([arange(1, 4), arange(1, 3)], "a b, a c -> (b + c) a",
     "at most one axis longer than 1"),
    ([np.broadcast_to(arange(4), (3, 4)), arange(3, 2)], "a b, a c -> (b + c) a",
     "broadcast"),
    ([arange(3, 4), arange(2)], "a b, c -> (b + c) a", "part 1 is broadcast"),
    ([arange(3, 3), arange(3, 2)], "a a, a c -> (1 + c) a", "diagonal"),
    ([arange(0, 4), arange(0, 2)], "a b, a c -> (b + c) a", "an empty output"),
    ([arange(3, 4), np.asfortranarray(arange(3, 2))], "a b, a c -> (b + c) a",
     "disagree"),
])
def test_ambiguous_or_disagreeing_layouts_keep_c_order(arrays, pattern, reason):
    """Axes of length 1, broadcast parts, diagonals, empty outputs and inputs that
    disagree: C order, and the plan says why."""
    plan = ra.explain(arrays, pattern)
    layout = plan.layouts[0]
    assert layout.is_c_order and re.search(reason, layout.reason), layout
    result = ra.rearrange(arrays, pattern)
    assert result.flags.c_contiguous
    assert "layout: C order (" in str(plan)


class Tagged(np.ndarray):
    """A numpy subclass (as astropy's or xarray's arrays are)."""


def test_subclass_inputs_are_copied_as_plain_arrays_in_their_layout():
    x, y = arange(300, 200).view(Tagged), arange(300, 100).view(Tagged)
    result = ra.rearrange((x, y), "a b, a c -> (b + c) a")
    expected = np.concatenate([np.asarray(x).T, np.asarray(y).T])
    assert_same(result, expected)
    assert type(result) is np.ndarray and result.strides == expected.strides


def test_an_empty_part_does_not_vote():
    x, y = arange(2, 0), arange(2, 3)
    plan = ra.explain([x, y], "a b, a c -> (b + c) a")
    assert plan.layouts[0].order == (1, 0)
    result = ra.rearrange([x, y], "a b, a c -> (b + c) a")
    assert_same(result, np.concatenate([x.T, y.T]))
    assert memory_order(result) == (1, 0)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(layouts(), st.sampled_from([8, 40])), min_size=4, max_size=10))
def test_the_plan_cache_keeps_layouts_and_dtypes_apart(calls):
    """A state-holding run: the plan cache is never cleared while layouts, dtypes and
    sizes alternate on the same patterns; every call equals numpy's, laid out as the
    plan says, and (scaled up) some reach the kernel's copies."""
    for (pattern, arrays), scale in calls:
        if scale > 8:
            arrays = [np.repeat(a, scale, axis=0) for a in arrays]
        result = ra.rearrange(arrays, pattern)
        expected = NUMPY_ORACLES[pattern](*arrays)
        assert_same(result, expected)
        check_layout(pattern, arrays, result, expected)


@pytest.mark.parametrize("n", [8, 700])       # both sides of the kernel's threshold
@pytest.mark.parametrize("pattern,numpy", [
    ("a b, a c -> (b + c) a", lambda x, y: np.concatenate([x.T, y.T])),
    ("a b, a c -> a (b + c)", lambda x, y: np.concatenate([x, y], axis=1)),
    ("b a, c a -> a (b + c)", lambda x, y: np.concatenate([x.T, y.T], axis=1)),
    ("a b, a b -> (1 + 1) b a", lambda x, y: np.stack([x.T, y.T])),
])
def test_kernel_threshold(n, pattern, numpy):
    from rearrange.kernel import wait

    x, y = arange(n, n), arange(n, n) * 2
    ra.rearrange((x, y), pattern)
    wait(120)
    assert_same(ra.rearrange((x, y), pattern), numpy(x, y))
    assert_same(ra.rearrange((x, y), pattern), numpy(x, y))   # the cached runner


@pytest.mark.parametrize("rows, kernel_copies", [(67, 0), (1031, 2)])
def test_the_kernel_copies_parts_from_its_threshold_on(rows, kernel_copies, two_threads,
                                                       monkeypatch):
    """Both sides of the kernel's thresholds for a part (rows into gapped rows): below,
    numpy's copyto and no kernel call; above, one kernel copy per part, all in one job
    of the kernel. The same result either way, laid out as numpy's concatenate lays it
    out. (Shapes no other test uses: the lowering, cached, holds the copy function it
    found.)"""
    x, y = arange(rows, 1283), arange(rows, 509) + 7
    calls, jobs = _spy_on_kernel_jobs(monkeypatch)
    result = ra.rearrange((x, y), "a b, a c -> (b + c) a")
    expected = np.concatenate([x.T, y.T])
    assert_same(result, expected)
    assert result.strides == expected.strides
    assert calls == ([[(rows, 1283), (rows, 509)]] if kernel_copies else [])
    assert jobs == ([kernel_copies] if kernel_copies else [])
    copiers = [part.copier for part in ra.explain([x, y], "a b, a c -> (b + c) a").parts]
    assert copiers == (["kernel"] * 2 if kernel_copies else ["numpy"] * 2)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("pattern, inputs, numpy", [
    # two parts the kernel takes (rows into gapped rows, at two threads), one under its
    # thresholds, one of another dtype (promoted: numpy's copyto casts it)
    ("a b, a c, a d, a e -> (b + c + d + e) a",
     lambda a: [((a, 512), np.float64), ((a, 384), np.float64), ((a, 3), np.float64),
                ((a, 40), np.float32)],
     lambda *xs: np.concatenate([x.T for x in xs])),
    # inputs that disagree: a C-ordered output, the first part a transpose (the kernel's
    # at any thread count), the second one block (numpy's memcpy on one thread)
    ("a b, c a -> (b + c) a", lambda a: [((a // 4, 700), np.float32),
                                        ((1100, a // 4), np.float32)],
     lambda x, y: np.concatenate([x.T, y])),
    # many parts of different sizes, each one block of a C-ordered output
    ("b a, c a, d a, e a, f a -> (b + c + d + e + f) a",
     lambda a: [((n, a // 2), np.float32) for n in (1500, 700, 2, 2100, 33)],
     lambda *xs: np.concatenate(xs)),
], ids=["rows-mixed", "transpose-and-block", "many-blocks"])
def test_the_parts_the_kernel_copies_are_one_job(pattern, inputs, numpy, threads,
                                                 monkeypatch):
    """The parts explain gives the kernel go to it in one call, those its rules take
    copied in one job (one fork-join of its threads: a lone part is a plain copy), the
    others by numpy's copy, each part once; the result is numpy's concatenate's and
    einx's, in numpy's memory order, the inputs untouched. (Shapes of their own per
    thread count: a concatenation's lowering, cached, holds the copy function it
    found.)"""
    from rearrange import kernel

    monkeypatch.setattr(kernel.threads, "_num_threads", threads)
    inputs = inputs(2048 + 4 * threads)
    rng = np.random.default_rng(len(inputs))
    arrays = [rng.random(shape).astype(dtype) for shape, dtype in inputs]
    before = [a.copy() for a in arrays]
    dtype = np.result_type(*arrays)
    plan = ra.explain(arrays, pattern)
    kernel_parts = [(part.leaf_shape, arrays[k].dtype) for k, part in enumerate(plan.parts)
                    if part.copier == "kernel" and arrays[k].dtype == dtype]
    staged = [part for part in plan.parts if part.copier == "staged"]
    assert not staged
    calls, jobs = _spy_on_kernel_jobs(monkeypatch)
    lone = []
    execute = kernel.execute
    monkeypatch.setattr(kernel, "execute",
                        lambda *args: (lone.append(args[2]), execute(*args)))
    got = ra.rearrange(arrays, pattern)
    expected = numpy(*arrays)
    assert_same(got, expected)
    assert_same(got, einx_rearrange(pattern, *arrays))
    if not pattern.startswith("a b, c a"):      # (inputs that disagree: C order)
        assert got.strides == expected.strides  # numpy's memory order
    for a, b in zip(arrays, before):
        np.testing.assert_array_equal(a, b)
    # (each part copied in its slice's memory order: compared by size)
    copied = [int(np.prod(shape)) for shape, _ in kernel_parts]
    assert [[int(np.prod(s)) for s in call] for call in calls] == \
        ([copied] if copied else [])
    # The kernel's rules (copy_into's) decide which of those it copies: all of them in
    # one run, a job (or a lone copy when it takes one).
    taken = sum(jobs) + len(lone)
    assert len(jobs) + len(lone) == (1 if taken else 0) and len(lone) <= 1
    assert taken == {"a b, a c": (0, 2), "a b, c a": (1, 2), "b a, c a": (0, 3)}[
        pattern[:8]][threads - 1]       # at one thread rows and memcpys are numpy's


def test_dtypes_promote_as_numpy():
    x, y = arange(2, 3, dtype=np.int32), arange(2, 2, dtype=np.float64)
    assert_same(ra.rearrange((x, y), "a b, a c -> a (b + c)"),
                np.concatenate([x, y], axis=1))


def test_copy_false_refuses_a_concatenation():
    with pytest.raises(NoViewError):
        ra.rearrange((arange(2, 3), arange(2, 3)), "a b, a c -> a (b + c)", copy=False)


def test_copy_true_copies_a_split():
    z = arange(3, 7)
    a, b = ra.rearrange(z, "a (b + c) -> a b, a c", b=2, copy=True)
    assert not np.shares_memory(a, z) and not np.shares_memory(b, z)


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize("call,match", [
    (lambda: ra.rearrange(arange(2, 4), "a (b + c) -> (b + c) a", b=1), "both sides"),
    (lambda: ra.rearrange((arange(2, 3), arange(3, 3)), "a b, a c -> a (b + c)"),
     "'a' has length 3 here and 2"),
    (lambda: ra.rearrange((arange(2, 3), arange(2, 3), arange(2, 3)),
                          "a b, a c -> a (b + c)"), "2 input expressions.*got 3"),
    (lambda: ra.rearrange(arange(2, 3), "a b, a c -> a (b + c)"), "one per array"),
    (lambda: ra.rearrange(arange(2, 7), "a (b + c) -> a b, a c", b=8), "shorter"),
    (lambda: ra.rearrange((arange(2, 3), arange(2, 3)), "a b, a c -> a (c + b)"),
     "lacks 'b'"),
    (lambda: ra.rearrange(arange(2, 3), "a b -> a (b + 1)"), "1 piece and the outputs 2 parts"),
    (lambda: ra.rearrange(arange(3), "a -> a a"), "twice"),
    (lambda: ra.rearrange(arange(2, 3), "a [b] -> a, b"), "brackets"),
    (lambda: ra.rearrange((arange(2, 3),) * 2, "a b, a c"), "'->'"),
    (lambda: ra.rearrange(arange(2, 3), "a (b + c) -> a b, a c"), "no length|determine"),
])
def test_errors_are_pattern_errors_with_a_caret(call, match):
    with pytest.raises(PatternError, match=match) as info:
        call()
    assert "^" in str(info.value)


@pytest.mark.parametrize("length", [2.5, True, -1, "2"])
def test_bad_lengths_are_pattern_errors(length):
    with pytest.raises(PatternError, match=f"b={length!r}"):
        ra.rearrange(arange(3, 7), "a (b + c) -> a b, a c", b=length)


def test_rearrange_tensor_is_refused_clearly():
    with pytest.raises(ra.ArgumentTypeError, match="rearrange.Tensor"):
        ra.rearrange(ra.arange(9).view(3, 3), "a a -> a")


def test_wrong_types_are_argument_type_errors():
    with pytest.raises(ra.ArgumentTypeError):
        ra.rearrange((arange(2, 3), "x"), "a b, a c -> a (b + c)")
    with pytest.raises(ra.ArgumentTypeError):
        ra.rearrange((arange(2, 3), arange(2, 3)), "a b, a c -> a (b + c)", out=arange(2, 6))


# --------------------------------------------------------------------------- explain


def test_explain_concatenation_of_two_transposes(two_threads):
    plan = ra.explain([(1024, 2048), (1024, 2048)], "a b, a c -> (b + c) a", dtype="float32")
    text = str(plan)
    assert "one new array, one copy per part" in text
    assert ("layout: axes 1, 0 outermost first (as the inputs are laid out: numpy's "
            "concatenate, order 'K'): a view of a new (1024, 4096) array, strides (1, 4096)"
            in text)
    assert text.count("a copy by the kernel (inner-contiguous, into rows with gaps)") == 2
    assert plan.layouts[0].order == (1, 0) and plan.output_strides(0) == (1, 4096)
    assert [p.copier for p in plan.parts] == ["kernel", "kernel"]
    assert not plan.is_view


def test_explain_inner_concatenation_names_its_copies(two_threads):
    plan = ra.explain([(2048, 1024), (2048, 1024)], "b a, c a -> a (b + c)")
    assert str(plan).count("a copy by the kernel (contiguous-memcpy)") == 2
    assert plan.layouts[0].order == (1, 0)
    text = str(ra.explain([(1024, 2048), (1024, 2048)], "a b, a c -> a (b + c)"))
    assert "layout: C order (the inputs are laid out in it)" in text
    assert text.count("a copy by the kernel (inner-contiguous, into rows with gaps)") == 2
    # inputs that disagree: C order; the transposed one goes through a buffer
    plan = ra.explain([(2048, 1024), (2048, 1024)], "b a, c a -> a (b + c)",
                      strides=[(1024, 1), (1, 2048)])
    assert plan.layouts[0].is_c_order and "disagree" in plan.layouts[0].reason
    assert [p.copier for p in plan.parts] == ["staged", "kernel"]
    text = str(plan)
    assert "the kernel (tiled-transpose) into a buffer, then its rows" in text
    # small: numpy's copy, below the kernel's threshold
    plan = ra.explain([(64, 32), (64, 32)], "a b, a c -> (b + c) a")
    assert [p.copier for p in plan.parts] == ["numpy", "numpy"]


def test_explain_diagonal_and_split_as_views():
    plan = ra.explain((3, 3), "a a -> a")
    assert "the diagonal" in str(plan) and plan.is_view
    plan = ra.explain((4, 6), "a (b + c) -> a b, c a", b=2)
    assert plan.is_view and str(plan).count(": view") == 4


def test_plan_is_pure_and_frozen():
    first = plan_notation("a b, a c -> (b + c) a", [(4, 2), (4, 3)], [(2, 1), (1, 4)],
                          "float32", 4)
    second = plan_notation("a b, a c -> (b + c) a", [(4, 2), (4, 3)], [(2, 1), (1, 4)],
                           "float32", 4)
    assert first == second
    with pytest.raises(AttributeError):
        first.pattern = "x"     # type: ignore[misc]


# --------------------------------------------------------------------------- torch


def test_torch_autograd_matches_einx():
    torch = pytest.importorskip("torch")
    x = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    y = torch.randn(4, 2, dtype=torch.float64, requires_grad=True)
    torch.autograd.gradcheck(lambda x, y: ra.rearrange((x, y), "a b, a c -> (b + c) a"),
                             (x, y))
    r = ra.rearrange((x, y), "a b, a c -> (b + c) a")
    assert torch.equal(r, einx_rearrange("a b, a c -> (b + c) a", x, y))


def test_torch_eager_writes_into_one_output():
    torch = pytest.importorskip("torch")
    x, y = torch.randn(300, 200), torch.randn(300, 100)
    r = ra.rearrange((x, y), "a b, a c -> (b + c) a")
    assert r.is_contiguous() and torch.equal(r, torch.cat([x.T, y.T]))
    r = ra.rearrange((x.T, y.T), "b a, c a -> a (b + c)")
    assert torch.equal(r, torch.cat([x, y], 1))


def test_torch_compile_dynamic_fullgraph():
    torch = pytest.importorskip("torch")

    def f(x, y, z):
        joined = ra.rearrange((x, y), "a b, a c -> a (b + c)")
        first, second = ra.rearrange(joined, "a (b + c) -> a b, c a", b=2)
        return first.sum(1) + second.sum(0) + ra.rearrange(z, "a a -> a")

    torch._dynamo.reset()
    compiled = torch.compile(f, dynamic=True, fullgraph=True)
    with torch._dynamo.config.patch(error_on_recompile=True):     # one graph, all sizes
        for n in (3, 5, 8, 3000):
            x, y, z = torch.randn(n, 2), torch.randn(n, 4), torch.randn(n, n)
            torch.testing.assert_close(compiled(x, y, z), f(x, y, z))


def test_torch_export_dynamic():
    torch = pytest.importorskip("torch")

    class Model(torch.nn.Module):
        def forward(self, x, y, z):
            joined = ra.rearrange((x, y), "a b, a c -> (b + c) a")
            return joined.sum(0) + ra.rearrange(z, "a a -> a")

    a = torch.export.Dim("a")
    program = torch.export.export(
        Model(), (torch.randn(4, 2), torch.randn(4, 3), torch.randn(4, 4)),
        dynamic_shapes=({0: a}, {0: a}, {0: a, 1: a}))
    x, y, z = torch.randn(6, 2), torch.randn(6, 3), torch.randn(6, 6)
    torch.testing.assert_close(program.module()(x, y, z), Model()(x, y, z))


# --------------------------------------------------------------------------- dask, jax


def test_dask_and_jax():
    da = pytest.importorskip("dask.array")
    x, y = arange(3, 4), arange(3, 2)
    result = ra.rearrange((da.from_array(x, chunks=2), da.from_array(y, chunks=2)),
                          "a b, a c -> (b + c) a")
    assert_same(result.compute(), np.concatenate([x.T, y.T]))
    assert_same(ra.rearrange(da.from_array(arange(3, 3)), "a a -> a").compute(),
                np.diagonal(arange(3, 3)))
    jnp = pytest.importorskip("jax.numpy")
    result = ra.rearrange((jnp.asarray(x), jnp.asarray(y)), "a b, a c -> a (b + c)")
    assert_same(np.asarray(result), np.concatenate([x, y], axis=1))


# --------------------------------------------------------------------------- docs


def _section(marker: str) -> str:
    text = (Path(__file__).parent.parent / "docs" / "notation.md").read_text()
    start = text.index(f"<!-- section: {marker} -->")
    end = text.find("<!-- section:", start + 1)
    return text[start:end]


def test_docs_examples_run():
    section = _section("concatenation, split and diagonals")
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert blocks
    for block in blocks:
        exec(compile(block, "docs/notation.md", "exec"), {})
