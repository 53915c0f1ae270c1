"""parse_shape and check_shape against einops 0.8.2 (the oracle).

parse_shape must give einops' dict, or fail where einops fails, on the corpus, on einops'
own test cases and on Hypothesis-drawn patterns and shapes. check_shape has no einops
twin; its compositions are checked against the lengths einops' ``rearrange`` infers for
the same left side, and its messages as golden strings (caret line included).
"""

from __future__ import annotations

import json

import einops
import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import rearrange as ra
from corpus import load
from rearrange import shapes
from rearrange.parsing import parse_pack, parse_shape_pattern
from rearrange.shapes import ShapeMismatchError, ShapePlan, explain_shape

PARSE_SHAPE = load("parse_shape", "example")


# --------------------------------------------------------------------------- parse_shape


@pytest.mark.parametrize("entry", PARSE_SHAPE)
def test_parse_shape_same_as_einops(entry: dict) -> None:
    example = entry["example"]
    x = np.zeros(example["shape"])
    expected = einops.parse_shape(x, entry["pattern"])
    got = ra.parse_shape(x, entry["pattern"])
    assert got == expected == example["output"]
    assert list(got) == list(expected)  # the same order
    assert ra.check_shape(x, entry["pattern"]) == got


# einops/tests/test_other.py
EINOPS_VALID = [
    ([10, 20, 30, 40], "a b c d", dict(a=10, b=20, c=30, d=40)),
    ([10, 20, 30, 40], "_ _ _ _", {}),
    ([10, 20, 30, 40], "_ _ _ hello", dict(hello=40)),
    ([10, 20, 30, 40], "_ _ a1 a1a111a", dict(a1=30, a1a111a=40)),
    ([10, 20], "...", {}), ([10], "... a", dict(a=10)), ([10, 20], "... a", dict(a=20)),
    ([10, 20, 30], "... a", dict(a=30)), ([10, 20, 30, 40], "... a", dict(a=40)),
    ([10], "a ...", dict(a=10)), ([10, 20], "a ...", dict(a=10)),
    ([10, 20, 30], "a ...", dict(a=10)), ([10, 20, 30, 40], "a ...", dict(a=10)),
    ([10, 20, 30, 40], " a ... b", dict(a=10, b=40)), ([10, 40], " a ... b", dict(a=10, b=40)),
    ([1, 2, 3, 4], "1 2 3 a", dict(a=4)), ([10, 1, 2], "a 1 2", dict(a=10)),
    ([10, 1, 2], "a () 2", dict(a=10)),
]
EINOPS_FAILURES = [
    ([1, 2, 3, 4], "a b c"), ([1, 2, 3, 4], "2 a b c"), ([1, 2, 3, 4], "a b c ()"),
    ([1, 2, 3, 4], "a b c d e"), ([1, 2, 3, 4], "a b c d e ..."), ([10, 20, 30, 40], "a a b b"),
]


@pytest.mark.parametrize(("shape", "pattern", "expected"), EINOPS_VALID)
def test_einops_cases(shape, pattern, expected) -> None:
    x = np.ones(shape)
    assert ra.parse_shape(x, pattern) == einops.parse_shape(x, pattern) == expected
    assert ra.parse_shape(ra.ones(*shape), pattern) == expected
    assert ra.check_shape(x, pattern) == expected


@pytest.mark.parametrize(("shape", "pattern"), EINOPS_FAILURES)
def test_einops_failures(shape, pattern) -> None:
    x = np.ones(shape)
    with pytest.raises(RuntimeError):
        einops.parse_shape(x, pattern)
    with pytest.raises(ra.PatternError):
        ra.parse_shape(x, pattern)


def test_torch_and_other_shapes() -> None:
    torch = pytest.importorskip("torch")
    assert ra.parse_shape(torch.zeros(2, 3, 4), "b _ c") == {"b": 2, "c": 4}
    assert ra.check_shape(torch.zeros(2, 12), "b (h w)", w=3) == {"b": 2, "h": 4, "w": 3}

    class Shaped:
        shape = (5, 6)

    assert ra.parse_shape(Shaped(), "a b") == {"a": 5, "b": 6}
    assert ra.parse_shape(np.float32(1), "") == {}


