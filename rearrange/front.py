"""The front door: one call path for every operation — ``rearrange``, ``reduce``,
``repeat``, ``pack``, ``unpack``, ``einsum``, ``parse_shape``, ``check_shape`` — on every
array type.

An operation declares what is its own (:class:`Operation`: how its inputs are taken, its
key, its planner, its lowering, its context line); :func:`run` walks every call down once::

    operation.inputs         which backend, and the inputs as it takes them (the op's
                             errors for inputs of mixed or unknown types)
    canonical lengths        3, np.int64(3) -> 3; 3.0, True -> refused by the planner
    key                      (name, ..., backend.cache_key(x) or the op's own account
                              of x, *extras, *lengths)              -> the plan cache
                             (transforms: first the last kept key with this
                             pattern, compared without hashing: PLANS.last_transform)
    miss: traced sizes?      operation.lower_traced: a runner for this trace, never cached
          else               operation.plan (parse cache, recipe, the backend's describe)
                             -> operation.lower (the backend's lower_*) -> cached
    run                      operation.call(runner, inputs); a RearrangeError gets the
                             call's context line, an allocation failure is
                             OutOfMemoryError (with the context line)

A key that cannot be hashed (traced sizes, an unhashable argument, :data:`NOT_KEPT`) is
a miss whose runner is never kept. Nothing here is array-type-specific (that is the
backend's: :class:`rearrange.backends.protocol.Backend`) and nothing operation-specific
(that is the :class:`Operation`'s), so a new operation is a parser entry, a planner and a
lowering per backend, declared as an :class:`Operation`, with no change to this module.

Warm fast paths stay ahead of the door where a call's speed needs them, each a single
plan-cache lookup whose miss comes here: :func:`run_transform` (rearrange, reduce,
repeat: backend, key, lookup inline), numpy's ``rearrange`` in :func:`rearrange.api.
rearrange`, the first lines of ``pack``, ``unpack``, ``einsum`` and ``parse_shape``, and
those of the notation operations (elementwise, indexing, along, the notation rearrange).
Each runs its hit with the same error handling (:func:`failure`).
"""

from __future__ import annotations

from typing import Any, Callable, Hashable, Mapping

import numpy as np

from . import backends
from .backends import ndarray, plan_for_array, plan_traced, refusal
from .backends import tensor as tensor_backend
from .backends.protocol import hook
from .caching import PLANS
from .calls import as_array, canonical_lengths, with_context
from .errors import ArgumentTypeError, OutOfMemoryError, RearrangeError
from .parsing import parse_cached
from .records import record
from .tensor import Tensor

__all__ = ["Operation", "NOT_KEPT", "PLAIN_INT", "backend_of", "run", "run_transform",
           "lower_miss", "failure", "parse", "one_array_traced", "any_traced",
           "call_runner", "TRANSFORMS"]

#: The one type an entry made for integers may be hit with: 3.0 == 3 and True == 1 in
#: Python, so other numbers must reach the planner's error instead.
PLAIN_INT = frozenset({int})
_PLAIN_INT = PLAIN_INT
_by_type = backends.by_type     # a foreign type -> its backend, once seen
_ndarray = np.ndarray
_entries = PLANS.entries
_NO_LENGTHS: Mapping[str, Any] = {}


class _NotKept:
    """A key no cache keeps: unhashable, so its lookup is a miss and ``PLANS.put``
    keeps nothing (the call is planned every time)."""

    __slots__ = ()
    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return "NOT_KEPT"


#: The key of a call whose runner must not be kept (see :class:`_NotKept`).
NOT_KEPT = _NotKept()

Runner = Callable[[Any], Any]


def call_runner(runner: Runner, inputs: Any) -> Any:
    """The default :attr:`Operation.call`: the cached entry is the runner."""
    return runner(inputs)


