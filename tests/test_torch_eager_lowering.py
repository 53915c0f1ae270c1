"""The eager torch lowering's shortcuts give einops' results, and are taken where they may.

* reductions reduce the split input in place (no permute first) when the plan's permute
  only moves the reduced axes last; min/max/any/all over non-adjacent dims go one dim at
  a time where nothing differentiates;
* a view of several ops is one ``as_strided`` where autograd, tracing and functorch
  transforms do not watch, the view ops otherwise;
* a two-input einsum that is a batched matrix product runs as ``torch.matmul``.

Results are compared with einops (values, dtype, shape, memory shared or not) and with
the plan's own torch source (strides); which torch functions ran is read with a
``TorchFunctionMode``, so each shortcut's test fails when the shortcut is gone.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
einops = pytest.importorskip("einops")

from torch.overrides import TorchFunctionMode  # noqa: E402

import rearrange as ra  # noqa: E402
from rearrange import contraction  # noqa: E402


# The metadata reads of the fronts' cache keys and checks: not operations.
_QUERIES = frozenset({"__get__", "stride", "size", "dim", "element_size", "is_floating_point",
                      "is_complex", "is_conj", "is_neg", "storage_offset"})


class _Calls(TorchFunctionMode):
    """The names of the torch functions and Tensor methods called (metadata reads left
    out)."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", str(func))
        if name not in _QUERIES:
            self.names.append(name)
        return func(*args, **(kwargs or {}))


def calls_of(fn, *args, **kwargs) -> tuple[object, list[str]]:
    with _Calls() as mode:
        result = fn(*args, **kwargs)
    return result, mode.names


def same_storage(a, b) -> bool:
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def layouts(shape: tuple[int, ...], dtype=torch.float32) -> list[tuple[str, object]]:
    """The same values in different memory: contiguous, from a transpose, from a slice
    with steps (and a storage offset)."""
    numel = 1
    for n in shape:
        numel *= n
    base = (torch.arange(numel) % 7 - 3).reshape(shape)
    if dtype == torch.bool:
        base = base > 0
    else:
        base = base.to(dtype)
    if dtype.is_floating_point:
        base = base + torch.linspace(0, 0.5, numel).reshape(shape).to(dtype)  # few ties
    out = [("contiguous", base)]
    if len(shape) >= 2:
        out.append(("transposed", base.transpose(0, -1).contiguous().transpose(0, -1)))
    big = torch.zeros([2 * n + 1 for n in shape], dtype=dtype)
    index = tuple(slice(1, 1 + 2 * n, 2) for n in shape)
    big[index] = base
    out.append(("stepped", big[index]))
    return out


def torch_source_result(x, plan):
    """The plan's own torch calls, evaluated: the layout the eager ops give."""
    return eval(plan.to_source("torch"), {"torch": torch, "reduction": None}, {"x": x})


# ---------------------------------------------------------------------- reductions

REDUCE_CASES = [
    ("b h t d -> b t d", (2, 3, 4, 5), {}),
    ("b c (h 2) (w 2) -> b c h w", (2, 3, 4, 6), {}),
    ("b h t d -> b (t d)", (2, 3, 4, 5), {}),
    ("a b c -> c", (3, 4, 5), {}),
    ("a b c -> a", (3, 4, 5), {}),
    ("(a 2) b -> b", (4, 3), {}),
    ("a b c -> a c", (3, 1, 5), {}),
    ("a b c -> a c", (3, 0, 5), {}),
    ("a b c -> a c", (0, 4, 5), {}),
]
_NOT_IN_EINOPS = ("var", "std", "logsumexp")
# einops takes a callable f(x, dims) for the reductions it does not name
_AS_CALLABLE = {
    "var": lambda t, dims: t.var(dim=dims, correction=0),
    "std": lambda t, dims: t.std(dim=dims, correction=0),
    "logsumexp": lambda t, dims: torch.logsumexp(t, dim=dims),
}
FLOAT_REDUCTIONS = ["sum", "mean", "min", "max", "prod", "var", "std", "logsumexp", "any", "all"]


