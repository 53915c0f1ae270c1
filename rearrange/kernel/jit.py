"""Compilation: numba, imported when a runner is first loaded or compiled, never before.

The loop nests (:mod:`.loops`) are plain Python functions. ``@jit`` registers them; the
first :func:`compile_runner` (or call of a registered function) imports numba, defines the
intrinsics (:mod:`.intrinsics`) and binds them, with ``carray`` and the staged
transposes' word table, in the registered functions' modules (where they stand as
``None`` placeholders until then), wraps every
registered function in a numba dispatcher and rebinds its name in its module to it, so
that jitted callers see jitted callees. All of that happens once per process. Whatever
touches numba's private API is in :mod:`.numba_private` (the seam), which falls back to
numba's public API — in memory, no disk cache — when a private name is missing.

numba that cannot be imported or set up costs speed, never a call: :func:`materialise`
then warns once and raises :class:`KernelUnavailable`, which :mod:`.builds` turns into
the array library's own copy for the rest of the process.

What runs is a *runner*: one C-ABI function (``numba.cfunc``) per panel family and unit
size, called through ctypes by the caller and the pool workers alike. Only runners are
cached on disk; the functions they call are compiled into them (and kept in memory for
the next runner this process compiles), never cached on their own — so concurrent
processes never write the same cache file, and each runner's entry is one index file and
one data file of its own.

The disk cache (:func:`cache_directory`) is ``REARRANGE_CACHE_DIR``, else
``$NUMBA_CACHE_DIR/rearrange``, else the kernel's own ``__pycache__`` when it is writable,
else the user's cache directory (``~/.cache/rearrange/<install>`` on Linux); None when
none of them is writable (runners are then compiled in memory only). An entry is keyed by
the runner's signature, the CPU (numba's target name and features) and :func:`source_stamp`
— a hash of every kernel module's source and numba's version — so an edit to any file the
compiled code depends on, not only ``loops.py``, retires the old entries.

The cache is verified, not trusted (:mod:`.sealed`, :mod:`.numba_private`): every index and data file is
written whole under a temporary name and renamed into place, with a header naming what it
is for (the runner's file name, the source stamp and, for data, a digest of its index key:
signature and CPU) and the sha256 of its payload. Nothing is unpickled, nor native code
loaded, from a file whose payload does not hash to what was written, or that was written
for another entry. Such an entry — or one whose load fails in any other way — is
discarded (its files deleted, best-effort) and compiled again, with one warning per
process. A cache that cannot be written (full, read-only underneath) costs speed, not a
call: the runner is compiled in memory (one warning), and later runners of the process
are not saved.

When a runner may be compiled is :mod:`.builds`' decision: here, :func:`compile_runner`
either compiles or (``compile=False``) only loads an entry that is already on disk.
"""

from __future__ import annotations

import os
import sys
import threading
import types
from typing import Callable, Iterator
from pathlib import Path

import numpy as np

__all__ = ["UNIT_DTYPES", "jit", "materialise", "prepare", "compile_runner",
           "cache_directory", "cache_writable", "cache_warning", "source_stamp",
           "KernelUnavailable", "unavailable", "disk_cache_supported"]

# The unit sizes a runner is compiled for, each moved as this unsigned integer type.
UNIT_DTYPES = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}

# The modules whose source the compiled runners depend on.
_KERNEL_SOURCES = ("abi.py", "gemm.py", "intrinsics.py", "jit.py", "loops.py",
                   "mailbox.py", "numba_private.py", "pages.py", "plan.py", "rowjoin.py",
                   "rowmax.py", "rowsums.py", "sealed.py")

_build_lock = threading.RLock()
_built = False
_registry: dict[str, tuple] = {}
# What materialise() binds in the loops' modules (the intrinsics, carray, _STAGE_WORDS),
# once built.
_bindings: dict[str, object] = {}


