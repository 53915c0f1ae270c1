"""The registry of benchmark cases: what is rearranged, at which sizes, from which input.

Each case has three input shapes: ``full`` (the figures in docs/performance.md), ``quick``
(``--quick``: a CI-sized run that finishes in under a minute) and ``smoke`` (``--smoke``:
the tests' tiny run). The shape is the shape of the array *before* ``prepare``, which
turns it into the benchmark's input (a slice, a permuted view): the case then measures
``rearrange`` on a non-contiguous input.

``copy=True`` asks for a fresh contiguous result. The cases that need it are pure
permutations, which every contender returns as a view by default: a user who needs the
transposed data in memory (for a kernel, a file, a device) materialises it, and that copy
is what those cases time. The view-only cases keep ``copy=None`` and time the call.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

Shape = tuple[int, ...]


@dataclass(frozen=True)
class Case:
    name: str
    pattern: str
    full: Shape
    quick: Shape
    smoke: Shape
    dtype: str
    lengths: dict[str, int] = field(default_factory=dict)
    copy: bool | None = None                                  # rearrange's copy= argument
    prepare: Callable[[np.ndarray], np.ndarray] | None = None  # base array -> input
    prepare_note: str = ""                                    # how the input is prepared

    def shape(self, size: str) -> Shape:
        return {"full": self.full, "quick": self.quick, "smoke": self.smoke}[size]


def make_input(case: Case, size: str, seed: int = 0) -> np.ndarray:
    """The case's input: random values (a permutation bug cannot hide behind equal
    values), in the registry's dtype, prepared."""
    shape = case.shape(size)
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    dtype = np.dtype(case.dtype)
    if dtype.kind in "ui":
        info = np.iinfo(dtype)
        base = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
    elif dtype.kind == "c":
        real = dtype.itemsize // 2
        base = rng.random(2 * n, dtype=np.float64 if real == 8 else np.float32).view(dtype)
    else:
        base = rng.random(n, dtype=dtype)
    base = base.reshape(shape)
    return case.prepare(base) if case.prepare is not None else base


# ---------------------------------------------------------------------- preparations

def center_crop(x: np.ndarray) -> np.ndarray:
    """NHWC centre crop (drop 1/8 of each border of H and W): rows are strided."""
    h, w = x.shape[1], x.shape[2]
    return x[:, h // 8: h - h // 8, w // 8: w - w // 8, :]


def every_other(x: np.ndarray) -> np.ndarray:
    """Every other item of the batch: a strided first axis."""
    return x[::2]


def bthd_as_bhtd(x: np.ndarray) -> np.ndarray:
    """A (b, t, h, d) array seen as (b, h, t, d): what a q/k/v projection hands over."""
    return x.transpose(0, 2, 1, 3)


# ---------------------------------------------------------------------- the registry

NHWC, NCHW = (64, 224, 224, 3), (64, 3, 224, 224)
NHWC_Q, NCHW_Q = (2, 224, 224, 3), (2, 3, 224, 224)
NHWC_S, NCHW_S = (2, 16, 16, 3), (2, 3, 16, 16)
BHTD, BHTD_Q, BHTD_S = (32, 64, 512, 64), (2, 8, 256, 64), (2, 4, 8, 8)

CASES: list[Case] = [
    # 2-D transpose, materialised
    Case("transpose", "h w -> w h", (8192, 8192), (512, 512), (64, 64), "float32", copy=True),
    Case("transpose", "h w -> w h", (8192, 8192), (1024, 1024), (64, 64), "uint8", copy=True),
    # attention heads
    Case("heads permute", "b h t d -> b t h d", BHTD, BHTD_Q, BHTD_S, "float32", copy=True),
    Case("heads merge", "b h t d -> b t (h d)", BHTD, BHTD_Q, BHTD_S, "float32"),
    # image layouts
    Case("NHWC->NCHW", "b h w c -> b c h w", NHWC, NHWC_Q, NHWC_S, "uint8", copy=True),
    Case("NHWC->NCHW", "b h w c -> b c h w", NHWC, NHWC_Q, NHWC_S, "float32", copy=True),
    Case("NCHW->NHWC", "b c h w -> b h w c", NCHW, NCHW_Q, NCHW_S, "uint8", copy=True),
    Case("NCHW->NHWC", "b c h w -> b h w c", NCHW, NCHW_Q, NCHW_S, "float32", copy=True),
    Case("NHWC->NCHW C=64", "b h w c -> b c h w", (64, 56, 56, 64), (2, 56, 56, 64),
         (2, 8, 8, 64), "float32", copy=True),
    Case("ViT patchify", "b c (h p1) (w p2) -> b (h w) (p1 p2 c)", NCHW, NCHW_Q,
         (2, 3, 32, 32), "float32", {"p1": 16, "p2": 16}),
    Case("pixel shuffle", "b (c r1 r2) h w -> b c (h r1) (w r2)", (16, 256, 64, 64),
         (1, 64, 64, 64), (2, 16, 8, 8), "float32", {"r1": 2, "r2": 2}),
    Case("full reversal", "a b c d -> d c b a", (64, 64, 64, 64), (32, 32, 16, 16),
         (4, 5, 6, 7), "float32", copy=True),
    # wide dtypes
    Case("heads merge", "b h t d -> b t (h d)", (16, 32, 512, 64), (2, 4, 256, 64), BHTD_S,
         "float64"),
    Case("transpose", "h w -> w h", (4096, 4096), (256, 256), (32, 32), "complex128",
         copy=True),
    # non-contiguous inputs
    Case("NHWC->NCHW, cropped input", "b h w c -> b c h w", NHWC, NHWC_Q, NHWC_S, "float32",
         copy=True, prepare=center_crop, prepare_note="x[:, h//8:-h//8, w//8:-w//8]"),
    Case("ViT patchify, every other image", "b c (h p1) (w p2) -> b (h w) (p1 p2 c)",
         NCHW, (4, 3, 224, 224), (4, 3, 32, 32), "float32", {"p1": 16, "p2": 16},
         prepare=every_other, prepare_note="x[::2]"),
    # view-only: no bytes moved, the call is what is timed
    Case("transpose (view)", "h w -> w h", (8192, 8192), (512, 512), (64, 64), "float32"),
    Case("merge (view)", "b h t d -> b h (t d)", BHTD, BHTD_Q, BHTD_S, "float32"),
    Case("NHWC->NCHW (view)", "b h w c -> b c h w", NHWC, NHWC_Q, NHWC_S, "uint8"),
    Case("heads merge, permuted input (view)", "b h t d -> b t (h d)", (32, 512, 64, 64),
         (2, 256, 8, 64), (2, 8, 4, 8), "float32", prepare=bthd_as_bhtd,
         prepare_note="(b t h d).transpose(0, 2, 1, 3)"),
]


def case_label(case: Case) -> str:
    """Unique table label: name and dtype."""
    return f"{case.name} {case.dtype}"


def select(cases: list[Case], filters: list[str] | None) -> list[Case]:
    if not filters:
        return cases
    wanted = [f.lower() for f in filters]
    return [c for c in cases if any(w in case_label(c).lower() or w in c.pattern for w in wanted)]
