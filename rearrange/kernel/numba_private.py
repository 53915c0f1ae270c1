"""The seam: every use of numba's private API in rearrange, and the public path beside it.

Nothing outside this module names a private numba attribute. :func:`compiler` decides
once per process (at the first compile or load, numba imported already) which of two
compilers the kernel uses:

* :class:`PrivateCompiler` — when every name in :data:`PRIVATE_NAMES` is there (numba
  0.59 to 0.68 have them all). Callees are lowered to LLVM IR only and linked into the
  runners that call them (about half a transpose runner's compile time saved), and each
  runner is cached on disk in sealed, verified files (:mod:`.sealed`) through numba's
  cache classes.
* :class:`PublicCompiler` — when one of them is missing (a numba that moved its
  internals): ``numba.njit`` for the callees and ``numba.cfunc`` for the runners, compiled
  in memory in each process (no disk cache: numba's own ``cache=True`` files are not
  verified before their code is loaded). Slower to compile, the same machine code to run.

Both return a runner as ``(address of its C-ABI entry point, object keeping the code
alive)``. The choice is checked by name (:func:`missing_private_name`), never by numba's
version, so an unknown numba that keeps the names still gets the fast path, and a
failure of the private path inside a compile is a compile failure (:mod:`.builds` then
copies with numpy), not a crash.
"""

from __future__ import annotations

import glob
import importlib
import os
import pickle
import types
import weakref
from typing import Any, Callable

from .sealed import (SEALED_TAG, CacheDamaged, expect, key_digest, seal, unseal,
                     write_whole)

__all__ = ["PRIVATE_NAMES", "missing_private_name", "compiler", "PrivateCompiler",
           "PublicCompiler"]

# The private names the fast path uses, as (module, dotted attribute): all of them are
# checked once, before the first use of any.
PRIVATE_NAMES = (
    ("numba.core.registry", "CPUDispatcher"),
    ("numba.core.ccallback", "CFunc._compile_uncached"),
    ("numba.core.sigutils", "normalize_signature"),
    ("numba.core.compiler_lock", "global_compiler_lock"),
    ("numba.core.codegen", "CPUCodeLibrary._optimize_final_module"),
    ("numba.core.codegen", "CPUCodeLibrary._get_module_for_linking"),
    ("numba.core.codegen", "CPUCodeLibrary._finalize_final_module"),
    ("numba.core.codegen", "CPUCodeLibrary._raise_if_finalized"),
    ("numba.core.compiler", "Flags.no_compile"),
    ("numba.core.caching", "_CacheLocator"),
    ("numba.core.caching", "CompileResultCacheImpl"),
    ("numba.core.caching", "FunctionCache.load_overload"),
    ("numba.core.caching", "FunctionCache.save_overload"),
    ("numba.core.caching", "IndexDataCacheFile._load_index"),
    ("numba.core.caching", "IndexDataCacheFile._save_index"),
    ("numba.core.caching", "IndexDataCacheFile._dump"),
    ("numba.core.caching", "IndexDataCacheFile._data_name"),
    ("numba.core.caching", "IndexDataCacheFile._data_path"),
)


def missing_private_name() -> str | None:
    """The first of :data:`PRIVATE_NAMES` this numba lacks (``module.attribute``), or
    None when it has them all."""
    for module_name, dotted in PRIVATE_NAMES:
        try:
            value: Any = importlib.import_module(module_name)
        except ImportError:
            return module_name
        for part in dotted.split("."):
            if not hasattr(value, part):
                return f"{module_name}.{dotted}"
            value = getattr(value, part)
    return None


_chosen: "PrivateCompiler | PublicCompiler | None" = None


def compiler() -> "PrivateCompiler | PublicCompiler":
    """This process's compiler (see the module's docstring), chosen at the first call.
    Needs numba importable (the caller has imported it)."""
    global _chosen
    if _chosen is None:
        missing = missing_private_name()
        _chosen = PrivateCompiler() if missing is None else PublicCompiler(missing)
    return _chosen


# What a compiler's runner() takes besides the function and its signature: where to
# cache (None: nowhere) under which source stamp, a name for messages, whether it may compile (else only load), whether it may save, and
# two reports — warn(message) (one warning per process, the caller's) and
# unwritable(reason) (saving failed: the caller saves nothing more).
Warn = Callable[[str], None]


class PublicCompiler:
    """numba's public API only: ``njit`` callees, ``cfunc`` runners, in memory."""

    disk_cache = False

    def __init__(self, missing: str) -> None:
        self.missing = missing      # the private name that was not there

    def dispatcher(self, func, options: dict):
        import numba

        return numba.njit(nogil=True, error_model="numpy", **options)(func)

    def runner(self, clone, sig, directory: str | None, stamp: str, name: str,
               compile: bool, save: bool, warn: Warn, unwritable: Warn):
        if not compile:
            return None             # nothing is ever on disk for this compiler
        import numba

        compiled = numba.cfunc(sig, nopython=True, error_model="numpy", cache=False)(clone)
        return compiled.address, compiled


