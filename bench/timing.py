"""Interleaved timing: contenders take turns, in an order in which each follows each other equally often.

On a shared machine, absolute times drift by 15-25% between runs and within one. Timing
contenders back to back within each round exposes them to the same drift, so their
*ratios* are stable even when their times are not; the per-round (paired) ratio is the
figure reports should quote. A copy pays for the cache and allocator state its
predecessor leaves behind: after the memcpy limit (non-temporal stores) the next two
calls of any copy here ran 30% slower, and with a plain rotation one contender always
paid it. So the order is an Eulerian circuit of the complete directed graph on the
contenders: every contender follows every other one exactly once per cycle, also across
cycles, and the predecessor cost is the same for all.

Every contender's sample is the same number of back-to-back calls, enough for the slowest
to last ``min_sample`` seconds: one call after another contender is not the same
experiment as the tenth call in a row (the allocator hands back the block just freed).
Warm-up is excluded: first calls (plan building, caches, JIT compilation) are the
caller's to time and report on their own; calibration calls warm every contender up.
"""

from __future__ import annotations

import gc
import math
import os
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable

Call = Callable[[], Any]

# What the libraries' idle workers do between a contender's calls, in every race: sleep.
# torch's OpenMP workers (OMP_WAIT_POLICY) and numpy's OpenBLAS workers
# (OPENBLAS_THREAD_TIMEOUT: 2**4 cycles, its least, instead of 2**28, ~0.1 s) otherwise
# spin on after a call and take a core from whichever contender runs next (measured: 0.13
# s of CPU by OpenBLAS in the 0.3 s after one matmul, 0 with the timeout; torch's
# attention einsum after numpy's 5.9-7.2 ms, after its own 3.4-4.4). Neither library's
# own calls were slower with it (numpy's attention matmul and chain einsum, medians of
# three blocks, alternated: within the runs' noise). rearrange's workers spin 200 us
# after a job, XLA's pool not measurably (0.0 s of CPU in the 0.3 s after a call): both
# left as they are. Set before numpy and torch are imported (their pools read it once).
IDLE_WORKERS_SLEEP = {"OMP_WAIT_POLICY": "PASSIVE", "OPENBLAS_THREAD_TIMEOUT": "4"}


def idle_workers_sleep() -> None:
    """:data:`IDLE_WORKERS_SLEEP` into the environment (values the caller set stay)."""
    for name, value in IDLE_WORKERS_SLEEP.items():
        os.environ.setdefault(name, value)


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
    """Calls per sample so that one sample lasts at least ``min_sample`` seconds."""
    call()  # warm: the estimate must not include a first call
    number = 1
    while True:
        per_call = _time_calls(call, number)
        if per_call * number >= min_sample or number >= 10_000_000:
            return number
        target = math.ceil(1.2 * min_sample / max(per_call, 1e-9))
        number = min(max(2 * number, target), 100 * number)


def balanced_cycle(n: int) -> list[int]:
    """A cyclic order of n contenders (each appearing n - 1 times) in which every ordered
    pair (a, b), a != b, is consecutive exactly once, the wrap-around included: an
    Eulerian circuit of the complete directed graph (Hierholzer)."""
    if n < 2:
        return list(range(n))
    successors = {a: [b for b in range(n) if b != a] for a in range(n)}
    stack, circuit = [0], []
    while stack:
        node = stack[-1]
        if successors[node]:
            stack.append(successors[node].pop())
        else:
            circuit.append(stack.pop())
    circuit.reverse()
    return circuit[:-1]  # the circuit returns to its start: repeating it stays balanced


def interleaved(calls: dict[str, Call], rounds: int, min_sample: float,
                number: int | None = None) -> dict[str, Timing]:
    """At least ``rounds`` samples of every call, taking turns in a balanced cycle.

    ``number`` calls make one sample, the same for every contender: given, or calibrated
    so that the slowest contender's sample lasts ``min_sample`` seconds.
    """
    if number is None:
        number = min(calibrate(call, min_sample) for call in calls.values())
    else:
        for call in calls.values():
            call()
    timings = {name: Timing(number=number) for name in calls}
    names = list(calls)
    cycle = balanced_cycle(len(names))
    per_cycle = max(1, len(names) - 1)
    gc_was_enabled = gc.isenabled()
    gc.disable()  # no collection pauses inside a sample (a full collect costs ~0.1 s here)
    try:
        for _ in range(math.ceil(rounds / per_cycle)):
            for index in cycle:
                name = names[index]
                timings[name].samples.append(_time_calls(calls[name], number))
    finally:
        if gc_was_enabled:
            gc.enable()
    return timings


def median_rate(call: Call, amount: float, samples: int, min_sample: float) -> float:
    """``amount`` per second of ``call`` alone (no contender taking turns): the median
    over ``samples`` samples, each as many calls in a row as last ``min_sample``
    seconds."""
    rates = []
    for _ in range(samples):
        n, start = 0, time.perf_counter()
        while True:
            call()
            n += 1
            elapsed = time.perf_counter() - start
            if elapsed >= min_sample:
                break
        rates.append(amount * n / elapsed)
    return statistics.median(rates)


def paired_ratio(numerator: Timing, denominator: Timing) -> float:
    """Median over k of numerator's k-th sample / denominator's k-th sample (timed within
    one cycle of each other, so drift shared by both cancels)."""
    pairs = [a / b for a, b in zip(numerator.samples, denominator.samples) if b > 0]
    return statistics.median(pairs) if pairs else math.nan


def timed_once(call: Call) -> tuple[float, Any]:
    """Seconds for one call, and its result."""
    start = time.perf_counter()
    result = call()
    return time.perf_counter() - start, result