def test_parse_shape_keeps_symbolic_sizes() -> None:
    """einops returns the backend's shape entries as they are (symbols for symbolic ones)."""

    class Symbolic:
        shape = (None, 7)

    assert ra.parse_shape(Symbolic(), "b t") == {"b": None, "t": 7}
    with pytest.raises(ra.ArgumentTypeError, match="a shape of integers"):
        ra.check_shape(Symbolic(), "b t")


# Patterns of random terms; einops decides which are valid and what they read.
TERMS = ["a", "b", "c", "_", "1", "2", "3", "()", "(1)", "(a)", "(2)", "(a b)", "(_)", "...",
         "(...)", "a_", "_a", "0", "(a 1)", "(1 1)"]


@given(st.lists(st.sampled_from(TERMS), max_size=5),
       st.lists(st.sampled_from([1, 2, 3, 4]), max_size=6))
def test_parse_shape_random_against_einops(terms, shape) -> None:
    pattern = " ".join(terms)
    x = np.zeros(shape)
    try:
        expected = einops.parse_shape(x, pattern)
    except Exception:  # einops raises EinopsError, RuntimeError or (for "(...)") ValueError
        with pytest.raises(ra.PatternError):
            ra.parse_shape(x, pattern)
        return
    assert ra.parse_shape(x, pattern) == expected
    assert ra.check_shape(x, pattern) == expected


# --------------------------------------------------------------------------- check_shape


NAMES = "abcdefghijkl"  # enough for 4 groups of 3


@st.composite
def composed_case(draw):
    """A left side with compositions, numbers, units and '...', a shape that fits it, its
    lengths, and enough of them to solve every group (all but one per group)."""
    names = iter(NAMES)
    groups, shape, lengths, given_lengths = [], [], {}, {}
    if draw(st.booleans()):
        groups.append("...")
        shape.extend(draw(st.lists(st.integers(1, 3), max_size=2)))
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(["name", "group", "number", "unit"]))
        if kind == "number":
            value = draw(st.integers(2, 3))
            groups.append(str(value))
            shape.append(value)
        elif kind == "unit":
            groups.append(draw(st.sampled_from(["1", "()"])))
            shape.append(1)
        else:
            members, size = [], 1
            for _ in range(1 if kind == "name" else draw(st.integers(1, 3))):
                if kind == "group" and draw(st.integers(0, 3)) == 0:
                    members.append("2")
                    size *= 2
                    continue
                name = next(names)
                lengths[name] = draw(st.integers(1, 4))
                members.append(name)
                size *= lengths[name]
            for name in [m for m in members if m.isalpha()][1:]:
                given_lengths[name] = lengths[name]
            groups.append(members[0] if kind == "name" else "(" + " ".join(members) + ")")
            shape.append(size)
    if "..." in groups and draw(st.booleans()):  # '...' last instead of first
        groups.append(groups.pop(0))
        count = len(shape) - (len(groups) - 1)
        shape = shape[count:] + shape[:count]
    return " ".join(groups), shape, lengths, given_lengths


def _einops_lengths(pattern: str, shape, lengths: dict) -> dict | None:
    """The lengths einops infers decomposing ``pattern`` (reduce takes numbers on the left
    side), or None when it rejects the shape or the lengths."""
    names = [n for n in NAMES if n in pattern]
    right = " ".join(names) + (" ..." if "..." in pattern else "")
    try:
        out = einops.reduce(np.zeros(shape), f"{pattern} -> {right}", "sum", **lengths)
    except einops.EinopsError:
        return None
    return dict(zip(names, out.shape))


@given(composed_case())
def test_check_shape_against_einops(case) -> None:
    pattern, shape, lengths, given_lengths = case
    solved = ra.check_shape(np.zeros(shape), pattern, **given_lengths)
    assert solved == lengths
    assert solved == _einops_lengths(pattern, shape, given_lengths)
    assert list(solved) == sorted(solved)  # pattern order


@given(composed_case(), st.data())
def test_check_shape_with_a_wrong_length_against_einops(case, data) -> None:
    pattern, shape, lengths, given_lengths = case
    assume(lengths)
    name = data.draw(st.sampled_from(sorted(lengths)))
    wrong = dict(given_lengths, **{name: lengths[name] + data.draw(st.integers(1, 2))})
    expected = _einops_lengths(pattern, shape, wrong)
    if expected is None:
        with pytest.raises(ra.PatternError):
            ra.check_shape(np.zeros(shape), pattern, **wrong)
    else:  # the change was absorbed by another axis of its group, as in einops
        assert ra.check_shape(np.zeros(shape), pattern, **wrong) == expected