class PrivateCompiler:
    """numba's internals: linked-only callees, verified disk cache (module docstring)."""

    disk_cache = True
    missing = None

    def dispatcher(self, func, options: dict):
        return _linked_only_dispatcher_class()(
            py_func=func, locals={},
            targetoptions=dict(nopython=True, nogil=True, error_model="numpy",
                               no_cpython_wrapper=True, no_cfunc_wrapper=True, **options))

    def runner(self, clone, sig, directory: str | None, stamp: str, name: str,
               compile: bool, save: bool, warn: Warn, unwritable: Warn):
        from numba.core import sigutils
        from numba.core.ccallback import CFunc
        from numba.core.compiler_lock import global_compiler_lock

        cfunc = CFunc(clone, sigutils.normalize_signature(sig), locals={},
                      options={"nopython": True, "error_model": "numpy"})
        with global_compiler_lock:
            cres = None
            cache = None
            if directory is not None:
                cache = _kernel_cache_class(directory, stamp)(clone)
                cres = _load_checked(cache, cfunc, name, warn)
            if cres is None:
                if not compile:
                    return None
                cres = cfunc._compile_uncached()
                cres.library.finalize = types.MethodType(_finalise_runner, cres.library)
                if cache is not None and save:
                    _save_or_warn(cache, cfunc, cres, name, unwritable)
            address = cres.library.get_pointer_to_function(cres.fndesc.llvm_cfunc_wrapper_name)
        return address, cres


# --------------------------------------------------------------------------- callees

def _linked_only_dispatcher_class():
    """numba's CPU dispatcher for functions that exist only to be linked into a runner.

    numba would turn each compiled callee into machine code of its own (an executable
    that nothing calls: the runner links the callee's optimised LLVM IR and generates its
    own code) — about half of a transpose runner's compile time, whose register tiles are
    large. Here a callee's lowering stops at IR (numba's ``no_compile`` flag), its library
    is finalised without machine code, and its compile result is registered for callers
    under a key of its own (numba keys a callee's implementation by its executable, which
    no longer exists).

    How callees are linked and optimised: :func:`_link_and_optimise`."""
    global _dispatcher_class
    if _dispatcher_class is not None:
        return _dispatcher_class
    from numba.core.registry import CPUDispatcher

    def stop_at_ir(flags):
        flags.no_compile = True
        return flags

    def finalise_callee(library):
        # Invariant: the library is only ever linked into others (its IR), never run.
        _link_and_optimise(library)
        library._finalized = True

    class CalleeKey:
        """Stands for a callee's executable (which does not exist)."""
        __slots__ = ("name",)

        def __init__(self, name):
            self.name = name

    class LinkedOnlyDispatcher(CPUDispatcher):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self._compiler._customize_flags = stop_at_ir

        def add_overload(self, cres):
            if cres.entry_point is None:
                cres.library.finalize = types.MethodType(finalise_callee, cres.library)
                key = CalleeKey(cres.fndesc.qualname)
                cres = cres._replace(entry_point=key)
                self.targetctx.insert_user_function(key, cres.fndesc, [cres.library])
                # Not entered in the dispatcher's table of Python-callable overloads:
                # there is nothing to call.
                self.overloads[tuple(cres.signature.args)] = cres
                return
            super().add_overload(cres)

    _dispatcher_class = LinkedOnlyDispatcher
    return _dispatcher_class


_dispatcher_class = None

# A callee whose optimised IR has more instructions than this is linked into its callers
# after their optimisation, as it is, and called; smaller ones before it, to be inlined.
# Given whole runners, LLVM's O3 inliner inlined every callee of up to 60 instructions and
# kept every one of 98 or more a call: at 80 the runners keep the same functions.
INLINE_LIMIT = 80

_large: "weakref.WeakSet[object]" = weakref.WeakSet()   # libraries above INLINE_LIMIT


def _above_inline_limit(module) -> bool:
    count = 0
    for function in module.functions:
        for block in function.blocks:
            for _ in block.instructions:
                count += 1
                if count > INLINE_LIMIT:      # stop early: one ffi call per instruction
                    return True
    return False


def _link_and_optimise(library) -> None:
    """Link ``library``'s callees into its module and optimise it, each function once.

    numba links every callee first and then optimises the whole module, at every level
    of the call tree: a register tile went through LLVM's O3 four times, and a runner's
    O3 re-optimised every (already optimised) function of its panels. Here the small
    callees (at most INLINE_LIMIT instructions, the ones LLVM inlines) are linked first,
    numba's optimisation of the module runs, and then the large ones — each optimised in
    its own library already — are linked in as they are. Callees are finalised before
    their callers (``_get_module_for_linking``), so their sizes are known here."""
    callees = [(callee, callee._get_module_for_linking())
               for callee in dict.fromkeys(library._linking_libraries)]
    large = []
    for callee, module in callees:
        library._reload_init.update(callee._reload_init)
        if callee in _large:
            large.append(module)
        else:
            library._final_module.link_in(module, preserve=True)
    library._optimize_final_module()
    if _above_inline_limit(library._final_module):
        _large.add(library)
    for module in large:
        library._final_module.link_in(module, preserve=True)


