"""``rearrange.Tensor``: a flat numpy storage plus a :class:`~rearrange.layout.Layout`.

This is PyTorch's memory model made executable, a torch-compatible subset, so the usual
examples run with ``import rearrange as torch``::

    >>> import rearrange as torch
    >>> x = torch.arange(6).view(2, 3)
    >>> x.stride(), x.t().stride(), x.t().is_contiguous()
    ((3, 1), (1, 3), False)

Views share the storage object of their base; ``reshape``/``flatten``/``contiguous``
copy exactly when torch would, and every op raises what torch raises, with torch's
message, as a class that is both the builtin torch uses and a ``RearrangeError``.

Dtypes are numpy dtypes (``rearrange.float32 is numpy.dtype('float32')``); the defaults
follow torch: Python floats give float32, Python ints give int64.
"""

from __future__ import annotations

import math
import operator
import warnings
from typing import Any, Iterator, Sequence

import numpy as np

from .errors import ArgumentTypeError, DimensionError, LayoutError, OutOfMemoryError, RearrangeError
from .layout import MAX_DIMS, MAX_SIZE, Layout, as_int, format_int_list, infer_size, size_problem, wrap_dim

__all__ = [
    "Tensor", "Size", "Storage", "UntypedStorage",
    "tensor", "as_tensor", "from_numpy", "arange", "zeros", "ones", "empty", "full",
    "rand", "randn", "as_strided", "manual_seed",
    "bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64",
    "complex64", "complex128", "half", "float", "double", "short", "int", "long",
    "cfloat", "cdouble",
]

_BOOL = np.dtype("bool")
uint8 = np.dtype("uint8")
int8 = np.dtype("int8")
int16 = short = np.dtype("int16")
int32 = np.dtype("int32")
int64 = long = np.dtype("int64")
float16 = half = np.dtype("float16")
float32 = np.dtype("float32")
float64 = double = np.dtype("float64")

#: torch's dtype names that are also Python builtins (``torch.bool``, ``torch.int``,
#: ``torch.float``). They are served by the modules' ``__getattr__``
#: (``rearrange.float``, ``rearrange.tensor.int``) and never bound in a namespace of the
#: package, so ``bool``, ``int`` and ``float`` keep their builtin meaning in its code.
BUILTIN_NAMED_DTYPES = {"bool": _BOOL, "int": int32, "float": float32}


