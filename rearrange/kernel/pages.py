"""What the operating system says about, and does to, a destination's pages.

A destination of 24 MiB or more that the process has not touched yet (a new ``np.empty``
of that size is a fresh mapping, ``mincore`` says: :func:`untouched`) is page-faulted as
it is written. Where the copy populates such pages first, it asks for all of them at once
with ``madvise(MADV_POPULATE_WRITE)`` (Linux >= 5.14, through :func:`madvise_address`),
else writes one byte per page. Both lookups are made once, with ctypes, and never import
numba.

A fresh destination allocated by another library (``torch.empty``) gets what numpy gives
its own arrays: transparent huge pages asked for (:func:`advise_huge_pages`), so the
copy's first touch faults 2 MiB at a time instead of 4 KiB. Each call has a fallback
where the system lacks it: no huge pages asked for, a write per page, "not known".
"""

from __future__ import annotations

import functools
import sys
from typing import Any

__all__ = ["PAGE", "MADV_POPULATE_WRITE", "madvise_address", "untouched",
           "advise_huge_pages", "HUGE_PAGES_MIN_BYTES"]

PAGE = 4096                      # bytes per (small) page
HUGE_PAGE = 2 << 20              # bytes per transparent huge page (x86-64, arm64 4K)
MADV_HUGEPAGE = 14
MADV_POPULATE_WRITE = 23         # Linux >= 5.14: fault pages in writable, one call
# numpy asks for huge pages on its own arrays from this size on (its allocator's rule).
HUGE_PAGES_MIN_BYTES = 4 << 20

@functools.lru_cache(maxsize=None)
def _libc(name: str, *argtypes: type) -> Any:
    """libc's ``name`` as a ctypes function returning int (looked up once), or None
    where the system has no such call."""
    try:
        import ctypes
        function = getattr(ctypes.CDLL(None, use_errno=True), name)
    except (OSError, AttributeError):
        return None
    function.argtypes = argtypes
    function.restype = ctypes.c_int
    return function


def _madvise() -> Any:
    """libc's madvise where the MADV_* advice above may exist (Linux), else None."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes
    return _libc("madvise", ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)


def madvise_address() -> int:
    """The address of libc's madvise where MADV_POPULATE_WRITE may exist (Linux), else 0:
    the runner then writes a byte per page instead (also where the kernel refuses)."""
    madvise = _madvise()
    if madvise is None:
        return 0
    import ctypes
    return ctypes.cast(madvise, ctypes.c_void_p).value or 0


def untouched(addr: int, nbytes: int) -> bool:
    """True if the pages in the middle and at the end of [addr, addr + nbytes) are not
    resident yet (Linux mincore; the first page is not asked: the allocator writes its
    header there). False where that cannot be known."""
    import ctypes
    import mmap

    mincore = _libc("mincore", ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p)
    if mincore is None:
        return False
    page = mmap.PAGESIZE
    for a in (addr + nbytes // 2, addr + nbytes - 1):
        vec = ctypes.create_string_buffer(1)
        if mincore(a - a % page, page, vec) != 0 or vec.raw[0] & 1:
            return False
    return True


def advise_huge_pages(addr: int, nbytes: int) -> bool:
    """Ask for transparent huge pages on the 2 MiB-aligned interior of
    [addr, addr + nbytes) (Linux ``madvise(MADV_HUGEPAGE)``), as numpy does for its own
    arrays of :data:`HUGE_PAGES_MIN_BYTES` or more. Only advice: nothing is written, and
    True only if the system took it. False where there is no such call."""
    madvise = _madvise()
    start = -(-addr // HUGE_PAGE) * HUGE_PAGE
    end = (addr + nbytes) // HUGE_PAGE * HUGE_PAGE
    if madvise is None or end <= start:
        return False
    return madvise(start, end - start, MADV_HUGEPAGE) == 0
