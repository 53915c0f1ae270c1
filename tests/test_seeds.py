"""Every example of the seed documents (``tests/data/seeds/*.txt``) as a test.

The seeds are PyTorch memory-model write-ups. Each example runs as written, with
``torch`` bound to a fixture that is ``rearrange`` (the point: ``import rearrange as
torch`` must behave as the seeds say) and then real ``torch`` (the oracle: the seeds'
claims hold in torch 2.13 too, so nothing here is a number copied from our own output).
Where a seed prints a value, the value is asserted; for random data, the relation the
seed shows (an element equals the storage element its strides point at).

Test names carry the seed number: ``test_000_...`` is ``000_b69c1c87c2e3eb3b.txt``.
"""

from __future__ import annotations

import math
import pathlib
import warnings
from typing import Any, Callable

import numpy as np
import pytest

import rearrange

real_torch = pytest.importorskip("torch")
einops = pytest.importorskip("einops")

# torch's Tensor.storage() warns that TypedStorage is deprecated; the seeds use it.
pytestmark = pytest.mark.filterwarnings("ignore:TypedStorage is deprecated:UserWarning")

VIEW_ERROR = (
    "view size is not compatible with input tensor's size and stride (at least one "
    "dimension spans across two contiguous subspaces). Use .reshape(...) instead."
)


@pytest.fixture(params=["rearrange", "torch"])
def torch(request: pytest.FixtureRequest) -> Any:
    """The module the seed's ``torch`` means: ours first, then the real one."""
    return rearrange if request.param == "rearrange" else real_torch


def shares_storage(a: Any, b: Any) -> bool:
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


# ---------------------------------------------------------------------- seed 003's helpers

def idx_to_pos(a, idx):
    return sum(i * s for i, s in zip(idx, a.stride()))


def is_contiguous(a):
    expected_stride = 1
    for x, y in reversed(tuple(zip(a.shape, a.stride()))):
        if y != expected_stride:
            return False
        expected_stride *= x
    return True


# ---------------------------------------------------------------------- seed 000

def test_000_storage_of_a_2d_tensor(torch: Any) -> None:
    x = torch.tensor([[1, 2, 3], [4, 5, 6]])
    assert x.tolist() == [[1, 2, 3], [4, 5, 6]]
    storage = x.storage()
    assert len(storage) == 6  # [torch.LongStorage of size 6]
    assert storage.tolist() == [1, 2, 3, 4, 5, 6]
    assert x.dtype == torch.int64  # a LongStorage
    if torch is rearrange:
        assert repr(storage).endswith("[rearrange.LongStorage of size 6]")


def test_000_strides_of_x(torch: Any) -> None:
    x = torch.tensor([[1, 2, 3], [4, 5, 6]])
    assert x.stride() == (3, 1)
    # "from x[0, 1] to x[0, 2] we would only need 1 jump from 2 to 3, but from x[0, 1]
    # to x[1, 1] we would need 3 jumps from 2 to 5"
    storage = x.storage()
    assert storage[idx_to_pos(x, (0, 1))] == 2
    assert storage[idx_to_pos(x, (0, 2))] == 3
    assert storage[idx_to_pos(x, (1, 1))] == 5


def test_000_strides_of_rand(torch: Any) -> None:
    y = torch.rand(3, 4, 5)
    assert y.stride() == (20, 5, 1)
    assert y.stride(0) == 20
    # The seed writes "y.stride(1) == y.size(0)"; the rule it states, S_k = prod of the
    # sizes after k, gives y.size(2).
    assert y.stride(0) == y.size(1) * y.size(2)
    assert y.stride(1) == y.size(2)
    assert y.stride(2) == 1
    assert y.is_contiguous()


def test_000_contiguous_index_formula(torch: Any) -> None:
    """X[k1, ..., kN] == X_flat[k1 * prod(D2..DN) + ... + kN] for x = arange(12).reshape(3, 4)."""
    x = torch.arange(12).reshape(3, 4)
    flat = x.storage()
    shape = tuple(x.shape)
    for k1 in range(shape[0]):
        for k2 in range(shape[1]):
            assert x[k1, k2].item() == flat[k1 * shape[1] + k2] == k1 * 4 + k2


