"""One parse cache for every kind of pattern: keyed by (kind, text, op), bounded, with
real hit and miss counts, emptied by cache_clear (its own and every front's)."""

from __future__ import annotations

import numpy as np
import pytest

import rearrange as ra
from rearrange import contraction, parsing
from rearrange.parsing import parse_pack, parse_shape_pattern, parse_transform


@pytest.fixture(autouse=True)
def empty_cache():
    parsing.cache_clear()
    yield
    parsing.cache_clear()


def counts() -> tuple[int, int, int]:
    info = parsing.cache_info()
    return info.hits, info.misses, info.currsize


def test_clear_empties_and_zeroes():
    parse_transform("a b -> b a")
    parse_transform("a b -> b a")
    assert counts() == (1, 1, 1)
    parsing.cache_clear()
    assert counts() == (0, 0, 0)


def test_every_kind_shares_the_one_cache():
    first = parse_transform("a b -> b a")
    pack = parse_pack("b * d")
    shape = parse_shape_pattern("b _ h", "parse_shape")
    einsum = contraction.parse_einsum("a b, b c -> a c")
    assert counts() == (0, 4, 4)
    assert parse_transform("a b -> b a") is first
    assert parse_pack("b * d") is pack
    assert parse_shape_pattern("b _ h", "parse_shape") is shape
    assert contraction.parse_einsum("a b, b c -> a c") is einsum
    assert counts() == (4, 4, 4)
    assert parsing.cache_info().maxsize == parsing._PARSE_CACHE_SIZE


def test_the_key_holds_kind_and_op():
    parse_transform("a b -> a", "reduce")
    parse_transform("a b -> a", "reduce")
    with pytest.raises(ra.PatternError):  # the same text is another entry for rearrange
        parse_transform("a b -> a", "rearrange")
    parse_shape_pattern("a (b c)", "check_shape")
    with pytest.raises(ra.PatternError):
        parse_shape_pattern("a (b c)", "parse_shape")
    hits, misses, size = counts()
    assert (hits, misses, size) == (1, 4, 2)


def test_errors_are_not_kept():
    for _ in range(2):
        with pytest.raises(ra.PatternError):
            parse_transform("a b -> (a b")
    assert counts() == (0, 2, 0)


def test_bounded():
    for k in range(parsing._PARSE_CACHE_SIZE + 10):
        parse_transform(f"a{k} b -> b a{k}")
    hits, misses, size = counts()
    assert (hits, misses, size) == (0, parsing._PARSE_CACHE_SIZE + 10, parsing._PARSE_CACHE_SIZE)


def test_the_old_names_are_the_one_cache():
    for function in (parse_transform, parsing.parse_transform_cached, parse_pack,
                     parse_shape_pattern):
        assert function.cache_info is parsing.cache_info
        assert function.cache_clear is parsing.cache_clear


def test_the_public_caches_report_and_clear_it():
    ra.cache_clear()   # no plan of another test for these layouts: both calls plan
    x = np.zeros((2, 3))
    ra.rearrange(x, "a b -> b a")
    ra.rearrange(np.zeros((3, 2)), "a b -> b a")   # a new plan, the parsed pattern hit
    info = ra.cache_info().patterns
    assert (info.misses, info.currsize) == (1, 1) and info.hits >= 1
    ra.cache_clear()
    assert counts() == (0, 0, 0)
    parse_pack("b * d")
    parsing.cache_clear()
    assert counts() == (0, 0, 0)
    ra.parse_shape(x, "rows cols")     # a pattern no other test gives parse_shape
    assert counts()[2] == 1
