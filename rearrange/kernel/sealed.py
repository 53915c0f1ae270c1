"""Sealed cache files: what the disk cache of compiled runners reads and writes.

A sealed file is one magic line, one line of JSON (the header: what the file is for, and
the sha256 and size of its payload), then the payload. Pure Python, no numba: the numba
side (:mod:`.numba_private`) puts numba's index and data payloads in these files.

Invariants: a file is written whole under a temporary name and renamed into place
(:func:`write_whole`), so a reader sees the old file or the new one, never part of one;
:func:`unseal` returns a payload only when it hashes to what was written with it, and
raises :class:`CacheDamaged` otherwise.
"""

from __future__ import annotations

import itertools
import json
import os

__all__ = ["SEALED_MAGIC", "SEALED_TAG", "CacheDamaged", "write_whole", "seal", "unseal",
           "expect", "key_digest"]

# Every sealed cache file starts with this line, then one line of JSON (the header), then
# the payload. Part of the file names too (SEALED_TAG): files of numba's own format, or of
# a later version of this one, are never read as this one.
SEALED_MAGIC = b"rearrange-kernel-cache 1\n"
SEALED_TAG = ".r1"

_temporaries = itertools.count()


class CacheDamaged(Exception):
    """A cache file is not what was written for the entry it stands for (internal: it
    never leaves :func:`.jit.compile_runner`)."""


def _sha256(payload: bytes) -> str:
    import hashlib

    return hashlib.sha256(payload).hexdigest()


def write_whole(path: str, blob: bytes) -> None:
    """``blob`` as the file ``path``: written under a temporary name in the same
    directory, then renamed over it, so a reader sees the old file or the new one,
    never part of one. A failed write leaves nothing behind."""
    temporary = f"{path}.{os.getpid()}.{os.urandom(4).hex()}{next(_temporaries)}.tmp"
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


def seal(header: dict, payload: bytes) -> bytes:
    header = dict(header, sha256=_sha256(payload), size=len(payload))
    return SEALED_MAGIC + json.dumps(header, sort_keys=True).encode() + b"\n" + payload


def unseal(path: str) -> tuple[dict, bytes] | None:
    """The header and payload of the sealed file ``path``, the payload checked against
    the digest written with it; None: there is no such file. Raises CacheDamaged."""
    name = os.path.basename(path)
    try:
        with open(path, "rb") as f:
            blob = f.read()
    except FileNotFoundError:
        return None
    if not blob.startswith(SEALED_MAGIC):
        raise CacheDamaged(f"{name} does not start as a cache file ({len(blob)} bytes)")
    end = blob.find(b"\n", len(SEALED_MAGIC))
    try:
        header = json.loads(blob[len(SEALED_MAGIC):end]) if end > 0 else None
    except ValueError:
        header = None
    if not isinstance(header, dict):
        raise CacheDamaged(f"{name} has no readable header")
    payload = blob[end + 1:]
    if header.get("size") != len(payload):
        raise CacheDamaged(f"{name} holds {len(payload)} bytes where {header.get('size')} "
                           "were written")
    if header.get("sha256") != _sha256(payload):
        raise CacheDamaged(f"{name}'s bytes are not the ones written (sha256 differs)")
    return header, payload


def expect(header: dict, name: str, **identity: str) -> None:
    """Raise CacheDamaged unless ``header`` says the file is for ``identity``."""
    for field, value in identity.items():
        if header.get(field) != value:
            raise CacheDamaged(f"{name} was written for {field} {header.get(field)!r}, "
                               f"not {value!r}")


def key_digest(key: tuple) -> str:
    """What a data file is for: numba's index key (signature, CPU target and features,
    the function's bytecode hashes), as a digest."""
    return _sha256(repr(key).encode())[:32]
