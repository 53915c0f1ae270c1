"""The transform scanner against lark: one grammar, two ways to run it, one result.

``parsing._scan_transform`` (hand-written, a few times cheaper) must equal
``parsing._transform_sides_lark`` (lark's LALR parser on grammar/pattern.lark) — the
contract stated above the scanner:

* it returns None exactly when lark's path raises (a syntax error, or the spacing and
  digit-count errors raised once lark has parsed), and
* otherwise the very sides lark's path builds, spans included;
* and where the split scanner for names alone (``parsing._scan_names``) answers, it
  answers as the full scanner does;

so that ``parse_transform`` (scanner first, lark when it says None) gives the same
pattern, or the same error class with the same message and carets, as lark alone, for
every op. Checked on every pattern of the einops corpus, every string literal of the
tests, and fuzzed text: random token sequences and mutations of corpus patterns.
"""

from __future__ import annotations

import ast
import json
import pathlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rearrange import parsing
from rearrange.errors import RearrangeError

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
TESTS = REPO_ROOT / "tests"
OPS = parsing.TRANSFORM_OPS


def corpus_patterns() -> list[str]:
    """Every pattern of the einops corpus, whatever its op (all of them go through both)."""
    lines = (TESTS / "data" / "einops_patterns.jsonl").read_text(encoding="utf-8").splitlines()
    return list(dict.fromkeys(json.loads(line)["pattern"] for line in lines))


def test_patterns() -> list[str]:
    """Every string literal of the tests (up to 300 characters): the patterns, good and
    bad, that the tests use, and much other text, which both paths must treat alike."""
    found: dict[str, None] = {}
    for path in sorted(TESTS.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value) <= 300:
                found[node.value] = None
    return list(found)


test_patterns.__test__ = False  # type: ignore[attr-defined]  # a helper, not a test

CORPUS = corpus_patterns()
TEST_PATTERNS = test_patterns()


def outcome(build, *args):
    """What a parse gives: the value, or the error's exact class and text."""
    try:
        return "value", build(*args)
    except RearrangeError as error:
        return "error", type(error), str(error)


def lark_transform(text: str, op: str):
    """parse_transform as lark alone would do it (no scanner, no cache)."""
    if op not in OPS:
        raise AssertionError(op)
    return parsing._checked_transform(text, op, parsing._transform_sides_lark(text))


def assert_equivalent(text: str) -> None:
    reference = outcome(parsing._transform_sides_lark, text)
    scanned = parsing._scan_transform(text)
    named = parsing._scan_names(text)
    if named is not None:   # the split scanner: what the full one gathers, or nothing
        full = parsing._scan(text)
        assert full is not None and full[1] == named, f"the two scanners differ on {text!r}"
    if reference[0] == "error":
        assert scanned is None, f"the scanner accepts {text!r}, lark's path refuses it: {reference}"
    else:
        assert scanned == reference[1], f"the scanner and lark differ on {text!r}"
    for op in OPS:
        assert outcome(parsing._build_transform, text, op) == outcome(lark_transform, text, op), (
            text, op)


def test_the_sources_hold_enough_patterns():
    assert len(CORPUS) > 1000
    assert sum("->" in text for text in TEST_PATTERNS) > 500


@pytest.mark.parametrize("start", range(0, len(CORPUS), 100))
def test_einops_corpus(start):
    for text in CORPUS[start:start + 100]:
        assert_equivalent(text)


@pytest.mark.parametrize("start", range(0, len(TEST_PATTERNS), 250))
def test_patterns_of_the_tests(start):
    for text in TEST_PATTERNS[start:start + 250]:
        assert_equivalent(text)


def test_the_scanner_takes_every_valid_corpus_pattern():
    """The scanner is the path valid patterns take: None only where lark refuses."""
    for text in CORPUS:
        if "->" in text and "," not in text:
            try:
                parsing._transform_sides_lark(text)
            except RearrangeError:
                continue
            assert parsing._scan_transform(text) is not None, text


