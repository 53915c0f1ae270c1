"""The parse stage: grammar/pattern.lark + rearrange/parsing.py.

Oracles: einops 0.8.2's own shape-free checks (``_prepare_transformation_recipe``) decide
which patterns are valid; lark's LALR runtime decides what the grammar accepts; the
structures expected of valid patterns are written out by hand or by the generator that
built the pattern. Error messages are our own design, so they are compared as golden
strings, caret line included.
"""

from __future__ import annotations

import json
import pathlib
import shutil
import re
import subprocess
import sys
import textwrap
import warnings

import pytest
from hypothesis import given
from hypothesis import strategies as st

import rearrange
from rearrange import parsing
from rearrange.parsing import (
    AnonymousAxis,
    AxisName,
    EllipsisAxis,
    Group,
    Side,
    TransformPattern,
    parse_transform,
    pattern_error,
)

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPUS = REPO_ROOT / "tests" / "data" / "einops_patterns.jsonl"
OPS = ("rearrange", "reduce", "repeat")


# --------------------------------------------------------------------------- helpers


def structure(side: Side) -> tuple:
    """A side without spans: ((bracketed, (member, ...)), ...), a member being its name,
    its length (anonymous axis) or Ellipsis."""
    return tuple(
        (
            group.bracketed,
            tuple(
                m.name if type(m) is AxisName else m.value if type(m) is AnonymousAxis else ...
                for m in group.members
            ),
        )
        for group in side.groups
    )


def B(*members):  # a bare term: `b`, `...`, `3`; B() is a bare `1`
    return (False, members)


def P(*members):  # a parenthesised group: `(h w)`; P() is `()` or `(1)`
    return (True, members)


def render(side: Side) -> str:
    def member(m) -> str:
        return m.name if type(m) is AxisName else str(m.value) if type(m) is AnonymousAxis else "..."

    def group(g: Group) -> str:
        inner = " ".join(map(member, g.members))
        return f"({inner})" if g.bracketed else inner or "1"

    return " ".join(map(group, side.groups))


def render_pattern(pattern: TransformPattern) -> str:
    return f"{render(pattern.left)} -> {render(pattern.right)}"


def einops_accepts(pattern: str, op: str) -> bool:
    """Whether einops 0.8.2 accepts ``pattern`` for ``op`` for some number of dims, given
    a length for every named axis (so that no shape-dependent check can fail). einops
    splits on spaces only: other whitespace is made a space first (we accept any)."""
    from einops import EinopsError
    from einops.einops import _prepare_transformation_recipe

    pattern = re.sub(r"[\t\n\r\f]", " ", pattern)  # the whitespace of the grammar
    if pattern.count("->") != 1:  # einops unpacks pattern.split("->") into two sides
        return False
    lengths = tuple(sorted({name for name in re.findall(r"\w+", pattern) if not name.isdecimal()}))
    operation = {"rearrange": "rearrange", "reduce": "sum", "repeat": "repeat"}[op]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # einops warns about keyword axis names
        for ndim in range(10):
            try:
                _prepare_transformation_recipe(pattern, operation, lengths, ndim)
                return True
            except EinopsError:
                pass
    return False


# --------------------------------------------------------------------------- valid patterns

