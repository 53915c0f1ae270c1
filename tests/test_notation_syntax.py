"""The notation's parse and solve stages (rearrange/notation.py), against einx's own solver.

Every operation beyond einops (concatenation, brackets, indexing, elementwise) reads its
pattern through these two functions; here they are tested alone: the tree a pattern
parses to, the error (and caret) a malformed one gets, and the axis lengths solved from
shapes — the latter against ``einx.solve`` (einx 0.4.3) on the same expressions.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rearrange.errors import ArgumentTypeError, PatternError
from rearrange.notation import (Brackets, Dots, Group, Leaf, Name, Number, Product, Sum,
                                dim_text, expand, is_notation, leaves, parse_notation, solve)

einx = pytest.importorskip("einx")


def test_expressions_terms_and_spans():
    pattern = parse_notation("b [h w] c, b p [2] -> b p c")
    assert len(pattern.inputs) == 2 and len(pattern.outputs) == 1
    first = pattern.inputs[0]
    assert [type(t) for t in first.terms] == [Name, Brackets, Name]
    bracket = first.terms[1]
    assert pattern.text[bracket.start:bracket.end] == "[h w]"
    assert [t.name for t in bracket.terms] == ["h", "w"]
    assert type(pattern.inputs[1].terms[2].terms[0]) is Number


def test_concatenation_and_nesting():
    pattern = parse_notation("a ((b c) + d + 1)")
    group = pattern.inputs[0].terms[1]
    assert type(group) is Group and group.is_concatenation and len(group.parts) == 3
    assert type(group.parts[0][0]) is Group and not group.parts[0][0].is_concatenation
    assert pattern.outputs is None


def test_brackets_hold_groups_and_sit_in_them():
    outer = parse_notation("[(h w)] (c [2])").inputs[0].terms
    assert type(outer[0]) is Brackets and type(outer[0].terms[0]) is Group
    assert type(outer[1]) is Group and type(outer[1].parts[0][1]) is Brackets


def test_other_start_rules_do_not_see_the_notations_terminals():
    """lark keeps a start rule's unreachable rules (and so their terminals, which change
    the errors of the other kinds of pattern) when they refer to each other."""
    from rearrange.parsing import get_parser
    for start in ("transform", "pack", "shape", "einsum"):
        names = {terminal.name for terminal in get_parser(start).terminals}
        assert not names & {"PLUS", "LBRACK", "RBRACK"}, start


def test_empty_expressions_are_scalars():
    pattern = parse_notation("a b, -> a")
    assert pattern.inputs[1].terms == () and pattern.outputs[0].terms[0].name == "a"


@pytest.mark.parametrize("text, message, pointed", [
    ("a + b", "'+' joins the parts of a concatenation", "+"),
    ("a (b", "'(' is not closed", "("),
    ("a [b c", "'[' is not closed", "["),
    ("a b]", "']' has no matching opening", "]"),
    ("a -> b -> c", "at most once", "->"),
    ("a ... ...", "at most once in an expression", "..."),
    ("a_ b", "must not start or end with '_'", "a_"),
    ("(a ... + b)", "cannot be part of a concatenation", "(a ... + b)"),
    ("a $", "unexpected character '$'", "$"),
    ("(a (b (c d)))", "groups nest one level deep", "("),
    ("[a [b]]", "brackets do not nest", "["),
    ("a " + "9" * 19, "at most 18 digits", "9" * 19),
])
def test_errors_point_at_the_text(text, message, pointed):
    with pytest.raises(PatternError) as caught:
        parse_notation(text)
    lines = str(caught.value).splitlines()
    assert message in lines[0]
    assert lines[1] == "  " + text
    start = lines[2].index("^") - 2
    assert text[start:start + len(pointed)] == pointed
    assert lines[2].count("^") == len(pointed) or len(pointed) == 1


def test_a_pattern_that_is_not_a_string():
    with pytest.raises(ArgumentTypeError, match="pattern must be a str"):
        parse_notation(3)


def test_is_notation():
    assert is_notation("a, b") and is_notation("(a + b)") and is_notation("a [b]")
    assert not is_notation("a b -> b a") and not is_notation(("a, b",))


def test_expand_dots_and_brackets():
    pattern = parse_notation("b ... [c]")
    dims = expand(pattern.inputs[0], pattern.text, rank=4)
    assert [leaf.name for leaf in leaves(dims)] == ["b", "...0", "...1", "c"]
    assert [leaf.marked for leaf in leaves(dims)] == [False, False, False, True]
    with pytest.raises(PatternError, match="2 axes besides '...'; the array has 1"):
        expand(pattern.inputs[0], pattern.text, rank=1)


def test_expand_marks_and_kinds():
    pattern = parse_notation("(h [2]) (c1 + c2)")
    product, concatenation = expand(pattern.inputs[0], pattern.text, rank=2)
    assert type(product) is Product and [c.marked for c in product.children] == [False, True]
    assert type(concatenation) is Sum and dim_text(concatenation) == "(c1 + c2)"
    assert type(product.children[1]) is Leaf and product.children[1].length == 2


# Expressions with the lengths they can be solved from: solved here and by einx.solve
# (named axes only: einx 0.4.3's solve fails on a number inside a group, "(c + 2)").
SOLVABLE = [
    ("a b (c1 + c2)", {"c1"}),
    ("a (b c)", {"b"}),
    ("(a b) (c + d)", {"a", "d"}),
    ("a (b [f]) (c + d + e)", {"f", "d", "e"}),
    ("((a b) + c) d", {"a", "c"}),
    ("a (b + c)", {"c"}),
]


@pytest.mark.parametrize("text, known", SOLVABLE)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_solve_agrees_with_einx(text, known, data):
    pattern = parse_notation(text)
    dims = expand(pattern.inputs[0], text, rank=len(pattern.inputs[0].terms))
    names = sorted({leaf.name for leaf in leaves(dims) if leaf.name is not None})
    lengths = {name: data.draw(st.integers(1, 5), label=name) for name in names}
    shape = tuple(_length(dim, lengths) for dim in dims)
    given_lengths = {name: lengths[name] for name in known}
    ours = solve([dims], [shape], text, given_lengths)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = einx.solve(text, np.zeros(shape), **given_lengths)
    assert {name: ours[name] for name in names} == {name: int(theirs[name]) for name in names}


def _length(dim, lengths):
    if type(dim) is Leaf:
        return dim.length if dim.name is None else lengths[dim.name]
    if type(dim) is Product:
        return int(np.prod([_length(c, lengths) for c in dim.children]))
    return sum(_length(p, lengths) for p in dim.parts)


def test_solve_across_expressions():
    pattern = parse_notation("a b, b (c + d) -> a (b c)")
    first = expand(pattern.inputs[0], pattern.text, rank=2)
    second = expand(pattern.inputs[1], pattern.text, rank=2)
    assert solve([first, second], [(2, 3), (3, 7)], pattern.text, {"c": 4}) == {
        "c": 4, "a": 2, "b": 3, "d": 3}


@pytest.mark.parametrize("text, shapes, given_lengths, message, pointed", [
    ("a b, b", [(2, 3), (4,)], {}, "axis 'b' has length 4 here and 3 elsewhere", "b"),
    ("a (b c)", [(2, 7)], {"b": 2}, "7 is not a multiple of 2", "(b c)"),
    ("(a + 5)", [(3,)], {}, "shorter than the known parts", "(a + 5)"),
    ("(a + b)", [(7,)], {"a": 3, "b": 3}, "its parts give 6", "(a + b)"),
])
def test_solve_errors(text, shapes, given_lengths, message, pointed):
    pattern = parse_notation(text)
    dims = [expand(e, text, rank=len(s)) for e, s in zip(pattern.inputs, shapes)]
    with pytest.raises(PatternError) as caught:
        solve(dims, shapes, text, given_lengths)
    lines = str(caught.value).splitlines()
    assert message in lines[0]
    start = lines[2].index("^") - 2
    assert text[start:start + len(pointed)] == pointed


def test_the_grammar_file_defines_the_notation():
    from rearrange.parsing import _grammar_text
    grammar = _grammar_text()
    assert "notation:" in grammar and 'PLUS: "+"' in grammar
