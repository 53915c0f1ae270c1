"""Bad input to ``rearrange.Tensor`` and ``rearrange.Layout``.

Every mistake gets a :class:`rearrange.RearrangeError` that is also the builtin class
torch raises for it, never a bare ``IndexError``/``TypeError``/``AttributeError`` from
deep inside. Its message is torch's text where torch has one for the mistake (then it
names the value exactly when torch's does); where torch's text is its argument parser's
("received an invalid combination of arguments ..."), ours names the op, the argument
and the offending value. Inputs are never modified: not the numpy array a tensor views,
not the tensor an op failed on, not the values a failed write aimed at.
"""

from __future__ import annotations

import inspect
import warnings
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pytest
from hypothesis import given, strategies as st

import rearrange
from rearrange import Layout

torch = pytest.importorskip("torch")


def builtin_class(error: BaseException) -> type:
    return next(c for c in type(error).__mro__ if c.__module__ == "builtins")


def x6(lib: Any) -> Any:
    """The usual victim: ``arange(6).view(2, 3)``."""
    return lib.arange(6).view(2, 3)


def read_only_array() -> np.ndarray:
    array = np.arange(6)
    array.flags.writeable = False
    return array


def assign(target: Any, key: object, value: object) -> None:
    target[key] = value


@dataclass(frozen=True)
class Bad:
    """One bad call. ``call(lib)`` runs it with ``lib`` = rearrange or torch.

    ``builtin``: the builtin class our error must also be. ``names``: text the message
    must contain (the argument and the value, as far as the message can). ``torch``:
    whether torch raises ``builtin`` too, and if ``"same text"``, the same message;
    otherwise ``why`` says how torch differs.
    """

    call: Callable[[Any], object]
    builtin: type
    names: tuple[str, ...]
    torch: str = "same class"  # "same text" | "same class" | "differs"
    why: str = ""


