"""Bad input to rearrange(): a RearrangeError that says what was found, what was
expected, points at the pattern text, and carries the call's context (pattern, input
shape, axis lengths). The input is never modified."""

from __future__ import annotations

import numpy as np
import pytest

import rearrange as ra

# pattern, input shape, axis lengths, the first line of the message, the caret's text
PATTERN_ERRORS = [
    ("b h w -> b (h w) c", (2, 3, 4), {},
     "axis 'c' appears only on the right side; rearrange needs every axis on both sides", "c"),
    ("b h w -> b h", (2, 3, 4), {},
     "axis 'w' appears only on the left side; rearrange needs every axis on both sides", "w"),
    ("b h -> b h", (2, 3, 4), {},
     "the input has 3 dims, but the left side describes 2: one group per input dim is expected",
     "b h"),
    ("b (h w) c -> b h w c", (2, 3, 4), {},
     "cannot infer the lengths of (h w) from input dim 1 of size 3: 2 axes are unknown; "
     "pass all but one of them (h=, w=...)", "(h w)"),
    ("b (h w) c -> b h w c", (2, 3, 4), {"w": 2},
     "input dim 1 of size 3 cannot be split into (h w): 3 is not divisible by 2", "(h w)"),
    ("b (h w) c -> b h w c", (2, 6, 4), {"w": 2, "h": 2},
     "input dim 1 has size 6, but (h w) with h=2, w=2 has 4 elements", "(h w)"),
    ("b h w -> b h w", (2, 3, 4), {"h": 4},
     "axis 'h' has length 3 in the input, but h=4 was given", "h"),
    ("b h w -> b h w", (2, 3, 4), {"h": 0}, "axis length h=0 must be a positive integer", "h"),
    ("b h w -> b h w", (2, 3, 4), {"h": -3}, "axis length h=-3 must be a positive integer", "h"),
    ("b h w -> b h w", (2, 3, 4), {"h": 2.5}, "axis length h=2.5 must be a positive integer", "h"),
    ("b h w -> b h h", (2, 3, 4), {},
     "axis 'h' appears twice on the right side; each axis may appear once per side", "h"),
    ("b h w", (2, 3, 4), {},
     "pattern must contain '->' between the input and the output axes; found none", "b h w"),
    ("b h -> w -> h", (2, 3), {}, "pattern must contain '->' exactly once; found a second '->'", "->"),
    ("b ((h w)) c -> b", (2, 3, 4), {},
     "nested parentheses: a group holds axes, '1' and '...', not another group", "("),
    ("b (h w c -> b", (2, 3, 4), {}, "unbalanced parentheses: '(' is not closed before '->'", "("),
    ("b h w) -> b", (2, 3, 4), {}, "unbalanced parentheses: ')' has no matching '('", ")"),
    ("b ... ... -> b", (2, 3, 4), {},
     "'...' appears twice on the left side; a side may hold one ellipsis at most", "..."),
    ("(b ...) w -> b w", (2, 3, 4), {},
     "'...' inside parentheses on the left side; it may be grouped only on the right side", "..."),
    ("b h w 2 -> b h w", (2, 3, 4, 2), {},
     "anonymous axis 2 is not allowed in rearrange (only 1 is); name the axis and pass its "
     "length as a keyword", "2"),
    ("b h $ -> b", (2, 3, 4), {},
     "unexpected character '$'; expected an axis name, a number, '(', '...' or '->'", "$"),
    ("1 h w -> h w", (2, 3, 4), {},
     "a unit axis matches input dim 0, which has size 2 (expected 1)", "1"),
    ("a b c d ... -> ... a b c d", (2, 3, 4), {},
     "the input has 3 dims, but the left side needs at least 4 besides the ellipsis",
     "a b c d ..."),
]


@pytest.mark.parametrize(("pattern", "shape", "lengths", "first_line", "pointed"), PATTERN_ERRORS,
                         ids=[case[0] + (f" {case[2]}" if case[2] else "") for case in PATTERN_ERRORS])
def test_pattern_error_message(pattern, shape, lengths, first_line, pointed) -> None:
    x = np.arange(np.prod(shape)).reshape(shape)
    before = x.copy()
    with pytest.raises(ra.PatternError) as caught:
        ra.rearrange(x, pattern, **lengths)
    lines = str(caught.value).splitlines()
    assert lines[0] == first_line
    assert lines[1] == "  " + pattern
    caret = lines[2]
    start = caret.index("^")
    assert pattern[start - 2 : start - 2 + len(pointed)] == pointed
    assert set(caret[start:]) == {"^"} and len(caret) - start == len(pointed)
    context = lines[-1]
    assert f"'{pattern}'" in context and f"input shape {shape}" in context
    for name, value in lengths.items():
        assert f"{name}={value!r}" in context
    np.testing.assert_array_equal(x, before)


def test_unknown_axis_length_keyword() -> None:
    with pytest.raises(ra.PatternError, match=r"axis length given for 'z', which is not an axis "
                                              r"of the pattern \(its axes: b, h, w\)"):
        ra.rearrange(np.zeros((2, 3, 4)), "b h w -> b h w", z=4)


def test_copy_false_names_the_group_that_forced_a_copy() -> None:
    x = np.arange(6).reshape(2, 3)
    with pytest.raises(ra.NoViewError) as caught:
        ra.rearrange(x, "a b -> (b a)", copy=False)
    assert isinstance(caught.value, ra.RearrangeError) and isinstance(caught.value, RuntimeError)
    assert "cannot merge (b a): stride(b)=1 != stride(a)*size(a)=6" in str(caught.value)
    assert "input shape (2, 3)" in str(caught.value)


@pytest.mark.parametrize(("call", "message"), [
    (lambda: ra.rearrange(np.zeros(3), 3), "pattern must be a str, got int 3"),
    (lambda: ra.rearrange("abc", "a -> a"), "got builtins.str"),
    (lambda: ra.rearrange(np.zeros(3), "a -> a", copy="yes"), "copy must be None, True or False"),
    (lambda: ra.rearrange(np.zeros((2, 3)), "a b -> a b", b=[1]), "axis length b=[1] must be a positive integer"),
    (lambda: ra.rearrange([np.zeros(2), np.zeros(3)], "n a -> a n"), "needs equal shapes"),
    (lambda: ra.rearrange([], "n a -> a n"), "empty list"),
    (lambda: ra.explain("abc", "a -> a"), "explain() takes a numpy array, a rearrange.Tensor, a torch tensor"),
    (lambda: ra.compile("a -> b"), "axis 'a' appears only on the left side"),
    (lambda: ra.compile("a -> a", a=0), "axis length a=0 must be a positive integer"),
], ids=["pattern-int", "input-str", "copy-str", "length-list", "ragged-list", "empty-list",
        "explain-str", "compile-bad-pattern", "compile-bad-length"])
def test_bad_arguments(call, message) -> None:
    with pytest.raises(ra.RearrangeError) as caught:
        call()
    assert message in str(caught.value)


def test_read_only_input_gives_read_only_view_and_is_never_written() -> None:
    x = np.arange(24.0).reshape(2, 3, 4)
    x.flags.writeable = False
    view = ra.rearrange(x, "a b c -> a (b c)")
    assert np.shares_memory(view, x) and not view.flags.writeable
    copy = ra.rearrange(x, "a b c -> (c a) b")
    assert copy.flags.writeable and not np.shares_memory(copy, x)