# A registered function before numba has compiled it: calling it compiles them all. (No
# class docstring: ``__doc__`` is a slot, the function's.)
class LazyKernel:
    __slots__ = ("func", "options", "__name__", "__doc__")

    def __init__(self, func, options):
        self.func = func
        self.options = options
        self.__name__ = func.__name__
        self.__doc__ = func.__doc__

    def __call__(self, *args):
        materialise()
        return self.func.__globals__[self.__name__](*args)

    def __repr__(self):
        return f"<lazy numba kernel {self.__name__}>"


def jit(**options):
    """Register a plain function as a numba kernel, compiled lazily with ``options``."""
    def wrap(func):
        lazy = LazyKernel(func, options)
        _registry[func.__name__] = (func, options)
        return lazy
    return wrap


class KernelUnavailable(RuntimeError):
    """numba cannot be imported or set up in this process: no runner loads or compiles,
    copies use the array library's own (internal: :mod:`.builds` turns it into that)."""


_unavailable: str | None = None     # why numba cannot be used here; None: not known so


def unavailable() -> str | None:
    """Why no kernel can run in this process (numba failed to import or set up), or None
    (none seen yet: numba may still be untried)."""
    return _unavailable


def bind_once(namespace: dict, make: Callable[[], dict]) -> None:
    """``namespace.update(make())`` once per module (its ``_bound`` flag): the names a
    module's compiled loops read as globals (intrinsics defined with numba, the loops'
    chunk claims), bound before any of them is compiled. numba is imported first
    (:func:`materialise` raises KernelUnavailable where it cannot be)."""
    if namespace.get("_bound"):
        return
    materialise()
    with _bind_lock:
        if not namespace.get("_bound"):
            namespace.update(make())
            namespace["_bound"] = True


_bind_lock = threading.Lock()


def materialise() -> None:
    """Import numba and wrap every registered function, once; see the module's
    docstring. Nothing is compiled here: a function is compiled when a runner (or a call)
    first needs it. Raises KernelUnavailable (warning once) when numba cannot be
    imported or set up."""
    # Invariant: the kernel modules (loops, mailbox) are imported — their @jit functions
    # registered — before this runs; their importers (builds, worker, the CLI) see to
    # it, as this module cannot import them (they import it).
    global _built, _compiler, _unavailable
    if _built:
        return
    if _unavailable is not None:
        raise KernelUnavailable(_unavailable)
    _guard_fork()
    with _build_lock:
        if _built:
            return
        if _unavailable is not None:
            raise KernelUnavailable(_unavailable)
        try:
            import numba

            from . import numba_private
            from .intrinsics import define_intrinsics, stage_words_table

            chosen = numba_private.compiler()
            bindings = dict(define_intrinsics())
            bindings["_STAGE_WORDS"] = stage_words_table(tuple(UNIT_DTYPES))
            bindings["carray"] = numba.carray
        except Exception as error:  # noqa: BLE001 — any failure: the kernel is off here
            _unavailable = f"numba could not be set up ({type(error).__name__}: {error})"
            cache_warning(f"rearrange: {_unavailable}; copies use the array library's "
                          "own copy in this process")
            raise KernelUnavailable(_unavailable) from error
        if chosen.missing is not None:
            _note_unwritable(
                f"rearrange: numba {numba.__version__} lacks {chosen.missing}, which the "
                "copy kernels' disk cache uses: they are compiled with numba's public API, "
                "in memory, in each process that needs them")
        _bindings.update(bindings)
        for func, _ in _registry.values():
            func.__globals__.update(_bindings)
        for name, (func, options) in _registry.items():
            func.__globals__[name] = chosen.dispatcher(func, options)
        _compiler = chosen
        _built = True


_compiler = None       # numba_private's compiler for this process, once materialised


def disk_cache_supported() -> bool:
    """Whether runners can be cached on disk with this numba (:mod:`.numba_private`
    picked its private path). Imports numba; raises KernelUnavailable."""
    materialise()
    return _compiler.disk_cache


