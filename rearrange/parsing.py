"""The parse stage: pattern text -> a frozen AST, plus every check that needs no shapes.

The syntax lives in ``grammar/pattern.lark`` (shipped in the wheel as
``rearrange/grammar/pattern.lark``); this module builds the AST from it and checks what
a pattern *means* for one operation: valid axis names, no duplicates, at most one
ellipsis per side, and which axes may appear on one side only (rearrange: none; reduce:
left-only axes are reduced; repeat: right-only axes are new). Every problem is a
:class:`~rearrange.errors.PatternError` whose message says what was found and what was
expected, with a caret line under the offending text:

>>> parse_transform("b h -> b (h w)")
Traceback (most recent call last):
  ...
rearrange.PatternError: axis 'w' appears only on the right side; rearrange needs every axis on both sides
  b h -> b (h w)
              ^

Lark is imported and its parser built only when a pattern needs it (any pack, shape or
einsum pattern, a transform pattern with a syntax error), never at ``import rearrange``;
every parsed pattern is kept in one bounded LRU cache (:func:`cache_info`), so a warm call
is one lookup.
"""

from __future__ import annotations

import functools
import pathlib
import re
from dataclasses import field
from typing import Any, Callable

from .errors import ArgumentTypeError, PatternError, RearrangeError
from .records import lazy_slots, record

__all__ = [
    "AxisName",
    "AnonymousAxis",
    "EllipsisAxis",
    "Member",
    "Group",
    "Side",
    "TransformPattern",
    "TRANSFORM_OPS",
    "parse_transform",
    "pattern_error",
    "shorten",
    "PackPattern",
    "ShapePattern",
    "SHAPE_OPS",
    "parse_pack",
    "parse_shape_pattern",
    "parse_cached",
    "cache_info",
    "cache_clear",
]

# The operations whose patterns are transforms ("lhs -> rhs").
TRANSFORM_OPS = ("rearrange", "reduce", "repeat")


# --------------------------------------------------------------------------- the AST
# Every node carries its span in the pattern text: text[start:end] is the node's text.


@record
class AxisName:
    """A named axis, e.g. ``h`` in ``"b (h w)"``."""

    name: str
    start: int
    end: int


@record
class AnonymousAxis:
    """An axis given by its length, a number > 1, e.g. the ``2`` in ``"(h 2)"``."""

    value: int
    start: int
    end: int


@record
class EllipsisAxis:
    """``...``: any number of axes (zero or more), the same ones on both sides."""

    start: int
    end: int


Member = AxisName | AnonymousAxis | EllipsisAxis


@record
class Group:
    """One axis of the tensor on this side: a bare term or a parenthesised composition.

    ``()``, ``(1)`` and a bare ``1`` are unit axes (``members == ()``); a ``1`` inside a
    composition is dropped, as einops does, so ``(h 1 w)`` has members ``(h, w)``.
    """

    members: tuple[Member, ...]
    bracketed: bool  # True for "( ... )"; False for a bare term such as `b`, `...`, `3`, `1`
    start: int
    end: int


@record
class Side:
    """One side of a transform. An empty side spans nothing at the arrow it touches."""

    groups: tuple[Group, ...]
    start: int
    end: int

    @property
    def names(self) -> tuple[str, ...]:
        """The axis names, in order of appearance (anonymous axes and ``...`` left out)."""
        return tuple(
            member.name
            for group in self.groups
            for member in group.members
            if type(member) is AxisName
        )

    @property
    def has_ellipsis(self) -> bool:
        return any(
            type(member) is EllipsisAxis for group in self.groups for member in group.members
        )


@record
class TransformPattern:
    """A checked ``lhs -> rhs`` pattern: valid for the op it was parsed for.

    The parser keeps the scanner's record of the sides (``scanned``: tuples of strs and
    ints, see :func:`_scan`) and builds ``left`` and ``right`` from it when one of them
    is first read: the commonest calls (plan a rearrange, check its names) never need
    the tree, and a cached pattern is then one object for the garbage collector instead
    of one per group and axis. Invariant: a pattern with a record has exactly the sides
    that :func:`_scan_transform` gives for its text, built or not, so it compares,
    prints and pickles as if they had been built at once.
    """

    text: str
    left: Side
    right: Side
    # The scanner's record of the sides (``Scanned``) and then its axis numbering
    # (``Named``'s last three: input groups, output groups, every axis name), kept only
    # for patterns of axis names alone and set only by the parser (never a constructor argument: a pattern made with
    # TransformPattern(...) or dataclasses.replace has its sides given; None then, and
    # for sides that hold a number or '...'): not part of the value, which the sides are.
    scanned: tuple | None = field(default=None, init=False, compare=False, repr=False)

    def __hash__(self) -> int:
        # The text decides the sides, so equal patterns have equal texts: hashing the
        # text alone keeps recipe cache keys cheap (no walk of the tree).
        return hash(self.text)



def _sides_from_record(pattern: TransformPattern, name: str) -> Side:
    """A side of a pattern the parser made from its scanner record (it leaves both
    unset): both built from the record, the one asked for returned."""
    if pattern.scanned is None:
        raise AttributeError(f"'TransformPattern' object has no attribute {name!r}")
    left, right = _sides(full_record(pattern))
    object.__setattr__(pattern, "left", left)
    object.__setattr__(pattern, "right", right)
    return left if name == "left" else right


lazy_slots(TransformPattern, _sides_from_record, "left", "right")


# --------------------------------------------------------------------------- errors


def pattern_error(message: str, text: str, start: int, end: int | None = None) -> PatternError:
    """A PatternError whose message is ``message`` plus the pattern with carets under
    ``text[start:end]`` (one caret at ``start`` when ``end`` is None or not past it)::

        axis 'w' appears only on the right side
          b h -> b (h w)
                      ^

    Only the line of a multi-line pattern that holds ``start`` is shown; whitespace shows
    as one space per character and wide characters count two columns, so the carets line
    up in a terminal.
    """
    return PatternError(f"{shorten(message, 4 * _QUOTED)}\n{_caret_lines(text, start, end)}")


# A message quotes at most this many characters of a pattern (a line of it under the
# carets: this many on each side of the caret region, the region itself at most twice
# this): a 100 KB pattern gives a message of a few KB, never one that holds it all.
_QUOTED = 100


