"""Any array library implementing the Python array API standard (``__array_namespace__``).

The standard hides memory layout, so the plan is made for a C-contiguous input and
lowered through the namespace's functions: ``reshape``, ``permute_dims``,
``broadcast_to`` and its reductions. A copy step is left to ``reshape`` (which copies
exactly when it must); ``copy=True`` asks ``asarray(..., copy=True)`` for a fresh array.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from ..errors import RearrangeError
from ..layout import Layout
from ..plan import Plan
from . import ArrayInfo, reduction_error

Runner = Callable[[Any], Any]


def matches(x: Any) -> bool:
    return hasattr(type(x), "__array_namespace__") and hasattr(x, "shape")


def cache_key(x: Any) -> tuple:
    return type(x), tuple(x.shape), str(x.dtype)


def describe(x: Any) -> ArrayInfo:
    shape = tuple(int(s) for s in x.shape)
    dtype = str(x.dtype).rsplit(".", 1)[-1]
    return ArrayInfo(Layout.contiguous(shape), dtype, _itemsize(x))


def _itemsize(x: Any) -> int:
    xp = x.__array_namespace__()
    try:
        info = xp.finfo(x.dtype) if xp.isdtype(x.dtype, ("real floating", "complex floating")) \
            else xp.iinfo(x.dtype)
        return info.bits // 8 * (2 if xp.isdtype(x.dtype, "complex floating") else 1)
    except (TypeError, ValueError, AttributeError):
        return 1  # bool


def stack(xs: list[Any]) -> Any:
    return xs[0].__array_namespace__().stack(xs)


def lower(plan: Plan, reduction: Any, sample: Any = None) -> Runner:
    steps = []
    for step in plan.steps:
        args = step.args
        if step.op in ("split", "unsqueeze", "merge"):
            steps.append(lambda xp, x, shape=args: xp.reshape(x, shape))
        elif step.op == "permute":
            steps.append(lambda xp, x, order=args: xp.permute_dims(x, order))
        elif step.op == "expand":
            steps.append(lambda xp, x, shape=args: xp.broadcast_to(x, shape))
        elif step.op == "reduce":
            steps.append(_reducer(reduction, args))
        elif step.op == "copy" and step is plan.steps[-1] and plan.copy_requested:
            steps.append(lambda xp, x: xp.asarray(x, copy=True))
        # other copy steps: the merging reshape after them copies as needed

    def run(x: Any) -> Any:
        xp = x.__array_namespace__()
        for stage in steps:
            x = stage(xp, x)
        return x
    return run


def _default_dtype(xp: Any, kind: str) -> Any:
    """The namespace's default dtype of ``kind`` ("real floating", "integral"): float64
    and int64 in most, float32 and int32 in jax unless ``jax_enable_x64`` is set."""
    info = getattr(xp, "__array_namespace_info__", None)
    if info is not None:
        return info().default_dtypes()[kind]
    return xp.float64 if kind == "real floating" else xp.int64


def _reducer(reduction: Any, dims: tuple[int, ...]) -> Callable[[Any, Any], Any]:
    """The standard's reductions, made to give numpy's results where the standard
    leaves a dtype undefined: bools sum and multiply as integers, order as False <
    True; integer means are floats; complex var/std are of the magnitude."""
    if callable(reduction):
        return lambda xp, x: reduction(x, dims)

    def is_bool(xp: Any, x: Any) -> bool:
        return xp.isdtype(x.dtype, "bool")

    def is_complex(xp: Any, x: Any) -> bool:
        return xp.isdtype(x.dtype, "complex floating")

    def to_float(xp: Any, x: Any) -> Any:
        if xp.isdtype(x.dtype, ("real floating", "complex floating")):
            return x
        return xp.astype(x, _default_dtype(xp, "real floating"))

    def to_int(xp: Any, x: Any) -> Any:
        return xp.astype(x, _default_dtype(xp, "integral")) if is_bool(xp, x) else x

    def bool_order(reduce: Callable[..., Any]) -> Callable[..., Any]:
        # min and max of bools are all and any, except that numpy refuses them (no
        # identity) over zero elements
        def run(x: Any, axis: tuple[int, ...]) -> Any:
            if any(x.shape[d] == 0 for d in axis):
                raise ValueError("zero-size array to reduction operation which has no "
                                 "identity")
            return reduce(x, axis=axis)
        return run

    def ordered(xp: Any, x: Any) -> Any:
        return xp.astype(x, xp.uint8) if is_bool(xp, x) else x

    def var(xp: Any, x: Any) -> Any:
        x = to_float(xp, x)
        if not is_complex(xp, x):
            return xp.var(x, axis=dims, correction=0)
        deviation = xp.abs(x - xp.mean(x, axis=dims, keepdims=True))
        return xp.mean(deviation * deviation, axis=dims)

    def logsumexp(xp: Any, x: Any) -> Any:
        x = to_float(xp, x)
        if x.size == 0:
            return xp.log(xp.sum(xp.exp(x), axis=dims))
        # the peak of the real parts bounds every |exp|: exact for complex too
        peak = xp.max(xp.real(x) if is_complex(xp, x) else x, axis=dims, keepdims=True)
        peak = xp.where(xp.isfinite(peak), peak, xp.zeros_like(peak))
        return xp.log(xp.sum(xp.exp(x - peak), axis=dims)) + xp.squeeze(peak, axis=dims)

    table: dict[str, Callable[[Any, Any], Any]] = {
        "sum": lambda xp, x: xp.sum(to_int(xp, x), axis=dims),
        "mean": lambda xp, x: xp.mean(to_float(xp, x), axis=dims),
        "min": lambda xp, x: (bool_order(xp.all) if is_bool(xp, x) else xp.min)(x, axis=dims),
        "max": lambda xp, x: (bool_order(xp.any) if is_bool(xp, x) else xp.max)(x, axis=dims),
        "prod": lambda xp, x: xp.prod(to_int(xp, x), axis=dims),
        "any": lambda xp, x: xp.any(x, axis=dims),
        "all": lambda xp, x: xp.all(x, axis=dims),
        "var": var,
        "std": lambda xp, x: xp.sqrt(var(xp, x)),
        "logsumexp": logsumexp,
        "argmax": lambda xp, x: xp.argmax(ordered(xp, x), axis=dims[0]),
        "argmin": lambda xp, x: xp.argmin(ordered(xp, x), axis=dims[0]),
        "count_nonzero": lambda xp, x: xp.count_nonzero(x, axis=dims),
    }
    reduce = table[reduction]

    def run(xp: Any, x: Any) -> Any:
        try:
            return reduce(xp, x)
        except (ValueError, RuntimeError, IndexError, TypeError) as error:
            # e.g. max over a zero-size axis; the standard has no max of complex
            raise reduction_error(reduction, error) from None
    return run


def describe_copy(plan: Plan, x: Any, info: ArrayInfo) -> Plan:
    """No kernel here: the namespace's ``reshape`` copies where the plan shows a copy."""
    steps = tuple(dataclasses.replace(step, kernel=None) if step.is_copy else step
                  for step in plan.steps)
    note = (f"array API ({type(x).__module__.split('.')[0]}): memory layout is hidden, so the "
            "plan assumes a C-contiguous input; the namespace's reshape makes any copy")
    return dataclasses.replace(plan, steps=steps, notes=(*plan.notes, note))


