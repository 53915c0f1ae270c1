"""The public surface around rearrange(): to_source, compile, caches, lists, Tensors, CLI."""

from __future__ import annotations

import json
import pathlib
import re
import subprocess
import sys
import threading

import einops
import numpy as np
import pytest
import torch

import rearrange as ra
from rearrange import kernel

SOURCE_CASES = [
    ("b h t d -> b t (h d)", (2, 3, 4, 5), {}),
    ("b h t d -> b h (t d)", (2, 3, 4, 5), {}),
    ("b (h d) t -> b h t d", (2, 12, 5), {"h": 3}),
    ("b c (h p1) (w p2) -> b (h w) (p1 p2 c)", (2, 3, 8, 8), {"p1": 4, "p2": 4}),
    ("a b c d -> d c b a", (2, 3, 4, 5), {}),
    ("b 1 c -> b () c 1", (2, 1, 3), {}),
    ("b ... c -> b c (...)", (2, 3, 4, 5), {}),
    ("a b -> a b", (2, 3), {}),
    (" -> 1", (), {}),
]


@pytest.mark.parametrize(("pattern", "shape", "lengths"), SOURCE_CASES, ids=[c[0] for c in SOURCE_CASES])
@pytest.mark.parametrize("copy", [None, True])
def test_to_source_runs_in_numpy_and_torch(pattern, shape, lengths, copy) -> None:
    x = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)
    plan = ra.explain(x, pattern, copy=copy, **lengths)
    expected = einops.rearrange(x, pattern, **lengths)
    from_numpy = eval(plan.to_source("numpy"), {"x": x})
    from_torch = eval(plan.to_source("torch"), {"x": torch.from_numpy(x), "torch": torch})
    np.testing.assert_array_equal(from_numpy, expected)
    np.testing.assert_array_equal(from_torch.numpy(), expected)
    shares = torch.from_numpy(x).untyped_storage().data_ptr() == from_torch.untyped_storage().data_ptr()
    assert shares == plan.is_view or x.size == 0


def test_to_source_rejects_unknown_library() -> None:
    with pytest.raises(ra.RearrangeError, match="'numpy' or 'torch'"):
        ra.explain((2, 3), "a b -> b a").to_source("jax")


def test_compile_is_reusable_and_explains() -> None:
    to_heads = ra.compile("b t (h d) -> b h t d", h=4)
    x = np.arange(2 * 16 * 32.0).reshape(2, 16, 32)
    np.testing.assert_array_equal(to_heads(x), einops.rearrange(x, "b t (h d) -> b h t d", h=4))
    assert to_heads.explain(x).is_view
    assert repr(to_heads) == "rearrange.compile('b t (h d) -> b h t d', h=4)"
    with pytest.raises(ra.NoViewError):
        ra.compile("a b -> (b a)")(np.zeros((2, 3)), copy=False)


def test_cache_info_counts_misses_and_clear_empties() -> None:
    ra.cache_clear()
    x = np.zeros((2, 3))
    ra.rearrange(x, "a b -> b a")
    ra.rearrange(x, "a b -> b a")
    info = ra.cache_info()
    assert info.plans.misses == 1 and info.plans.currsize == 1
    assert info.patterns.misses == 1 and info.recipes.misses == 1
    ra.rearrange(np.zeros((4, 5)), "a b -> b a")  # new shape: new plan, same pattern
    info = ra.cache_info()
    assert info.plans.misses == 2 and info.patterns.misses == 1
    ra.cache_clear()
    assert ra.cache_info().plans.currsize == 0


def _same_byte_layout(dtype: str, shape: tuple[int, int], byte_strides: tuple[int, int]):
    """A ``dtype`` array of ``shape`` with exactly these byte strides, over distinct
    values (an ``arange`` of the dtype's own kind)."""
    itemsize = np.dtype(dtype).itemsize
    rows, step = byte_strides[0] // itemsize, byte_strides[1] // itemsize
    base = np.arange(shape[0] * rows) % (2 if dtype == "bool" else 251)
    base = base.astype(dtype).reshape(shape[0], rows)
    if np.dtype(dtype).kind == "c":
        base = base + 1j * base[::-1]
    x = base[:, : shape[1] * step : step]
    assert x.shape == shape and x.strides == byte_strides
    return x


