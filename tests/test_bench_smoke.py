"""The benchmark harness runs end to end (tiny shapes): a table, a JSON file, the plots.

Benchmarks are not tests: this asserts that the harness works, never a timing.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest

BENCH = pathlib.Path(__file__).resolve().parents[1] / "bench"


def run_bench(script: str, *args: str, timeout: int = 300) -> str:
    """The output of ``bench/<script> args``, which must exit 0 (else its stderr fails
    the test)."""
    done = subprocess.run([sys.executable, str(BENCH / script), *args],
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-4000:]
    return done.stdout


def ratio_rows(stdout: str) -> list[str]:
    """The table rows of a script's output that end in a ratio."""
    return [line for line in stdout.splitlines() if line.startswith("| ") and
            line.endswith("× |")]


@pytest.mark.slow
def test_harness_smoke_run(tmp_path: pathlib.Path) -> None:
    pytest.importorskip("matplotlib", reason="the bench extra (matplotlib) is not installed")
    if not (BENCH / "run.py").exists():
        pytest.skip(f"no benchmark harness at {BENCH}")
    stdout = run_bench("run.py", "--smoke", "--out", str(tmp_path))

    assert "| case | moved | rearrange | numpy | einops | torch | jax | limit |" in stdout
    assert "ra/numpy" in stdout and "first copy" in stdout  # overhead, cold start
    result = json.loads((tmp_path / "smoke.json").read_text())
    assert result["machine"]["cpu_model"] and result["machine"]["versions"]["numpy"]
    assert set(result["records"]) == {"overhead", "coldstart", "cases", "scaling", "ops"}
    cases = result["records"]["cases"]
    assert {r["threads"] for r in cases} == {1, 2}
    assert {r["kind"] for r in cases} == {"copy", "view"}
    assert all("rearrange" in r["contenders"] for r in cases if r["mode"] == "alloc")
    # jax (XLA) races only at its own pool's thread count, and never into out=
    jax_threads = result["machine"]["cpus_available"]
    for r in cases:
        takes_part = (r["mode"] == "alloc" and r["threads"] == jax_threads
                      and r["kind"] == "copy")
        assert ("jax" in r["contenders"]) == takes_part, (r["case"], r["mode"], r["threads"])
        if not takes_part:
            assert r["missing"]["jax"].startswith("n/a"), r["missing"]
    assert (tmp_path / "smoke.md").read_text().startswith("# rearrange benchmarks")
    for png in ("smoke-cases-alloc.png", "smoke-cases-prealloc.png", "smoke-scaling.png",
                "smoke-ops.png"):
        assert (tmp_path / png).stat().st_size > 0, png

    summary = run_bench("summary.py", str(tmp_path / "smoke.json"), timeout=60)
    rows = [line for line in summary.splitlines() if line.startswith("| ")]
    copies = {r["case"] for r in cases if r["kind"] == "copy"}
    assert len(rows) == 1 + len(copies)          # the header, then one row per copy case
    assert "geometric mean" in summary

    # Several runs (here the same one twice): a row per copy case and thread count, each
    # counting its runs; identical runs have an empty range around the median.
    across = run_bench("summary.py", str(tmp_path / "smoke.json"),
                       str(tmp_path / "smoke.json"), "--threads", "2,1", timeout=60)
    rows = [line.split(" | ") for line in across.splitlines() if line.startswith("| ")][1:]
    assert len(rows) == 2 * len(copies), across
    for row in rows:
        median, spread = row[3].split(" (")
        assert row[2] == "2" and spread == f"{median[:-1]}–{median[:-1]})", row
        assert row[4] in ("0 of 2", "2 of 2"), row
    assert across.count("each run: ") == 2, across


@pytest.mark.slow
def test_ops_suite_smoke_run(tmp_path: pathlib.Path) -> None:
    """``run.py --suite ops`` (#39: every operation against the best peer) on tiny
    shapes: every case of race_ops.py checked against rearrange and timed beside its
    peers, a record per case with the best peer and the ratios, the table, the plot."""
    pytest.importorskip("einops", reason="einops is a peer of every case")
    stdout = run_bench("run.py", "--smoke", "--suite", "ops", "--threads", "2", "--rounds",
                       "1", "--out", str(tmp_path), "--name", "ops")
    result = json.loads((tmp_path / "ops.json").read_text())
    records = result["records"]["ops"]
    assert [r["family"] for r in records] == (
        ["einsum"] * 2 + ["reduce"] * 5 + ["repeat", "pack"])
    for r in records:
        assert r["threads"] == 2 and "rearrange" in r["contenders"], r["case"]
        assert {"numpy", "einops numpy"} & set(r["contenders"]), r["case"]
        assert r["best_peer"] in r["contenders"] and r["ratio_vs_best_peer"] > 0
        # a peer either ran or says why not
        for peer in ("numpy", "einops numpy", "torch", "einops torch", "jax"):
            assert (peer in r["contenders"]) != (peer in r["missing"]), (r["case"], peer)
    chain = next(r for r in records if r["case"].startswith("einsum chain"))
    assert chain["missing"]["einops numpy"].startswith("n/a")
    rows = [line for line in stdout.splitlines() if line.startswith("| ") and
            not line.startswith("| case")]
    assert len(rows) == len(records) and all(row.endswith("× |") for row in rows), stdout
    assert "## ops: every operation against the best peer" in (tmp_path / "ops.md").read_text()
    if _has("matplotlib"):
        assert (tmp_path / "ops-ops.png").stat().st_size > 0


