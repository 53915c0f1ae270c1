"""Bad input to every public operation: a ``RearrangeError``, never a bare builtin
exception, raised before numpy or torch sees the value, at once and with nothing
allocated; its message says what was found and quotes the pattern; the caller's inputs
are unchanged.

Also the einops error contract (whatever einops raises ``EinopsError`` for, ours is
caught by ``except RuntimeError``), the public namespace (``from rearrange import *``)
and ``asnumpy``.
"""

from __future__ import annotations

import builtins
import json
import re
import subprocess
import sys
import time
import tracemalloc
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pytest

import rearrange as ra
from corpus import load

torch = pytest.importorskip("torch")
einops = pytest.importorskip("einops")

BIG = 2**63          # one past int64: no size, count or byte count reaches it
SEVENTY = " ".join(f"x{i}" for i in range(70))


def numpy_lib(shape: tuple[int, ...]) -> Any:
    return np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)


def tensor_lib(shape: tuple[int, ...]) -> Any:
    return ra.from_numpy(numpy_lib(shape))


def torch_lib(shape: tuple[int, ...]) -> Any:
    return torch.arange(int(np.prod(shape)), dtype=torch.float64).reshape(shape)


LIBS = {"numpy": numpy_lib, "Tensor": tensor_lib, "torch": torch_lib}


def snapshot(value: Any) -> Any:
    """A copy of what the caller passed, to compare after the failed call."""
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, ra.Tensor):
        return value.numpy().copy()
    if isinstance(value, torch.Tensor):
        return value.detach().clone().numpy()
    return None


def unchanged(value: Any, before: Any) -> bool:
    return before is None or np.array_equal(snapshot(value), before)


# ---------------------------------------------------------------------- the table


@dataclass(frozen=True)
class Bad:
    """``call(x)`` with ``x`` an input of ``shape`` made by each lib in ``libs``;
    ``classes`` the builtins the error must also be, ``found`` text the message holds
    (what was found), ``pattern`` the pattern the message quotes (None: no pattern).
    ``asks_memory``: the result could exist, so the array library is asked for its memory
    and refuses (numpy reports the failed request to tracemalloc: not measured)."""

    call: Callable[[Any], Any]
    found: tuple[str, ...]
    pattern: str | None = None
    shape: tuple[int, ...] = (6,)
    libs: tuple[str, ...] = ("numpy", "Tensor", "torch")
    classes: tuple[type, ...] = (ValueError, RuntimeError)
    asks_memory: bool = False


def lengths_70(value: int) -> dict[str, int]:
    return {f"x{i}": value for i in range(70)}