BAD_INPUT = {
    # --- wrong types: strings, floats, None, bools where ints belong
    "view-str": Bad(lambda L: x6(L).view("a"), TypeError, ("view()", "'size'", "'a'")),
    "view-float": Bad(lambda L: x6(L).view(2.0, 3), TypeError, ("'size'", "pos 0", "2.0")),
    "view-None": Bad(lambda L: x6(L).view(None), TypeError, ("'size'", "None")),
    "view-bool": Bad(lambda L: x6(L).view(True, 6), TypeError, ("'size'", "True")),
    "view-no-size": Bad(lambda L: x6(L).view(), TypeError, ("view()",), "same text"),
    "reshape-list-with-str": Bad(lambda L: x6(L).reshape([2, "3"]), TypeError,
                                 ("reshape()", "'shape'", "pos 1", "'3'")),
    "reshape-no-shape": Bad(lambda L: x6(L).reshape(), TypeError, ("reshape()", '"shape"'),
                            "same text"),
    "permute-float": Bad(lambda L: x6(L).permute(1.0, 0), TypeError, ("'dims'", "1.0")),
    "permute-None": Bad(lambda L: x6(L).permute(None), TypeError, ("'dims'", "None")),
    "transpose-str": Bad(lambda L: x6(L).transpose("a", 0), TypeError, ("dim", "'a'")),
    "transpose-None": Bad(lambda L: x6(L).transpose(None, 0), TypeError, ("dim", "None")),
    "flatten-float": Bad(lambda L: x6(L).flatten(0.5), TypeError, ("dim", "0.5")),
    "squeeze-str": Bad(lambda L: x6(L).squeeze("a"), TypeError, ("squeeze()", "'dim'", "'a'")),
    "squeeze-None": Bad(lambda L: x6(L).squeeze(None), TypeError, ("'dim'", "None")),
    "unsqueeze-float": Bad(lambda L: x6(L).unsqueeze(1.5), TypeError, ("dim", "1.5")),
    "movedim-str": Bad(lambda L: x6(L).movedim("a", 0), TypeError, ("source", "'a'")),
    "movedim-tuple-and-int": Bad(lambda L: x6(L).movedim((0,), 1), TypeError,
                                 ("source", "destination", "(0,)", "1")),
    "expand-str": Bad(lambda L: x6(L).expand("a"), TypeError, ("expand()", "'size'", "'a'")),
    "unflatten-int-sizes": Bad(lambda L: L.arange(6).unflatten(0, 6), TypeError,
                               ("unflatten()", "'sizes'", "6")),
    "unflatten-float-size": Bad(lambda L: L.arange(6).unflatten(0, (2.0, 3)), TypeError,
                                ("'sizes'", "pos 0", "2.0")),
    "size-str": Bad(lambda L: x6(L).size("a"), TypeError, ("dim", "'a'")),
    "stride-float": Bad(lambda L: x6(L).stride(1.5), TypeError, ("dim", "1.5")),
    "as_strided-str-size": Bad(lambda L: x6(L).as_strided("a", (1,)), TypeError,
                               ("as_strided()", "'size'", "'a'")),
    "as_strided-float-offset": Bad(lambda L: x6(L).as_strided((1,), (1,), 1.5), TypeError,
                                   ("storage_offset", "1.5")),
    "zeros-str": Bad(lambda L: L.zeros("a"), TypeError, ("zeros()", "'size'", "'a'")),
    "ones-float": Bad(lambda L: L.ones(2.5), TypeError, ("ones()", "'size'", "2.5")),
    "empty-None": Bad(lambda L: L.empty(None), TypeError, ("empty()", "'size'", "None")),
    "rand-list-with-float": Bad(lambda L: L.rand([2, 0.5]), TypeError, ("rand()", "0.5")),
    "arange-str": Bad(lambda L: L.arange("a"), TypeError, ("arange()", "end", "'a'")),
    "arange-None": Bad(lambda L: L.arange(None), TypeError, ("arange()", "end", "None")),
    "tensor-of-str": Bad(lambda L: L.tensor("abc"), TypeError, ("'str'",), "same text"),
    "tensor-of-None": Bad(lambda L: L.tensor(None), RuntimeError, ("NoneType",), "same text"),
    "tensor-nested-None": Bad(lambda L: L.tensor([[1], [None]]), RuntimeError, ("NoneType",),
                              "same text"),
    "tensor-ragged": Bad(lambda L: L.tensor([[1, 2], [3]]), ValueError, ("shape",), "same class"),
    "tensor-dtype-str": Bad(lambda L: L.tensor([1], dtype="nope"), TypeError, ("dtype", "'nope'")),
    "to-object-dtype": Bad(lambda L: x6(L).to(object), TypeError, ("dtype", "object")),
    "from_numpy-list": Bad(lambda L: L.from_numpy([1, 2]), TypeError, ("np.ndarray", "list"),
                           "same text"),
    "from_numpy-object-array": Bad(lambda L: L.from_numpy(np.array([1, None], dtype=object)),
                                   TypeError, ("numpy.object_",), "same text"),
    "from_numpy-big-endian": Bad(lambda L: L.from_numpy(np.arange(3, dtype=">i4")), ValueError,
                                 ("byte order",), "same text"),
    "view_as-int": Bad(lambda L: x6(L).view_as(5), TypeError, ("view_as()", "'other'", "5")),
    "expand_as-list": Bad(lambda L: x6(L).expand_as([2, 3]), TypeError,
                          ("expand_as()", "'other'", "[2, 3]")),
    "reshape_as-None": Bad(lambda L: x6(L).reshape_as(None), TypeError, ("'other'", "None")),
    "equal-int": Bad(lambda L: x6(L).equal(5), TypeError, ("equal()", "'other'", "5")),
    "setitem-list": Bad(lambda L: assign(x6(L), 0, [1, 2, 3]), TypeError,
                        ("list", "torch.LongTensor"), "same text"),
    "setitem-str": Bad(lambda L: assign(x6(L), 0, "a"), TypeError, ("str",), "same text"),
    "setitem-None": Bad(lambda L: assign(x6(L), 0, None), TypeError, ("NoneType",), "same text"),
    "setitem-overflow": Bad(lambda L: assign(L.zeros(3, dtype=L.uint8), 0, 256), RuntimeError,
                            ("uint8_t",), "same text"),
    "index-str": Bad(lambda L: x6(L)["a"], TypeError, ("str",)),
    "index-float": Bad(lambda L: x6(L)[1.5], IndexError, ("float",), "same text"),
    "index-slice-of-str": Bad(lambda L: x6(L)["a":], TypeError, ("slice indices",), "same text"),
    "index-slice-of-float": Bad(lambda L: x6(L)[:, 0.5:], TypeError, ("slice indices",),
                                "same text"),
    "storage-index-str": Bad(lambda L: x6(L).storage()["a"], RuntimeError, ("str",)),
    "float-of-many": Bad(lambda L: float(x6(L)), ValueError, ("one element",), "same text"),
    "len-of-0-d": Bad(lambda L: len(L.arange(3)[0]), TypeError, ("0-d",), "same text"),
    "manual_seed-str": Bad(lambda L: L.manual_seed("a"), TypeError, ("seed", "'a'"), "differs",
                           "torch calls int() on the seed: a ValueError for 'a', and '5' works"),
    "tensor-constructor": Bad(lambda L: L.Tensor(2, 3), ValueError, ("rearrange.tensor()",),
                              "differs", "torch.Tensor(2, 3) allocates; ours has factories only"),
    # --- negative sizes
    "view-negative": Bad(lambda L: x6(L).view(-2, 3), RuntimeError, ("-2", "[-2, 3]"),
                         "same text"),
    "reshape-negative": Bad(lambda L: x6(L).reshape(2, -3), RuntimeError, ("-3", "[2, -3]"),
                            "same text"),
    "zeros-negative": Bad(lambda L: L.zeros(2, -3), RuntimeError, ("zeros", "non-negative"),
                          "same text"),
    "empty-negative": Bad(lambda L: L.empty(-1), RuntimeError, ("-1", "[-1]"), "same text"),
    "full-negative": Bad(lambda L: L.full((2, -1), 0), RuntimeError, ("-1", "[2, -1]"),
                         "same text"),
    "expand-negative": Bad(lambda L: x6(L).expand(2, -2), RuntimeError, ("(-2)", "[2, -2]"),
                           "same text"),
    "unflatten-negative": Bad(lambda L: L.arange(6).unflatten(0, (-3, 2)), RuntimeError,
                              ("-3", "[-3, 2]"), "same text"),
    "as_strided-negative-size": Bad(lambda L: x6(L).as_strided((2, -1), (1, 1)), RuntimeError,
                                    ("[2, -1]",), "same text"),
    "as_strided-negative-offset": Bad(lambda L: x6(L).as_strided((2,), (1,), -1), RuntimeError,
                                      ("offset -1",), "same text"),
    "as_strided-negative-stride": Bad(lambda L: x6(L).as_strided((2,), (-1,)), RuntimeError,
                                      ("[-1]",), "same text"),
    "as_strided-out-of-bounds": Bad(lambda L: x6(L).as_strided((7,), (1,)), RuntimeError,
                                    ("sizes [7]", "strides [1]"), "same text"),
    # --- out-of-range dims and indices
    "transpose-dim-5": Bad(lambda L: x6(L).transpose(0, 5), IndexError, ("[-2, 1]", "got 5"),
                           "same text"),
    "permute-dim-5": Bad(lambda L: x6(L).permute(0, 5), IndexError, ("got 5",), "same text"),
    "squeeze-dim-3": Bad(lambda L: x6(L).squeeze(3), IndexError, ("got 3",), "same text"),
    "squeeze-tuple-dim-minus-3": Bad(lambda L: x6(L).squeeze((0, -3)), IndexError, ("got -3",),
                                     "same text"),
    "unsqueeze-dim-minus-4": Bad(lambda L: x6(L).unsqueeze(-4), IndexError, ("[-3, 2]", "got -4"),
                                 "same text"),
    "flatten-end-dim-2": Bad(lambda L: x6(L).flatten(0, 2), IndexError, ("got 2",), "same text"),
    "movedim-destination-2": Bad(lambda L: x6(L).movedim(0, 2), IndexError, ("got 2",),
                                 "same text"),
    "unflatten-dim-2": Bad(lambda L: x6(L).unflatten(2, (1,)), IndexError, ("got 2",),
                           "same text"),
    "size-dim-2": Bad(lambda L: x6(L).size(2), IndexError, ("got 2",), "same text"),
    "stride-dim-minus-3": Bad(lambda L: x6(L).stride(-3), IndexError, ("got -3",), "same text"),
    "size-of-0-d": Bad(lambda L: L.arange(3)[0].size(0), IndexError, ("specified as 0",),
                       "same text"),
    "index-5": Bad(lambda L: x6(L)[5], IndexError, ("index 5", "dimension 0", "size 2"),
                   "same text"),
    "index-second-dim-minus-4": Bad(lambda L: x6(L)[0, -4], IndexError,
                                    ("index -4", "dimension 1", "size 3"), "same text"),
    "index-too-many": Bad(lambda L: x6(L)[0, 0, 0], IndexError, ("too many", "dimension 2"),
                          "same text"),
    "index-0-d": Bad(lambda L: L.arange(3)[0][0], IndexError, ("0-dim",), "same text"),
    "storage-index-100": Bad(lambda L: x6(L).storage()[100], IndexError,
                             ("index 100", "size 6"), "same text"),
    # --- two -1s, wrong sizes
    "view-two-inferred": Bad(lambda L: x6(L).view(-1, -1), RuntimeError,
                             ("only one dimension can be inferred",), "same text"),
    "reshape-two-inferred": Bad(lambda L: x6(L).reshape(-1, 2, -1), RuntimeError,
                                ("only one dimension can be inferred",), "same text"),
    "unflatten-two-inferred": Bad(lambda L: L.arange(6).unflatten(0, (-1, -1)), RuntimeError,
                                  ("only one dimension can be inferred",), "same text"),
    "view-wrong-size": Bad(lambda L: x6(L).view(4, -1), RuntimeError, ("'[4, -1]'", "size 6"),
                           "same text"),
    "view-ambiguous-empty": Bad(lambda L: L.arange(0).view(0, -1), RuntimeError,
                                ("[0, -1]", "0 elements"), "same text"),
    "unflatten-wrong-product": Bad(lambda L: L.arange(6).unflatten(0, (4, 2)), RuntimeError,
                                   ("[4, 2]", "(6)"), "same text"),
    "expand-mismatch": Bad(lambda L: x6(L).expand(2, 4), RuntimeError, ("(4)", "(3)", "[2, 4]"),
                           "same text"),
    "expand-too-few": Bad(lambda L: x6(L).expand(3), RuntimeError,
                          ("torch.LongTensor{[2, 3]}", "size=[3]"), "same text"),
    "permute-wrong-length": Bad(lambda L: x6(L).permute(0), RuntimeError, ("len(dims) = 1",),
                                "same text"),
    "permute-repeated": Bad(lambda L: x6(L).permute(1, -1), RuntimeError, ("duplicate",),
                            "same text"),
    "squeeze-repeated": Bad(lambda L: x6(L).squeeze((1, -1)), RuntimeError,
                            ("dim 1", "multiple times"), "same text"),
    "flatten-reversed": Bad(lambda L: x6(L).flatten(1, 0), RuntimeError,
                            ("start_dim", "end_dim"), "same text"),
    "view-of-transpose": Bad(lambda L: x6(L).t().view(6), RuntimeError, ("view size",),
                             "same text"),
    "setitem-wrong-shape": Bad(lambda L: assign(x6(L), 0, L.arange(2)), RuntimeError,
                               ("(3)", "(2)", "Target sizes: [3]"), "same text"),
    "setitem-into-expanded": Bad(lambda L: assign(L.arange(3).expand(2, 3), ..., 1),
                                 RuntimeError, ("more than one element",), "same text"),
    "arange-zero-step": Bad(lambda L: L.arange(0, 5, 0), RuntimeError, ("step",), "same text"),
    "arange-wrong-direction": Bad(lambda L: L.arange(5, 0), RuntimeError, ("step sign",),
                                  "same text"),
    "slice-step-0": Bad(lambda L: x6(L)[::0], ValueError, ("step cannot be zero",), "same text"),
    "slice-step-negative": Bad(lambda L: x6(L)[:, ::-1], ValueError, ("greater than zero",),
                               "same text"),
    "item-of-many": Bad(lambda L: x6(L).item(), RuntimeError, ("6 elements",), "same text"),
    "bool-of-many": Bad(lambda L: bool(x6(L)), RuntimeError, ("more than one value",),
                        "same text"),
    # --- advanced indices: torch copies, rearrange.Tensor refuses (basic indexing only)
    "index-list": Bad(lambda L: x6(L)[[0, 1]], IndexError, ("advanced indexing", "[0, 1]"),
                      "differs", "torch supports advanced indexing"),
    "index-int-tensor": Bad(lambda L: x6(L)[L.tensor([0, 1])], IndexError,
                            ("advanced indexing", "tensor([0, 1])"), "differs",
                            "torch supports advanced indexing"),
    "index-numpy-array": Bad(lambda L: x6(L)[np.array([1])], IndexError,
                             ("advanced indexing", "array([1])"), "differs",
                             "torch supports advanced indexing"),
    "index-bool": Bad(lambda L: x6(L)[True], IndexError, ("advanced indexing", "True"),
                      "differs", "torch supports advanced indexing"),
    "index-mask": Bad(lambda L: x6(L)[x6(L) == 2], IndexError, ("advanced indexing",),
                      "differs", "torch supports advanced indexing"),
    "index-list-after-ellipsis": Bad(lambda L: x6(L)[..., [0]], IndexError,
                                     ("advanced indexing", "[0]"), "differs",
                                     "torch supports advanced indexing"),
    "index-two-ellipses": Bad(lambda L: x6(L)[..., ...], IndexError, ("single ellipsis",),
                              "differs", "torch lets each extra '...' skip more dims"),
    # --- writes to read-only storage (torch warns on from_numpy and writes anyway)
    "write-read-only": Bad(lambda L: assign(L.from_numpy(read_only_array()), 0, 5), ValueError,
                           ("read-only", "x[0]"), "differs", "torch writes into the array"),
    "write-read-only-view": Bad(
        lambda L: assign(L.from_numpy(read_only_array()).view(2, 3), (1, slice(None)), 0),
        ValueError, ("read-only", "x[(1, slice(None, None, None))]"), "differs",
        "torch writes into the array"),
    "write-read-only-transpose": Bad(
        lambda L: assign(L.from_numpy(read_only_array()).view(2, 3).t(), ..., 0), ValueError,
        ("read-only", "x[Ellipsis]"), "differs", "torch writes into the array"),
}


