"""Render the pictures of docs/explain.md: ``python docs/render_pictures.py``.

Each picture comes from the ``rearrange`` command itself: ``rearrange explain ... --svg
docs/img/NAME.svg --html PAGE`` writes the SVG and the standalone page, and a headless
Chromium (Debian's ``chromium``) renders the page into ``docs/img/NAME.png``. The tests
render a page the same way (tests/test_picture.py) and check that the committed SVGs
are what the code draws now.
"""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

IMAGES = pathlib.Path(__file__).resolve().parent / "img"

# name -> the arguments of `rearrange explain` it pictures
CASES = {
    # the seed documents' examples
    "seed_transpose": ["h w -> w h", "--shape", "3,4", "--dtype", "int64"],
    "seed_transposed_reshape": ["h w -> (h w)", "--shape", "3,2", "--strides", "1,3",
                                "--dtype", "int64"],
    "seed_permute_view": ["a b c -> (a c b)", "--shape", "2,3,2"],
    # classic cases
    "heads_merge": ["b h t d -> b t (h d)", "--shape", "2,8,128,64"],
    "broadcast_repeat": ["h w -> b h w", "b=3", "--op", "repeat", "--shape", "2,3"],
    "pixel_shuffle": ["b (c r1 r2) h w -> b c (h r1) (w r2)", "r1=2", "r2=2",
                      "--shape", "1,8,2,3"],
}


def chromium() -> str | None:
    """The headless browser of the system's packages, if installed."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


def command() -> list[str]:
    """The installed ``rearrange`` command beside this Python, else ``python -m``."""
    script = pathlib.Path(sys.executable).with_name("rearrange")
    return [str(script)] if script.exists() else [sys.executable, "-m", "rearrange"]


def explain(arguments: list[str], svg: pathlib.Path, page: pathlib.Path) -> str:
    """Run ``rearrange explain`` writing the picture and the page; its printed table."""
    result = subprocess.run([*command(), "explain", *arguments, "--svg", str(svg),
                             "--html", str(page)], capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        raise RuntimeError(f"rearrange explain {arguments} failed: {result.stderr}")
    return result.stdout


def page_size(table: str, svg: str) -> tuple[int, int]:
    """The window that shows the whole page: the table's lines, then the picture."""
    width, height = (int(v) for v in re.search(r'width="(\d+)" height="(\d+)"', svg).groups())
    lines = table.rstrip("\n").count("\n") + 1
    columns = max(len(line) for line in table.splitlines())
    return max(width, int(columns * 7.3)) + 40, int(lines * 16.2) + height + 64


def screenshot(page: pathlib.Path, png: pathlib.Path, size: tuple[int, int],
               dark: bool = False) -> None:
    """Render ``page`` with headless Chromium into ``png`` at ``size`` (width, height),
    in the light or (``dark``: ``prefers-color-scheme: dark``) the dark theme."""
    browser = chromium()
    if browser is None:
        raise RuntimeError("chromium is not installed: apt-get install chromium")
    with tempfile.TemporaryDirectory() as profile:
        result = subprocess.run(
            [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", "--hide-scrollbars", "--force-device-scale-factor=1",
             *(["--force-dark-mode"] if dark else []),
             f"--user-data-dir={profile}", f"--screenshot={png}",
             f"--window-size={size[0]},{size[1]}", page.resolve().as_uri()],
            capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    if result.returncode != 0 or not png.exists():
        raise RuntimeError(f"chromium did not render {page}: {result.stderr[-2000:]}")


def render(name: str, directory: pathlib.Path, work: pathlib.Path) -> pathlib.Path:
    """Write ``NAME.svg`` and ``NAME.png`` of case ``name`` into ``directory``."""
    svg, page = directory / f"{name}.svg", work / f"{name}.html"
    table = explain(CASES[name], svg, page)
    png = directory / f"{name}.png"
    screenshot(page, png, page_size(table, svg.read_text(encoding="utf-8")))
    return png


def main() -> int:
    IMAGES.mkdir(exist_ok=True)
    os.environ.setdefault("REARRANGE_JIT", "off")   # the kernel line must not change
    with tempfile.TemporaryDirectory() as work:
        for name in CASES:
            png = render(name, IMAGES, pathlib.Path(work))
            print(f"{png.relative_to(IMAGES.parent.parent)}  {png.stat().st_size:,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
