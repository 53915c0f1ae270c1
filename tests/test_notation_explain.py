"""#38: ``explain`` (the function and the CLI's ``--op``) shows every plan of einx's
notation: the diagonal, the flip and every input of an elementwise operation as views,
and a concatenation of two transposed inputs as one copy per input into the output,
which the kernel does."""

from __future__ import annotations

import numpy as np
import pytest

import rearrange as ra
from rearrange import kernel
from rearrange.__main__ import OPS, main

from notation_cli import EVERY_OP, IDS, explain_argv


def test_the_diagonal_is_a_view():
    text = str(ra.explain((5, 5), "a a -> a"))
    assert "the diagonal, stride = the sum" in text and "copy" not in text.split("output")[1]
    x = np.arange(25.0).reshape(5, 5)
    diagonal = ra.rearrange(x, "a a -> a")
    assert np.shares_memory(diagonal, x) and diagonal.strides == (48,)
    np.testing.assert_array_equal(diagonal, np.diagonal(x))


def test_the_flip_is_a_view():
    text = str(ra.explain((4, 6), "a [b]", op="flip"))
    assert "numpy: a view (each stride negated" in text
    x = np.arange(24.0).reshape(4, 6)
    flipped = ra.flip(x, "a [b]")
    assert np.shares_memory(flipped, x) and flipped.strides == (48, -8)


def test_every_input_of_an_elementwise_operation_is_a_view():
    text = str(ra.explain([(2, 3, 4), (4,), (3, 1)], "a b c, c, b 1 -> a b c", op="add"))
    lines = [line for line in text.splitlines() if line.strip().startswith("x")]
    assert len(lines) == 3 and all("-> view" in line for line in lines)
    assert "stride 0 on a b" in text and "no copy" in text.splitlines()[0]



@pytest.mark.parametrize("pattern", ["a b, a c -> (b + c) a", "b a, c a -> a (b + c)",
                                     "b a, c a -> (b + c) a"])
def test_a_concatenation_of_two_transposed_inputs_is_one_kernel_copy_per_input(
        pattern, two_threads, monkeypatch):
    """Each input is copied once, by the kernel, straight into its slice of the output,
    which is laid out as the inputs are (numpy's concatenate, order 'K'): a transposed
    input is not transposed in memory, its rows go to the output's rows (with gaps
    between them where the concatenation axis is the innermost in memory). Both copies
    are one job of the kernel: one fork-join of its threads."""
    x = np.random.default_rng(0).random((1024, 1280), dtype=np.float32)
    y = np.random.default_rng(1).random((1024, 640), dtype=np.float32)
    if pattern.startswith("b a"):
        x, y = np.ascontiguousarray(x.T), np.ascontiguousarray(y.T)
    transposed = pattern != "b a, c a -> (b + c) a"   # the output is not the inputs' order
    text = str(ra.explain([x, y], pattern))
    parts = [line for line in text.splitlines() if "<- piece" in line]
    assert len(parts) == 2 and all("a copy by the kernel (" in line for line in parts)
    if pattern == "a b, a c -> (b + c) a":
        assert all("(inner-contiguous, into rows with gaps)" in line for line in parts)
    elif transposed:
        assert all("(contiguous-memcpy)" in line for line in parts)
    calls, jobs = [], []
    original, execute_parts = kernel.copy_parts_into, kernel.execute_parts
    monkeypatch.setattr(kernel, "copy_parts_into",
                        lambda pairs: (calls.extend((src.shape, dst.strides)
                                                    for dst, src in pairs),
                                       original(pairs)))
    monkeypatch.setattr(kernel, "execute_parts",      # what the kernel itself runs
                        lambda parts, *rest: (jobs.append([part[5] for part in parts]),
                                              execute_parts(parts, *rest)))
    got = ra.rearrange((x, y), pattern)
    expected = {"a b, a c -> (b + c) a": lambda: np.concatenate([x.T, y.T]),
                "b a, c a -> a (b + c)": lambda: np.concatenate([x.T, y.T], 1),
                "b a, c a -> (b + c) a": lambda: np.concatenate([x, y])}[pattern]()
    np.testing.assert_array_equal(got, expected)
    assert got.strides == expected.strides      # numpy's own memory order
    assert not got.flags.c_contiguous if transposed else got.flags.c_contiguous
    if pattern == "a b, a c -> (b + c) a":      # rows of each input into gapped rows
        assert calls == [((1024, 1280), (1920 * 4, 4)), ((1024, 640), (1920 * 4, 4))]
    else:                                       # each input one block, in its order
        assert calls == [((1280, 1024), (4096, 4)), ((640, 1024), (4096, 4))]
    assert jobs == [[x.nbytes, y.nbytes]]       # one job: both inputs, by the kernel


@pytest.mark.parametrize("op, pattern, shapes, extra", EVERY_OP, ids=IDS)
def test_the_command_line_explains_every_notation_op(op, pattern, shapes, extra, capsys):
    assert main(explain_argv(op, pattern, shapes, extra)) == 0
    printed = capsys.readouterr().out
    assert printed.strip() and (op in printed or "rearrange" in printed or "reduce" in printed)


def test_every_operation_is_a_choice_of_the_command_line():
    for name in ("add", "where", "softmax", "roll", "argmin", "get_at", "subtract_at"):
        assert name in OPS and callable(getattr(ra, name))


def test_explain_refuses_what_an_op_does_not_take():
    with pytest.raises(ra.ArgumentTypeError, match="shift= applies to op='roll'"):
        ra.explain((2, 3), "a b -> b a", shift=1)
    with pytest.raises(ra.ArgumentTypeError, match="takes a list"):
        ra.explain(np.zeros((50, 8)), "[v] d, b t -> b t d", op="get_at")
    with pytest.raises(ra.RearrangeError, match="op must be one of .*'get_at'"):
        ra.explain((2, 3), "a b", op="nothing")
