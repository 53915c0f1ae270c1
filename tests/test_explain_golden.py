"""Golden files for the printed plan (``str(plan)``) of representative patterns.

Regenerate after an intended change with ``REARRANGE_UPDATE_GOLDEN=1 pytest
tests/test_explain_golden.py`` and review the diff like code.
"""

from __future__ import annotations

import json
import pathlib

import pytest

import rearrange as ra
from golden_check import assert_matches_golden

GOLDEN = pathlib.Path(__file__).parent / "golden" / "explain"

# name, shape, pattern, keyword arguments for explain()
PLANS = [
    ("heads_merge", (2, 8, 128, 64), "b h t d -> b t (h d)", {"dtype": "float32"}),
    ("merge_view", (2, 8, 128, 64), "b h t d -> b h (t d)", {"dtype": "float32"}),
    ("transpose_2d", (8192, 8192), "h w -> w h", {"dtype": "uint8"}),
    ("split_heads", (2, 512, 128), "b (h d) t -> b h t d", {"dtype": "float32", "h": 8}),
    ("vit_patchify", (2, 3, 224, 224), "b c (h p1) (w p2) -> b (h w) (p1 p2 c)",
     {"dtype": "float32", "p1": 16, "p2": 16}),
    ("pixel_shuffle", (1, 12, 8, 8), "b (c r1 r2) h w -> b c (h r1) (w r2)",
     {"dtype": "float32", "r1": 2, "r2": 2}),
    ("nhwc_to_nchw", (64, 224, 224, 3), "b h w c -> b c h w", {"dtype": "uint8"}),
    ("ellipsis", (2, 3, 4, 5), "b ... c -> b c (...)", {"dtype": "float64"}),
    ("reversal", (2, 3, 4, 5), "a b c d -> d c b a", {"dtype": "complex128"}),
    ("units", (2, 1, 3), "b 1 c -> b () c 1", {"dtype": "int64"}),
    ("transposed_input", (4, 6), "h w -> (h w)", {"dtype": "float32", "strides": (1, 4)}),
    ("broadcast_input", (3, 4), "a b -> (a b)", {"dtype": "float32", "strides": (0, 1)}),
    ("zero_size", (0, 3), "a b -> (b a)", {"dtype": "float32"}),
    ("zero_d", (), " -> 1", {"dtype": "float32"}),
    ("copy_true", (4, 6), "h w -> (h w)", {"dtype": "float32", "copy": True}),
    ("no_dtype", (6, 4), "(a b) c -> (b a) c", {"a": 2}),
    ("reduce_pool", (2, 8, 8, 3), "b (h 2) (w 2) c -> b h w c",
     {"dtype": "float32", "op": "reduce", "reduction": "max"}),
    ("reduce_mean_ellipsis", (2, 3, 4, 5), "b ... c -> (c b)",
     {"dtype": "int16", "op": "reduce", "reduction": "mean"}),
    ("reduce_to_scalar", (4, 6), "h w -> ", {"dtype": "float64", "op": "reduce",
                                             "reduction": "sum"}),
    ("repeat_view", (2, 3), "h w -> h r w", {"dtype": "float32", "op": "repeat", "r": 4}),
    ("repeat_merged_new_axes", (3,), "w -> (r s) w",
     {"dtype": "float32", "op": "repeat", "r": 2, "s": 3}),
    ("repeat_interleave", (64, 64, 3), "h w c -> (h 2) (w 2) c", {"dtype": "uint8", "op": "repeat"}),
    ("repeat_copy_true", (2, 3), "h w -> h w r", {"dtype": "float32", "op": "repeat", "r": 2,
                                                   "copy": True}),
    ("refused_copy_false", (2, 8, 128, 64), "b h t d -> b t (h d)",
     {"dtype": "float32", "copy": False}),
    ("view_copy_false", (2, 8, 128, 64), "b h t d -> b h (t d)",
     {"dtype": "float32", "copy": False}),
    ("repeat_refused", (64, 64, 3), "h w c -> (h 2) (w 2) c",
     {"dtype": "uint8", "op": "repeat", "copy": False}),
]


@pytest.fixture(autouse=True)
def _two_threads():
    """The kernel line names the thread count: pin it, whatever the machine has."""
    before = ra.get_num_threads()
    ra.set_num_threads(2)
    yield
    ra.set_num_threads(before)


@pytest.fixture(autouse=True)
def _kernels_off():
    """The "now" line says what a copy does at this moment (compiled or not yet): pin
    it to the one state that never changes."""
    before = ra.get_jit_mode()
    ra.set_jit_mode("off")
    yield
    ra.set_jit_mode(before)


@pytest.mark.parametrize(("name", "shape", "pattern", "options"), PLANS, ids=[p[0] for p in PLANS])
def test_printed_plan_matches_golden(name: str, shape: tuple, pattern: str, options: dict) -> None:
    text = str(ra.explain(shape, pattern, **options)) + "\n"
    assert_matches_golden(text, GOLDEN / f"{name}.txt")


@pytest.mark.parametrize(("name", "shape", "pattern", "options"), PLANS, ids=[p[0] for p in PLANS])
def test_dump_is_json_of_to_dict(name: str, shape: tuple, pattern: str, options: dict) -> None:
    plan = ra.explain(shape, pattern, **options)
    assert json.loads(plan.dump()) == plan.to_dict()
    data = plan.to_dict()
    assert data["output"]["shape"] == list(plan.output.shape)
    assert data["is_view"] == plan.is_view
    assert [s["op"] for s in data["steps"]] == [s.op for s in plan.steps]