def one_array_traced(backend: Any, x: Any, lengths: Mapping[str, Any], extras: Any) -> bool:
    """The default :attr:`Operation.traced`, for an operation of one array: the
    backend's ``traced`` hook (torch: SymInts, jit.trace; every other backend: never)."""
    return hook(backend, "traced")(x, lengths)


def any_traced(backend: Any, inputs: Any, lengths: Mapping[str, Any], extras: Any) -> bool:
    """:attr:`Operation.traced` for an operation of a list of arrays (pack, einsum): is
    any input's size (or an axis length) traced?"""
    traced = hook(backend, "traced")
    return any(traced(x, lengths) for x in inputs)


@record
class Operation:
    """What an operation gives the door; the rest of a call is :func:`run`'s.

    Every function below but ``inputs`` and ``call`` takes ``(backend, inputs, pattern,
    lengths, extras)`` as the call brings them: ``inputs`` as :attr:`inputs` returned
    them, ``lengths`` the axis lengths by name (canonical where :attr:`canonical`),
    ``extras`` whatever else the operation's call takes (reduce's reduction and
    ``copy``, unpack's packed shapes), passed through untouched.
    """

    name: str            # the key's tag and the name in errors (``pack``, ``einsum``)
    parse_kind: str      # its start rule in the one parse cache (:func:`parse`)
    # inputs -> (backend, inputs as the backend takes them); raises the operation's
    # ArgumentTypeError for inputs of an unknown type or of mixed types
    inputs: Callable[[Any], tuple[Any, Any]]
    # -> the plan cache's key: the name, everything the runner depends on (the backend's
    # cache_key of each input, or the operation's narrower account of it), the extras
    # and the lengths; NOT_KEPT (or anything unhashable) for a call never to keep
    key: Callable[..., Hashable]
    # -> the plan, errors given the call's context by the planner (it knows the words)
    plan: Callable[..., Any]
    # (backend, plan, inputs, lengths, extras) -> the entry kept in the plan cache
    lower: Callable[..., Any]
    # (error, pattern, inputs, lengths, extras) -> the error with the call's context
    # line, or ``error`` itself where it quotes the pattern already
    context: Callable[..., RearrangeError]
    # -> are the sizes traced (torch.compile, torch.export, torch.jit.trace)?
    traced: Callable[..., bool] = one_array_traced
    # -> the entry for traced sizes, never cached; None: the operation takes no traced
    # sizes (the door refuses them)
    lower_traced: Callable[..., Any] | None = None
    # (entry, inputs) -> the result
    call: Callable[[Any, Any], Any] = call_runner
    # are the lengths made canonical before the key (3 and np.int64(3) one entry)?
    canonical: bool = True


def parse(operation: Operation, pattern: str) -> Any:
    """``pattern`` parsed and checked for ``operation``, from the one parse cache."""
    return parse_cached(operation.parse_kind, pattern, operation.name)
_last_transform = PLANS.last_transform


def backend_of(x: Any, op: str) -> tuple[Any, Any]:
    """``(backend, array)`` for a call's input: exact numpy arrays, Tensors, numpy
    scalars (as 0-d arrays), foreign arrays (torch, dask, array API, numpy subclasses)
    and lists/tuples of any of them (stacked on a new first axis, as einops does).
    Anything else is an ArgumentTypeError naming what the operations take."""
    kind = type(x)
    if kind is _ndarray:
        return ndarray, x
    backend = _by_type.get(kind)
    if backend is not None:
        return backend, x
    if isinstance(x, Tensor):
        return tensor_backend, x
    foreign = backends.foreign_input(x, op)
    if foreign is not None:
        return foreign
    array = as_array(x, op)
    return (tensor_backend if isinstance(array, Tensor) else ndarray), array