# (pattern, op, left structure, right structure)
VALID = [
    ("b h w c -> b c h w", "rearrange", (B("b"), B("h"), B("w"), B("c")), (B("b"), B("c"), B("h"), B("w"))),
    ("b h (t d) -> b t (h d)", "rearrange", (B("b"), B("h"), P("t", "d")), (B("b"), B("t"), P("h", "d"))),
    ("(b1 b2) h w c -> (b1 h) (b2 w) c ", "rearrange",
     (P("b1", "b2"), B("h"), B("w"), B("c")), (P("b1", "h"), P("b2", "w"), B("c"))),
    ("b c (h h2) (w w2) -> b (c h2 w2) h w", "rearrange",
     (B("b"), B("c"), P("h", "h2"), P("w", "w2")), (B("b"), P("c", "h2", "w2"), B("h"), B("w"))),
    ("... h w -> ... (h w)", "rearrange", (B(...), B("h"), B("w")), (B(...), P("h", "w"))),
    ("b ... c -> (b ...) c", "rearrange", (B("b"), B(...), B("c")), (P("b", ...), B("c"))),
    ("... -> ...", "rearrange", (B(...),), (B(...),)),
    ("->", "rearrange", (), ()),
    (" -> 1", "rearrange", (), (B(),)),
    ("c b -> ", "reduce", (B("c"), B("b")), ()),
    (" -> b", "repeat", (), (B("b"),)),
    ("b 1 h w 1 c -> b h w c", "rearrange",
     (B("b"), B(), B("h"), B("w"), B(), B("c")), (B("b"), B("h"), B("w"), B("c"))),
    ("h w -> () () h w", "rearrange", (B("h"), B("w")), (P(), P(), B("h"), B("w"))),
    ("(1) h (1 w 1) -> h (w)", "rearrange", (P(), B("h"), P("w")), (B("h"), P("w"))),
    ("01 h -> h", "rearrange", (B(), B("h")), (B("h"),)),  # a number is its value
    ("b (h 2) (w 2) c -> b h w c", "reduce",
     (B("b"), P("h", 2), P("w", 2), B("c")), (B("b"), B("h"), B("w"), B("c"))),
    ("(t 2) b c -> t b c", "reduce", (P("t", 2), B("b"), B("c")), (B("t"), B("b"), B("c"))),
    ("b c h w -> b c 1 1", "reduce", (B("b"), B("c"), B("h"), B("w")), (B("b"), B("c"), B(), B())),
    ("... c -> c", "reduce", (B(...), B("c")), (B("c"),)),  # the ellipsis axes are reduced
    ("h w c -> (2 h) (2 w) c", "repeat", (B("h"), B("w"), B("c")), (P(2, "h"), P(2, "w"), B("c"))),
    ("h w -> h 5 w", "repeat", (B("h"), B("w")), (B("h"), B(5), B("w"))),
    ("b -> b (h h2)", "repeat", (B("b"),), (B("b"), P("h", "h2"))),
    ("(a)(b) -> a b", "rearrange", (P("a"), P("b")), (B("a"), B("b"))),
    ("b(h w)->b h w", "rearrange", (B("b"), P("h", "w")), (B("b"), B("h"), B("w"))),
    ("a\tb\n->\n  b  a", "rearrange", (B("a"), B("b")), (B("b"), B("a"))),
    ("( h  w )-> w h", "rearrange", (P("h", "w"),), (B("w"), B("h"))),
    ("höhe breite -> breite höhe", "rearrange", (B("höhe"), B("breite")), (B("breite"), B("höhe"))),
    ("时间 批 -> 批 时间", "rearrange", (B("时间"), B("批")), (B("批"), B("时间"))),
    ("class for -> for class", "rearrange", (B("class"), B("for")), (B("for"), B("class"))),
    ("a_b A1 -> A1 a_b", "rearrange", (B("a_b"), B("A1")), (B("A1"), B("a_b"))),
]


@pytest.mark.parametrize(("text", "op", "left", "right"), VALID, ids=[v[0] for v in VALID])
def test_valid_pattern_parses_to_its_structure(text, op, left, right):
    pattern = parse_transform(text, op)
    assert pattern.text == text
    assert structure(pattern.left) == left
    assert structure(pattern.right) == right


@pytest.mark.parametrize(("text", "op"), [v[:2] for v in VALID], ids=[v[0] for v in VALID])
def test_valid_pattern_is_valid_for_einops(text, op):
    assert einops_accepts(text, op)


def test_side_names_and_ellipsis():
    pattern = parse_transform("b (h 2) ... 1 -> b ... h", "reduce")
    assert pattern.left.names == ("b", "h")
    assert pattern.right.names == ("b", "h")
    assert pattern.left.has_ellipsis and pattern.right.has_ellipsis
    assert not parse_transform("b h -> h b").left.has_ellipsis


