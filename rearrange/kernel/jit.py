"""Compilation: numba, imported on the first copy that needs it and never before.

The loop nests (:mod:`.loops`) are plain Python functions. ``@jit`` registers them; the
first call of any of them, or the first :func:`compile_runner`, imports numba, defines
the intrinsics (:mod:`.intrinsics`) and binds them, with ``carray``, in the registered
functions' modules (where they stand as ``None`` placeholders until then), wraps every
registered function with ``numba.njit(cache=True)`` and rebinds its name in its module
to the dispatcher, so that jitted callers see jitted callees. All of that happens once
per process.

Disk cache: the first copy compiles the kernel for its unit size (~6 s;
``warmup()`` compiles all four). The kernel is one C-ABI function per unit size
(``numba.cfunc``), called through ctypes by the caller and the workers alike. It is
compiled with ``cache=True``: numba writes the cache next to the loops' module
(``rearrange/kernel/__pycache__``) when that directory is writable, else to the user
cache dir (``~/.cache/numba`` on Linux); ``NUMBA_CACHE_DIR`` overrides both. A read-only
install therefore still caches, per user; with a warm cache a fresh process's first copy
costs ~0.25 s (mostly the numba import).

numba keeps a cached function while its own file is unchanged (mtime and size): the
loops' entries are checked against ``loops.py`` only, not against the intrinsics, the ABI
or the thresholds they are compiled with. An install writes every file anew; in a source
tree, after editing ``intrinsics.py``, ``abi.py`` or a constant the loops read, touch
``loops.py`` (or clear its ``__pycache__``) so that the loops are compiled again.
"""

from __future__ import annotations

import threading

import numpy as np

__all__ = ["UNIT_DTYPES", "jit", "materialise", "compile_runner"]

# The unit sizes a runner is compiled for, each moved as this unsigned integer type.
UNIT_DTYPES = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}

_build_lock = threading.Lock()
_built = False
_registry: dict[str, tuple] = {}
# What materialise() binds in the loops' modules (the intrinsics and carray), once built.
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


def materialise() -> None:
    """Import numba and compile (or load from the disk cache) every registered function,
    once; see the module's docstring."""
    global _built
    if _built:
        return
    with _build_lock:
        if _built:
            return
        import numba

        from .intrinsics import define_intrinsics

        _bindings.update(define_intrinsics())
        _bindings["carray"] = numba.carray
        for func, _ in _registry.values():
            func.__globals__.update(_bindings)
        for name, (func, options) in _registry.items():
            func.__globals__[name] = numba.njit(cache=True, nogil=True, error_model="numpy",
                                                **options)(func)
        _built = True


_runners: dict[tuple, object] = {}
_compiled_runs: dict[tuple, object] = {}


def compile_runner(run, u: int):
    """``run`` compiled for u-byte units: a C-ABI function (cached on disk), called
    through ctypes, which releases the GIL for the call. ``run`` takes (control block
    pointer, destination address, source address, iteration space pointer, parameters
    pointer, a unit-typed token); it may call registered functions and the intrinsics."""
    key = (run, u)
    f = _runners.get(key)
    if f is None:
        materialise()
        with _build_lock:
            f = _runners.get(key)
            if f is None:
                import ctypes

                import numba
                from numba import types
                run.__globals__.update(_bindings)
                i64p = types.CPointer(types.int64)
                unit = numba.from_dtype(np.dtype(UNIT_DTYPES[u]))
                sig = types.void(i64p, types.int64, types.int64, i64p, i64p, unit)
                compiled = numba.cfunc(sig, cache=True, nopython=True,
                                       error_model="numpy")(run)
                c_unit = {1: ctypes.c_uint8, 2: ctypes.c_uint16, 4: ctypes.c_uint32,
                          8: ctypes.c_uint64}[u]
                proto = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_int64), ctypes.c_int64,
                                         ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p,
                                         c_unit)
                _compiled_runs[key] = compiled      # keeps the machine code alive
                f = _runners[key] = proto(compiled.address)
    return f
