"""Compilation: numba, imported when a runner is first loaded or compiled, never before.

The loop nests (:mod:`.loops`) are plain Python functions. ``@jit`` registers them; the
first :func:`compile_runner` (or call of a registered function) imports numba, defines the
intrinsics (:mod:`.intrinsics`) and binds them, with ``carray`` and the staged
transposes' word table, in the registered functions' modules (where they stand as
``None`` placeholders until then), wraps every
registered function with ``numba.njit`` and rebinds its name in its module to the
dispatcher, so that jitted callers see jitted callees. All of that happens once per
process.

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

The cache is verified, not trusted (:class:`_SealedFile`): every index and data file is
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

import glob
import hashlib
import importlib.metadata
import json
import os
import pickle
import sys
import tempfile
import threading
import types
import uuid
import warnings
import weakref
from pathlib import Path

import numpy as np

__all__ = ["UNIT_DTYPES", "jit", "materialise", "prepare", "compile_runner",
           "cache_directory", "cache_writable", "cache_warning", "source_stamp"]

# The unit sizes a runner is compiled for, each moved as this unsigned integer type.
UNIT_DTYPES = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}

# The modules whose source the compiled runners depend on.
_KERNEL_SOURCES = ("abi.py", "intrinsics.py", "jit.py", "loops.py", "mailbox.py", "pages.py",
                   "plan.py")

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


def materialise() -> None:
    """Import numba and wrap every registered function, once; see the module's
    docstring. Nothing is compiled here: a function is compiled when a runner (or a call)
    first needs it."""
    global _built
    if _built:
        return
    with _build_lock:
        if _built:
            return
        import numba

        from .intrinsics import define_intrinsics, stage_words_table

        _bindings.update(define_intrinsics())
        _bindings["_STAGE_WORDS"] = stage_words_table(tuple(UNIT_DTYPES))
        _bindings["carray"] = numba.carray
        for func, _ in _registry.values():
            func.__globals__.update(_bindings)
        linked_only = _linked_only_dispatcher_class()
        for name, (func, options) in _registry.items():
            func.__globals__[name] = linked_only(
                py_func=func, locals={},
                targetoptions=dict(nopython=True, nogil=True, error_model="numpy",
                                   no_cpython_wrapper=True, no_cfunc_wrapper=True,
                                   **options))
        _built = True


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

    return LinkedOnlyDispatcher


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
# have (its first load would wait forever).
if hasattr(os, "register_at_fork"):
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
        digest = hashlib.sha256()
        here = Path(__file__).resolve().parent
        for name in _KERNEL_SOURCES:
            digest.update(name.encode() + b"\0" + (here / name).read_bytes())
        try:
            numba_version = importlib.metadata.version("numba")
        except importlib.metadata.PackageNotFoundError:
            numba_version = "?"
        digest.update(f"numba {numba_version} python {sys.version_info[:2]}".encode())
        from .plan import SIMD_TILE, SIMD_TILE_G2     # baked into the register tiles
        digest.update(f"tiles {SIMD_TILE} {SIMD_TILE_G2}".encode())
        _stamp = digest.hexdigest()[:24]
    return _stamp


def _writable(path: Path) -> bool:
    try:
        path.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=path).close()
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
        install = hashlib.sha1(str(here).encode()).hexdigest()[:12]
        candidates = []
        if os.environ.get("REARRANGE_CACHE_DIR"):
            candidates.append(Path(os.environ["REARRANGE_CACHE_DIR"]))
        elif os.environ.get("NUMBA_CACHE_DIR"):
            candidates.append(Path(os.environ["NUMBA_CACHE_DIR"]) / "rearrange" / install)
        else:
            candidates += [here / "__pycache__", _user_cache_root() / install]
        found = next((str(c) for c in candidates if _writable(c)), None)
        _directory = (found,)
    return _directory[0]


# Every sealed cache file starts with this line, then one line of JSON (the header), then
# the payload. Part of the file names too (_SEALED_TAG): files of numba's own format, or of
# a later version of this one, are never read as this one.
_SEALED_MAGIC = b"rearrange-kernel-cache 1\n"
_SEALED_TAG = ".r1"

_cache_lock = threading.Lock()
_warned = False
_unwritable: str | None = None      # why a save failed in this process; None: none has


class CacheDamaged(Exception):
    """A cache file is not what was written for the entry it stands for (internal: it
    never leaves :func:`compile_runner`)."""


def cache_warning(message: str) -> None:
    """Warn about the disk cache — at most once per process, whatever the cause (the
    next problem is most likely the same one again)."""
    global _warned
    with _cache_lock:
        if _warned:
            return
        _warned = True
    warnings.warn(message, RuntimeWarning, stacklevel=3)


def cache_writable() -> bool:
    """False once saving a runner to the disk cache failed in this process (a full or
    read-only filesystem): its later runners are compiled in memory only."""
    return _unwritable is None


def _write_whole(path: str, blob: bytes) -> None:
    """``blob`` as the file ``path``: written under a temporary name in the same
    directory, then renamed over it, so a reader sees the old file or the new one,
    never part of one. A failed write leaves nothing behind."""
    temporary = f"{path}.{os.getpid()}.{uuid.uuid4().hex[:12]}.tmp"
    try:
        with open(temporary, "wb") as f:
            f.write(blob)
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise


def _seal(header: dict, payload: bytes) -> bytes:
    header = dict(header, sha256=hashlib.sha256(payload).hexdigest(), size=len(payload))
    return _SEALED_MAGIC + json.dumps(header, sort_keys=True).encode() + b"\n" + payload


def _unseal(path: str) -> tuple[dict, bytes] | None:
    """The header and payload of the sealed file ``path``, the payload checked against
    the digest written with it; None: there is no such file. Raises CacheDamaged."""
    name = os.path.basename(path)
    try:
        with open(path, "rb") as f:
            blob = f.read()
    except FileNotFoundError:
        return None
    if not blob.startswith(_SEALED_MAGIC):
        raise CacheDamaged(f"{name} does not start as a cache file ({len(blob)} bytes)")
    end = blob.find(b"\n", len(_SEALED_MAGIC))
    try:
        header = json.loads(blob[len(_SEALED_MAGIC):end]) if end > 0 else None
    except ValueError:
        header = None
    if not isinstance(header, dict):
        raise CacheDamaged(f"{name} has no readable header")
    payload = blob[end + 1:]
    if header.get("size") != len(payload):
        raise CacheDamaged(f"{name} holds {len(payload)} bytes where {header.get('size')} "
                           "were written")
    if header.get("sha256") != hashlib.sha256(payload).hexdigest():
        raise CacheDamaged(f"{name}'s bytes are not the ones written (sha256 differs)")
    return header, payload


def _expect(header: dict, name: str, **identity: str) -> None:
    for field, value in identity.items():
        if header.get(field) != value:
            raise CacheDamaged(f"{name} was written for {field} {header.get(field)!r}, "
                               f"not {value!r}")


def _key_digest(key: tuple) -> str:
    """What a data file is for: numba's index key (signature, CPU target and features,
    the function's bytecode hashes), as a digest."""
    return hashlib.sha256(repr(key).encode()).hexdigest()[:32]