# (pattern, op, path to a node, its span)
SPANS = [
    ("b h (t d) -> b t (h d)", "rearrange", lambda p: p.left, (0, 9)),
    ("b h (t d) -> b t (h d)", "rearrange", lambda p: p.left.groups[2], (4, 9)),
    ("b h (t d) -> b t (h d)", "rearrange", lambda p: p.left.groups[2].members[1], (7, 8)),
    ("b h (t d) -> b t (h d)", "rearrange", lambda p: p.right, (13, 22)),
    ("b h (t d) -> b t (h d)", "rearrange", lambda p: p.right.groups[0], (13, 14)),
    ("  long_name ... -> ... long_name", "rearrange", lambda p: p.left.groups[0].members[0], (2, 11)),
    ("  long_name ... -> ... long_name", "rearrange", lambda p: p.left.groups[1].members[0], (12, 15)),
    ("a 1 -> a", "rearrange", lambda p: p.left.groups[1], (2, 3)),
    ("a (1) -> a", "rearrange", lambda p: p.left.groups[1], (2, 5)),
    ("(h 12) -> h", "reduce", lambda p: p.left.groups[0].members[1], (3, 5)),
    (" -> b", "repeat", lambda p: p.left, (1, 1)),  # an empty side sits at the arrow
    ("c b ->  ", "reduce", lambda p: p.right, (6, 6)),
]


@pytest.mark.parametrize(("text", "op", "node", "span"), SPANS)
def test_span(text, op, node, span):
    found = node(parse_transform(text, op))
    assert (found.start, found.end) == span


def test_nodes_are_frozen_and_slotted():
    pattern = parse_transform("b (h w) -> b h w")
    with pytest.raises(AttributeError):
        pattern.left.groups[0].members[0].name = "x"
    assert not hasattr(pattern.left, "__dict__")
    assert isinstance(pattern.left.groups[0].members[0], AxisName)
    assert isinstance(parse_transform("... -> ...").left.groups[0].members[0], EllipsisAxis)


# --------------------------------------------------------------------------- bad patterns