@pytest.mark.parametrize("shape", [(4, 6), (160, 130)], ids=["numpy-copy", "kernel-copy"])
@pytest.mark.parametrize("pattern", ["a b -> (b a)", "a (b c) -> c (a b)", "a b -> b a"])
def test_plan_cache_misses_once_per_dtype(shape, pattern) -> None:
    """One pattern over inputs of one shape and one set of byte strides but different
    dtypes: a plan made for one item size is another dtype's wrong plan (complex64 and
    its ``.real`` share byte strides), so each new dtype must miss the plan cache once
    and every result must be numpy's. A second round hits every entry."""
    c = _same_byte_layout("complex64", shape, (shape[1] * 8, 8))
    inputs = {
        "complex64": c,
        "complex64.real": c.real,                      # float32 with complex strides
        "float32": _same_byte_layout("float32", shape, c.strides),
        "uint8": _same_byte_layout("uint8", shape, c.strides),
        "bool": _same_byte_layout("bool", shape, c.strides),
        "int64": _same_byte_layout("int64", shape, c.strides),   # complex64's item size
    }
    assert len({(x.shape, x.strides) for x in inputs.values()}) == 1
    lengths = {"c": 2} if "c" in pattern else {}
    ra.cache_clear()
    seen_dtypes: set[np.dtype] = set()
    for round_ in range(2):
        for name, x in inputs.items():
            before = ra.cache_info().plans.misses
            got = ra.rearrange(x, pattern, **lengths)
            new_dtype = x.dtype not in seen_dtypes
            seen_dtypes.add(x.dtype)
            assert ra.cache_info().plans.misses - before == (1 if new_dtype else 0), (round_, name)
            expected = einops.rearrange(np.array(x), pattern, **lengths)
            assert got.dtype == x.dtype and got.shape == expected.shape
            np.testing.assert_array_equal(got, expected, err_msg=f"round {round_}: {name}")
    ra.cache_clear()


def test_plan_cache_is_bounded(monkeypatch) -> None:
    from rearrange.caching import PLANS

    monkeypatch.setattr(PLANS, "maxsize", 4)
    ra.cache_clear()
    for n in range(1, 10):
        ra.rearrange(np.zeros((n, 2)), "a b -> b a")
    assert ra.cache_info().plans.currsize == 4
    ra.cache_clear()


def test_threads_share_the_caches_safely() -> None:
    ra.cache_clear()
    errors = []

    def work(seed: int) -> None:
        rng = np.random.default_rng(seed)
        for _ in range(200):
            shape = tuple(int(s) for s in rng.integers(1, 5, size=3))
            x = rng.random(shape)
            try:
                np.testing.assert_array_equal(ra.rearrange(x, "a b c -> c (a b)"),
                                              einops.rearrange(x, "a b c -> c (a b)"))
            except Exception as error:  # pragma: no cover - reported below
                errors.append(error)

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors


def test_list_input_is_stacked_like_einops() -> None:
    items = [np.arange(6.0).reshape(2, 3) + k for k in range(4)]
    np.testing.assert_array_equal(ra.rearrange(items, "n a b -> a (n b)"),
                                  einops.rearrange(items, "n a b -> a (n b)"))
    tensors = [ra.from_numpy(item) for item in items]
    got = ra.rearrange(tensors, "n a b -> a (n b)")
    assert isinstance(got, ra.Tensor)
    np.testing.assert_array_equal(got.numpy(), einops.rearrange(items, "n a b -> a (n b)"))


def test_tensor_view_shares_storage_and_copy_does_not() -> None:
    t = ra.arange(24).view(2, 3, 4)
    view = ra.rearrange(t, "a b c -> a (b c)")
    assert view.storage().data_ptr() == t.storage().data_ptr()
    view[0, 0] = 100
    assert t[0, 0, 0].item() == 100
    copied = ra.rearrange(t, "a b c -> (c a) b")
    assert copied.storage().data_ptr() != t.storage().data_ptr() and copied.is_contiguous()