def run(operation: Operation, inputs: Any, pattern: Any,
        lengths: Mapping[str, Any] = _NO_LENGTHS, extras: Any = None) -> Any:
    """``operation`` of ``inputs`` (see the module's docstring): the one call path."""
    backend, inputs = operation.inputs(inputs)
    if lengths and operation.canonical and not _PLAIN_INT.issuperset(map(type, lengths.values())):
        lengths = canonical_lengths(lengths)
    key = operation.key(backend, inputs, pattern, lengths, extras)
    try:
        entry = _entries.get(key)
    except TypeError:   # an unhashable key: a miss, never kept
        entry = None
    if entry is not None:
        PLANS.hits += 1
    else:
        PLANS.misses += 1
        entry = lower_miss(operation, backend, inputs, pattern, lengths, extras, key)
    try:
        return operation.call(entry, inputs)
    except (RearrangeError, MemoryError, RuntimeError) as error:
        raised = failure(operation, error, pattern, inputs, lengths, extras)
        if raised is None:
            raise
        raise raised from None


def lower_miss(operation: Operation, backend: Any, inputs: Any, pattern: Any,
               lengths: Mapping[str, Any], extras: Any, key: Any,
               kept: Callable[[Any], None] | None = None) -> Any:
    """The entry for a call the plan cache missed: for traced sizes the operation's
    ``lower_traced`` (never cached: an entry made for one trace's sizes would bake them
    into another); else planned, lowered and kept under ``key`` (unless unhashable;
    ``kept(entry)`` is told when it is)."""
    if operation.traced(backend, inputs, lengths, extras):
        if operation.lower_traced is None:
            raise ArgumentTypeError(
                f"{operation.name}() does not take traced sizes (torch.compile, "
                "torch.export, torch.jit.trace)")
        return operation.lower_traced(backend, inputs, pattern, lengths, extras)
    plan = operation.plan(backend, inputs, pattern, lengths, extras)
    entry = operation.lower(backend, plan, inputs, lengths, extras)
    if PLANS.put(key, entry) and kept is not None:
        kept(entry)
    return entry


def failure(operation: Operation, error: BaseException, pattern: Any, inputs: Any,
            lengths: Mapping[str, Any], extras: Any) -> BaseException | None:
    """What a call raises for ``error`` from its runner: a RearrangeError (a reduction
    that failed on these values, a refusal, a size check) with the call's context; an
    allocation failure (numpy's MemoryError, torch's out-of-memory errors) as
    :class:`OutOfMemoryError`, with the context too. None: ``error`` is not the door's
    to translate (the caller re-raises it as it is)."""
    if isinstance(error, RearrangeError):
        return operation.context(error, pattern, inputs, lengths, extras)
    if backends.is_out_of_memory(error):
        return operation.context(OutOfMemoryError(f"not enough memory for the result: {error}"),
                                 pattern, inputs, lengths, extras)
    return None


# --------------------------------------------------------------------------- transforms
# rearrange, reduce, repeat: extras are (reduction, copy); the key is (op, backend,
# pattern, reduction, copy, backend.cache_key(x), *lengths), written out in
# run_transform's warm path too.


def _transform_inputs(op: str) -> Callable[[Any], tuple[Any, Any]]:
    return lambda x: backend_of(x, op)


def _transform_key(op: str) -> Callable[..., Hashable]:
    def key(backend: Any, x: Any, pattern: Any, lengths: Mapping[str, Any], extras: Any) -> Any:
        reduction, copy = extras
        found = (op, backend, pattern, reduction, copy, backend.cache_key(x))
        return found + tuple(lengths.items()) if lengths else found
    return key


def _transform_plan(op: str) -> Callable[..., Any]:
    def plan(backend: Any, x: Any, pattern: Any, lengths: Mapping[str, Any], extras: Any) -> Any:
        reduction, copy = extras
        return plan_for_array(backend, x, op, pattern, reduction, copy, lengths)
    return plan


def _transform_lower(backend: Any, plan: Any, x: Any, lengths: Mapping[str, Any],
                     extras: Any) -> Runner:
    # a plan the call refuses (copy=False, no view) is kept as a runner that raises
    return refusal(plan) or backend.lower(plan, extras[0], x)


