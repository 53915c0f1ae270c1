"""The einops corpus: real einops calls from public code (tests/data/einops_patterns.jsonl).

Each entry has the op, the pattern, the axis lengths, and either an example (input shape
and the output shape einops gave) or the error einops raised.
"""

from __future__ import annotations

import json
import pathlib

import pytest

CORPUS_PATH = pathlib.Path(__file__).resolve().parent / "data" / "einops_patterns.jsonl"


def load(op: str, kind: str = "example") -> list:
    """``pytest.param`` per corpus line of ``op`` that has ``kind`` ("example": a valid
    call with its shapes; "example_error": the error einops raised), id = line number."""
    params = []
    for number, line in enumerate(CORPUS_PATH.read_text().splitlines(), 1):
        entry = json.loads(line)
        if entry["op"] == op and kind in entry:
            params.append(pytest.param(entry, id=f"line{number}"))
    return params