BAD = {
    # --- axis lengths no int64 holds
    "repeat-length-2**63": Bad(lambda x: ra.repeat(x, "a -> a b", b=BIG),
                               ("b=9223372036854775808", "too large"), "a -> a b"),
    "repeat-length-2**70": Bad(lambda x: ra.repeat(x, "a -> a b", b=2**70),
                               ("too large",), "a -> a b"),
    "rearrange-length-2**64": Bad(lambda x: ra.rearrange(x, "(a b) -> a b", a=2**64),
                                  ("a=18446744073709551616", "too large"), "(a b) -> a b"),
    "rearrange-length-2**63-known": Bad(lambda x: ra.rearrange(x, "a -> a", a=BIG),
                                        ("too large",), "a -> a"),
    "reduce-length-2**63": Bad(lambda x: ra.reduce(x, "(a b) -> a", "sum", b=BIG),
                               ("too large",), "(a b) -> a"),
    "repeat-anonymous-2**64": Bad(lambda x: ra.repeat(x, f"a -> a {2**64}"),
                                  ("anonymous axis of 20 digits",),
                                  f"a -> a {2**64}"),
    # --- results past 2**63 elements or bytes
    "repeat-elements-2**64": Bad(lambda x: ra.repeat(x, "a -> a b c", b=2**62, c=4),
                                 ("elements", "2**63"), "a -> a b c"),
    "repeat-merged-elements-2**64": Bad(lambda x: ra.repeat(x, "a -> (a b c)", b=2**62, c=4),
                                        ("elements",), "a -> (a b c)"),
    "repeat-bytes-2**63": Bad(lambda x: ra.repeat(x, "a -> a b", b=2**61, copy=True),
                              ("bytes", "2**63"), "a -> a b", shape=(1,)),
    "repeat-copy-2**64": Bad(lambda x: ra.repeat(x, "a -> a b c", b=2**40, c=2**24, copy=True),
                             ("elements",), "a -> a b c"),
    "repeat-zero-size-but-too-big": Bad(lambda x: ra.repeat(x, "a -> a b c", b=2**62, c=4),
                                        ("ignoring size-0 dims",), "a -> a b c",
                                        shape=(0,)),
    # --- results arrays can have but no address space holds (past 2**48 bytes)
    "repeat-out-of-memory": Bad(lambda x: ra.repeat(x, "a -> a b", b=2**47, copy=True),
                                ("not enough memory",), "a -> a b", classes=(MemoryError,),
                                asks_memory=True),
    "repeat-merged-out-of-memory": Bad(lambda x: ra.repeat(x, "a -> (b a)", b=2**47),
                                       ("not enough memory",), "a -> (b a)",
                                       classes=(MemoryError,), asks_memory=True),
    "zeros-out-of-memory": Bad(lambda x: ra.zeros(2**57, dtype=ra.uint8), ("not enough memory",),
                               libs=("numpy",), classes=(MemoryError,), asks_memory=True),
    "explain-elements-2**64": Bad(lambda x: ra.explain((2**62, 4), "a b -> (a b)"),
                                  ("elements",), "a b -> (a b)", libs=("numpy",)),
    "einsum-outer-2**64": Bad(lambda x: ra.einsum(x, x, x, x, "i, j, k, l -> i j k l"),
                              ("elements",), "i, j, k, l -> i j k l", shape=(2**16,),
                              libs=("numpy",)),
    # --- more than 64 dims
    "repeat-70-new-axes": Bad(lambda x: ra.repeat(x, f"a -> a {SEVENTY}", **lengths_70(1)),
                              ("71 dims", "64"), "a -> a x0"),
    "repeat-70-new-axes-merged": Bad(lambda x: ra.repeat(x, f"a -> a ({SEVENTY})",
                                                         **lengths_70(1)),
                                     ("71 dims",), "a -> a (x0"),
    "rearrange-split-70": Bad(lambda x: ra.rearrange(x, f"({SEVENTY}) -> ({SEVENTY})",
                                                     **{f"x{i}": 1 for i in range(69)}),
                              ("70 axes", "64"), f"({SEVENTY}) -> ({SEVENTY})"[:50], shape=(1,)),
    "rearrange-70-unit-dims": Bad(lambda x: ra.rearrange(x, "a -> a" + " 1" * 70),
                                  ("71 dims",), "a -> a 1 1"),
    # --- einsum dtypes it cannot multiply
    "einsum-str": Bad(lambda x: ra.einsum(np.array(["a", "b"]), "i ->"),
                      ("argument 0", "<U1", "str"), libs=("numpy",),
                      classes=(ValueError, RuntimeError, TypeError)),
    "einsum-bytes": Bad(lambda x: ra.einsum(x, np.array([b"a"] * 6), "i, i ->"),
                        ("argument 1", "bytes"), libs=("numpy",),
                        classes=(ValueError, RuntimeError, TypeError)),
    "einsum-datetime64": Bad(lambda x: ra.einsum(np.array(["2020-01-01"], "M8[D]"), "i ->"),
                             ("datetime64",), libs=("numpy",), classes=(TypeError,)),
    "einsum-timedelta64": Bad(lambda x: ra.einsum(np.array([1], "m8[s]"), "i ->"),
                              ("timedelta64",), libs=("numpy",), classes=(TypeError,)),
    "einsum-structured": Bad(lambda x: ra.einsum(np.zeros(2, "i4,f4"), "i ->"),
                             ("structured",), libs=("numpy",), classes=(TypeError,)),
    "einsum-str-Tensor-explain": Bad(lambda x: ra.explain([(2,)], "i ->", op="einsum",
                                                          dtype="U3"),
                                     ("U3",), libs=("numpy",), classes=(TypeError,)),
    # --- reductions that are neither a name nor a callable
    "reduce-array-reduction": Bad(lambda x: ra.reduce(x, "(a b) -> a", np.array([1, 2]), b=2),
                                  ("reduction must be a str or a callable", "ndarray"),
                                  "(a b) -> a", classes=(TypeError, RuntimeError)),
    "reduce-int-reduction": Bad(lambda x: ra.reduce(x, "a -> ", 3), ("int",), "a -> "),
    "reduce-unknown-name": Bad(lambda x: ra.reduce(x, "a -> ", "median"),
                               ("unknown reduction 'median'",), "a -> "),
    "reduce-callable-wrong-shape": Bad(lambda x: ra.reduce(x, "(a b) -> a", lambda y, ax: y, b=2),
                                       ("returned",), "(a b) -> a", libs=("numpy", "Tensor")),
    "reduce-min-zero-size": Bad(lambda x: ra.reduce(x, "a b -> b", "min"),
                                ("min",), "a b -> b", shape=(0, 3)),
    "reduce-argmax-zero-size": Bad(lambda x: ra.reduce(x, "a b -> b", "argmax"),
                                   ("argmax",), "a b -> b", shape=(0, 3)),
    # --- the einops shape errors (EinopsError in einops: a RuntimeError here too)
    "split-does-not-divide": Bad(lambda x: ra.rearrange(x, "(a b) -> a b", b=4),
                                 ("not divisible by 4",), "(a b) -> a b"),
    "wrong-rank": Bad(lambda x: ra.rearrange(x, "a b -> b a"), ("1 dim",), "a b -> b a"),
    "length-contradicts-input": Bad(lambda x: ra.rearrange(x, "a -> a", a=5),
                                    ("length 6", "a=5"), "a -> a"),
    "unknown-axis-length": Bad(lambda x: ra.rearrange(x, "a -> a", z=5), ("'z'",), "a -> a"),
    "length-zero": Bad(lambda x: ra.repeat(x, "a -> a b", b=0), ("b=0",), "a -> a b"),
    "length-negative": Bad(lambda x: ra.repeat(x, "a -> a b", b=-2), ("b=-2",), "a -> a b"),
    "length-float": Bad(lambda x: ra.repeat(x, "a -> a b", b=2.0), ("b=2.0",), "a -> a b"),
    "syntax-before-copy-flag": Bad(lambda x: ra.rearrange(x, "a -> (a", copy=1),
                                   ("unbalanced parentheses",), "a -> (a"),
    "syntax-before-reduction": Bad(lambda x: ra.reduce(x, "a -> (a", "median"),
                                   ("unbalanced parentheses",), "a -> (a"),
    "syntax-before-lengths": Bad(lambda x: ra.repeat(x, "a -> a b)", b=2.5),
                                 ("unbalanced parentheses",), "a -> a b)"),
    "copy-false-no-view": Bad(lambda x: ra.rearrange(x, "a b -> (b a)", copy=False),
                              ("copy=False",), "a b -> (b a)", shape=(2, 3),
                              libs=("numpy", "Tensor")),
    # --- unpack, pack, parse_shape, check_shape
    "unpack-negative-length": Bad(lambda x: ra.unpack(x, [(-12,)], "a *"),
                                  ("-12",), "a *", shape=(2, 3)),
    "unpack-junk-shapes": Bad(lambda x: ra.unpack(x, "junk", "a *"), ("str",), "a *",
                              shape=(2, 3), classes=(TypeError, RuntimeError)),
    "unpack-wrong-total": Bad(lambda x: ra.unpack(x, [(2,), (2,)], "a *"),
                              ("take 4",), "a *", shape=(2, 3)),
    "unpack-huge-shape": Bad(lambda x: ra.unpack(x, [(2**40, 2**40)], "a *"),
                             ("1208925819614629174706176",), "a *", shape=(2, 3)),
    "pack-rank": Bad(lambda x: ra.pack([x], "a b c *"), ("names 3 axes",), "a b c *",
                     shape=(2, 3)),
    "parse-shape-rank": Bad(lambda x: ra.parse_shape(x, "a b c"), ("3 dims",), "a b c",
                            shape=(2, 3)),
    "check-shape-length": Bad(lambda x: ra.check_shape(x, "a b", a=5), ("a=5",), "a b",
                              shape=(2, 3)),
    # --- argument types and array types
    "unsupported-array": Bad(lambda x: ra.rearrange(object(), "a -> a"),
                             ("torch tensor", "dask array", "array-API", "builtins.object"),
                             libs=("numpy",), classes=(TypeError,)),
    "out-torch-for-numpy": Bad(lambda x: ra.rearrange(x, "a -> a", out=torch.zeros(6)),
                               ("out must be a numpy array", "torch.Tensor"),
                               libs=("numpy",), classes=(TypeError,)),
    "out-for-torch-input": Bad(lambda x: ra.rearrange(x, "a -> a", out=torch.zeros(6)),
                               ("out=", "torch.Tensor input"), libs=("torch",),
                               classes=(TypeError,)),
    "asnumpy-object": Bad(lambda x: ra.asnumpy(object()), ("asnumpy()", "torch tensor"),
                          libs=("numpy",), classes=(TypeError,)),
    # --- Tensor factories and views with sizes no storage holds
    "zeros-2**63": Bad(lambda x: ra.zeros(BIG), ("Overflow", "pos 1"), libs=("numpy",),
                       classes=(TypeError,)),
    "zeros-2**62": Bad(lambda x: ra.zeros(2**62), ("Storage size calculation overflowed",),
                       libs=("numpy",)),
    "empty-2**40-squared": Bad(lambda x: ra.empty(2**40, 2**40), ("overflowed",),
                               libs=("numpy",)),
    "ones-2**61-float64": Bad(lambda x: ra.ones(2**61, dtype=ra.float64), ("bytes",),
                              libs=("numpy",)),
    "full-2**63": Bad(lambda x: ra.full((BIG,), 1.0), ("Overflow",), libs=("numpy",),
                      classes=(TypeError,)),
    "rand-2**62": Bad(lambda x: ra.rand(2**62), ("overflowed",), libs=("numpy",)),
    "randn-negative": Bad(lambda x: ra.randn(-1), ("negative dimension -1",), libs=("numpy",)),
    "zeros-70-dims": Bad(lambda x: ra.zeros([1] * 70), ("64 dims",), libs=("numpy",)),
    "arange-2**63": Bad(lambda x: ra.arange(BIG), ("int64",), libs=("numpy",)),
    "arange-inf": Bad(lambda x: ra.arange(float("inf")), ("unsupported range",),
                      libs=("numpy",)),
    "arange-float-too-many": Bad(lambda x: ra.arange(0, 1e30), ("overflowed",),
                                 libs=("numpy",)),
    "expand-2**70": Bad(lambda x: x.expand(2**70), ("Overflow",), libs=("Tensor",),
                        classes=(TypeError,)),
    "expand-2**62-by-4": Bad(lambda x: x.view(1, 1).expand(2**62, 4), ("overflow",),
                             shape=(1,), libs=("Tensor",)),
    "expand-negative": Bad(lambda x: x.expand(3, -2), ("overflow",), shape=(1,),
                           libs=("Tensor",)),  # torch's text, which does not name -2
    "view-2**63": Bad(lambda x: x.view(BIG), ("Overflow",), libs=("Tensor",),
                      classes=(TypeError,)),
    "reshape-70-dims": Bad(lambda x: x.reshape([1] * 70), ("64 dims",), shape=(1,),
                           libs=("Tensor",)),
    "as_strided-2**64-elements": Bad(lambda x: x.as_strided((2**62, 4), (0, 0)), ("overflow",),
                                     libs=("Tensor",)),
    "as_strided-70-dims": Bad(lambda x: x.as_strided([1] * 70, [0] * 70), ("64 dims",),
                              libs=("Tensor",)),
    "unsqueeze-65th-dim": Bad(lambda x: x.reshape([1] * 64).unsqueeze(0), ("65",),
                              shape=(1,), libs=("Tensor",)),
    # --- settings, and the kernel's own entry points (what they got, what they expect)
    "set_num_threads-str": Bad(lambda x: ra.set_num_threads("2"), ("positive integer", "'2'"),
                               libs=("numpy",), classes=(TypeError,)),
    "set_num_threads-0": Bad(lambda x: ra.set_num_threads(0), ("positive integer", "got 0"),
                             libs=("numpy",)),
    "set_jit_mode-unknown": Bad(lambda x: ra.set_jit_mode("lazy"), ("'eager'", "'lazy'"),
                                libs=("numpy",)),
    "set_spin_seconds-str": Bad(lambda x: ra.kernel.set_spin_seconds("0.1"),
                                ("seconds from 0 to 1", "'0.1'"), libs=("numpy",),
                                classes=(TypeError,)),
    "set_spin_seconds-2": Bad(lambda x: ra.kernel.set_spin_seconds(2), ("got 2",),
                              libs=("numpy",)),
    "copy_into-a-list": Bad(lambda x: ra.kernel.copy_into(list(x), x),
                            ("numpy arrays", "got list and ndarray"), libs=("numpy",),
                            classes=(TypeError,)),
    "copy_into-other-shape": Bad(lambda x: ra.kernel.copy_into(np.empty(5), x),
                                 ("(5,)", "(6,)"), libs=("numpy",)),
    "copy_into-not-contiguous": Bad(lambda x: ra.kernel.copy_into(np.zeros(6)[::-1], x),
                               ("C-contiguous or a slice of a C-ordered array",
                                "strides (-8,)"), libs=("numpy",)),
    "plan_copy-strides": Bad(lambda x: ra.kernel.plan_copy((6,), (8, 8), 8),
                             ("(6,)", "(8, 8)", "differ in length"), libs=("numpy",)),
}

