"""Differential cache-state fuzzing: many random calls in one process, caches never cleared.

Every cache in the package is keyed on what its entry depends on; a key that misses
something (the dtype, a canonical length) lets one call run another call's plan, which
is wrong data or, where the plan drives native code, a crash. Such bugs only show when
calls *follow each other* with arrays that agree on some of the key and differ on the
rest. So this driver builds families of arrays that share shapes and byte strides but not
dtypes (a complex64 array, its ``.real`` and ``.imag``, a float64 array, ``[:, ::2]`` of a
float32 one, ``[:, ::8]`` of a uint8 one, an object array...), derives views from every
member the same way (transposes, reversals, slices, broadcasts), and runs random
operations on random members, sizes on both sides of every kernel threshold, against
oracles: einops and numpy for the values, numpy's no-copy reshape for whether a result
may be a view, and a cold planning of the same call for which inputs are refused.

Run as a script (``python tests/cache_fuzz.py --seed 1 --calls 3000``) so that a crash
kills only this process: tests/test_cache_fuzz.py runs it in a subprocess. A failure
prints the seed, the call's number and the calls before it, so it can be replayed.
"""

from __future__ import annotations

import argparse
import random
import sys
import traceback
import warnings
from dataclasses import dataclass
from typing import Any, Callable

import einops
import numpy as np

import rearrange as ra
from rearrange import kernel

# Rows x columns of each family's arrays: 8-byte members move 192 B ... 4.7 MiB, across
# the kernel's thresholds (numpy below 32 KiB, transposes below 64 KiB, threads from
# 1 MiB per thread).
SIZES = [(4, 6), (1, 5), (0, 4), (48, 64), (96, 96), (128, 120), (384, 384), (600, 1024)]


@dataclass(frozen=True)
class Member:
    name: str
    array: np.ndarray


def _family_8(n: int, m: int) -> list[Member]:
    """Arrays of shape (n, m) whose byte strides are all (8m, 8)."""
    count = n * m
    c64 = ((np.arange(count) % 251) * (1 + 2j) - 3j).astype(np.complex64).reshape(n, m)
    objects = np.empty((n, m), dtype=object)
    objects.reshape(-1)[:] = list(range(count))
    return [
        Member("complex64", c64),
        Member("complex64.real", c64.real),
        Member("complex64.imag", c64.imag),
        Member("float64", (np.arange(count, dtype=np.float64) * 0.5 - 7).reshape(n, m)),
        Member("int64", (np.arange(count, dtype=np.int64) * 3 - 11).reshape(n, m)),
        Member("float32[:, ::2]", np.arange(2 * count, dtype=np.float32).reshape(n, 2 * m)[:, ::2]),
        Member("int16[:, ::4]", (np.arange(4 * count) % 30011 - 15000).astype(np.int16)
               .reshape(n, 4 * m)[:, ::4]),
        Member("uint8[:, ::8]", (np.arange(8 * count) % 251).astype(np.uint8).reshape(n, 8 * m)[:, ::8]),
        Member("bool[:, ::8]", (np.arange(8 * count) % 3 == 0).reshape(n, 8 * m)[:, ::8]),
        Member("object", objects),
    ]


def _family_16(n: int, m: int) -> list[Member]:
    """Arrays of shape (n, m) whose byte strides are all (16m, 16)."""
    count = n * m
    c128 = (np.arange(count) * (0.5 - 1j)).astype(np.complex128).reshape(n, m)
    return [
        Member("complex128", c128),
        Member("complex128.real", c128.real),
        Member("float64[:, ::2]", np.arange(2 * count, dtype=np.float64).reshape(n, 2 * m)[:, ::2]),
        Member("int32[:, ::4]", np.arange(4 * count, dtype=np.int32).reshape(n, 4 * m)[:, ::4]),
        Member("uint16[:, ::8]", (np.arange(8 * count) % 65521).astype(np.uint16)
               .reshape(n, 8 * m)[:, ::8]),
    ]