def _kernel_cache_class(directory: str):
    """numba's per-function cache, located in ``directory``, stamped with
    :func:`source_stamp` instead of the one file numba would hash, and reading and
    writing sealed files (:class:`_SealedFile`) instead of numba's."""
    from numba.core.caching import (CompileResultCacheImpl, FunctionCache,
                                    IndexDataCacheFile, _CacheLocator)

    stamp = source_stamp()

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
        """numba's index and data files of one runner, each sealed (:func:`_seal`).

        Invariants: a data file is written before the index that names it; each file is
        replaced whole (:func:`_write_whole`); :meth:`load` unpickles only payloads whose
        digest and identity (this runner's file name, these sources, and for data this
        very index key) match the header, and raises CacheDamaged otherwise."""

        def __init__(self, cache_path, filename_base, source_stamp):
            self.entry = filename_base + _SEALED_TAG
            super().__init__(cache_path, self.entry, source_stamp)

        def _load_index(self):
            sealed = _unseal(self._index_path)
            if sealed is None:
                return {}
            header, payload = sealed
            _expect(header, self._index_name, kind="index", entry=self.entry)
            if header.get("stamp") != self._source_stamp:
                return {}        # written from other sources: stale, not damaged
            overloads = pickle.loads(payload)
            if not isinstance(overloads, dict):
                raise CacheDamaged(f"{self._index_name} holds no index")
            return overloads

        def _save_index(self, overloads):
            header = {"kind": "index", "entry": self.entry, "stamp": self._source_stamp}
            _write_whole(self._index_path, _seal(header, self._dump(overloads)))

        def save(self, key, data):
            overloads = self._load_index()
            name = overloads.get(key)
            if name is None:
                taken = set(overloads.values())
                name = next(self._data_name(i) for i in range(1, len(taken) + 2)
                            if self._data_name(i) not in taken)
            header = {"kind": "data", "entry": self.entry, "stamp": self._source_stamp,
                      "key": _key_digest(key)}
            _write_whole(self._data_path(name), _seal(header, self._dump(data)))
            if overloads.get(key) != name:
                overloads[key] = name
                self._save_index(overloads)

        def load(self, key):
            name = self._load_index().get(key)
            if name is None:
                return None
            sealed = _unseal(self._data_path(name))
            if sealed is None:
                return None      # removed since the index was read: compiled again
            header, payload = sealed
            _expect(header, name, kind="data", entry=self.entry, stamp=self._source_stamp,
                    key=_key_digest(key))
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