# (pattern, op, the full message). Each class of mistake, caret under the offending text.
BAD = [
    # syntax: what was found, what was expected
    ("a - b -> a b", "rearrange",
     "unexpected character '-'; expected an axis name, a number, '(', '...' or '->'\n"
     "  a - b -> a b\n"
     "    ^"),
    ("a b -> a, b", "rearrange",
     "unexpected character ','; expected an axis name, a number, '(', '...' or '->'\n"
     "  a b -> a, b\n"
     "          ^"),
    ("a b -> a * b", "rearrange",
     "unexpected character '*'; expected an axis name, a number, '(', '...' or '->'\n"
     "  a b -> a * b\n"
     "           ^"),
    ("a.b -> a b", "rearrange",
     "unexpected character '.'; expected an axis name, a number, '(', '...' or '->'\n"
     "  a.b -> a b\n"
     "   ^"),
    ("a .... -> a", "reduce",
     "unexpected character '.'; expected an axis name, a number, '(', '...' or '->'\n"
     "  a .... -> a\n"
     "       ^"),
    ("(a - b) -> a b", "rearrange",
     "unexpected character '-'; expected an axis name, a number, '...' or ')'\n"
     "  (a - b) -> a b\n"
     "     ^"),
    ("a\u00a0b -> a b", "rearrange",
     "unexpected character '\\xa0'; expected an axis name, a number, '(', '...' or '->'\n"
     "  a b -> a b\n"
     "   ^"),
    # the arrow
    ("a b c", "rearrange",
     "pattern must contain '->' between the input and the output axes; found none\n"
     "  a b c\n"
     "  ^^^^^"),
    ("  b  h ", "reduce",
     "pattern must contain '->' between the input and the output axes; found none\n"
     "    b  h \n"
     "    ^^^^"),
    ("", "rearrange",
     "pattern must contain '->' between the input and the output axes; found none\n"
     "  \n"
     "  ^"),
    ("a -> b -> a", "rearrange",
     "pattern must contain '->' exactly once; found a second '->'\n"
     "  a -> b -> a\n"
     "         ^^"),
    ("a b -> b a ->", "repeat",
     "pattern must contain '->' exactly once; found a second '->'\n"
     "  a b -> b a ->\n"
     "             ^^"),
    # parentheses
    ("(a (b c)) -> a b c", "rearrange",
     "nested parentheses: a group holds axes, '1' and '...', not another group\n"
     "  (a (b c)) -> a b c\n"
     "     ^"),
    ("a b -> ((a b))", "rearrange",
     "nested parentheses: a group holds axes, '1' and '...', not another group\n"
     "  a b -> ((a b))\n"
     "          ^"),
    ("(a b -> a b", "rearrange",
     "unbalanced parentheses: '(' is not closed before '->'\n"
     "  (a b -> a b\n"
     "  ^"),
    ("a b -> (a b", "rearrange",
     "unbalanced parentheses: '(' is not closed before the end of the pattern\n"
     "  a b -> (a b\n"
     "         ^"),
    ("a b) -> a b", "rearrange",
     "unbalanced parentheses: ')' has no matching '('\n"
     "  a b) -> a b\n"
     "     ^"),
    ("a b -> a b)", "rearrange",
     "unbalanced parentheses: ')' has no matching '('\n"
     "  a b -> a b)\n"
     "            ^"),
    ("a b -> )a b(", "rearrange",
     "unbalanced parentheses: ')' has no matching '('\n"
     "  a b -> )a b(\n"
     "         ^"),
    # terms that touch
    ("a... -> a ...", "rearrange",
     "expected a space between 'a' and '...'\n"
     "  a... -> a ...\n"
     "  ^^^^"),
    ("a ...b -> a ... b", "rearrange",
     "expected a space between '...' and 'b'\n"
     "  a ...b -> a ... b\n"
     "    ^^^^"),
    ("...... -> ...", "rearrange",
     "expected a space between '...' and '...'\n"
     "  ...... -> ...\n"
     "  ^^^^^^"),
    # axis names
    ("2a -> 2a", "rearrange",
     "invalid axis name '2a': expected a Python identifier, which does not start with a digit\n"
     "  2a -> 2a\n"
     "  ^^"),
    ("a² -> a²", "rearrange",
     "invalid axis name 'a²': expected a Python identifier\n"
     "  a² -> a²\n"
     "  ^^"),
    ("_ b -> b", "reduce",
     "invalid axis name '_': '_' skips an axis only in parse_shape patterns\n"
     "  _ b -> b\n"
     "  ^"),
    ("_a -> _a", "rearrange",
     "invalid axis name '_a': axis names must not start or end with '_'\n"
     "  _a -> _a\n"
     "  ^^"),
    ("a_ -> a_", "rearrange",
     "invalid axis name 'a_': axis names must not start or end with '_'\n"
     "  a_ -> a_\n"
     "  ^^"),
    ("b -> b __", "repeat",
     "invalid axis name '__': axis names must not start or end with '_'\n"
     "  b -> b __\n"
     "         ^^"),
    # numbers
    ("a 0 -> a", "reduce",
     "anonymous axis of length 0; a number in a pattern is an axis length and must be at least 1\n"
     "  a 0 -> a\n"
     "    ^"),
    ("a -> a 00", "repeat",
     "anonymous axis of length 0; a number in a pattern is an axis length and must be at least 1\n"
     "  a -> a 00\n"
     "         ^^"),
    # duplicates
    ("a b a -> a b", "rearrange",
     "axis 'a' appears twice on the left side; each axis may appear once per side\n"
     "  a b a -> a b\n"
     "      ^"),
    ("a (b c) -> (a b c c)", "rearrange",
     "axis 'c' appears twice on the right side; each axis may appear once per side\n"
     "  a (b c) -> (a b c c)\n"
     "                    ^"),
    # the ellipsis
    ("... a ... -> a ...", "rearrange",
     "'...' appears twice on the left side; a side may hold one ellipsis at most\n"
     "  ... a ... -> a ...\n"
     "        ^^^"),
    ("a ... -> (... ...) a", "rearrange",
     "'...' appears twice on the right side; a side may hold one ellipsis at most\n"
     "  a ... -> (... ...) a\n"
     "                ^^^"),
    ("(a ...) -> a ...", "rearrange",
     "'...' inside parentheses on the left side; it may be grouped only on the right side\n"
     "  (a ...) -> a ...\n"
     "     ^^^"),
    ("(...) -> ...", "reduce",
     "'...' inside parentheses on the left side; it may be grouped only on the right side\n"
     "  (...) -> ...\n"
     "   ^^^"),
    ("(... a) -> a ...", "repeat",
     "'...' inside parentheses on the left side; it may be grouped only on the right side\n"
     "  (... a) -> a ...\n"
     "   ^^^"),
    ("a -> a ...", "rearrange",
     "'...' appears only on the right side; the input needs '...' for the output to have it\n"
     "  a -> a ...\n"
     "         ^^^"),
    ("a -> ...", "reduce",
     "'...' appears only on the right side; the input needs '...' for the output to have it\n"
     "  a -> ...\n"
     "       ^^^"),
    ("a -> (a ...)", "repeat",
     "'...' appears only on the right side; the input needs '...' for the output to have it\n"
     "  a -> (a ...)\n"
     "          ^^^"),
    ("a ... -> a", "rearrange",
     "'...' appears only on the left side; rearrange needs it on both sides\n"
     "  a ... -> a\n"
     "    ^^^"),
    ("... a -> a", "repeat",
     "'...' appears only on the left side; repeat cannot remove axes (reduce can)\n"
     "  ... a -> a\n"
     "  ^^^"),
    # rearrange: every axis on both sides, no numbers but 1
    ("b h -> b (h w)", "rearrange",
     "axis 'w' appears only on the right side; rearrange needs every axis on both sides\n"
     "  b h -> b (h w)\n"
     "              ^"),
    ("b h w -> b h", "rearrange",
     "axis 'w' appears only on the left side; rearrange needs every axis on both sides\n"
     "  b h w -> b h\n"
     "      ^"),
    ("b (h 2) -> b h", "rearrange",
     "anonymous axis 2 is not allowed in rearrange (only 1 is); name the axis and pass its "
     "length as a keyword\n"
     "  b (h 2) -> b h\n"
     "       ^"),
    ("b h -> b h 1 3", "rearrange",
     "anonymous axis 3 is not allowed in rearrange (only 1 is); name the axis and pass its "
     "length as a keyword\n"
     "  b h -> b h 1 3\n"
     "               ^"),
    # reduce: nothing new on the right
    ("b h -> b h c", "reduce",
     "axis 'c' appears only on the right side; reduce cannot create axes (repeat can)\n"
     "  b h -> b h c\n"
     "             ^"),
    ("b h -> b h 2", "reduce",
     "anonymous axis 2 on the right side; reduce cannot create axes (repeat can)\n"
     "  b h -> b h 2\n"
     "             ^"),
    # repeat: nothing lost from the left
    ("b h -> b", "repeat",
     "axis 'h' appears only on the left side; repeat cannot remove axes (reduce can)\n"
     "  b h -> b\n"
     "    ^"),
    ("(b 2) h -> b h 2", "repeat",
     "anonymous axis 2 on the left side; repeat takes anonymous axes only on the right side, "
     "as new axes\n"
     "  (b 2) h -> b h 2\n"
     "     ^"),
    # carets under wide characters and in multi-line patterns
    ("日本 x -> x 日本 y", "rearrange",
     "axis 'y' appears only on the right side; rearrange needs every axis on both sides\n"
     "  日本 x -> x 日本 y\n"
     "                   ^"),
    ("a\n -> a\tb", "rearrange",
     "axis 'b' appears only on the right side; rearrange needs every axis on both sides\n"
     "   -> a b\n"
     "        ^"),
]

