"""Strided layouts: shape + strides + offset over a flat storage.

A :class:`Layout` says where element ``(i0, i1, ...)`` lives in a flat storage::

    position(i) = offset + sum(i_k * strides[k])

Strides and offset are counted in *elements*, not bytes. Every operation returns a new
Layout and never touches data, so this module needs neither numpy nor torch. The rules
follow PyTorch's (``aten/src/ATen/TensorUtils.cpp``, ``ExpandUtils.cpp``,
``TensorShape.cpp``) exactly, including size-1 dims (whose stride is arbitrary),
zero-element layouts and 0-d layouts; the error texts are torch's too. Negative strides
are valid Layouts (numpy arrays have them), although torch itself never produces one.

"No view exists" is a value: :meth:`Layout.try_view` returns ``None`` and the caller
decides whether that means a copy or an error.
"""

from __future__ import annotations

import math
import operator
from typing import Iterable, Sequence

from .errors import ArgumentTypeError, DimensionError, LayoutError, RearrangeError
from .records import record

__all__ = ["Layout", "row_major_strides", "wrap_dim", "infer_size", "format_int_list",
           "MAX_DIMS", "MAX_SIZE", "size_problem", "canonical_layout", "view_of", "flipped"]


_PLAIN_INT = frozenset({int})

#: numpy's NPY_MAXDIMS: no numpy array, so no result of this package, has more dims.
MAX_DIMS = 64
#: int64's maximum, the index type of numpy and torch: no size, element count or byte
#: count of an array exceeds it.
MAX_SIZE = 2**63 - 1


def size_problem(shape: Sequence[int], itemsize: int = 1) -> str | None:
    """Why no array of ``shape`` with ``itemsize``-byte elements can exist, or None.

    An array has at most :data:`MAX_DIMS` dims, and its sizes, its element count and its
    byte count are at most :data:`MAX_SIZE`; the counts skip size-0 dims, as numpy's own
    check does (``np.empty((0, 2**62, 4))`` is refused too). Pure arithmetic: callers ask
    before they allocate anything or hand the shape to numpy or torch. ``shape`` holds
    non-negative ints.
    """
    if len(shape) > MAX_DIMS:
        return f"{len(shape)} dims; arrays have at most {MAX_DIMS} (numpy's limit)"
    count = 1
    for dim, size in enumerate(shape):
        if size > MAX_SIZE:
            return f"size {size} at dim {dim}; sizes must be below 2**63"
        if size:
            count *= size
    if count > MAX_SIZE:
        return (f"shape {tuple(shape)}: {count:,} elements (ignoring size-0 dims); "
                f"at most 2**63 - 1 are possible")
    if count * itemsize > MAX_SIZE:
        return (f"shape {tuple(shape)}: {count:,} elements of {itemsize} bytes are "
                f"{count * itemsize:,} bytes; at most 2**63 - 1 are possible")
    return None


def format_int_list(values: Iterable[int]) -> str:
    """``[2, 3]``: how torch prints an IntArrayRef in its messages."""
    return "[" + ", ".join(str(v) for v in values) + "]"


def as_int(value: object, what: str) -> int:
    """``value`` as a Python int; bools and non-integers are rejected, naming ``what``."""
    if not isinstance(value, bool) and hasattr(value, "__index__"):
        try:
            return operator.index(value)
        except TypeError:  # e.g. a numpy array of several elements
            pass
    raise ArgumentTypeError(f"{what} must be an integer, got {type(value).__name__} {value!r}")


def as_int_tuple(values: Iterable[object], what: str) -> tuple[int, ...]:
    if type(values) is tuple and _PLAIN_INT.issuperset(map(type, values)):
        return values       # already canonical (what every internal caller passes)
    try:
        items = tuple(values)
    except TypeError:
        raise ArgumentTypeError(
            f"{what} must be a sequence of integers, got {type(values).__name__} {values!r}"
        ) from None
    return tuple(as_int(v, f"{what}[{k}]") for k, v in enumerate(items))