# ---------------------------------------------------------------------- pack, unpack, einsum

def reshape(x: Any, shape: tuple[int, ...]) -> Any:
    return x.__array_namespace__().reshape(x, shape)


def concat(xs: list[Any], axis: int) -> Any:
    return xs[0].__array_namespace__().concat(xs, axis=axis)


def einsum(subscripts: str, *xs: Any) -> Any:
    """The namespace's own ``einsum`` where it has one (jax.numpy, numpy, torch, cupy do),
    else :func:`broadcast_einsum`."""
    xp = xs[0].__array_namespace__()
    own = getattr(xp, "einsum", None)
    if own is not None:
        return own(subscripts, *xs)
    return broadcast_einsum(subscripts, *xs)


def describe_einsum(plan: Any, xs: Any) -> Any:
    """Which einsum runs, and for the stand-in, how large its product is."""
    from ..contraction import with_engine

    xp = xs[0].__array_namespace__()
    name = getattr(xp, "__name__", type(xs[0]).__module__.split(".")[0])
    if getattr(xp, "einsum", None) is not None:
        return with_engine(plan, f"{name}.einsum", f"{name}.einsum, the namespace's own")
    engine = f"broadcast product ({name} has no einsum)"
    if _diagonal(plan.subscripts):
        return with_engine(plan, engine, f"refused: an axis repeated within one input (a "
                           f"diagonal) needs an einsum, and {name} has none")
    elements = plan.cost
    size = f"{elements * plan.itemsize:,} bytes" if plan.itemsize else f"{elements:,} elements"
    return with_engine(plan, engine, f"{name} has no einsum: the inputs broadcast to one "
                       f"product of {elements:,} elements ({size}), then summed")


def _diagonal(subscripts: str) -> bool:
    terms = subscripts.split("->")[0].replace("...", "").split(",")
    return any(len(set(term)) != len(term) for term in terms)


def broadcast_einsum(subscripts: str, *xs: Any) -> Any:
    """numpy-style einsum from the standard's functions alone, for namespaces without
    one: every operand is permuted and broadcast to one axis order, multiplied, and the
    summed axes reduced. The product is materialised, so this trades memory for
    portability; a repeated letter within one operand (a diagonal) is refused."""
    xp = xs[0].__array_namespace__()
    inputs, output = subscripts.split("->")
    terms = _expand_ellipses(inputs.split(","), output, [x.ndim for x in xs])
    inputs_terms, output_term = terms[:-1], terms[-1]
    for term in inputs_terms:
        if len(set(term)) != len(term):
            raise RearrangeError(
                f"einsum {subscripts!r}: an axis repeated within one input (a diagonal) "
                f"needs an einsum, and this array namespace ({getattr(xp, '__name__', xp)}) "
                "has none")
    summed = sorted({c for term in inputs_terms for c in term} - set(output_term))
    order = list(output_term) + summed
    product = None
    for x, term in zip(xs, inputs_terms):
        present = [c for c in order if c in term]
        x = xp.permute_dims(x, tuple(term.index(c) for c in present))
        x = xp.reshape(x, tuple(x.shape[present.index(c)] if c in term else 1 for c in order))
        product = x if product is None else product * x
    if summed:
        product = xp.sum(product, axis=tuple(range(len(output_term), len(order))))
    shape = tuple(product.shape[:len(output_term)])
    return product if shape == tuple(product.shape) else xp.reshape(product, shape)


def _expand_ellipses(inputs: list[str], output: str, ndims: list[int]) -> list[str]:
    """Each term with its '...' replaced by letters: right-aligned, as broadcasting does."""
    used = set("".join(inputs) + output)
    spare = [c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz" if c not in used]
    counts = [ndim - (len(term) - 3) if "..." in term else 0 for term, ndim in zip(inputs, ndims)]
    width = max(counts, default=0)
    letters = "".join(spare[:width])
    expanded = [term.replace("...", letters[width - k:]) for term, k in zip(inputs, counts)]
    return expanded + [output.replace("...", letters)]