def test_000_view_of_a_transpose_raises(torch: Any) -> None:
    x = torch.arange(12).reshape(3, 4).t()
    with pytest.raises(RuntimeError) as caught:
        x.view(-1)
    assert str(caught.value) == VIEW_ERROR
    if torch is rearrange:
        assert isinstance(caught.value, rearrange.RearrangeError)


def test_000_bbox_pred_chain(torch: Any) -> None:
    """``bbox_pred.permute(0, 2, 3, 1).reshape(-1, 4)``: the reshape has to copy."""
    bbox_pred = torch.arange(2 * 4 * 3 * 5).reshape(2, 4, 3, 5)
    permuted = bbox_pred.permute(0, 2, 3, 1)
    result = permuted.reshape(-1, 4)
    assert tuple(result.shape) == (30, 4)
    assert not permuted.is_contiguous() and result.is_contiguous()
    assert not shares_storage(result, bbox_pred)
    # Row r holds the 4 box coordinates of anchor r: bbox_pred[n, :, h, w].
    assert result[7].tolist() == bbox_pred[0, :, 1, 2].tolist()


def test_000_detectron2_as_tensor_of_ascontiguousarray(torch: Any) -> None:
    """``torch.as_tensor(np.ascontiguousarray(image.transpose(2, 0, 1)))`` shares the array."""
    image = np.arange(4 * 5 * 3, dtype=np.uint8).reshape(4, 5, 3)  # H, W, C
    chw = np.ascontiguousarray(image.transpose(2, 0, 1))
    tensor = torch.as_tensor(chw)
    assert tuple(tensor.shape) == (3, 4, 5)
    assert tensor.is_contiguous()
    assert tensor.stride() == (20, 5, 1)
    assert tensor.tolist() == image.transpose(2, 0, 1).tolist()
    chw[1, 2, 3] = 255  # no copy was made: the write shows in the tensor
    assert tensor[1, 2, 3].item() == 255


# ---------------------------------------------------------------------- seed 001

def test_001_row_major_layout(torch: Any) -> None:
    X = torch.arange(6).reshape(2, 3)  # noqa: N806 - the seed's name
    assert X.tolist() == [[0, 1, 2], [3, 4, 5]]
    assert X.storage().tolist() == [0, 1, 2, 3, 4, 5]
    assert tuple(X.shape) == (2, 3)
    assert X.stride() == (3, 1)
    assert X.is_contiguous()


def test_001_view_vs_reshape(torch: Any) -> None:
    X = torch.arange(6).reshape(2, 3)  # noqa: N806
    assert X.view(3, 2).tolist() == [[0, 1], [2, 3], [4, 5]]  # works - view
    assert shares_storage(X.view(3, 2), X)
    assert shares_storage(X.reshape(3, 2), X)  # works - view (no copy needed)
    with pytest.raises(RuntimeError, match=r"^view size is not compatible") as caught:
        X.T.view(-1)  # RuntimeError - strides incompatible
    assert str(caught.value) == VIEW_ERROR
    explicit = X.T.contiguous().view(-1)  # works - explicit copy via contiguous()
    silent = X.T.reshape(-1)  # works - silent copy
    assert explicit.tolist() == silent.tolist() == [0, 3, 1, 4, 2, 5]
    assert not shares_storage(explicit, X) and not shares_storage(silent, X)


