"""rearrange against einops on the corpus of real einops calls (numpy backend)."""

from __future__ import annotations

import math

import einops
import numpy as np
import pytest

import rearrange as ra
from corpus import load

VALID = load("rearrange", "example")
EINOPS_ERRORS = load("rearrange", "example_error")


def _input(shape: list[int]) -> np.ndarray:
    return np.arange(math.prod(shape), dtype=np.float32).reshape(shape)


@pytest.mark.parametrize("entry", VALID)
def test_same_result_as_einops(entry: dict) -> None:
    example = entry["example"]
    x = _input(example["shape"])
    before = x.copy()
    expected = einops.rearrange(x, entry["pattern"], **example["axes_lengths"])
    got = ra.rearrange(x, entry["pattern"], **example["axes_lengths"])
    assert got.shape == expected.shape == tuple(example["output_shape"])
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)
    if np.shares_memory(expected, x):
        assert np.shares_memory(got, x), "einops returned a view, rearrange copied"
    np.testing.assert_array_equal(x, before)


@pytest.mark.parametrize("entry", EINOPS_ERRORS)
def test_same_errors_as_einops(entry: dict) -> None:
    x = _input([2, 3, 4])
    with pytest.raises(ra.RearrangeError):
        ra.rearrange(x, entry["pattern"], **entry["axes_lengths"])


@pytest.mark.parametrize("entry", VALID)
def test_explain_and_to_source_agree(entry: dict) -> None:
    """explain() predicts what rearrange() does, and to_source() computes the same."""
    example = entry["example"]
    x = _input(example["shape"])
    plan = ra.explain(x, entry["pattern"], **example["axes_lengths"])
    got = ra.rearrange(x, entry["pattern"], **example["axes_lengths"])
    assert plan.output.shape == got.shape
    assert plan.is_view == (np.shares_memory(got, x) or x.size == 0)
    source = eval(plan.to_source("numpy"), {"x": x})
    np.testing.assert_array_equal(source, got)