def wrap_dim(dim: object, ndim: int, *, wrap_scalar: bool = True) -> int:
    """torch's ``maybe_wrap_dim``: a dim in ``[-ndim, ndim)`` as a non-negative index.

    A 0-d layout accepts dims ``-1`` and ``0`` when ``wrap_scalar`` (most ops do);
    ``size(dim)`` and ``stride(dim)`` do not.
    """
    dim = as_int(dim, "dim")
    if ndim <= 0:
        if not wrap_scalar:
            raise DimensionError(
                f"Dimension specified as {dim} but tensor has no dimensions"
            )
        ndim = 1
    low, high = -ndim, ndim - 1
    if dim < low or dim > high:
        raise DimensionError(
            f"Dimension out of range (expected to be in range of [{low}, {high}], "
            f"but got {dim})"
        )
    return dim + ndim if dim < 0 else dim


def row_major_strides(shape: Sequence[int]) -> tuple[int, ...]:
    """C-contiguous strides; a size-0 dim counts as 1, as in torch's ``empty``."""
    strides = []
    step = 1
    for size in reversed(shape):
        strides.append(step)
        if size > 1:        # step *= max(size, 1)
            step *= size
    strides.reverse()
    return tuple(strides)


def infer_size(shape: Sequence[object], numel: int) -> tuple[int, ...]:
    """torch's ``infer_size``: resolve one ``-1`` in ``shape`` for ``numel`` elements."""
    shape = as_int_tuple(shape, "shape")
    known = 1
    inferred_at: int | None = None
    for index, size in enumerate(shape):
        if size == -1:
            if inferred_at is not None:
                raise LayoutError("only one dimension can be inferred")
            inferred_at = index
        elif size >= 0:
            known *= size
        else:
            raise LayoutError(
                f"invalid shape dimension {size} at index {index} of shape "
                f"{format_int_list(shape)}"
            )
    if numel == known or (inferred_at is not None and known > 0 and numel % known == 0):
        if inferred_at is None:
            return shape
        if known == 0:
            raise LayoutError(
                f"cannot reshape tensor of 0 elements into shape {format_int_list(shape)} "
                "because the unspecified dimension size -1 can be any value and is ambiguous"
            )
        resolved = list(shape)
        resolved[inferred_at] = numel // known
        return tuple(resolved)
    if inferred_at is not None and known == 0:
        raise LayoutError(
            f"cannot reshape tensor of 0 elements into shape {format_int_list(shape)} "
            "because the unspecified dimension size -1 can be any value and is ambiguous"
        )
    raise LayoutError(f"shape '{format_int_list(shape)}' is invalid for input of size {numel}")