def _finalise_runner(library) -> None:
    """numba's ``finalize`` for a runner's library, linking and optimising as its callees
    do (:func:`_link_and_optimise`)."""
    library._codegen._check_llvm_bugs()
    library._raise_if_finalized()
    _link_and_optimise(library)
    library._final_module.verify()
    library._finalize_final_module()


# --------------------------------------------------------------------------- disk cache

def _kernel_cache_class(directory: str, stamp: str):
    """numba's per-function cache, located in ``directory``, stamped with ``stamp``
    (:func:`.jit.source_stamp`) instead of the one file numba would hash, and reading
    and writing sealed files instead of numba's."""
    from numba.core.caching import (CompileResultCacheImpl, FunctionCache,
                                    IndexDataCacheFile, _CacheLocator)

    class Locator(_CacheLocator):
        def __init__(self, py_func, py_file):
            self._py_file = py_file
            self._lineno = py_func.__code__.co_firstlineno

        def get_cache_path(self):
            return directory

        def get_source_stamp(self):
            return stamp

        def get_disambiguator(self):
            return str(self._lineno)

        @classmethod
        def from_function(cls, py_func, py_file):
            return cls(py_func, py_file)

    class Impl(CompileResultCacheImpl):
        _locator_classes = [Locator]

    class SealedFile(IndexDataCacheFile):
        """numba's index and data files of one runner, each sealed (:mod:`.sealed`).

        Invariants: a data file is written before the index that names it; each file is
        replaced whole (:func:`.sealed.write_whole`); :meth:`load` unpickles only
        payloads whose digest and identity (this runner's file name, these sources, and
        for data this very index key) match the header, and raises CacheDamaged
        otherwise."""

        def __init__(self, cache_path, filename_base, source_stamp):
            self.entry = filename_base + SEALED_TAG
            super().__init__(cache_path, self.entry, source_stamp)

        def _load_index(self):
            sealed = unseal(self._index_path)
            if sealed is None:
                return {}
            header, payload = sealed
            expect(header, self._index_name, kind="index", entry=self.entry)
            if header.get("stamp") != self._source_stamp:
                return {}        # written from other sources: stale, not damaged
            overloads = pickle.loads(payload)
            if not isinstance(overloads, dict):
                raise CacheDamaged(f"{self._index_name} holds no index")
            return overloads

        def _save_index(self, overloads):
            header = {"kind": "index", "entry": self.entry, "stamp": self._source_stamp}
            write_whole(self._index_path, seal(header, self._dump(overloads)))

        def save(self, key, data):
            overloads = self._load_index()
            name = overloads.get(key)
            if name is None:
                taken = set(overloads.values())
                name = next(self._data_name(i) for i in range(1, len(taken) + 2)
                            if self._data_name(i) not in taken)
            header = {"kind": "data", "entry": self.entry, "stamp": self._source_stamp,
                      "key": key_digest(key)}
            write_whole(self._data_path(name), seal(header, self._dump(data)))
            if overloads.get(key) != name:
                overloads[key] = name
                self._save_index(overloads)

        def load(self, key):
            name = self._load_index().get(key)
            if name is None:
                return None
            sealed = unseal(self._data_path(name))
            if sealed is None:
                return None      # removed since the index was read: compiled again
            header, payload = sealed
            expect(header, name, kind="data", entry=self.entry, stamp=self._source_stamp,
                   key=key_digest(key))
            return pickle.loads(payload)

        def discard(self) -> None:
            """Delete this runner's index and data files, best-effort."""
            pattern = glob.escape(os.path.join(self._cache_path, self.entry)) + ".*.nbc"
            for path in [self._index_path, *glob.glob(pattern)]:
                try:
                    os.unlink(path)
                except OSError:
                    pass

    class Cache(FunctionCache):
        _impl_class = Impl

        def __init__(self, py_func):
            super().__init__(py_func)
            self._cache_file = SealedFile(self._cache_path, self._impl.filename_base,
                                          stamp)

        def discard(self) -> None:
            self._cache_file.discard()

    return Cache


def _load_checked(cache, cfunc, name: str, warn: Warn):
    """``cfunc``'s compile result from ``cache``, or None (not there, or discarded)."""
    try:
        return cache.load_overload(cfunc._sig, cfunc._targetdescr.target_context)
    except Exception as error:  # noqa: BLE001 — any failure to load: the entry is not used
        # Invariant: nothing of a damaged entry was run (sealed files are checked before
        # unpickling; native code comes only from checked payloads): discarding it and
        # compiling again is all there is to do.
        cache.discard()
        why = str(error) if isinstance(error, CacheDamaged) else repr(error)
        warn(f"rearrange: the disk cache entry of the {name} copy kernel in "
             f"{cache.cache_path} was damaged ({why}); it was discarded and is "
             "compiled again")
        return None


def _save_or_warn(cache, cfunc, cres, name: str, unwritable: Warn) -> None:
    try:
        cache.save_overload(cfunc._sig, cres)
    except Exception as error:  # noqa: BLE001 — saving only saves the next process time
        unwritable(f"rearrange: could not write the {name} copy kernel to the disk "
                   f"cache {cache.cache_path} ({error}); compiled kernels are kept in "
                   "memory only in this process")
