"""The package's plan cache: one bounded cache of lowered plans for every operation and
array type (rearrange, reduce, repeat, pack, unpack, einsum, parse_shape/check_shape on
numpy, Tensor, torch, dask, array-API inputs).

The other levels are the parse cache (:mod:`rearrange.parsing`), the recipe cache
(:func:`rearrange.recipe.build_recipe`) and the kernel's (:mod:`rearrange.kernel`);
``rearrange.cache_info()`` reports the four and ``rearrange.cache_clear()`` empties them.

Keys start with a tag that names the operation and the kind of input (``("rearrange",
"numpy", ...)``, ``("pack", ...)``), so entries of different operations never meet;
after the tag a key holds everything its entry depends on (each front says what, where
it builds the key).
"""

from __future__ import annotations

import threading
from itertools import islice
from typing import Any, NamedTuple


class CacheLevel(NamedTuple):
    hits: int
    misses: int
    maxsize: int
    currsize: int


class PlanCache:
    """A bounded dict of lowered plans, with hit and miss counts.

    Reads are one ``dict.get`` without a lock (atomic under the GIL); inserts and
    evictions happen under the lock, the oldest eighth at once when full. Two inline indexes spare
    warm paths hashing a key, both part of this cache and cleared with it: ``last`` is
    numpy rearrange's (pattern -> the last call's layout and entry), ``last_transform``
    the front door's (pattern -> the last kept key of a rearrange, reduce or repeat
    with that pattern, and its runner). Counts are exact in one thread; concurrent
    calls may lose an increment (never an entry)."""

    __slots__ = ("maxsize", "entries", "last", "last_transform", "hits", "misses", "_lock")

    def __init__(self, maxsize: int) -> None:
        self.maxsize = maxsize
        # The dicts are never rebound: hot paths hold them (clear() empties in place).
        self.entries: dict[Any, Any] = {}
        self.last: dict[Any, tuple] = {}
        self.last_transform: dict[Any, tuple] = {}
        self.hits = 0
        self.misses = 0
        self._lock = threading.Lock()

    def get(self, key: Any) -> Any:
        """The entry under ``key``, or None (a miss; also for an unhashable key, whose
        calls are planned every time)."""
        try:
            entry = self.entries.get(key)
        except TypeError:
            entry = None
        if entry is None:
            self.misses += 1
        else:
            self.hits += 1
        return entry

    def peek(self, key: Any) -> Any:
        """The entry under ``key``, or None without counting a miss: for a warm path
        whose miss falls through to a :meth:`get` (which counts it)."""
        try:
            entry = self.entries.get(key)
        except TypeError:
            return None
        if entry is not None:
            self.hits += 1
        return entry

    def put(self, key: Any, entry: Any) -> bool:
        """Keep ``entry`` under ``key``; an unhashable key keeps nothing (False)."""
        with self._lock:
            if len(self.entries) >= self.maxsize:
                # the oldest eighth at once: a dict finds its oldest key by scanning past
                # the slots of the keys already popped (until it next resizes), so one
                # pop per insert cost O(maxsize) each (4 us at 8192 entries)
                for old in list(islice(self.entries, max(1, self.maxsize // 8))):
                    del self.entries[old]
            try:
                self.entries[key] = entry   # (a tuple's hash is not kept: hashed once here)
            except TypeError:
                return False
            return True

    def remember_last(self, pattern: str, record: tuple) -> None:
        """``last[pattern] = record``, bounded like the entries."""
        if len(self.last) >= self.maxsize:
            self.last.clear()
        self.last[pattern] = record

    def remember_last_transform(self, pattern: Any, key: tuple, runner: Any) -> None:
        """``last_transform[pattern] = (key, runner)`` for a key the cache holds (so a
        hashable one), bounded like the entries."""
        if len(self.last_transform) >= self.maxsize:
            self.last_transform.clear()
        self.last_transform[pattern] = (key, runner)

    def clear(self) -> None:
        with self._lock:
            self.entries.clear()
            self.last.clear()
            self.last_transform.clear()
            self.hits = self.misses = 0

    def info(self) -> CacheLevel:
        return CacheLevel(self.hits, self.misses, self.maxsize, len(self.entries))


#: The one plan cache.
PLANS = PlanCache(8192)