@record
class Layout:
    """Shape, strides (in elements) and offset (in elements) over a flat storage.

    Invariants: ``len(shape) == len(strides)``; every size is ``>= 0``; all are ints.
    Strides may be negative or zero (broadcast). The stride of a size-1 dim carries no
    meaning for addressing but is kept as given, because torch keeps it too.
    """

    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int = 0

    def __post_init__(self) -> None:
        shape, strides, offset = self.shape, self.strides, self.offset
        # Fast path: the ops below always pass canonical values (tuples of plain ints).
        if (type(shape) is tuple and type(strides) is tuple and type(offset) is int
                and len(shape) == len(strides) and _PLAIN_INT.issuperset(map(type, shape))
                and _PLAIN_INT.issuperset(map(type, strides)) and min(shape, default=0) >= 0):
            return
        shape = as_int_tuple(self.shape, "shape")
        strides = as_int_tuple(self.strides, "strides")
        offset = as_int(self.offset, "offset")
        if len(shape) != len(strides):
            raise RearrangeError(
                f"shape {shape} and strides {strides} must have the same length, "
                f"got {len(shape)} and {len(strides)}"
            )
        for dim, size in enumerate(shape):
            if size < 0:
                raise RearrangeError(f"sizes must be non-negative, got {size} at dim {dim}")
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "strides", strides)
        object.__setattr__(self, "offset", offset)

    # ------------------------------------------------------------------ construction

    @classmethod
    def contiguous(cls, shape: Sequence[int], offset: int = 0) -> Layout:
        """The C-contiguous (row-major) layout of ``shape``."""
        if type(shape) is not tuple or not _PLAIN_INT.issuperset(map(type, shape)):
            shape = as_int_tuple(shape, "shape")
        if cls is Layout and type(offset) is int and min(shape, default=0) >= 0:
            return canonical_layout(shape, row_major_strides(shape), offset)
        return cls(shape, row_major_strides(shape), offset)

    # ------------------------------------------------------------------ inspection

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    def is_contiguous(self) -> bool:
        """PyTorch's definition: row-major, ignoring size-1 dims; any zero-size layout is."""
        if self.numel == 0:
            return True
        expected = 1
        for size, stride in zip(reversed(self.shape), reversed(self.strides)):
            if size != 1:
                if stride != expected:
                    return False
                expected *= size
        return True

    def is_non_overlapping_and_dense(self) -> bool:
        """Every element of a gap-free block of ``numel`` positions is addressed once.

        torch's ``is_non_overlapping_and_dense`` flag: contiguous (so any zero-element
        layout), or some permutation of the dims is contiguous, size-1 dims ignored.
        """
        if self.is_contiguous():
            return True
        if self.ndim == 1:
            return self.shape[0] < 2 or self.strides[0] == 1
        order = sorted(
            range(self.ndim),
            key=lambda d: (self.shape[d] < 2, self.strides[d] if self.shape[d] >= 2 else 0),
        )
        required = 1
        for dim in order:
            if self.shape[dim] < 2:
                return True
            if self.strides[dim] != required:
                return False
            required *= self.shape[dim]
        return True

    def dense_strides_like(self) -> tuple[int, ...]:
        """torch's ``infer_dense_strides``: dense strides in this layout's dim order.

        What ``clone()`` gives a layout that is not already dense: the dims keep their
        order of increasing stride (a stable insertion sort in which stride-0 dims never
        move), and get the strides of a fresh, gap-free buffer.
        """
        if self.ndim == 0:
            return ()
        shape, strides = self.shape, self.strides
        order = list(range(self.ndim - 1, -1, -1))  # fastest first

        def comes_after(a: int, b: int) -> int:
            if strides[a] == 0 or strides[b] == 0:
                return 0
            if strides[a] < strides[b]:
                return -1
            if strides[a] > strides[b]:
                return 1
            return 1 if shape[a] > shape[b] else 0

        for i in range(1, self.ndim):
            moving = i
            for j in range(1, i + 1):
                before = i - j
                verdict = comes_after(order[before], order[moving])
                if verdict > 0:
                    order[before], order[moving] = order[moving], order[before]
                    moving = before
                elif verdict < 0:
                    break
        result = [0] * self.ndim
        step = 1
        for dim in order:
            result[dim] = step
            if shape[dim] > 1:
                step *= shape[dim]
        return tuple(result)

    def extent(self) -> tuple[int, int] | None:
        """The lowest and highest storage positions addressed, or None if ``numel == 0``."""
        if self.numel == 0:
            return None
        low = high = self.offset
        for size, stride in zip(self.shape, self.strides):
            reach = (size - 1) * stride
            if reach < 0:
                low += reach
            else:
                high += reach
        return low, high

    def position(self, index: Sequence[int]) -> int:
        """Storage position of one element (no bounds check beyond the rank)."""
        index = as_int_tuple(index, "index")
        if len(index) != self.ndim:
            raise DimensionError(f"expected an index of {self.ndim} integers, got {len(index)}")
        return self.offset + sum(i * s for i, s in zip(index, self.strides))

    # ------------------------------------------------------------------ axis moves

    def permute(self, dims: Sequence[object]) -> Layout:
        """Dim ``k`` of the result is dim ``dims[k]`` of this layout."""
        order = as_int_tuple(dims, "dims")
        if sorted(order) != list(range(self.ndim)):     # negative, duplicate or missing dims
            order = self._wrapped_permutation(order)
        shape, strides = self.shape, self.strides
        return canonical_layout(tuple([shape[d] for d in order]),
                                tuple([strides[d] for d in order]), self.offset)

    def _wrapped_permutation(self, dims: tuple[int, ...]) -> list[int]:
        """``dims`` with negative dims wrapped; refuses a wrong count or a duplicate."""
        if len(dims) != self.ndim:
            raise LayoutError(
                "permute(sparse_coo): number of dimensions in the tensor input does not "
                "match the length of the desired ordering of dimensions i.e. "
                f"input.dim() = {self.ndim} is not equal to len(dims) = {len(dims)}"
            )
        seen = [False] * self.ndim
        order = []
        for dim in dims:
            dim = wrap_dim(dim, self.ndim)
            if seen[dim]:
                raise LayoutError("permute(): duplicate dims are not allowed.")
            seen[dim] = True
            order.append(dim)
        return order

    def transpose(self, dim0: object, dim1: object) -> Layout:
        dim0, dim1 = wrap_dim(dim0, self.ndim), wrap_dim(dim1, self.ndim)
        if self.ndim == 0 or dim0 == dim1:
            return self
        order = list(range(self.ndim))
        order[dim0], order[dim1] = dim1, dim0
        return self.permute(order)

    def movedim(self, source: object, destination: object) -> Layout:
        """Move ``source`` dims to ``destination`` positions; the rest keep their order."""
        src = (source,) if not isinstance(source, (tuple, list)) else tuple(source)
        dst = (destination,) if not isinstance(destination, (tuple, list)) else tuple(destination)
        src = as_int_tuple(src, "source")
        dst = as_int_tuple(dst, "destination")
        if len(src) != len(dst):
            raise LayoutError(
                "movedim: Invalid source or destination dims: source "
                f"({format_int_list(src)} dims) should contain the same number of dims as "
                f"destination ({format_int_list(dst)} dims)"
            )
        wrapped_src = [wrap_dim(d, self.ndim) for d in src]
        wrapped_dst = [wrap_dim(d, self.ndim) for d in dst]
        if len(set(wrapped_src)) != len(wrapped_src):
            raise LayoutError(f"movedim: repeated dim in `source` ({format_int_list(src)})")
        if len(set(wrapped_dst)) != len(wrapped_dst):
            raise LayoutError(
                f"movedim: repeated dim in `destination` ({format_int_list(dst)})"
            )
        if self.ndim == 0:
            return self
        order: list[int | None] = [None] * self.ndim
        for s, d in zip(wrapped_src, wrapped_dst):
            order[d] = s
        rest = iter(d for d in range(self.ndim) if d not in wrapped_src)
        filled = [next(rest) if d is None else d for d in order]
        return self.permute(filled)

    # ------------------------------------------------------------------ unit dims

    def squeeze(self, dims: object = None) -> Layout:
        """Remove size-1 dims: all of them, or those of ``dims`` that have size 1."""
        if dims is None:
            chosen = {d for d, size in enumerate(self.shape) if size == 1}
        else:
            listed = dims if isinstance(dims, (tuple, list)) else (dims,)
            wrapped: list[int] = []
            for dim in listed:
                dim = wrap_dim(dim, self.ndim)
                if dim in wrapped:
                    raise LayoutError(f"dim {dim} appears multiple times in the list of dims")
                wrapped.append(dim)
            chosen = {d for d in wrapped if self.ndim and self.shape[d] == 1}
        keep = [d for d in range(self.ndim) if d not in chosen]
        return Layout(
            tuple(self.shape[d] for d in keep), tuple(self.strides[d] for d in keep), self.offset
        )

    def unsqueeze(self, dim: object) -> Layout:
        """Insert a size-1 dim at ``dim``; its stride is torch's ``size * stride`` of the
        dim it lands before (1 at the end)."""
        dim = wrap_dim(dim, self.ndim + 1)
        stride = 1 if dim >= self.ndim else self.shape[dim] * self.strides[dim]
        return Layout(
            self.shape[:dim] + (1,) + self.shape[dim:],
            self.strides[:dim] + (stride,) + self.strides[dim:],
            self.offset,
        )

    def expand(self, sizes: Sequence[object], *, type_name: str = "torch.Tensor") -> Layout:
        """Broadcast size-1 dims (and new leading dims) to ``sizes`` with stride 0.

        torch's ``inferExpandGeometry``: ``-1`` keeps an existing dim's size; a 0-d layout
        takes ``sizes`` as they are, all strides 0. A negative size that would become a
        dim is torch's numel overflow error (torch 2.13 lets one through when another size
        is 0 — pytorch#70398 — a Layout never holds a negative size). ``type_name`` only
        decorates the rank error message, as torch's does
        (``expand(torch.FloatTensor{[2, 3]}, size=[3])``).
        """
        sizes = as_int_tuple(sizes, "sizes")
        if len(sizes) < self.ndim:
            raise LayoutError(
                f"expand({type_name}{{{format_int_list(self.shape)}}}, "
                f"size={format_int_list(sizes)}): the number of sizes provided "
                f"({len(sizes)}) must be greater or equal to the number of dimensions in "
                f"the tensor ({self.ndim})"
            )
        if self.ndim == 0:
            new_shape, new_strides = list(sizes), [0] * len(sizes)
        else:
            new_shape = [0] * len(sizes)
            new_strides = [0] * len(sizes)
            for i in range(len(sizes) - 1, -1, -1):
                dim = self.ndim - len(sizes) + i
                if dim >= 0:
                    size, stride = self.shape[dim], self.strides[dim]
                else:
                    size, stride = 1, new_shape[i + 1] * new_strides[i + 1]
                target = sizes[i]
                if target == -1:
                    if dim < 0:
                        raise LayoutError(
                            f"The expanded size of the tensor ({target}) isn't allowed in a "
                            f"leading, non-existing dimension {i}"
                        )
                    target = size
                if size != target:
                    if size != 1:
                        raise LayoutError(
                            f"The expanded size of the tensor ({target}) must match the "
                            f"existing size ({size}) at non-singleton dimension {i}.  Target "
                            f"sizes: {format_int_list(sizes)}.  Tensor sizes: "
                            f"{format_int_list(self.shape)}"
                        )
                    size, stride = target, 0
                new_shape[i], new_strides[i] = size, stride
        if any(size < 0 for size in new_shape) or size_problem(new_shape) is not None:
            raise LayoutError("numel: integer multiplication overflow")
        return Layout(tuple(new_shape), tuple(new_strides), self.offset)

    # ------------------------------------------------------------------ split / merge

    def split(self, dim: object, sizes: Sequence[object]) -> Layout:
        """Split one dim into several whose sizes multiply to it: always a view.

        The pieces get the strides of a row-major walk of the original dim. A
        zero-size dim keeps the original stride for every piece (no position is ever
        addressed). Use :meth:`try_view` for torch's ``unflatten`` strides.
        """
        dim = wrap_dim(dim, self.ndim, wrap_scalar=False)
        sizes = as_int_tuple(sizes, "sizes")
        if math.prod(sizes) != self.shape[dim] or any(s < 0 for s in sizes):
            raise LayoutError(
                f"cannot split dim {dim} of size {self.shape[dim]} into "
                f"{format_int_list(sizes)}: the sizes must multiply to {self.shape[dim]}"
            )
        stride = self.strides[dim]
        pieces = tuple([stride * s for s in row_major_strides(sizes)])
        return canonical_layout(
            self.shape[:dim] + sizes + self.shape[dim + 1 :],
            self.strides[:dim] + pieces + self.strides[dim + 1 :],
            self.offset,
        )

    def merge_obstacle(self, start: int, stop: int) -> tuple[int, int] | None:
        """Why dims ``start .. stop-1`` cannot merge into one: the first pair ``(i, j)``
        of consecutive non-unit dims with ``stride(i) != stride(j) * size(j)``, or None
        when they can (then :meth:`try_merge` succeeds).

        Size-1 dims never obstruct; a zero-element layout merges anywhere.
        """
        if self.numel == 0:
            return None
        kept = [d for d in range(start, stop) if self.shape[d] != 1]
        for outer, inner in zip(kept, kept[1:]):
            if self.strides[outer] != self.strides[inner] * self.shape[inner]:
                return outer, inner
        return None

    def try_merge(self, start: int, stop: int) -> Layout | None:
        """Dims ``start .. stop-1`` merged into one dim, or None when strides forbid it."""
        shape = self.shape[:start] + (math.prod(self.shape[start:stop]),) + self.shape[stop:]
        return self.try_view(shape)

    def try_view(self, new_shape: Sequence[object]) -> Layout | None:
        """The layout of ``new_shape`` that walks the same elements in the same row-major
        order without moving data, or None when no strides can express it.

        This is torch's ``computeStride``: the old dims are cut into chunks that are each
        contiguous in themselves; the new shape must split along chunk borders. Size-1
        dims take any stride. ``new_shape`` must hold exactly ``numel`` elements.
        """
        new_shape = as_int_tuple(new_shape, "shape")
        numel = math.prod(self.shape)
        if math.prod(new_shape) != numel or min(new_shape, default=0) < 0:
            raise LayoutError(
                f"shape '{format_int_list(new_shape)}' is invalid for input of size {numel}"
            )
        return view_of(self, new_shape, numel)

    # ------------------------------------------------------------------ indexing

    def select(self, dim: object, index: object, *, reported_dim: int | None = None) -> Layout:
        """Fix ``dim`` at ``index`` (negative counts from the end); the dim disappears.

        ``reported_dim`` is the dim the error message names; indexing passes the item's
        position in the key, as torch does (``x[None, 5]`` fails "for dimension 1").
        """
        dim = wrap_dim(dim, self.ndim, wrap_scalar=False)
        index = as_int(index, "index")
        size = self.shape[dim]
        if index < -size or index >= size:
            shown = dim if reported_dim is None else reported_dim
            raise DimensionError(
                f"index {index} is out of bounds for dimension {shown} with size {size}"
            )
        if index < 0:
            index += size
        return Layout(
            self.shape[:dim] + self.shape[dim + 1 :],
            self.strides[:dim] + self.strides[dim + 1 :],
            self.offset + index * self.strides[dim],
        )

    def slice_dim(self, dim: int, start: object, stop: object, step: object, *,
                  positive_step: bool = False) -> Layout:
        """Python slice semantics on one dim (out-of-range bounds clamp); any non-zero
        step, negative included, gives a valid Layout unless ``positive_step`` (torch's
        rule: "step must be greater than zero")."""
        dim = wrap_dim(dim, self.ndim, wrap_scalar=False)
        try:
            begin, end, stride_step = slice(start, stop, step).indices(self.shape[dim])
        except TypeError as error:  # CPython's text, which torch passes on
            raise ArgumentTypeError(str(error)) from None
        except ValueError as error:  # "slice step cannot be zero"
            raise RearrangeError(str(error)) from None
        if positive_step and stride_step < 0:
            raise RearrangeError("step must be greater than zero")
        length = len(range(begin, end, stride_step))
        if length == 0 and stride_step > 0:
            begin = min(begin, self.shape[dim])
        elif length == 0:
            begin = 0 if self.shape[dim] == 0 else min(begin, self.shape[dim] - 1)
        stride = self.strides[dim]
        return Layout(
            self.shape[:dim] + (length,) + self.shape[dim + 1 :],
            self.strides[:dim] + (stride * stride_step,) + self.strides[dim + 1 :],
            self.offset + begin * stride,
        )

    def index(self, key: object, *, positive_steps: bool = False) -> Layout:
        """Basic indexing: a key of ints, slices, ``None`` and at most one ``...``.

        Negative slice steps are accepted (numpy's rule) unless ``positive_steps``
        (torch's). As in torch, the key's length is checked first, then the items are
        applied left to right, so the first bad item (in key order) is the one reported,
        and an out-of-range int names its position in the key as the dimension.
        """
        items = key if isinstance(key, tuple) else (key,)
        if sum(item is Ellipsis for item in items) > 1:
            raise DimensionError("an index can only have a single ellipsis ('...')")
        consumed = sum(1 for item in items if item is not None and item is not Ellipsis)
        if consumed > self.ndim:
            raise DimensionError(f"too many indices for tensor of dimension {self.ndim}")
        layout = self
        dim = 0  # the dim of ``layout`` the next item applies to
        for position, item in enumerate(items):
            if item is None:
                layout = layout.unsqueeze(dim)
                dim += 1
            elif item is Ellipsis:
                dim += self.ndim - consumed  # the dims no other item names
            elif isinstance(item, slice):
                layout = layout.slice_dim(dim, item.start, item.stop, item.step,
                                          positive_step=positive_steps)
                dim += 1
            elif hasattr(item, "__index__") and not isinstance(item, bool):
                layout = layout.select(dim, item, reported_dim=position)
            else:
                # torch reads a str as a sequence of indices and fails on its type.
                error = ArgumentTypeError if isinstance(item, (str, bytes)) else DimensionError
                raise error(
                    "only integers, slices (`:`), ellipsis (`...`), None and long or byte "
                    f"Variables are valid indices (got {type(item).__name__})"
                )
        return layout