# The catalogue of axis-moving operations, applied to X of the shape each one needs.
# Every one is a metadata change: the result shares X's storage.
CATALOGUE = {
    ".T": ((2, 3), lambda X: X.T),
    ".mT": ((2, 3, 4), lambda X: X.mT),
    ".t()": ((2, 3), lambda X: X.t()),
    ".transpose(0, 2)": ((2, 3, 4), lambda X: X.transpose(0, 2)),
    ".swapaxes(0, 1)": ((2, 3, 4), lambda X: X.swapaxes(0, 1)),
    ".swapdims(0, 1)": ((2, 3, 4), lambda X: X.swapdims(0, 1)),
    ".permute(2, 0, 1)": ((2, 3, 4), lambda X: X.permute(2, 0, 1)),
    ".movedim(0, -1)": ((2, 3, 4), lambda X: X.movedim(0, -1)),
    ".movedim((0, 1), (-2, -1))": ((2, 3, 4), lambda X: X.movedim((0, 1), (-2, -1))),
    ".unsqueeze(0)": ((2, 3), lambda X: X.unsqueeze(0)),
    ".squeeze(0)": ((1, 2, 3), lambda X: X.squeeze(0)),
    ".flatten(1, 3)": ((2, 3, 4, 5), lambda X: X.flatten(1, 3)),
}


@pytest.mark.parametrize("shape, op", CATALOGUE.values(), ids=CATALOGUE.keys())
def test_001_axis_moving_catalogue_is_metadata_only(shape: tuple, op: Callable) -> None:
    ours = op(rearrange.arange(math.prod(shape)).reshape(shape))
    base = real_torch.arange(math.prod(shape)).reshape(shape)
    theirs = op(base)
    assert tuple(ours.shape) == tuple(theirs.shape)
    assert ours.stride() == theirs.stride()
    assert ours.is_contiguous() == theirs.is_contiguous()
    assert ours.tolist() == theirs.tolist()
    assert shares_storage(theirs, base)
    assert ours.storage_offset() == theirs.storage_offset() == 0


def test_001_T_reverses_dims_for_more_than_2d_and_is_deprecated(torch: Any) -> None:  # noqa: N802
    X = torch.arange(24).reshape(2, 3, 4)  # noqa: N806
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        reversed_ = X.T
    assert tuple(reversed_.shape) == (4, 3, 2)
    assert reversed_.stride() == X.permute(2, 1, 0).stride()
    if torch is rearrange:  # torch warns once per process, so only ours is checked here
        assert [w.category for w in caught] == [UserWarning]
        assert "deprecated" in str(caught[0].message)


def test_001_movedim_and_permute_semantics(torch: Any) -> None:
    X = torch.arange(24).reshape(2, 3, 4)  # noqa: N806
    # permute(2, 0, 1): new dim 0 is old dim 2; new dim 1 is old dim 0; ...
    assert tuple(X.permute(2, 0, 1).shape) == (4, 2, 3)
    assert X.permute(2, 0, 1)[3, 1, 2].item() == X[1, 2, 3].item()
    # movedim(0, -1) slides dim 0 to the last position.
    assert tuple(X.movedim(0, -1).shape) == (3, 4, 2)
    assert X.movedim(0, -1).stride() == X.permute(1, 2, 0).stride()
    assert tuple(X.movedim((0, 1), (-2, -1)).shape) == (4, 2, 3)


def test_001_squeeze_unsqueeze_preserve_contiguity(torch: Any) -> None:
    X = torch.arange(6).reshape(2, 3)  # noqa: N806
    assert X.unsqueeze(0).is_contiguous() and X.unsqueeze(2).is_contiguous()
    assert X.unsqueeze(1).squeeze(1).is_contiguous()
    assert not X.t().unsqueeze(0).is_contiguous()


def test_001_flatten_on_non_contiguous_copies(torch: Any) -> None:
    X = torch.arange(24).reshape(2, 3, 4)  # noqa: N806
    flat = X.transpose(0, 2).flatten(1, 2)
    assert not shares_storage(flat, X)
    assert flat.tolist() == X.transpose(0, 2).reshape(4, 6).tolist()


