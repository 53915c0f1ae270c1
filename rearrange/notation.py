"""einx's notation, parsed and solved: the parse stage of the operations beyond einops.

A notation pattern is one or more expressions separated by commas (one per input), and
optionally ``->`` and one or more output expressions::

    "a b c1, a b c2 -> a b (c1 + c2)"      concatenation (rearrange of a list)
    "a b (c1 + c2) -> a b c1, a b c2"      split (rearrange to a tuple)
    "a a -> a"                             a diagonal (a name twice in one input)
    "a [b] c"                              brackets: the axes an operation acts on
    "b (h [2]) (w [2]) c"                  brackets inside a composition
    "b [h w] c, b p [2] -> b p c"          indexing (get_at)
    "a b c, c"                             elementwise by axis name (add, ...)

Terms are axis names, numbers (an axis of that length; ``1`` a unit axis), ``...`` (the
same run of axes wherever it stands: as in einops, a separate term, never einx's postfix
``b...``), groups ``( )`` — a composition of their terms, or a concatenation of several
compositions joined by ``+`` — and brackets ``[ ]``, which mark every axis inside them.
Groups nest one level, brackets hold groups or sit inside them. The syntax is
grammar/pattern.lark's ``notation`` rule; lark parses it.

Two stages live here, both pure:

* :func:`parse_notation` — text to :class:`NotationPattern` (frozen nodes that keep their
  character spans, so errors point at the text), with the checks every operation shares:
  valid names, at most one ``...`` per expression.
* :func:`expand` and :func:`solve` — an expression for an array of a given rank as a
  tuple of :class:`Dim` trees (``...`` replaced by the axes it stands for), and the length
  of every axis from the inputs' shapes and the caller's lengths, or a
  :class:`PatternError` naming the axis that does not fit.

What an operation makes of the expressions (which axes it indexes, reduces, broadcasts or
concatenates) is the operation's own planner; this module knows no operation.
"""

from __future__ import annotations

import math
from typing import Any, Iterator, Mapping, Sequence

from .errors import ArgumentTypeError, PatternError
from .parsing import (get_parser, invalid_name_reason, parse_cached, pattern_error,
                      register_kind)
from . import parsing
from .records import record

__all__ = [
    "Name", "Number", "Dots", "Group", "Brackets", "Expression", "NotationPattern",
    "Leaf", "Product", "Sum", "Dim", "parse_notation", "is_notation", "expand", "solve",
    "leaves", "length_of", "dim_text", "walk",
]


# --------------------------------------------------------------------------- the AST
# Every node carries its span: text[start:end] is the node's text.


@record
class Name:
    """An axis name."""

    name: str
    start: int
    end: int


@record
class Number:
    """An axis of a given length (``1``: a unit axis)."""

    value: int
    start: int
    end: int


@record
class Dots:
    """``...``: the same run of axes in every expression that holds it."""

    start: int
    end: int


@record
class Group:
    """``( ... )``: one axis. ``parts`` holds one composition (a tuple of terms) or, for
    a concatenation ``(a + b c)``, several: the axis is their parts end to end."""

    parts: tuple[tuple["Term", ...], ...]
    start: int
    end: int

    @property
    def is_concatenation(self) -> bool:
        return len(self.parts) > 1


@record
class Brackets:
    """``[ ... ]``: its terms are axes of this expression, marked for the operation."""

    terms: tuple["Term", ...]
    start: int
    end: int


Term = Name | Number | Dots | Group | Brackets


@record
class Expression:
    """One input or output: a row of terms. An empty expression is a scalar."""

    terms: tuple[Term, ...]
    start: int
    end: int


@record
class NotationPattern:
    """A parsed notation pattern: its inputs, and its outputs (None without ``->``)."""

    text: str
    inputs: tuple[Expression, ...]
    outputs: tuple[Expression, ...] | None

    def __hash__(self) -> int:
        return hash(self.text)   # the text decides the rest

    @property
    def expressions(self) -> tuple[Expression, ...]:
        return self.inputs + (self.outputs or ())


# --------------------------------------------------------------------------- parsing

_TERMINAL_NAMES = {
    "NAME": "an axis name", "INT": "a number", "ELLIPSIS": "'...'", "LPAR": "'('",
    "RPAR": "')'", "LBRACK": "'['", "RBRACK": "']'", "PLUS": "'+'", "COMMA": "','",
    "ARROW": "'->'", "$END": "the end of the pattern",
}


