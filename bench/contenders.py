"""The contenders of one case, built on the same input and checked before any timing.

``rearrange``  ``rearrange.rearrange(x, pattern, copy=..., **lengths)``
``numpy``      the plan's own lowering, ``eval`` of ``plan.to_source("numpy")``
``einops``     ``einops.rearrange`` (+ ``.copy()`` where a copy is asked for and einops
               returns a view)
``torch``      ``plan.to_source("torch")`` on ``torch.from_numpy(x)`` (the conversion is
               done once, outside the timing: a torch user already holds a tensor)
``jax``        XLA on the CPU: ``jax.jit`` of the plan's numpy source on a jax array
               already on the device (``jax.device_put(x)``, outside the timing: a
               contiguous copy of the input), ``block_until_ready`` on the result; XLA's
               thread pool is sized once when jax starts (every available core), so jax
               takes part only at that thread count
``limit``      a contiguous copy of the same number of bytes: numpy's (memcpy, one
               thread), torch's (``clone``/``copy_`` at the thread count) and rearrange's
               own (``'n -> n'``, its contiguous-memcpy kernel) are all timed, and the
               fastest is the limit

Two modes: ``alloc`` returns a new array per call (allocation and page faults included:
what a user sees); ``prealloc`` writes into an output allocated once
(``np.copyto``, ``Tensor.copy_``). ``rearrange`` takes part in ``prealloc`` as soon as it
accepts ``out=``; einops never can.
"""

from __future__ import annotations

import inspect
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

PEERS = ("numpy", "einops", "torch", "jax")
CONTENDERS = ("rearrange", *PEERS, "limit")
LIMITS = ("limit:numpy", "limit:torch", "limit:rearrange")


class MismatchError(AssertionError):
    """A contender's output differs from the reference: no timing is worth reporting."""


def rearrange_accepts_out(ra: Any) -> bool:
    return "out" in inspect.signature(ra.rearrange).parameters


@dataclass
class Contest:
    """Everything needed to time one case in one mode: calls keyed by contender name,
    and for the contenders that cannot take part, why not."""

    kind: str                                   # "copy" or "view" (rearrange's plan)
    bytes_moved: int                            # read + write bytes of the copy (0 for a view)
    plan_text: str
    sources: dict[str, str]
    copy_kernel: str                            # the copy step's kernel variant, if any
    calls: dict[str, dict[str, Callable[[], Any]]] = field(default_factory=dict)
    missing: dict[str, dict[str, str]] = field(default_factory=dict)
    result_is_view: dict[str, bool] = field(default_factory=dict)
    first_calls: dict[str, float] = field(default_factory=dict)


def _compile_source(source: str, namespace: dict[str, Any]) -> Callable[[Any], Any]:
    return eval("lambda x: " + source, namespace)  # noqa: S307 - the plan's own source


def _as_numpy(result: Any) -> np.ndarray:
    if isinstance(result, np.ndarray):
        return result
    return result.numpy() if hasattr(result, "numpy") else np.asarray(result)


def _check(name: str, got: Any, ref: np.ndarray, label: str) -> None:
    got = _as_numpy(got)
    try:
        np.testing.assert_array_equal(got, ref, err_msg=f"{label}: {name} differs from the reference")
    except AssertionError as error:
        raise MismatchError(str(error)) from None


def _kernel_variant(plan: Any) -> str:
    """The copy kernel the plan picked ("" for a view, or before there was a kernel)."""
    kernel = next((getattr(step, "kernel", None) for step in plan.steps if step.is_copy), None)
    return getattr(kernel, "variant", "") or ""


def _pre_copy_layout(plan: Any) -> Any:
    """The layout the plan's copy step reads: the view it copies into contiguous memory."""
    k = next(i for i, step in enumerate(plan.steps) if step.is_copy)
    return plan.steps[k - 1].layout if k else plan.input