# A Layout from values that are canonical by construction — tuples of plain ints of equal
# length, sizes >= 0, an int offset — without the constructor's checks (which cost more
# than the rest of most layout ops). Every caller derives its values from a Layout's own
# (already checked) values and from sizes it has checked itself. The slots are set
# through their descriptors, as the frozen dataclass's own __init__ does.
_new_object = object.__new__
_set_shape = Layout.__dict__["shape"].__set__      # the slots' member descriptors
_set_strides = Layout.__dict__["strides"].__set__
_set_offset = Layout.__dict__["offset"].__set__


def canonical_layout(shape: tuple[int, ...], strides: tuple[int, ...], offset: int = 0) -> Layout:
    """``Layout(shape, strides, offset)`` for values known to be canonical (see above)."""
    layout = _new_object(Layout)
    _set_shape(layout, shape)
    _set_strides(layout, strides)
    _set_offset(layout, offset)
    return layout


def flipped(layout: Layout, axes: Iterable[int]) -> Layout:
    """numpy's flip of ``axes`` as a view (torch's flip copies): each axis' stride
    negated and the offset moved to its last element (an empty axis moves nothing)."""
    strides = list(layout.strides)
    offset = layout.offset
    for axis in axes:
        if layout.shape[axis] > 0:
            offset += (layout.shape[axis] - 1) * strides[axis]
        strides[axis] = -strides[axis]
    return Layout(layout.shape, tuple(strides), offset)