def _transform_traced(op: str) -> Callable[..., Runner]:
    def lower_traced(backend: Any, x: Any, pattern: Any, lengths: Mapping[str, Any],
                     extras: Any) -> Runner:
        reduction, copy = extras
        return backend.lower_symbolic(plan_traced(x, op, pattern, reduction, copy, lengths),
                                      reduction)
    return lower_traced


def _transform_context(op: str) -> Callable[..., RearrangeError]:
    def context(error: RearrangeError, pattern: Any, x: Any, lengths: Mapping[str, Any],
                extras: Any) -> RearrangeError:
        return with_context(error, pattern, tuple(x.shape), lengths, op)
    return context


def _transform(op: str) -> Operation:
    return Operation(name=op, parse_kind="transform", inputs=_transform_inputs(op),
                     key=_transform_key(op), plan=_transform_plan(op), lower=_transform_lower,
                     context=_transform_context(op), lower_traced=_transform_traced(op))


#: rearrange, reduce and repeat, as the door takes them.
TRANSFORMS: dict[str, Operation] = {op: _transform(op) for op in ("rearrange", "reduce", "repeat")}


def run_transform(op: str, x: Any, pattern: str, reduction: Any, copy: bool | None,
                  axes_lengths: Mapping[str, Any]) -> Any:
    """rearrange, reduce or repeat of any array: :func:`run` of ``TRANSFORMS[op]``, with
    its warm path (backend, key, lookup) written out inline."""
    backend = _by_type.get(type(x))     # backend_of's answer for a foreign type seen before
    if backend is not None:
        array = x
    else:
        backend, array = backend_of(x, op)
    # copy=1 equals copy=True and hashes alike: only a real flag keys the cache (any
    # other value is the planner's to refuse)
    cacheable = comparable = copy is None or copy is True or copy is False
    if axes_lengths and not _PLAIN_INT.issuperset(map(type, axes_lengths.values())):
        axes_lengths = canonical_lengths(axes_lengths)
        # a symbolic length compared with an int would guard a trace on it
        comparable = cacheable and _PLAIN_INT.issuperset(map(type, axes_lengths.values()))
    key = (op, backend, pattern, reduction, copy, backend.cache_key(array))
    if axes_lengths:    # (a tuple display with *items() costs ~0.15 us more when empty)
        key += tuple(axes_lengths.items())
    # The inline index first: the last kept key with this pattern, compared without
    # hashing. It finds what the plan cache would: the keys are tuples of the same
    # fields, only hashable ones are remembered, and where an equality test could say
    # more than the cache's lookup it is not made — a reduction is the remembered one
    # itself (a callable's __eq__ is its own), lengths are plain ints, and a torch key
    # of symbolic sizes is unhashable (a list: unequal to any tuple, never compared
    # element by element). Then PLANS.get, inline. (An unhashable key — lengths or a
    # reduction, which planning reports, or traced sizes — is a miss never kept.)
    try:
        seen_key, runner = _last_transform[pattern]
    except (KeyError, TypeError):   # not seen, or an unhashable pattern
        seen_key = runner = None
    if seen_key is not None and comparable and seen_key[3] is reduction and seen_key == key:
        PLANS.hits += 1
    else:
        try:
            runner = _entries.get(key) if cacheable else None
        except TypeError:
            runner = None
        if runner is not None:
            PLANS.hits += 1
            PLANS.remember_last_transform(pattern, key, runner)
    if runner is None:
        PLANS.misses += 1
        runner = lower_miss(TRANSFORMS[op], backend, array, pattern, axes_lengths,
                            (reduction, copy), key,
                            kept=lambda entry: PLANS.remember_last_transform(pattern, key, entry))
    try:
        return runner(array)
    except (RearrangeError, MemoryError, RuntimeError) as error:
        raised = failure(TRANSFORMS[op], error, pattern, array, axes_lengths, (reduction, copy))
        if raised is None:
            raise
        raise raised from None