def _load_checked(cache, cfunc, name: str):
    """``cfunc``'s compile result from ``cache``, or None (not there, or discarded)."""
    try:
        return cache.load_overload(cfunc._sig, cfunc._targetdescr.target_context)
    except Exception as error:  # noqa: BLE001 — any failure to load: the entry is not used
        # Invariant: nothing of a damaged entry was run (sealed files are checked before
        # unpickling; native code comes only from checked payloads): discarding it and
        # compiling again is all there is to do.
        cache.discard()
        why = str(error) if isinstance(error, CacheDamaged) else repr(error)
        cache_warning(f"rearrange: the disk cache entry of the {name} copy kernel in "
                      f"{cache.cache_path} was damaged ({why}); it was discarded and is "
                      "compiled again")
        return None


def _save_or_warn(cache, cfunc, cres, name: str) -> None:
    global _unwritable
    try:
        cache.save_overload(cfunc._sig, cres)
    except Exception as error:  # noqa: BLE001 — saving only saves the next process time
        _unwritable = repr(error)
        cache_warning(f"rearrange: could not write the {name} copy kernel to the disk "
                      f"cache {cache.cache_path} ({error}); compiled kernels are kept in "
                      "memory only in this process")


# --------------------------------------------------------------------------- runners

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


_runners: dict[tuple, object] = {}
_compiled_runs: dict[tuple, object] = {}


def compile_runner(run, u: int, compile: bool = True):
    """``run`` compiled for u-byte units: a C-ABI function, called through ctypes (which
    releases the GIL for the call). Loaded from the disk cache when the entry is there;
    else compiled (and saved) — or, with ``compile=False``, None.

    ``run`` takes (control block pointer, destination address, source address, iteration
    space pointer, parameters pointer, a unit-typed token); it may call registered
    functions and the intrinsics."""
    key = (run, u)
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
        from numba.core import sigutils
        from numba.core.ccallback import CFunc
        from numba.core.compiler_lock import global_compiler_lock

        run.__globals__.update(_bindings)
        i64p = numba.types.CPointer(numba.types.int64)
        unit = numba.from_dtype(np.dtype(UNIT_DTYPES[u]))
        sig = numba.types.void(i64p, numba.types.int64, numba.types.int64, i64p, i64p, unit)
        # One function object (and so one cache index) per unit size.
        clone = types.FunctionType(run.__code__, run.__globals__, run.__name__)
        clone.__qualname__ = f"{run.__name__}_u{u}"
        cfunc = CFunc(clone, sigutils.normalize_signature(sig), locals={},
                      options={"nopython": True, "error_model": "numpy"})
        directory = cache_directory()
        name = f"{run.__name__.lstrip('_').removeprefix('run_')}-u{u}"
        with global_compiler_lock:
            cres = None
            cache = None
            if directory is not None:
                cache = _kernel_cache_class(directory)(clone)
                cres = _load_checked(cache, cfunc, name)
            if cres is None:
                if not compile:
                    return None
                cres = cfunc._compile_uncached()
                cres.library.finalize = types.MethodType(_finalise_runner, cres.library)
                if cache is not None and cache_writable():
                    _save_or_warn(cache, cfunc, cres, name)
            address = cres.library.get_pointer_to_function(cres.fndesc.llvm_cfunc_wrapper_name)
        c_unit = {1: ctypes.c_uint8, 2: ctypes.c_uint16, 4: ctypes.c_uint32,
                  8: ctypes.c_uint64}[u]
        proto = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_int64), ctypes.c_int64,
                                 ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p, c_unit)
        _compiled_runs[key] = cres          # keeps the machine code alive
        f = _runners[key] = proto(address)
    return f
