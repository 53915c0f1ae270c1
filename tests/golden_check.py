"""Golden files for printed output: the text must equal the file;
``REARRANGE_UPDATE_GOLDEN=1`` rewrites the file instead (after an intended change)."""

from __future__ import annotations

import os
import pathlib


def assert_matches_golden(text: str, path: pathlib.Path) -> None:
    if os.environ.get("REARRANGE_UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert text == path.read_text()
