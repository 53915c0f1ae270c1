"""numba at arm's length (rearrange.kernel.numba_private): a numba without the private
names the fast path uses compiles through its public API; a numba that cannot be imported
costs speed and one warning, never a call — in every JIT mode.

Each case runs a fresh interpreter (this very rearrange, on a cache directory of its
own) whose ``sitecustomize`` changes numba before anything imports it: the private names
stripped from ``numba.core.caching`` as it loads, or ``import numba`` raising ImportError.
The compile workers inherit it (same environment). Every operation runs on arrays large
enough to take the kernel and is checked against einops and numpy, before and after
waiting for any background compile.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rearrange.kernel.builds import MODES

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX processes")

REPO = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent("""
    import json, warnings
    import numpy as np
    import einops
    import rearrange as ra
    from rearrange import kernel as K
    from rearrange.kernel import builds

    base = (np.arange(2048 * 2048, dtype=np.uint64) * 2654435761 % 4093).reshape(2048, 2048)
    x = (base / 7).astype(np.float32)
    small = x[:512, :384]

    def operations():
        yield "rearrange", ra.rearrange(x, "h w -> (w h)"), einops.rearrange(x, "h w -> (w h)")
        yield "reduce", ra.reduce(x, "h (w two) -> w h", "max", two=2), \\
            einops.reduce(x, "h (w two) -> w h", "max", two=2)
        yield "repeat", ra.repeat(x[:1024], "h w -> w h c", c=2), \\
            einops.repeat(x[:1024], "h w -> w h c", c=2)
        packed, shapes = ra.pack([x.T, x[:, :5]], "h *")
        theirs, their_shapes = einops.pack([x.T, x[:, :5]], "h *")
        yield "pack", packed, theirs
        for i, (a, b) in enumerate(zip(ra.unpack(packed, shapes, "h *"),
                                       einops.unpack(theirs, their_shapes, "h *"))):
            yield f"unpack {i}", a, b
        yield "einsum", ra.einsum(small, small, "i j, k j -> j i k")[:8], \\
            einops.einsum(small, small, "i j, k j -> j i k")[:8]

    def run(when):
        for name, ours, theirs in operations():
            close = np.allclose if name == "einsum" else np.array_equal
            report[f"{when} {name}"] = bool(ours.shape == theirs.shape and close(ours, theirs))

    report = {"package": ra.__file__, "mode": ra.get_jit_mode()}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run("first")
        report["waited"] = K.wait(900)
        run("then")
    report["warnings"] = [f"{w.category.__name__}: {w.message}" for w in caught]
    report["status"] = builds.status("transpose", 4)
    import sys
    report["numba"] = "numba" in sys.modules
    print(json.dumps(report))
""")

# Strips the names listed in REARRANGE_TEST_STRIP ("module:name,module:name") from their
# modules as those load, in every interpreter that has this directory on its path.
STRIP = textwrap.dedent("""
    import importlib.util, os, sys

    _strip = {}
    for item in filter(None, os.environ.get("REARRANGE_TEST_STRIP", "").split(",")):
        module, name = item.split(":")
        _strip.setdefault(module, []).append(name)

    class _Strip:
        def find_spec(self, fullname, path=None, target=None):
            if fullname not in _strip:
                return None
            sys.meta_path.remove(self)
            try:
                spec = importlib.util.find_spec(fullname)
            finally:
                sys.meta_path.insert(0, self)
            run = spec.loader.exec_module

            def exec_module(module):
                run(module)
                for name in _strip[fullname]:
                    delattr(module, name)
            spec.loader.exec_module = exec_module
            return spec

    if _strip:
        sys.meta_path.insert(0, _Strip())
""")

# Makes ``import numba`` (and any numba submodule) raise ImportError.
NO_NUMBA = textwrap.dedent("""
    import sys

    class _NoNumba:
        def find_spec(self, fullname, path=None, target=None):
            if fullname == "numba" or fullname.startswith("numba."):
                raise ImportError(f"No module named {fullname!r} (hidden by the test)")
            return None

    sys.meta_path.insert(0, _NoNumba())
""")


def run(tmp_path: Path, mode: str, sitecustomize: str, extra: dict[str, str]) -> dict:
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(sitecustomize)
    cache = tmp_path / f"cache-{mode}"
    env = {k: v for k, v in os.environ.items() if k not in ("REARRANGE_JIT", "NUMBA_CACHE_DIR")}
    env.update(extra, REARRANGE_CACHE_DIR=str(cache), REARRANGE_JIT=mode,
               PYTHONPATH=os.pathsep.join([str(site), str(REPO)] +
                                          [p for p in env.get("PYTHONPATH", "").split(os.pathsep)
                                           if p]))
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, cwd=str(tmp_path),
                          capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-3000:]}"
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert Path(report["package"]).resolve().is_relative_to(REPO), report["package"]
    assert report["mode"] == mode
    return report


def assert_right(report: dict) -> None:
    results = {k: v for k, v in report.items() if k.startswith(("first ", "then "))}
    assert len(results) == 14 and all(results.values()), report


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("stripped", ["numba.core.caching:_CacheLocator",
                                      "numba.core.caching:IndexDataCacheFile"])
@pytest.mark.slow
def test_numba_without_its_private_names_compiles_publicly(tmp_path: Path, mode: str,
                                                          stripped: str) -> None:
    """A private name missing: the kernel is compiled through numba's public API in
    memory (one warning naming the name), used once ready; every result is right.
    Before, the eager mode raised ImportError in the call."""
    report = run(tmp_path, mode, STRIP, {"REARRANGE_TEST_STRIP": stripped})
    assert_right(report)
    assert report["waited"]
    if mode == "off":
        assert report["warnings"] == [] and report["status"] == "not compiled"
        return
    assert len(report["warnings"]) == 1, report["warnings"]
    assert f"lacks {stripped.replace(':', '.')}" in report["warnings"][0]
    assert "numba's public API" in report["warnings"][0]
    assert report["status"] == "ready"
    # Nothing of the public path lands on disk: no entries, no ready markers.
    cache = tmp_path / f"cache-{mode}"
    assert not cache.exists() or {p.suffix for p in cache.iterdir()} <= {".lock"}


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_numba_that_fails_to_import_costs_one_warning(tmp_path: Path, mode: str) -> None:
    """``import numba`` raises: every operation returns numpy's result in every mode,
    with one warning (none when kernels are off). Before, the eager mode raised the
    ImportError in the call, and the background mode warned once per runner."""
    report = run(tmp_path, mode, NO_NUMBA, {})
    assert_right(report)
    assert report["waited"] and not report["numba"]
    if mode == "off":
        assert report["warnings"] == [] and report["status"] == "not compiled"
        return
    assert len(report["warnings"]) == 1, report["warnings"]
    assert "numba could not be set up (ImportError" in report["warnings"][0]
    assert report["status"].startswith("failed"), report["status"]
