"""rearrange's copies go through the numba kernel (arrays above its tiny-copy threshold):
same values as einops for every dtype class, layout and thread count, on numpy arrays,
rearrange.Tensor and out=."""

from __future__ import annotations

import einops
import numpy as np
import pytest

import rearrange as ra

# pattern, input shape (large enough that the kernel, not np.copyto, runs), lengths
COPIES = [
    ("h w -> w h", (192, 160), {}),                    # a view: copy=True makes the kernel run
    ("h w -> (w h)", (192, 160), {}),
    ("b h t d -> b t (h d)", (4, 6, 64, 32), {}),
    ("b h w c -> b c h w", (4, 48, 40, 3), {}),
    ("b c h w -> (b h w) c", (4, 64, 24, 20), {}),
    ("b c (h p1) (w p2) -> b (h w) (p1 p2 c)", (2, 3, 64, 64), {"p1": 8, "p2": 8}),
    ("b (c r1 r2) h w -> b c (h r1) (w r2)", (2, 16, 32, 32), {"r1": 2, "r2": 2}),
    ("a b c d -> (d c b a)", (16, 9, 10, 22), {}),
]
DTYPES = ["bool", "uint8", "int16", "float32", "float64", "complex128", ">f4", "datetime64[s]",
          [("a", "<i2"), ("b", "u1")]]


def _data(shape, dtype) -> np.ndarray:
    count = int(np.prod(shape))
    values = np.arange(count) % 251
    dtype = np.dtype(dtype)
    if dtype.fields:
        out = np.zeros(count, dtype)
        out["a"], out["b"] = values, values // 2
        return out.reshape(shape)
    if dtype.kind == "M":
        return values.astype("int64").astype(dtype).reshape(shape)
    return values.astype(dtype).reshape(shape)


@pytest.fixture(params=[1, 2], ids=["1-thread", "2-threads"])
def threads(request):
    before = ra.get_num_threads()
    ra.set_num_threads(request.param)
    yield request.param
    ra.set_num_threads(before)


@pytest.mark.parametrize(("pattern", "shape", "lengths"), COPIES, ids=[c[0] for c in COPIES])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_kernel_copies_match_einops(pattern, shape, lengths, dtype, threads) -> None:
    x = _data(shape, dtype)
    expected = einops.rearrange(x, pattern, **lengths)
    for source in (x, x[::-1], np.broadcast_to(x[:1], x.shape)):
        expected = einops.rearrange(source, pattern, **lengths)
        got = ra.rearrange(source, pattern, copy=True, **lengths)
        assert got.dtype == source.dtype and got.flags.c_contiguous
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize(("pattern", "shape", "lengths"), COPIES, ids=[c[0] for c in COPIES])
def test_kernel_is_named_in_explain_and_used(pattern, shape, lengths) -> None:
    x = _data(shape, "float32")
    plan = ra.explain(x, pattern, copy=True, **lengths)
    copy_step = next(step for step in plan.steps if step.is_copy)
    # The kernel's planner may hand a copy to numpy where that is as fast; either way
    # explain names the choice and its reason.
    assert copy_step.kernel is not None
    assert f"kernel {copy_step.kernel.variant}" in str(plan) and copy_step.kernel.reason in str(plan)
    assert plan.to_dict()["steps"][-1 if copy_step is plan.steps[-1] else
                                    plan.steps.index(copy_step)]["kernel"]["variant"] == copy_step.kernel.variant


@pytest.mark.parametrize(("pattern", "shape", "lengths"), COPIES, ids=[c[0] for c in COPIES])
def test_tensor_and_out_use_the_kernel_too(pattern, shape, lengths, threads) -> None:
    x = _data(shape, "float64")
    expected = einops.rearrange(x, pattern, **lengths)
    np.testing.assert_array_equal(ra.rearrange(ra.from_numpy(x), pattern, copy=True, **lengths).numpy(),
                                  expected)
    out = np.empty(expected.shape, expected.dtype)
    ra.rearrange(x, pattern, out=out, **lengths)
    np.testing.assert_array_equal(out, expected)


def test_changing_threads_after_planning_still_copies_right() -> None:
    x = _data((128, 96), "float32")
    before = ra.get_num_threads()
    try:
        for n in (2, 1, 2):
            ra.set_num_threads(n)
            np.testing.assert_array_equal(ra.rearrange(x, "h w -> (w h)"), x.T.reshape(-1))
    finally:
        ra.set_num_threads(before)
