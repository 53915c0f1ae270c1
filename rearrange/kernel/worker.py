"""The compile worker: ``python -m rearrange.kernel.worker``, started by :mod:`.builds`.

Reads one ``family unit`` line per runner from stdin, compiles it into the disk cache (or
loads it, if another process got there first), writes its ready marker and answers
``ok`` — or ``error <reason>`` — on stdout. Exits at the end of its input: when the
process that started it exits, after finishing the runner in hand. It runs at a lower
priority than the processes whose copies it compiles for.
"""

from __future__ import annotations

import os
import sys


def main() -> int:
    from . import builds

    builds.set_jit_mode("eager")
    if hasattr(os, "nice"):
        try:
            os.nice(5)
        except OSError:
            pass
    for line in sys.stdin:
        try:
            family, unit = line.split()
            key = (family, int(unit))
            builds.build_here(key, lock=False)     # the parent holds its lock
            answer = "ok"
        except Exception as error:  # noqa: BLE001 — answered, the parent reports it
            answer = f"error {type(error).__name__}: {error}".replace("\n", " ")
        sys.stdout.write(answer + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