def torch_message(error: BaseException) -> str:
    return str(error).split("\nException raised from")[0]


@pytest.mark.parametrize("bad", BAD_INPUT.values(), ids=BAD_INPUT.keys())
def test_bad_input_gives_a_specific_rearrange_error(bad: Bad) -> None:
    with pytest.raises(rearrange.RearrangeError) as caught:
        bad.call(rearrange)
    error = caught.value
    assert isinstance(error, bad.builtin)
    for text in bad.names:
        assert text in str(error), f"{text!r} not in {str(error)!r}"
    if bad.torch == "differs":
        assert bad.why, "say how torch differs"
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(Exception) as theirs:  # noqa: PT011 - the class is compared below
            bad.call(torch)
    assert builtin_class(theirs.value) is bad.builtin
    if bad.torch == "same text":
        assert str(error) == torch_message(theirs.value)


# ---------------------------------------------------------------------- Layout's own input

BAD_LAYOUTS = {
    "negative-size": (lambda: Layout((2, -1), (1, 1)), ValueError, ("non-negative", "-1")),
    "length-mismatch": (lambda: Layout((2, 3), (1,)), ValueError, ("(2, 3)", "(1,)")),
    "str-size": (lambda: Layout(("a",), (1,)), TypeError, ("shape[0]", "'a'")),
    "float-stride": (lambda: Layout((2,), (1.5,)), TypeError, ("strides[0]", "1.5")),
    "None-offset": (lambda: Layout((2,), (1,), None), TypeError, ("offset", "None")),
    "shape-not-a-sequence": (lambda: Layout(5, (1,)), TypeError, ("shape", "5")),
    "permute-dim-out-of-range": (lambda: Layout.contiguous((2, 3)).permute((0, 2)), IndexError,
                                 ("got 2",)),
    "split-wrong-product": (lambda: Layout.contiguous((6,)).split(0, (4, 2)), RuntimeError,
                            ("[4, 2]", "6")),
    "try_view-wrong-size": (lambda: Layout.contiguous((6,)).try_view((4,)), RuntimeError,
                            ("[4]", "6")),
    "select-out-of-range": (lambda: Layout.contiguous((2,)).select(0, 2), IndexError,
                            ("index 2", "size 2")),
    "index-str": (lambda: Layout.contiguous((2,)).index("a"), TypeError, ("str",)),
    "slice-of-float": (lambda: Layout.contiguous((2,)).slice_dim(0, 0.5, None, None), TypeError,
                       ("slice indices",)),
}