# Rejected by us although einops 0.8.2 accepts it (reason in a comment).
STRICTER_THAN_EINOPS = {
    # an axis length that does not fit in 64 bits
    ("a -> a 9999999999999999999", "repeat"),
}

BAD += [
    ("a -> a 9999999999999999999", "repeat",
     "anonymous axis of 19 digits; expected an axis length of at most 18 digits\n"
     "  a -> a 9999999999999999999\n"
     "         ^^^^^^^^^^^^^^^^^^^"),
]


@pytest.mark.parametrize(("text", "op", "message"), BAD, ids=[f"{b[1]}:{b[0]}" for b in BAD])
def test_bad_pattern_message(text, op, message):
    with pytest.raises(rearrange.PatternError) as caught:
        parse_transform(text, op)
    assert str(caught.value) == message
    assert isinstance(caught.value, rearrange.RearrangeError)
    assert isinstance(caught.value, ValueError)
    # no lark exception chained to it
    assert caught.value.__cause__ is None
    assert caught.value.__context__ is None or caught.value.__suppress_context__


@pytest.mark.parametrize(("text", "op"), [b[:2] for b in BAD], ids=[f"{b[1]}:{b[0]}" for b in BAD])
def test_bad_pattern_is_invalid_for_einops(text, op):
    if (text, op) in STRICTER_THAN_EINOPS:
        assert einops_accepts(text, op)
    else:
        assert not einops_accepts(text, op)


