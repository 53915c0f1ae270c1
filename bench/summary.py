"""One table per run for users: each copy case's speed beside its best peer, XLA and the
limit, at each thread count, allocation included; then the geometric mean over the cases.

    python bench/summary.py bench/results/latest.json [--mode alloc] [--threads 2,1]

Reads the records ``bench/run.py`` wrote (ratios recomputed from their samples, as
``--render`` does); prints markdown.
"""

from __future__ import annotations

import argparse
import json
import math
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
    copies = [add_ratios(dict(r)) for r in records
              if r["suite"] == "cases" and r["mode"] == mode and r["kind"] == "copy"]
    cases = list(dict.fromkeys(r["case"] for r in copies))
    by_key = {(r["case"], r["threads"]): r for r in copies}
    head = ["case", "moved"]
    for n in threads:
        head += [f"ra ({n}t)", f"best peer ({n}t)", f"jax ({n}t)", f"limit ({n}t)",
                 f"vs best peer ({n}t)", f"of limit ({n}t)"]
    lines = ["| " + " | ".join(head) + " |", "|---|---|" + "---:|" * (len(head) - 2)]
    ratios: dict[int, list[float]] = {n: [] for n in threads}
    shares: dict[int, list[float]] = {n: [] for n in threads}
    for case in cases:
        first = next(r for r in copies if r["case"] == case)
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
            mean = math.exp(sum(map(math.log, ratios[n])) / len(ratios[n]))
            lines.append(f"- {n} thread{'s' if n > 1 else ''}: geometric mean {mean:.2f}× the "
                         f"best peer (lowest {min(ratios[n]):.2f}×), "
                         f"{sum(x >= 1 for x in ratios[n])} of {len(ratios[n])} cases ahead of "
                         f"every peer; share of the limit {min(shares[n]) * 100:.0f}–"
                         f"{max(shares[n]) * 100:.0f}%, "
                         f"{sum(s >= 0.7 for s in shares[n])} of {len(shares[n])} at 70% or more.")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("json", type=Path)
    parser.add_argument("--mode", default="alloc")
    parser.add_argument("--threads", default="2,1")
    args = parser.parse_args(argv)
    run = json.loads(args.json.read_text())
    records = run["records"].get("cases", [])
    threads = [int(t) for t in args.threads.split(",") if t]
    print(summary_markdown(records, args.mode, threads), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