def shorten(text: str, keep: int = _QUOTED) -> str:
    """``text`` (a pattern, or a message that quotes one) as messages show it: whole
    when short, else its first and last ``keep`` characters around `` … ``."""
    if len(text) <= 2 * keep + 3:
        return text
    return f"{text[:keep]} … {text[-keep:]}"


def _caret_lines(text: str, start: int, end: int | None) -> str:
    start = max(0, min(start, len(text)))
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", start)
    if line_end < 0:
        line_end = len(text)
    if end is None:
        end = start + 1
    end = min(max(end, start + 1), line_end)
    # The window of the line shown: all of a line up to 4 * _QUOTED characters, else the
    # caret region (its head when it is long) with up to _QUOTED characters either side;
    # " … " marks what is left out.
    low, high = line_start, line_end
    if line_end - line_start > 4 * _QUOTED:
        low = max(line_start, start - _QUOTED)
        high = min(line_end, min(end, start + 2 * _QUOTED) + _QUOTED)
    head = "… " if low > line_start else ""
    tail = " …" if high < line_end else ""
    shown = "".join(" " if char.isspace() else char for char in text[low:high])
    column = _display_width(head) + _display_width(text[low:start])
    width = max(1, _display_width(text[start : min(end, high)]))
    return f"  {head}{shown}{tail}\n  {' ' * column}{'^' * width}"


def _display_width(text: str) -> int:
    import unicodedata      # (error messages only: not at import)

    return sum(
        0 if unicodedata.combining(char) else 2 if unicodedata.east_asian_width(char) in "WF" else 1
        for char in text
    )


# What each grammar terminal is called in messages, in the order they are listed.
_TERMINAL_NAMES = {
    "NAME": "an axis name",
    "INT": "a number",
    "LPAR": "'('",
    "ELLIPSIS": "'...'",
    "RPAR": "')'",
    "ARROW": "'->'",
    "COMMA": "','",
    "STAR": "'*'",
    "$END": "the end of the pattern",
}


def _one_of(terminals: Any) -> str:
    names = [name for terminal, name in _TERMINAL_NAMES.items() if terminal in terminals]
    if not names:
        return "nothing more"
    if len(names) == 1:
        return names[0]
    return f"{', '.join(names[:-1])} or {names[-1]}"


def _found(token: Any) -> str:
    if token.type == "$END":
        return "the end of the pattern"
    if token.type == "NAME":
        return f"axis name {token.value!r}"
    if token.type == "INT":
        return f"number {token.value}"
    return repr(token.value)


def syntax_error(error: Exception, text: str) -> PatternError:
    """Map lark's UnexpectedCharacters / UnexpectedToken to a message about patterns."""
    token = getattr(error, "token", None)
    if token is None:  # UnexpectedCharacters: no terminal matches here
        position = error.pos_in_stream  # type: ignore[attr-defined]
        return pattern_error(
            f"unexpected character {text[position]!r}; expected {_one_of(error.allowed)}",  # type: ignore[attr-defined]
            text,
            position,
        )
    expected = error.expected  # type: ignore[attr-defined]
    # lark gives $END the position of the last token; the end is where it was found.
    position = len(text) if token.type == "$END" else token.start_pos
    if "RPAR" in expected:  # inside a group
        if token.type == "LPAR":
            return pattern_error(
                "nested parentheses: a group holds axes, '1' and '...', not another group",
                text,
                position,
            )
        if token.type in ("ARROW", "COMMA", "$END"):
            opening = text.rfind("(", 0, position)
            return pattern_error(
                f"unbalanced parentheses: '(' is not closed before {_found(token)}",
                text,
                opening,
            )
    elif token.type == "RPAR":
        return pattern_error("unbalanced parentheses: ')' has no matching '('", text, position)
    if token.type == "ARROW" and "ARROW" not in expected:
        return pattern_error(
            "pattern must contain '->' exactly once; found a second '->'", text, position,
            token.end_pos,
        )
    if token.type == "$END" and "ARROW" in expected:
        stripped = text.strip()
        first = text.find(stripped[0]) if stripped else len(text)
        return pattern_error(
            "pattern must contain '->' between the input and the output axes; found none",
            text,
            first,
            first + len(stripped),
        )
    return pattern_error(
        f"unexpected {_found(token)}; expected {_one_of(expected)}",
        text,
        position,
        None if token.type == "$END" else token.end_pos,
    )


# --------------------------------------------------------------------------- the parser
#
# Lark parses every pattern that has a syntax error, and every pattern of the pack, shape
# and einsum start rules: grammar/pattern.lark is the one definition of the syntax.
# Transform patterns ("lhs -> rhs", the commonest by far) first try `_scan_transform`, a
# hand-written scanner for the `transform` start rule that is a few times cheaper than
# lark's runtime. Its contract, which tests/test_parser_equivalence.py checks against
# `_transform_sides_lark` on every pattern of the einops corpus and of the tests and on
# fuzzed malformed text:
#
#     _scan_transform(text) is None          whenever _transform_sides_lark(text) raises,
#     _scan_transform(text) == _transform_sides_lark(text)   whenever it returns;
#
# so a pattern is parsed, and refused with the same error, whichever runs. The scanner
# says None for anything it does not fully vouch for (any syntax error, and the spacing
# and digit-count errors raised after a successful parse): lark then decides, and words
# the error. Valid patterns never import lark.

_PARSERS: dict[str, Any] = {}  # start rule -> lark.Lark; empty until lark is first needed
LARK_ERRORS: tuple[type[Exception], ...] = ()  # lark's UnexpectedInput, once lark is imported


def _grammar_text() -> str:
    """The grammar: the package copy (installed wheel) first, then the checkout's."""
    try:
        import importlib.resources  # here, not at import: it pulls in tempfile, shutil, ...

        packaged = importlib.resources.files(__package__).joinpath("grammar", "pattern.lark")
        if packaged.is_file():
            return packaged.read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):
        pass
    checkout = pathlib.Path(__file__).resolve().parent.parent / "grammar" / "pattern.lark"
    try:
        return checkout.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FileNotFoundError(
            "the pattern grammar is missing: looked for rearrange/grammar/pattern.lark in "
            f"the package and for {checkout} in a source checkout"
        ) from None