def test_errors_are_not_cached_and_repeat():
    for _ in range(2):
        with pytest.raises(rearrange.PatternError, match="only on the right side"):
            parse_transform("b h -> b (h w)")


def test_unknown_op_and_non_string_pattern():
    with pytest.raises(rearrange.RearrangeError, match="op must be one of 'rearrange', 'reduce', 'repeat', not 'sum'"):
        parse_transform("a -> a", "sum")
    with pytest.raises(rearrange.ArgumentTypeError, match="a pattern must be a str, not list"):
        parse_transform(["a -> a"])


# --------------------------------------------------------------------------- pattern_error


@pytest.mark.parametrize(
    ("text", "start", "end", "caret"),
    [
        ("b h -> b (h w)", 12, None, "  b h -> b (h w)\n              ^"),
        ("b h -> b (h w)", 9, 14, "  b h -> b (h w)\n           ^^^^^"),
        ("b h -> b (h w)", 3, 3, "  b h -> b (h w)\n     ^"),  # an empty span: one caret
        ("a b", 3, None, "  a b\n     ^"),  # at the end of the text
        ("a\tb", 2, None, "  a b\n    ^"),  # a tab shows as one space
        ("ab\ncd -> x", 4, 5, "  cd -> x\n   ^"),  # only the line that holds the span
        ("时 x", 2, None, "  时 x\n     ^"),  # a wide character is two columns
    ],
)
def test_pattern_error_caret(text, start, end, caret):
    error = pattern_error("what went wrong", text, start, end)
    assert isinstance(error, rearrange.PatternError)
    assert str(error) == f"what went wrong\n{caret}"


# --------------------------------------------------------------------------- generated patterns

NAMES = st.from_regex(r"[^\W\d_](\w{0,3}[^\W_])?", fullmatch=True).filter(str.isidentifier)
SPACE = st.sampled_from([" ", "  ", "\t", "\n", " \n\t "])
MAYBE_SPACE = st.sampled_from(["", "", " ", "\n"])
UNITS = {"1": (False, [], ["1"]), "()": (True, [], []), "(1)": (True, [], ["1"])}


@st.composite
def side_layouts(draw, items, ellipsis, ellipsis_in_group):
    """Groups holding ``items`` (and ``...`` if ``ellipsis``), plus unit axes, as a list
    of (bracketed, members, spelled tokens): members as in the AST, the spelling with
    the 1s the AST drops."""
    items = draw(st.permutations(items))
    groups = []
    i = 0
    while i < len(items):
        size = draw(st.integers(1, min(3, len(items) - i)))
        chunk = list(items[i : i + size])
        i += size
        bracketed = size > 1 or draw(st.booleans())
        groups.append((bracketed, chunk, [str(m) for m in chunk]))
    if ellipsis:
        bracketed_groups = [g for g in groups if g[0]]
        if ellipsis_in_group and bracketed_groups and draw(st.booleans()):
            group = draw(st.sampled_from(bracketed_groups))
            at = draw(st.integers(0, len(group[1])))
            group[1].insert(at, ...)
            group[2].insert(at, "...")
        else:
            groups.insert(draw(st.integers(0, len(groups))), (False, [...], ["..."]))
    for unit in draw(st.lists(st.sampled_from(sorted(UNITS)), max_size=2)):
        bracketed, members, spelled = UNITS[unit]
        groups.insert(draw(st.integers(0, len(groups))), (bracketed, list(members), list(spelled)))
    for group in groups:  # a 1 inside a group is spelled but dropped
        if group[0] and draw(st.integers(0, 4)) == 0:
            group[2].insert(draw(st.integers(0, len(group[2]))), "1")
    return groups