def _one_of(terminals: Any) -> str:
    names = [name for terminal, name in _TERMINAL_NAMES.items() if terminal in terminals]
    if not names:
        return "nothing more"
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def _syntax_error(error: Any, text: str) -> PatternError:
    """lark's UnexpectedCharacters / UnexpectedToken as a message about the notation."""
    token = getattr(error, "token", None)
    if token is None:
        position = error.pos_in_stream
        return pattern_error(f"unexpected character {text[position]!r}; expected "
                             f"{_one_of(error.allowed)}", text, position)
    expected = error.expected
    position = len(text) if token.type == "$END" else token.start_pos
    if token.type == "$END":
        found = "the end of the pattern"
    elif token.type == "NAME":
        found = f"axis name {token.value!r}"
    elif token.type == "INT":
        found = f"number {token.value}"
    else:
        found = repr(token.value)
    if token.type in ("ARROW",) and "ARROW" not in expected:
        if "RPAR" in expected or "RBRACK" in expected:
            opening = max(text.rfind("(", 0, position), text.rfind("[", 0, position))
            return pattern_error(f"{text[opening]!r} is not closed before '->'", text, opening)
        return pattern_error("pattern must contain '->' at most once; found a second '->'",
                             text, position, token.end_pos)
    if token.type == "$END" and ("RPAR" in expected or "RBRACK" in expected):
        opening = max(text.rfind("(", 0, position), text.rfind("[", 0, position))
        return pattern_error(f"unbalanced brackets: {text[opening]!r} is not closed",
                             text, opening)
    if token.type in ("RPAR", "RBRACK") and token.type not in expected:
        return pattern_error(f"unbalanced brackets: {token.value!r} has no matching opening",
                             text, position)
    if token.type == "LPAR" and "LPAR" not in expected:
        return pattern_error("groups nest one level deep: '(a (b c))' but not "
                             "'(a (b (c d)))', and no group in a bracket in a group",
                             text, position)
    if token.type == "LBRACK" and "LBRACK" not in expected:
        return pattern_error("brackets do not nest: '[' inside '[ ]' (or a bracket in a "
                             "group in a bracket)", text, position)
    if token.type == "PLUS":
        return pattern_error("'+' joins the parts of a concatenation inside '( )', e.g. "
                             "'(c1 + c2)'", text, position, token.end_pos)
    return pattern_error(f"unexpected {found}; expected {_one_of(expected)}", text, position,
                         None if token.type == "$END" else token.end_pos)


def parse_notation(text: str) -> NotationPattern:
    """``text`` parsed and checked (valid names, at most one ``...`` per expression), from
    the one parse cache. Raises PatternError pointing at the text."""
    if not isinstance(text, str):
        raise ArgumentTypeError(
            f"pattern must be a str, got {type(text).__name__} {text!r}")
    return parse_cached("notation", text, None)


def _build(text: str, op: Any = None) -> NotationPattern:
    parser = get_parser("notation")
    try:
        tree = parser.parse(text)
    except parsing.LARK_ERRORS as error:
        raise _syntax_error(error, text) from None
    inputs: list[Expression] = []
    outputs: list[Expression] = []
    target = inputs
    arrow_at = None
    for child in tree.children:
        if hasattr(child, "children"):
            target.append(_expression(child, text, arrow_at if target is outputs else None))
        elif child.type == "ARROW":
            target, arrow_at = outputs, child.end_pos
    pattern = NotationPattern(text, tuple(inputs), tuple(outputs) if arrow_at is not None
                              else None)
    for expression in pattern.expressions:
        _check_expression(expression, text)
    return pattern


def _expression(tree: Any, text: str, empty_at: int | None) -> Expression:
    terms = tuple(_term(node, text) for node in tree.children)
    if terms:
        return Expression(terms, terms[0].start, terms[-1].end)
    # an empty expression spans nothing where it stands: after the arrow or a comma
    at = empty_at if empty_at is not None else 0
    return Expression((), at, at)


def _term(node: Any, text: str) -> Term:
    if not hasattr(node, "children"):
        start, end = node.start_pos, node.end_pos
        if node.type == "NAME":
            return Name(node.value, start, end)
        if node.type == "ELLIPSIS":
            return Dots(start, end)
        if len(node.value) > 18:
            raise pattern_error(f"anonymous axis of {len(node.value)} digits; expected an "
                                "axis length of at most 18 digits", text, start, end)
        return Number(int(node.value), start, end)
    opening, closing = node.children[0], node.children[-1]
    inner = [child for child in node.children[1:-1]
             if hasattr(child, "children") or child.type != "PLUS"]
    if node.data in ("nbracket", "nsubbracket"):    # its terms, one node each
        return Brackets(tuple(_term(n, text) for n in inner), opening.start_pos,
                        closing.end_pos)
    # ncomp / nsub: parts (npart / nsubpart trees) joined by '+'
    parts = tuple(tuple(_term(n, text) for n in part.children) for part in inner)
    return Group(parts, opening.start_pos, closing.end_pos)