def __getattr__(name: str) -> np.dtype:
    try:
        return BUILTIN_NAMED_DTYPES[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
complex64 = cfloat = np.dtype("complex64")
complex128 = cdouble = np.dtype("complex128")

_DEFAULT_FLOAT = float32
_TORCH_TYPE_NAMES = {
    "bool": "BoolTensor", "uint8": "ByteTensor", "int8": "CharTensor",
    "int16": "ShortTensor", "int32": "IntTensor", "int64": "LongTensor",
    "float16": "HalfTensor", "float32": "FloatTensor", "float64": "DoubleTensor",
    "complex64": "ComplexFloatTensor", "complex128": "ComplexDoubleTensor",
}

# How torch's C++ ``toString()`` names a CPU tensor type in messages (expand's): the
# legacy ``torch.<X>Tensor`` names where one exists, ``CPU<X>Type`` otherwise.
_LEGACY_TYPE_NAMES = ("uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64")


def _torch_type_string(dtype: np.dtype) -> str:
    name = _TORCH_TYPE_NAMES.get(dtype.name, "Tensor")
    if dtype.name in _LEGACY_TYPE_NAMES:
        return f"torch.{name}"
    return f"CPU{name.removesuffix('Tensor')}Type"


_generator: np.random.Generator | None = None  # created on first use: numpy.random is slow to import


def _rng() -> np.random.Generator:
    global _generator
    if _generator is None:
        _generator = np.random.default_rng()
    return _generator


def manual_seed(seed: int) -> None:
    """Seed ``rand``/``randn`` (numpy's generator, so values differ from torch's)."""
    global _generator
    _generator = np.random.default_rng(as_int(seed, "seed"))


def numpy_dtype(value: object) -> np.dtype:
    """``value`` as numpy's dtype of any kind; what numpy does not take (or takes only
    as a deprecated alias, such as ``'a'``) is an ArgumentTypeError."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        try:
            return np.dtype(value)
        except (TypeError, ValueError, DeprecationWarning):
            raise ArgumentTypeError(
                f"dtype must be a numpy-compatible dtype, got {value!r}") from None


def as_dtype(value: object) -> np.dtype:
    """``value`` as one of the numeric dtypes a tensor can hold (bool, ints, floats,
    complex); anything else — objects, strings, dates — is an ArgumentTypeError."""
    dtype = numpy_dtype(value)
    if dtype.kind not in "biufc":
        raise ArgumentTypeError(
            f"dtype must be a bool, integer, floating or complex dtype, got {value!r} ({dtype})"
        )
    return dtype


def _type_name(value: object) -> str:
    """``int``, ``numpy.int64``: how torch's messages name a Python value's type."""
    kind = type(value)
    return kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__name__}"


def _require_tensor(value: object, op: str, argument: str = "other") -> Tensor:
    if not isinstance(value, Tensor):
        raise ArgumentTypeError(
            f"{op}(): argument '{argument}' (position 1) must be Tensor, not "
            f"{_type_name(value)}: {value!r}"
        )
    return value


def _address(array: np.ndarray) -> int:
    return array.__array_interface__["data"][0]


class Size(tuple):
    """A shape: a tuple of ints that prints like ``torch.Size``."""

    def __repr__(self) -> str:
        return f"Size({list(self)!r})"

    def numel(self) -> int:
        return math.prod(self)


class UntypedStorage:
    """The bytes behind a storage (``t.untyped_storage()``)."""

    __slots__ = ("_storage",)

    def __init__(self, storage: Storage) -> None:
        self._storage = storage

    def data_ptr(self) -> int:
        return self._storage.data_ptr()

    def nbytes(self) -> int:
        return self._storage.nbytes()

    def size(self) -> int:
        return self._storage.nbytes()

    def __len__(self) -> int:
        return self._storage.nbytes()


class Storage:
    """A flat, one-dimensional block of elements that tensors view.

    Invariant: ``array`` is one-dimensional and C-contiguous (stride = itemsize); every
    tensor on this storage addresses positions ``0 <= p < len(array)``.
    """

    __slots__ = ("array",)

    def __init__(self, array: np.ndarray) -> None:
        assert array.ndim == 1 and (array.size <= 1 or array.strides[0] == array.itemsize)
        self.array = array

    @property
    def dtype(self) -> np.dtype:
        return self.array.dtype

    def data_ptr(self) -> int:
        """The address of element 0; 0 for an empty storage, as torch's null pointer, so
        any two empty storages compare equal there (they do in torch)."""
        return _address(self.array) if self.array.nbytes else 0

    def nbytes(self) -> int:
        return self.array.nbytes

    def size(self) -> int:
        return self.array.size

    def __len__(self) -> int:
        return self.array.size

    def __getitem__(self, index: object) -> Any:
        """The element at ``index`` (negative counts from the end) as a Python number;
        a slice gives a list."""
        if isinstance(index, slice):
            return self.array[index].tolist()
        if isinstance(index, bool) or not hasattr(index, "__index__"):
            raise LayoutError(f"can't index a {type(self)} with {type(index)}")
        position = index.__index__()
        if not -len(self) <= position < len(self):
            raise DimensionError(f"index {position} out of range for storage of size {len(self)}")
        return self.array[position].tolist()

    def tolist(self) -> list:
        return self.array.tolist()

    def untyped(self) -> UntypedStorage:
        return UntypedStorage(self)

    def __repr__(self) -> str:
        name = _TORCH_TYPE_NAMES.get(self.dtype.name, self.dtype.name).replace("Tensor", "Storage")
        body = "\n".join(f" {v}" for v in self.array.tolist())
        return f"{body}\n[rearrange.{name} of size {self.array.size}]"


def _strided_view(storage: Storage, layout: Layout) -> np.ndarray:
    """A numpy array over ``storage`` addressed by ``layout`` (shares memory)."""
    itemsize = storage.array.itemsize
    if layout.numel == 0:
        return np.ndarray(layout.shape, storage.dtype, buffer=storage.array[:0])
    return np.ndarray(
        layout.shape,
        storage.dtype,
        buffer=storage.array,
        offset=layout.offset * itemsize,
        strides=tuple(s * itemsize for s in layout.strides),
    )


def _size_args(args: tuple, op: str, argument: str = "size") -> tuple[int, ...]:
    """``f(2, 3)``, ``f((2, 3))`` and ``f([2, 3])`` all mean the sizes ``(2, 3)``.

    ``f()`` is torch's TypeError (a 0-d shape is spelled ``f(())``); so is any element that
    is not an int (bools included), named with its position and value, and any int
    outside int64 (torch's unpacking overflow, with its 1-based position).
    """
    if not args:
        raise ArgumentTypeError(f'{op}() missing 1 required positional arguments: "{argument}"')
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = tuple(args[0])
    sizes = []
    for k, value in enumerate(args):
        try:
            if isinstance(value, bool):
                raise TypeError
            sizes.append(operator.index(value))
        except TypeError:
            raise ArgumentTypeError(
                f"{op}(): argument '{argument}' must be tuple of ints, but found element of "
                f"type {type(value).__name__} at pos {k}: {value!r}"
            ) from None
        if not -MAX_SIZE - 1 <= sizes[-1] <= MAX_SIZE:
            raise ArgumentTypeError(
                f"{op}(): argument '{argument}' failed to unpack the object at pos {k + 1} "
                f"with error \"Overflow when unpacking long long\": {value!r} is outside int64"
            )
    return tuple(sizes)


class Tensor:
    """A view of a :class:`Storage` through a :class:`Layout`."""

    __slots__ = ("_storage", "_layout", "__weakref__")
    __array_priority__ = 1000

    def __init__(self, *args: object, **kwargs: object) -> None:
        raise RearrangeError(
            "create tensors with rearrange.tensor(), zeros(), arange(), from_numpy(), ..."
        )

    @classmethod
    def _wrap(cls, storage: Storage, layout: Layout) -> Tensor:
        # Every Tensor is made here: a numpy array over the storage can always be built.
        if len(layout.shape) > MAX_DIMS:
            raise LayoutError(
                f"a rearrange.Tensor has at most {MAX_DIMS} dims (numpy's limit, which its "
                f"storage follows); this one would have {len(layout.shape)}")
        self = object.__new__(cls)
        self._storage = storage
        self._layout = layout
        return self

    def _with(self, layout: Layout) -> Tensor:
        return Tensor._wrap(self._storage, layout)

    # ------------------------------------------------------------------ inspection

    @property
    def layout(self) -> Layout:
        """The :class:`Layout` (shape, strides, offset in elements)."""
        return self._layout

    @property
    def shape(self) -> Size:
        return Size(self._layout.shape)

    def size(self, dim: object = None) -> Size | int:
        if dim is None:
            return Size(self._layout.shape)
        return self._layout.shape[wrap_dim(dim, self.ndim, wrap_scalar=False)]

    def stride(self, dim: object = None) -> tuple[int, ...] | int:
        if dim is None:
            return self._layout.strides
        return self._layout.strides[wrap_dim(dim, self.ndim, wrap_scalar=False)]

    def storage_offset(self) -> int:
        return self._layout.offset

    @property
    def ndim(self) -> int:
        return self._layout.ndim

    def dim(self) -> int:
        return self._layout.ndim

    ndimension = dim

    def numel(self) -> int:
        return self._layout.numel

    nelement = numel

    @property
    def dtype(self) -> np.dtype:
        return self._storage.dtype

    @property
    def device(self) -> str:
        return "cpu"

    def element_size(self) -> int:
        return self._storage.dtype.itemsize

    def is_contiguous(self) -> bool:
        return self._layout.is_contiguous()

    def data_ptr(self) -> int:
        return self._storage.data_ptr() + self._layout.offset * self.element_size()

    def storage(self) -> Storage:
        return self._storage

    def untyped_storage(self) -> UntypedStorage:
        return UntypedStorage(self._storage)

    def numpy(self) -> np.ndarray:
        """A numpy array sharing this tensor's memory."""
        return _strided_view(self._storage, self._layout)

    def __array__(self, dtype: object = None, copy: object = None) -> np.ndarray:
        array = self.numpy()
        if dtype is not None:
            array = array.astype(dtype, copy=False)
        return array.copy() if copy else array

    def tolist(self) -> Any:
        return self.numpy().tolist()

    def item(self) -> Any:
        if self.numel() != 1:
            raise LayoutError(f"a Tensor with {self.numel()} elements cannot be converted to Scalar")
        return self.numpy().reshape(()).item()

    def __len__(self) -> int:
        if self.ndim == 0:
            raise ArgumentTypeError("len() of a 0-d tensor")
        return self._layout.shape[0]

    def __iter__(self) -> Iterator[Tensor]:
        if self.ndim == 0:
            raise ArgumentTypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self._layout.shape[0]))

    def __bool__(self) -> bool:
        if self.numel() != 1:
            amount = "no values" if self.numel() == 0 else "more than one value"
            raise LayoutError(f"Boolean value of Tensor with {amount} is ambiguous")
        return bool(self.item())

    def _scalar(self) -> Any:
        if self.numel() != 1:
            raise RearrangeError("only one element tensors can be converted to Python scalars")
        return self.item()

    def __float__(self) -> float:
        return float(self._scalar())

    def __int__(self) -> int:
        return int(self._scalar())

    def __complex__(self) -> complex:
        return complex(self._scalar())

    def __index__(self) -> int:
        """A 1-element integer (or bool) tensor used as an index or a size."""
        if self.numel() != 1 or self.dtype.kind not in "biu":
            raise ArgumentTypeError(
                "only integer tensors of a single element can be converted to an index"
            )
        return int(self.item())

    def __eq__(self, other: object) -> Tensor:  # type: ignore[override]
        return _from_array(np.asarray(self.numpy() == np.asarray(other)))

    def __ne__(self, other: object) -> Tensor:  # type: ignore[override]
        return _from_array(np.asarray(self.numpy() != np.asarray(other)))

    __hash__ = object.__hash__

    def equal(self, other: Tensor) -> bool:
        other = _require_tensor(other, "equal")
        return self.shape == other.shape and bool(np.array_equal(self.numpy(), other.numpy()))

    def __repr__(self) -> str:
        array = self.numpy()
        options: dict[str, Any] = {"separator": ", ", "prefix": "tensor("}
        if array.dtype.kind in "fc":
            options["formatter"] = {"float_kind": lambda v: f"{v:.4f}"}
        body = np.array2string(array, **options)
        extras = ""
        if self.dtype not in (float32, int64, _BOOL):
            extras += f", dtype=rearrange.{self.dtype.name}"
        if self.numel() == 0 and self.ndim != 1:
            extras += f", size={tuple(self.shape)}"
        return f"tensor({body}{extras})"

    # ------------------------------------------------------------------ views

    def view(self, *shape: object) -> Tensor:
        """The same elements as ``shape``; never copies (raises when strides forbid it)."""
        if not shape:
            raise ArgumentTypeError(
                "view() received an invalid combination of arguments - got (), but expected "
                "one of:\n * (torch.dtype dtype)\n * (tuple of ints size)\n"
            )
        sizes = infer_size(_size_args(shape, "view"), self.numel())
        layout = self._layout.try_view(sizes)
        if layout is None:
            raise LayoutError(
                "view size is not compatible with input tensor's size and stride (at least "
                "one dimension spans across two contiguous subspaces). Use .reshape(...) "
                "instead."
            )
        return self._with(layout)

    def view_as(self, other: Tensor) -> Tensor:
        return self.view(_require_tensor(other, "view_as").shape)

    def permute(self, *dims: object) -> Tensor:
        return self._with(self._layout.permute(_size_args(dims, "permute", "dims")))

    def transpose(self, dim0: object, dim1: object) -> Tensor:
        return self._with(self._layout.transpose(dim0, dim1))

    swapaxes = swapdims = transpose

    def t(self) -> Tensor:
        if self.ndim > 2:
            raise LayoutError(f"t() expects a tensor with <= 2 dimensions, but self is {self.ndim}D")
        return self.transpose(0, 1) if self.ndim == 2 else self._with(self._layout)

    @property
    def T(self) -> Tensor:  # noqa: N802 - torch's name
        if self.ndim == 0:
            warnings.warn(
                "Tensor.T is deprecated on 0-D tensors. This function is the identity in "
                "these cases.", UserWarning, stacklevel=2,
            )
        elif self.ndim != 2:
            warnings.warn(
                "The use of `x.T` on tensors of dimension other than 2 to reverse their "
                "shape is deprecated and it will throw an error in a future release. "
                "Consider `x.mT` to transpose batches of matrices or `x.permute(*torch."
                "arange(x.ndim - 1, -1, -1))` to reverse the dimensions of a tensor.",
                UserWarning, stacklevel=2,
            )
        return self._with(self._layout.permute(range(self.ndim - 1, -1, -1)))

    @property
    def mT(self) -> Tensor:  # noqa: N802 - torch's name
        if self.ndim == 0:
            warnings.warn(
                "Tensor.mT is deprecated on 0-D tensors. This function is the identity in "
                "these cases.", UserWarning, stacklevel=2,
            )
            return self._with(self._layout)
        if self.ndim < 2:
            raise LayoutError(
                "tensor.mT is only supported on matrices or batches of matrices. "
                f"Got {self.ndim}-D tensor."
            )
        return self.transpose(-2, -1)

    def movedim(self, source: object, destination: object) -> Tensor:
        """Both ints, or both sequences of ints (torch's two overloads)."""
        if isinstance(source, (tuple, list)) != isinstance(destination, (tuple, list)):
            raise ArgumentTypeError(
                "movedim(): source and destination must both be ints or both be tuples of "
                f"ints, got {_type_name(source)} {source!r} and {_type_name(destination)} "
                f"{destination!r}"
            )
        return self._with(self._layout.movedim(source, destination))

    moveaxis = movedim

    def squeeze(self, *dim: object) -> Tensor:
        """``squeeze()`` drops every size-1 dim; ``squeeze(d)`` / ``squeeze((d, ...))``
        only those listed that have size 1. An explicit ``None`` is torch's TypeError."""
        if len(dim) > 1:
            dim = (dim,)  # squeeze(0, 1) means squeeze((0, 1)), as in torch
        if not dim:
            return self._with(self._layout.squeeze())
        chosen = dim[0]
        if not isinstance(chosen, (tuple, list)) and (
            isinstance(chosen, bool) or not hasattr(chosen, "__index__")
        ):
            raise ArgumentTypeError(
                f"squeeze(): argument 'dim' must be int or tuple of ints, but got "
                f"{type(chosen).__name__} {chosen!r}"
            )
        if isinstance(chosen, (tuple, list)):
            chosen = _size_args((tuple(chosen),), "squeeze", "dim") if chosen else ()
        return self._with(self._layout.squeeze(chosen))

    def unsqueeze(self, dim: object) -> Tensor:
        return self._with(self._layout.unsqueeze(dim))

    def unflatten(self, dim: object, sizes: Sequence[object]) -> Tensor:
        dim = wrap_dim(dim, self.ndim)
        if sizes is None:
            sizes = ()  # torch reads None as an empty list of sizes
        if not isinstance(sizes, (tuple, list)):
            raise ArgumentTypeError(
                "unflatten(): argument 'sizes' (position 2) must be tuple of ints, not "
                f"{type(sizes).__name__}: {sizes!r}"
            )
        sizes = _size_args((tuple(sizes),), "unflatten", "sizes") if sizes else ()
        if not sizes:
            raise LayoutError("unflatten: sizes must be non-empty")
        if self.ndim == 0:
            raise LayoutError(
                "unflatten got an unexpected error:\n"
                f"Dimension specified as {dim} but tensor has no dimensions"
            )
        try:
            resolved = infer_size(sizes, self._layout.shape[dim])
        except LayoutError as error:
            if "is invalid for input of size" in str(error):
                raise LayoutError(
                    f"unflatten: Provided sizes {list(sizes)} don't multiply up to the size of "
                    f"dim {dim} ({self._layout.shape[dim]}) in the input tensor"
                ) from None
            raise LayoutError(f"unflatten got an unexpected error:\n{error}") from None
        shape = self._layout.shape
        return self.view(shape[:dim] + resolved + shape[dim + 1 :])

    def expand(self, *sizes: object) -> Tensor:
        type_name = _torch_type_string(self.dtype)
        return self._with(self._layout.expand(_size_args(sizes, "expand"), type_name=type_name))

    def expand_as(self, other: Tensor) -> Tensor:
        return self.expand(_require_tensor(other, "expand_as").shape)

    def as_strided(self, size: Sequence[object], stride: Sequence[object],
                   storage_offset: object = None) -> Tensor:
        return as_strided(self, size, stride, storage_offset)

    def __getitem__(self, key: object) -> Tensor:
        """Basic indexing (ints, slices with positive steps, None, ``...``): a view."""
        return self._with(self._layout.index(self._basic_key(key), positive_steps=True))

    def _basic_key(self, key: object) -> object:
        """``key`` with 0-d integer tensors turned into ints (torch reads them as ints);
        advanced indices (tensors, arrays, lists, bools) are refused here."""
        if not isinstance(key, (tuple, Tensor, np.ndarray, bool, np.bool_)) \
                and hasattr(key, "__index__") and self.ndim == 0:
            # torch's applySelect on a 0-d tensor: its own message for 0, a size-0 dim
            # for any other int.
            if key.__index__() == 0:
                raise DimensionError(
                    "invalid index of a 0-dim tensor. Use `tensor.item()` in Python or "
                    "`tensor.item<T>()` in C++ to convert a 0-dim tensor to a number"
                )
            raise DimensionError(
                f"index {key.__index__()} is out of bounds for dimension 0 with size 0"
            )
        if isinstance(key, slice) and self.ndim == 0:
            # torch's one-slice path: the slice is unpacked and its step checked (on any
            # 1-d layout, for their errors) before the rank is.
            Layout((0,), (1,)).slice_dim(0, key.start, key.stop, key.step, positive_step=True)
            raise DimensionError("slice() cannot be applied to a 0-dim tensor.")
        items = key if isinstance(key, tuple) else (key,)
        basic = []
        for item in items:
            if isinstance(item, Tensor) and item.ndim == 0 and item.dtype.kind in "iu":
                item = int(item.item())
            elif isinstance(item, (Tensor, np.ndarray, list, bool, np.bool_)):
                raise DimensionError(
                    "advanced indexing (tensors, arrays, lists, bools) is not supported: "
                    "rearrange.Tensor implements basic indexing only (ints, slices, None, "
                    f"...); got {type(item).__name__} {item!r}"
                )
            basic.append(item)
        return tuple(basic) if isinstance(key, tuple) else basic[0]

    def __setitem__(self, key: object, value: object) -> None:
        """``self[key] = value`` writes through the view into the storage, torch's way.

        ``value`` is a number or a Tensor (torch refuses lists and arrays too), cast to
        this tensor's dtype. A number must fit the dtype (torch's overflow rule); a 0-d
        tensor fills the target; any other tensor loses its leading size-1 dims and
        broadcasts by :meth:`expand` (torch's messages), and copying a view onto itself is
        a no-op. The target may not address one element twice, nor partly overlap the
        value in memory (torch's "unsupported operation" errors).
        """
        target = self[key]
        if not self._storage.array.flags.writeable:
            raise RearrangeError(
                f"cannot write to x[{key!r}]: the tensor's storage is a read-only numpy "
                "array (from_numpy() of an array with flags.writeable=False); write to a "
                "clone() instead"
            )
        source: Tensor | None = None
        if not isinstance(value, Tensor):
            if not isinstance(value, _NUMBER_TYPES):
                type_name = "torch." + _TORCH_TYPE_NAMES.get(self.dtype.name, "Tensor")
                raise ArgumentTypeError(f"can't assign a {_type_name(value)} to a {type_name}")
            fill = _checked_scalar(value, self.dtype)
        elif value.ndim == 0 and target.ndim > 0:
            fill = value.numpy().copy()  # torch's fill_ clones a value that aliases the target
        else:
            source = value if value.shape == target.shape else _broadcast_to(value, target.shape)
            if source._storage is target._storage and source._layout == target._layout:
                return  # torch's copy_ of a view onto the same data returns at once
            fill = source.numpy()
        if _has_internal_overlap(target._layout):
            raise LayoutError(
                "unsupported operation: more than one element of the written-to tensor "
                "refers to a single memory location. Please clone() the tensor before "
                "performing the operation."
            )
        if source is not None and _partly_overlap(target, source):
            raise LayoutError(
                "unsupported operation: some elements of the input tensor and the "
                "written-to tensor refer to a single memory location. Please clone() the "
                "tensor before performing the operation."
            )
        with np.errstate(over="ignore"):  # float16 takes a too-large value as inf, like torch
            np.copyto(target.numpy(), fill, casting="unsafe")

    # ------------------------------------------------------------------ maybe-copies

    def reshape(self, *shape: object) -> Tensor:
        """A view when strides allow one, else a C-contiguous copy (torch's rule)."""
        sizes = infer_size(_size_args(shape, "reshape", "shape"), self.numel())
        layout = self._layout.try_view(sizes)
        if layout is not None:
            return self._with(layout)
        return self._copy_to(Layout.contiguous(self.shape)).view(sizes)

    def reshape_as(self, other: Tensor) -> Tensor:
        return self.reshape(_require_tensor(other, "reshape_as").shape)

    def flatten(self, start_dim: object = 0, end_dim: object = -1) -> Tensor:
        start = wrap_dim(start_dim, self.ndim)
        end = wrap_dim(end_dim, self.ndim)
        if self.ndim == 0:
            return self.reshape(1)
        if start > end:
            raise LayoutError("flatten() has invalid args: start_dim cannot come after end_dim")
        if start == end:
            return self
        shape = self._layout.shape
        return self.reshape(shape[:start] + (math.prod(shape[start : end + 1]),) + shape[end + 1 :])

    def contiguous(self) -> Tensor:
        """``self`` when already contiguous, else a C-contiguous copy."""
        if self.is_contiguous():
            return self
        return self._copy_to(Layout.contiguous(self.shape))

    def clone(self) -> Tensor:
        """Always a copy, keeping the dim order of the strides (torch's preserve_format)."""
        return self._copy_to(self._preserved_layout())

    def to(self, dtype: object = None, *, copy: bool = False) -> Tensor:
        """This tensor as ``dtype`` (``self`` when nothing changes and ``copy`` is False)."""
        if isinstance(dtype, str) and dtype == "cpu":
            dtype = None
        target = self.dtype if dtype is None else as_dtype(dtype)
        if target == self.dtype and not copy:
            return self
        return self._copy_to(self._preserved_layout(), target)

    def float(self) -> Tensor:
        return self.to(float32)

    def double(self) -> Tensor:
        return self.to(float64)

    def long(self) -> Tensor:
        return self.to(int64)

    def int(self) -> Tensor:
        return self.to(int32)

    def bool(self) -> Tensor:
        return self.to(_BOOL)

    def _preserved_layout(self) -> Layout:
        layout = self._layout
        if any(s < 0 for s in layout.strides):
            return Layout.contiguous(layout.shape)
        if layout.is_non_overlapping_and_dense():
            # Same strides on a fresh storage that starts at the lowest address.
            extent = layout.extent()
            low = extent[0] if extent else layout.offset
            return Layout(layout.shape, layout.strides, layout.offset - low)
        return Layout(layout.shape, layout.dense_strides_like(), 0)

    def _copy_to(self, layout: Layout, dtype: np.dtype | None = None) -> Tensor:
        """A new storage holding this tensor's values, addressed by ``layout``."""
        dtype = self.dtype if dtype is None else dtype
        extent = layout.extent()
        storage = Storage(np.empty(0 if extent is None else extent[1] + 1, dtype))
        result = Tensor._wrap(storage, layout)
        if extent is not None:
            np.copyto(result.numpy(), self.numpy(), casting="unsafe")
        return result


