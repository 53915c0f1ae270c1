"""torch tensors: results, views and gradients against einops on torch; layers; compile."""

from __future__ import annotations

import math
import pickle

import einops
import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

import rearrange as ra
from corpus import load
from rearrange.layers.torch import Rearrange, Reduce

REARRANGE = load("rearrange")
REDUCE = load("reduce")
REPEAT = load("repeat")
PACK = load("pack")
UNPACK = load("unpack")
EINSUM = load("einsum")
PARSE_SHAPE = load("parse_shape")
EINOPS_REDUCTIONS = ("min", "max", "sum", "mean", "prod", "any", "all")


def _input(shape, requires_grad=False) -> torch.Tensor:
    x = torch.arange(math.prod(shape), dtype=torch.float64).reshape(shape) / 7
    return x.requires_grad_(requires_grad)


def _shares_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def _assert_same_gradients(got: torch.Tensor, expected: torch.Tensor,
                           inputs: list[torch.Tensor], exact: bool) -> None:
    """For one random upstream gradient, ours and einops' results give the inputs the
    same gradients: bit for bit if ``exact``, else within torch's default tolerance."""
    upstream = torch.randn(expected.shape, dtype=torch.float64)
    tolerance = {"rtol": 0, "atol": 0} if exact else {}
    ours = torch.autograd.grad(got, inputs, upstream)
    theirs = torch.autograd.grad(expected, inputs, upstream)
    assert len(ours) == len(theirs) == len(inputs)
    for mine, reference in zip(ours, theirs):
        torch.testing.assert_close(mine, reference, **tolerance)


@pytest.mark.parametrize("entry", REARRANGE)
def test_rearrange_corpus_matches_einops_on_torch(entry: dict) -> None:
    example = entry["example"]
    x = _input(example["shape"], requires_grad=True)
    lengths = example["axes_lengths"]
    expected = einops.rearrange(x, entry["pattern"], **lengths)
    got = ra.rearrange(x, entry["pattern"], **lengths)
    assert isinstance(got, torch.Tensor) and got.dtype == expected.dtype
    torch.testing.assert_close(got, expected, rtol=0, atol=0)
    if _shares_storage(expected, x) and x.numel():
        assert _shares_storage(got, x), "einops returned a view, rearrange copied"
    _assert_same_gradients(got, expected, [x], exact=True)


@pytest.mark.parametrize("entry", REDUCE)
def test_reduce_corpus_matches_einops_on_torch(entry: dict) -> None:
    example = entry["example"]
    reduction = entry["reduction"] if entry["reduction"] in EINOPS_REDUCTIONS else "sum"
    x = _input(example["shape"], requires_grad=reduction not in ("any", "all"))
    lengths = example["axes_lengths"]
    expected = einops.reduce(x, entry["pattern"], reduction, **lengths)
    got = ra.reduce(x, entry["pattern"], reduction, **lengths)
    assert got.dtype == expected.dtype
    torch.testing.assert_close(got, expected)
    if x.requires_grad:
        _assert_same_gradients(got, expected, [x], exact=False)


@pytest.mark.parametrize("entry", REPEAT)
def test_repeat_corpus_matches_einops_on_torch(entry: dict) -> None:
    example = entry["example"]
    x = _input(example["shape"], requires_grad=True)
    lengths = example["axes_lengths"]
    expected = einops.repeat(x, entry["pattern"], **lengths)
    got = ra.repeat(x, entry["pattern"], **lengths)
    torch.testing.assert_close(got, expected, rtol=0, atol=0)
    plan = ra.explain(x.detach(), entry["pattern"], op="repeat", **lengths)
    assert _shares_storage(got, x) == plan.is_view or x.numel() == 0
    _assert_same_gradients(got, expected, [x], exact=False)


def test_copy_false_raises_before_torch_copies() -> None:
    x = torch.zeros(4, 6)
    with pytest.raises(ra.NoViewError, match=r"cannot merge \(w h\)"):
        ra.rearrange(x, "h w -> (w h)", copy=False)
    assert _shares_storage(ra.rearrange(x, "h w -> (h w)", copy=False), x)
    fresh = ra.rearrange(x, "h w -> (h w)", copy=True)
    assert not _shares_storage(fresh, x) and fresh.is_contiguous()


