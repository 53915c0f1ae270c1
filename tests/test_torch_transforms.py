"""Every operation under torch's transforms, modes and subclasses, against einops under
the same transform, on both sides of the copy kernel's threshold.

The copy kernel reads a tensor's memory through numpy, outside torch's dispatcher: it may
run only where nobody can tell it from torch's own copy (plain eager, an exact CPU
``torch.Tensor`` with storage). Under functionalize, make_fx, vmap, jvp/grad, fake
tensors, dispatch and torch-function modes, and for subclasses, torch's own ops must run,
so the transform sees them; the results must equal einops' under the same transform.
The "large" inputs are checked to be planned for the kernel (and the kernel to run on
them in plain eager), so each case covers both sides of the threshold.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
einops = pytest.importorskip("einops")

from torch.fx.experimental.proxy_tensor import make_fx  # noqa: E402
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402
from torch.overrides import TorchFunctionMode  # noqa: E402

import rearrange as ra  # noqa: E402
from rearrange import kernel as K  # noqa: E402

# (name, ours, einops'): each takes one 2-d tensor (h, w) with w even.
OPERATIONS = [
    ("rearrange", lambda t: ra.rearrange(t, "h w -> (w h)"),
     lambda t: einops.rearrange(t, "h w -> (w h)")),
    ("rearrange-split", lambda t: ra.rearrange(t, "h (w c) -> c (w h)", c=2),
     lambda t: einops.rearrange(t, "h (w c) -> c (w h)", c=2)),
    ("reduce", lambda t: ra.reduce(t, "h (w c) -> w h", "max", c=2),
     lambda t: einops.reduce(t, "h (w c) -> w h", "max", c=2)),
    ("reduce-sum", lambda t: ra.reduce(t, "h w -> (w)", "sum"),
     lambda t: einops.reduce(t, "h w -> (w)", "sum")),
    ("repeat", lambda t: ra.repeat(t, "h w -> (w c) h", c=2),
     lambda t: einops.repeat(t, "h w -> (w c) h", c=2)),
    ("einsum", lambda t: ra.einsum(t, t, "h w, h w -> w"),
     lambda t: einops.einsum(t, t, "h w, h w -> w")),
    ("pack", lambda t: ra.pack([t, t.T.contiguous().T], "h *")[0],
     lambda t: einops.pack([t, t.T.contiguous().T], "h *")[0]),
    ("unpack", lambda t: ra.unpack(t, [(2,), (t.shape[1] - 2,)], "h *")[1],
     lambda t: einops.unpack(t, [(2,), (t.shape[1] - 2,)], "h *")[1]),
]
OPERATION_IDS = [name for name, _, _ in OPERATIONS]
# Below the kernel's threshold (torch copies), and above it (the kernel copies in eager).
SIZES = {"small": (8, 12), "large": (512, 640)}


@pytest.fixture(scope="module", autouse=True)
def large_copies_take_the_kernel():
    """The "large" size is on the kernel's side of the threshold: planned for the kernel
    and, in plain eager, copied by it (the runner compiled in the call: REARRANGE_JIT is
    eager in the suite)."""
    x = torch.randn(*SIZES["large"])
    copy = next(step for step in ra.explain(x, "h w -> (w h)").steps if step.is_copy)
    assert copy.kernel.variant != "torch", copy.kernel
    small = torch.randn(*SIZES["small"])
    copy = next(step for step in ra.explain(small, "h w -> (w h)").steps if step.is_copy)
    assert copy.kernel.variant == "torch", copy.kernel


@pytest.fixture()
def kernel_calls(monkeypatch):
    """The number of copies the kernel made so far in this test."""
    calls = []
    copy_into = K.copy_into

    def counting(*args, **kwargs):
        calls.append(args[0].shape)
        return copy_into(*args, **kwargs)
    monkeypatch.setattr(K, "copy_into", counting)
    return calls


def _input(size: str, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*SIZES[size], generator=generator)


def _same(ours, theirs) -> None:
    assert type(ours) is type(theirs)
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-5)


def test_plain_eager_uses_the_kernel_above_the_threshold(kernel_calls):
    x = _input("large")
    _same(ra.rearrange(x, "h w -> (w h)"), einops.rearrange(x, "h w -> (w h)"))
    assert kernel_calls, "the large transpose was not copied by the kernel"
    kernel_calls.clear()
    ra.rearrange(_input("small"), "h w -> (w h)")
    assert not kernel_calls


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("name,ours,theirs", OPERATIONS, ids=OPERATION_IDS)
def test_functionalize(name, ours, theirs, size, kernel_calls):
    x = _input(size)
    _same(torch.func.functionalize(ours)(x), torch.func.functionalize(theirs)(x))
    assert not kernel_calls


@pytest.mark.parametrize("mode", ["real", "fake", "symbolic"])
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("name,ours,theirs", OPERATIONS, ids=OPERATION_IDS)
def test_make_fx_graph_runs_on_new_data(name, ours, theirs, size, mode, kernel_calls):
    """The graph make_fx records must compute the result: run on other data, it gives
    what einops gives on that data (a copy outside the dispatcher would leave the
    recorded output uninitialised)."""
    graph = make_fx(ours, tracing_mode=mode)(_input(size, seed=1))
    fresh = _input(size, seed=2)
    _same(graph(fresh), theirs(fresh))
    assert not kernel_calls


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("name,ours,theirs", OPERATIONS, ids=OPERATION_IDS)
def test_vmap(name, ours, theirs, size, kernel_calls):
    batch = torch.stack([_input(size, seed=3), _input(size, seed=4)])
    _same(torch.vmap(ours)(batch), torch.vmap(theirs)(batch))
    assert not kernel_calls


# einsum's large case takes about 20 s (the rest well under 1 s): left to the full run.
JVP_CASES = [pytest.param(name, ours, theirs, size, id=f"{name}-{size}",
                          marks=pytest.mark.slow if (name, size) == ("einsum", "large") else ())
             for name, ours, theirs in OPERATIONS for size in SIZES]


@pytest.mark.parametrize("name,ours,theirs,size", JVP_CASES)
def test_jvp_and_vjp(name, ours, theirs, size, kernel_calls):
    x, tangent = _input(size, seed=5), _input(size, seed=6)
    (value, derivative), (their_value, their_derivative) = (
        torch.func.jvp(f, (x,), (tangent,)) for f in (ours, theirs))
    _same(value, their_value)
    _same(derivative, their_derivative)
    value, pullback = torch.func.vjp(ours, x)
    their_value, their_pullback = torch.func.vjp(theirs, x)
    cotangent = torch.ones_like(their_value)
    _same(pullback(cotangent)[0], their_pullback(cotangent)[0])
    assert not kernel_calls


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("name,ours,theirs", OPERATIONS, ids=OPERATION_IDS)
def test_forward_mode_ad(name, ours, theirs, size, kernel_calls):
    import torch.autograd.forward_ad as fwAD

    x, tangent = _input(size, seed=7), _input(size, seed=8)
    with fwAD.dual_level():
        ours_out = fwAD.unpack_dual(ours(fwAD.make_dual(x, tangent)))
        theirs_out = fwAD.unpack_dual(theirs(fwAD.make_dual(x, tangent)))
    _same(ours_out.primal, theirs_out.primal)
    _same(ours_out.tangent, theirs_out.tangent)
    assert not kernel_calls


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("name,ours,theirs", OPERATIONS, ids=OPERATION_IDS)
def test_fake_tensor_mode(name, ours, theirs, size, kernel_calls):
    with FakeTensorMode() as mode:
        fake = mode.from_tensor(_input(size))
        result, expected = ours(fake), theirs(fake)
        assert type(result) is type(expected)
        assert result.shape == expected.shape and result.dtype == expected.dtype
    assert not kernel_calls


class _RecordingMode(TorchDispatchMode):
    """A dispatch mode that records the aten ops it sees."""

    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


class _FunctionMode(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.calls += 1
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("mode_class", [_RecordingMode, _FunctionMode])
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("name,ours,theirs", OPERATIONS, ids=OPERATION_IDS)
def test_user_modes_see_every_copy(name, ours, theirs, size, mode_class, kernel_calls):
    """Under a user's mode the data moves through torch's ops (which the mode sees):
    the kernel's copy would be invisible to it."""
    x = _input(size)
    with mode_class():
        result = ours(x)
    _same(result, theirs(x))
    assert not kernel_calls


class _Tagged(torch.Tensor):
    """A ``__torch_function__`` subclass: torch's ops keep its type."""


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("name,ours,theirs", OPERATIONS, ids=OPERATION_IDS)
def test_subclass_keeps_its_type(name, ours, theirs, size, kernel_calls):
    x = _input(size).as_subclass(_Tagged)
    result, expected = ours(x), theirs(x)
    assert type(expected) is _Tagged
    assert type(result) is _Tagged
    _same(result, expected)
    assert not kernel_calls


def test_grad_enabled_copy_is_recorded_by_autograd(kernel_calls):
    x = _input("large").requires_grad_()
    y = ra.rearrange(x, "h w -> (w h)")
    assert y.grad_fn is not None
    y.sum().backward()
    torch.testing.assert_close(x.grad, torch.ones_like(x))
    assert not kernel_calls