@pytest.mark.parametrize("text", [
    # where the split scanner's own checks decide: arrows inside or after groups, groups
    # left open or closed twice, nested groups, whitespace split() would take but the
    # grammar does not, words that touch punctuation, non-ASCII and near-names
    "(a -> b)", "a (b -> c)", "(a) -> (b", "a -> b)", "a -> b -> c", "a - > b", "a -> > b",
    "a --> b", "(a (b)) -> a b", "((a)) -> a", "a) -> (a", "a\tb -> b a", "a\vb -> a b",
    "a\u00a0b -> a b", "a b -> b a\n", "a->b", "(a b)(c) -> c a b", "a  b  ->  b  a",
    "( ) -> ()", "() -> ", "-> a", "a ->", "->", "", " ", "a b", "ab(c) -> c ab",
    "a -> é", "é -> é", "a2 -> a2", "2a -> 2a", "_a -> _a", "a_ -> a_", "_ -> _",
    "a a -> a", "a -> a a", "a b -> a", "a -> a b", "for in -> in for", "a ... -> a ...",
    "a 1 -> a", "a (b 1) -> a b", "a b -> (a b)",
])
def test_split_scanner_edges(text):
    assert_equivalent(text)


# --------------------------------------------------------------------------- fuzz

# Tokens of the grammar and near misses: words and numbers of every kind \w and \d
# cover, the fixed strings, their fragments, and characters no terminal matches.
TOKENS = ["a", "b", "h1", "_", "_x", "x_", "2a", "é", "²", "٣", "1", "0", "2", "07",
          "1" * 19, "12345678901234567", "...", "..", ".", "…", "->", "-", ">", "(", ")",
          "()", ",", "*", "#", "\\", "'", '"', "[", "]"]
SEPARATORS = ["", "", " ", " ", "  ", "\t", "\n", "\r", "\f", "\v", "\u00a0", "\u2003"]
# 1,500 examples, as many as the CI profile's 400 comes to in the other tests' time; 600
# in the quick tier (its profile is loaded before this module is collected)
FUZZ = settings(max_examples=min(1500, 15 * settings().max_examples), deadline=None,
                suppress_health_check=[HealthCheck.too_slow])


@st.composite
def token_sequences(draw) -> str:
    tokens = draw(st.lists(st.sampled_from(TOKENS), max_size=12))
    text = draw(st.sampled_from(SEPARATORS))
    for token in tokens:
        text += token + draw(st.sampled_from(SEPARATORS))
    return text


@FUZZ
@given(token_sequences())
def test_random_token_sequences(text):
    assert_equivalent(text)


@FUZZ
@given(st.sampled_from(CORPUS), st.lists(
    st.tuples(st.sampled_from(["delete", "insert", "replace", "swap"]), st.integers(0, 200),
              st.sampled_from(TOKENS + SEPARATORS)), min_size=1, max_size=3))
def test_mutated_corpus_patterns(text, edits):
    for edit, where, token in edits:
        at = where % (len(text) + 1)
        if edit == "delete":
            text = text[:at] + text[at + 1:]
        elif edit == "insert":
            text = text[:at] + token + text[at:]
        elif edit == "replace":
            text = text[:at] + token + text[at + 1:]
        elif at + 1 < len(text):
            text = text[:at] + text[at + 1] + text[at] + text[at + 2:]
    assert_equivalent(text)


@FUZZ
@given(st.text(alphabet="ab1 0()._->\t,*²…\v", max_size=16))
def test_random_text(text):
    assert_equivalent(text)


# --------------------------------------------------------------------------- lark's privates


def test_no_private_lark_attributes():
    """lark is used through its public API only: no parse tables, no parser internals."""
    private = ("_parse_table", "parser.parser", "lexer_conf", "_Token", "parse_conf")
    for path in (REPO_ROOT / "rearrange").rglob("*.py"):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            assert not any(name in line for name in private), f"{path.name}:{number}: {line}"


@pytest.mark.parametrize("text", [
    "a b -> (b a)" + " " * 100_000,       # trailing whitespace: the scan stays linear
    " \t\n" * 30_000 + "a -> a",
    "a b -> (b a)" + " " * 50_000 + "$",
    " ".join(f"ax{i}" for i in range(5000)) + " -> " + " ".join(f"ax{i}" for i in range(5000)),
])
def test_long_patterns(text):
    assert_equivalent(text)