@pytest.mark.parametrize("pattern,shape,lengths", REDUCE_CASES)
@pytest.mark.parametrize("reduction", FLOAT_REDUCTIONS)
def test_reduce_float_equals_einops(pattern, shape, lengths, reduction) -> None:
    for name, x in layouts(shape):
        if 0 in shape and reduction in ("min", "max") and 0 not in (
                ra.explain(x, pattern, op="reduce", reduction="sum").output.shape):
            continue  # a min over nothing: an error for both (test_reduction_dtypes)
        ours = ra.reduce(x, pattern, reduction, **lengths)
        if reduction in _NOT_IN_EINOPS:
            expected = ra.reduce(x.numpy(), pattern, reduction, **lengths)
            torch.testing.assert_close(ours, torch.from_numpy(expected), msg=name, equal_nan=True)
        else:
            theirs = einops.reduce(x, pattern, reduction, **lengths)
            torch.testing.assert_close(ours, theirs, msg=name, equal_nan=True)
        plan = ra.explain(x, pattern, op="reduce", reduction=reduction, **lengths)
        assert ours.shape == plan.output.shape and ours.stride() == plan.output.strides


def _types_differ(dtype, reduction) -> bool:
    """numpy and torch disagree on these result types (bool and uint8 sums: torch gives
    int64, numpy uint64 or int64 by platform), whichever the lowering: not this test's
    subject (docs/reduce.md)."""
    return dtype in (torch.bool, torch.uint8) and reduction in ("sum", "prod")


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.uint8, torch.bool])
@pytest.mark.parametrize("reduction", ["sum", "mean", "min", "max", "prod", "any", "all",
                                       "var", "std", "count_nonzero", "argmax", "argmin"])
def test_reduce_int_and_bool_equal_numpy(dtype, reduction) -> None:
    """numpy's result types (an integer mean is float64) through the in-place lowering."""
    pattern = "a b c -> a c" if reduction not in ("argmax", "argmin") else "a b c -> a c"
    for name, x in layouts((3, 4, 5), dtype):
        if _types_differ(dtype, reduction):
            continue
        ours = ra.reduce(x, pattern, reduction)
        expected = torch.from_numpy(ra.reduce(x.numpy(), pattern, reduction))
        assert ours.dtype == expected.dtype, (name, ours.dtype, expected.dtype)
        torch.testing.assert_close(ours, expected, msg=name)
    x = layouts((3, 4, 2, 5), dtype)[0][1]
    if reduction not in ("argmax", "argmin"):  # several non-adjacent reduced dims
        ours = ra.reduce(x, "a b c d -> a c", reduction)
        expected = torch.from_numpy(ra.reduce(x.numpy(), "a b c d -> a c", reduction))
        if not _types_differ(dtype, reduction):
            assert ours.dtype == expected.dtype
            torch.testing.assert_close(ours, expected)


@pytest.mark.parametrize("reduction", ["argmax", "argmin"])
def test_argmax_over_a_middle_axis(reduction) -> None:
    x = torch.randn(3, 4, 5)
    ours = ra.reduce(x, "a b c -> a c", reduction)
    expected = getattr(x, reduction)(dim=1)
    assert torch.equal(ours, expected)
    x = torch.randn(3, 8, 5)
    ours = ra.reduce(x, "a (b 2) c -> a b c", reduction)
    assert torch.equal(ours, getattr(x.view(3, 4, 2, 5), reduction)(dim=2))


def test_reduce_skips_the_permute() -> None:
    """The plan permutes the reduced axis last; the lowering reduces it where it is."""
    x = torch.randn(2, 8, 16, 4)
    plan = ra.explain(x, "b h t d -> b t d", op="reduce", reduction="mean")
    assert [step.op for step in plan.steps] == ["permute", "reduce"]
    result, names = calls_of(ra.reduce, x, "b h t d -> b t d", "mean")
    assert "permute" not in names and names.count("mean") == 1
    torch.testing.assert_close(result, x.mean(dim=1))


def test_reduce_keeps_the_permute_when_kept_axes_move() -> None:
    """Kept axes in a new order: the permute stays (the result is C-contiguous)."""
    x = torch.randn(3, 4, 5)
    result, names = calls_of(ra.reduce, x, "a b c -> c a", "sum")
    assert "permute" in names
    assert result.is_contiguous()
    torch.testing.assert_close(result, x.sum(1).t())