CASES = [pytest.param(bad, lib, id=f"{name}-{lib}")
         for name, bad in BAD.items() for lib in bad.libs]


@pytest.mark.parametrize(("bad", "lib"), CASES)
def test_bad_input_is_a_quick_rearrange_error(bad: Bad, lib: str) -> None:
    x = LIBS[lib](bad.shape)
    before = snapshot(x)
    with pytest.raises(ra.RearrangeError):
        bad.call(x)                   # the first call may build the parser, import lark
    tracemalloc.start()
    started = time.perf_counter()
    try:
        with pytest.raises(ra.RearrangeError) as caught:
            bad.call(x)
        elapsed = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    error = caught.value
    assert elapsed < 1.0
    if not bad.asks_memory:
        assert peak < 2**24, f"{peak:,} bytes allocated"   # nothing of the result's size
    for cls in (ValueError, RuntimeError, *bad.classes):
        assert isinstance(error, cls), type(error).__mro__
    message = str(error)
    for text in bad.found:
        assert text in message, f"{text!r} not in {message!r}"
    if bad.pattern is not None:
        assert bad.pattern in message
    assert len(message) < 4096
    assert unchanged(x, before)


def test_the_table_is_large() -> None:
    assert len(CASES) >= 50


# ---------------------------------------------------------------------- einops' contract


