"""einsum of jax arrays (through the array API): rearrange.einsum vs jnp.einsum.

    python bench/array_api_einsum.py [--rounds 15] [--product]

The attention-scores case, q of shape (4, 8, 256, 64) float32, ``'b h t d, b h s d -> b h
t s'``. Both contenders run in one process, interleaved round by round on the same
array; jax's first call (tracing, compilation) is warm-up and excluded. The table gives
the best and median per-call time and the paired ratio ``ra/jnp`` (the target: within
3x). ``--product`` also times the broadcast-product stand-in that namespaces without an
einsum use (it builds a 512 MiB temporary).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # run as a script: bench/ is on sys.path already
    sys.path.insert(0, str(Path(__file__).resolve().parent))

from timing import interleaved, paired_ratio  # noqa: E402

PATTERN = "b h t d, b h s d -> b h t s"
SUBSCRIPTS = "bhtd,bhsd->bhts"
SHAPE = (4, 8, 256, 64)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--product", action="store_true",
                        help="also time the broadcast-product stand-in")
    args = parser.parse_args(argv)

    import jax
    import jax.numpy as jnp

    import rearrange as ra

    q = jnp.asarray(np.random.default_rng(0).standard_normal(SHAPE).astype(np.float32))
    calls = {
        "rearrange.einsum": lambda: ra.einsum(q, q, PATTERN).block_until_ready(),
        "jnp.einsum": lambda: jnp.einsum(SUBSCRIPTS, q, q).block_until_ready(),
    }
    if args.product:
        from rearrange.backends import _array_api

        calls["broadcast product"] = lambda: _array_api.broadcast_einsum(
            "abcd,abed->abce", q, q).block_until_ready()
    np.testing.assert_allclose(np.asarray(calls["rearrange.einsum"]()),
                               np.asarray(calls["jnp.einsum"]()), rtol=1e-5, atol=1e-4)
    timings = interleaved(calls, rounds=args.rounds, min_sample=0.05)
    print(f"jax {jax.__version__}, q {SHAPE} float32, {PATTERN!r}, {args.rounds} rounds\n")
    print("| contender | best ms | median ms | / jnp.einsum (paired) |")
    print("|---|---:|---:|---:|")
    for name, timing in timings.items():
        ratio = paired_ratio(timing, timings["jnp.einsum"])
        print(f"| {name} | {min(timing.samples) * 1e3:.2f} | {timing.median * 1e3:.2f} | "
              f"{ratio:.2f} |")


if __name__ == "__main__":
    main()