def get_parser(start: str) -> Any:
    """Lark's LALR parser for one start rule of the grammar, built on first use."""
    parser = _PARSERS.get(start)
    if parser is None:
        global LARK_ERRORS
        import lark  # deferred: `import rearrange` must not pay for lark

        # cache=True: lark stores the built LALR tables in the temp dir, keyed by the
        # grammar's hash, so later processes load them instead of rebuilding (~25 ms).
        parser = lark.Lark(_grammar_text(), parser="lalr", lexer="contextual", start=start,
                           cache=True)
        LARK_ERRORS = (lark.exceptions.UnexpectedInput,)
        _PARSERS[start] = parser
    return parser


def _parse_with_lark(text: str, start: str, special: Any = None) -> Any:
    """Lark's tree of ``text`` for the start rule ``start``; a syntax error is raised as
    ``special(error, text)`` or, when that gives None (or there is no ``special``), the
    general message."""
    parser = get_parser(start)
    try:
        return parser.parse(text)
    except LARK_ERRORS as error:
        raise ((special and special(error, text)) or syntax_error(error, text)) from None


# The scanner's tokens, as lark's lexer cuts them for the transform start rule: each
# match is (whitespace before the token, the token, a character no terminal matches).
# The alternatives and their order are the grammar's terminals in lark's lexer order
# (INT.2 before NAME, then the fixed strings); whitespace is common.WS, ignored; every
# state of the transform rule accepts NAME, INT and ELLIPSIS, so lark's contextual lexer
# cuts the text exactly as this one does. Matches are contiguous from the start of the
# text to its end, where the last match holds no token (``\Z``): no position is tried
# twice, so the scan is linear however much whitespace there is (the whitespace run is
# possessive: nothing backtracks into it).
_SCAN = re.compile(
    r"([ \t\f\r\n]*+)(?:(\d+(?!\w)|\w+|\.\.\.|->|\(|\))|([^ \t\f\r\n])|\Z)", re.DOTALL
).findall
_LPAR, _RPAR, _ARROW = 1, 2, 3
_PUNCTUATION = {"(": _LPAR, ")": _RPAR, "->": _ARROW}


def _scan_transform(text: str) -> tuple[Side, Side] | None:
    """The two sides of a transform pattern, or None: see the contract above."""
    scanned = _scan(text)
    return None if scanned is None else _sides(scanned[0])


# The scanner's record of a side: ``(values, layout)``. ``values``: the members' values in
# text order — an axis name (a str), "..." or a number (an int other than 1: a 1 is a
# unit, no member). ``layout``: one flat run of ints per group, ``count, bracketed (0/1),
# start, end``, then ``start, end`` of each of its ``count`` members. A record of both
# sides: ``(left values, left layout, right values, right layout, where the arrow starts,
# where it ends)``. Five tuples of strs and ints whatever the pattern's length: a cached
# pattern costs the garbage collector five objects to visit once, not three per axis.
Scanned = tuple[tuple[Any, ...], tuple[int, ...], tuple[Any, ...], tuple[int, ...], int, int]

# What the scanner gathers on the way for the commonest patterns, axis names alone
# (``None`` where some member of either side is a number or ``...``): the left side's
# names in text order, the right side's, and the pattern's axes numbered as its recipe
# numbers them (:func:`rearrange.recipe._named_recipe`) — the left names in order, then
# the right side's new ones — as ``(input groups, output groups, every axis name)``, a
# group a tuple of axis numbers (one-axis groups shared, ``_SINGLE``). The numbering is
# the recipe's only once the names pass :func:`_names_plainly_valid` (no name twice on
# a side); the recipe reads it only then.
Named = tuple[list[str], list[str], tuple[tuple[tuple[int, ...], ...],
                                          tuple[tuple[int, ...], ...], tuple[str, ...]]]

# (i,) for the first axes: a group of one axis, the commonest, shared by every pattern
_SINGLES = 64
_SINGLE = tuple((i,) for i in range(_SINGLES))
# ((0,), (1,), ... (n - 1,)) per n: the left groups of a side of n names alone, shared
_EACH_ALONE = tuple(_SINGLE[:n] for n in range(_SINGLES + 1))


def _groups_of_left(groups: list[tuple[int, ...]], names: int) -> tuple[tuple[int, ...], ...]:
    """The left side's groups as a tuple: the shared one where each of its ``names``
    names is a group of its own (as many groups as names, none empty: each holds one,
    numbered in order)."""
    if len(groups) == names and names <= _SINGLES and () not in groups:
        return _EACH_ALONE[names]
    return tuple(groups)