@pytest.mark.parametrize("call, builtin, names", BAD_LAYOUTS.values(), ids=BAD_LAYOUTS.keys())
def test_bad_layout_input_gives_a_specific_rearrange_error(call: Callable, builtin: type,
                                                           names: tuple) -> None:
    with pytest.raises(rearrange.RearrangeError) as caught:
        call()
    assert isinstance(caught.value, builtin)
    for text in names:
        assert text in str(caught.value), f"{text!r} not in {str(caught.value)!r}"


# ---------------------------------------------------------------------- junk never escapes

JUNK = st.one_of(
    st.integers(-4, 4),
    st.sampled_from([2**63, -(2**70), 1.5, -0.0, float("nan"), "a", "", b"1", None, True, False,
                     Ellipsis, {}, object(), np.int64(1), np.float32(2.0), np.array([1, 0]),
                     np.array(1), 1 + 1j, slice(None), slice("a", None), slice(None, None, 0)]),
    st.lists(st.integers(-3, 3), max_size=3),
    st.tuples(st.integers(-3, 3), st.one_of(st.integers(-3, 3), st.none(), st.just("x"))),
    st.builds(lambda n: rearrange.arange(n), st.integers(0, 3)),
    st.builds(lambda n: rearrange.tensor(n), st.integers(-2, 2)),
)