@st.composite
def transform_patterns(draw):
    """(op, text, expected left structure, expected right structure): a valid pattern."""
    op = draw(st.sampled_from(OPS))
    names = draw(st.lists(NAMES, max_size=6, unique=True))
    ellipsis = draw(st.booleans())
    left, right, right_ellipsis = list(names), list(names), ellipsis
    if op == "reduce":  # some names, numbers and the ellipsis reduced away
        right = [name for name in names if draw(st.booleans())]
        left += draw(st.lists(st.integers(2, 999), max_size=2))
        right_ellipsis = ellipsis and draw(st.booleans())
    elif op == "repeat":  # new names and numbers on the right
        right += draw(st.lists(NAMES.filter(lambda n: n not in names), max_size=2, unique=True))
        right += draw(st.lists(st.integers(2, 999), max_size=2))
    left_groups = draw(side_layouts(left, ellipsis, ellipsis_in_group=False))
    right_groups = draw(side_layouts(right, right_ellipsis, ellipsis_in_group=True))

    tokens: list[str] = []
    for groups in (left_groups, None, right_groups):
        if groups is None:
            tokens.append("->")
            continue
        for bracketed, _, spelled in groups:
            tokens += ["(", *spelled, ")"] if bracketed else spelled
    text = draw(MAYBE_SPACE)
    for previous, token in zip(tokens, tokens[1:]):
        text += previous
        # terms need a space between them; parentheses and the arrow do not
        needs_space = previous not in "()->" and token not in "()->"
        text += draw(SPACE if needs_space else st.one_of(MAYBE_SPACE, SPACE))
    text += tokens[-1] + draw(MAYBE_SPACE)

    def expected(groups):
        return tuple((bracketed, tuple(members)) for bracketed, members, _ in groups)

    return op, text, expected(left_groups), expected(right_groups)


def assert_spans(pattern: TransformPattern) -> None:
    text = pattern.text
    for side in (pattern.left, pattern.right):
        if side.groups:
            assert (side.start, side.end) == (side.groups[0].start, side.groups[-1].end)
        for group in side.groups:
            if group.bracketed:
                assert text[group.start] == "(" and text[group.end - 1] == ")"
            elif not group.members:
                assert int(text[group.start : group.end]) == 1
            else:
                assert (group.start, group.end) == (group.members[0].start, group.members[0].end)
            for member in group.members:
                spelled = text[member.start : member.end]
                if type(member) is AxisName:
                    assert spelled == member.name
                elif type(member) is AnonymousAxis:
                    assert int(spelled) == member.value
                else:
                    assert spelled == "..."


@given(transform_patterns())
def test_generated_pattern_parses_and_round_trips(case):
    op, text, left, right = case
    pattern = parse_transform(text, op)
    assert (structure(pattern.left), structure(pattern.right)) == (left, right)
    assert_spans(pattern)
    again = parse_transform(render_pattern(pattern), op)
    assert (structure(again.left), structure(again.right)) == (left, right)
    assert einops_accepts(render_pattern(pattern), op)


def lark_accepts(text: str) -> bool:
    try:
        parsing.get_parser("transform").parse(text)
    except parsing.LARK_ERRORS:
        return False
    return True


def scanner_agrees_with_lark(text: str) -> bool:
    """The fast path's contract (tests/test_parser_equivalence.py has the full check)."""
    try:
        reference = parsing._transform_sides_lark(text)
    except rearrange.PatternError:
        return parsing._scan_transform(text) is None
    return parsing._scan_transform(text) == reference


@given(st.text(alphabet="ab1 0()._->\t,*²…", max_size=14), st.sampled_from(OPS))
def test_random_text_fast_path_agrees_with_lark(text, op):
    accepted = lark_accepts(text)
    assert scanner_agrees_with_lark(text)
    try:
        parse_transform(text, op)
    except rearrange.PatternError:
        return
    assert accepted


# --------------------------------------------------------------------------- the einops corpus


def corpus(ops):
    rows = []
    for number, line in enumerate(CORPUS.read_text(encoding="utf-8").splitlines(), 1):
        record = json.loads(line)
        if record["op"] in ops:
            # Most records ran in einops ("example"); a few failed there ("example_error").
            ran = "example" in record
            rows.append(pytest.param(record["op"], record["pattern"], ran, id=f"line{number}"))
    return rows


