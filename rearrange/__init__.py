"""rearrange — an einops-style rearrangement compiler over strided memory.

``import rearrange`` loads numpy and this package only: numba is imported on the first
copy that needs a kernel, torch and dask only when the caller hands in such an array.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .api import CompiledRearrange, cache_clear, cache_info, explain, rearrange
from .backends import asnumpy
from .errors import (
    ArgumentTypeError,
    DimensionError,
    LayoutError,
    NoViewError,
    OutOfMemoryError,
    PatternError,
    RearrangeError,
)
from .kernel import get_jit_mode, get_num_threads, set_jit_mode, set_num_threads
from .api import reduce, repeat
from .plan import Plan, Step
from .layout import Layout
from .tensor import (
    Size,
    Storage,
    Tensor,
    UntypedStorage,
    arange,
    as_strided,
    as_tensor,
    cdouble,
    cfloat,
    complex64,
    complex128,
    double,
    empty,
    float16,
    float32,
    float64,
    from_numpy,
    full,
    half,
    int8,
    int16,
    int32,
    int64,
    long,
    manual_seed,
    ones,
    rand,
    randn,
    short,
    tensor,
    uint8,
    zeros,
)

__version__ = "0.1.0"

if TYPE_CHECKING:   # what __getattr__ serves, as type checkers should see it
    from .api import compile_pattern as compile  # noqa: F401
    from .contraction import einsum  # noqa: F401
    from .indexing import add_at, explain_indexing, get_at, set_at, subtract_at  # noqa: F401
    from .elementwise import (add, divide, explain_elementwise, logaddexp,  # noqa: F401
                              maximum, minimum, multiply, subtract, where)
    from .along import (argmax, argmin, argsort, flip, log_softmax, roll,  # noqa: F401
                        softmax, sort)
    from .packing import pack, unpack  # noqa: F401
    from .shapes import ShapeMismatchError, check_shape, parse_shape  # noqa: F401
    from .tensor import BUILTIN_NAMED_DTYPES
    bool = float = int = BUILTIN_NAMED_DTYPES["bool"]  # noqa: A001 - numpy dtypes

# Operations defined in their own modules, imported on first use (``rearrange.pack``,
# ``from rearrange import einsum``): ``import rearrange`` stays as light as it is.
_LAZY = {
    "pack": "packing", "unpack": "packing",
    "parse_shape": "shapes", "check_shape": "shapes", "ShapeMismatchError": "shapes",
    "einsum": "contraction",
    **dict.fromkeys(("get_at", "set_at", "add_at", "subtract_at", "explain_indexing"),
                    "indexing"),
    **{name: "elementwise" for name in ("add", "subtract", "multiply", "divide", "maximum",
                                        "minimum", "logaddexp", "where",
                                        "explain_elementwise")},
    **{name: "along" for name in ("softmax", "log_softmax", "flip", "roll", "sort", "argsort",
                                  "argmax", "argmin")},
}


# Public names that are Python builtins, served here and never bound in a namespace of
# the package (so ``compile``, ``bool``, ``int`` and ``float`` keep their meaning in
# its code): ``rearrange.compile`` and torch's dtype names ``rearrange.float`` etc.
_BUILTIN_NAMED = {"compile": ("api", "compile_pattern"),
                  **{name: ("tensor", name) for name in ("bool", "int", "float")}}


def __getattr__(name: str) -> Any:
    if name in _BUILTIN_NAMED:
        import importlib

        module_name, attribute = _BUILTIN_NAMED[name]
        return getattr(importlib.import_module(f".{module_name}", __name__), attribute)
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'rearrange' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{module_name}", __name__), name)
    globals()[name] = value  # later lookups skip this hook
    return value


def __dir__():
    return sorted({*globals(), *_LAZY, *_BUILTIN_NAMED})


def _register_with_torch_compile() -> None:
    """Make the operations single nodes under ``torch.compile`` however the imports are
    ordered: now if dynamo is loaded, else as soon as it loads (an import hook; torch
    itself is not imported here)."""
    from .backends._torch import register_when_dynamo_loads

    register_when_dynamo_loads()


_register_with_torch_compile()

# ``from rearrange import *``: the operations (einops' names among them), the errors and
# the Tensor API, but no name that would shadow a builtin: ``compile`` and the dtypes
# ``bool``, ``int``, ``float`` stay attributes (``rearrange.compile``,
# ``rearrange.float32``), as do the other dtypes beside them. The lazy operations
# (``pack``, ``einsum``, ...) are imported by the star-import through ``__getattr__``.
__all__ = [
    # einops' public names
    "rearrange", "reduce", "repeat", "pack", "unpack", "einsum", "parse_shape", "asnumpy",
    # einx's operations along bracketed axes
    "softmax", "log_softmax", "flip", "roll", "sort", "argsort", "argmax", "argmin",
    # ours
    "check_shape", "explain", "cache_info", "cache_clear", "CompiledRearrange",
    "Plan", "Step", "Layout", "set_num_threads", "get_num_threads", "set_jit_mode",
    "get_jit_mode", "get_at", "set_at", "add_at", "subtract_at", "explain_indexing",
    "RearrangeError", "LayoutError", "DimensionError", "ArgumentTypeError", "PatternError",
    "NoViewError", "OutOfMemoryError", "ShapeMismatchError",
    "Tensor", "Size", "Storage", "UntypedStorage",
    "tensor", "as_tensor", "from_numpy", "arange", "zeros", "ones", "empty", "full",
    "rand", "randn", "as_strided", "manual_seed",
    "add", "subtract", "multiply", "divide", "maximum", "minimum", "logaddexp", "where",
    "explain_elementwise",
]