def prepare() -> None:
    """:func:`materialise`, and numba's CPU target (its LLVM codegen) initialised: what
    the first load of a cached runner would otherwise do."""
    materialise()
    from numba.core.registry import cpu_target

    # Under the build lock, like numba's import: a fork waits for it (a child forked
    # mid-refresh inherited half-run generators of numba's entry-point discovery, and
    # its own first load failed with "generator already executing").
    with _build_lock:
        cpu_target.target_context.refresh()


def _reset_build_lock_in_child() -> None:
    global _build_lock
    _build_lock = threading.RLock()


# A fork waits until no thread of this process is loading or compiling a runner: a child
# must not inherit _build_lock, or numba's compiler lock, held by a thread it does not
# have (its first load would wait forever). The wait must come before any other module's
# fork handler takes its lock: os.fork runs the "before" handlers newest first, and a
# load imports modules (numba imports logging; executors) whose handlers take locks the
# loading thread itself may need next — registered after this one, they would run first
# and the fork would wait on a load that waits on the fork (seen: logging's lock, while
# numba's import chain called getLogger). So the handler is registered by the first load
# (_guard_fork, in the loading thread: never in a copy's), after those modules' own.
_fork_guarded = False


def _guard_fork() -> None:
    global _fork_guarded
    if _fork_guarded or not hasattr(os, "register_at_fork"):
        return
    import concurrent.futures.thread  # noqa: F401  (its fork handler: its shutdown lock)
    import logging  # noqa: F401  (its fork handler: the logging module's lock)

    with _build_lock:
        if _fork_guarded:
            return
        _fork_guarded = True
        os.register_at_fork(before=lambda: _build_lock.acquire(),
                            after_in_parent=lambda: _build_lock.release(),
                            after_in_child=_reset_build_lock_in_child)


# --------------------------------------------------------------------------- disk cache

_stamp: str | None = None
_directory: tuple[str | None] | None = None


def source_stamp() -> str:
    """A hash of the kernel modules' sources, numba's version and Python's: what a cached
    runner was compiled from. Computed once per process (a few files, ~1 ms)."""
    global _stamp
    if _stamp is None:
        import hashlib

        digest = hashlib.sha256()
        here = Path(__file__).resolve().parent
        for name in _KERNEL_SOURCES:
            digest.update(name.encode() + b"\0" + (here / name).read_bytes())
        digest.update(_numba_identity() + f" python {sys.version_info[:2]}".encode())
        from .plan import SIMD_TILE, SIMD_TILE_G2     # baked into the register tiles
        digest.update(f"tiles {SIMD_TILE} {SIMD_TILE_G2}".encode())
        _stamp = digest.hexdigest()[:24]
    return _stamp


def _numba_identity() -> bytes:
    """numba's version file as installed (its bytes name the version), found without
    importing numba or reading package metadata; b"numba ?" when there is none."""
    from importlib.util import find_spec

    try:
        spec = find_spec("numba")
    except (ImportError, ValueError):
        spec = None
    for location in (spec.submodule_search_locations or []) if spec is not None else []:
        try:
            return b"numba " + (Path(location) / "_version.py").read_bytes()
        except OSError:
            continue
    return b"numba ?"


