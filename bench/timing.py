"""Interleaved timing: every contender is timed once per round, in a rotating order.

On a shared machine, absolute times drift by 15-25% between runs and within one. Timing
contenders back to back within each round exposes them to the same drift, so their
*ratios* are stable even when their times are not; the per-round (paired) ratio is the
figure reports should quote. Warm-up is excluded: the first call (plan building, caches,
JIT compilation) is timed and reported on its own, and a second call calibrates how many
calls make one sample.
"""

from __future__ import annotations

import gc
import math
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable

Call = Callable[[], Any]


@dataclass
class Timing:
    """Per-call seconds of one contender: one sample per round."""

    samples: list[float] = field(default_factory=list)
    number: int = 1                 # calls per sample
    first_call: float = math.nan    # the very first call (includes plan building / JIT)

    @property
    def median(self) -> float:
        return statistics.median(self.samples) if self.samples else math.nan

    def quantile(self, q: float) -> float:
        if not self.samples:
            return math.nan
        ordered = sorted(self.samples)
        pos = q * (len(ordered) - 1)
        lo, hi = math.floor(pos), math.ceil(pos)
        return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)

    @property
    def spread(self) -> float:
        """Half the interquartile range, relative to the median (0.05 reads "±5%")."""
        return (self.quantile(0.75) - self.quantile(0.25)) / 2 / self.median

    def to_dict(self) -> dict[str, Any]:
        return {
            "median_s": self.median,
            "p25_s": self.quantile(0.25),
            "p75_s": self.quantile(0.75),
            "min_s": min(self.samples) if self.samples else math.nan,
            "max_s": max(self.samples) if self.samples else math.nan,
            "spread": self.spread,
            "number": self.number,
            "rounds": len(self.samples),
            "first_call_s": self.first_call,
            "samples_s": self.samples,
        }


def _time_calls(call: Call, number: int) -> float:
    start = time.perf_counter()
    for _ in range(number):
        call()
    return (time.perf_counter() - start) / number


def calibrate(call: Call, min_sample: float) -> int:
    """Calls per sample so that one sample lasts at least ``min_sample`` seconds (these
    calls are also the warm-up)."""
    number = 1
    while True:
        per_call = _time_calls(call, number)
        if per_call * number >= min_sample or number >= 10_000_000:
            return number
        target = math.ceil(1.2 * min_sample / max(per_call, 1e-9))
        number = min(max(2 * number, target), 100 * number)


def interleaved(calls: dict[str, Call], rounds: int, min_sample: float,
                number: int | None = None) -> dict[str, Timing]:
    """Time every call once per round, rotating the order each round.

    Each call is first calibrated (``number`` calls per sample, or enough calls to last
    ``min_sample`` seconds); calibrating is the warm-up. First-call times are the
    caller's to measure (before anything else ran the call) and to set.
    """
    timings: dict[str, Timing] = {}
    for name, call in calls.items():
        timing = Timing()
        if number is None:
            timing.number = calibrate(call, min_sample)
        else:
            call()
            timing.number = number
        timings[name] = timing
    names = list(calls)
    gc_was_enabled = gc.isenabled()
    gc.disable()  # no collection pauses inside a sample (a full collect costs ~0.1 s here)
    try:
        for r in range(rounds):
            shift = r % len(names)
            for name in names[shift:] + names[:shift]:
                timing = timings[name]
                timing.samples.append(_time_calls(calls[name], timing.number))
    finally:
        if gc_was_enabled:
            gc.enable()
    return timings


def paired_ratio(numerator: Timing, denominator: Timing) -> float:
    """Median over rounds of numerator/denominator, each round's pair timed side by side."""
    pairs = [a / b for a, b in zip(numerator.samples, denominator.samples) if b > 0]
    return statistics.median(pairs) if pairs else math.nan


def timed_once(call: Call) -> tuple[float, Any]:
    """Seconds for one call, and its result."""
    start = time.perf_counter()
    result = call()
    return time.perf_counter() - start, result