TENSOR_METHODS = [
    "view", "reshape", "permute", "transpose", "swapaxes", "movedim", "squeeze", "unsqueeze",
    "flatten", "unflatten", "expand", "as_strided", "size", "stride", "to", "view_as",
    "expand_as", "reshape_as", "equal", "__getitem__", "__setitem__",
]


def arity(function: Callable) -> tuple[int, int]:
    """How many positional arguments ``function`` accepts (``*args``: up to 3)."""
    parameters = list(inspect.signature(function).parameters.values())
    positional = [p for p in parameters
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = sum(1 for p in positional if p.default is p.empty)
    varargs = any(p.kind == p.VAR_POSITIONAL for p in parameters)
    return required, 3 if varargs else len(positional)


@given(
    shape=st.sampled_from([(), (0,), (1,), (2, 3), (1, 2, 1)]),
    name=st.sampled_from(TENSOR_METHODS),
    data=st.data(),
)
def test_junk_arguments_give_rearrange_errors_only(shape: tuple, name: str,
                                                   data: st.DataObject) -> None:
    """Any call with the right number of arguments either works or raises a
    RearrangeError — never a numpy, Python or AttributeError from inside."""
    x = rearrange.arange(int(np.prod(shape))).view(shape)
    method = getattr(x, name)
    low, high = arity(method)
    args = data.draw(st.lists(JUNK, min_size=low, max_size=high), label="args")
    before = (x.shape, x.stride(), x.storage_offset(), x.tolist())
    try:
        method(*args)
    except rearrange.RearrangeError:
        pass
    if name != "__setitem__":
        assert (x.shape, x.stride(), x.storage_offset(), x.tolist()) == before


LAYOUT_METHODS = ["permute", "transpose", "movedim", "squeeze", "unsqueeze", "expand", "split",
                  "try_view", "select", "slice_dim", "index", "position"]


@given(
    shape=st.sampled_from([(), (0,), (1,), (2, 3), (1, 2, 1)]),
    name=st.sampled_from(LAYOUT_METHODS),
    data=st.data(),
)
def test_junk_arguments_to_layout_give_rearrange_errors_only(shape: tuple, name: str,
                                                             data: st.DataObject) -> None:
    layout = Layout.contiguous(shape)
    method = getattr(layout, name)
    low, high = arity(method)
    args = data.draw(st.lists(JUNK, min_size=low, max_size=high), label="args")
    try:
        method(*args)
    except rearrange.RearrangeError:
        pass
    assert layout == Layout.contiguous(shape)


# ---------------------------------------------------------------------- inputs never modified

# Ops on a tensor viewing a numpy array: none of them may change the array.
OPS_ON_A_VIEWED_ARRAY = {
    "view": lambda t: t.view(4, 3),
    "reshape-view": lambda t: t.reshape(12),
    "reshape-copy": lambda t: t.t().reshape(12),
    "permute": lambda t: t.permute(1, 0),
    "transpose": lambda t: t.transpose(0, 1),
    "movedim": lambda t: t.movedim(0, 1),
    "flatten": lambda t: t.flatten(),
    "unflatten": lambda t: t.unflatten(1, (2, 2)),
    "squeeze-unsqueeze": lambda t: t.unsqueeze(0).squeeze(0),
    "expand": lambda t: t[:1].expand(5, 4),
    "index": lambda t: t[1:, ::2],
    "as_strided": lambda t: t.as_strided((2, 2), (1, 1)),
    "contiguous-of-transpose": lambda t: t.t().contiguous(),
    "clone": lambda t: t.clone(),
    "to-float64": lambda t: t.to(rearrange.float64),
    "tolist-numpy-repr": lambda t: (t.tolist(), t.numpy(), repr(t)),
}


@pytest.mark.parametrize("op", OPS_ON_A_VIEWED_ARRAY.values(), ids=OPS_ON_A_VIEWED_ARRAY.keys())
def test_ops_on_from_numpy_leave_the_array_unchanged(op: Callable) -> None:
    array = np.arange(12, dtype=np.int64).reshape(3, 4)
    snapshot = array.copy()
    op(rearrange.from_numpy(array))
    np.testing.assert_array_equal(array, snapshot)
    assert array.strides == (32, 8) and array.flags.writeable and array.flags.c_contiguous


@pytest.mark.parametrize("op", [
    pytest.param(lambda t: t.clone(), id="clone"),
    pytest.param(lambda t: t.t().contiguous(), id="contiguous-of-transpose"),
    pytest.param(lambda t: t.t().reshape(12), id="reshape-that-copies"),
    pytest.param(lambda t: t.to(rearrange.float64), id="to-float64"),
    pytest.param(lambda t: rearrange.tensor(t), id="tensor-of-tensor"),
])
def test_writes_into_copies_never_reach_the_array(op: Callable) -> None:
    array = np.arange(12, dtype=np.int64).reshape(3, 4)
    copy = op(rearrange.from_numpy(array))
    copy[...] = -1
    np.testing.assert_array_equal(array, np.arange(12).reshape(3, 4))


def test_tensor_copies_its_data_and_as_tensor_shares_an_array() -> None:
    values = [[1, 2], [3, 4]]
    array = np.array(values)
    copied, shared = rearrange.tensor(array), rearrange.as_tensor(array)
    copied[0, 0] = 100
    assert array[0, 0] == 1 and values == [[1, 2], [3, 4]]
    rearrange.tensor(values)[1, 1] = 100
    assert values == [[1, 2], [3, 4]]
    shared[0, 0] = 7
    assert array[0, 0] == 7  # torch.as_tensor shares a numpy array too


def test_read_only_array_stays_unchanged_and_read_only() -> None:
    array = read_only_array()
    t = rearrange.from_numpy(array)
    with pytest.raises(rearrange.RearrangeError):
        t[...] = 0
    assert array.tolist() == [0, 1, 2, 3, 4, 5] and not array.flags.writeable
    assert not t.numpy().flags.writeable
    writable = t.clone()
    writable[0] = 9  # a clone owns fresh, writable memory
    assert writable.tolist()[0] == 9 and array[0] == 0


def tensor_state(t: Any) -> tuple:
    return (tuple(t.shape), t.stride(), t.storage_offset(), t.tolist(),
            t.untyped_storage().data_ptr())


# Failing ops on a non-contiguous tensor: afterwards it is exactly as before.
FAILING_OPS = {
    "view": lambda t: t.view(-1),
    "view-two-inferred": lambda t: t.view(-1, -1),
    "reshape-wrong-size": lambda t: t.reshape(5),
    "permute-repeated": lambda t: t.permute(0, 0),
    "transpose-out-of-range": lambda t: t.transpose(0, 3),
    "expand-mismatch": lambda t: t.expand(4, 4),
    "squeeze-repeated": lambda t: t.squeeze((0, 0)),
    "index-out-of-range": lambda t: t[0, 9],
    "index-advanced": lambda t: t[[0]],
    "setitem-wrong-shape": lambda t: t.__setitem__(..., rearrange.arange(5)),
    "setitem-overflow": lambda t: t.__setitem__(0, 2**64),
    "setitem-bad-key-after-good-items": lambda t: t.__setitem__((0, 9), 1),
    "as_strided-out-of-bounds": lambda t: t.as_strided((100,), (1,)),
}


@pytest.mark.parametrize("op", FAILING_OPS.values(), ids=FAILING_OPS.keys())
def test_a_failed_op_leaves_the_tensor_unchanged(op: Callable) -> None:
    t = rearrange.arange(12).view(3, 4).t()
    before = tensor_state(t)
    with pytest.raises(rearrange.RearrangeError):
        op(t)
    assert tensor_state(t) == before


def test_a_failed_write_into_an_expanded_view_leaves_the_base_unchanged() -> None:
    base = rearrange.arange(3)
    with pytest.raises(RuntimeError, match="more than one element"):
        base.expand(2, 3)[...] = 7
    assert base.tolist() == [0, 1, 2]


def test_layout_arguments_are_not_modified() -> None:
    shape, strides, order = [2, 3], [3, 1], [1, 0]
    layout = Layout(shape, strides)
    layout.permute(order)
    layout.expand([4, 2, 3])
    assert (shape, strides, order) == ([2, 3], [3, 1], [1, 0])
    assert layout.shape == (2, 3) and layout.strides == (3, 1)


def test_deprecated_dtype_aliases_are_refused_without_a_warning() -> None:
    """np.dtype('a') warns (a deprecated alias of 'S'); found by the junk-argument search."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(rearrange.ArgumentTypeError,
                           match="dtype must be a numpy-compatible dtype, got 'a'"):
            rearrange.zeros(2).to("a")
