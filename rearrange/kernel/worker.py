"""The compile worker: ``python -m rearrange.kernel.worker [--locked=FD | --shared]
FAMILY:UNIT ...``, started by :mod:`.builds`.

Compiles each runner into the disk cache (or loads it, if another process got there
first) and writes its ready marker; exits 0, or 1 with the reason as the last line of
stderr. ``--locked=FD``: one runner, whose lock this process inherited already held
(its parent may exit meanwhile: the lock stays held until this process is done); else
each runner's lock is taken here. ``--shared``: other workers were given the same
runners, each compiled by whichever takes it first (:func:`.builds.build_shared`). Runs
at a lower priority than the processes whose copies it compiles for. Exits
:data:`.builds.NO_DISK_CACHE` (3) at once when this numba cannot cache runners on disk
(:mod:`.numba_private`'s public path): its parent compiles in memory instead.
"""

from __future__ import annotations

import os
import sys


def main(argv: list[str]) -> int:
    from . import builds

    builds.set_jit_mode("eager")
    if hasattr(os, "nice"):
        try:
            os.nice(5)
        except OSError:
            pass
    locked = any(arg.startswith("--locked=") for arg in argv)
    try:
        from . import loops  # noqa: F401 - registers the kernels before numba wraps them
        from .jit import disk_cache_supported

        if not disk_cache_supported():
            # This numba has no disk cache (.numba_private): nothing could be handed back.
            print("this numba cannot cache kernels on disk", file=sys.stderr)
            return builds.NO_DISK_CACHE
        keys = [(family, int(unit)) for family, unit in
                (arg.split(":") for arg in argv if not arg.startswith("--"))]
        if "--shared" in argv:
            builds.build_shared(keys)
        else:
            for key in keys:
                builds.build_here(key, lock=not locked)
    except Exception as error:  # noqa: BLE001 — the parent reports it
        print(f"{type(error).__name__}: {error}".replace("\n", " "), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    status = main(sys.argv[1:])
    # Everything this process made is on disk (entries and markers are renamed into
    # place, closed) and its report is on stderr: leave without the interpreter's
    # teardown of numba and LLVM, about 0.7 s that its parent (warmup) would wait for.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