# Views derived from every member alike, so that the family still shares shape and byte
# strides afterwards.
DERIVE: list[tuple[str, Callable[[np.ndarray], np.ndarray]]] = [
    ("x", lambda x: x),
    ("x.T", lambda x: x.T),
    ("x[::-1]", lambda x: x[::-1]),
    ("x[:, ::-1]", lambda x: x[:, ::-1]),
    ("x[1:, 1:]", lambda x: x[1:, 1:]),
    ("x[::2]", lambda x: x[::2]),
    ("broadcast row", lambda x: np.broadcast_to(x[:1], x.shape)),
    ("broadcast column", lambda x: np.broadcast_to(x[:, :1], x.shape)),
]


def _divisors(n: int) -> list[int]:
    return [d for d in (1, 2, 3, 4, 6, 8, 16) if n % d == 0] or [1]


def _lengths(rng: random.Random, value: int, force: str | None = None) -> tuple[Any, bool]:
    """An axis length equal to ``value``, in one of the forms callers use, and whether it
    is a valid length: ints of several types are, floats and bools never are (3.0 == 3
    and True == 1 in Python, so they hash like an int). ``force`` ("valid", "invalid")
    picks the kind; the random numbers drawn are the same either way, so a burst
    replayed with it makes every other choice as before."""
    invalid = rng.random() < 0.12
    invalid_form = rng.choice([float(value), np.float64(value)] + ([True] if value == 1 else []))
    valid_form = rng.choice([value, np.int64(value), np.int32(value), np.intp(value)])
    if force is not None:
        invalid = force == "invalid"
    return (invalid_form, False) if invalid else (valid_form, True)


