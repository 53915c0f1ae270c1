"""Markdown tables from the suites' records (what stdout shows and docs/ pastes)."""

from __future__ import annotations

import math
from typing import Any

from contenders import CONTENDERS

MODE_TITLES = {
    "alloc": "allocation-inclusive (a new array per call, as users call it)",
    "prealloc": "into a preallocated output (np.copyto / Tensor.copy_)",
}


def _size(nbytes: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            value = nbytes / scale
            return f"{value:.0f} {unit}" if value >= 10 or value == int(value) else f"{value:.1f} {unit}"
    return f"{nbytes:.0f} B"


def _cell(record: dict[str, Any], name: str) -> str:
    entry = record["contenders"].get(name)
    if entry is None:
        return record.get("missing", {}).get(name, "n/a")
    spread = f" ±{entry['spread'] * 100:.0f}%" if not math.isnan(entry["spread"]) else ""
    if record["kind"] == "view":
        note = "" if record.get("result_is_view", {}).get(name, True) else " (copies)"
        return f"{entry['median_s'] * 1e6:.2f} µs{spread}{note}"
    return f"{entry['gbps']:.2f}{spread}"


def _limit(record: dict[str, Any]) -> str:
    limit = record.get("limit")
    source = {"rearrange": "ra"}.get(limit["source"], limit["source"]) if limit else ""
    return f"{limit['gbps']:.2f} ({source})" if limit else "—"


def _ratios(record: dict[str, Any]) -> tuple[str, str]:
    ratio = record.get("ratio_vs_best_peer")
    vs = "—" if ratio is None else f"{ratio:.2f}× {record['best_peer']}"
    fraction = record.get("fraction_of_limit")
    return vs, ("—" if fraction is None else f"{fraction * 100:.0f}%")


def _groups(records: list[dict[str, Any]]) -> list[tuple[str, int, list[dict[str, Any]]]]:
    keys: list[tuple[str, int]] = []
    for r in records:
        if (r["mode"], r["threads"]) not in keys:
            keys.append((r["mode"], r["threads"]))
    keys.sort(key=lambda k: (list(MODE_TITLES).index(k[0]), k[1]))
    return [(mode, threads, [r for r in records if (r["mode"], r["threads"]) == (mode, threads)])
            for mode, threads in keys]


def _threads_note(threads: int) -> str:
    return (f"threads={threads} (rearrange.set_num_threads({threads}), "
            f"torch.set_num_threads({threads}); numpy's copies are single-threaded at any setting; "
            f"jax (XLA) runs on its own pool of every available core, so only at that count)")


def cases_markdown(records: list[dict[str, Any]]) -> str:
    out = []
    for mode, threads, group in _groups(records):
        out.append(f"#### {MODE_TITLES[mode]} · {_threads_note(threads)}")
        out.append("")
        out.append("GB/s counting read + write bytes (view-only cases: µs per call): median "
                   "of interleaved samples ± half their interquartile range.")
        out.append("")
        first_col = mode == "alloc"
        head = ["case", "moved", *CONTENDERS, "ra vs best peer", "ra / limit"]
        if first_col:
            head.append("ra 1st call − warm")
        out.append("| " + " | ".join(head) + " |")
        out.append("|" + "|".join(["---"] * 2 + ["---:"] * (len(head) - 2)) + "|")
        for r in group:
            moved = "view" if r["kind"] == "view" else _size(r["bytes_moved"])
            cells = [_cell(r, name) for name in CONTENDERS[:-1]] + [_limit(r)]
            row = [r["case"], moved, *cells, *_ratios(r)]
            if first_col:
                entry = r["contenders"].get("rearrange", {})
                extra = entry.get("first_call_s", math.nan) - entry.get("median_s", math.nan)
                row.append(f"{extra * 1e3:+.2f} ms")
            out.append("| " + " | ".join(row) + " |")
        out.append("")
    return "\n".join(out)


def case_list_markdown(records: list[dict[str, Any]]) -> str:
    """What each case is: pattern, input, how it was prepared, and numpy's lowering."""
    out = ["| case | pattern | input shape | input | plan (copy kernel) | numpy lowering |",
           "|---|---|---|---|---|---|"]
    seen = set()
    for r in records:
        if r["case"] in seen:
            continue
        seen.add(r["case"])
        lengths = "".join(f", {k}={v}" for k, v in r["lengths"].items())
        copy = ", copy=True" if r["copy"] else ""
        inp = r["prepare"] and f"`{r['prepare']}`" or ("contiguous" if r["input_contiguous"] else "strided")
        kind = r["kind"] + (f" ({r['copy_kernel']})" if r.get("copy_kernel") else "")
        out.append(f"| {r['case']} | `{r['pattern']}`{lengths}{copy} | {tuple(r['input_shape'])} | "
                   f"{inp} | {kind} | `{r['sources']['numpy']}` |")
    return "\n".join(out) + "\n"


def scaling_markdown(records: list[dict[str, Any]]) -> str:
    out = []
    for mode, threads, group in _groups(records):
        out.append(f"#### scaling `h w -> w h` (copy=True, float32) · {MODE_TITLES[mode]} · "
                   f"threads={threads}")
        out.append("")
        out.append("| input | " + " | ".join(CONTENDERS) + " | ra vs best peer | ra / limit |")
        out.append("|---|" + "---:|" * (len(CONTENDERS) + 2))
        for r in group:
            cells = [_cell(r, name) for name in CONTENDERS[:-1]] + [_limit(r)]
            out.append(f"| {_size(r['bytes'])} | " + " | ".join(cells) + " | "
                       + " | ".join(_ratios(r)) + " |")
        out.append("")
    return "\n".join(out)


def coldstart_markdown(records: list[dict[str, Any]]) -> str:
    out = ["| fresh process | import | first call (view) | first copy | whole process | numba loaded |",
           "|---|---:|---:|---:|---:|---|"]
    for r in records:
        m = r["metrics"]
        out.append(f"| {r['contender']} | {m['import']['median_s'] * 1e3:.0f} ms | "
                   f"{m['first_call']['median_s'] * 1e3:.2f} ms | {m['first_copy']['median_s'] * 1e3:.2f} ms | "
                   f"{m['process']['median_s'] * 1e3:.0f} ms | {'yes' if r['numba_loaded'] else 'no'} |")
    numpy_import = [r["metrics"]["import_numpy"]["median_s"] for r in records]
    if numpy_import:
        repeats = ", ".join(f"{r['repeats']} ({r['contender']})" for r in records)
        out.append("")
        out.append(f"Medians over fresh interpreters: {repeats}, interleaved. `import numpy` "
                   f"(before either, not counted above): {min(numpy_import) * 1e3:.0f} ms. "
                   "First call: `'b h t d -> b h (t d)'` on (2, 8, 128, 64) float32 (a view); "
                   "first copy: then `'h w -> (w h)'` on (1024, 1024) float32 (a 4 MiB copy: the kernel's JIT compilation, "
                   "or its load from numba's disk cache, happens here; \"empty JIT cache\" gives "
                   "each process a fresh `NUMBA_CACHE_DIR`).")
    return "\n".join(out) + "\n"


def machine_markdown(machine: dict[str, Any]) -> str:
    v = machine["versions"]
    return (f"Machine: {machine['cpu_model']}, {machine['cpus_available']} CPUs available "
            f"({machine['cpu_count']} online), {machine['memory_gib']:.0f} GiB RAM, caches "
            f"{machine['caches']}; {machine['platform']}. Python {v['python']}, numpy {v['numpy']}, "
            f"torch {v.get('torch', '—')}, einops {v.get('einops', '—')}, jax {v.get('jax', '—')}, "
            f"numba {v.get('numba', '—')}, "
            f"rearrange {v['rearrange']} ({machine['git_commit']}). OMP_WAIT_POLICY="
            f"{machine.get('omp_wait_policy', '?')}. Load average at start "
            f"{machine['loadavg_start']}, at end {machine.get('loadavg_end', '?')}; {machine['date']}.")
