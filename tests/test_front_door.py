"""One call path for every operation (issue #36, item 1): a new operation needs no change
to the door, ``rearrange/front.py``.

A toy operation, ``swap(x, "a b", times=1)`` — the transpose of a 2-d array, stacked
``times`` times on a new first axis — is declared here as what an operation brings: a
parser entry (a kind of the one parse cache), a planner and a numpy lowering. Through
:func:`rearrange.front.run` it gets the plan cache and ``cache_info`` counts, canonical
axis lengths, the unhashable-key fallback, the call's context on errors and the
out-of-memory policy. Oracle: numpy's own transpose and broadcast.

The package's own operations are declared the same way; the last tests check that their
parse kinds are the parse cache's and that pack and einsum get the same policies.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
import pytest

import rearrange as ra
from rearrange import front, parsing
from rearrange.errors import OutOfMemoryError, PatternError


# --------------------------------------------------------------------------- the toy


def _parse_swap(text: str, op: Any) -> tuple[str, str]:
    """The parser entry: exactly two axis names."""
    names = text.split()
    if len(names) != 2 or not all(name.isidentifier() for name in names):
        raise parsing.pattern_error("swap takes two axis names, e.g. 'a b'", text, 0,
                                    max(len(text), 1))
    return names[0], names[1]


parsing.register_kind("test-swap", _parse_swap)


@dataclass(frozen=True)
class SwapPlan:
    shape: tuple[int, ...]   # the result's shape
    times: Any


def _swap_inputs(x: Any) -> tuple[Any, Any]:
    return front.backend_of(x, "swap")


def _swap_key(backend: Any, x: Any, pattern: str, lengths: Mapping[str, Any], times: Any) -> Any:
    return ("test-swap", backend, pattern, backend.cache_key(x), times, *lengths.items())


PLANNED: list[str] = []     # the patterns planned, in order: a miss plans, a hit does not


def _plan_swap(backend: Any, x: Any, pattern: str, lengths: Mapping[str, Any],
               times: Any) -> SwapPlan:
    names = front.parse(SWAP, pattern)
    shape = tuple(x.shape)
    if len(shape) != 2:
        raise ra.PatternError(f"swap takes a 2-d array, got shape {shape}")
    for name, size in zip(names, shape):
        if name in lengths and lengths[name] != size:
            raise ra.PatternError(f"{name}={lengths[name]!r}, but the shape says {size}")
    PLANNED.append(pattern)
    return SwapPlan((times, shape[1], shape[0]), times)


def _lower_swap(backend: Any, plan: SwapPlan, x: Any, lengths: Any, times: Any) -> Any:
    assert backend.__name__.endswith("ndarray"), "the toy lowers for numpy alone"

    def run(x: np.ndarray) -> np.ndarray:
        if (x < 0).any():   # a failure that depends on the values, as a reduction's can
            raise ra.RearrangeError("swap takes no negative values")
        return np.broadcast_to(x.T, plan.shape).copy()
    return run


def _swap_context(error: Any, pattern: str, x: Any, lengths: Any, times: Any) -> Any:
    return type(error)(f"{error}\n  while swapping with pattern '{pattern}': input shape "
                       f"{tuple(x.shape)}")


SWAP = front.Operation(name="swap", parse_kind="test-swap", inputs=_swap_inputs,
                       key=_swap_key, plan=_plan_swap, lower=_lower_swap,
                       context=_swap_context)


def swap(x: Any, pattern: str, times: Any = 1, **axes_lengths: Any) -> Any:
    return front.run(SWAP, x, pattern, axes_lengths, times)


def _oracle(x: np.ndarray, times: int) -> np.ndarray:
    return np.broadcast_to(x.T, (times, *x.T.shape))


@pytest.fixture(autouse=True)
def _fresh() -> None:
    ra.cache_clear()
    PLANNED.clear()


# --------------------------------------------------------------------------- the toy's tests


def test_a_new_operation_is_planned_once_and_counted() -> None:
    x = np.arange(6).reshape(2, 3)
    first = swap(x, "a b", times=2)
    assert (ra.cache_info().plans.hits, ra.cache_info().plans.misses) == (0, 1)
    second = swap(x, "a b", times=2)
    info = ra.cache_info().plans
    assert (info.hits, info.misses, info.currsize) == (1, 1, 1), info
    assert PLANNED == ["a b"]
    np.testing.assert_array_equal(first, _oracle(x, 2))
    np.testing.assert_array_equal(second, _oracle(x, 2))
    swap(x.T.copy(), "a b", times=2)   # another shape: its own entry
    assert ra.cache_info().plans.currsize == 2 and PLANNED == ["a b", "a b"]
    ra.cache_clear()
    assert ra.cache_info().plans.currsize == 0


def test_a_new_operation_takes_lists_and_scalars_as_the_transforms_do() -> None:
    rows = [np.arange(3), np.arange(3, 6)]
    np.testing.assert_array_equal(swap(rows, "a b"), _oracle(np.stack(rows), 1))
    with pytest.raises(ra.ArgumentTypeError, match=r"swap\(\) takes"):
        swap("not an array", "a b")


def test_axis_lengths_are_canonical_before_the_key() -> None:
    x = np.arange(6).reshape(2, 3)
    swap(x, "a b", a=2)
    swap(x, "a b", a=np.int64(2))    # the same entry: 2 and np.int64(2) are one length
    info = ra.cache_info().plans
    assert (info.hits, info.currsize) == (1, 1) and PLANNED == ["a b"]
    with pytest.raises(ra.PatternError, match=r"a=2\.0"):   # 2.0 == 2: never a hit
        swap(x, "a b", a=2.0)


def test_an_unhashable_argument_is_planned_every_time_and_never_kept() -> None:
    x = np.arange(6).reshape(2, 3)
    times = np.array(3)     # a 0-d array: unhashable
    for _ in range(2):
        np.testing.assert_array_equal(swap(x, "a b", times=times), _oracle(x, 3))
    info = ra.cache_info().plans
    assert (info.hits, info.misses, info.currsize) == (0, 2, 0), info
    assert PLANNED == ["a b", "a b"]


def test_errors_carry_the_call_and_the_parser_entry_is_the_parse_caches() -> None:
    with pytest.raises(PatternError, match="swap takes two axis names"):
        swap(np.zeros((2, 3)), "a b c")
    before = parsing.cache_info()
    swap(np.zeros((2, 3)), "a b")
    swap(np.zeros((3, 2)), "a b")    # a new shape: planned, its pattern from the cache
    assert parsing.cache_info().hits > before.hits
    x = -np.ones((2, 3))
    for _ in range(2):  # a miss, then a hit: the same error, with the call's context
        with pytest.raises(ra.RearrangeError) as raised:
            swap(x, "a b")
        assert str(raised.value) == ("swap takes no negative values\n  while swapping "
                                     "with pattern 'a b': input shape (2, 3)")


def test_an_allocation_failure_is_out_of_memory_with_the_context() -> None:
    x = np.zeros((2, 3))
    with pytest.raises(OutOfMemoryError, match="not enough memory for the result") as raised:
        swap(x, "a b", times=2 ** 50)      # 2**50 * 6 float64: numpy refuses at once
    assert isinstance(raised.value, MemoryError)
    assert "while swapping with pattern 'a b': input shape (2, 3)" in str(raised.value)


def test_traced_sizes_need_the_operations_traced_lowering() -> None:
    always = dataclasses.replace(SWAP, traced=lambda *call: True)
    with pytest.raises(ra.ArgumentTypeError, match=r"swap\(\) does not take traced sizes"):
        front.run(always, np.zeros((2, 3)), "a b", {}, 1)


def test_the_door_names_no_operation() -> None:
    """Everything operation-specific lives with the operation: the door's source names
    none of the toy's pieces, and the package's operations are declared, not branched on."""
    source = inspect.getsource(front.run) + inspect.getsource(front.lower_miss) \
        + inspect.getsource(front.failure)
    for word in ("swap", "pack", "einsum", "parse_shape", "check_shape", "rearrange(",
                 "reduce", "repeat", "ndarray", "tensor_backend", ".name =="):
        assert word not in source, word


# --------------------------------------------------------------------------- the package's


def _operations() -> list[tuple[front.Operation, str]]:
    from rearrange.contraction import EINSUM
    from rearrange.packing import PACK, UNPACK
    from rearrange.shapes import CHECK_SHAPE, PARSE_SHAPE

    transforms = {"rearrange": "a b -> b a", "reduce": "a b -> a", "repeat": "a -> a b"}
    return [(PACK, "b *"), (UNPACK, "b *"), (EINSUM, "a b, b c -> a c"),
            (PARSE_SHAPE, "a _"), (CHECK_SHAPE, "a (b c)"),
            *((front.TRANSFORMS[op], pattern) for op, pattern in transforms.items())]


@pytest.mark.parametrize(("operation", "pattern"), _operations(),
                         ids=[op.name for op, _ in _operations()])
def test_every_operation_parses_through_the_parse_cache(operation: front.Operation,
                                                         pattern: str) -> None:
    parsed = front.parse(operation, pattern)
    assert front.parse(operation, pattern) is parsed    # cached


def test_pack_unpack_and_einsum_allocation_failures_are_out_of_memory() -> None:
    """numpy refuses a result of petabytes at once: broadcast inputs take no memory."""
    huge = np.broadcast_to(np.zeros(1), (2 ** 24, 2 ** 24))
    with pytest.raises(OutOfMemoryError, match="while packing with pattern 'a \\*'"):
        ra.pack([huge], "a *")
    # the entry was kept: the warm lookup's hit takes the same policy
    with pytest.raises(OutOfMemoryError, match="while packing with pattern 'a \\*'"):
        ra.pack([huge], "a *")
    line = np.broadcast_to(np.zeros(1), (2 ** 26,))
    for _ in range(2):  # a miss, then the warm path's hit
        with pytest.raises(OutOfMemoryError, match="while computing einsum with pattern"):
            ra.einsum(line, line, "a, b -> a b")


# --------------------------------------------------------------------------- every operation

# The package's public names that are not operations on arrays: explaining, the caches,
# settings, conversions, classes and the Tensor's constructors.
_NOT_OPERATIONS = frozenset({
    "asnumpy", "explain", "explain_indexing", "explain_elementwise", "cache_info",
    "cache_clear", "set_num_threads", "get_num_threads", "set_jit_mode", "get_jit_mode",
    "tensor", "as_tensor", "from_numpy", "arange", "zeros", "ones", "empty", "full", "rand",
    "randn", "as_strided", "manual_seed"})


def _cold_calls() -> dict[str, list[tuple[str, Any]]]:
    """Per public operation, its cold calls: (the door's operation name expected, the
    call). rearrange has several routes: numpy's own warm path, any array, the
    notation (a concatenation, a diagonal), out= for numpy and for a Tensor."""
    x = np.arange(24.0).reshape(2, 3, 4)
    table, ids = np.arange(12.0).reshape(4, 3), np.array([[3, 0]])
    packed, shapes = ra.pack([x, x], "a *")
    calls: dict[str, list[tuple[str, Any]]] = {
        "rearrange": [("rearrange", lambda: ra.rearrange(x, "a b c -> c b a")),
                      ("rearrange", lambda: ra.rearrange(ra.from_numpy(x), "a b c -> c b a")),
                      ("rearrange", lambda: ra.rearrange((table, table),
                                                         "a b, a c -> a (b + c)")),
                      ("rearrange", lambda: ra.rearrange(np.zeros((3, 3)), "a a -> a")),
                      ("rearrange", lambda: ra.rearrange(x, "a b c -> c b a",
                                                         out=np.empty((4, 3, 2)))),
                      ("rearrange", lambda: ra.rearrange(ra.from_numpy(x), "a b c -> c b a",
                                                         out=ra.from_numpy(np.empty((4, 3, 2)))))],
        "reduce": [("reduce", lambda: ra.reduce(x, "a b c -> a", "sum")),
                   ("reduce", lambda: ra.reduce(x, "a [b] c", "max"))],
        "repeat": [("repeat", lambda: ra.repeat(x, "a b c -> a b c d", d=2))],
        "pack": [("pack", lambda: ra.pack([x, x], "a *"))],
        "unpack": [("unpack", lambda: ra.unpack(packed, shapes, "a *"))],
        "einsum": [("einsum", lambda: ra.einsum(x, x, "a b c, a b c -> a")),
                   ("einsum", lambda: ra.einsum(x, x, "a b [c], a b [c] -> a b"))],
        "parse_shape": [("parse_shape", lambda: ra.parse_shape(x, "a b c"))],
        "check_shape": [("check_shape", lambda: ra.check_shape(x, "a b c", a=2))],
        "get_at": [("get_at", lambda: ra.get_at(table, ids, "[v] d, b t -> b t d"))],
        "roll": [("roll", lambda: ra.roll(x, "a b [c]", shift=1))],
    }
    for op in ("set_at", "add_at", "subtract_at"):
        calls[op] = [(op, lambda op=op: getattr(ra, op)(
            table, np.array([1, 2]), np.ones((2, 3)), "[v] d, p, p d"))]
    for op in ("softmax", "log_softmax", "flip", "sort", "argsort", "argmax", "argmin"):
        calls[op] = [(op, lambda op=op: getattr(ra, op)(x, "a b [c]"))]
    for op in ("add", "subtract", "multiply", "divide", "maximum", "minimum", "logaddexp"):
        calls[op] = [(op, lambda op=op: getattr(ra, op)(x, np.ones(4), "a b c, c"))]
    calls["where"] = [("where", lambda: ra.where(x > 3, x, 0.0, "a b c, a b c, -> a b c"))]
    return calls


def _public_operations() -> list[str]:
    return [name for name in ra.__all__ if name not in _NOT_OPERATIONS
            and inspect.isfunction(getattr(ra, name))]


def test_every_public_operation_is_classified() -> None:
    """A new public function is either an operation (with a cold call below, so the next
    test walks it through the door) or named in _NOT_OPERATIONS."""
    missing = set(_public_operations()) - set(_cold_calls())
    assert not missing, f"public operations without a cold call in this test: {missing}"


@pytest.mark.parametrize("op", sorted(_cold_calls()))
def test_every_public_operation_walks_through_the_door(op: str, monkeypatch: Any) -> None:
    """A cold call of each public operation reaches front.lower_miss (the door's miss:
    through front.run, or run_transform's inline warm path), with the Operation declared
    for it; a second call of the same arguments is a hit (nothing lowered)."""
    seen: list[str] = []
    real = front.lower_miss

    def spy(operation: front.Operation, *args: Any, **kwargs: Any) -> Any:
        seen.append(operation.name)
        return real(operation, *args, **kwargs)

    monkeypatch.setattr(front, "lower_miss", spy)
    for name, call in _cold_calls()[op]:
        ra.cache_clear()
        seen.clear()
        call()
        assert name in seen, (op, seen)
        seen.clear()
        call()      # warm: a hit, ahead of the door or in it
        assert seen == [], (op, seen)


def _notation_calls() -> list[tuple[str, Any]]:
    """(name, call with one axis length ``n``): a notation operation per module."""
    table, ids = np.arange(12.0).reshape(4, 3), np.array([[3, 0]])
    return [("get_at", lambda n: ra.get_at(table, ids, "[v] d, b t -> b t d", d=n)),
            ("flip", lambda n: ra.flip(np.arange(12.0).reshape(2, 6), "a (b [c])", b=n)),
            ("split", lambda n: ra.rearrange(np.zeros((2, 5)), "a (b + c) -> a b, a c", b=n)),
            ("add", lambda n: ra.add(np.zeros((2, 3)), np.ones(3), "a b, b", b=n))]


@pytest.mark.parametrize(("name", "call"), _notation_calls(), ids=[n for n, _ in _notation_calls()])
def test_notation_lengths_are_canonical_and_never_hit_for_floats_or_bools(name: str,
                                                                          call: Any) -> None:
    """3 and np.int64(3) share one entry; 3.0 and True (equal to 3 and 1 in Python) are
    refused after 3 was kept, never served by its entry."""
    n = 3 if name != "split" else 2
    expected = call(n)
    before = ra.cache_info().plans
    again = call(np.int64(n))
    after = ra.cache_info().plans
    # no miss: np.int64(n) is n's entry (flip and split run rearranges inside: more hits)
    assert after.misses == before.misses and after.hits > before.hits, (before, after)
    for got, want in zip(again if isinstance(again, tuple) else [again],
                         expected if isinstance(expected, tuple) else [expected]):
        np.testing.assert_array_equal(got, want)
    for wrong in (float(n), True):
        with pytest.raises(ra.RearrangeError, match=re.escape(f"={wrong!r}")):
            call(wrong)