def _broadcast_to(value: Tensor, shape: Sequence[int]) -> Tensor:
    """torch's setitem broadcast: drop ``value``'s leading size-1 dims, then expand."""
    sizes = value.shape
    leading_ones = next((k for k, size in enumerate(sizes) if size != 1), len(sizes))
    stripped = Layout(sizes[leading_ones:], value.stride()[leading_ones:], value.storage_offset())
    return value._with(stripped).expand(shape)


# ---------------------------------------------------------------------- scalar writes

_NUMBER_TYPES = (bool, int, float, complex, np.number, np.bool_)

# How torch's messages spell a dtype's C++ type; float16 values are checked as double.
_CHECKED_TYPE_NAMES = {
    "uint8": "uint8_t", "int8": "int8_t", "int16": "int16_t", "int32": "int",
    "int64": "int64_t", "float16": "double", "float32": "float", "float64": "double",
    "complex64": "c10::complex<float>", "complex128": "c10::complex<double>",
}


def _checked_scalar(value: object, dtype: np.dtype) -> np.ndarray:
    """``value`` as a 0-d array to cast into ``dtype``, or torch's overflow error.

    torch's ``c10::overflows``: integer targets take values in their range (unsigned ones
    also ``-max .. -1``, which wrap) and no NaN or infinity; float32 / complex64 take
    finite values up to float32's max; a non-zero imaginary part fits complex targets
    only; bool takes anything. Python ints beyond int64 are torch's ValueError.
    """
    if isinstance(value, int) and not isinstance(value, bool) \
            and not -2**63 <= value < 2**63:
        raise RearrangeError("Overflow when unpacking long long")
    number = np.asarray(value)
    if dtype.kind != "c" and number.dtype.kind == "c":
        if number.imag != 0 and dtype.kind != "b":
            raise LayoutError(
                f"value cannot be converted to type {_CHECKED_TYPE_NAMES[dtype.name]} "
                f"without overflow"
            )
        number = number.real
    fits = True
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        if number.dtype.kind == "f":
            fits = bool(np.isfinite(number)) and info.min <= number <= info.max
        elif number.dtype.kind in "iu":
            low = -info.max if dtype.kind == "u" else info.min
            fits = low <= int(number) <= info.max
    elif dtype.name in ("float32", "complex64"):
        limit = np.finfo(np.float32).max
        parts = (number.real, number.imag) if number.dtype.kind == "c" else (number,)
        fits = all(not np.isfinite(p) or abs(p) <= limit for p in parts)
    if not fits:
        raise LayoutError(
            f"value cannot be converted to type {_CHECKED_TYPE_NAMES[dtype.name]} without "
            "overflow"
        )
    return number