def test_race_ops_checks_every_contender() -> None:
    """A contender whose result differs is refused before any timing."""
    import importlib
    sys.path.insert(0, str(BENCH))
    try:
        race_ops = importlib.import_module("race_ops")
    finally:
        sys.path.remove(str(BENCH))
    x = np.arange(6.0)
    good = race_ops.OpCase("same", "copy", {"rearrange": x.copy, "numpy": x.copy})
    race_ops.check(good)
    bad = race_ops.OpCase("off by one", "copy", {"rearrange": x.copy, "numpy": lambda: x + 1})
    with pytest.raises(race_ops.MismatchError, match="numpy"):
        race_ops.check(bad)
    close = race_ops.OpCase("rounding", "einsum", {"rearrange": x.copy,
                                                  "numpy": lambda: x * (1 + 1e-7)},
                            exact=False)
    race_ops.check(close)


def _has(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


@pytest.mark.slow
def test_transpose_patterns_smoke_run() -> None:
    """bench/transpose_patterns.py runs end to end on a small array (large enough to be
    staged); its transposes are checked against numpy inside the script before anything
    is timed."""
    pytest.importorskip("numba", reason="the probes are compiled with numba")
    if not (BENCH / "transpose_patterns.py").exists():
        pytest.skip(f"no {BENCH / 'transpose_patterns.py'}")
    stdout = run_bench("transpose_patterns.py", "--n", "2048", "--rounds", "1",
                       "--threads", "2")
    rows = [line for line in stdout.splitlines() if line.startswith("| ")]
    assert len(rows) == 1 + 13                   # the header, then the 13 patterns
    assert "| transpose: rearrange's kernel (staged-transpose) |" in stdout
    assert "| transpose: register tiles (tiled-transpose) |" in stdout
    assert "1.00× |" in stdout                   # the kernel against itself


@pytest.mark.slow
def test_staged_ab_smoke_run() -> None:
    """bench/staged_ab.py times both plans of a staged transpose and of a staged
    interleave (each checked against numpy first) at 1 and 2 threads, into out= and
    allocating: four rows per copy."""
    pytest.importorskip("numba", reason="the kernel is compiled with numba")
    stdout = run_bench("staged_ab.py", "--n", "2048", "--rounds", "1", "--dtypes", "uint8",
                       "--images", "42 224")   # 24.1 MiB: just large enough to be staged
    for copy in ("| uint8 2048² transpose |", "| ViT patchify (42, 3, 224, 224) |"):
        rows = [line for line in stdout.splitlines() if line.startswith(copy)]
        assert len(rows) == 4 and all(row.endswith("× |") for row in rows), stdout


@pytest.mark.slow
def test_fresh_ab_smoke_run() -> None:
    """bench/fresh_ab.py writes fresh results three ways (each checked against numpy
    first), beside numpy and the limit, at 1 and 2 threads: two rows per copy."""
    pytest.importorskip("numba", reason="the kernel is compiled with numba")
    stdout = run_bench("fresh_ab.py", "--quick", "--rounds", "1", "--min-sample", "0",
                       "--cases", "heads permute,uint8")
    rows = [line for line in stdout.splitlines() if line.startswith("| ") and
            "GB/s" not in line]
    assert len(rows) == 4, stdout
    assert sum("| regular: populate+stream " in row for row in rows) == 2, stdout
    assert sum("| populate+stream: regular " in row for row in rows) == 2, stdout


@pytest.mark.slow
def test_fresh_bound_smoke_run() -> None:
    """bench/fresh_bound.py times the ways of a transpose into fresh pages (the banded
    ones checked against numpy first): a row per copy that populates first, the uint8
    transpose among them, each with six ways and two paired ratios."""
    pytest.importorskip("numba", reason="the kernel is compiled with numba")
    stdout = run_bench("fresh_bound.py", "--quick", "--rounds", "1", "--min-sample", "0")
    rows = [line for line in stdout.splitlines() if line.startswith("| ") and
            "limit, ms" not in line]
    assert any(row.startswith("| transpose uint8 ") for row in rows), stdout
    for row in rows:
        assert row.count("%) |") == 6 and len(row.split("|")[-2].split(",")) == 2, row


def test_pow2_strides_smoke_run() -> None:
    """bench/pow2_strides.py times power-of-two strides beside their neighbours (each
    copy checked against numpy first) at 1 and 2 threads: seven rows per thread count."""
    pytest.importorskip("numba", reason="the kernel is compiled with numba")
    stdout = run_bench("pow2_strides.py", "--n", "512", "--side", "16", "--rounds", "1",
                       "--min-sample", "0")
    assert len(ratio_rows(stdout)) == 14, stdout


def test_copy_in_cache_smoke_run() -> None:
    """bench/copy_in_cache.py times ViT patchify of every other image and the limit,
    into fresh and existing results (each copy checked against numpy's first): a line
    per batch size with its four rates."""
    pytest.importorskip("numba", reason="the kernel is compiled with numba")
    stdout = run_bench("copy_in_cache.py", "--images", "2,4", "--rounds", "1",
                       "--min-sample", "0")
    lines = [line for line in stdout.splitlines() if line.endswith(" GB/s")]
    assert [line.split(" images")[0] for line in lines] == ["1 of 2", "2 of 4"], stdout
    names = ("ours, fresh result", "limit, fresh result", "ours, out=", "limit, out=")
    assert all(all(f"{name} " in line for name in names) for line in lines), stdout


def test_after_pause_smoke_run() -> None:
    """bench/after_pause.py times the attention einsum, ours and torch's (each checked
    against numpy's product first), after each pause at 1 and 2 threads: a row each."""
    pytest.importorskip("numba", reason="the kernel is compiled with numba")
    pytest.importorskip("torch")
    stdout = run_bench("after_pause.py", "--rounds", "1", "--pauses", "0,1",
                       "--shape", "1,2,64,32")
    assert len(ratio_rows(stdout)) == 4, stdout


@pytest.mark.slow
def test_tile_geometry_ab_smoke_run() -> None:
    """bench/tile_geometry_ab.py runs each geometry in its own process (each copy checked
    against numpy first there): a row per copy and thread count, with the ratio."""
    pytest.importorskip("numba", reason="the kernel is compiled with numba")
    stdout = run_bench("tile_geometry_ab.py", "--quick", "--processes", "1", "--rounds",
                       "1", "--min-sample", "0", timeout=600)
    rows = ratio_rows(stdout)
    assert len(rows) == 18, stdout
    assert all("| tiled-transpose |" in row for row in rows), stdout


def test_transpose_patterns_rejects_a_size_off_its_blocks() -> None:
    script = BENCH / "transpose_patterns.py"
    if not script.exists():
        pytest.skip(f"no {script}")
    done = subprocess.run([sys.executable, str(script), "--n", "300"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "multiple of 256, got 300" in done.stderr


@pytest.mark.slow
def test_checkout_ab_smoke_run() -> None:
    """bench/checkout_ab.py times the suite's copies with each tree's package (each copy
    checked against einops first there): the installed package against itself, a row
    per copy case of the registry with its paired ratio."""
    pytest.importorskip("numba", reason="the kernel is compiled with numba")
    pytest.importorskip("einops", reason="the copies are checked against einops")
    import rearrange

    tree = str(pathlib.Path(rearrange.__file__).resolve().parents[1])
    stdout = run_bench("checkout_ab.py", tree, tree, "--size", "smoke", "--rounds", "2",
                       "--samples", "1", "--min-sample", "0", timeout=600)
    assert len(ratio_rows(stdout)) == 16, stdout


def test_alone_smoke_run() -> None:
    """bench/alone.py times one case with each contender in processes of its own (each
    result checked against numpy's copy first there): a row per contender."""
    pytest.importorskip("numba", reason="the kernel is compiled with numba")
    stdout = run_bench("alone.py", "--case", "NCHW->NHWC uint8", "--contenders",
                       "rearrange,numpy", "--processes", "1", "--samples", "1",
                       "--min-sample", "0", "--size", "smoke")
    rows = [line for line in stdout.splitlines() if line.startswith("| ") and
            not line.startswith("| contender")]
    assert [row.split(" | ")[0] for row in rows] == ["| rearrange", "| numpy"], stdout


@pytest.mark.slow
def test_spin_ab_smoke_run() -> None:
    """bench/spin_ab.py times the suite's copies with spinning workers and sleeping
    ones in one process (each copy checked against einops first): a row per copy case
    with its paired ratio, and the spin put back as it was."""
    pytest.importorskip("numba", reason="the kernel is compiled with numba")
    pytest.importorskip("einops", reason="the copies are checked against einops")
    stdout = run_bench("spin_ab.py", "--size", "smoke", "--rounds", "2", timeout=600)
    assert len(ratio_rows(stdout)) == 16, stdout
    assert "spin 200 us against 0" in stdout