def test_001_transpose_vs_reshape_spot_check(torch: Any) -> None:
    X = torch.arange(120).reshape(2, 3, 4, 5)  # noqa: N806
    Y = X.transpose(0, 2)  # noqa: N806 - shape (4, 3, 2, 5)
    Z = X.reshape(4, 3, 2, 5)  # noqa: N806 - shape (4, 3, 2, 5)
    assert tuple(Y.shape) == tuple(Z.shape) == (4, 3, 2, 5)
    assert X[1, 2, 3, 4].item() == 119
    assert Y[3, 2, 1, 4].item() == X[1, 2, 3, 4].item() == 119
    assert Z[3, 2, 1, 4].item() == X.flatten()[119].item() == 119
    assert Y[3, 2, 0, 4].item() == X[0, 2, 3, 4].item() == 59
    assert Z[3, 2, 0, 4].item() == X.flatten()[114].item() == 114


def test_001_transpose_keeps_data_reshape_keeps_the_flat_stream(torch: Any) -> None:
    """Y[c, b, a, d] == X[a, b, c, d] and Z[c, b, a, d] == X.flatten()[c*30 + b*10 + a*5 + d]."""
    X = torch.arange(120).reshape(2, 3, 4, 5)  # noqa: N806
    Y, Z, flat = X.transpose(0, 2), X.reshape(4, 3, 2, 5), X.flatten()  # noqa: N806
    x_values, y_values, z_values = X.tolist(), Y.tolist(), Z.tolist()
    flat_values = flat.tolist()
    pairs = [(a, b, c, d) for a in range(2) for b in range(3) for c in range(4) for d in range(5)]
    assert all(y_values[c][b][a][d] == x_values[a][b][c][d] for a, b, c, d in pairs)
    assert all(z_values[c][b][a][d] == flat_values[c * 30 + b * 10 + a * 5 + d]
               for a, b, c, d in pairs)
    assert shares_storage(Y, X) and shares_storage(Z, X)


def test_001_rollout_buffer(torch: Any) -> None:
    """(T, N, obs): transpose(0, 1) keeps "obs of env n at time t"; reshape scrambles it."""
    T, N, obs_dim = 3, 2, 4  # noqa: N806
    X = torch.arange(T * N * obs_dim).reshape(T, N, obs_dim)  # noqa: N806
    kept, scrambled = X.transpose(0, 1), X.reshape(N, T, obs_dim)
    assert all(kept[n, t].tolist() == X[t, n].tolist() for n in range(N) for t in range(T))
    assert scrambled[1, 0].tolist() != X[0, 1].tolist()


def test_001_einops_instead_of_permute_contiguous_view(torch: Any) -> None:
    B, H, T, D = 2, 3, 4, 5  # noqa: N806
    x = torch.arange(B * H * T * D).reshape(B, H, T, D)
    chained = x.permute(0, 2, 1, 3).contiguous().view(B, T, H * D)
    expected = einops.rearrange(np.arange(B * H * T * D).reshape(B, H, T, D),
                                "b h t d -> b t (h d)")
    assert chained.tolist() == expected.tolist()


def test_001_numpy_footnote_f_order_reshape(torch: Any) -> None:
    """F-order reshape = transpose, reshape to the reversed target, transpose back."""
    X = torch.arange(24).reshape(2, 3, 4)  # noqa: N806
    target = (4, 6)
    emulated = X.permute(2, 1, 0).reshape(tuple(reversed(target))).permute(1, 0)
    assert emulated.tolist() == np.arange(24).reshape(2, 3, 4).reshape(target, order="F").tolist()


# The "When does a copy happen?" table, one row per case. Each row: how to build the
# input from ``torch`` (the module), the op, and what the seed says happens.
def _x(torch: Any) -> Any:
    return torch.arange(24).reshape(2, 3, 4)


