"""Compiled and exported calls keep eager's checks (issue #35).

Under ``torch.compile`` and ``torch.export`` the operations are traced over symbolic
sizes; every length the pattern fixes is then asserted in the graph (``torch._check``),
so that a call that eager refuses is refused compiled too, with eager's error, while good
shapes of every size still share one graph. For each operation: good shapes of several
sizes (one graph, results equal to eager and einops), then a contradicting shape, which
must raise eager's error:

* ``torch.compile``: dynamo reports an error raised while it traces as a
  ``TorchRuntimeError`` whose text holds ours (``repr`` of eager's error), with our
  error object in its exception chain;
* ``torch.export``: an example that contradicts the pattern raises eager's error itself;
  a program exported from a good example checks its inputs against the guards the
  checks made (a guard failure); dims declared dynamic that the pattern fixes are a
  constraint violation at export time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import pytest

torch = pytest.importorskip("torch")
einops = pytest.importorskip("einops")

import rearrange as ra  # noqa: E402
from torch._dynamo.testing import CompileCounterWithBackend  # noqa: E402
from torch.export import Dim  # noqa: E402

Shapes = tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class Case:
    """``call(library, *tensors)`` with good shapes (each a tuple of input shapes; the
    first is the example) and a shape that contradicts the pattern."""

    call: Callable[..., Any]
    good: tuple[Shapes, ...]
    bad: Shapes


CASES: dict[str, Case] = {
    "rearrange given length": Case(
        lambda m, x: m.rearrange(x, "a b -> b a", a=4),
        (((4, 5),), ((4, 6),), ((4, 9),)), ((3, 5),)),
    "rearrange split that does not divide": Case(
        lambda m, x: m.rearrange(x, "(a b) c -> a b c", a=3),
        (((9, 2),), ((12, 3),), ((6, 5),)), ((8, 2),)),
    "rearrange group of given lengths": Case(
        lambda m, x: m.rearrange(x, "(a b) c -> b a c", a=3, b=2),
        (((6, 5),), ((6, 2),), ((6, 7),)), ((8, 5),)),
    "reduce given length": Case(
        lambda m, x: m.reduce(x, "a b -> a", "sum", b=5),
        (((4, 5),), ((6, 5),), ((9, 5),)), ((4, 6),)),
    "reduce number": Case(
        lambda m, x: m.reduce(x, "a (b 2) -> a b", "max"),
        (((4, 6),), ((5, 8),), ((3, 12),)), ((4, 7),)),
    "repeat given length": Case(
        lambda m, x: m.repeat(x, "a b -> a b r", r=2, b=5),
        (((4, 5),), ((6, 5),), ((9, 5),)), ((4, 6),)),
    "pack shared axis": Case(
        lambda m, x, y: m.pack([x, y], "a * c")[0],
        (((3, 4, 2), (3, 5, 2)), ((5, 4, 3), (5, 7, 3)), ((6, 2, 4), (6, 3, 4))),
        ((3, 4, 2), (4, 5, 2))),
    "unpack packed shapes": Case(
        lambda m, x: m.unpack(x, [(2,), (3,)], "a *"),
        (((4, 5),), ((6, 5),), ((9, 5),)), ((4, 6),)),
    "unpack inferred length": Case(
        lambda m, x: m.unpack(x, [(2,), (-1, 2)], "a *"),
        (((4, 6),), ((5, 8),), ((3, 12),)), ((4, 7),)),
    "einsum shared axis": Case(
        lambda m, x, y: m.einsum(x, y, "a b, a c -> b c"),
        (((3, 4), (3, 5)), ((5, 4), (5, 6)), ((7, 2), (7, 3))), ((3, 4), (4, 5))),
    "einsum diagonal": Case(
        lambda m, x, y: m.einsum(x, y, "a a, a c -> c"),
        (((3, 3), (3, 5)), ((5, 5), (5, 6)), ((7, 7), (7, 3))), ((3, 4), (3, 5))),
}

# inductor compiles slowly: a representative subset (one of each kind of check)
INDUCTOR = ("rearrange split that does not divide", "pack shared axis",
            "unpack packed shapes", "einsum shared axis")


def _inputs(shapes: Shapes) -> list[Any]:
    return [torch.randn(shape) for shape in shapes]


def _eager_error(case: Case, shapes: Shapes) -> Exception:
    with pytest.raises(ra.RearrangeError) as info:
        case.call(ra, *_inputs(shapes))
    return info.value


def _assert_same(ours: Any, expected: Any) -> None:
    if isinstance(expected, (list, tuple)):
        assert isinstance(ours, (list, tuple)) and len(ours) == len(expected)
        for a, b in zip(ours, expected):
            torch.testing.assert_close(a, b)
    else:
        torch.testing.assert_close(ours, expected)


def _compiled_cases() -> list[Any]:
    """Every case under aot_eager; the inductor subset, of which the quick tier
    (``-m "not slow"``) keeps the first (each inductor compile takes seconds)."""
    return ([pytest.param(name, "aot_eager", id=f"{name}-aot_eager") for name in CASES]
            + [pytest.param(name, "inductor", id=f"{name}-inductor",
                            marks=pytest.mark.slow if name != INDUCTOR[0] else ())
               for name in INDUCTOR])


@pytest.mark.slow
@pytest.mark.parametrize(("name", "backend"), _compiled_cases())
def test_compiled_raises_where_eager_raises(name: str, backend: str) -> None:
    case = CASES[name]
    counter = CompileCounterWithBackend(backend)
    torch._dynamo.reset()
    compiled = torch.compile(lambda *xs: case.call(ra, *xs), backend=counter, dynamic=True,
                             fullgraph=True)
    for shapes in case.good:
        xs = _inputs(shapes)
        result = compiled(*xs)
        _assert_same(result, case.call(ra, *xs))
        _assert_same(result, case.call(einops, *xs))
    assert counter.frame_count == 1     # the checks pin no size: one graph for all

    expected = _eager_error(case, case.bad)
    with pytest.raises(RuntimeError) as info:
        compiled(*_inputs(case.bad))
    # dynamo wraps what tracing raised: eager's error, class and text, inside
    assert isinstance(info.value, (type(expected), torch._dynamo.exc.TorchRuntimeError))
    assert repr(expected) in str(info.value), str(info.value)
    chain, error = [], info.value
    while error is not None:
        chain.append(error)
        error = error.__cause__ or error.__context__
    assert any(type(e) is type(expected) and str(e) == str(expected) for e in chain), chain

    xs = _inputs(case.good[-1])     # the good graph is still there: no recompile
    _assert_same(compiled(*xs), case.call(ra, *xs))
    assert counter.frame_count == 1


class _Module(torch.nn.Module):
    def __init__(self, call: Callable[..., Any]) -> None:
        super().__init__()
        self.call = call

    def forward(self, *xs: Any) -> Any:
        return self.call(ra, *xs)


def _auto(shapes: Shapes) -> tuple:
    """Every dim of every input dynamic, unless the program's guards fix it."""
    return (tuple({dim: Dim.AUTO for dim in range(len(shape))} for shape in shapes),)