def _corpus_call(entry: dict) -> tuple[tuple[int, ...], Callable[[Any, Any], Any]]:
    """The input shape (from einops' message) and ``call(lib, x)`` for a corpus error."""
    found = re.search(r"Input tensor shape: (\([0-9, ]*\))", entry["example_error"])
    shape = tuple(json.loads("[" + found.group(1)[1:-1].rstrip(", ") + "]")) if found else (2, 3, 4)
    op, pattern, lengths = entry["op"], entry["pattern"], entry["axes_lengths"]
    if op == "reduce":
        return shape, lambda lib, x: lib.reduce(x, pattern, entry["reduction"] or "mean", **lengths)
    return shape, lambda lib, x: getattr(lib, op)(x, pattern, **lengths)


CORPUS_ERRORS = [param for op in ("rearrange", "repeat", "reduce")
                 for param in load(op, "example_error")]


@pytest.mark.parametrize("entry", CORPUS_ERRORS)
def test_corpus_errors_are_caught_as_einops_errors_are(entry: dict) -> None:
    shape, call = _corpus_call(entry)
    x = np.zeros(shape)
    with pytest.raises(Exception) as theirs:  # noqa: PT011 - the class is compared below
        call(einops, x)
    with pytest.raises(ra.RearrangeError) as ours:
        call(ra, x)
    assert entry["example_error"].split(":")[0] == type(theirs.value).__name__
    if isinstance(theirs.value, einops.EinopsError):
        assert isinstance(ours.value, RuntimeError)
    assert isinstance(ours.value, ValueError)