COPY_TABLE = {
    "transpose-no": (_x, lambda t: t.transpose(0, 2), "view"),
    "permute-no": (_x, lambda t: t.permute(2, 0, 1), "view"),
    "swapdims-no": (_x, lambda t: t.swapdims(0, 1), "view"),
    "movedim-no": (_x, lambda t: t.movedim(0, -1), "view"),
    "unsqueeze-no": (_x, lambda t: t.unsqueeze(1), "view"),
    "squeeze-no": (lambda torch: torch.arange(6).reshape(1, 6, 1), lambda t: t.squeeze(), "view"),
    "view-on-compatible-strides-no": (_x, lambda t: t.view(6, 4), "view"),
    "view-on-incompatible-strides-errors": (
        lambda torch: _x(torch).permute(2, 0, 1), lambda t: t.view(-1), "error"),
    "reshape-when-strides-permit-no": (_x, lambda t: t.reshape(4, 6), "view"),
    "reshape-of-permuted-when-strides-permit-no": (
        lambda torch: _x(torch).permute(2, 0, 1), lambda t: t.reshape(4, 6), "view"),
    "reshape-when-strides-forbid-yes": (
        lambda torch: _x(torch).permute(2, 0, 1), lambda t: t.reshape(-1), "copy"),
    "flatten-on-contiguous-no": (_x, lambda t: t.flatten(), "view"),
    "flatten-on-non-contiguous-yes": (
        lambda torch: _x(torch).transpose(0, 2), lambda t: t.flatten(), "copy"),
    "contiguous-on-contiguous-no": (_x, lambda t: t.contiguous(), "view"),
    "contiguous-on-non-contiguous-yes": (
        lambda torch: _x(torch).transpose(0, 2), lambda t: t.contiguous(), "copy"),
    "clone-always-yes": (_x, lambda t: t.clone(), "copy"),
    "to-other-dtype-yes": (_x, lambda t: t.to(t.float().dtype), "copy"),
    "to-same-dtype-no": (_x, lambda t: t.to(t.dtype), "view"),
}


def _copy_or_view(torch: Any, make: Callable, op: Callable) -> tuple[str, Any]:
    """("view" | "copy", result) by comparing storage pointers, or ("error", the error)."""
    base = make(torch)
    try:
        result = op(base)
    except RuntimeError as error:
        return "error", error
    return ("view" if shares_storage(result, base) else "copy"), result


@pytest.mark.parametrize("make, op, expected", COPY_TABLE.values(), ids=COPY_TABLE.keys())
def test_001_when_does_a_copy_happen(make: Callable, op: Callable, expected: str) -> None:
    ours, our_result = _copy_or_view(rearrange, make, op)
    theirs, their_result = _copy_or_view(real_torch, make, op)
    assert theirs == expected, "the seed's table disagrees with torch 2.13"
    assert ours == expected
    if expected == "error":
        assert isinstance(our_result, rearrange.RearrangeError)
        assert str(our_result) == str(their_result) == VIEW_ERROR
    else:
        assert tuple(our_result.shape) == tuple(their_result.shape)
        assert our_result.stride() == their_result.stride()
        assert our_result.tolist() == their_result.tolist()


@pytest.mark.skip(reason="rearrange.Tensor and this torch build are CPU-only: no other device")
def test_001_when_does_a_copy_happen_to_other_device() -> None:
    """The table's ``.to(other_device)`` row (yes, a copy) has nothing to run on."""


# ---------------------------------------------------------------------- seed 002

def test_002_changing_strides_transposes(torch: Any) -> None:
    """A (4, 3) tensor of 0..11 has strides (3, 1); strides (1, 3) read it transposed."""
    x = torch.arange(12).view(4, 3)
    assert x.stride() == (3, 1)
    restrided = x.as_strided((3, 4), (1, 3))
    assert restrided.tolist() == x.t().tolist()
    assert x.t().stride() == (1, 3)
    assert not x.t().is_contiguous()
    assert shares_storage(restrided, x) and shares_storage(x.t(), x)


def test_002_contiguous_copies_into_row_major_order(torch: Any) -> None:
    x = torch.arange(12).view(4, 3)
    c = x.t().contiguous()
    assert c.is_contiguous() and c.stride() == (4, 1)
    assert not shares_storage(c, x)
    # "the order of elements would be the same as if a tensor of the same shape created
    # from scratch"
    assert c.storage().tolist() == [v for row in x.t().tolist() for v in row]


