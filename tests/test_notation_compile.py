"""#38: a function chaining get_at, softmax and a concatenation compiles to one graph over
changing shapes with ``torch.compile(dynamic=True, fullgraph=True)``, and gives what eager
and einx give."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import rearrange as ra

torch = pytest.importorskip("torch")
einx = pytest.importorskip("einx")

pytestmark = pytest.mark.slow     # compiles: tens of seconds


def chain(table, ids, extra):
    embedded = ra.get_at(table, ids, "[v] d, b t -> b t d")
    weights = ra.softmax(embedded, "b [t] d")
    return ra.rearrange((weights, extra), "b t d, b t e -> b t (d + e)")


def chain_einx(table, ids, extra):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        embedded = einx.get_at("[v] d, b t -> b t d", table, ids)
        weights = einx.softmax("b [t] d", embedded)
        return einx.rearrange("b t d, b t e -> b t (d + e)", weights, extra)


SHAPES = [  # (vocabulary, d, b, t, e)
    (50, 8, 2, 5, 3),
    (64, 16, 3, 7, 4),
    (40, 12, 4, 9, 6),
    (70, 8, 5, 3, 2),
]


def _inputs(vocabulary, d, b, t, e, seed):
    generator = torch.Generator().manual_seed(seed)
    table = torch.randn(vocabulary, d, generator=generator, dtype=torch.float64)
    ids = torch.randint(0, vocabulary, (b, t), generator=generator)
    extra = torch.randn(b, t, e, generator=generator, dtype=torch.float64)
    return table, ids, extra


def test_one_graph_over_changing_shapes():
    graphs = []

    def counting_backend(graph_module, example_inputs):
        graphs.append(graph_module)
        return graph_module.forward

    torch._dynamo.reset()
    compiled = torch.compile(chain, backend=counting_backend, dynamic=True, fullgraph=True)
    for seed, shape in enumerate(SHAPES):
        table, ids, extra = _inputs(*shape, seed)
        got = compiled(table, ids, extra)
        eager = chain(table, ids, extra)
        oracle = chain_einx(table.numpy(), ids.numpy(), extra.numpy())
        torch.testing.assert_close(got, eager)
        np.testing.assert_allclose(got.numpy(), oracle, rtol=1e-12, atol=1e-12)
    assert len(graphs) == 1, f"{len(graphs)} graphs for {len(SHAPES)} shapes"


def test_gradients_flow_through_the_chain():
    table, ids, extra = _inputs(*SHAPES[0], 0)
    table.requires_grad_(True)
    extra.requires_grad_(True)
    compiled = torch.compile(chain, backend="aot_eager", dynamic=True, fullgraph=True)
    (compiled(table, ids, extra) ** 2).sum().backward()
    got = (table.grad.clone(), extra.grad.clone())
    table.grad = extra.grad = None
    (chain(table, ids, extra) ** 2).sum().backward()
    torch.testing.assert_close(got[0], table.grad)
    torch.testing.assert_close(got[1], extra.grad)