# ---------------------------------------------------------------------- memory overlap

def _has_internal_overlap(layout: Layout) -> bool:
    """torch's ``has_internal_overlap(...) == YES``: some dim of size > 1 has stride 0.

    Dense layouts (every zero-element one included) never overlap; other overlaps are
    "too hard" for torch, which then writes without complaint, and so do we.
    """
    if layout.is_non_overlapping_and_dense():
        return False
    return any(size > 1 and stride == 0 for size, stride in zip(layout.shape, layout.strides))


def _partly_overlap(a: Tensor, b: Tensor) -> bool:
    """torch's ``get_overlap_status(a, b) == PARTIAL``, decided only for two dense,
    non-empty tensors on one storage: their byte ranges meet but are not the same
    elements in the same order."""
    if a.numel() == 0 or b.numel() == 0 or a._storage is not b._storage:
        return False
    if not (a._layout.is_non_overlapping_and_dense() and b._layout.is_non_overlapping_and_dense()):
        return False
    a_begin, b_begin = a.data_ptr(), b.data_ptr()
    a_end = a_begin + a.numel() * a.element_size()
    b_end = b_begin + b.numel() * b.element_size()
    if a_begin == b_begin and a_end == b_end:
        return a.stride() != b.stride()
    return a_begin < b_end and b_begin < a_end


