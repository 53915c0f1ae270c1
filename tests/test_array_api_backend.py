"""Arrays of any array-API namespace (array_api_strict: the standard and nothing more)
on the einops corpus, against einops on numpy copies of the same data (einops'
``array_api`` module hands array_api_strict lists where the standard wants tuples), and
numpy's own functions for the reductions einops does not name; never against this
library's numpy path, which shares the planner with the array-API path."""

from __future__ import annotations

import math

import array_api_strict as xp
import einops
import numpy as np
import pytest

import rearrange as ra
from corpus import load

REARRANGE = load("rearrange")
REDUCE = load("reduce")
REPEAT = load("repeat")


def _pair(shape):
    data = np.arange(math.prod(shape), dtype=np.float64).reshape(shape) / 3
    return data, xp.asarray(data)


def _numpy(array) -> np.ndarray:
    return np.from_dlpack(array)


# reduction -> what einops.reduce is given on the numpy copy: its own name, or numpy's
# function over the reduced axes (einops passes them as a tuple).
ORACLE_REDUCTIONS = {
    "sum": "sum", "max": "max", "mean": "mean", "prod": "prod", "any": "any",
    "var": lambda y, axes: np.var(y, axis=axes),
    "logsumexp": lambda y, axes: np.logaddexp.reduce(y, axis=axes),
    "count_nonzero": lambda y, axes: np.count_nonzero(y, axis=axes),
}


@pytest.mark.parametrize("entry", REARRANGE[::3])
def test_rearrange_matches_einops(entry: dict) -> None:
    example = entry["example"]
    _, array = _pair(example["shape"])
    got = ra.rearrange(array, entry["pattern"], **example["axes_lengths"])
    assert type(got) is type(array)
    expected = einops.rearrange(_numpy(array), entry["pattern"], **example["axes_lengths"])
    np.testing.assert_array_equal(_numpy(got), expected)


@pytest.mark.parametrize("entry", REDUCE)
@pytest.mark.parametrize("reduction", list(ORACLE_REDUCTIONS))
def test_reduce_matches_einops_and_numpy(entry: dict, reduction: str) -> None:
    example = entry["example"]
    _, array = _pair(example["shape"])
    got = ra.reduce(array, entry["pattern"], reduction, **example["axes_lengths"])
    expected = np.asarray(einops.reduce(_numpy(array), entry["pattern"],
                                        ORACLE_REDUCTIONS[reduction], **example["axes_lengths"]))
    np.testing.assert_allclose(_numpy(got), expected, rtol=1e-12)
    assert _numpy(got).dtype == expected.dtype


@pytest.mark.parametrize("entry", REPEAT)
def test_repeat_matches_einops(entry: dict) -> None:
    example = entry["example"]
    _, array = _pair(example["shape"])
    got = ra.repeat(array, entry["pattern"], **example["axes_lengths"])
    expected = einops.repeat(_numpy(array), entry["pattern"], **example["axes_lengths"])
    np.testing.assert_array_equal(_numpy(got), expected)


def test_copy_flags_and_explain() -> None:
    data, array = _pair((2, 3, 4))
    with pytest.raises(ra.NoViewError):
        ra.rearrange(array, "a b c -> a (c b)", copy=False)
    fresh = ra.rearrange(array, "a b c -> a b c", copy=True)
    np.testing.assert_array_equal(_numpy(fresh), data)
    plan = ra.explain(array, "a b c -> a (c b)")
    assert not plan.is_view and all(step.kernel is None for step in plan.steps)
    assert "memory layout is hidden" in str(plan)
    integer = xp.asarray(np.arange(6).reshape(2, 3))
    assert ra.reduce(integer, "a b -> a", "mean").dtype == xp.float64
    assert [int(v) for v in _numpy(ra.reduce(integer, "a b -> a", "argmax"))] == [2, 2]


def test_pack_unpack_einsum_parse_shape() -> None:
    x, a = _pair((2, 3, 4))
    y, b = _pair((2, 3))
    packed, shapes = ra.pack([a, b], "i j *")
    expected, expected_shapes = einops.pack([x, y], "i j *")
    np.testing.assert_array_equal(_numpy(packed), expected)
    assert shapes == expected_shapes
    for got, want in zip(ra.unpack(packed, shapes, "i j *"), (x, y)):
        np.testing.assert_array_equal(_numpy(got), want)
    w_np, w = _pair((4, 5))
    # numpy's einsum, then numpy's reshape / moveaxis for the composed and ellipsis axes
    for pattern, operands, expected in [
            ("a b c, c d -> (a d) b", (a, w), np.einsum("abc,cd->adb", x, w_np).reshape(10, 3)),
            ("a b c, a b c ->", (a, a), np.einsum("abc,abc->", x, x)),
            ("... c -> c ...", (a,), np.moveaxis(x, -1, 0)),
            ("a b c, a b -> c", (a, b), np.einsum("abc,ab->c", x, y))]:
        np.testing.assert_allclose(_numpy(ra.einsum(*operands, pattern)), expected, rtol=1e-12)
    with pytest.raises(ra.RearrangeError, match="diagonal"):
        ra.einsum(xp.asarray(np.ones((3, 3))), "a a -> a")
    assert ra.parse_shape(a, "b _ w") == {"b": 2, "w": 4}