# Shape errors einops raises EinopsError for: (op, shape, pattern, lengths, reduction).
SHAPE_ERRORS = [
    ("rearrange", (6,), "(a b) -> a b", {"b": 4}, None),
    ("rearrange", (6,), "a b -> b a", {}, None),
    ("rearrange", (6,), "a -> a", {"a": 5}, None),
    ("rearrange", (6,), "a -> a", {"z": 5}, None),
    ("rearrange", (2, 3), "a b -> a", {}, None),
    ("rearrange", (2, 3), "a b -> a b c", {}, None),
    ("rearrange", (6,), "(a b) -> a b", {}, None),
    ("rearrange", (2, 3, 4), "a b c d ... -> a", {}, None),
    ("rearrange", (2, 3), "a b -> (a b", {}, None),
    ("rearrange", (2, 3), "a a -> a", {}, None),
    ("repeat", (6,), "a -> a b", {}, None),
    ("repeat", (6,), "a b -> a b", {}, None),
    ("reduce", (2, 3), "a b -> a", {}, "median"),
    ("reduce", (2, 3), "a b -> a c", {}, "sum"),
    ("reduce", (2, 3), "(a b) c -> a", {"b": 4}, "sum"),
    ("reduce", (2, 3), "a b -> a", {"a": 3}, "max"),
]