def test_check_shape_repeats_and_underscores() -> None:
    assert ra.check_shape(np.zeros((5, 5)), "n n") == {"n": 5}
    assert ra.check_shape(np.zeros((6, 2, 4)), "(h w) h (_ 2)") == {"h": 2, "w": 3}
    assert ra.check_shape(np.zeros((3, 6)), "a (a b)") == {"a": 3, "b": 2}
    assert ra.check_shape(np.zeros((0, 3)), "(a b) c", b=2) == {"a": 0, "b": 2, "c": 3}
    assert ra.check_shape(np.zeros((2, 7, 3)), "b ... c") == {"b": 2, "c": 3}


def test_check_shape_result_is_the_callers() -> None:
    x = np.zeros((2, 12))
    first = ra.check_shape(x, "b (h w)", h=3)
    first["b"] = 99
    assert ra.check_shape(x, "b (h w)", h=3) == {"b": 2, "h": 3, "w": 4}


def _message(call) -> str:
    with pytest.raises(ra.RearrangeError) as info:
        call()
    return f"{type(info.value).__name__}: {info.value}"


CHECK_ERRORS = [
    ((2, 12, 3), "b (h w) c", {"h": 5},
     "ShapeMismatchError: dim 1 has size 12, which (h w) cannot split with h=5: 12 is not "
     "divisible by 5\n  b (h w) c\n    ^^^^^\n"
     "  while checking shape (2, 12, 3) against pattern 'b (h w) c' with h=5"),
    ((2, 12), "b (h w)", {"h": 3, "w": 5},
     "ShapeMismatchError: dim 1 has size 12, but (h w) with h=3 (given), w=5 (given) has 15 "
     "elements\n  b (h w)\n    ^^^^^\n"
     "  while checking shape (2, 12) against pattern 'b (h w)' with h=3, w=5"),
    ((2, 3), "h h", {},
     "ShapeMismatchError: dim 1 has size 3, but h=2 (from dim 0)\n  h h\n    ^\n"
     "  while checking shape (2, 3) against pattern 'h h'"),
    ((2, 3), "b c", {"c": 4},
     "ShapeMismatchError: dim 1 has size 3, but c=4 (was given)\n  b c\n    ^\n"
     "  while checking shape (2, 3) against pattern 'b c' with c=4"),
    ((2, 3), "b 2", {},
     "ShapeMismatchError: dim 1 has size 3, but the pattern says an axis of length 2 there\n"
     "  b 2\n    ^\n  while checking shape (2, 3) against pattern 'b 2'"),
    ((2, 3), "b ()", {},
     "ShapeMismatchError: dim 1 has size 3, but the pattern says a unit axis (size 1) there\n"
     "  b ()\n    ^^\n  while checking shape (2, 3) against pattern 'b ()'"),
    ((2, 12), "b (h w)", {},
     "PatternError: cannot solve (h w) at dim 1 of size 12: 2 lengths are unknown; pass all "
     "but one of them (h=, w=...)\n  b (h w)\n    ^^^^^\n"
     "  while checking shape (2, 12) against pattern 'b (h w)'"),
    ((2, 12), "b (h w)", {"q": 1},
     "PatternError: a length is given for 'q', which is not an axis of the pattern (its axes: "
     "b, h, w)\n  b (h w)\n  ^^^^^^^\n"
     "  while checking shape (2, 12) against pattern 'b (h w)' with q=1"),
    ((2, 12), "b (h w)", {"h": 0},
     "PatternError: axis length h=0 must be a positive integer\n  b (h w)\n     ^\n"
     "  while checking shape (2, 12) against pattern 'b (h w)' with h=0"),
    ((2, 12), "b (h w)", {"h": True},
     "PatternError: axis length h=True must be a positive integer\n  b (h w)\n     ^\n"
     "  while checking shape (2, 12) against pattern 'b (h w)' with h=True"),
    ((2, 12), "b (h w) c", {"h": 3},
     "ShapeMismatchError: the shape (2, 12) has 2 dims, but the pattern describes 3 dims: "
     "one group per dim is expected\n  b (h w) c\n  ^^^^^^^^^\n"
     "  while checking shape (2, 12) against pattern 'b (h w) c' with h=3"),
    ((2,), "a b ...", {},
     "ShapeMismatchError: the shape (2,) has 1 dim, but the pattern describes 2 dims besides "
     "'...'\n  a b ...\n  ^^^^^^^\n  while checking shape (2,) against pattern 'a b ...'"),
    ((0, 4), "(a b) c", {"a": 2, "c": 3},
     "ShapeMismatchError: dim 1 has size 4, but c=3 (was given)\n  (a b) c\n        ^\n"
     "  while checking shape (0, 4) against pattern '(a b) c' with a=2, c=3"),
    ((0,), "(a b)", {},
     "PatternError: cannot solve (a b) at dim 0 of size 0: 2 lengths are unknown; pass all "
     "but one of them (a=, b=...)\n  (a b)\n  ^^^^^\n"
     "  while checking shape (0,) against pattern '(a b)'"),
    ((0, 0), "(a b) b", {},
     "ShapeMismatchError: dim 0 has size 0, which (a b) cannot split with b=0: the other "
     "lengths multiply to 0, so a can be any length\n  (a b) b\n  ^^^^^\n"
     "  while checking shape (0, 0) against pattern '(a b) b'"),
]