def walk(terms: Sequence[Term]) -> Iterator[Term]:
    """Every term of ``terms``, depth first: each group and bracket, then its terms."""
    for term in terms:
        yield term
        if type(term) is Group:
            for part in term.parts:
                yield from walk(part)
        elif type(term) is Brackets:
            yield from walk(term.terms)


def _check_expression(expression: Expression, text: str) -> None:
    dots = None
    for term in walk(expression.terms):
        if type(term) is Name:
            reason = invalid_name_reason(term.name)
            if reason is not None:
                raise pattern_error(f"invalid axis name {term.name!r}: {reason}", text,
                                    term.start, term.end)
        elif type(term) is Dots:
            if dots is not None:
                raise pattern_error("'...' may appear at most once in an expression",
                                    text, term.start, term.end)
            dots = term
        elif type(term) is Group:
            if term.is_concatenation and any(type(t) is Dots for part in term.parts
                                             for t in walk(part)):
                raise pattern_error("'...' cannot be part of a concatenation", text,
                                    term.start, term.end)


register_kind("notation", _build)


def is_notation(text: Any) -> bool:
    """Does ``text`` need the notation (a comma, ``+`` or a bracket), rather than an
    einops transform pattern? (A name twice on a side, a diagonal, is found when the
    transform parser refuses it.)"""
    return type(text) is str and ("," in text or "+" in text or "[" in text)


# --------------------------------------------------------------------------- expansion


@record
class Leaf:
    """An elementary axis: a name (``...`` stands for names ``'...0'``, ``'...1'``, ...)
    or, for a number, ``name`` None and ``length`` the number. ``marked``: inside
    brackets. ``term`` is the node it comes from (for errors)."""

    name: str | None
    length: int | None
    marked: bool
    term: Term


@record
class Product:
    """A composition: its length is the product of its children's."""

    children: tuple["Dim", ...]
    marked: bool
    term: Term


@record
class Sum:
    """A concatenation: its length is the sum of its parts' (each a Product)."""

    parts: tuple["Dim", ...]
    marked: bool
    term: Term


Dim = Leaf | Product | Sum


def _ellipsis_rank(expression: Expression, rank: int, text: str) -> int | None:
    """How many axes ``...`` stands for in ``expression`` of an array of ``rank``; None
    without ``...``. Only top-level terms (bracketed or not) count as axes."""
    def top(terms: Sequence[Term]) -> Iterator[Term]:
        for term in terms:
            if type(term) is Brackets:
                yield from top(term.terms)
            else:
                yield term
    terms = list(top(expression.terms))
    has_dots = any(type(t) is Dots for t in terms)
    fixed = len(terms) - has_dots
    if has_dots:
        if rank < fixed:
            raise pattern_error(f"expression has {fixed} axes besides '...'; the array has "
                                f"{rank}", text, expression.start, expression.end)
        return rank - fixed
    # ("(...)" in a group: the run is one axis here; how many axes it is comes from
    # another expression, through expand's ``dots``)
    if rank != fixed:
        raise pattern_error(f"expression has {fixed} axes; the array has {rank}", text,
                            expression.start, expression.end)
    return None


def expand(expression: Expression, text: str, rank: int | None = None,
           dots: int | None = None) -> tuple[Dim, ...]:
    """The expression's axes as Dim trees: for an array of ``rank`` axes (an input), or
    with ``...`` standing for ``dots`` axes (an output, once an input has said how many).
    Raises PatternError when the rank does not fit."""
    if rank is not None:
        counted = _ellipsis_rank(expression, rank, text)
        dots = counted if counted is not None else dots
    result: list[Dim] = []
    for term in expression.terms:
        result.extend(_dims(term, False, dots, text))
    return tuple(result)


def _dims(term: Term, marked: bool, dots: int | None, text: str) -> list[Dim]:
    kind = type(term)
    if kind is Name:
        return [Leaf(term.name, None, marked, term)]
    if kind is Number:
        return [Leaf(None, term.value, marked, term)]
    if kind is Dots:
        if dots is None:
            raise pattern_error("'...' here stands for axes that no input shows", text,
                                term.start, term.end)
        return [Leaf(f"...{k}", None, marked, term) for k in range(dots)]
    if kind is Brackets:
        return [d for t in term.terms for d in _dims(t, True, dots, text)]
    # a group: one axis
    parts = []
    for part in term.parts:
        children = tuple(d for t in part for d in _dims(t, marked, dots, text))
        parts.append(Product(children, marked or all(c.marked for c in children) and
                             bool(children), term))
    if len(parts) == 1:
        return [parts[0]]
    return [Sum(tuple(parts), marked or all(p.marked for p in parts), term)]


def leaves(dims: Sequence[Dim]) -> Iterator[Leaf]:
    """Every elementary axis of ``dims``, in order."""
    for dim in dims:
        if type(dim) is Leaf:
            yield dim
        elif type(dim) is Product:
            yield from leaves(dim.children)
        else:
            yield from leaves(dim.parts)