@pytest.mark.slow
@pytest.mark.parametrize("name", CASES)
def test_exported_raises_where_eager_raises(name: str) -> None:
    case = CASES[name]
    module = _Module(case.call)
    program = torch.export.export(module, tuple(_inputs(case.good[0])),
                                  dynamic_shapes=_auto(case.good[0]))
    for shapes in case.good[1:]:
        xs = _inputs(shapes)
        _assert_same(program.module()(*xs), case.call(ra, *xs))
        _assert_same(program.module()(*xs), case.call(einops, *xs))
    with pytest.raises((AssertionError, RuntimeError), match="Guard failed"):
        program.module()(*_inputs(case.bad))

    # an example that contradicts the pattern: eager's error, as eager raises it
    expected = _eager_error(case, case.bad)
    with pytest.raises(type(expected)) as info:
        torch.export.export(module, tuple(_inputs(case.bad)), dynamic_shapes=_auto(case.bad))
    assert str(info.value) == str(expected)


@pytest.mark.parametrize(("name", "dims", "message"), [
    ("rearrange given length", lambda a, b: ({0: a, 1: b},), "specialized it to be a constant (4)"),
    ("reduce given length", lambda a, b: ({0: a, 1: b},), "specialized it to be a constant (5)"),
    ("unpack packed shapes", lambda a, b: ({0: a, 1: b},), "specialized it to be a constant (5)"),
])
def test_export_reports_dims_the_pattern_fixes(name: str, dims: Any, message: str) -> None:
    case = CASES[name]
    a, b = Dim("a"), Dim("b")
    with pytest.raises(torch._dynamo.exc.UserError, match="Constraints violated") as info:
        torch.export.export(_Module(case.call), tuple(_inputs(case.good[0])),
                            dynamic_shapes=(dims(a, b),))
    assert message in str(info.value)