@pytest.mark.parametrize("requires_grad", [False, True])
def test_large_cpu_copies_use_the_kernel_unless_autograd_records_them(requires_grad) -> None:
    x = torch.randn(512, 384, requires_grad=requires_grad)
    plan = ra.explain(x.detach(), "h w -> (w h)")
    copy_step = next(step for step in plan.steps if step.is_copy)
    assert copy_step.kernel.variant == "tiled-transpose"
    assert "torch's .contiguous() instead when autograd records the copy" in copy_step.kernel.reason
    got = ra.rearrange(x, "h w -> (w h)")
    torch.testing.assert_close(got, x.t().reshape(-1), rtol=0, atol=0)
    assert (got.grad_fn is not None) == requires_grad
    small = ra.explain(torch.zeros(3, 4), "h w -> (w h)")
    assert next(s for s in small.steps if s.is_copy).kernel.variant == "torch"


def test_integer_mean_and_new_reductions_on_torch() -> None:
    x = torch.arange(12).reshape(3, 4)
    got = ra.reduce(x, "a b -> a", "mean")
    assert got.dtype == torch.float64
    torch.testing.assert_close(got, torch.tensor(x.numpy().mean(axis=1)))
    y = torch.randn(3, 4, 5, dtype=torch.float64)
    for reduction in ("var", "std", "logsumexp", "count_nonzero", "prod"):
        torch.testing.assert_close(
            ra.reduce(y, "a b c -> c a", reduction),
            torch.as_tensor(ra.reduce(y.numpy(), "a b c -> c a", reduction)))
    torch.testing.assert_close(ra.reduce(y, "a b c -> a c", "argmax"), y.argmax(dim=1))


def test_layers_in_sequential_pickle_and_repr() -> None:
    model = torch.nn.Sequential(Rearrange("b c (h p) (w q) -> b (h w) (p q c)", p=2, q=2),
                                torch.nn.Linear(12, 5), Reduce("b n d -> b d", "max"))
    x = torch.randn(2, 3, 8, 8)
    expected = model(x)
    again = pickle.loads(pickle.dumps(model))
    torch.testing.assert_close(again(x), expected)
    assert repr(model[0]) == "Rearrange('b c (h p) (w q) -> b (h w) (p q c)', p=2, q=2)"
    with pytest.raises(ra.RearrangeError):
        model(torch.randn(2, 3, 7, 8))
    with pytest.raises(ra.PatternError, match="appears only on the right side"):
        Rearrange("a b -> a b c")
    with pytest.raises(ra.RearrangeError, match="unknown reduction"):
        Reduce("a b -> a", "median")


def test_torch_compile_makes_one_graph() -> None:
    """fullgraph=True fails on any graph break."""
    def f(x):
        y = ra.rearrange(x, "b h t d -> b t (h d)")
        y = ra.repeat(y, "b t c -> b t c r", r=2)
        return ra.reduce(y, "b t c r -> b c", "mean")

    model = torch.nn.Sequential(Rearrange("b h t d -> b t (h d)"), Reduce("b t c -> b c", "max"))
    x = torch.randn(2, 4, 8, 3, requires_grad=True)
    compiled = torch.compile(f, fullgraph=True, backend="eager")
    torch.testing.assert_close(compiled(x), f(x))
    compiled_model = torch.compile(model, fullgraph=True, backend="eager")
    torch.testing.assert_close(compiled_model(x), model(x))
    compiled(x).sum().backward()
    assert x.grad is not None


def test_explain_reports_torch_inputs() -> None:
    x = torch.zeros(2, 3, 4)[:, :, ::2]
    plan = ra.explain(x, "a b c -> a (c b)")
    assert plan.input.strides == (12, 4, 2)
    assert plan.dtype == "float32"
    assert not plan.is_view


def test_pack_unpack_einsum_parse_shape_on_torch() -> None:
    a = torch.randn(2, 3, 4, requires_grad=True)
    b = torch.randn(2, 3, requires_grad=True)
    packed, shapes = ra.pack([a, b], "i j *")
    expected, expected_shapes = einops.pack([a, b], "i j *")
    torch.testing.assert_close(packed, expected, rtol=0, atol=0)
    assert shapes == expected_shapes
    pieces = ra.unpack(packed, shapes, "i j *")
    assert all(_shares_storage(p, packed) for p in pieces)
    torch.testing.assert_close(pieces[0], a, rtol=0, atol=0)
    w = torch.randn(12, 5, dtype=torch.float64, requires_grad=True)
    x = torch.randn(2, 12, dtype=torch.float64)
    got = ra.einsum(x, w, "b (h d), (h d) e -> b h e", h=3)
    expected = torch.einsum("bhd,hde->bhe", x.reshape(2, 3, 4), w.reshape(3, 4, 5))
    torch.testing.assert_close(got, expected)
    got.sum().backward()
    assert w.grad is not None
    assert ra.parse_shape(a, "b _ w") == einops.parse_shape(a, "b _ w")
    assert ra.check_shape(a, "b (h) (w)") == {"b": 2, "h": 3, "w": 4}