def view_of(layout: Layout, new_shape: tuple[int, ...], numel: int) -> Layout | None:
    """:meth:`Layout.try_view` for a ``new_shape`` known to be canonical (a tuple of
    plain ints >= 0) and to hold ``numel``, the layout's element count: the planner
    calls it with shapes made of the layout's own sizes."""
    shape, strides = layout.shape, layout.strides
    if not shape:
        return canonical_layout(new_shape, (1,) * len(new_shape), layout.offset)
    if numel == 0:
        if new_shape == shape:
            return layout
        return canonical_layout(new_shape, row_major_strides(new_shape), layout.offset)

    new_strides = [0] * len(new_shape)
    view_d = len(new_shape) - 1
    chunk_base_stride = strides[-1]
    tensor_numel = 1
    view_numel = 1
    for tensor_d in range(len(shape) - 1, -1, -1):
        tensor_numel *= shape[tensor_d]
        chunk_ends = tensor_d == 0 or (
            shape[tensor_d - 1] != 1
            and strides[tensor_d - 1] != tensor_numel * chunk_base_stride
        )
        if not chunk_ends:
            continue
        while view_d >= 0 and (view_numel < tensor_numel or new_shape[view_d] == 1):
            new_strides[view_d] = view_numel * chunk_base_stride
            view_numel *= new_shape[view_d]
            view_d -= 1
        if view_numel != tensor_numel:
            return None
        if tensor_d > 0:
            chunk_base_stride = strides[tensor_d - 1]
            tensor_numel = 1
            view_numel = 1
    if view_d != -1:
        return None
    return canonical_layout(new_shape, tuple(new_strides), layout.offset)