def test_002_view_sees_writes_to_the_original(torch: Any) -> None:
    x = torch.arange(12).view(4, 3)
    v = x.view(2, 6)
    x[1, 1] = 100
    assert v[0, 4].item() == 100


def test_002_view_does_not_work_on_non_contiguous_data(torch: Any) -> None:
    x = torch.arange(12).view(4, 3)
    with pytest.raises(RuntimeError) as caught:
        x.t().view(12)
    assert str(caught.value) == VIEW_ERROR
    assert not x.permute(1, 0).is_contiguous()  # permute: metadata only, non-contiguous


# ---------------------------------------------------------------------- seed 003

def test_003_permute_then_view_raises(torch: Any) -> None:
    with pytest.raises(RuntimeError) as caught:
        torch.randn(2, 3, 2).permute(0, 2, 1).view(-1)
    assert str(caught.value) == VIEW_ERROR


def test_003_shape_and_stride(torch: Any) -> None:
    x = torch.randn(2, 3, 2)
    assert x.shape == torch.Size([2, 3, 2])
    assert x.stride() == (6, 2, 1)


def test_003_element_at_its_storage_position(torch: Any) -> None:
    x = torch.randn(2, 3, 2)
    assert x[1, 2, 0] == x.storage()[1 * 6 + 2 * 2 + 0 * 1]
    assert x[1, 2, 0] == x.storage()[idx_to_pos(x, (1, 2, 0))]
    assert idx_to_pos(x, (1, 2, 0)) == 10
    assert x[1, 2, 0].item() == x.storage()[10]


def test_003_view_translates_indices(torch: Any) -> None:
    x = torch.randn(2, 3, 2)
    y = x.view(2, 6)
    assert y.shape == torch.Size([2, 6])
    assert y[1, 4].item() == x[1, 2, 0].item()
    assert idx_to_pos(y, (1, 4)) == 10
    assert x.stride() == (6, 2, 1)  # old
    assert y.stride() == (6, 1)  # new
    assert shares_storage(x, y)


def test_003_permuted_is_not_contiguous(torch: Any) -> None:
    x = torch.randn(2, 3, 2)
    x_permuted = x.permute(0, 2, 1)
    assert x_permuted.stride() == (6, 1, 2)
    assert x_permuted.is_contiguous() is False
    assert is_contiguous(x) is True and x.is_contiguous() is True
    assert is_contiguous(x_permuted) is False


def test_003_stepping_past_a_dim(torch: Any) -> None:
    x = torch.randn(2, 3, 2)
    x_permuted = x.permute(0, 2, 1)
    assert (idx_to_pos(x, (0, 0, 2)), idx_to_pos(x, (0, 1, 0))) == (2, 2)
    assert (idx_to_pos(x_permuted, (0, 0, 3)), idx_to_pos(x_permuted, (0, 1, 0))) == (6, 1)


def test_003_reshape_copies_and_contiguous_view_works(torch: Any) -> None:
    x = torch.randn(2, 3, 2)
    z = x.permute(0, 2, 1).reshape(-1)
    w = x.permute(0, 2, 1).contiguous().view(-1)
    assert tuple(z.shape) == tuple(w.shape) == (12,)
    assert z.tolist() == w.tolist()
    assert not shares_storage(z, x) and not shares_storage(w, x)
    assert z[1].item() == x[0, 1, 0].item()  # the permuted walk: x[0, 0, 0], x[0, 1, 0], ...


# The seed's is_contiguous() helper does not skip size-1 dims (whose stride torch
# ignores), so it agrees with torch's rule exactly on layouts without them.
HELPER_LAYOUTS = {
    "contiguous": lambda torch: torch.arange(24).view(2, 3, 4),
    "permuted": lambda torch: torch.arange(24).view(2, 3, 4).permute(0, 2, 1),
    "sliced": lambda torch: torch.arange(24).view(4, 6)[:, 1:4],
    "stepped": lambda torch: torch.arange(24).view(4, 6)[::2],
    "expanded": lambda torch: torch.arange(4).expand(3, 4),
    "transposed": lambda torch: torch.arange(6).view(2, 3).t(),
}