@pytest.mark.parametrize(("op", "shape", "pattern", "lengths", "reduction"), SHAPE_ERRORS,
                         ids=[f"{c[0]} {c[2]} {c[3]}" for c in SHAPE_ERRORS])
@pytest.mark.parametrize("lib", ["numpy", "torch"])
def test_what_einops_raises_einops_error_for_is_a_runtime_error(op, shape, pattern, lengths,
                                                                 reduction, lib) -> None:
    x = LIBS[lib](shape)
    args = (reduction,) if op == "reduce" else ()
    with pytest.raises(einops.EinopsError):
        getattr(einops, op)(x, pattern, *args, **lengths)
    try:
        getattr(ra, op)(x, pattern, *args, **lengths)
    except RuntimeError as error:   # what einops users catch
        assert isinstance(error, ra.RearrangeError) and isinstance(error, ValueError)
        assert pattern in str(error)
    else:
        pytest.fail("no error")


def test_every_error_class_is_a_runtime_error_and_a_value_error() -> None:
    from rearrange.shapes import ShapeMismatchError

    for cls in (ra.RearrangeError, ra.PatternError, ra.LayoutError, ra.NoViewError,
                ra.DimensionError, ra.ArgumentTypeError, ShapeMismatchError):
        assert issubclass(cls, ra.RearrangeError)
        assert issubclass(cls, RuntimeError) and issubclass(cls, ValueError)
    assert issubclass(ra.DimensionError, IndexError)
    assert issubclass(ra.ArgumentTypeError, TypeError)


# ---------------------------------------------------------------------- messages


LONG = " ".join(f"ax{i}" for i in range(12000))     # about 80 KB


@pytest.mark.parametrize("call", [
    lambda x: ra.rearrange(x, f"{LONG} -> {LONG}"),
    lambda x: ra.rearrange(x, f"a b -> a b {LONG}"),
    lambda x: ra.rearrange(x, f"a b -> {LONG} $ {LONG}"),
    lambda x: ra.rearrange(x.reshape(-1), f"({LONG}) -> {LONG}"),
    lambda x: ra.rearrange(x, "a b -> a b", **{f"ax{i}": 1 for i in range(3000)}),
    lambda x: ra.repeat(x, f"a b -> a b {LONG}"),
    lambda x: ra.reduce(x, f"a b -> {LONG}", "sum"),
    lambda x: ra.einsum(x, f"a b -> {LONG}"),
    lambda x: ra.pack([x], f"{LONG} *"),
    lambda x: ra.unpack(x, [(3,)], f"{LONG} *"),
    lambda x: ra.parse_shape(x, LONG),
    lambda x: ra.check_shape(x, LONG),
    lambda x: ra.compile(f"a b -> {LONG}"),
    lambda x: ra.rearrange(x, "a b -> (b a)" + " " * 100_000, copy=False),
], ids=["rank", "right-only", "syntax", "group", "lengths", "repeat", "reduce", "einsum",
        "pack", "unpack", "parse_shape", "check_shape", "compile", "copy-false"])