def _scan(text: str) -> tuple[Scanned, Named | None] | None:
    """The record of the two sides of a transform pattern (see ``Scanned``; :func:`_sides`
    makes them), or None where :func:`_scan_transform` says None. Then what the checks
    and the recipe of the commonest patterns need, gathered on the way (see ``Named``).

    The grammar, as this walks it: ``side ARROW side``; a side is a row of terms; a term
    is NAME, INT, ELLIPSIS or ``LPAR member* RPAR`` (members: NAME, INT, ELLIPSIS).
    """
    left: tuple[tuple[Any, ...], tuple[int, ...]] | None = None
    left_names: list[str] = []
    left_groups: tuple[tuple[int, ...], ...] = ()
    arrow_start = arrow_end = 0
    values: list[Any] = []               # this side's members' values, in text order
    layout: list[int] = []               # this side's groups, as ``Scanned`` says
    names: list[str] = []                # this side's axis names, in text order
    groups: list[tuple[int, ...]] = []   # this side's groups as axis numbers (while plain)
    members: list[int] = []              # the open group's axis numbers
    index_of: dict[str, int] = {}        # axis name -> its number (while plain)
    axes: list[str] = []                 # every axis name, numbered (while plain)
    plain = True                         # no number, no "..." so far
    opening = -1                         # where the open group's run starts; -1 outside "( )"
    position = 0                         # where the next match starts
    member_end = -1                      # where the previous member token ended
    for space, token, unknown in _SCAN(text):
        if not token:
            if unknown:
                return None
            break  # the end of the text
        start = position + len(space) if space else position
        position = end = start + len(token)
        kind = _PUNCTUATION.get(token)
        if kind is None:  # NAME, INT or ELLIPSIS
            if start == member_end:  # "a..." : the spacing error, lark's path raises it
                return None
            member_end = end
            if token == "...":
                value: Any = token
                plain = False
            elif token.isdecimal():  # \d is Unicode's Nd, as isdecimal: an INT token
                if len(token) > 18:  # the digit-count error, lark's path raises it
                    return None
                value = int(token)
                if value == 1:
                    value = None
                else:
                    plain = False
            else:
                value = token
                names.append(token)
                if plain:
                    index = index_of.get(token) if left is not None else None
                    if index is None:
                        index = index_of[token] = len(axes)
                        axes.append(token)
            if opening < 0:
                if value is None:
                    layout += (0, 0, start, end)
                    groups.append(())
                else:
                    values.append(value)
                    layout += (1, 0, start, end, start, end)
                    if plain:
                        groups.append(_SINGLE[index] if index < _SINGLES else (index,))
            elif value is not None:  # a 1 inside a group is dropped
                values.append(value)
                layout += (start, end)
                layout[opening] += 1
                if plain:
                    members.append(index)
        elif kind == _LPAR:
            if opening >= 0:
                return None
            opening = len(layout)
            layout += (0, 1, start, 0)
        elif kind == _RPAR:
            if opening < 0:
                return None
            layout[opening + 3] = end
            opening = -1
            if plain:
                if len(members) == 1 and members[0] < _SINGLES:
                    groups.append(_SINGLE[members[0]])
                else:
                    groups.append(tuple(members))
                members = []
        else:  # ARROW
            if opening >= 0 or left is not None:
                return None
            left, arrow_start, arrow_end = (tuple(values), tuple(layout)), start, end
            left_groups, groups = (_groups_of_left(groups, len(names)) if plain else ()), []
            left_names, values, layout, names = names, [], [], []
    if opening >= 0 or left is None:
        return None
    record = (*left, tuple(values), tuple(layout), arrow_start, arrow_end)
    if not plain:
        return record, None
    # (the left values are the left names here: every axis when none is new, shared)
    every_axis = left[0] if len(axes) == len(left[0]) else tuple(axes)
    return record, (left_names, names, (left_groups, tuple(groups), every_axis))


def _scan_names(text: str) -> Named | None:
    """What :func:`_scan` gathers for a pattern of ASCII axis names, parentheses, one
    arrow and spaces (``Named``), found by splitting the text rather than by the token
    regex; None for any other text (numbers, ``...``, other characters or whitespace,
    malformed groups, a word that is no axis name: one that starts or ends with ``_``),
    which the full scanner then reads. So every name it gives is a valid axis name, and
    where it gives a result :func:`_scan` gives the same, with the positions it leaves
    out (a pattern made from this keeps none: :func:`full_record` finds them when first
    needed).

    Why the same: in ASCII, a run of letters, digits and ``_`` that ``isidentifier``
    accepts is one ``\\w+`` token of the regex (not ``\\d+``: it does not start with a
    digit), and ``(``, ``)``, ``->`` are tokens wherever they stand; the text padded
    around those three and split at spaces leaves only them, runs of word characters and
    whatever else — anything else is refused here.
    """
    if not text.isascii():
        return None
    left_names: list[str] | None = None
    left_groups: tuple[tuple[int, ...], ...] = ()
    names: list[str] = []
    groups: list[tuple[int, ...]] = []
    members: list[int] | None = None     # the open group's axis numbers; None outside
    index_of: dict[str, int] = {}
    axes: list[str] = []
    for token in text.replace("(", " ( ").replace(")", " ) ").replace("->", " -> ").split(" "):
        if not token:
            continue
        if token.isidentifier():
            if token[0] == "_" or token[-1] == "_":
                return None   # not an axis name (invalid_name_reason): the full path says so
            names.append(token)
            index = index_of.get(token) if left_names is not None else None
            if index is None:
                index = index_of[token] = len(axes)
                axes.append(token)
            if members is None:
                groups.append(_SINGLE[index] if index < _SINGLES else (index,))
            else:
                members.append(index)
        elif token == "(":
            if members is not None:
                return None
            members = []
        elif token == ")":
            if members is None:
                return None
            groups.append(_SINGLE[members[0]] if len(members) == 1 and members[0] < _SINGLES
                          else tuple(members))
            members = None
        elif token == "->" and left_names is None and members is None:
            left_groups, groups = _groups_of_left(groups, len(names)), []
            left_names, names = names, []
        else:
            return None
    if left_names is None or members is not None:
        return None
    return left_names, names, (left_groups, tuple(groups), tuple(axes))


def full_record(pattern: TransformPattern) -> tuple:
    """The scanner's whole record of a pattern that keeps one (``scanned``), positions
    included: a pattern made from :func:`_scan_names` keeps its left names and the axis
    numbering alone until the rest is first needed (its sides, a recipe's spans and
    axes), then the full scan's record is kept."""
    scanned = pattern.scanned
    if scanned[1] is None:
        full = _scan(pattern.text)
        scanned = (*full[0], *full[1][2])
        _set_scanned(pattern, scanned)
    return scanned


def side_groups(values: tuple[Any, ...], layout: tuple[int, ...]):
    """Each group of a scanned side (see ``Scanned``) as ``(first, count, bracketed,
    start, end, at)``: its members are ``values[first:first + count]``, their spans
    ``layout[at:at + 2 * count]`` (start, end pairs)."""
    first = at = 0
    while at < len(layout):
        count = layout[at]
        yield first, count, layout[at + 1], layout[at + 2], layout[at + 3], at + 4
        first += count
        at += 4 + 2 * count


def _sides(scanned: Scanned) -> tuple[Side, Side]:
    """The two sides of a scanner's record (see ``Scanned``)."""
    left_values, left_layout, right_values, right_layout, arrow_start, arrow_end = scanned[:6]
    return (_side(_groups(left_values, left_layout), arrow_start),
            _side(_groups(right_values, right_layout), arrow_end))


