"""Compare two harness runs (their JSON files) case by case.

    python bench/compare.py bench/results/numpy-copy.json bench/results/latest.json

Absolute times move by 15-25% between runs on a shared machine, so the columns to read
are the ratios, each measured within its own run: rearrange against the best peer and
against the limit. GB/s are shown for orientation.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any


def _key(record: dict[str, Any]) -> tuple:
    return record["case"], record["mode"], record["threads"]


def _gbps(record: dict[str, Any] | None) -> float:
    if record is None or "rearrange" not in record["contenders"]:
        return math.nan
    return record["contenders"]["rearrange"]["gbps"]


def _ratio(record: dict[str, Any] | None, field: str) -> float:
    return math.nan if record is None else record.get(field, math.nan)


def compare(old: dict[str, Any], new: dict[str, Any], mode: str) -> str:
    before = {_key(r): r for r in old["records"].get("cases", []) if r["kind"] == "copy"}
    after = [r for r in new["records"].get("cases", []) if r["kind"] == "copy" and r["mode"] == mode]
    lines = ["| case | threads | ra GB/s before | ra GB/s after | vs best peer before | "
             "vs best peer after | of limit before | of limit after |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in after:
        b = before.get(_key(r))
        lines.append(
            f"| {r['case']} | {r['threads']} | {_gbps(b):.2f} | {_gbps(r):.2f} | "
            f"{_ratio(b, 'ratio_vs_best_peer'):.2f}× | {_ratio(r, 'ratio_vs_best_peer'):.2f}× | "
            f"{_ratio(b, 'fraction_of_limit') * 100:.0f}% | {_ratio(r, 'fraction_of_limit') * 100:.0f}% |")
    return "\n".join(lines).replace("nan×", "—").replace("nan%", "—").replace("| nan |", "| — |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--mode", default="alloc", choices=("alloc", "prealloc"))
    args = parser.parse_args()
    old, new = (json.loads(p.read_text()) for p in (args.before, args.after))
    print(f"before: {old['machine']['git_commit']}, {old['machine']['date']}")
    print(f"after:  {new['machine']['git_commit']}, {new['machine']['date']}\n")
    print(compare(old, new, args.mode))


if __name__ == "__main__":
    main()