def test_a_huge_pattern_gives_a_message_of_a_few_kb(call: Callable) -> None:
    with pytest.raises(ra.RearrangeError) as caught:
        call(np.zeros((2, 3)))
    message = str(caught.value)
    assert len(message) < 4096
    assert "…" in message


def test_a_long_pattern_keeps_its_caret_under_the_mistake() -> None:
    pattern = f"a b -> {LONG} $ {LONG}"
    with pytest.raises(ra.PatternError) as caught:
        ra.rearrange(np.zeros((2, 3)), pattern)
    lines = str(caught.value).splitlines()
    shown, carets = lines[1], lines[2]
    assert shown[carets.index("^")] == "$"


FUZZ_PATTERNS = [
    ("a b c -> a", {}), ("a b c -> a b c d", {}), ("a b -> a", {}), ("a b c -> a (b c) d", {"d": 2}),
    ("a (b x) c -> a b c", {"x": 2}), ("a b c -> a b c", {"b": 4}), ("a b c -> c b a", {"q": 1}),
    ("a b c -> a b c", {"b": BIG}),
]
FUZZ_REDUCTIONS = ["sum", "argmax", "nope", lambda y, axes: y, lambda y, axes: 3]


@pytest.mark.parametrize("lib", ["numpy", "Tensor", "torch"])
@pytest.mark.parametrize(("pattern", "lengths"), FUZZ_PATTERNS,
                         ids=[f"{p} {k}" for p, k in FUZZ_PATTERNS])
def test_every_transform_error_quotes_the_pattern(lib, pattern, lengths) -> None:
    x = LIBS[lib]((2, 3, 4))
    calls = [lambda: ra.rearrange(x, pattern, **lengths), lambda: ra.repeat(x, pattern, **lengths)]
    calls += [lambda r=r: ra.reduce(x, pattern, r, **lengths) for r in FUZZ_REDUCTIONS]
    for call in calls:
        try:
            call()
        except ra.RearrangeError as error:
            assert pattern in str(error), str(error)


@pytest.mark.parametrize("lib", ["numpy", "Tensor", "torch"])
@pytest.mark.parametrize(("pattern", "shapes"), [
    ("a *", [(2,), (2,)]), ("a *", [(13,)]), ("a * c", [(5,)]), ("a b c d *", [(1,)]),
    ("a *", [(-12,)]), ("a *", "junk"), ("a *", [("x",)]), ("a *", [(2**40, 2**40)]),
])
def test_every_unpack_error_quotes_the_pattern(lib, pattern, shapes) -> None:
    with pytest.raises(ra.RearrangeError) as caught:
        ra.unpack(LIBS[lib]((2, 3, 4)), shapes, pattern)
    assert f"pattern '{pattern}'" in str(caught.value)


@pytest.mark.parametrize("lib", ["numpy", "Tensor", "torch"])
@pytest.mark.parametrize("reduction", ["min", "max", "argmax", "argmin"])
def test_a_reduction_over_nothing_quotes_the_pattern(lib, reduction) -> None:
    x = LIBS[lib]((0, 3))
    with pytest.raises(ra.RearrangeError) as caught:
        ra.reduce(x, "a b -> b", reduction)
    assert "pattern 'a b -> b'" in str(caught.value)
    assert reduction in str(caught.value)


