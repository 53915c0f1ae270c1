"""Golden files for the printed plans of pack, unpack and check_shape (``str(plan)``).

Regenerate after an intended change with ``REARRANGE_UPDATE_GOLDEN=1 pytest
tests/test_pack_golden.py`` and review the diff like code.
"""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

from rearrange.packing import explain_pack, explain_unpack
from rearrange.shapes import explain_shape
from golden_check import assert_matches_golden

GOLDEN = pathlib.Path(__file__).parent / "golden" / "pack"


def _strided() -> np.ndarray:
    return np.zeros((4, 6, 8), np.float32)[:, ::2, ::-1]  # strides (48, 16, -1) elements


def _transposed() -> np.ndarray:
    return np.zeros((3, 12, 2), np.int16).transpose(2, 1, 0)  # shape (2, 12, 3)


# name -> a function making the plan
PLANS = {
    "pack_einops_doc": lambda: explain_pack([(2, 3, 5), (2, 3, 7, 5), (2, 3, 7, 9, 5)],
                                            "i j * k", dtype="float32"),
    "pack_star_first": lambda: explain_pack([(3, 2, 3), (2, 2, 2, 3)], "* n d", dtype="int64"),
    "pack_mixed_dtypes": lambda: explain_pack(
        [np.zeros((2, 3), np.int32), np.zeros((2, 2, 2), np.float32), np.zeros(2, np.bool_)],
        "b *"),
    "pack_scalars": lambda: explain_pack([(), (3,), ()], "*", dtype="uint8"),
    "pack_single": lambda: explain_pack([(2, 3, 4)], "b * c", dtype="float64"),
    "pack_strided_input": lambda: explain_pack([_strided(), (4, 5)], "a *", dtype="float32"),
    "pack_no_dtype": lambda: explain_pack([(2, 3), (2, 0)], "b *"),
    "pack_zero_size": lambda: explain_pack([(0, 3, 4), (0, 2, 4)], "b * d", dtype="float32"),
    "unpack_einops_doc": lambda: explain_unpack((2, 3, 71, 5), [(), (7,), (7, 9)], "i j * k",
                                                dtype="float32"),
    "unpack_minus_one": lambda: explain_unpack((2, 3, 12, 4), [(2,), (-1, 2), (2,)],
                                               "q b * d", dtype="float64"),
    "unpack_transposed_input": lambda: explain_unpack(_transposed(), [(4,), (4, 2)], "a * c"),
    "unpack_whole": lambda: explain_unpack((8, 2), [(2, 4)], "* c", dtype="int32"),
    "unpack_zero_size": lambda: explain_unpack((2, 5), [(0,), (5,), (0, 3)], "b *"),
    "shape_composition": lambda: explain_shape((2, 12, 3), "b (h w) c", h=4),
    "shape_ellipsis": lambda: explain_shape((2, 3, 5, 7), "... h w"),
    "shape_repeats": lambda: explain_shape((6, 2, 4, 2, 1), "(h w) h (_ 2) 2 ()"),
}


@pytest.mark.parametrize("name", PLANS)
def test_printed_plan_matches_golden(name: str) -> None:
    text = str(PLANS[name]()) + "\n"
    assert_matches_golden(text, GOLDEN / f"{name}.txt")


@pytest.mark.parametrize("name", PLANS)
def test_dump_is_json_of_to_dict(name: str) -> None:
    plan = PLANS[name]()
    data = plan.to_dict()
    assert json.loads(plan.dump()) == data
    assert data["is_view"] == plan.is_view
    if "steps" in data:
        assert [s["op"] for s in data["steps"]] == [s.op for s in plan.steps]
        assert [layout["shape"] for layout in data["outputs"]] == [
            list(layout.shape) for layout in plan.outputs]