# Rearrange patterns with their numpy meaning: (pattern, length name or None,
# split(shape, c), permutation, merge(split shape) or None).
REARRANGES = [
    ("a b -> b a", None, lambda s, c: s, (1, 0), None),
    ("a b -> (b a)", None, lambda s, c: s, (1, 0), lambda t: (t[0] * t[1],)),
    ("a b -> (a b)", None, lambda s, c: s, (0, 1), lambda t: (t[0] * t[1],)),
    ("a b -> a b", None, lambda s, c: s, (0, 1), None),
    ("a (b c) -> c a b", "c", lambda s, c: (s[0], s[1] // c, c), (2, 0, 1), None),
    ("(a c) b -> b (c a)", "c", lambda s, c: (s[0] // c, c, s[1]), (2, 1, 0),
     lambda t: (t[0], t[1] * t[2])),
    ("a (b c) -> (a c) b", "c", lambda s, c: (s[0], s[1] // c, c), (0, 2, 1),
     lambda t: (t[0] * t[1], t[2])),
    ("a b -> b a 1", None, lambda s, c: s, (1, 0), lambda t: (t[0], t[1], 1)),
]


# Reduce patterns with their numpy meaning: (pattern, length name or None,
# f(numpy reduction, x, c)).
REDUCES = [
    ("a b -> b", None, lambda f, x, c: f(x, axis=0)),
    ("a b -> a", None, lambda f, x, c: f(x, axis=1)),
    ("a b ->", None, lambda f, x, c: f(x)),
    ("a (b c) -> a b", "c", lambda f, x, c: f(x.reshape(x.shape[0], x.shape[1] // c, c), axis=2)),
    ("(a c) b -> b a", "c", lambda f, x, c: f(x.reshape(x.shape[0] // c, c, x.shape[1]), axis=1).T),
]


class Fuzzer:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.force_lengths: str | None = None     # see _lengths
        self.slots: list[list[Member]] = []
        for n, m in SIZES:
            for family in (_family_8(n, m), _family_16(n, m)):
                for how, derive in DERIVE:
                    self.slots.append([Member(f"{member.name} {n}x{m} {how}", derive(member.array))
                                       for member in family])
        self.log: list[str] = []
        self.torch = _optional("torch")
        self.dask = _optional("dask.array")
        self.xp = _optional("array_api_strict")

    # ------------------------------------------------------------------ the driver

    def run(self, calls: int) -> None:
        ops = [(self.rearrange, 30), (self.rearrange_out, 8), (self.reduce, 12), (self.repeat, 10),
               (self.einsum, 5), (self.pack_unpack, 6), (self.shapes, 3), (self.tensor, 10),
               (self.torch_op, 8 if self.torch else 0), (self.dask_op, 1 if self.dask else 0),
               (self.array_api_op, 2 if self.xp else 0), (self.copy_into, 4), (self.threads, 1)]
        functions = [f for f, w in ops if w]
        weights = [w for f, w in ops if w]
        main = self.rng
        made = 0
        while made < calls:
            # A burst: one operation with the same random choices (pattern, lengths,
            # copy, ...) on several members of one family, so that consecutive calls
            # agree on shape and byte strides and differ in dtype.
            op = main.choices(functions, weights)[0]
            slot = main.choice(self.slots)
            choices_seed = main.getrandbits(32)
            members = main.sample(slot, min(len(slot), main.choice([2, 3, 4])))
            # Sometimes the burst again with its lengths forced valid or invalid: an
            # invalid length equal to a valid one just cached (3.0 after 3) must still be
            # refused, and a refused one must leave nothing behind.
            forces = [None]
            if main.random() < 0.4:
                forces.append(main.choice(["valid", "invalid", "invalid"]))
            for force in forces:
                self.force_lengths = force
                for member in members:
                    self.rng = random.Random(choices_seed)
                    op(member)
                    made += 1
            self.rng, self.force_lengths = main, None

    def record(self, text: str) -> None:
        self.log.append(text)

    # ------------------------------------------------------------------ operations

    def rearrange(self, member: Member) -> None:
        x = member.array
        pattern, name, split, perm, merge = self.rng.choice(REARRANGES)
        lengths, valid = self._pick_lengths(name, x, split_dim=1 if "(b c)" in pattern else 0)
        copy = self.rng.choice([None, None, True, False])
        self.record(f"rearrange({member.name}, {pattern!r}, copy={copy}, {lengths})")
        if not valid:
            return self._expect_refusal(lambda: ra.rearrange(x, pattern, copy=copy, **lengths))
        c = int(next(iter(lengths.values()), 1))
        permuted = x.reshape(split(x.shape, c)).transpose(perm)
        try:
            expected_view = permuted if merge is None else np.reshape(
                permuted, merge(permuted.shape), copy=False)
            viewable = True
        except ValueError:
            viewable = False
        expected = einops.rearrange(x, pattern, **{k: int(v) for k, v in lengths.items()})
        if copy is False and not viewable:
            return self._expect(ra.NoViewError, lambda: ra.rearrange(x, pattern, copy=False, **lengths))
        got = ra.rearrange(x, pattern, copy=copy, **lengths)
        self._same(got, expected)
        if x.size:
            shares = np.shares_memory(got, x)
            if copy is True:
                assert not shares and got.flags.c_contiguous, "copy=True returned a view"
            elif viewable:
                assert shares, "a view exists (numpy reshapes without a copy) but got a copy"
                assert got.strides == expected_view.strides or got.size <= 1 or any(
                    n == 1 for n in got.shape), f"view strides {got.strides} != {expected_view.strides}"
            else:
                assert not shares and got.flags.c_contiguous, "no view exists but got one"

    def rearrange_out(self, member: Member) -> None:
        x = member.array
        pattern, name, *_ = self.rng.choice(REARRANGES)
        lengths, valid = self._pick_lengths(name, x, split_dim=1 if "(b c)" in pattern else 0)
        if not valid:
            lengths = {k: int(v) for k, v in lengths.items()}
        expected = einops.rearrange(x, pattern, **{k: int(v) for k, v in lengths.items()})
        wrong = self.rng.random() < 0.15
        dtype = x.dtype if not wrong else _same_size_other_dtype(x.dtype)
        self.record(f"rearrange({member.name}, {pattern!r}, out=<{dtype}>, {lengths})")
        out = np.full(expected.shape, 0, dtype=dtype) if dtype != object else np.empty(expected.shape, object)
        if wrong:
            return self._expect_refusal(lambda: ra.rearrange(x, pattern, out=out, **lengths))
        assert ra.rearrange(x, pattern, out=out, **lengths) is out
        self._same(out, expected)

    def reduce(self, member: Member) -> None:
        x = member.array
        if x.dtype == object:
            return
        choices = ["sum", "mean", "max", "min", "any", "all", "prod"]
        if x.dtype.kind == "c":
            choices = ["sum", "mean", "prod"]
        if x.dtype.kind == "b":
            choices = ["sum", "any", "all", "max", "min"]
        reduction = self.rng.choice(choices)
        pattern, name, numpy_reduce = self.rng.choice(REDUCES)
        lengths, valid = self._pick_lengths(name, x, split_dim=1 if "(b c)" in pattern else 0)
        self.record(f"reduce({member.name}, {pattern!r}, {reduction!r}, {lengths})")
        call = lambda: ra.reduce(x, pattern, reduction, **lengths)  # noqa: E731
        if not valid:
            return self._expect_refusal(call)
        c = int(next(iter(lengths.values()), 1))
        try:
            expected = numpy_reduce(getattr(np, reduction), x, c)
        except ValueError:      # min/max over a zero-size axis: no identity
            return self._expect_refusal(call)
        self._close(call(), expected)

    def repeat(self, member: Member) -> None:
        x = member.array
        pattern = self.rng.choice(["a b -> a b r", "a b -> (r a) b", "a b -> b (a r)", "a b -> r b a"])
        r = self.rng.choice([1, 2, 3])
        value, valid = _lengths(self.rng, r, self.force_lengths)
        copy = self.rng.choice([None, True, False])
        self.record(f"repeat({member.name}, {pattern!r}, copy={copy}, r={value!r})")
        call = lambda: ra.repeat(x, pattern, copy=copy, r=value)  # noqa: E731
        if not valid:
            return self._expect_refusal(call)
        expected = einops.repeat(x, pattern, r=r)
        try:
            got = call()
        except ra.NoViewError:
            assert copy is False, "NoViewError without copy=False"
            return
        self._same(got, expected)
        if copy is True and got.size:
            assert not np.shares_memory(got, x) and got.flags.writeable
        if copy is False and got.size:
            assert np.shares_memory(got, x), "copy=False returned a copy"

    def einsum(self, member: Member) -> None:
        x = member.array
        if x.dtype == object or x.dtype.kind == "b":
            return
        pattern = self.rng.choice(["a b, a b -> a", "a b -> b a", "a b, a b -> b", "a b -> a"])
        operands = (x, x) if "," in pattern else (x,)
        self.record(f"einsum({member.name}, {pattern!r})")
        expected = einops.einsum(*operands, pattern)
        self._close(ra.einsum(*operands, pattern), expected)

    def pack_unpack(self, member: Member) -> None:
        x = member.array
        other = self.rng.choice([x, x[:, :1], x[:, ::-1]])
        pattern = self.rng.choice(["a *", "* b"]) if other is not x[:, :1] else "a *"
        if pattern == "* b" and other.shape[1] != x.shape[1]:
            pattern = "a *"
        self.record(f"pack([{member.name}, ...], {pattern!r})")
        packed, shapes = ra.pack([x, other], pattern)
        # einops' own pack reshapes with -1, which numpy refuses for size 0
        if pattern == "a *":
            flat = [y.reshape(y.shape[0], y.shape[1]) for y in (x, other)]
            expected, expected_shapes = np.concatenate(flat, axis=1), [x.shape[1:], other.shape[1:]]
        else:
            expected, expected_shapes = np.concatenate([x, other], axis=0), [x.shape[:1], other.shape[:1]]
        self._same(packed, expected)
        assert [tuple(s) for s in shapes] == [tuple(s) for s in expected_shapes]
        for got, want in zip(ra.unpack(packed, shapes, pattern), (x, other)):
            self._same(got, want.astype(packed.dtype))

    def shapes(self, member: Member) -> None:
        x = member.array
        c = self.rng.choice(_divisors(x.shape[1]))
        value, valid = _lengths(self.rng, c, self.force_lengths)
        self.record(f"check_shape({member.name}, 'a (b c)', c={value!r})")
        assert ra.parse_shape(x, "a b") == {"a": x.shape[0], "b": x.shape[1]}
        call = lambda: ra.check_shape(x, "a (b c)", c=value)  # noqa: E731
        if not valid:
            return self._expect_refusal(call)
        assert call() == {"a": x.shape[0], "b": x.shape[1] // c, "c": c}

    def tensor(self, member: Member) -> None:
        x = member.array
        if x.dtype == object or x.dtype == np.uint16:
            return
        t = ra.from_numpy(x)
        which = self.rng.choice(["rearrange", "reduce", "repeat", "out"])
        pattern, name, *_ = self.rng.choice(REARRANGES)
        lengths, valid = self._pick_lengths(name, x, split_dim=1 if "(b c)" in pattern else 0)
        self.record(f"Tensor {which}({member.name}, {pattern!r}, {lengths})")
        if which == "reduce":
            if x.dtype.kind not in "iuf":
                return
            pattern = "a b -> b"
            self._close(ra.reduce(t, pattern, "sum").numpy(), einops.reduce(x, pattern, "sum"))
            return
        if which == "repeat":
            value, valid = _lengths(self.rng, 2, self.force_lengths)
            call = lambda: ra.repeat(t, "a b -> b a r", r=value)  # noqa: E731
            if not valid:
                return self._expect_refusal(call)
            self._same(call().numpy(), einops.repeat(x, "a b -> b a r", r=2))
            return
        call = lambda: ra.rearrange(t, pattern, **lengths)  # noqa: E731
        if not valid:
            return self._expect_refusal(call)
        expected = einops.rearrange(x, pattern, **{k: int(v) for k, v in lengths.items()})
        if which == "out":
            out = ra.from_numpy(np.zeros(expected.shape, x.dtype))
            ra.rearrange(t, pattern, out=out, **lengths)
            self._same(out.numpy(), expected)
            return
        self._same(call().numpy(), expected)

    def torch_op(self, member: Member) -> None:
        torch = self.torch
        x = member.array
        if x.dtype == object or x.dtype == np.uint16 or any(s < 0 for s in x.strides) \
                or any(s % x.itemsize for s in x.strides):
            return
        t = torch.from_numpy(x)
        which = self.rng.choice(["rearrange", "rearrange", "reduce", "repeat"])
        pattern, name, *_ = self.rng.choice(REARRANGES)
        lengths, valid = self._pick_lengths(name, x, split_dim=1 if "(b c)" in pattern else 0)
        copy = self.rng.choice([None, True])
        self.record(f"torch {which}({member.name}, {pattern!r}, copy={copy}, {lengths})")
        if which == "reduce":
            if x.dtype.kind not in "iuf":
                return
            self._close(ra.reduce(t, "a b -> b", "sum").numpy(), einops.reduce(x, "a b -> b", "sum"))
            return
        if which == "repeat":
            got = ra.repeat(t, "a b -> b a r", r=2, copy=copy)
            self._same(got.numpy(), einops.repeat(x, "a b -> b a r", r=2))
            return
        call = lambda: ra.rearrange(t, pattern, copy=copy, **lengths)  # noqa: E731
        if not valid:
            return self._expect_refusal(call)
        expected = einops.rearrange(x, pattern, **{k: int(v) for k, v in lengths.items()})
        self._same(call().numpy(), expected)

    def dask_op(self, member: Member) -> None:
        x = member.array
        if x.dtype == object or x.size > 1 << 16:
            return
        d = self.dask.from_array(x, chunks=max(1, x.shape[0] // 2) if x.shape[0] else 1)
        self._rearrange_wrapped("dask", member, d, lambda result: result.compute())

    def array_api_op(self, member: Member) -> None:
        x = member.array
        if x.dtype.kind not in "iufb" or x.dtype == np.uint16 or x.size > 1 << 16:
            return
        a = self.xp.asarray(np.ascontiguousarray(x))
        self._rearrange_wrapped("array-API", member, a, np.asarray)

    def _rearrange_wrapped(self, kind: str, member: Member, wrapped: Any,
                           to_numpy: Callable[[Any], np.ndarray]) -> None:
        """A random rearrange of ``wrapped`` (``member``'s values as another array type)
        against einops on the numpy member."""
        x = member.array
        pattern, name, *_ = self.rng.choice(REARRANGES)
        lengths, valid = self._pick_lengths(name, x, split_dim=1 if "(b c)" in pattern else 0)
        self.record(f"{kind} rearrange({member.name}, {pattern!r}, {lengths})")
        call = lambda: ra.rearrange(wrapped, pattern, **lengths)  # noqa: E731
        if not valid:
            return self._expect_refusal(call)
        expected = einops.rearrange(x, pattern, **{k: int(v) for k, v in lengths.items()})
        self._same(to_numpy(call()), expected)

    def copy_into(self, member: Member) -> None:
        """The kernel's own front, with no plan handed in: its plan cache decides."""
        x = member.array
        source = x.T if self.rng.random() < 0.5 else x[:, ::-1]
        self.record(f"kernel.copy_into(<{x.dtype}>, {member.name} transposed or reversed)")
        out = np.empty(source.shape, source.dtype)
        kernel.copy_into(out, source)
        self._same(out, source)

    def threads(self, member: Member) -> None:
        n = self.rng.choice([1, 2])
        self.record(f"set_num_threads({n})")
        ra.set_num_threads(n)

    # ------------------------------------------------------------------ helpers

    def _pick_lengths(self, name: str | None, x: np.ndarray, split_dim: int) -> tuple[dict, bool]:
        if name is None:
            return {}, True
        c = self.rng.choice(_divisors(x.shape[split_dim]))
        value, valid = _lengths(self.rng, c, self.force_lengths)
        return {name: value}, valid

    def _expect_refusal(self, call: Callable[[], Any]) -> None:
        self._expect(ra.RearrangeError, call)

    @staticmethod
    def _expect(error: type, call: Callable[[], Any]) -> None:
        try:
            call()
        except error:
            return
        raise AssertionError(f"expected {error.__name__}, the call succeeded")

    @staticmethod
    def _same(got: Any, expected: Any) -> None:
        got, expected = np.asarray(got), np.asarray(expected)
        assert got.shape == expected.shape, f"shape {got.shape} != {expected.shape}"
        assert got.dtype == expected.dtype, f"dtype {got.dtype} != {expected.dtype}"
        assert np.array_equal(got, expected), "values differ from the oracle"

    @staticmethod
    def _close(got: Any, expected: Any) -> None:
        got, expected = np.asarray(got), np.asarray(expected)
        assert got.shape == expected.shape, f"shape {got.shape} != {expected.shape}"
        if expected.dtype.kind in "fc":
            rtol = 1e-4 if expected.dtype.itemsize <= 8 and expected.dtype.kind == "c" or \
                expected.dtype == np.float32 else 1e-9
            # Past overflow the order of a reduction decides what stands beside an inf (a
            # complex product's other part: 0 or 128 beside +inf): where the oracle is not
            # finite, ours must not be either; the finite values must be close.
            finite = np.isfinite(expected)
            assert np.array_equal(np.isfinite(got), finite), "finite where the oracle is not"
            np.testing.assert_allclose(got[finite], expected[finite], rtol=rtol, atol=1e-6)
        else:
            assert np.array_equal(got, expected), "values differ from the oracle"


def _same_size_other_dtype(dtype: np.dtype) -> np.dtype:
    by_size = {1: ["uint8", "int8", "bool"], 2: ["int16", "uint16", "float16"],
               4: ["float32", "int32"], 8: ["float64", "int64", "complex64"],
               16: ["complex128"]}
    options = [np.dtype(d) for d in by_size.get(dtype.itemsize, ["float64"]) if np.dtype(d) != dtype]
    return options[0] if options else np.dtype("float32")


def _optional(name: str) -> Any:
    import importlib

    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args(argv)
    np.seterr(all="ignore")     # the oracles overflow and divide by zero alike
    warnings.simplefilter("ignore", RuntimeWarning)
    fuzzer = Fuzzer(args.seed)
    try:
        fuzzer.run(args.calls)
    except Exception:  # noqa: BLE001 - reported with the calls that led to it
        print(f"cache fuzz failed: seed {args.seed}, call {len(fuzzer.log)}", file=sys.stderr)
        for line in fuzzer.log[-15:]:
            print(f"  {line}", file=sys.stderr)
        traceback.print_exc()
        return 1
    print(f"cache fuzz: seed {args.seed}, {len(fuzzer.log)} calls, 0 wrong results")
    return 0


if __name__ == "__main__":
    sys.exit(main())