@pytest.mark.parametrize(("op", "text", "ran_in_einops"), corpus(OPS))
def test_einops_corpus_transform(op, text, ran_in_einops):
    if not ran_in_einops and not einops_accepts(text, op):
        # einops failed on the pattern itself (not on the shapes or lengths given it)
        with pytest.raises(rearrange.PatternError):
            parse_transform(text, op)
        return
    pattern = parse_transform(text, op)
    again = parse_transform(render_pattern(pattern), op)
    assert (structure(again.left), structure(again.right)) == (
        structure(pattern.left),
        structure(pattern.right),
    )


# The other start rules of the grammar, syntax only (their checks come with their ops).
START_RULE = {"einsum": "einsum", "pack": "pack", "unpack": "pack", "parse_shape": "shape"}


@pytest.mark.parametrize(("op", "text", "ran_in_einops"), corpus(set(START_RULE)))
def test_einops_corpus_other_start_rules(op, text, ran_in_einops):
    if not ran_in_einops:
        pytest.skip("einops rejected this pattern")
    parsing.get_parser(START_RULE[op]).parse(text)


@pytest.mark.parametrize(
    ("start", "text"),
    [("einsum", "a b, b c -> a c, d"), ("pack", "b * d *"), ("pack", "b (c) *"), ("shape", "b -> c")],
)
def test_other_start_rules_reject(start, text):
    with pytest.raises(parsing.LARK_ERRORS):
        parsing.get_parser(start).parse(text)


# --------------------------------------------------------------------------- laziness, caching


def test_import_builds_no_parser():
    code = textwrap.dedent(
        """
        import sys
        import rearrange
        import rearrange.parsing as parsing
        assert "lark" not in sys.modules, "import rearrange imported lark"
        assert parsing._PARSERS == {}
        parsing.parse_transform("b h -> h b")      # valid transform patterns need no lark
        assert "lark" not in sys.modules and parsing._PARSERS == {}
        try:
            parsing.parse_transform("b h -> (h b")
        except rearrange.PatternError:
            pass
        assert set(parsing._PARSERS) == {"transform"}
        parsing.parse_pack("b * d")
        assert set(parsing._PARSERS) == {"transform", "pack"}
        """
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_warm_call_is_a_cache_hit():
    text = "b h (t d) -> b t (h d)"
    first = parse_transform(text)
    before = parse_transform.cache_info()
    assert parse_transform(text) is first
    assert parse_transform(text, "rearrange") is first
    after = parse_transform.cache_info()
    assert (after.hits - before.hits, after.misses - before.misses) == (2, 0)
    assert after.maxsize is not None  # bounded


def test_grammar_found_in_checkout_and_package(monkeypatch, tmp_path):
    checkout = REPO_ROOT / "grammar" / "pattern.lark"
    assert parsing._grammar_text() == checkout.read_text(encoding="utf-8")
    # An installed wheel holds rearrange/grammar/pattern.lark: that copy wins.
    (tmp_path / "grammar").mkdir()
    (tmp_path / "grammar" / "pattern.lark").write_text("// the packaged copy\n", encoding="utf-8")
    import importlib.resources

    monkeypatch.setattr(importlib.resources, "files", lambda package: tmp_path)
    assert parsing._grammar_text() == "// the packaged copy\n"


def test_wheel_layout_uses_the_packaged_grammar(tmp_path):
    # A wheel holds rearrange/grammar/pattern.lark and no top-level grammar/ beside it.
    package = tmp_path / "rearrange"
    shutil.copytree(pathlib.Path(rearrange.__file__).parent, package)
    if not (package / "grammar" / "pattern.lark").exists():
        shutil.copytree(REPO_ROOT / "grammar", package / "grammar")
    code = textwrap.dedent(
        """
        import rearrange.parsing as parsing
        assert parsing.__file__.startswith(%r), parsing.__file__
        pattern = parsing.parse_transform("b (h w) -> b h w")
        assert pattern.right.names == ("b", "h", "w")
        """
        % str(tmp_path)
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=tmp_path, env={"PYTHONPATH": str(tmp_path)})
