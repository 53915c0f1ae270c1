"""Reading a plan's picture back: every array drawn (``<g class="array">``), its
attributes, and per drawn cell (by logical index) the storage position it reads, the
input element it holds and what it reduces. Shared by the picture tests."""

from __future__ import annotations

import xml.etree.ElementTree as ET

SVG = "{http://www.w3.org/2000/svg}"


def arrays_of(svg: str) -> list[dict]:
    """Every array drawn: its attributes, and per drawn cell (by logical index) the
    storage position it reads, the input element it holds and what it reduces."""
    root = ET.fromstring(svg)
    assert root.tag == SVG + "svg"
    arrays = []
    for group in root.iter(SVG + "g"):
        if group.get("class") != "array":
            continue
        cells, strip = {}, {}
        for rect in group.iter(SVG + "rect"):
            if rect.get("data-index") is not None:
                index = tuple(int(i) for i in rect.get("data-index").split(",") if i != "")
                cells[index] = rect.attrib
            elif rect.get("data-position") is not None:
                strip[int(rect.get("data-position"))] = rect.attrib
        arrays.append({
            "step": group.get("data-step"), "op": group.get("data-op"),
            "kind": group.get("data-kind"), "storage": group.get("data-storage"),
            "shape": _ints(group.get("data-shape")), "strides": _ints(group.get("data-strides")),
            "offset": int(group.get("data-offset")), "cells": cells, "strip": strip,
        })
    return arrays


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(v) for v in text.split(",") if v != "")