def test_callable_reduction_gets_the_permuted_trailing_dims() -> None:
    seen = []

    def reduction(t, dims):
        seen.append((tuple(t.shape), dims))
        return t.sum(dim=dims)
    x = torch.randn(2, 3, 4)
    result = ra.reduce(x, "a b c -> a c", reduction)
    assert seen == [((2, 4, 3), (2,))]
    torch.testing.assert_close(result, x.sum(1))


def test_prod_of_non_adjacent_axes_keeps_the_order() -> None:
    x = torch.rand(3, 4, 5, dtype=torch.float64) + 0.5
    result = ra.reduce(x, "a b c -> b", "prod")
    torch.testing.assert_close(result, einops.reduce(x, "a b c -> b", "prod"))
    _, names = calls_of(ra.reduce, x, "a b c -> b", "prod")
    assert "permute" in names  # prod flattens its axes: they must be adjacent


def test_max_pool_goes_one_dim_at_a_time_without_grad() -> None:
    img = torch.randn(2, 3, 16, 16)
    pattern = "b c (h 2) (w 2) -> b c h w"
    result, names = calls_of(ra.reduce, img, pattern, "max")
    assert names.count("amax") == 2 and "permute" not in names
    assert torch.equal(result, einops.reduce(img, pattern, "max"))
    assert torch.equal(result, torch.nn.functional.max_pool2d(img, 2))


def test_max_with_ties_shares_the_gradient_as_einops() -> None:
    """Ties: amax over the whole reduced set splits the gradient evenly; stepwise would
    not, so it is not taken when autograd records."""
    img = torch.tensor([[1.0, 1.0, 0.0, 1.0], [1.0, 0.0, 2.0, 2.0]]).reshape(1, 1, 2, 4)
    ours_input = img.clone().requires_grad_()
    theirs_input = img.clone().requires_grad_()
    pattern = "b c (h 2) (w 2) -> b c h w"
    result, names = calls_of(ra.reduce, ours_input, pattern, "max")
    assert names.count("amax") == 1
    result.sum().backward()
    einops.reduce(theirs_input, pattern, "max").sum().backward()
    torch.testing.assert_close(ours_input.grad, theirs_input.grad)


def test_max_with_ties_forward_mode_as_einops() -> None:
    import torch.autograd.forward_ad as fwAD

    img = torch.tensor([[1.0, 1.0, 0.0, 1.0], [1.0, 0.0, 2.0, 2.0]]).reshape(1, 1, 2, 4)
    tangent = torch.arange(8.0).reshape(1, 1, 2, 4)
    pattern = "b c (h 2) (w 2) -> b c h w"
    with fwAD.dual_level():
        ours = fwAD.unpack_dual(ra.reduce(fwAD.make_dual(img, tangent), pattern, "max")).tangent
        theirs = fwAD.unpack_dual(einops.reduce(fwAD.make_dual(img, tangent), pattern,
                                                "max")).tangent
    torch.testing.assert_close(ours, theirs)


@pytest.mark.parametrize("reduction", ["sum", "mean", "max", "min", "prod", "var", "std",
                                       "logsumexp"])
@pytest.mark.parametrize("pattern,shape", [("b h t d -> b t d", (2, 3, 4, 5)),
                                           ("b c (h 2) (w 2) -> b c h w", (2, 3, 4, 6)),
                                           ("a b c -> a c", (3, 4, 5))])
def test_reduce_gradients_equal_einops(reduction, pattern, shape) -> None:
    for name, x in layouts(shape, torch.float64):
        ours_input = x.clone().requires_grad_()
        theirs_input = x.clone().requires_grad_()
        ours = ra.reduce(ours_input, pattern, reduction)
        weights = torch.randn(ours.shape, dtype=torch.float64)
        (ours * weights).sum().backward()
        theirs = einops.reduce(theirs_input, pattern, _AS_CALLABLE.get(reduction, reduction))
        (theirs * weights).sum().backward()
        torch.testing.assert_close(ours, theirs, msg=name)
        torch.testing.assert_close(ours_input.grad, theirs_input.grad, msg=name)


# ---------------------------------------------------------------------- views