@pytest.mark.parametrize(("shape", "pattern", "lengths", "message"), CHECK_ERRORS,
                         ids=[c[1] + str(c[2]) for c in CHECK_ERRORS])
def test_check_shape_errors(shape, pattern, lengths, message) -> None:
    assert _message(lambda: ra.check_shape(np.zeros(shape), pattern, **lengths)) == message
    # explain_shape fails the same way
    assert _message(lambda: explain_shape(shape, pattern, **lengths)) == message


PARSE_ERRORS = [
    ((1, 2, 3, 4), "a b c",
     "ShapeMismatchError: the shape (1, 2, 3, 4) has 4 dims, but the pattern describes 3 "
     "dims: one group per dim is expected\n  a b c\n  ^^^^^\n"
     "  while parsing shape (1, 2, 3, 4) against pattern 'a b c'"),
    ((1, 2, 3, 4), "2 a b c",
     "ShapeMismatchError: dim 0 has size 1, but the pattern says an axis of length 2 there\n"
     "  2 a b c\n  ^\n  while parsing shape (1, 2, 3, 4) against pattern '2 a b c'"),
    ((1, 2, 3, 4), "a b c ()",
     "ShapeMismatchError: dim 3 has size 4, but the pattern says a unit axis (size 1) there\n"
     "  a b c ()\n        ^^\n  while parsing shape (1, 2, 3, 4) against pattern 'a b c ()'"),
    ((2, 3), "(a b) c",
     "PatternError: composition (a b) in parse_shape, which reads one length per dim; "
     "check_shape takes compositions (with their lengths)\n  (a b) c\n  ^^^^^\n"
     "  while parsing shape (2, 3) against pattern '(a b) c'"),
    ((2, 3), "a a",
     "PatternError: axis 'a' appears twice; parse_shape reads each axis from one dim "
     "(check_shape takes repeats and checks they agree)\n  a a\n    ^\n"
     "  while parsing shape (2, 3) against pattern 'a a'"),
    ((2, 3), "a...",
     "PatternError: expected a space between 'a' and '...'\n  a...\n  ^^^^\n"
     "  while parsing shape (2, 3) against pattern 'a...'"),
    ((2, 3), "a -> b",
     "PatternError: unexpected '->': a shape pattern describes the dims of one tensor (names, "
     "'_', numbers, groups and '...')\n  a -> b\n    ^^\n"
     "  while parsing shape (2, 3) against pattern 'a -> b'"),
    ((2, 3), "(...) a",
     "PatternError: '...' inside parentheses; in a shape pattern it stands for whole dims\n"
     "  (...) a\n   ^^^\n  while parsing shape (2, 3) against pattern '(...) a'"),
    ((2, 3), "... a ...",
     "PatternError: '...' appears twice; a shape pattern may hold one ellipsis at most\n"
     "  ... a ...\n        ^^^\n  while parsing shape (2, 3) against pattern '... a ...'"),
    ((2, 3), "a_ b",
     "PatternError: invalid axis name 'a_': axis names must not start or end with '_'\n"
     "  a_ b\n  ^^\n  while parsing shape (2, 3) against pattern 'a_ b'"),
    ((2, 3), "0 a",
     "PatternError: anonymous axis of length 0; a number in a pattern is an axis length and "
     "must be at least 1\n  0 a\n  ^\n  while parsing shape (2, 3) against pattern '0 a'"),
    ((2, 3), "(a (b))",
     "PatternError: nested parentheses: a group holds axes, '1' and '...', not another group\n"
     "  (a (b))\n     ^\n  while parsing shape (2, 3) against pattern '(a (b))'"),
]


