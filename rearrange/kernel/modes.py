"""When copy kernels may be compiled: the ``REARRANGE_JIT`` mode (:mod:`.builds` says
what each means). Kept apart so that ``import rearrange`` can serve ``set_jit_mode`` and
``get_jit_mode`` without loading the build machinery.
"""

from __future__ import annotations

import os

from ..errors import RearrangeError

__all__ = ["MODES", "set_jit_mode", "get_jit_mode"]

MODES = ("background", "eager", "off")


def _mode_from_environment() -> str:
    value = os.environ.get("REARRANGE_JIT", "background").strip().lower() or "background"
    if value not in MODES:
        import warnings

        warnings.warn(f"REARRANGE_JIT={value!r} is not one of {', '.join(MODES)}: "
                      f"using 'background'", RuntimeWarning, stacklevel=3)
        return "background"
    return value


_mode = _mode_from_environment()


def set_jit_mode(mode: str) -> None:
    """Choose when copy kernels are compiled: ``"background"`` (default: never in a
    call; numpy copies until the kernel is ready), ``"eager"`` (in the first call that
    needs one) or ``"off"`` (never: numpy's copy). ``REARRANGE_JIT`` sets the initial
    mode."""
    global _mode
    if mode not in MODES:
        raise RearrangeError(f"set_jit_mode: mode must be one of {', '.join(map(repr, MODES))}, "
                             f"got {mode!r}")
    _mode = mode


def get_jit_mode() -> str:
    """The current mode: ``"background"``, ``"eager"`` or ``"off"``."""
    return _mode