def build(x: np.ndarray, pattern: str, lengths: dict[str, int], copy: bool | None,
          label: str, libs: dict[str, Any]) -> Contest:
    """Build and check every contender's calls for rearranging ``x`` with ``pattern``.

    Raises MismatchError when any contender's result differs from einops' (numpy's
    lowering when einops is not installed).
    """
    ra, einops, torch = libs["rearrange"], libs.get("einops"), libs.get("torch")
    plan = ra.explain(x, pattern, copy=copy, **lengths)
    kind = "view" if plan.is_view else "copy"
    sources = {"numpy": plan.to_source("numpy"), "torch": plan.to_source("torch")}
    contest = Contest(kind, plan.bytes_moved or 0, str(plan), sources, _kernel_variant(plan))

    if einops is not None:
        ref = np.asarray(einops.rearrange(x, pattern, **lengths))
    else:
        ref = np.asarray(_compile_source(sources["numpy"], {"np": np})(x))

    # ------------------------------------------------------------ allocation-inclusive
    alloc: dict[str, Callable[[], Any]] = {}
    missing: dict[str, str] = {}
    # numpy's first call comes first: it pays the first big allocation of this size (page
    # faults, huge-page compaction), so rearrange's first call pays only its own one-time
    # costs (plan, JIT) over a warm call.
    numpy_fn = _compile_source(sources["numpy"], {"np": np})
    alloc["numpy"] = lambda: numpy_fn(x)
    alloc["rearrange"] = lambda: ra.rearrange(x, pattern, copy=copy, **lengths)
    if einops is None:
        missing["einops"] = "einops not installed"
    else:
        raw = einops.rearrange(x, pattern, **lengths)
        if kind == "copy" and np.may_share_memory(raw, x):
            # einops returns a view; the user who needs the data in memory copies it.
            alloc["einops"] = lambda: einops.rearrange(x, pattern, **lengths).copy()
        else:
            alloc["einops"] = lambda: einops.rearrange(x, pattern, **lengths)
        del raw
    tx = None
    if torch is None:
        missing["torch"] = "torch not installed"
    elif any(s < 0 for s in x.strides):
        missing["torch"] = "torch.from_numpy refuses negative strides"
    else:
        tx = torch.from_numpy(x)
        torch_fn = _compile_source(sources["torch"], {"torch": torch})
        alloc["torch"] = lambda: torch_fn(tx)

    jax = libs.get("jax")
    if jax is None:
        missing["jax"] = "jax not installed"
    elif kind == "view":
        # XLA has no views: its call would copy where the others return at once (and
        # its copies, interleaved with their microsecond calls, evict their caches)
        missing["jax"] = "n/a (no views in XLA)"
    else:
        jx = jax.device_put(x)
        jax_fn = jax.jit(_compile_source(sources["numpy"], {"np": jax.numpy}))
        alloc["jax"] = lambda: jax_fn(jx).block_until_ready()

    for name, call in alloc.items():
        start = time.perf_counter()
        result = call()
        contest.first_calls[name] = time.perf_counter() - start
        _check(name, result, ref, label)
        is_view = name != "jax" and bool(np.may_share_memory(_as_numpy(result), x))
        contest.result_is_view[name] = is_view
        if kind == "copy" and is_view:
            raise MismatchError(f"{label}: {name} returned a view where rearrange's plan copies; "
                                "the case would compare a copy with a view")
        del result

    src = None
    if kind == "copy":
        src = x.reshape(-1) if x.flags.c_contiguous else np.ascontiguousarray(x).reshape(-1)
        alloc["limit:numpy"] = lambda: src.copy()
        alloc["limit:rearrange"] = lambda: ra.rearrange(src, "n -> n", copy=True)
        if torch is not None:
            tsrc = torch.from_numpy(src)
            alloc["limit:torch"] = lambda: tsrc.clone()
    contest.calls["alloc"] = alloc
    contest.missing["alloc"] = missing

    # ------------------------------------------------------------ preallocated output
    if kind == "copy":
        pre: dict[str, Callable[[], Any]] = {}
        pre_missing: dict[str, str] = {}
        out = np.empty(plan.output.shape, dtype=x.dtype)
        layout = _pre_copy_layout(plan)
        unit = x.itemsize if plan.stride_unit == "elements" else 1
        if layout.offset != 0:
            raise MismatchError(f"{label}: the copied view starts at offset {layout.offset}")
        src_view = np.lib.stride_tricks.as_strided(
            x, layout.shape, tuple(s * unit for s in layout.strides), writeable=False)
        out_view = out.reshape(layout.shape)
        if rearrange_accepts_out(ra):
            pre["rearrange"] = lambda: ra.rearrange(x, pattern, copy=copy, out=out, **lengths)
        else:
            pre_missing["rearrange"] = "n/a (no out= yet)"
        pre["numpy"] = lambda: np.copyto(out_view, src_view)
        pre_missing["einops"] = "n/a (no out=)"
        pre_missing["jax"] = "n/a (immutable arrays)"
        if tx is not None:
            tsrc_view = torch.as_strided(tx, layout.shape, tuple(layout.strides)) \
                if plan.stride_unit == "elements" else None
            if tsrc_view is None:
                pre_missing["torch"] = "n/a (byte strides)"
            else:
                tout_view = torch.from_numpy(out).view(layout.shape)
                pre["torch"] = lambda: tout_view.copy_(tsrc_view)
        else:
            pre_missing["torch"] = missing.get("torch", "n/a")
        for name, call in pre.items():
            out.fill(0)
            call()
            _check(name + " (into out)", out, ref, label)
        out_flat = out.reshape(-1)
        pre["limit:numpy"] = lambda: np.copyto(out_flat, src)
        if rearrange_accepts_out(ra):
            pre["limit:rearrange"] = lambda: ra.rearrange(src, "n -> n", out=out_flat)
        if torch is not None:
            tout_flat, tsrc_flat = torch.from_numpy(out_flat), torch.from_numpy(src)
            pre["limit:torch"] = lambda: tout_flat.copy_(tsrc_flat)
        contest.calls["prealloc"] = pre
        contest.missing["prealloc"] = pre_missing
    return contest