@pytest.mark.parametrize(("call", "first"), [
    (lambda x: ra.rearrange(x, "a b -> (a", copy=1), "unbalanced parentheses"),
    (lambda x: ra.rearrange(x, "a b -> (a", copy="yes"), "unbalanced parentheses"),
    (lambda x: ra.rearrange(x, "a b -> b a", copy="yes"), "copy must be None, True or False"),
    (lambda x: ra.reduce(x, "a b -> (a", "median"), "unbalanced parentheses"),
    (lambda x: ra.reduce(x, "a b -> a c", "median"), "appears only on the right side"),
    (lambda x: ra.reduce(x, "a b c -> a", "median"), "unknown reduction"),
    (lambda x: ra.repeat(x, "a b -> a b c)", c=2.5), "unbalanced parentheses"),
    (lambda x: ra.repeat(x, "a b c -> a b c d", d=2.5), "d=2.5"),
    (lambda x: ra.unpack(x, "junk", "a * *"), "'*'"),
    (lambda x: ra.rearrange(object(), "a -> (a"), "takes a numpy array"),
    (lambda x: ra.repeat(x, "a b -> (a b", copy="yes"), "unbalanced parentheses"),
    (lambda x: ra.repeat(x, "a b -> a b", copy="yes"), "copy must be None, True or False"),
    (lambda x: ra.repeat(torch.zeros(2, 3), "a b -> (a b", copy="yes"), "unbalanced parentheses"),
    (lambda x: ra.rearrange(x, "a b -> (a b", copy=False, out=np.zeros(6)),
     "unbalanced parentheses"),
], ids=["syntax-then-copy-int", "syntax-then-copy-str", "copy-then-rank", "syntax-then-reduction",
        "meaning-then-reduction", "reduction-then-rank", "syntax-then-length",
        "length-type-then-rank", "unpack-syntax-then-shapes", "array-type-then-syntax",
        "repeat-syntax-then-copy", "repeat-copy", "repeat-torch-syntax-then-copy",
        "out-syntax-then-copy-false"])
def test_the_first_thing_wrong_is_reported(call, first) -> None:
    with pytest.raises(ra.RearrangeError) as caught:
        call(np.zeros((2, 3)))
    assert first in str(caught.value).splitlines()[0]


# ---------------------------------------------------------------------- public namespace


EINOPS_NAMES = ("rearrange", "reduce", "repeat", "pack", "unpack", "einsum", "parse_shape",
                "asnumpy")


def test_star_import_brings_einops_names_and_shadows_no_builtin() -> None:
    code = ("import builtins, json, sys\n"
            "names = {}\n"
            "exec('from rearrange import *', names)\n"
            "names.pop('__builtins__')\n"
            "print(json.dumps({'names': sorted(names),\n"
            "                  'shadowed': sorted(set(names) & set(dir(builtins))),\n"
            "                  'heavy': sorted(m for m in ('numba', 'torch', 'dask', 'jax')\n"
            "                                  if m in sys.modules)}))\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    found = json.loads(result.stdout)
    assert found["shadowed"] == [], found["shadowed"]
    assert set(EINOPS_NAMES) <= set(found["names"])
    assert {"check_shape", "explain", "RearrangeError", "PatternError", "Tensor"} <= set(
        found["names"])
    assert found["heavy"] == []


def test_all_names_exist_and_builtin_names_stay_attributes() -> None:
    assert not set(ra.__all__) & set(dir(builtins))
    for name in ra.__all__:
        assert getattr(ra, name) is not None
    assert ra.compile("a b -> b a")(np.zeros((2, 3))).shape == (3, 2)
    assert ra.float32 == np.float32 and ra.int == np.int32 and ra.bool == np.bool_
    assert ra.float == np.float32


def test_asnumpy_of_every_array_type() -> None:
    expected = np.arange(6.0).reshape(2, 3)
    assert ra.asnumpy(expected) is expected
    np.testing.assert_array_equal(ra.asnumpy(ra.from_numpy(expected)), expected)
    grad = torch.arange(6.0, dtype=torch.float64, requires_grad=True).reshape(2, 3)
    converted = ra.asnumpy(grad)
    assert isinstance(converted, np.ndarray)
    np.testing.assert_array_equal(converted, expected)
    assert ra.asnumpy(np.float64(2.5)) == 2.5
    np.testing.assert_array_equal(ra.asnumpy(ra.rearrange(grad, "a b -> b a")), expected.T)
    np.testing.assert_array_equal(einops.asnumpy(grad), ra.asnumpy(grad))


def test_asnumpy_of_a_dask_array() -> None:
    da = pytest.importorskip("dask.array")
    x = da.from_array(np.arange(12).reshape(3, 4), chunks=2)
    np.testing.assert_array_equal(ra.asnumpy(x), np.arange(12).reshape(3, 4))