def _groups(values: tuple[Any, ...], layout: tuple[int, ...]) -> tuple[Group, ...]:
    return tuple([Group(tuple([_member(values[first + k], layout[at + 2 * k],
                                       layout[at + 2 * k + 1]) for k in range(count)]),
                        bool(bracketed), start, end)
                  for first, count, bracketed, start, end, at in side_groups(values, layout)])


def _member(value: Any, start: int, end: int) -> Member:
    if type(value) is int:
        return AnonymousAxis(value, start, end)
    if value == "...":
        return EllipsisAxis(start, end)
    return AxisName(value, start, end)


def _transform_sides_lark(text: str) -> tuple[Side, Side]:
    """The two sides of a transform pattern as lark parses it (the reference the scanner
    must equal); raises PatternError for a syntax error, then for two terms with no space
    between them and for a number of more than 18 digits, in the order of the text."""
    tree = _parse_with_lark(text, "transform")
    left, arrow, right = tree.children
    previous: list[Any] = [None]  # the previous member token, for the spacing check
    return (_side_from_tree(left, text, arrow.start_pos, previous),
            _side_from_tree(right, text, arrow.end_pos, previous))


def _side_from_tree(tree: Any, text: str, empty_at: int, previous: list[Any]) -> Side:
    """A Side from lark's ``side`` tree; ``previous[0]`` is the member token before it."""
    groups = []
    for node in tree.children:
        if hasattr(node, "children"):  # group: LPAR member* RPAR
            tokens = node.children
            members = []
            for token in tokens[1:-1]:
                member = _member_from_token(token, text, previous)
                if member is not None:
                    members.append(member)
            groups.append(Group(tuple(members), True, tokens[0].start_pos, tokens[-1].end_pos))
        else:
            member = _member_from_token(node, text, previous)
            groups.append(Group(() if member is None else (member,), False,
                                node.start_pos, node.end_pos))
    return _side(tuple(groups), empty_at)


def _member_from_token(token: Any, text: str, previous: list[Any]) -> Member | None:
    """The AST node of one NAME / INT / ELLIPSIS token (None for the number 1), after the
    checks a parse leaves to the tree: a space between terms, at most 18 digits."""
    before, previous[0] = previous[0], token
    if before is not None and before.end_pos == token.start_pos:
        # "a..." lexes as `a` then `...`; einops reads one identifier "a…" and rejects it.
        # (Two word runs never touch: one would have swallowed the other.)
        raise pattern_error(
            f"expected a space between {before.value!r} and {token.value!r}",
            text, before.start_pos, token.end_pos,
        )
    return _token_member(token, text)


def _side(groups: tuple[Group, ...], empty_at: int) -> Side:
    if groups:
        return Side(groups, groups[0].start, groups[-1].end)
    return Side((), empty_at, empty_at)


# --------------------------------------------------------------------------- checks


def invalid_name_reason(name: str) -> str | None:
    """Why ``name`` is not an axis name in a transform (einops' rules), or None if it is."""
    if not name.isidentifier():
        if name[0].isdigit():
            return "expected a Python identifier, which does not start with a digit"
        return "expected a Python identifier"
    if name == "_":
        return "'_' skips an axis only in parse_shape patterns"
    if name[0] == "_" or name[-1] == "_":
        return "axis names must not start or end with '_'"
    return None


def _names_plainly_valid(left: list[str], right: list[str], op: str) -> bool:
    """:func:`_plainly_valid` for sides of axis names alone, given as their names in text
    order (the scanner gathers them)."""
    if not _names_agree(left, right, op):
        return False
    for name in (right if op == "repeat" else left):   # every name (see _names_agree)
        if not name.isidentifier() or name[0] == "_" or name[-1] == "_":
            return False  # invalid_name_reason(name) is not None
    return True


def _names_agree(left: list[str], right: list[str], op: str) -> bool:
    """The checks of :func:`_names_plainly_valid` but the names' own: none twice on a
    side, and each on the sides ``op`` needs it on (then every name is on the left side,
    or for repeat on the right)."""
    left_set, right_set = set(left), set(right)
    if len(left_set) != len(left) or len(right_set) != len(right):
        return False
    if op == "rearrange":
        return left_set == right_set
    if op == "reduce":
        return right_set <= left_set
    return left_set <= right_set  # repeat


def _plainly_valid(left: Side, right: Side, op: str) -> bool:
    """True only for patterns that pass every check below: axis names alone (no number,
    no '...'), each a valid name, none twice on a side, and on both sides wherever ``op``
    needs them there. False says nothing: the checks then run in text order, and raise
    the first problem (or pass). The commonest patterns are decided here in one pass."""
    names: list[list[str]] = [[], []]
    for side, found in ((left, names[0]), (right, names[1])):
        for group in side.groups:
            for member in group.members:
                if type(member) is not AxisName:
                    return False
                name = member.name
                if not name.isidentifier() or name[0] == "_" or name[-1] == "_":
                    return False  # invalid_name_reason(name) is not None
                found.append(name)
    return _names_agree(names[0], names[1], op)


def _check_side(side: Side, label: str, text: str) -> tuple[set[str], bool]:
    """Checks one side alone: names, lengths, duplicates, ellipsis count and place.
    Returns the side's names and whether it has an ellipsis."""
    seen: set[str] = set()
    ellipsis_seen = False
    for group in side.groups:
        for member in group.members:
            kind = type(member)
            if kind is AxisName:
                reason = invalid_name_reason(member.name)
                if reason is not None:
                    raise pattern_error(
                        f"invalid axis name {member.name!r}: {reason}", text, member.start, member.end
                    )
                if member.name in seen:
                    raise pattern_error(
                        f"axis {member.name!r} appears twice on the {label} side; "
                        "each axis may appear once per side",
                        text,
                        member.start,
                        member.end,
                    )
                seen.add(member.name)
            elif kind is AnonymousAxis:
                if member.value == 0:
                    raise pattern_error(
                        "anonymous axis of length 0; a number in a pattern is an axis length "
                        "and must be at least 1",
                        text,
                        member.start,
                        member.end,
                    )
            else:
                if ellipsis_seen:
                    raise pattern_error(
                        f"'...' appears twice on the {label} side; a side may hold one "
                        "ellipsis at most",
                        text,
                        member.start,
                        member.end,
                    )
                ellipsis_seen = True
                if label == "left" and group.bracketed:
                    raise pattern_error(
                        "'...' inside parentheses on the left side; it may be grouped only "
                        "on the right side",
                        text,
                        member.start,
                        member.end,
                    )
    return seen, ellipsis_seen


