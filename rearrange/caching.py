"""Bounded plan caches: plain dicts, read without a lock (one ``dict.get`` on the hot
path), written under the owner's lock through :func:`remember`."""

from __future__ import annotations

import threading
from typing import Any


def remember(cache: dict, key: Any, entry: Any, limit: int, lock: threading.Lock) -> None:
    """Store ``entry`` under ``key``; at ``limit`` entries the oldest is evicted first
    (insertion order). Raises TypeError for an unhashable key, storing nothing."""
    with lock:
        if len(cache) >= limit:
            cache.pop(next(iter(cache)))
        cache[key] = entry
