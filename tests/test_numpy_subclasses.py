"""numpy subclasses give what einops gives, at every size: masked arrays keep their mask,
``np.matrix`` its type (and its 2-d quirks), a user's subclass its type and attributes.

The numpy path's fast copies (the kernel into a fresh ``np.empty``, broadcast views,
``np.empty`` + assignment for pack) would return plain ndarrays; subclasses take their
own methods instead (rearrange.backends._numpy_subclass). Each case runs below and above
the size where a plain ndarray's copy takes the kernel, and plain arrays of the same
layout are called in between, so a cache entry of one kind is never served to the other.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

einops = pytest.importorskip("einops")

import rearrange as ra  # noqa: E402


class Tagged(np.ndarray):
    """A user's subclass with an attribute that views and copies carry along."""

    def __array_finalize__(self, obj):
        self.tag = getattr(obj, "tag", None)


def masked(x):
    return np.ma.masked_array(x, mask=(x.astype(np.int64) % 3 == 0))


def matrix(x):
    with warnings.catch_warnings():     # np.matrix is pending deprecation; users still have it
        warnings.simplefilter("ignore", PendingDeprecationWarning)
        return np.matrix(x)


def tagged(x):
    t = x.view(Tagged)
    t.tag = "mine"
    return t


KINDS = {"masked": masked, "matrix": matrix, "tagged": tagged}

OPERATIONS = {
    "rearrange-copy": (lambda m: ra.rearrange(m, "h w -> (w h)"),
                       lambda m: einops.rearrange(m, "h w -> (w h)")),
    "rearrange-view": (lambda m: ra.rearrange(m, "h w -> w h"),
                       lambda m: einops.rearrange(m, "h w -> w h")),
    "rearrange-copy=True": (lambda m: ra.rearrange(m, "h w -> w h", copy=True),
                            lambda m: einops.rearrange(m, "h w -> w h").copy()),
    "rearrange-split": (lambda m: ra.rearrange(m, "h (w a) -> a h w", a=2),
                        lambda m: einops.rearrange(m, "h (w a) -> a h w", a=2)),
    "rearrange-merge": (lambda m: ra.rearrange(m, "h w -> (h w)"),
                        lambda m: einops.rearrange(m, "h w -> (h w)")),
    "reduce-sum": (lambda m: ra.reduce(m, "h w -> w", "sum"),
                   lambda m: einops.reduce(m, "h w -> w", "sum")),
    "reduce-max-pool": (lambda m: ra.reduce(m, "(h 2) (w 2) -> h w", "max"),
                        lambda m: einops.reduce(m, "(h 2) (w 2) -> h w", "max")),
    "reduce-mean-all": (lambda m: ra.reduce(m, "h w -> ", "mean"),
                        lambda m: einops.reduce(m, "h w -> ", "mean")),
    "repeat-new-axis": (lambda m: ra.repeat(m, "h w -> h w c", c=2),
                        lambda m: einops.repeat(m, "h w -> h w c", c=2)),
    "repeat-merged": (lambda m: ra.repeat(m, "h w -> (w c) h", c=2),
                      lambda m: einops.repeat(m, "h w -> (w c) h", c=2)),
    "pack": (lambda m: ra.pack([m, m], "h *")[0], lambda m: einops.pack([m, m], "h *")[0]),
    "unpack": (lambda m: ra.unpack(m, [(2,), (m.shape[1] - 2,)], "h *"),
               lambda m: einops.unpack(m, [(2,), (m.shape[1] - 2,)], "h *")),
    "einsum": (lambda m: ra.einsum(m, m, "a b, a c -> b c"),
               lambda m: einops.einsum(m, m, "a b, a c -> b c")),
}

# Below the kernel's threshold, and above it (checked for a plain ndarray below).
SIZES = {"small": 16, "large": 1024}


def test_large_plain_copies_take_the_kernel():
    x = np.zeros((SIZES["large"],) * 2, np.float32)
    copy = next(step for step in ra.explain(x, "h w -> (w h)").steps if step.is_copy)
    assert copy.kernel.variant not in ("numpy", "empty", "torch"), copy.kernel
    small = np.zeros((SIZES["small"],) * 2, np.float32)
    copy = next(step for step in ra.explain(small, "h w -> (w h)").steps if step.is_copy)
    assert copy.kernel.variant == "numpy", copy.kernel


def _outcome(call, x):
    try:
        return call(x), None
    except ValueError as error:   # np.matrix refuses more than 2 dims; RearrangeError is one
        return None, error


def _assert_same(ours, theirs):
    if isinstance(theirs, (list, tuple)):
        assert isinstance(ours, type(theirs)) and len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            _assert_same(a, b)
        return
    assert type(ours) is type(theirs), (type(ours), type(theirs))
    assert np.shape(ours) == np.shape(theirs)
    # einsum sums in another order than einops' call: floats to rounding
    np.testing.assert_allclose(np.asarray(np.ma.getdata(ours)),
                               np.asarray(np.ma.getdata(theirs)), rtol=1e-5)
    if isinstance(theirs, np.ma.MaskedArray):
        np.testing.assert_array_equal(np.ma.getmaskarray(ours), np.ma.getmaskarray(theirs))
    if isinstance(theirs, Tagged):
        assert ours.tag == theirs.tag


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("operation", OPERATIONS)
def test_subclass_equals_einops(operation, kind, size):
    ours, theirs = OPERATIONS[operation]
    n = SIZES[size]
    plain = np.arange(n * n, dtype=np.float32).reshape(n, n)
    x = KINDS[kind](plain)
    before = np.array(np.ma.getdata(x), copy=True)
    mask_before = np.ma.getmaskarray(x).copy() if kind == "masked" else None
    for _ in range(2):    # warm: the second call is served from the caches
        ours(plain)       # a plain array of the same layout between: a separate entry
        result, error = _outcome(ours, x)
        expected, expected_error = _outcome(theirs, x)
        if expected_error is not None:
            assert error is not None, f"einops raised {expected_error!r}; we returned"
            assert isinstance(error, ra.RearrangeError), repr(error)
        else:
            assert error is None, error
            _assert_same(result, expected)
    np.testing.assert_array_equal(np.ma.getdata(x), before)      # the input is never written
    if mask_before is not None:
        np.testing.assert_array_equal(np.ma.getmaskarray(x), mask_before)


@pytest.mark.parametrize("kind", KINDS)
def test_plain_arrays_after_subclasses_stay_plain(kind):
    """The same pattern and layout, a subclass first: a plain array still gets the numpy
    path (its views and kernel copies), not the subclass's entry."""
    n = SIZES["large"]
    plain = np.arange(n * n, dtype=np.float32).reshape(n, n)
    ra.rearrange(KINDS[kind](plain), "h w -> (w h)")
    result = ra.rearrange(plain, "h w -> (w h)")
    assert type(result) is np.ndarray
    np.testing.assert_array_equal(result, plain.T.reshape(-1))
    view = ra.repeat(plain, "h w -> h w c", c=2)
    assert type(view) is np.ndarray and view.strides[-1] == 0   # the broadcast view


def test_explain_says_the_subclass_copies():
    plan = ra.explain(masked(np.zeros((64, 64), np.float32)), "h w -> (w h)")
    copy = next(step for step in plan.steps if step.is_copy)
    assert "numpy.ma.MaskedArray" in copy.kernel.reason
    assert "reshape" in copy.kernel.reason
