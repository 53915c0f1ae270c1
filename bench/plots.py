"""PNG plots of the suites' records (matplotlib, imported only here)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from tables import MODE_TITLES, _size

COLORS = {"rearrange": "#d62728", "numpy": "#1f77b4", "einops": "#2ca02c", "torch": "#ff7f0e",
          "jax": "#9467bd"}
BARS = tuple(COLORS)


def _legend_entries(records: list[dict[str, Any]], style: str) -> tuple[list, list]:
    """A legend entry for every contender, present or not (one that takes part nowhere
    in these records says why, its reason from the records, instead of vanishing), then
    the limit's: bars with a solid limit line, lines with a dashed one."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles, labels = [], []
    for name in BARS:
        present = any(name in r["contenders"] for r in records)
        reasons = {r.get("missing", {}).get(name) for r in records} - {None}
        label = name if present else f"{name}: {'; '.join(sorted(reasons)) or 'n/a'}"
        if style == "bar":
            handles.append(Patch(facecolor=COLORS[name] if present else "none",
                                 edgecolor=COLORS[name], hatch=None if present else "///"))
        else:
            handles.append(Line2D([], [], color=COLORS[name], marker="o", markersize=3,
                                  linestyle="-" if present else ":"))
        labels.append(label)
    handles.append(Line2D([], [], color="black", linewidth=2) if style == "bar" else
                   Line2D([], [], color="black", linestyle="--"))
    labels.append("limit (fastest contiguous copy)")
    return handles, labels


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def plot_cases(records: list[dict[str, Any]], mode: str, path: Path, subtitle: str) -> bool:
    """Bars per case per contender (GB/s), the limit marked as a black line over each
    group. View-only cases move no bytes and are left out. False when nothing to plot."""
    records = [r for r in records if r["mode"] == mode and r["kind"] == "copy"]
    threads = sorted({r["threads"] for r in records})
    if not records:
        return False
    plt = _pyplot()
    fig, axes = plt.subplots(len(threads), 1, figsize=(13, 3.9 * len(threads)), squeeze=False)
    width = 0.8 / len(BARS)
    for ax, n in zip(axes[:, 0], threads):
        group = [r for r in records if r["threads"] == n]
        top = max((e["gbps"] for r in group for e in r["contenders"].values()), default=1.0)
        for i, r in enumerate(group):
            for j, name in enumerate(BARS):
                entry = r["contenders"].get(name)
                x = i + (j - (len(BARS) - 1) / 2) * width
                if entry is None:
                    # cannot take part here: an empty hatched slot (the legend says why)
                    ax.bar(x, 0.04 * top, width, facecolor="none", edgecolor=COLORS[name],
                           hatch="///", linewidth=0.6)
                    continue
                ax.bar(x, entry["gbps"], width, color=COLORS[name])
                lo = r["bytes_moved"] / entry["p75_s"] / 1e9
                hi = r["bytes_moved"] / entry["p25_s"] / 1e9
                ax.plot([x, x], [lo, hi], color="black", linewidth=0.6)
            limit = r.get("limit")
            if limit:
                ax.hlines(limit["gbps"], i - 0.45, i + 0.45, colors="black", linewidth=2)
        ax.set_xticks(range(len(group)))
        ax.set_xticklabels([r["case"] for r in group], rotation=25, ha="right", fontsize=7)
        ax.set_ylabel("GB/s (read + write)")
        ax.set_title(f"{MODE_TITLES[mode]} · threads={n}", fontsize=9, loc="left")
        ax.grid(axis="y", alpha=0.3)
        handles, labels = _legend_entries(group, "bar")
        ax.legend(handles, labels, fontsize=7, ncol=3, loc="lower right",
                  bbox_to_anchor=(1.0, 1.0), frameon=False)
    fig.suptitle(subtitle, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return True


def plot_scaling(records: list[dict[str, Any]], path: Path, subtitle: str,
                 caches: dict[str, int]) -> bool:
    """GB/s against input size for every contender, one panel per (mode, threads), cache
    sizes marked: the cache and page-fault regimes show as steps."""
    if not records:
        return False
    plt = _pyplot()
    modes = [m for m in MODE_TITLES if any(r["mode"] == m for r in records)]
    threads = sorted({r["threads"] for r in records})
    fig, axes = plt.subplots(len(modes), len(threads), figsize=(6.5 * len(threads), 3.8 * len(modes)),
                             squeeze=False, sharey=True)
    for row, mode in enumerate(modes):
        for col, n in enumerate(threads):
            ax = axes[row, col]
            group = sorted((r for r in records if r["mode"] == mode and r["threads"] == n),
                           key=lambda r: r["bytes"])
            sizes = [r["bytes"] for r in group]
            for name in BARS:
                ys = [r["contenders"][name]["gbps"] if name in r["contenders"] else math.nan
                      for r in group]
                if not all(math.isnan(y) for y in ys):
                    ax.plot(sizes, ys, marker="o", markersize=3, color=COLORS[name], label=name)
            limits = [r["limit"]["gbps"] if r.get("limit") else math.nan for r in group]
            ax.plot(sizes, limits, color="black", linestyle="--", label="limit (contiguous copy)")
            for level, nbytes in caches.items():
                if sizes and sizes[0] <= nbytes <= sizes[-1]:
                    ax.axvline(nbytes, color="grey", linewidth=0.8, alpha=0.6)
                    ax.text(nbytes, 0.98, f" {level}", transform=ax.get_xaxis_transform(),
                            fontsize=7, color="grey", va="top")
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ticks = sizes[::2] if len(sizes) > 8 else sizes
            ax.set_xticks(ticks)
            ax.set_xticklabels([_size(s) for s in ticks], rotation=35, fontsize=7)
            ax.set_xlabel("input size (transposed, float32)", fontsize=8)
            if col == 0:
                ax.set_ylabel("GB/s (read + write)")
            ax.set_title(f"{mode} · threads={n}", fontsize=9)
            ax.grid(alpha=0.3, which="both")
    # one legend for every panel, below them: inside a panel it covered the smallest sizes
    handles, labels = _legend_entries(records, "line")
    fig.legend(handles, labels, fontsize=8, ncol=len(labels), loc="lower center", frameon=False)
    fig.suptitle(subtitle, fontsize=9)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return True


# The ops suite's contenders (bench/race_ops.py), each against rearrange.
OPS_COLORS = {"numpy": "#1f77b4", "einops numpy": "#2ca02c", "torch": "#ff7f0e",
              "einops torch": "#98df8a", "jax": "#9467bd"}


def plot_ops(records: list[dict[str, Any]], path: Path, subtitle: str) -> bool:
    """Per case, each peer's median over rearrange's (log scale; above 1: rearrange is
    faster), one panel per thread count; a peer that cannot take part leaves an empty
    hatched slot. False when there is nothing to plot."""
    if not records:
        return False
    plt = _pyplot()
    threads = sorted({r["threads"] for r in records})
    fig, axes = plt.subplots(len(threads), 1, figsize=(13, 4.2 * len(threads)), squeeze=False)
    names = tuple(OPS_COLORS)
    width = 0.8 / len(names)
    for ax, n in zip(axes[:, 0], threads):
        group = [r for r in records if r["threads"] == n]
        for i, r in enumerate(group):
            ours = r["contenders"]["rearrange"]["median_s"]
            for j, name in enumerate(names):
                x = i + (j - (len(names) - 1) / 2) * width
                entry = r["contenders"].get(name)
                if entry is None:
                    ax.bar(x, 1.0, width, facecolor="none", edgecolor=OPS_COLORS[name],
                           hatch="///", linewidth=0.6)
                    continue
                ax.bar(x, entry["median_s"] / ours, width, color=OPS_COLORS[name],
                       label=name if i == 0 else None)
                ax.plot([x, x], [entry["p25_s"] / ours, entry["p75_s"] / ours],
                        color="black", linewidth=0.6)
        ax.axhline(1.0, color="#d62728", linewidth=1.5, label="rearrange (= 1)")
        ax.set_yscale("log")
        ax.set_xticks(range(len(group)))
        ax.set_xticklabels([r["case"] for r in group], rotation=25, ha="right", fontsize=7)
        ax.set_ylabel("peer's time / rearrange's\n(> 1: rearrange is faster)")
        ax.set_title(f"every operation against the best peer · threads={n}", fontsize=9,
                     loc="left")
        ax.grid(axis="y", alpha=0.3, which="both")
        ax.legend(fontsize=7, ncol=6, loc="lower right", bbox_to_anchor=(1.0, 1.0),
                  frameon=False)
    fig.suptitle(subtitle, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return True