# Why an axis may not appear on one side only, per op and side (None: it may).
_ONE_SIDED_NAME = {
    ("rearrange", "left"): "rearrange needs every axis on both sides",
    ("rearrange", "right"): "rearrange needs every axis on both sides",
    ("reduce", "left"): None,  # reduced
    ("reduce", "right"): "reduce cannot create axes (repeat can)",
    ("repeat", "left"): "repeat cannot remove axes (reduce can)",
    ("repeat", "right"): None,  # a new axis; its length comes from axes_lengths
}

# The message for a number other than 1, per op and side (None: it may stand there).
_ANONYMOUS = {
    ("rearrange", "left"): "anonymous axis {} is not allowed in rearrange (only 1 is); "
    "name the axis and pass its length as a keyword",
    ("rearrange", "right"): "anonymous axis {} is not allowed in rearrange (only 1 is); "
    "name the axis and pass its length as a keyword",
    ("reduce", "left"): None,  # reduced
    ("reduce", "right"): "anonymous axis {} on the right side; reduce cannot create axes "
    "(repeat can)",
    ("repeat", "left"): "anonymous axis {} on the left side; repeat takes anonymous axes "
    "only on the right side, as new axes",
    ("repeat", "right"): None,  # a new axis of that length
}


def _check_sides_agree(
    left: Side,
    right: Side,
    names: dict[str, set[str]],
    ellipsis: dict[str, bool],
    op: str,
    text: str,
) -> None:
    """Checks each axis against the other side, in the order they appear in the text;
    ``names`` and ``ellipsis`` hold each side's names and whether it has '...'."""
    for label, other, side in (("left", "right", left), ("right", "left", right)):
        for group in side.groups:
            for member in group.members:
                kind = type(member)
                if kind is AxisName:
                    reason = _ONE_SIDED_NAME[op, label]
                    if reason is not None and member.name not in names[other]:
                        raise pattern_error(
                            f"axis {member.name!r} appears only on the {label} side; {reason}",
                            text,
                            member.start,
                            member.end,
                        )
                elif kind is AnonymousAxis:
                    message = _ANONYMOUS[op, label]
                    if message is not None:
                        raise pattern_error(
                            message.format(member.value),
                            text,
                            member.start,
                            member.end,
                        )
                elif not ellipsis[other]:
                    if label == "right":
                        reason = "the input needs '...' for the output to have it"
                    elif op == "rearrange":
                        reason = "rearrange needs it on both sides"
                    elif op == "repeat":
                        reason = "repeat cannot remove axes (reduce can)"
                    else:
                        continue  # reduce: the ellipsis axes are reduced
                    raise pattern_error(
                        f"'...' appears only on the {label} side; {reason}",
                        text,
                        member.start,
                        member.end,
                    )


# --------------------------------------------------------------------------- entry point


def parse_transform(text: str, op: str = "rearrange") -> TransformPattern:
    """Parse and check a transform pattern ``"lhs -> rhs"`` for ``op`` (one of
    ``"rearrange"``, ``"reduce"``, ``"repeat"``), raising PatternError for anything that
    is wrong without knowing shapes. Results are kept in the parse cache
    (:func:`cache_info`).

    >>> p = parse_transform("b (h w) -> b h w")
    >>> p.left.names, p.right.names, p.left.groups[1].bracketed
    (('b', 'h', 'w'), ('b', 'h', 'w'), True)
    """
    if not isinstance(text, str):
        raise ArgumentTypeError(f"a pattern must be a str, not {type(text).__name__}")
    return _parse_cached("transform", text, op)


def parse_transform_cached(text: str, op: str) -> TransformPattern:
    """:func:`parse_transform` for a ``text`` known to be a str (the parse cache's
    transform entries; its ``cache_info``/``cache_clear`` are the parse cache's)."""
    return _parse_cached("transform", text, op)


def _build_transform(text: str, op: str) -> TransformPattern:
    if op not in TRANSFORM_OPS:
        raise RearrangeError(f"op must be one of {', '.join(map(repr, TRANSFORM_OPS))}, not {op!r}")
    named = _scan_names(text)
    # (its names are valid axis names: it declines any other)
    if named is not None and _names_agree(named[0], named[1], op):
        # positions left out until first needed (full_record); the axis numbering kept
        left_names = tuple(named[0])
        every_axis = named[2][2]
        return _scanned_pattern(text, (left_names, None, None, None, None, None,
                                       *named[2][:2],
                                       # (every axis: the left names, unless some are new)
                                       left_names if len(every_axis) == len(left_names)
                                       else every_axis))
    scanned = _scan(text)
    if scanned is None:
        return _checked_transform(text, op, _transform_sides_lark(text))
    record, named = scanned
    if named is not None and _names_plainly_valid(named[0], named[1], op):
        # sides built when first read; the axis numbering kept for the recipe
        return _scanned_pattern(text, (*record, *named[2]))
    return _checked_transform(text, op, _sides(record))


_new_object = object.__new__
_set_text = TransformPattern.__dict__["text"].__set__      # the slots' member descriptors
_set_scanned = TransformPattern.__dict__["scanned"].__set__


def _scanned_pattern(text: str, scanned: tuple) -> TransformPattern:
    """The pattern ``text`` with the scanner's record ``scanned`` of its sides, which are
    built when first read (see :class:`TransformPattern`)."""
    pattern = _new_object(TransformPattern)
    _set_text(pattern, text)
    _set_scanned(pattern, scanned)
    return pattern


def _checked_transform(text: str, op: str, sides: tuple[Side, Side]) -> TransformPattern:
    """The pattern of these sides once every shape-free check for ``op`` has passed."""
    left, right = sides
    if _plainly_valid(left, right, op):
        return TransformPattern(text, left, right)
    left_names, left_ellipsis = _check_side(left, "left", text)
    right_names, right_ellipsis = _check_side(right, "right", text)
    _check_sides_agree(
        left,
        right,
        {"left": left_names, "right": right_names},
        {"left": left_ellipsis, "right": right_ellipsis},
        op,
        text,
    )
    return TransformPattern(text, left, right)


