"""torch.compile, torch.export and torch.jit.trace over changing shapes, against einops.

Every new input shape must not be a new graph: with ``dynamic=True`` each function
compiles once, and with default settings no more often than einops' own functions do.
Graphs are counted with a backend that records each graph dynamo hands it (and runs it
as traced, so results are compared with einops' without inductor's compile time).
"""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys
import textwrap
from typing import Any, Callable

import pytest

torch = pytest.importorskip("torch")
einops = pytest.importorskip("einops")

import rearrange as ra  # noqa: E402
from rearrange.layers.torch import EinMix, Rearrange, Reduce  # noqa: E402
from golden_check import assert_matches_golden  # noqa: E402

GOLDEN = pathlib.Path(__file__).parent / "golden" / "explain"


def _pack_unpack(m: Any, x: Any) -> Any:
    packed, shapes = m.pack([x, x[:, :1]], "b * w")
    first, second = m.unpack(packed * 2, shapes, "b * w")
    return first + 1, second


FUNCTIONS: dict[str, Callable[[Any, Any], Any]] = {
    "rearrange": lambda m, x: m.rearrange(x, "b c h w -> b (h w) c"),
    "rearrange with a length": lambda m, x: m.rearrange(x, "b (c k) h w -> b k (h w) c", k=2),
    "rearrange split": lambda m, x: m.rearrange(x, "b c (h p) (w q) -> b (h w) (p q c)", p=2, q=2),
    "reduce max-pool": lambda m, x: m.reduce(x, "b c (h 2) (w 2) -> b c h w", "max"),
    "reduce mean": lambda m, x: m.reduce(x, "b c h w -> b c", "mean"),
    "repeat": lambda m, x: m.repeat(x, "b c h w -> b c h w r", r=2),
    "pack+unpack": _pack_unpack,
    "einsum": lambda m, x: m.einsum(x, x, "b c h w, b c g w -> b h g"),
}


def _layers(lib: Any) -> Any:
    torch.manual_seed(0)   # the same EinMix weights in both libraries
    return torch.nn.Sequential(
        lib.Rearrange("b c (h p) (w q) -> b (h w) (p q c)", p=2, q=2),
        lib.EinMix("b n d -> b n e", weight_shape="d e", bias_shape="e", d=16, e=5),
        lib.Reduce("b n e -> b e", "max"))


class _Layers:
    Rearrange, Reduce, EinMix = Rearrange, Reduce, EinMix


def _shapes(count: int = 10) -> list[tuple[int, ...]]:
    """Batch, channels, height and width all change (even heights and widths, 2..)."""
    return [(2 + k, 4 + 4 * (k % 3), 2 * (3 + k), 2 * (4 + k % 3)) for k in range(count)]


def _graphs(f: Callable[[Any], Any], shapes: list[tuple[int, ...]], oracle: Callable[[Any], Any],
            **options: Any) -> int:
    graphs = []

    def count(gm: Any, example_inputs: Any) -> Any:
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    compiled = torch.compile(f, backend=count, **options)
    for shape in shapes:
        x = torch.randn(shape)
        torch.testing.assert_close(compiled(x), oracle(x))
    return len(graphs)


@pytest.mark.slow
@pytest.mark.parametrize("name", FUNCTIONS)
def test_dynamic_compile_is_one_graph_for_all_shapes(name: str) -> None:
    f = FUNCTIONS[name]
    ours = _graphs(lambda x: f(ra, x), _shapes(), lambda x: f(einops, x),
                   dynamic=True, fullgraph=True)
    theirs = _graphs(lambda x: f(einops, x), _shapes(), lambda x: f(einops, x),
                     dynamic=True, fullgraph=True)
    assert ours <= theirs and ours == 1


@pytest.mark.slow
@pytest.mark.parametrize("name", FUNCTIONS)
def test_default_compile_builds_no_more_graphs_than_einops(name: str) -> None:
    f = FUNCTIONS[name]
    ours = _graphs(lambda x: f(ra, x), _shapes(), lambda x: f(einops, x), fullgraph=True)
    theirs = _graphs(lambda x: f(einops, x), _shapes(), lambda x: f(einops, x), fullgraph=True)
    assert ours <= theirs