@pytest.mark.parametrize("make", HELPER_LAYOUTS.values(), ids=HELPER_LAYOUTS.keys())
def test_003_is_contiguous_helper_agrees_without_size_1_dims(torch: Any, make: Callable) -> None:
    a = make(torch)
    assert 1 not in tuple(a.shape)
    assert is_contiguous(a) == a.is_contiguous()


def test_003_is_contiguous_helper_is_stricter_on_size_1_dims(torch: Any) -> None:
    a = torch.arange(3).view(3, 1).t()  # shape (1, 3), strides (1, 1): torch calls it contiguous
    assert a.is_contiguous() is True
    assert is_contiguous(a) is False


# ---------------------------------------------------------------------- seed 004

def test_004_view_shares_data_and_writes_show_in_base(torch: Any) -> None:
    t = torch.rand(4, 4)
    b = t.view(2, 8)
    assert t.storage().data_ptr() == b.storage().data_ptr()
    b[0][0] = 3.14
    assert t[0][0].item() == pytest.approx(3.14)
    assert t[0][0].item() == float(np.float32(3.14))  # tensor(3.1400), a float32
    assert repr(t[0][0]) == "tensor(3.1400)"


def test_004_transpose_is_a_non_contiguous_view(torch: Any) -> None:
    base = torch.tensor([[0, 1], [2, 3]])
    assert base.is_contiguous() is True
    t = base.transpose(0, 1)  # `t` is a view of `base`. No data movement happened here.
    assert shares_storage(t, base)
    assert t.is_contiguous() is False
    c = t.contiguous()
    assert c.is_contiguous() and not shares_storage(c, base)
    assert c.tolist() == [[0, 2], [1, 3]]


def test_004_basic_indexing_returns_views(torch: Any) -> None:
    t = torch.arange(12).view(3, 4)
    for view in (t[1], t[:, 2], t[1:, ::2], t[None, ..., 0]):
        assert shares_storage(view, t)
    t[1:, ::2] = 0  # assignment via basic indexing is in-place
    assert t.tolist() == [[0, 1, 2, 3], [0, 5, 0, 7], [0, 9, 0, 11]]


def test_004_advanced_indexing_copies_or_is_refused() -> None:
    """torch copies for advanced indices; rearrange.Tensor implements basic indexing only."""
    t = real_torch.arange(12).view(3, 4)
    assert not shares_storage(t[[0, 2]], t)
    with pytest.raises(IndexError, match="advanced indexing") as caught:
        rearrange.arange(12).view(3, 4)[[0, 2]]
    assert isinstance(caught.value, rearrange.RearrangeError)


def test_004_contiguous_returns_itself_when_contiguous(torch: Any) -> None:
    t = torch.arange(6).view(2, 3)
    assert t.contiguous() is t
    assert t.t().contiguous() is not t


def test_004_reshape_reshape_as_flatten_view_or_copy(torch: Any) -> None:
    t = torch.arange(6).view(2, 3)
    assert shares_storage(t.reshape(3, 2), t)
    assert shares_storage(t.reshape_as(torch.zeros(3, 2)), t)
    assert shares_storage(t.flatten(), t)
    assert not shares_storage(t.t().reshape(6), t)
    assert not shares_storage(t.t().reshape_as(torch.zeros(6)), t)
    assert not shares_storage(t.t().flatten(), t)


def test_seed_files_are_the_ones_these_tests_cover() -> None:
    """The seed folder holds exactly the five documents this module covers, and each has
    its tests here."""
    seeds = pathlib.Path(__file__).resolve().parent / "data" / "seeds"
    numbers = sorted(p.name[:3] for p in seeds.glob("*.txt"))
    assert numbers == ["000", "001", "002", "003", "004"]
    for number in numbers:
        assert any(name.startswith(f"test_{number}_") for name in globals()), number