def _writable(path: Path) -> bool:
    """Whether ``path`` is (made) a directory that takes new files: one is created and
    removed."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".probe-{os.getpid()}-{os.urandom(4).hex()}"
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        os.unlink(probe)
        return True
    except OSError:
        return False


def _user_cache_root() -> Path:
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "rearrange"
    if os.name == "nt":
        return Path(os.environ.get("LOCALAPPDATA", Path.home())) / "rearrange" / "Cache"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rearrange"


def cache_directory() -> str | None:
    """Where runners are cached, with the locks and ready markers of :mod:`.builds`
    beside them (see the module's docstring); None: nowhere writable. Decided once per
    process."""
    global _directory
    if _directory is None:
        here = Path(__file__).resolve().parent

        def install() -> Path:      # (hashlib only where a per-install folder is needed)
            import hashlib

            return Path(hashlib.sha1(str(here).encode()).hexdigest()[:12])

        def candidates() -> Iterator[Path]:     # by preference, each made when tried
            if os.environ.get("REARRANGE_CACHE_DIR"):
                yield Path(os.environ["REARRANGE_CACHE_DIR"])
            elif os.environ.get("NUMBA_CACHE_DIR"):
                yield Path(os.environ["NUMBA_CACHE_DIR"]) / "rearrange" / install()
            else:
                yield here / "__pycache__"
                yield _user_cache_root() / install()
        found = next((str(c) for c in candidates() if _writable(c)), None)
        _directory = (found,)
    return _directory[0]


_cache_lock = threading.Lock()
_warned = False
_unwritable: str | None = None      # why saving failed in this process; None: it has not


def cache_warning(message: str) -> None:
    """Warn about the kernel (its disk cache, numba) — at most once per process, whatever
    the cause (the next problem is most likely the same one again)."""
    global _warned
    with _cache_lock:
        if _warned:
            return
        _warned = True
    import warnings

    warnings.warn(message, RuntimeWarning, stacklevel=3)


def cache_writable() -> bool:
    """False once saving a runner to the disk cache failed in this process (a full or
    read-only filesystem), or when this numba cannot cache them (:mod:`.numba_private`):
    its later runners are compiled in memory only."""
    return _unwritable is None


def _note_unwritable(message: str) -> None:
    global _unwritable
    _unwritable = message
    cache_warning(message)


# --------------------------------------------------------------------------- runners

_runners: dict[tuple, object] = {}
_compiled_runs: dict[tuple, object] = {}


def compile_runner(run, u: int, compile: bool = True, token: type | None = None):
    """``run`` compiled for u-byte units: a C-ABI function, called through ctypes (which
    releases the GIL for the call). Loaded from the disk cache when the entry is there;
    else compiled (and saved) — or, with ``compile=False``, None.

    ``run`` takes (control block pointer, destination address, source address, iteration
    space pointer, parameters pointer, a unit-typed token); it may call registered
    functions and the intrinsics. ``token``: the token's numpy type, u bytes wide
    (default ``UNIT_DTYPES[u]``, an unsigned integer: the copies move bits; the row sums
    of :mod:`.rowsums` add floats)."""
    token = UNIT_DTYPES[u] if token is None else token
    if np.dtype(token).itemsize != u:
        raise ValueError(f"a {np.dtype(token)} token for {u}-byte units")
    key = (run, u, token)
    f = _runners.get(key)
    if f is not None:
        return f
    materialise()
    with _build_lock:
        f = _runners.get(key)
        if f is not None:
            return f
        import ctypes

        import numba

        run.__globals__.update(_bindings)
        i64p = numba.types.CPointer(numba.types.int64)
        unit = numba.from_dtype(np.dtype(token))
        sig = numba.types.void(i64p, numba.types.int64, numba.types.int64, i64p, i64p, unit)
        # One function object (and so one cache index) per unit size.
        clone = types.FunctionType(run.__code__, run.__globals__, run.__name__)
        clone.__qualname__ = f"{run.__name__}_u{u}"
        directory = cache_directory() if _compiler.disk_cache else None
        name = f"{run.__name__.lstrip('_').removeprefix('run_')}-u{u}"
        compiled = _compiler.runner(clone, sig, directory, source_stamp(), name, compile,
                                    save=cache_writable(), warn=cache_warning,
                                    unwritable=_note_unwritable)
        if compiled is None:
            return None
        address, keep = compiled
        c_unit = np.ctypeslib.as_ctypes_type(np.dtype(token))
        proto = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_int64), ctypes.c_int64,
                                 ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p, c_unit)
        _compiled_runs[key] = keep          # keeps the machine code alive
        f = _runners[key] = proto(address)
    return f