@pytest.mark.slow
@pytest.mark.parametrize("dynamic", [True, None])
def test_layers_compile_like_einops_layers(dynamic: bool | None) -> None:
    import einops.layers.torch as einops_layers

    ours, theirs = _layers(_Layers), _layers(einops_layers)
    torch.testing.assert_close(ours[1].weight, theirs[1].weight)
    shapes = [(b, 4, h, w) for b, _, h, w in _shapes()]    # EinMix's d=16 needs 4 channels
    counts = [_graphs(model, shapes, theirs, dynamic=dynamic, fullgraph=True)
              for model in (ours, theirs)]
    assert counts[0] <= counts[1]
    if dynamic:
        assert counts[0] == 1


def test_gradients_through_a_dynamic_graph_match_einops() -> None:
    def f(m: Any, x: Any) -> Any:
        y = m.rearrange(x, "b (h d) t -> b h t d", h=2)
        return m.reduce(m.repeat(y, "b h t d -> b h t d r", r=3), "b h t d r -> b t", "sum")

    compiled = torch.compile(lambda x: f(ra, x), dynamic=True, fullgraph=True, backend="aot_eager")
    for shape in ((2, 6, 5), (3, 8, 7)):
        x = torch.randn(shape, requires_grad=True)
        x_einops = x.detach().clone().requires_grad_(True)
        (compiled(x) ** 2).sum().backward()
        (f(einops, x_einops) ** 2).sum().backward()
        torch.testing.assert_close(x.grad, x_einops.grad)