@pytest.mark.parametrize("entry", PACK)
def test_pack_corpus_matches_einops_on_torch(entry: dict) -> None:
    xs = [_input(shape, requires_grad=True) for shape in entry["example"]["shape"]]
    expected, expected_shapes = einops.pack(xs, entry["pattern"])
    got, shapes = ra.pack(xs, entry["pattern"])
    torch.testing.assert_close(got, expected, rtol=0, atol=0)
    assert shapes == expected_shapes
    _assert_same_gradients(got, expected, xs, exact=True)


@pytest.mark.parametrize("entry", UNPACK)
def test_unpack_corpus_matches_einops_on_torch(entry: dict) -> None:
    example = entry["example"]
    x = _input(example["shape"])
    expected = einops.unpack(x, example["packed_shapes"], entry["pattern"])
    got = ra.unpack(x, example["packed_shapes"], entry["pattern"])
    assert len(got) == len(expected)
    for ours, theirs in zip(got, expected):
        torch.testing.assert_close(ours, theirs, rtol=0, atol=0)
        assert _shares_storage(ours, x) or ours.numel() == 0


@pytest.mark.parametrize("entry", EINSUM)
def test_einsum_corpus_matches_einops_on_torch(entry: dict) -> None:
    xs = [_input(shape, requires_grad=True) for shape in entry["example"]["shape"]]
    lengths = entry["example"]["axes_lengths"]
    expected = einops.einsum(*xs, entry["pattern"], **lengths)
    got = ra.einsum(*xs, entry["pattern"], **lengths)
    torch.testing.assert_close(got, expected)
    _assert_same_gradients(got, expected, xs, exact=False)


@pytest.mark.parametrize("entry", PARSE_SHAPE)
def test_parse_shape_corpus_matches_einops_on_torch(entry: dict) -> None:
    x = torch.zeros(entry["example"]["shape"])
    assert ra.parse_shape(x, entry["pattern"]) == einops.parse_shape(x, entry["pattern"])


@st.composite
def strided_tensors(draw):
    """CPU tensors that are views: permuted, stepped slices, expanded (stride 0),
    storage offsets, size 0/1 dims, complex conjugate views."""
    shape = tuple(draw(st.lists(st.integers(0, 5), min_size=1, max_size=4)))
    base = torch.arange(1, 1 + math.prod(s * 2 + 1 for s in shape), dtype=torch.float64)
    x = base.reshape([s * 2 + 1 for s in shape])
    x = x[tuple(slice(1 if s else 0, None if not s else 1 + s * draw(st.sampled_from([1, 2])),
                      draw(st.sampled_from([1, 2]))) for s in shape)]
    x = x[tuple(slice(0, s) for s in shape)]
    if draw(st.booleans()):
        x = x.permute(draw(st.permutations(range(x.ndim))))
    if draw(st.booleans()) and x.ndim:
        dim = draw(st.integers(0, x.ndim - 1))
        if x.shape[dim] == 1:
            x = x.expand(*[4 if d == dim else -1 for d in range(x.ndim)])
    if draw(st.booleans()):
        x = torch.complex(x, -x).conj()
    return x


@settings(deadline=None)
@given(strided_tensors(), st.data())
def test_rearrange_of_random_torch_layouts_matches_einops(x, data) -> None:
    names = "abcd"[:x.ndim]
    order = data.draw(st.permutations(list(names)))
    cut = data.draw(st.integers(0, len(order)))
    right = " ".join(order[:cut]) + (" (" + " ".join(order[cut:]) + ")" if cut < len(order) else "")
    pattern = f"{' '.join(names)} -> {right}"
    expected = einops.rearrange(x, pattern)
    for copy in (None, True):
        got = ra.rearrange(x, pattern, copy=copy)
        torch.testing.assert_close(got, expected, rtol=0, atol=0)


