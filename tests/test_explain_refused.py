"""explain is the call: ``explain(..., copy=False)`` says ``refused`` exactly when the
operation with ``copy=False`` raises NoViewError — for rearrange and repeat, on the
corpus and on Hypothesis-generated strided layouts, for every array type — and the
plan's to_source, to_dict and the CLI (``--copy never``) agree."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import array_api_strict
import dask.array as da
import numpy as np
import pytest
import torch
from hypothesis import given, strategies as st

import rearrange as ra
from corpus import load

REARRANGE = load("rearrange")
REPEAT = load("repeat")


def _outcome(call) -> str | None:
    """The NoViewError's message, or None when the call runs."""
    try:
        call()
    except ra.NoViewError as error:
        return str(error)
    return None


def _assert_agree(plan, raised: str | None) -> None:
    assert (plan.refused is not None) == (raised is not None), (plan.refused, raised)
    assert plan.to_dict()["refused"] == plan.refused
    if plan.refused is None:
        assert not str(plan).splitlines()[5].startswith("  result   refused")
        return
    # the error and the plan give the same reason, and nothing writes it as code
    assert plan.copy_reason in raised and plan.copy_reason in plan.refused
    assert f"  result   refused: {plan.refused}" in str(plan)
    for library in ("numpy", "torch"):
        with pytest.raises(ra.NoViewError, match="refused"):
            plan.to_source(library)


def _transposed(shape: tuple[int, ...]) -> np.ndarray:
    """A view of ``shape`` whose strides are reversed (Fortran order)."""
    return np.arange(math.prod(shape), dtype=np.float32).reshape(shape[::-1]).T


@pytest.mark.parametrize("layout", ["c", "f"])
@pytest.mark.parametrize("entry", REARRANGE[::4])
def test_rearrange_corpus(entry: dict, layout: str) -> None:
    example = entry["example"]
    shape, lengths = tuple(example["shape"]), example["axes_lengths"]
    x = np.zeros(shape, np.float32) if layout == "c" else _transposed(shape)
    plan = ra.explain(x, entry["pattern"], copy=False, **lengths)
    _assert_agree(plan, _outcome(lambda: ra.rearrange(x, entry["pattern"], copy=False,
                                                      **lengths)))


@pytest.mark.parametrize("entry", REPEAT)
def test_repeat_corpus(entry: dict) -> None:
    example = entry["example"]
    x = np.zeros(example["shape"], np.float32)
    lengths = example["axes_lengths"]
    plan = ra.explain(x, entry["pattern"], op="repeat", copy=False, **lengths)
    _assert_agree(plan, _outcome(lambda: ra.repeat(x, entry["pattern"], copy=False,
                                                   **lengths)))


@st.composite
def strided_views(draw, new_axis: bool = False):
    """Views with steps, reversals and transposes: (array, pattern) with a permutation,
    a merge of two neighbouring output axes and, for repeat, a new axis ``r`` alone or
    in a group."""
    ndim = draw(st.integers(2, 4))
    shape = tuple(draw(st.integers(1, 4)) for _ in range(ndim))
    steps = [draw(st.sampled_from([1, 2, -1])) for _ in range(ndim)]
    base = np.arange(math.prod(s * 2 for s in shape), dtype=np.float64).reshape(
        tuple(s * 2 for s in shape))
    view = base[tuple(slice(None, s * step, step) if step > 0 else slice(None, -s - 1, -1)
                      for s, step in zip(shape, steps))]
    view = view.transpose(draw(st.permutations(range(ndim))))
    names = "abcd"[:ndim]
    axes = list(draw(st.permutations(names)))
    if new_axis:
        axes.insert(draw(st.integers(0, ndim)), "r")
    at = draw(st.integers(0, len(axes) - 2))
    right = [*axes[:at], f"({axes[at]} {axes[at + 1]})", *axes[at + 2:]]
    return view, f"{' '.join(names)} -> {' '.join(right)}"


@given(strided_views())
def test_rearrange_on_strided_layouts(case) -> None:
    x, pattern = case
    plan = ra.explain(x, pattern, copy=False)
    _assert_agree(plan, _outcome(lambda: ra.rearrange(x, pattern, copy=False)))


@given(strided_views(new_axis=True), st.integers(2, 3))
def test_repeat_on_strided_layouts(case, times) -> None:
    x, pattern = case
    plan = ra.explain(x, pattern, op="repeat", copy=False, r=times)
    _assert_agree(plan, _outcome(lambda: ra.repeat(x, pattern, copy=False, r=times)))


@pytest.mark.parametrize("make", [
    ra.tensor,
    lambda a: torch.from_numpy(np.ascontiguousarray(a)),
    lambda a: da.from_array(np.ascontiguousarray(a), chunks=2),
    lambda a: array_api_strict.asarray(np.ascontiguousarray(a)),
], ids=["tensor", "torch", "dask", "array_api"])
@pytest.mark.parametrize("pattern, op, lengths", [
    ("b h t d -> b t (h d)", "rearrange", {}),
    ("b h t d -> b h (t d)", "rearrange", {}),
    ("b h t d -> (b h) t d", "rearrange", {}),
    ("b h t d -> b h t d r", "repeat", {"r": 2}),
    ("b h t d -> b h (t r) d", "repeat", {"r": 2}),
])
def test_every_array_type(make, pattern, op, lengths) -> None:
    x = make(np.zeros((2, 3, 4, 5), np.float32))
    plan = ra.explain(x, pattern, op=op, copy=False, **lengths)
    call = ra.rearrange if op == "rearrange" else ra.repeat
    _assert_agree(plan, _outcome(lambda: call(x, pattern, copy=False, **lengths)))


# ---------------------------------------------------------------------- the CLI

def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rearrange", "explain", *args],
                          capture_output=True, text=True, timeout=120)


# A process each (a second or two): the quick tier (-m "not slow") keeps one refused and
# one allowed.
@pytest.mark.parametrize("pattern, shape, extra, refused", [
    ("b h t d -> b t (h d)", "2,8,16,4", [], True),
    ("b h t d -> b h (t d)", "2,8,16,4", [], False),
    pytest.param("h w -> (h w)", "4,6", ["--strides", "1,4"], True, marks=pytest.mark.slow),
    pytest.param("h w -> (w h)", "4,6", ["--strides", "1,4"], False, marks=pytest.mark.slow),
    pytest.param("h w -> (h 2) w", "4,6", ["--op", "repeat"], True, marks=pytest.mark.slow),
    pytest.param("h w -> h w 2", "4,6", ["--op", "repeat"], False, marks=pytest.mark.slow),
])
def test_cli_copy_never_exits_nonzero_exactly_when_refused(pattern, shape, extra,
                                                           refused) -> None:
    table = _cli(pattern, "--shape", shape, "--copy", "never", *extra)
    emitted = _cli(pattern, "--shape", shape, "--copy", "never", "--emit", "torch", *extra)
    dumped = _cli(pattern, "--shape", shape, "--copy", "never", "--json", *extra)
    for run in (table, emitted, dumped):
        assert run.returncode == (1 if refused else 0), run.stderr
        assert ("copy=False but no view" in run.stderr) == refused
    assert ("result   refused: copy=False but no view" in table.stdout) == refused
    assert (json.loads(dumped.stdout)["refused"] is not None) == refused
    if refused:
        assert emitted.stdout == ""                     # no copying code for it
    else:
        assert emitted.stdout.strip() and emitted.stderr == ""