# --------------------------------------------------------------------------- one-tensor patterns
#
# Patterns of one tensor: ``"b * d"`` (pack, unpack) and ``"b _ (h w) c"`` (parse_shape,
# check_shape). Both are parsed by lark itself (their start rules ``pack`` and ``shape``)
# and cached, so a warm call is one lookup; syntax errors go through `syntax_error`,
# with clearer words first for what only these start rules meet.

SHAPE_OPS = ("parse_shape", "check_shape")
_MEMBER_TERMINALS = frozenset({"NAME", "INT", "ELLIPSIS"})


@record
class PackPattern:
    """A checked pack/unpack pattern such as ``"b * d"``: axis names around one ``*``.

    ``*`` stands for the dims that are packed: any number of them (zero included) in each
    unpacked tensor, exactly one dim in the packed tensor.
    """

    text: str
    before: tuple[AxisName, ...]  # the axes left of '*', in order
    after: tuple[AxisName, ...]   # the axes right of '*', in order
    star_start: int               # text[star_start:star_end] == "*"
    star_end: int

    @property
    def names(self) -> tuple[str, ...]:
        """The axis names, ``*`` left out."""
        return tuple(axis.name for axis in (*self.before, *self.after))


@record
class ShapePattern:
    """A checked shape pattern: one group per dim of one tensor (``...``: any number).

    ``_`` is an :class:`AxisName` named ``"_"``: a dim that is not read. For
    ``op="parse_shape"`` every group is a unit, a single name or a single number; for
    ``op="check_shape"`` groups may compose axes and a name may appear more than once.
    """

    text: str
    op: str   # "parse_shape" or "check_shape": the checks it passed
    side: Side

    @property
    def names(self) -> tuple[str, ...]:
        """The distinct axis names in order of first appearance, ``_`` left out."""
        return tuple(dict.fromkeys(name for name in self.side.names if name != "_"))


def parse_pack(text: str) -> PackPattern:
    """Parse and check a pack/unpack pattern: axis names and exactly one ``*``, each
    name a valid identifier that appears once. Results are cached
    (``parse_pack.cache_info()``).

    >>> p = parse_pack("b * d")
    >>> p.names, p.star_start
    (('b', 'd'), 2)
    """
    if not isinstance(text, str):
        raise ArgumentTypeError(f"a pattern must be a str, not {type(text).__name__}")
    return _parse_cached("pack", text, None)


def _build_pack(text: str) -> PackPattern:
    tree = _parse_with_lark(text, "pack", _pack_syntax_error)
    before: list[AxisName] = []
    after: list[AxisName] = []
    star = None
    seen: set[str] = set()
    previous = None
    for token in tree.children:
        if previous is not None and previous.end_pos == token.start_pos:
            # einops splits pack patterns at whitespace: "b*" would be one axis name.
            raise pattern_error(
                f"expected a space between {previous.value!r} and {token.value!r}",
                text, previous.start_pos, token.end_pos,
            )
        previous = token
        if token.type == "STAR":
            star = token
            continue
        name = token.value
        reason = invalid_name_reason(name)
        if reason is not None:
            raise pattern_error(
                f"invalid axis name {name!r}: {reason}", text, token.start_pos, token.end_pos
            )
        if name in seen:
            raise pattern_error(
                f"axis {name!r} appears twice; each axis may appear once in a pack pattern",
                text, token.start_pos, token.end_pos,
            )
        seen.add(name)
        (before if star is None else after).append(AxisName(name, token.start_pos, token.end_pos))
    assert star is not None  # the grammar requires it
    return PackPattern(text, tuple(before), tuple(after), star.start_pos, star.end_pos)


def _pack_syntax_error(error: Exception, text: str) -> PatternError | None:
    """Messages for the syntax errors only pack patterns meet; None: the general one."""
    token = getattr(error, "token", None)
    if token is not None:
        if token.type == "STAR":
            return pattern_error(
                "a pack pattern has exactly one '*'; found a second '*'",
                text, token.start_pos, token.end_pos,
            )
        if token.type == "$END" and "STAR" in error.expected:  # type: ignore[attr-defined]
            stripped = text.strip()
            first = text.find(stripped[0]) if stripped else len(text)
            return pattern_error(
                "a pack pattern needs one '*' where the packed axes go; found none",
                text, first, first + len(stripped),
            )
        return None
    position = error.pos_in_stream  # type: ignore[attr-defined]
    for found, why in (
        ("...", "'*' already stands for any number of axes"),
        ("->", "pack and unpack patterns describe one tensor"),
        ("(", "groups are not allowed"),
        (")", "groups are not allowed"),
    ):
        if text.startswith(found, position):
            return pattern_error(
                f"unexpected {found!r}: a pack pattern holds axis names and one '*'; {why}",
                text, position, position + len(found),
            )
    return None


def parse_shape_pattern(text: str, op: str = "parse_shape") -> ShapePattern:
    """Parse and check the pattern of ``parse_shape`` or ``check_shape`` (``op``).

    Both take names, ``_`` (a dim not read), numbers, units (``1``, ``()``) and at most
    one ``...`` outside parentheses. ``parse_shape`` reads one length per dim, as einops
    does: no compositions, no name twice. ``check_shape`` also takes compositions such as
    ``(h w)`` and repeated names (their lengths must agree). Results are cached.

    >>> p = parse_shape_pattern("b _ (h w) c", "check_shape")
    >>> p.names, p.side.groups[2].bracketed
    (('b', 'h', 'w', 'c'), True)
    """
    if not isinstance(text, str):
        raise ArgumentTypeError(f"a pattern must be a str, not {type(text).__name__}")
    return _parse_cached("shape", text, op)


