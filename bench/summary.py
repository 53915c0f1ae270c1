"""One table per run for users: each copy case's speed beside its best peer, XLA and the
limit, at each thread count, allocation included; then the geometric mean over the cases.

    python bench/summary.py bench/results/latest.json [--mode alloc] [--threads 2,1]
    python bench/summary.py RUN1.json RUN2.json ... [--mode alloc] [--threads 2]

Reads the records ``bench/run.py`` wrote (ratios recomputed from their samples, as
``--render`` does); prints markdown. Given several runs, one row per case and thread
count across them: the median (and range) of its ratio to the best peer and of its
share of the limit, and in how many runs it was ahead of every peer and at 70% or more
of the limit — on a shared machine, what one run's coin flips add up to.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

from suites import add_ratios  # noqa: E402


def _gbps(record: dict[str, Any], name: str) -> str:
    entry = record["contenders"].get(name)
    return "—" if entry is None else f"{entry['gbps']:.1f}"


def summary_markdown(records: list[dict[str, Any]], mode: str, threads: list[int]) -> str:
    """Rows: copy cases; per thread count: rearrange GB/s, the best peer (named), XLA,
    the limit (named), rearrange over the best peer, and its share of the limit."""
    by_key = _copies(records, mode)
    cases = list(dict.fromkeys(case for case, _ in by_key))
    head = ["case", "moved"]
    for n in threads:
        head += [f"ra ({n}t)", f"best peer ({n}t)", f"jax ({n}t)", f"limit ({n}t)",
                 f"vs best peer ({n}t)", f"of limit ({n}t)"]
    lines = ["| " + " | ".join(head) + " |", "|---|---|" + "---:|" * (len(head) - 2)]
    ratios: dict[int, list[float]] = {n: [] for n in threads}
    shares: dict[int, list[float]] = {n: [] for n in threads}
    for case in cases:
        first = next(r for (c, _), r in by_key.items() if c == case)
        cells = [case, f"{first['bytes_moved'] / 2**20:.0f} MiB"]
        for n in threads:
            r = by_key.get((case, n))
            if r is None:
                cells += ["—"] * 6
                continue
            best, limit = r.get("best_peer"), r.get("limit")
            ratio, share = r.get("ratio_vs_best_peer"), r.get("fraction_of_limit")
            if ratio is not None:
                ratios[n].append(ratio)
            if share is not None:
                shares[n].append(share)
            cells += [_gbps(r, "rearrange"),
                      f"{_gbps(r, best)} {best}" if best else "—",
                      _gbps(r, "jax"),
                      f"{limit['gbps']:.1f} {limit['source']}" if limit else "—",
                      f"{ratio:.2f}×" if ratio is not None else "—",
                      f"{share * 100:.0f}%" if share is not None else "—"]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    for n in threads:
        if ratios[n]:
            mean = _geometric_mean(ratios[n])
            lines.append(f"- {n} thread{'s' if n > 1 else ''}: geometric mean {mean:.2f}× the "
                         f"best peer (lowest {min(ratios[n]):.2f}×), "
                         f"{sum(x >= 1 for x in ratios[n])} of {len(ratios[n])} cases ahead of "
                         f"every peer; share of the limit {min(shares[n]) * 100:.0f}–"
                         f"{max(shares[n]) * 100:.0f}%, "
                         f"{sum(s >= 0.7 for s in shares[n])} of {len(shares[n])} at 70% or more.")
    return "\n".join(lines) + "\n"


def _copies(records: list[dict[str, Any]], mode: str) -> dict[tuple[str, int], dict[str, Any]]:
    """(case, threads) -> the run's copy record of that mode, with its ratios."""
    return {(r["case"], r["threads"]): add_ratios(dict(r)) for r in records
            if r["suite"] == "cases" and r["mode"] == mode and r["kind"] == "copy"}


def across_runs_markdown(runs: list[list[dict[str, Any]]], mode: str,
                         threads: list[int]) -> str:
    """Rows: copy cases at each thread count, across runs: the median and range of the
    ratio to the best peer and of the share of the limit, and the runs that were ahead
    of every peer and at 70% of the limit or more; then each run's geometric mean."""
    per_run = [_copies(records, mode) for records in runs]
    cases = list(dict.fromkeys(case for copies in per_run for case, _ in copies))
    lines = ["| case | threads | runs | vs best peer: median (range) | ahead in | "
             "of limit: median (range) | at 70% in |", "|---|---:|---:|---|---:|---|---:|"]
    medians: dict[int, list[float]] = {n: [] for n in threads}
    for n in threads:
        for case in cases:
            records = [copies[(case, n)] for copies in per_run if (case, n) in copies]
            ratios = [r["ratio_vs_best_peer"] for r in records
                      if r.get("ratio_vs_best_peer") is not None]
            shares = [r["fraction_of_limit"] for r in records
                      if r.get("fraction_of_limit") is not None]
            if not ratios:
                continue
            medians[n].append(statistics.median(ratios))
            share_cells = ["—", "—"]
            if shares:
                share_cells = [f"{statistics.median(shares):.0%} ({min(shares):.0%}–"
                               f"{max(shares):.0%})",
                               f"{sum(x >= 0.7 for x in shares)} of {len(shares)}"]
            lines.append(f"| {case} | {n} | {len(records)} | {statistics.median(ratios):.2f}× "
                         f"({min(ratios):.2f}–{max(ratios):.2f}) | "
                         f"{sum(x >= 1 for x in ratios)} of {len(ratios)} | "
                         + " | ".join(share_cells) + " |")
    lines.append("")
    for n in threads:
        if not medians[n]:
            continue
        means = []
        for copies in per_run:
            ratios = [r["ratio_vs_best_peer"] for (_, t), r in copies.items()
                      if t == n and r.get("ratio_vs_best_peer") is not None]
            if ratios:
                means.append(f"{_geometric_mean(ratios):.2f}× ({sum(x >= 1 for x in ratios)}"
                             f" of {len(ratios)} ahead)")
        lines.append(f"- {n} thread{'s' if n > 1 else ''}: geometric mean of the cases' median "
                     f"ratios {_geometric_mean(medians[n]):.2f}×; each run: "
                     + ", ".join(means) + ".")
    return "\n".join(lines) + "\n"


def _geometric_mean(values: list[float]) -> float:
    return math.exp(sum(map(math.log, values)) / len(values))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("json", type=Path, nargs="+", help="one run, or several")
    parser.add_argument("--mode", default="alloc")
    parser.add_argument("--threads", default="2,1")
    args = parser.parse_args(argv)
    runs = [json.loads(path.read_text())["records"].get("cases", []) for path in args.json]
    threads = [int(t) for t in args.threads.split(",") if t]
    if len(runs) == 1:
        print(summary_markdown(runs[0], args.mode, threads), end="")
    else:
        print(across_runs_markdown(runs, args.mode, threads), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