VIEW_CASES = [
    ("rearrange", "b t (h d) -> b h t d", (2, 16, 32), {"h": 4}),
    ("rearrange", "b h t d -> b h (t d)", (2, 8, 16, 4), {}),
    ("rearrange", "a b c -> c b a", (2, 3, 4), {}),
    ("rearrange", "(a b) c -> c a b", (6, 4), {"a": 2}),
    ("rearrange", "a b c -> a 1 b c 1", (2, 3, 4), {}),
    ("rearrange", "a 1 c -> c a", (2, 1, 4), {}),
    ("rearrange", "a b c -> b (a c)", (2, 0, 4), {}),
    ("rearrange", "(a b) c -> b a c", (0, 4), {"a": 2}),
    ("repeat", "b t d -> b t d r", (2, 16, 32), {"r": 3}),
    ("repeat", "a b -> a r b", (2, 3), {"r": 4}),
    ("repeat", "a b -> r (a b)", (2, 3), {"r": 2}),
    ("repeat", "a b -> b a r", (2, 3), {"r": 1}),
    ("repeat", "a b -> a b r", (2, 0), {"r": 5}),
]


def _op(op):
    return getattr(ra, op), getattr(einops, op)


@pytest.mark.parametrize("op,pattern,shape,lengths", VIEW_CASES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_views_equal_einops(op, pattern, shape, lengths, dtype) -> None:
    ours_op, theirs_op = _op(op)
    for name, x in layouts(shape, dtype):
        plan = ra.explain(x, pattern, op=op, **lengths)
        if not plan.is_view:
            continue
        ours = ours_op(x, pattern, **lengths)
        theirs = theirs_op(x, pattern, **lengths)
        assert ours.dtype == theirs.dtype and ours.shape == theirs.shape, name
        assert torch.equal(ours, theirs), name
        assert same_storage(ours, x), name
        eager = torch_source_result(x, plan)
        assert ours.stride() == eager.stride(), (name, ours.stride(), eager.stride())
        assert ours.storage_offset() == eager.storage_offset(), name


def test_split_permute_is_one_as_strided() -> None:
    """A warm call of a chain of views is one as_strided. (Warmed first, outside the
    mode: a call that plans runs the eager chain once on the input to read its layout,
    which a torch-function mode records too, so what it sees would depend on whether
    another test made the same call first.)"""
    y = torch.randn(2, 16, 32)
    ra.rearrange(y, "b t (h d) -> b h t d", h=4)
    ra.repeat(y, "b t d -> b t d r", r=3)
    result, names = calls_of(ra.rearrange, y, "b t (h d) -> b h t d", h=4)
    assert names == ["as_strided"], names
    assert torch.equal(result, y.view(2, 16, 4, 8).permute(0, 2, 1, 3))
    result, names = calls_of(ra.repeat, y, "b t d -> b t d r", r=3)
    assert names == ["as_strided"], names


def test_single_view_op_stays_that_op() -> None:
    x = torch.randn(2, 8, 16, 4)
    _, names = calls_of(ra.rearrange, x, "b h t d -> b h (t d)")
    assert names == ["view"]


@pytest.mark.parametrize("op,pattern,shape,lengths",
                         [case for case in VIEW_CASES if 0 not in case[2]])
def test_views_with_grad_record_view_ops(op, pattern, shape, lengths) -> None:
    ours_op, theirs_op = _op(op)
    for name, x in layouts(shape, torch.float64):
        ours_input = x.clone().requires_grad_()
        theirs_input = x.clone().requires_grad_()
        ours, names = calls_of(ours_op, ours_input, pattern, **lengths)
        assert "as_strided" not in names, name
        assert "AsStrided" not in type(ours.grad_fn).__name__
        theirs = theirs_op(theirs_input, pattern, **lengths)
        weights = torch.randn(ours.shape, dtype=torch.float64)
        (ours * weights).sum().backward()
        (theirs * weights).sum().backward()
        torch.testing.assert_close(ours_input.grad, theirs_input.grad, msg=name)
        # no_grad: nothing records, so the one as_strided serves
        with torch.no_grad():
            again = ours_op(ours_input, pattern, **lengths)
        assert torch.equal(again, ours.detach())


def test_views_forward_mode_as_einops() -> None:
    """A dual tensor does not require grad, so as_strided runs: its tangent follows
    (torch gives a view's tangent the primal's layout)."""
    import torch.autograd.forward_ad as fwAD

    primal = torch.randn(2, 32, 16).transpose(1, 2)
    tangent = torch.arange(2 * 16 * 32.0).reshape(2, 16, 32)
    for op, pattern, lengths in [("rearrange", "b t (h d) -> b h t d", {"h": 4}),
                                 ("repeat", "b t d -> b t d r", {"r": 3})]:
        ours_op, theirs_op = _op(op)
        ours_op(primal, pattern, **lengths)
        with fwAD.dual_level():
            dual = fwAD.make_dual(primal, tangent)
            ours = fwAD.unpack_dual(ours_op(dual, pattern, **lengths))
            theirs = fwAD.unpack_dual(theirs_op(dual, pattern, **lengths))
            assert torch.equal(ours.primal, theirs.primal)
            assert torch.equal(ours.tangent, theirs.tangent)


def test_view_of_conjugate_and_negative_views() -> None:
    z = torch.randn(2, 16, 32, dtype=torch.complex64)
    for x in (z.conj(), z.conj().imag):
        assert x.is_conj() or x.is_neg()
        ours = ra.rearrange(x, "b t (h d) -> b h t d", h=4)
        theirs = einops.rearrange(x, "b t (h d) -> b h t d", h=4)
        assert ours.is_conj() == theirs.is_conj() and ours.is_neg() == theirs.is_neg()
        assert torch.equal(ours.resolve_conj().resolve_neg(), theirs.resolve_conj().resolve_neg())


def test_jit_trace_records_view_ops() -> None:
    y = torch.randn(2, 16, 32)
    ra.rearrange(y, "b t (h d) -> b h t d", h=4)   # a strided runner is cached

    def f(t):
        return ra.rearrange(t, "b t (h d) -> b h t d", h=4) * 2

    traced = torch.jit.trace(f, (y,), check_trace=False)
    assert "as_strided" not in str(traced.graph)
    torch.testing.assert_close(traced(y), f(y))


@pytest.mark.parametrize("op,pattern,lengths,reduction", [
    ("rearrange", "t (h d) -> h t d", {"h": 4}, None),
    ("repeat", "t d -> t d r", {"r": 3}, None),
    ("reduce", "c (h 2) (w 2) -> c h w", {}, "max"),
    ("reduce", "h t d -> t d", {}, "mean"),
])
def test_vmap(op, pattern, lengths, reduction) -> None:
    batch = torch.randn(5, 3, 16, 32) if op == "reduce" and "c" in pattern else torch.randn(5, 16, 32)
    if op == "reduce" and "c" not in pattern:
        batch = torch.randn(5, 3, 16, 32)
    ours_op, theirs_op = _op(op)
    extra = () if reduction is None else (reduction,)
    for x in (batch, batch.transpose(1, 2).contiguous().transpose(1, 2)):
        got = torch.func.vmap(lambda t: ours_op(t, pattern, *extra, **lengths))(x)
        expected = torch.stack([theirs_op(t, pattern, *extra, **lengths) for t in x])
        torch.testing.assert_close(got, expected)
        grads = torch.func.vmap(torch.func.grad(
            lambda t: ours_op(t, pattern, *extra, **lengths).square().sum()))(x)
        expected_grads = torch.stack([torch.func.grad(
            lambda t: theirs_op(t, pattern, *extra, **lengths).square().sum())(t) for t in x])
        torch.testing.assert_close(grads, expected_grads)


# ---------------------------------------------------------------------- einsum

EINSUM_CASES = [
    ("b h t d, b h s d -> b h t s", [(2, 8, 16, 4), (2, 8, 16, 4)], "torch.matmul"),
    ("i j, j k -> i k", [(3, 4), (4, 5)], "torch.matmul"),
    ("i j, j k -> k i", [(3, 4), (4, 5)], "torch.matmul"),
    ("b i j, b j k -> b k i", [(2, 3, 4), (2, 4, 5)], "torch.matmul"),
    ("i j k, k j l -> l i", [(2, 3, 4), (4, 3, 5)], "torch.matmul"),
    ("a b, a b -> a", [(3, 4), (3, 4)], "torch.matmul"),
    ("a, b -> a b", [(3,), (4,)], "torch.matmul"),
    ("a b, b -> a", [(3, 4), (4,)], "torch.matmul"),
    ("a b, b c -> a c", [(0, 4), (4, 5)], "torch.matmul"),
    ("a b, b c -> a c", [(3, 0), (0, 5)], "torch.matmul"),
    ("a b, b c -> a c", [(1, 4), (4, 1)], "torch.matmul"),
    ("a b, c -> a", [(3, 4), (5,)], "torch.einsum"),
    ("a a, a -> a", [(3, 3), (3,)], "torch.einsum"),
    ("... i, ... i -> ...", [(2, 3), (2, 3)], "torch.einsum"),
    ("a b, b c -> a c", [(3, 1), (4, 5)], "torch.einsum"),   # b broadcasts
    ("a b, b c, c d -> a d", [(2, 3), (3, 4), (4, 5)], "torch.einsum"),
]


@pytest.mark.parametrize("pattern,shapes,engine", EINSUM_CASES)
def test_einsum_equals_einops(pattern, shapes, engine) -> None:
    generator = torch.Generator().manual_seed(0)
    tensors = [torch.randn(*s, dtype=torch.float64, generator=generator) for s in shapes]
    plan = contraction.explain_einsum(tensors, pattern)
    assert plan.engine == engine
    assert engine in str(plan)
    ours_inputs = [t.clone().requires_grad_() for t in tensors]
    theirs_inputs = [t.clone().requires_grad_() for t in tensors]
    ours, names = calls_of(ra.einsum, *ours_inputs, pattern)
    ours, names = calls_of(ra.einsum, *ours_inputs, pattern)   # the warm path
    assert engine.removeprefix("torch.") in names
    assert ("einsum" in names) == (engine == "torch.einsum")
    theirs = einops.einsum(*theirs_inputs, pattern)
    torch.testing.assert_close(ours, theirs)
    weights = torch.randn(ours.shape, dtype=torch.float64, generator=generator)
    (ours * weights).sum().backward()
    (theirs * weights).sum().backward()
    for a, b in zip(ours_inputs, theirs_inputs):
        torch.testing.assert_close(a.grad, b.grad)
    source = plan.to_source("torch")
    assert engine in source
    names_in_source = {f"x{k}": t for k, t in enumerate(tensors)}
    torch.testing.assert_close(eval(source, {"torch": torch}, names_in_source), theirs)


def test_einsum_composed_groups_through_matmul() -> None:
    x, w = torch.randn(2, 12), torch.randn(12, 5)
    plan = contraction.explain_einsum([x, w], "b (h d), (h d) e -> b h e", h=3)
    assert plan.engine == "torch.matmul"
    ours = ra.einsum(x, w, "b (h d), (h d) e -> b h e", h=3)
    expected = torch.einsum("bhd,hde->bhe", x.view(2, 3, 4), w.view(3, 4, 5))
    torch.testing.assert_close(ours, expected)
    ours = ra.einsum(torch.randn(2, 3, 4), torch.randn(4, 5), "a b c, c d -> (a b) d")
    assert ours.shape == (6, 5)


def test_einsum_non_contiguous_inputs() -> None:
    x = torch.randn(2, 8, 4, 16).transpose(2, 3)
    y = torch.randn(2, 8, 16, 8)[..., ::2]
    ours = ra.einsum(x, y, "b h t d, b h s d -> b h t s")
    torch.testing.assert_close(ours, einops.einsum(x, y, "b h t d, b h s d -> b h t s"))


@pytest.mark.parametrize("dtype", [torch.int64, torch.bool])
def test_einsum_of_integers_stays_torch_einsum(dtype) -> None:
    x = (torch.arange(12) % 3).reshape(3, 4).to(dtype)
    y = (torch.arange(20) % 2).reshape(4, 5).to(dtype)
    assert contraction.explain_einsum([x, y], "i j, j k -> i k").engine == "torch.einsum"
    if dtype == torch.int64:
        assert torch.equal(ra.einsum(x, y, "i j, j k -> i k"), torch.einsum("ij,jk->ik", x, y))


def test_einsum_mixed_dtypes_stay_torch_einsum() -> None:
    x, y = torch.randn(3, 4), torch.randn(4, 5, dtype=torch.float64)
    assert contraction.explain_einsum([x, y], "i j, j k -> i k").engine == "torch.einsum"


def test_einsum_under_vmap() -> None:
    x, y = torch.randn(5, 3, 4), torch.randn(5, 4, 6)
    got = torch.func.vmap(lambda a, b: ra.einsum(a, b, "i j, j k -> i k"))(x, y)
    torch.testing.assert_close(got, torch.bmm(x, y))