# ---------------------------------------------------------------------- construction

def _from_array(array: np.ndarray) -> Tensor:
    """A tensor owning a C-contiguous copy of ``array``."""
    flat = np.ascontiguousarray(array).reshape(-1).copy()
    return Tensor._wrap(Storage(flat), Layout.contiguous(array.shape))


def _infer_dtype(data: object, array: np.ndarray) -> np.dtype:
    """torch's defaults for Python data: floats are float32, complex is complex64."""
    if isinstance(data, (np.ndarray, np.generic)):
        return array.dtype
    if array.dtype == np.float64:
        return _DEFAULT_FLOAT
    if array.dtype == np.complex128:
        return complex64
    if array.dtype.kind in "iu":
        return int64
    return array.dtype


def _first_non_number(data: object) -> object:
    """The first leaf of nested sequences ``data`` that is not a number (or ``data``)."""
    if isinstance(data, (list, tuple)):
        for item in data:
            leaf = _first_non_number(item)
            if leaf is not None:
                return leaf
        return None
    if isinstance(data, _NUMBER_TYPES):
        return None
    return data


def tensor(data: object, dtype: object = None) -> Tensor:
    """A new tensor holding a copy of ``data`` (nested lists, scalars, arrays, tensors)."""
    if isinstance(data, Tensor):
        data = data.numpy()
    try:
        array = np.array(data)
    except (ValueError, TypeError) as error:
        raise RearrangeError(f"tensor(): cannot build a tensor from {type(data).__name__}: {error}") from None
    if array.dtype == object or array.dtype.kind in "USV":
        leaf = _first_non_number(data)
        if isinstance(leaf, (str, bytes)):
            raise ArgumentTypeError(f"new(): invalid data type '{type(leaf).__name__}'")
        raise LayoutError(f"Could not infer dtype of {type(leaf).__name__}")
    target = _infer_dtype(data, array) if dtype is None else as_dtype(dtype)
    return _from_array(array.astype(target, copy=False))


