"""Arrays of any array-API namespace (array_api_strict: the standard and nothing more)
against numpy on the einops corpus."""

from __future__ import annotations

import math

import array_api_strict as xp
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


@pytest.mark.parametrize("entry", REARRANGE[::3])
def test_rearrange_matches_numpy(entry: dict) -> None:
    example = entry["example"]
    data, array = _pair(example["shape"])
    got = ra.rearrange(array, entry["pattern"], **example["axes_lengths"])
    assert type(got) is type(array)
    np.testing.assert_array_equal(_numpy(got), ra.rearrange(data, entry["pattern"], **example["axes_lengths"]))


@pytest.mark.parametrize("entry", REDUCE)
@pytest.mark.parametrize("reduction", ["sum", "max", "mean", "prod", "any", "var", "logsumexp",
                                       "count_nonzero"])
def test_reduce_matches_numpy(entry: dict, reduction: str) -> None:
    example = entry["example"]
    data, array = _pair(example["shape"])
    got = ra.reduce(array, entry["pattern"], reduction, **example["axes_lengths"])
    expected = ra.reduce(data, entry["pattern"], reduction, **example["axes_lengths"])
    np.testing.assert_allclose(_numpy(got), expected, rtol=1e-12)
    assert _numpy(got).dtype == expected.dtype


@pytest.mark.parametrize("entry", REPEAT)
def test_repeat_matches_numpy(entry: dict) -> None:
    example = entry["example"]
    data, array = _pair(example["shape"])
    got = ra.repeat(array, entry["pattern"], **example["axes_lengths"])
    np.testing.assert_array_equal(_numpy(got), ra.repeat(data, entry["pattern"], **example["axes_lengths"]))


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
    expected, expected_shapes = ra.pack([x, y], "i j *")
    np.testing.assert_array_equal(_numpy(packed), expected)
    assert shapes == expected_shapes
    for got, want in zip(ra.unpack(packed, shapes, "i j *"), ra.unpack(expected, shapes, "i j *")):
        np.testing.assert_array_equal(_numpy(got), want)
    w_np, w = _pair((4, 5))
    for pattern, operands in [("a b c, c d -> (a d) b", ((x, w_np), (a, w))),
                              ("a b c, a b c ->", ((x, x), (a, a))),
                              ("... c -> c ...", ((x,), (a,))),
                              ("a b c, a b -> c", ((x, y), (a, b)))]:
        np.testing.assert_allclose(_numpy(ra.einsum(*operands[1], pattern)),
                                   ra.einsum(*operands[0], pattern))
    with pytest.raises(ra.RearrangeError, match="diagonal"):
        ra.einsum(xp.asarray(np.ones((3, 3))), "a a -> a")
    assert ra.parse_shape(a, "b _ w") == {"b": 2, "w": 4}
