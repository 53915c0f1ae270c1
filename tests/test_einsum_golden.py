"""Golden files for the printed einsum plan (``str(explain_einsum(...))``).

Regenerate after an intended change with ``REARRANGE_UPDATE_GOLDEN=1 pytest
tests/test_einsum_golden.py`` and review the diff like code.
"""

from __future__ import annotations

import json
import pathlib

import pytest

from rearrange.contraction import explain_einsum
from golden_check import assert_matches_golden

GOLDEN = pathlib.Path(__file__).parent / "golden" / "einsum"

# name, input shapes, pattern, keyword arguments for explain_einsum()
PLANS = [
    ("attention_scores", [(2, 8, 128, 64), (2, 8, 128, 64)], "b h i d, b h j d -> b h i j",
     {"dtype": "float32"}),
    ("split_heads_input", [(2, 512, 16), (2, 8, 16, 64)], "b (h d) t, b h s d -> b h t s",
     {"dtype": "float32"}),
    ("merge_heads_output", [(2, 4, 5, 8), (8, 3)], "b h t d, d e -> b t (h e)",
     {"dtype": "float64"}),
    ("unit_axes", [(2, 1, 3), (3, 4)], "a () b, b c -> a 1 c", {"dtype": "int64"}),
    ("broadcast_size_one", [(3, 4), (1,)], "i j, j -> i", {"dtype": "float64"}),
    ("trace", [(5, 5)], "i i ->", {"dtype": "float64"}),
    ("ellipsis_grouped", [(3, 2, 4), (4, 5)], "... d, d e -> (...) e", {"dtype": "float32"}),
    ("three_inputs_path", [(20, 30, 40), (40, 30, 50), (20, 20, 30)],
     "a b c, c b d, a g k -> a b k", {"dtype": "float64"}),
    ("strided_input", [(4, 6), (6,)], "(a b) c, c -> b a",
     {"dtype": ["float32", "float64"], "strides": [(1, 4), (2,)], "a": 2}),
    ("underscore_renamed", [(6, 4), (4,)], "(_ i) j, j -> i", {"dtype": "int32", "i": 3}),
    ("zero_size", [(0, 3), (3, 4)], "a b, b c -> (a c)", {"dtype": "float32"}),
    ("no_dtype", [(2, 12), (12, 5)], "b (h d), (h d) e -> b h e", {"h": 3}),
]


@pytest.mark.parametrize(("name", "shapes", "pattern", "options"), PLANS, ids=[p[0] for p in PLANS])
def test_printed_plan_matches_golden(name: str, shapes: list, pattern: str, options: dict) -> None:
    text = str(explain_einsum(shapes, pattern, **options)) + "\n"
    assert_matches_golden(text, GOLDEN / f"{name}.txt")


@pytest.mark.parametrize(("name", "shapes", "pattern", "options"), PLANS, ids=[p[0] for p in PLANS])
def test_dump_is_json_of_to_dict(name: str, shapes: list, pattern: str, options: dict) -> None:
    plan = explain_einsum(shapes, pattern, **options)
    assert json.loads(plan.dump()) == plan.to_dict()
    data = plan.to_dict()
    assert data["output"]["shape"] == list(plan.output.shape)
    assert data["is_view"] is False and data["subscripts"] == plan.subscripts
    assert [s["op"] for s in data["steps"]] == [s.op for s in plan.steps]
    assert [s["shape"] for s in data["inputs"]] == [list(s) for s in shapes]