@pytest.mark.parametrize(("shape", "pattern", "message"), PARSE_ERRORS,
                         ids=[c[1] for c in PARSE_ERRORS])
def test_parse_shape_errors(shape, pattern, message) -> None:
    assert _message(lambda: ra.parse_shape(np.zeros(shape), pattern)) == message


def test_argument_errors() -> None:
    assert "takes an array or tensor (anything with a .shape); got builtins.list" in _message(
        lambda: ra.parse_shape([1, 2], "a"))
    assert "a pattern must be a str, not int" in _message(lambda: ra.parse_shape(np.zeros(2), 3))
    assert "a pattern must be a str, not list" in _message(
        lambda: ra.check_shape(np.zeros(2), ["a"]))
    assert _message(lambda: explain_shape("ab", "a")).startswith("ArgumentTypeError")


def test_error_classes() -> None:
    error = pytest.raises(ShapeMismatchError, ra.parse_shape, np.zeros(2), "a b").value
    assert isinstance(error, ra.PatternError) and isinstance(error, ra.RearrangeError)
    assert isinstance(error, ValueError) and isinstance(error, RuntimeError)
    assert type(error).__module__ == "rearrange.shapes"


# --------------------------------------------------------------------------- explain_shape


def test_explain_shape() -> None:
    plan = explain_shape(np.zeros((2, 12, 3, 5)), "b (h w) ... c", h=4)
    assert isinstance(plan, ShapePlan) and plan.is_view
    assert dict(plan.axis_lengths) == ra.check_shape(np.zeros((2, 12, 3, 5)), "b (h w) ... c", h=4)
    assert [row.solved for row in plan.rows] == ["b=2", "w=3 (12 / h=4)", "skipped (...)", "c=5"]
    data = json.loads(plan.dump())
    assert data == plan.to_dict() and data["given"] == {"h": 4} and data["is_view"] is True
    assert explain_shape(ra.zeros(2, 3), "a b").shape == (2, 3)
    assert explain_shape([2, 3], "a b").shape == (2, 3)
    assert str(explain_shape((), "")) == (
        "check_shape ''\n  shape    ()\n  given    (none)\n  axes     (none)\n"
        "  result   fits: every dim matches the pattern")


# --------------------------------------------------------------------------- the parse stage


@given(st.text(alphabet="ab_1 *().", max_size=10))
def test_parse_pack_accepts_what_einops_accepts(text) -> None:
    try:
        einops.packing.analyze_pattern(text, "pack")
        accepted = True
    except einops.EinopsError:
        accepted = False
    try:
        parse_pack(text)
    except ra.PatternError:
        assert not accepted
        return
    assert accepted


@given(st.text(alphabet="ab_12 ().", max_size=10), st.sampled_from(["parse_shape", "check_shape"]))
def test_parse_shape_pattern_rejects_what_einops_rejects(text, op) -> None:
    """Whatever einops' parser rejects (with underscores allowed) is rejected here."""
    try:
        einops.parsing.ParsedExpression(text, allow_underscore=True, allow_duplicates=True)
    except einops.EinopsError:
        with pytest.raises(ra.PatternError):
            parse_shape_pattern(text, op)


def test_parse_shape_pattern_structure() -> None:
    pattern = parse_shape_pattern("b _ (h 1 w) 2 () ...", "check_shape")
    assert pattern.names == ("b", "h", "w")
    groups = pattern.side.groups
    assert [g.bracketed for g in groups] == [False, False, True, False, True, False]
    assert [len(g.members) for g in groups] == [1, 1, 2, 1, 0, 1]
    assert parse_shape_pattern("a b") is parse_shape_pattern("a b")  # cached
    with pytest.raises(ra.RearrangeError, match="op must be one of"):
        parse_shape_pattern("a", "rearrange")


def test_caches() -> None:
    from rearrange.caching import PLANS

    ra.cache_clear()
    x = np.zeros((2, 3))
    ra.parse_shape(x, "a b")
    ra.parse_shape(x, "a b")
    assert ("shape-recipe", "a b", "parse_shape", 2) in PLANS.entries
    assert ra.cache_info().plans.hits >= 1
    ra.check_shape(x, "a (b)")
    assert ("check_shape", "a (b)", x.shape) in PLANS.entries
