"""The package keeps four caches — parsed patterns, recipes, plans, the copy kernel's —
whatever operations and array types a process uses; ``cache_clear()`` empties every
one, and ``cache_info()`` counts real hits and misses.

Found by looking, not by asking the package: every module-level container of every
``rearrange`` module (dicts, lists, sets, lru caches, the plan cache) is measured before
and after one round of every operation on numpy arrays, Tensors and torch tensors; what
grew is a cache."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import rearrange as ra
from rearrange.caching import PlanCache

torch = pytest.importorskip("torch")


def _containers() -> dict[int, tuple[str, object]]:
    """id -> (a name, the container) for every module-level container of the package
    (one entry per object, however many modules import it; the plan cache's own dicts,
    which hot paths hold by name, count as the plan cache)."""
    from rearrange.caching import PLANS

    found: dict[int, tuple[str, object]] = {id(PLANS): ("rearrange.caching.PLANS", PLANS),
                                            id(PLANS.entries): ("", None),
                                            id(PLANS.last): ("", None),
                                            id(PLANS.last_transform): ("", None)}
    for module_name, module in list(sys.modules.items()):
        if not module_name.startswith("rearrange"):
            continue
        for attribute, value in list(vars(module).items()):
            if attribute.startswith("__"):
                continue
            # functools caches are the wrappers themselves (cache_parameters); functions
            # that only forward cache_info to one of them are not another cache
            if isinstance(value, PlanCache) or isinstance(value, (dict, list, set)) or (
                    callable(value) and hasattr(value, "cache_parameters")):
                found.setdefault(id(value), (f"{module_name}.{attribute}", value))
    return found


def _size(value: object) -> int:
    if value is None:
        return 0
    if isinstance(value, PlanCache):
        return len(value.entries) + len(value.last) + len(value.last_transform)
    if isinstance(value, (dict, list, set)):
        return len(value)
    info = value.cache_info()  # type: ignore[attr-defined]
    return getattr(info, "currsize", 0) if not isinstance(info, int) else 0


def _one_round(side: int = 64) -> None:
    """Every operation once; ``side`` sets the shapes (a round of other shapes than the
    last makes new entries even in a cache that ``cache_clear`` left full)."""
    arrays = [np.arange(side * 64 * 4, dtype=np.float32).reshape(side, 64, 4),
              torch.zeros(side, 64, 4), ra.zeros(side, 64, 4)]
    big = np.zeros((16 * side, 1024), np.float32)
    ra.rearrange(big, "h w -> (w h)")          # a kernel-sized copy
    # reductions planned by layout for the compiled runners: maxima over runs, windows,
    # sums down columns (their layouts are planned whether or not the runner is ready)
    ra.reduce(big.reshape(side, 128, 128), "a b c -> a", "max")
    ra.reduce(big, "(h 2) (w 2) -> h w", "max")
    ra.reduce(big.reshape(16, side, 1024), "a b c -> a c", "sum")
    for a in arrays:
        ra.rearrange(a, "a b c -> c b a")
        ra.rearrange(a, "a b c -> (c b) a")
        ra.reduce(a, "a b c -> a", "sum")
        ra.repeat(a, "a b c -> a b c d", d=2)
        packed, shapes = ra.pack([a, a], "a *")
        ra.unpack(packed, shapes, "a *")
        ra.einsum(a, a, "a b c, a b c -> a")
        ra.einsum(a, a, "a (b c) d, a (b c) d -> a", b=4)
        ra.parse_shape(a, "a b c")
        ra.check_shape(a, "a b c")
    # einx's families and the notation's concatenation, on numpy and torch
    for a in arrays[:2]:
        ra.add(a, a[0, 0], "a b c, c")
        ra.softmax(a, "a [b] c")
        ra.get_at(a, a[:2, 0, 0].long() if hasattr(a, "long") else np.array([1, 0]),
                  "[a] b c, i -> i b c")
        ra.rearrange((a, a), "a b c, a b d -> a b (c + d)")
    # kernel-sized pack and repeat (the row assembly), and a notation concatenation
    ra.pack([big, big], "a *")
    ra.repeat(big, "a b -> a r b", r=2)
    ra.rearrange((big, big), "a b, a c -> (b + c) a")


# Module-level containers that grow but hold no results: registries filled once per
# type or per process (the type -> backend table, the JIT's registered functions and
# loaded runners, the worker pool's state).
_NOT_CACHES = ("rearrange.backends.by_type", "rearrange.backends._loaded")


def test_one_round_fills_four_caches_and_clear_empties_them() -> None:
    _one_round()                    # the first round also loads modules and registries
    ra.cache_clear()
    before = {key: _size(value) for key, (_, value) in _containers().items()}
    _one_round(48)                  # new shapes: a cache cache_clear missed grows too
    grown = {key: (name, value) for key, (name, value) in _containers().items()
             if _size(value) > before.get(key, 0) and not name.startswith(_NOT_CACHES)
             and not name.startswith("rearrange.kernel.jit") and ".threads." not in name
             and not name.startswith("rearrange.kernel.builds")}
    names = sorted(name for name, _ in grown.values())
    levels = {"parse": [n for n in names if n.startswith("rearrange.parsing")],
              "recipe": [n for n in names if n.endswith("build_recipe")],
              "plans": [n for n in names if n.endswith("PLANS")],
              "kernel": [n for n in names if n.startswith("rearrange.kernel.")]}
    assert sorted(sum(levels.values(), [])) == names, names
    assert all(len(found) == 1 for level, found in levels.items() if level != "kernel"), levels
    info = ra.cache_info()
    assert info.patterns.hits > 0 and info.plans.hits > 0 and info.kernel.misses > 0, info
    ra.cache_clear()
    left = [name for key, (name, value) in grown.items() if _size(value) > before.get(key, 0)]
    assert not left, left
    assert all(level.currsize == 0 and level.hits == level.misses == 0
               for level in ra.cache_info()), ra.cache_info()


def test_hits_and_misses_are_counted() -> None:
    ra.cache_clear()
    x = np.zeros((3, 4))
    for _ in range(3):
        ra.rearrange(x, "a b -> b a")               # numpy's inline path
        ra.reduce(x, "a b -> b", "sum")             # the front door
        ra.einsum(x, x, "a b, a b -> b")
    plans = ra.cache_info().plans
    assert (plans.hits, plans.misses) == (6, 3), plans