@pytest.mark.slow
def test_compiled_first_call_with_rearrange_imported_before_torch() -> None:
    """isort's order: ``import rearrange`` first, then torch; the very first call is a
    compiled one (no eager call has seen a tensor). fullgraph=True fails on any break."""
    script = textwrap.dedent("""
        import rearrange as ra
        import torch
        graphs = []
        def count(gm, example_inputs):
            graphs.append(gm)
            return gm.forward
        @torch.compile(dynamic=True, fullgraph=True, backend=count)
        def f(x):
            y = ra.rearrange(x, "b (h d) t -> b h t d", h=2)
            packed, shapes = ra.pack([y, y], "b * d")
            return ra.reduce(packed, "b n d -> b d", "max"), ra.einsum(y, y, "b h t d, b h s d -> b t s")
        for n in range(2, 8):
            f(torch.randn(n, 2 * n, n + 1))
        assert len(graphs) == 1, graphs
        print("ok")
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "ok"


@pytest.mark.slow
def test_importing_rearrange_does_not_import_dynamo() -> None:
    script = ("import sys, torch, rearrange as ra; x = torch.zeros(2, 3); "
              "ra.rearrange(x, 'a b -> b a'); ra.reduce(x, 'a b -> a', 'sum'); "
              "print('torch._dynamo' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=300)
    assert result.stdout.strip() == "False", result.stderr[-3000:]


def test_jit_trace_of_layers_runs_on_new_sizes() -> None:
    model = _layers(_Layers)
    x = torch.randn(2, 4, 8, 8)
    model(x)   # an eager call first: its cached runner must not end up in the trace
    traced = torch.jit.trace(model, x)
    for shape in ((5, 4, 8, 8), (3, 4, 12, 16)):
        y = torch.randn(shape)
        torch.testing.assert_close(traced(y), model(y))


def test_jit_trace_of_functions_runs_on_new_sizes() -> None:
    def f(x: Any) -> Any:
        y = ra.rearrange(x, "b (c k) h w -> b k (h w) c", k=2)
        packed, shapes = ra.pack([y, y], "b k * c")
        first, _ = ra.unpack(packed, shapes, "b k * c")
        return ra.repeat(ra.reduce(first, "b k n c -> b n", "mean"), "b n -> b n r", r=2)

    traced = torch.jit.trace(f, torch.randn(2, 4, 6, 4))
    for shape in ((3, 4, 6, 4), (5, 8, 2, 10)):
        y = torch.randn(shape)
        torch.testing.assert_close(traced(y), f(y))


@pytest.mark.slow
def test_export_with_dynamic_dims_matches_eager_at_other_sizes() -> None:
    model = _layers(_Layers)
    batch, h, w = torch.export.Dim("batch"), torch.export.Dim("h"), torch.export.Dim("w")
    for dynamic_shapes in (({0: batch},), ({0: batch, 2: 2 * h, 3: 2 * w},)):
        program = torch.export.export(model, (torch.randn(4, 4, 8, 8),),
                                      dynamic_shapes=dynamic_shapes)
        for n in (2, 3, 9):   # export's dims are at least 2 (0 and 1 specialise)
            shape = (n, 4, 8, 8) if len(dynamic_shapes[0]) == 1 else (n, 4, 2 * n, 4 + 2 * n)
            x = torch.randn(shape)
            torch.testing.assert_close(program.module()(x), model(x))


def _symbolic_plans(f: Callable[[Any], Any], shape: tuple[int, ...]) -> Any:
    from torch.fx.experimental.proxy_tensor import make_fx

    return make_fx(f, tracing_mode="symbolic")(torch.zeros(shape))


def test_explain_of_symbolic_sizes_says_torch_decides() -> None:
    plans: list[Any] = []

    def f(x: Any) -> Any:
        plans.append(ra.explain(x, "b h t (d k) -> b t (h d) k", k=2))
        plans.append(ra.explain(x, "b h t d -> b t d", op="reduce", reduction="max"))
        plans.append(ra.explain(x, "b h t d -> b h t d r", op="repeat", r=3))
        return ra.rearrange(x, "b h t (d k) -> b t (h d) k", k=2)

    _symbolic_plans(f, (2, 8, 16, 4))
    split, reduction, repeat = plans
    assert split.is_view is None and reduction.is_view is False and repeat.is_view is True
    assert split.output_shape[3] == 2 and repeat.output_shape[4] == 3
    text = "\n\n".join(str(plan) for plan in plans) + "\n\n" + "\n".join(
        plan.to_source() for plan in plans) + "\n"
    # symbol names (s0, s77, ...) are torch's choice: numbered in order of appearance
    names: dict[str, str] = {}
    text = re.sub(r"\bs\d+\b", lambda m: names.setdefault(m.group(), f"S{len(names)}"), text)
    assert_matches_golden(text, GOLDEN / "symbolic.txt")
    assert '"symbolic": true' in split.dump()


def test_symbolic_sizes_are_never_compared() -> None:
    """No guard on a size: a trace over symbolic sizes records none for the pattern's
    own decisions (splitting by a given length needs divisibility, which torch's reshape
    guards itself)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    def f(x: Any) -> Any:
        y = ra.rearrange(x, "b c h w -> b (h w) c")
        y = ra.repeat(y, "b n c -> b n c r", r=2)
        return ra.reduce(y, "b n c r -> b c", "mean")

    graph = make_fx(f, tracing_mode="symbolic")(torch.zeros(3, 5, 7, 11))
    shape_env = next(node.meta["val"].node.shape_env for node in graph.graph.nodes
                     if node.op == "call_function" and "sym_size" in str(node.target))
    assert not shape_env.guards


def test_copy_false_under_symbolic_sizes() -> None:
    outcomes = []

    def f(x: Any) -> Any:
        outcomes.append(ra.rearrange(x, "b h w -> b (h w)", copy=False).shape)
        try:
            ra.rearrange(x.transpose(1, 2), "b h w -> b (h w)", copy=False)
        except ra.NoViewError as error:
            outcomes.append(str(error))
        return x

    _symbolic_plans(f, (2, 3, 4))
    assert len(outcomes) == 2 and "copy=False" in outcomes[1]


def test_einsum_over_traced_sizes_takes_einops_patterns_only() -> None:
    errors = []

    def f(x: Any) -> Any:
        try:
            ra.einsum(x, x, "b (h d), b (h d) -> b h", h=2)
        except ra.PatternError as error:
            errors.append(str(error))
        return ra.einsum(x, x, "b ..., b ... -> b")

    _symbolic_plans(f, (2, 6))
    assert len(errors) == 1 and "composed groups" in errors[0] and "(h d)" in errors[0]


def test_symbolic_pattern_errors_quote_the_pattern() -> None:
    errors = []

    def f(x: Any) -> Any:
        for call in (lambda: ra.rearrange(x, "b h -> b h w"),
                     lambda: ra.rearrange(x, "b h w -> b h w"),
                     lambda: ra.reduce(x, "b h -> b", "median")):
            try:
                call()
            except ra.RearrangeError as error:
                errors.append(str(error))
        return x

    _symbolic_plans(f, (2, 6))
    assert len(errors) == 3
    assert all("pattern '" in error for error in errors[:2]), errors
    assert "unknown reduction" in errors[2]