def as_tensor(data: object, dtype: object = None) -> Tensor:
    """``data`` itself when it is a tensor of ``dtype``, else :func:`tensor`."""
    if isinstance(data, Tensor) and (dtype is None or as_dtype(dtype) == data.dtype):
        return data
    if isinstance(data, np.ndarray) and (dtype is None or as_dtype(dtype) == data.dtype):
        return from_numpy(data)
    return tensor(data, dtype)


def from_numpy(array: np.ndarray) -> Tensor:
    """A tensor sharing ``array``'s memory (writes show in both); any strides, negative
    included, as long as they are whole multiples of the itemsize."""
    if not isinstance(array, np.ndarray):
        raise ArgumentTypeError(f"expected np.ndarray (got {_type_name(array)})")
    if array.dtype.kind not in "biufc":
        raise ArgumentTypeError(
            f"can't convert np.ndarray of type numpy.{array.dtype.type.__name__}. The only "
            "supported types are: float64, float32, float16, complex64, complex128, int64, "
            "int32, int16, int8, uint64, uint32, uint16, uint8, and bool."
        )
    if not array.dtype.isnative:
        raise RearrangeError(
            "given numpy array has byte order different from the native byte order. "
            "Conversion between byte orders is currently not supported."
        )
    itemsize = array.itemsize
    if itemsize == 0 or any(s % itemsize for s in array.strides):
        raise RearrangeError(
            f"from_numpy(): strides {array.strides} are not multiples of the itemsize "
            f"{itemsize}; copy the array first"
        )
    strides = tuple(s // itemsize for s in array.strides)
    if array.size == 0:
        return Tensor._wrap(Storage(np.empty(0, array.dtype)), Layout(array.shape, strides, 0))
    probe = Layout(array.shape, strides, 0)
    low, high = probe.extent()
    # A view whose first element is the lowest address the array touches.
    lowest = array[tuple(slice(size - 1, size) if s < 0 else slice(0, 1)
                         for size, s in zip(array.shape, strides))]
    flat = np.lib.stride_tricks.as_strided(
        lowest, shape=(high - low + 1,), strides=(itemsize,),
        writeable=array.flags.writeable,
    )
    return Tensor._wrap(Storage(flat), Layout(array.shape, strides, -low))


def as_strided(input: Tensor, size: Sequence[object], stride: Sequence[object],
               storage_offset: object = None) -> Tensor:
    """A view of ``input``'s storage with any sizes/strides that stay inside it."""
    if not isinstance(input, Tensor):
        raise ArgumentTypeError(f"as_strided(): expected a Tensor, got {type(input).__name__}")
    size = _size_args((size,), "as_strided", "size")
    stride = _size_args((stride,), "as_strided", "stride")
    offset = input.storage_offset() if storage_offset is None else as_int(storage_offset, "storage_offset")
    # torch's order of checks: lengths, strides, offset, sizes, bounds.
    if len(size) != len(stride):
        raise LayoutError("mismatch in length of strides and shape")
    if any(s < 0 for s in stride):
        raise LayoutError(
            f"as_strided: Negative strides are not supported at the moment, got strides: {list(stride)}"
        )
    if offset < 0:
        raise LayoutError(f"Tensor: invalid storage offset {offset}")
    if any(s < 0 for s in size):
        raise LayoutError(
            f"Storage size calculation overflowed with sizes={list(size)} and "
            f"strides={list(stride)}"
        )
    if size_problem(size) is not None and len(size) <= MAX_DIMS:
        raise LayoutError("numel: integer multiplication overflow")
    layout = Layout(size, stride, offset)
    needed = 0 if layout.numel == 0 else layout.extent()[1] + 1
    itemsize = input.element_size()
    if needed > len(input.storage()):
        raise LayoutError(
            f"setStorage: sizes {list(size)}, strides {list(stride)}, storage offset {offset}, "
            f"and itemsize {itemsize} requiring a storage size of {needed * itemsize} are out "
            f"of bounds for storage of size {len(input.storage()) * itemsize}"
        )
    return input._with(layout)


def _filled(name: str, sizes: tuple, dtype: object, fill) -> Tensor:
    shape = _size_args(sizes, name)
    negative = next((s for s in shape if s < 0), None)
    if negative is not None and name == "zeros":
        raise LayoutError("zeros: Dimension size must be non-negative.")
    if negative is not None:
        raise LayoutError(
            f"Trying to create tensor with negative dimension {negative}: {list(shape)}"
        )
    target = _DEFAULT_FLOAT if dtype is None else as_dtype(dtype)
    _check_creatable(shape, target)
    try:
        flat = fill(math.prod(shape), target)
    except MemoryError as error:
        raise OutOfMemoryError(f"{name}: not enough memory for sizes={format_int_list(shape)}: "
                               f"{error}") from None
    return Tensor._wrap(Storage(flat), Layout.contiguous(shape))


def _check_creatable(shape: tuple[int, ...], dtype: np.dtype) -> None:
    """Refuse, before allocating, a tensor no storage can hold: torch's message for an
    element or byte count past int64, ours for more than MAX_DIMS dims."""
    problem = size_problem(shape, dtype.itemsize)
    if problem is None:
        return
    if len(shape) > MAX_DIMS:
        raise LayoutError(f"a rearrange.Tensor has at most {MAX_DIMS} dims (numpy's limit); "
                          f"got {problem}")
    raise LayoutError(
        f"Storage size calculation overflowed with sizes={format_int_list(shape)} ({problem})")


def zeros(*size: object, dtype: object = None) -> Tensor:
    return _filled("zeros", size, dtype, lambda n, t: np.zeros(n, t))


def ones(*size: object, dtype: object = None) -> Tensor:
    return _filled("ones", size, dtype, lambda n, t: np.ones(n, t))


def empty(*size: object, dtype: object = None) -> Tensor:
    return _filled("empty", size, dtype, lambda n, t: np.empty(n, t))


def full(size: Sequence[object], fill_value: object, dtype: object = None) -> Tensor:
    if dtype is None:
        dtype = _infer_dtype(fill_value, np.asarray(fill_value))
    return _filled("full", (size,), dtype, lambda n, t: np.full(n, fill_value, t))


def rand(*size: object, dtype: object = None) -> Tensor:
    """Uniform on [0, 1)."""
    return _filled("rand", size, dtype, lambda n, t: _rng().random(n).astype(t))


def randn(*size: object, dtype: object = None) -> Tensor:
    """Standard normal."""
    return _filled("randn", size, dtype, lambda n, t: _rng().standard_normal(n).astype(t))


def arange(start: object, end: object = None, step: object = 1, *, dtype: object = None) -> Tensor:
    """``[start, end)`` by ``step``; int64 for integer arguments, float32 otherwise."""
    if end is None:
        start, end = 0, start
    for name, value in (("start", start), ("end", end), ("step", step)):
        if isinstance(value, bool) or not isinstance(value, (int, float, np.number)):
            raise ArgumentTypeError(f"arange(): {name} must be a number, got {value!r}")
    if step == 0:
        raise LayoutError("step must be nonzero")
    if (end - start) * step < 0:
        raise LayoutError("upper bound and lower bound inconsistent with step sign")
    integral = all(isinstance(v, (int, np.integer)) for v in (start, end, step))
    if integral and not all(-MAX_SIZE - 1 <= v <= MAX_SIZE for v in (start, end, step)):
        raise LayoutError("value cannot be converted to type int64_t without overflow")
    if not integral and not all(math.isfinite(v) for v in (start, end, step)):
        raise LayoutError(f"unsupported range: {start} -> {end}")
    target = (int64 if integral else _DEFAULT_FLOAT) if dtype is None else as_dtype(dtype)
    count = -((start - end) // step) if integral else math.ceil((end - start) / step)
    _check_creatable((max(count, 0),), target)
    values = np.arange(start, end, step, dtype=np.float64 if not integral else np.int64)
    return _from_array(values.astype(target))