def test_compile_of_pack_and_unpack_checks_once_per_graph() -> None:
    """The round trip a compiled pack hands unpack (symbolic packed shapes) asserts only
    what holds by construction: one graph for every size, nothing to fail (a guard
    against checks that would pin a size)."""
    def f(x: Any, y: Any) -> Any:
        packed, shapes = ra.pack([x, y], "b * c")
        first, second = ra.unpack(packed * 2, shapes, "b * c")
        return first.sum() + second.sum()

    counter = CompileCounterWithBackend("aot_eager")
    torch._dynamo.reset()
    compiled = torch.compile(f, backend=counter, dynamic=True, fullgraph=True)
    for n in (2, 3, 5, 8):   # no two sizes equal by chance in the first call (duck sizing)
        x, y = torch.randn(n, n + 1, 7), torch.randn(n, 5, n + 2, 7)
        torch.testing.assert_close(compiled(x, y), f(x, y))
    assert counter.frame_count == 1


def test_symbolic_plan_holds_its_checks_as_data() -> None:
    from torch.fx.experimental.proxy_tensor import make_fx

    plans: list[Any] = []

    def f(x: Any) -> Any:
        plans.append(ra.explain(x, "b (h d) -> b h d", h=4))
        return ra.rearrange(x, "b (h d) -> b h d", h=4)

    make_fx(f, tracing_mode="symbolic")(torch.zeros(3, 8))
    (check,) = plans[0].checks
    assert check.relation == "==" and check.rhs == 0 and check.error is ra.PatternError
    # quoted: the split dim and the known length, then the call's shape and lengths
    assert check.text((7, 4, 3, 7, 4)) == (
        "input dim 1 of size 7 cannot be split into (h d): 7 is not divisible by 4\n"
        "  b (h d) -> b h d\n    ^^^^^\n"
        "  while rearranging with pattern 'b (h d) -> b h d': input shape (3, 7), "
        "axis lengths {h=4}")
    assert plans[0].to_dict()["checks"] == [check.to_text()]


def test_jit_trace_checks_the_example() -> None:
    """torch.jit.trace's sizes are tensors: the checks run on the example, as eager's do
    (the trace records none)."""
    def f(x: Any) -> Any:
        return ra.rearrange(x, "(a b) c -> a b c", a=3)

    expected = _eager_error(Case(lambda m, x: f(x), (), ()), ((8, 2),))
    with pytest.raises(ra.PatternError) as info:
        torch.jit.trace(f, torch.randn(8, 2))
    assert str(info.value) == str(expected)
    traced = torch.jit.trace(f, torch.randn(9, 2))
    torch.testing.assert_close(traced(torch.randn(12, 2)).shape, (3, 4, 2))