@pytest.mark.parametrize("make", [
    lambda: torch.complex(torch.randn(300, 200), torch.randn(300, 200)).conj(),
    lambda: torch.randn(300, 200).neg().conj_physical(),
    lambda: torch.randn(1, 400).expand(300, 400),
    lambda: torch.randn(310, 210)[5:305, 5:205],
    lambda: torch.randn(300, 400)[:, ::2],
], ids=["conj-view", "plain", "expanded", "offset", "stepped"])
def test_large_copies_of_unusual_torch_views(make) -> None:
    """Copies the kernel may take: its numpy view of the memory must mean the values."""
    x = make()
    torch.testing.assert_close(ra.rearrange(x, "h w -> (w h)"), x.t().reshape(-1), rtol=0, atol=0)


def _not_dense() -> list:
    """Tensors without a strided layout, each beside a dense tensor with the same shape,
    dtype and (for sparse COO, whose stride() is all zeros) strides: a cache keyed
    without the layout would hand one the other's runner."""
    coo = torch.randn(30, 30).to_sparse()
    return [
        (coo, torch.randn(1, 1).expand(30, 30), "torch.sparse_coo", ".to_dense()"),
        (torch.randn(30, 30).to_sparse_csr(), torch.randn(30, 30), "torch.sparse_csr",
         ".to_dense()"),
        (torch.randn(30, 30).to_mkldnn(), torch.randn(30, 30), "torch._mkldnn", ".to_dense()"),
        (torch.nested.nested_tensor([torch.randn(30, 30), torch.randn(20, 30)]),
         torch.randn(30, 30), "nested", ".to_padded_tensor(padding)"),
    ]


# Each call made with the library it is given: rearrange, or einops as the oracle.
_CALLS = {
    "rearrange": lambda lib, x: lib.rearrange(x, "... h w -> ... (w h)"),
    "reduce": lambda lib, x: lib.reduce(x, "... h w -> ... w", "max"),
    "repeat": lambda lib, x: lib.repeat(x, "... h w -> ... w h 2"),
    "pack": lambda lib, x: lib.pack([x, x], "* w")[0],
    "unpack": lambda lib, x: lib.unpack(x, [(10,), (20,)], "* w")[1],
    "einsum": lambda lib, x: lib.einsum(x, "... h w -> ... w"),
    "explain": lambda lib, x: lib.explain(x, "... h w -> ... w h"),   # rearrange's own
    "asnumpy": lambda lib, x: lib.asnumpy(x),
    "list of them": lambda lib, x: lib.rearrange([x, x], "b ... h w -> ... (b w h)"),
}


@pytest.mark.parametrize("op", list(_CALLS))
@pytest.mark.parametrize("dense_first", [True, False])
def test_tensors_without_strides_are_refused_by_name_in_any_cache_state(op, dense_first) -> None:
    """Sparse, mkldnn and nested tensors get an ArgumentTypeError that names the layout
    and the conversion, whatever ran before with a dense tensor of the same shape,
    dtype and strides; the dense tensor's result stays einops'."""
    call = _CALLS[op]
    for bad, dense, kind, fix in _not_dense():
        if kind == "torch.sparse_coo":
            assert bad.stride() == dense.stride()       # the collision a key must tell apart
        for first_dense in (dense_first, not dense_first, dense_first):
            if first_dense:
                got = call(ra, dense)
                if op == "asnumpy":
                    np.testing.assert_array_equal(got, einops.asnumpy(dense))
                elif op != "explain":
                    torch.testing.assert_close(got, call(einops, dense), rtol=0, atol=0)
            else:
                with pytest.raises(ra.ArgumentTypeError) as raised:
                    call(ra, bad)
                assert kind in str(raised.value) and fix in str(raised.value)


def test_parse_shape_reads_sparse_shapes_and_refuses_nested_tensors() -> None:
    sparse = torch.randn(3, 4).to_sparse()
    assert ra.parse_shape(sparse, "h w") == einops.parse_shape(sparse, "h w")
    nested = torch.nested.nested_tensor([torch.randn(3, 4), torch.randn(2, 4)])
    with pytest.raises(ra.ArgumentTypeError, match="has no .shape to read"):
        ra.parse_shape(nested, "b h w")