def _build_shape_pattern(text: str, op: str) -> ShapePattern:
    if op not in SHAPE_OPS:
        raise RearrangeError(f"op must be one of {', '.join(map(repr, SHAPE_OPS))}, not {op!r}")
    tree = _parse_with_lark(text, "shape", _shape_syntax_error)
    previous = None
    for token in tree.scan_values(lambda value: hasattr(value, "type")):
        if (previous is not None and previous.end_pos == token.start_pos
                and previous.type in _MEMBER_TERMINALS and token.type in _MEMBER_TERMINALS):
            # "a..." lexes as `a` then `...`; einops reads one identifier "a…" and rejects it.
            raise pattern_error(
                f"expected a space between {previous.value!r} and {token.value!r}",
                text, previous.start_pos, token.end_pos,
            )
        previous = token
    groups = []
    for term in tree.children[0].children:
        if hasattr(term, "type"):  # a bare NAME, INT or ELLIPSIS
            member = _shape_member(term, text)
            groups.append(Group(() if member is None else (member,), False,
                                term.start_pos, term.end_pos))
        else:  # group: LPAR member* RPAR
            tokens = term.children
            members = tuple(m for m in map(lambda t: _shape_member(t, text), tokens[1:-1])
                            if m is not None)
            groups.append(Group(members, True, tokens[0].start_pos, tokens[-1].end_pos))
    side = _side(tuple(groups), 0)
    _check_shape_side(side, op, text)
    return ShapePattern(text, op, side)


def _token_member(token: Any, text: str) -> Member | None:
    """The AST node of one NAME / INT / ELLIPSIS token; None for the number 1 (a unit).
    A number of more than 18 digits is refused here (it also keeps int() below Python's
    digit limit); what else a number may be is each kind of pattern's own rule."""
    start, end = token.start_pos, token.end_pos
    if token.type == "NAME":
        return AxisName(token.value, start, end)
    if token.type == "ELLIPSIS":
        return EllipsisAxis(start, end)
    if len(token.value) > 18:
        raise pattern_error(
            f"anonymous axis of {len(token.value)} digits; expected an axis length of at most "
            "18 digits", text, start, end,
        )
    value = int(token.value)
    return None if value == 1 else AnonymousAxis(value, start, end)


def _shape_member(token: Any, text: str) -> Member | None:
    """:func:`_token_member`, with a shape pattern's rule: no number 0."""
    member = _token_member(token, text)
    if type(member) is AnonymousAxis and member.value == 0:
        raise pattern_error(
            "anonymous axis of length 0; a number in a pattern is an axis length and must be "
            "at least 1", text, member.start, member.end,
        )
    return member


def _check_shape_side(side: Side, op: str, text: str) -> None:
    seen: set[str] = set()
    ellipsis_seen = False
    for group in side.groups:
        if op == "parse_shape" and len(group.members) > 1:
            raise pattern_error(
                f"composition {text[group.start:group.end]} in parse_shape, which reads one "
                "length per dim; check_shape takes compositions (with their lengths)",
                text, group.start, group.end,
            )
        for member in group.members:
            kind = type(member)
            if kind is EllipsisAxis:
                if ellipsis_seen:
                    raise pattern_error(
                        "'...' appears twice; a shape pattern may hold one ellipsis at most",
                        text, member.start, member.end,
                    )
                ellipsis_seen = True
                if group.bracketed:
                    raise pattern_error(
                        "'...' inside parentheses; in a shape pattern it stands for whole dims",
                        text, member.start, member.end,
                    )
            elif kind is AxisName and member.name != "_":
                reason = invalid_name_reason(member.name)
                if reason is not None:
                    raise pattern_error(
                        f"invalid axis name {member.name!r}: {reason}",
                        text, member.start, member.end,
                    )
                if member.name in seen and op == "parse_shape":
                    raise pattern_error(
                        f"axis {member.name!r} appears twice; parse_shape reads each axis "
                        "from one dim (check_shape takes repeats and checks they agree)",
                        text, member.start, member.end,
                    )
                seen.add(member.name)


def _shape_syntax_error(error: Exception, text: str) -> PatternError | None:
    """Messages for the syntax errors only shape patterns meet; None: the general one."""
    if getattr(error, "token", None) is not None:
        return None
    position = error.pos_in_stream  # type: ignore[attr-defined]
    for found in ("->", ",", "*"):
        if text.startswith(found, position):
            return pattern_error(
                f"unexpected {found!r}: a shape pattern describes the dims of one tensor "
                "(names, '_', numbers, groups and '...')",
                text, position, position + len(found),
            )
    return None


# --------------------------------------------------------------------------- the parse cache
#
# One bounded LRU cache holds every parsed pattern, keyed by (kind, text, op): kind is a
# start rule of the grammar ("transform", "pack", "shape", "einsum"), op the operation
# whose checks the pattern passed (None where the kind has one set of checks). A pattern
# that fails to parse is not kept: its error is raised afresh on every call.

_PARSE_CACHE_SIZE = 4096

# kind -> build(text, op): the uncached parse. contraction.py adds "einsum" (the module
# that defines EinsumPattern) through register_kind when it is imported.
_BUILDERS: dict[str, Callable[[str, Any], Any]] = {
    "transform": _build_transform,
    "pack": lambda text, op: _build_pack(text),
    "shape": _build_shape_pattern,
}


def register_kind(kind: str, build: Callable[[str, Any], Any]) -> None:
    """Let ``parse_cached(kind, text, op)`` parse with ``build(text, op)``."""
    _BUILDERS[kind] = build


@functools.lru_cache(maxsize=_PARSE_CACHE_SIZE)
def _parse_cached(kind: str, text: str, op: Any) -> Any:
    return _BUILDERS[kind](text, op)


def parse_cached(kind: str, text: str, op: Any = None) -> Any:
    """The parsed and checked pattern ``text`` of ``kind`` for ``op``, from the one parse
    cache (``text`` must be a str: the public parse functions check that first)."""
    return _parse_cached(kind, text, op)


def cache_info() -> Any:
    """The parse cache's counts, for every kind of pattern: a named tuple ``(hits,
    misses, maxsize, currsize)``, as ``functools.lru_cache`` gives."""
    return _parse_cached.cache_info()


def cache_clear() -> None:
    """Empty the parse cache and zero its counts."""
    _parse_cached.cache_clear()


# The cache functions under the names they had when each kind had a cache of its own.
_function: Any
for _function in (parse_transform, parse_transform_cached, parse_pack, parse_shape_pattern):
    _function.cache_info = cache_info
    _function.cache_clear = cache_clear
del _function