def test_rearrange_of_numpy_subclass_and_scalar() -> None:
    masked = np.ma.masked_array(np.arange(6).reshape(2, 3))
    assert ra.rearrange(masked, "a b -> b a").shape == (3, 2)
    assert ra.rearrange(np.float32(3), " -> 1").shape == (1,)


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rearrange", *args], capture_output=True, text=True)


def test_cli_explain_prints_the_same_table_as_str_plan() -> None:
    result = _cli("explain", "b h t d -> b t (h d)", "--shape", "2,8,128,64")
    assert result.returncode == 0, result.stderr
    expected = str(ra.explain((2, 8, 128, 64), "b h t d -> b t (h d)", dtype="float32"))
    assert result.stdout == expected + "\n"


def test_cli_json_emit_strides_and_lengths() -> None:
    result = _cli("explain", "b (h d) t -> b h t d", "h=8", "--shape", "2,512,128", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["is_view"] and data["output"]["shape"] == [2, 8, 128, 64]
    result = _cli("explain", "h w -> (h w)", "--shape", "4,6", "--strides", "1,4", "--emit", "torch")
    assert result.stdout.strip() == "x.reshape(24,)"


def test_cli_reports_pattern_errors_without_traceback() -> None:
    result = _cli("explain", "b h -> b (h w)", "--shape", "2,3")
    assert result.returncode == 2
    assert "axis 'w' appears only on the right side" in result.stderr
    assert "Traceback" not in result.stderr


def test_console_script_is_installed() -> None:
    script = pathlib.Path(sys.executable).with_name("rearrange")
    if not script.exists():
        pytest.skip("not running from an installed environment")
    result = subprocess.run([str(script), "explain", "a b -> b a", "--shape", "2,3"],
                            capture_output=True, text=True)
    assert result.returncode == 0 and "permute" in result.stdout


def test_import_is_light() -> None:
    code = ("import sys, rearrange, numpy as np; rearrange.rearrange(np.zeros((2, 3)), 'a b -> b a');"
            "print(sorted(m for m in ('numba', 'torch', 'dask', 'einops') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip() == "[]", result.stderr


def _same_bytes_other_dtypes() -> list[tuple[np.ndarray, np.ndarray]]:
    """Pairs of arrays with equal shapes and byte strides but different dtypes, large
    enough (1 MiB) that their copies run the kernel, not numpy."""
    z = (np.arange(512 * 512) * (1 + 1j)).astype(np.complex64).reshape(512, 512)
    wide = np.arange(512 * 512, dtype=np.float64).reshape(512, 512)
    narrow = np.arange(512 * 1024, dtype=np.float32).reshape(512, 1024)[:, ::2]
    floats = np.arange(24, dtype=np.float32).reshape(6, 4)
    bytes_ = np.arange(96, dtype=np.uint8)[::4].reshape(6, 4)
    return [(z, z.real), (z, z.imag), (wide, narrow), (floats, bytes_)]


@pytest.mark.parametrize("first_narrow", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_arrays_sharing_byte_layout_but_not_dtype_get_their_own_plans(first_narrow) -> None:
    """A plan keyed without the dtype carries a kernel made for another item size: its
    copy reads the wrong elements or past the buffer. Either order, every cache warm."""
    patterns = ("a b -> b a", "a b -> (b a)", "a ... -> ... a")
    for pair in _same_bytes_other_dtypes():
        assert pair[0].shape == pair[1].shape and pair[0].strides == pair[1].strides
        for x in (pair[::-1] if first_narrow else pair) * 2:
            for pattern in patterns:
                for copy in (None, True):
                    got = ra.rearrange(x, pattern, copy=copy)
                    np.testing.assert_array_equal(got, einops.rearrange(x, pattern))
                    assert got.dtype == x.dtype
                out = np.empty(einops.rearrange(x, pattern).shape, x.dtype)
                ra.rearrange(x, pattern, out=out)
                np.testing.assert_array_equal(out, einops.rearrange(x, pattern))
                got = ra.repeat(x, "a b -> b a r", r=2, copy=True)
                np.testing.assert_array_equal(got, einops.repeat(x, "a b -> b a r", r=2))


def test_a_kernel_plan_for_another_source_is_replanned_not_run() -> None:
    """copy_into runs native code only on a plan made for its source: a plan for the
    same shape and byte strides but another item size is set aside, not run."""
    z = (np.arange(512 * 512) * (1 + 1j)).astype(np.complex64).reshape(512, 512)
    stale = kernel.plan_copy(z.T.shape, z.T.strides, z.itemsize)
    for source in (z.real.T, z.imag.T, z.T):
        out = np.empty(source.shape, source.dtype)
        kernel.copy_into(out, source, stale)
        np.testing.assert_array_equal(out, source)
    wrong_shape = kernel.plan_copy((256, 1024), (8, 2048), 8)
    out = np.empty(z.T.shape, z.dtype)
    kernel.copy_into(out, z.T, wrong_shape)
    np.testing.assert_array_equal(out, z.T)


OUT_CASES = [
    ("a b c -> c (a b)", (2, 3, 4), {}),        # a copy plan
    ("a b c -> a (b c)", (2, 3, 4), {}),        # a view plan, copied into out
    ("b (h d) t -> b h t d", (2, 12, 5), {"h": 3}),
    (" -> 1", (), {}),
    ("a b -> (b a)", (0, 3), {}),
]


@pytest.mark.parametrize(("pattern", "shape", "lengths"), OUT_CASES, ids=[c[0] for c in OUT_CASES])
def test_out_receives_the_result(pattern, shape, lengths) -> None:
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    x = x[..., ::-1] if x.ndim else x  # a negative stride where there is a dim
    expected = einops.rearrange(x, pattern, **lengths)
    out = np.full(expected.shape, -1, dtype=np.float32)
    assert ra.rearrange(x, pattern, out=out, **lengths) is out
    np.testing.assert_array_equal(out, expected)
    t = ra.from_numpy(x)
    out_t = ra.zeros(*expected.shape, dtype=ra.float32)
    assert ra.rearrange(t, pattern, out=out_t, **lengths) is out_t
    np.testing.assert_array_equal(out_t.numpy(), expected)


def test_out_plans_are_kept_per_layout_and_dtype() -> None:
    """out= remembers its plan per (pattern, shape, strides, dtype): one pattern over
    inputs of one shape but different strides, dtypes and byte orders, each seen twice,
    small (numpy's copy) and large (the kernel's), must each come out as numpy says."""
    base = np.arange(2 * 160 * 130, dtype=np.float64).reshape(2, 160, 130)
    inputs = []
    for x in (base, base[:, ::-1], base[..., ::-1], base[:, :3, :4]):
        inputs += [x, x.astype(np.float32), x.astype(">i4"), x.astype(np.uint8), x.astype(object)]
    for _ in range(2):
        for x in inputs:
            out = np.empty((x.shape[2], x.shape[0] * x.shape[1]), x.dtype)
            assert ra.rearrange(x, "a b c -> c (a b)", out=out) is out
            np.testing.assert_array_equal(out, x.transpose(2, 0, 1).reshape(out.shape))
    threads = ra.get_num_threads()
    ra.set_num_threads(1 if threads > 1 else 2)
    try:            # after a thread-count change the copy is planned again
        x = inputs[0]
        out = np.empty((x.shape[2], x.shape[0] * x.shape[1]), x.dtype)
        ra.rearrange(x, "a b c -> c (a b)", out=out)
        np.testing.assert_array_equal(out, x.transpose(2, 0, 1).reshape(out.shape))
    finally:
        ra.set_num_threads(threads)


@pytest.mark.parametrize(("out", "message"), [
    (np.empty((4, 5)), "out has shape (4, 5) and dtype float64; the result has shape (4, 6)"),
    (np.empty((4, 6), np.float32), "dtype float32"),
    (np.empty((6, 4)).T, "out must be C-contiguous"),
    ("not an array", "out must be a numpy array"),
], ids=["shape", "dtype", "not-contiguous", "type"])
def test_bad_out_is_refused(out, message) -> None:
    x = np.arange(24.0).reshape(2, 3, 4)
    with pytest.raises(ra.RearrangeError) as caught:
        ra.rearrange(x, "a b c -> c (a b)", out=out)
    assert message in str(caught.value)


@pytest.mark.parametrize("length", [3, np.int64(3), np.array(3)], ids=["int", "np.int64", "0-d array"])
def test_out_takes_the_lengths_rearrange_takes(length) -> None:
    """Lengths are canonicalised before they key the out= cache: a 0-d array (unhashable)
    works, twice, for numpy and Tensor inputs alike."""
    x = np.arange(24.0).reshape(2, 12)
    expected = einops.rearrange(x, "a (h d) -> h a d", h=3)
    for _ in range(2):
        out = np.empty(expected.shape)
        ra.rearrange(x, "a (h d) -> h a d", h=length, out=out)
        np.testing.assert_array_equal(out, expected)
        out_t = ra.zeros(*expected.shape, dtype=ra.float64)
        ra.rearrange(ra.from_numpy(x), "a (h d) -> h a d", h=length, out=out_t)
        np.testing.assert_array_equal(out_t.numpy(), expected)


@pytest.mark.parametrize("kind", ["numpy", "Tensor", "torch"])
@pytest.mark.parametrize("op", ["rearrange", "rearrange out=", "reduce", "repeat"])
def test_a_length_equal_to_a_cached_one_is_still_refused(kind, op) -> None:
    """3.0, np.float64(3.0) and True equal (and hash as) 3 or 1: after a call with the
    valid length has filled the caches, each is still refused, on every input kind, and
    an unhashable pattern is an ArgumentTypeError, not the cache's TypeError."""
    if op == "rearrange out=" and kind == "torch":
        pytest.skip("out= takes numpy and Tensor inputs")
    x = np.arange(12.0).reshape(2, 6)
    if kind == "Tensor":
        x = ra.from_numpy(x)
    elif kind == "torch":
        x = pytest.importorskip("torch").from_numpy(x)

    def call(pattern, length, valid=2):
        if op == "rearrange":
            return ra.rearrange(x, pattern, c=length)
        if op == "rearrange out=":
            shape = (2, 6 // valid, valid)
            out = np.empty(shape) if kind == "numpy" else ra.zeros(*shape, dtype=ra.float64)
            return ra.rearrange(x, pattern, c=length, out=out)
        if op == "reduce":
            return ra.reduce(x, pattern, "sum", c=length)
        return ra.repeat(x, pattern, c=length)

    pattern = {"reduce": "a (b c) -> a b", "repeat": "a b -> a b c"}.get(op, "a (b c) -> a b c")
    for valid, invalid in ((2, 2.0), (2, np.float64(2.0)), (1, True)):
        call(pattern, valid, valid)                            # fills the caches
        for _ in range(2):
            with pytest.raises(ra.RearrangeError, match=re.escape(f"c={invalid!r}")):
                call(pattern, invalid, valid)
    with pytest.raises(ra.ArgumentTypeError, match="pattern must be a str"):
        call([pattern], 2)


def test_bad_tensor_out_is_refused_like_a_numpy_out() -> None:
    t = ra.from_numpy(np.arange(24.0).reshape(2, 3, 4))
    cases = [(ra.zeros(4, 5, dtype=ra.float64), "out has shape (4, 5) and dtype float64"),
             (ra.zeros(4, 6, dtype=ra.float32), "dtype float32"),
             (ra.zeros(6, 4, dtype=ra.float64).permute(1, 0), "out must be C-contiguous")]
    for out, message in cases:
        with pytest.raises(ra.RearrangeError, match=re.escape(message)):
            ra.rearrange(t, "a b c -> c (a b)", out=out)


def test_out_may_not_overlap_the_input_or_be_read_only() -> None:
    x = np.arange(24.0)
    with pytest.raises(ra.RearrangeError, match="overlaps the input"):
        ra.rearrange(x.reshape(4, 6), "a b -> a b", out=x.reshape(4, 6))
    frozen = np.empty((6, 4))
    frozen.flags.writeable = False
    with pytest.raises(ra.RearrangeError, match="read-only"):
        ra.rearrange(x.reshape(4, 6), "a b -> b a", out=frozen)
    with pytest.raises(ra.RearrangeError, match="copy=False"):
        ra.rearrange(x.reshape(4, 6), "a b -> b a", out=np.empty((6, 4)), copy=False)


@pytest.mark.parametrize("bad", [3.0, True, "3", None], ids=repr)
def test_bad_lengths_are_refused_even_after_a_cached_good_call(bad) -> None:
    """3.0 == 3 and True == 1 in Python: the caches must not let them through."""
    x = np.zeros((2, 6))
    for _ in range(2):  # the second call finds the plan in both caches
        assert ra.rearrange(x, "a (b c) -> a b c", b=3).shape == (2, 3, 2)
        assert ra.rearrange(x, "a (b c) -> a b c", b=np.int64(3)).shape == (2, 3, 2)
        with pytest.raises(ra.PatternError, match=f"axis length b={bad!r} must be a positive integer"):
            ra.rearrange(x, "a (b c) -> a b c", b=bad)


@pytest.mark.parametrize("op, args, kwargs, module, function", [
    ("einsum", ([(2, 3), (3, 4)], "a b, b c -> a c"), {}, "contraction", "explain_einsum"),
    ("pack", ([(2, 3), (2, 4)], "b *"), {}, "packing", "explain_pack"),
    ("unpack", ((2, 7), "b *"), {"packed_shapes": [(3,), (4,)]}, "packing", "explain_unpack"),
    ("check_shape", ((2, 6), "b (h w)"), {"h": 2}, "shapes", "explain_shape"),
    ("parse_shape", ((2, 6), "b _"), {}, "shapes", "explain_shape"),
])
def test_explain_dispatches_every_op(op, args, kwargs, module, function) -> None:
    import importlib

    explain_op = getattr(importlib.import_module(f"rearrange.{module}"), function)
    plan = ra.explain(*args, op=op, **kwargs)
    if op == "unpack":
        expected = explain_op(args[0], kwargs["packed_shapes"], args[1])
    else:
        expected = explain_op(*args, **kwargs)
    assert str(plan) == str(expected)
    assert plan.to_dict() == expected.to_dict()


@pytest.mark.parametrize("kwargs, message", [
    ({"op": "pack", "reduction": "sum"}, "reduction= applies to op='reduce', not op='pack'"),
    ({"op": "einsum", "copy": True}, "copy= applies to op='rearrange' or 'repeat'"),
    ({"op": "unpack"}, "explain(op='unpack') needs packed_shapes="),
    ({"op": "rearrange", "packed_shapes": [(1,)]}, "packed_shapes= applies to op='unpack'"),
    ({"op": "pack", "h": 2}, "explain(op='pack') takes no axis lengths; got h"),
])
def test_explain_rejects_options_of_other_ops(kwargs, message) -> None:
    with pytest.raises(ra.ArgumentTypeError, match=re.escape(message)):
        ra.explain([(2, 3)], "b *", **kwargs)


def test_to_source_of_a_zero_d_result_runs() -> None:
    x = np.ones(1)
    source = ra.explain(x, "1 ->").to_source()
    assert eval(source, {"x": x}).shape == () == ra.rearrange(x, "1 ->").shape


def test_numpy_arrays_never_take_the_array_api_path() -> None:
    """numpy arrays have __array_namespace__ too; explain of a list of them must not
    make later numpy calls go through the generic array-API backend."""
    ra.explain([np.zeros((2, 3)), np.zeros((2, 3))], "n a b -> a (b n)")
    got = ra.rearrange(np.zeros((4, 5), dtype=bool), "h w -> w h", copy=True)
    assert got.flags.c_contiguous and got.flags.writeable