def length_of(dim: Dim, lengths: Mapping[str, int]) -> int:
    """The length of ``dim`` once every named axis in it has a length."""
    if type(dim) is Leaf:
        return dim.length if dim.name is None else lengths[dim.name]
    if type(dim) is Product:
        return math.prod(length_of(c, lengths) for c in dim.children)
    return sum(length_of(p, lengths) for p in dim.parts)


def dim_text(dim: Dim) -> str:
    """``dim`` written back in the notation (``...`` axes by their names)."""
    if type(dim) is Leaf:
        text = str(dim.length) if dim.name is None else dim.name
    elif type(dim) is Product:
        text = "(" + " ".join(dim_text(c) for c in dim.children) + ")"
    else:
        text = "(" + " + ".join(dim_text(p)[1:-1] if type(p) is Product else dim_text(p)
                                for p in dim.parts) + ")"
    return text


def solve(dims: Sequence[tuple[Dim, ...]], shapes: Sequence[Sequence[int]], text: str,
          given: Mapping[str, int] | None = None) -> dict[str, int]:
    """The length of every named axis: ``dims[k]`` describes an array of ``shapes[k]``
    (same rank: :func:`expand` checked it), ``given`` the caller's lengths. Each axis of
    a shape is an equation — a composition's length is the product of its children's, a
    concatenation's the sum of its parts' — solved for one unknown at a time until none
    is left. Raises PatternError naming the axis whose lengths disagree, or that no
    equation determines."""
    lengths: dict[str, int] = {}
    for name, value in (given or {}).items():
        lengths[name] = value
    equations = [(dim, length) for row, shape in zip(dims, shapes)
                 for dim, length in zip(row, shape)]
    pending = list(equations)
    while pending:
        progress = False
        left = []
        for dim, length in pending:
            if _settle(dim, length, lengths, text):
                progress = True
            else:
                left.append((dim, length))
        pending = left
        if not progress:
            break
    for dim, length in equations:
        if _known(dim, lengths) and length_of(dim, lengths) != length:
            raise pattern_error(_mismatch(dim, length, lengths), text, dim.term.start,
                                dim.term.end)
    return lengths


def _known(dim: Dim, lengths: Mapping[str, int]) -> bool:
    return all(leaf.name is None or leaf.name in lengths for leaf in leaves((dim,)))


def _mismatch(dim: Dim, length: int, lengths: Mapping[str, int]) -> str:
    if type(dim) is Leaf and dim.name is not None:
        return f"axis {dim.name!r} has length {length} here and {lengths[dim.name]} elsewhere"
    return (f"axis {dim_text(dim)} has length {length}; its parts give "
            f"{length_of(dim, lengths)}")


def _settle(dim: Dim, length: int, lengths: dict[str, int], text: str) -> bool:
    """Solve ``dim`` == ``length`` for its one unknown, if it has exactly one (True:
    nothing left to learn from this equation)."""
    unknown = [leaf for leaf in leaves((dim,)) if leaf.name is not None
               and leaf.name not in lengths]
    names = {leaf.name for leaf in unknown}
    if not names:
        return True
    if len(names) > 1 or len(unknown) > 1:
        return False
    leaf = unknown[0]
    value = _invert(dim, leaf, length, lengths, text)
    if value is None:
        return False
    lengths[leaf.name] = value    # type: ignore[index]
    return True


def _invert(dim: Dim, leaf: Leaf, length: int, lengths: Mapping[str, int],
            text: str) -> int | None:
    """The length ``leaf`` must have for ``dim`` to be ``length`` (every other axis in
    ``dim`` known)."""
    if dim is leaf:
        return length
    if type(dim) is Product:
        rest, inner = 1, None
        for child in dim.children:
            if any(l is leaf for l in leaves((child,))):
                inner = child
            else:
                rest *= length_of(child, lengths)
        if rest == 0 or length % rest:
            raise pattern_error(f"axis of length {length} cannot be split into "
                                f"{dim_text(dim)}: {length} is not a multiple of {rest}",
                                text, dim.term.start, dim.term.end)
        return _invert(inner, leaf, length // rest, lengths, text)   # type: ignore[arg-type]
    if type(dim) is Sum:
        rest, inner = 0, None
        for part in dim.parts:
            if any(l is leaf for l in leaves((part,))):
                inner = part
            else:
                rest += length_of(part, lengths)
        if length < rest:
            raise pattern_error(f"axis of length {length} is shorter than the known parts "
                                f"of {dim_text(dim)} ({rest})", text, dim.term.start,
                                dim.term.end)
        return _invert(inner, leaf, length - rest, lengths, text)    # type: ignore[arg-type]
    return None
