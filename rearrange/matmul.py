"""A two-input contraction as one batched matrix product: the form numpy's and torch's
matmul take (rearrange/contraction.py plans einsum; the backends lower this form).

Below contraction.py and the backends: both import it, it imports neither."""

from __future__ import annotations

import math
from typing import Any, Mapping

from .records import record

__all__ = ["MatmulForm", "matmul_form", "product_letters", "shape_arg"]


def shape_arg(shape: tuple[int, ...]) -> str:
    """A shape as the arguments of ``reshape``/``view``: ``2, 3``, ``6,`` or ``()``."""
    if not shape:
        return "()"
    return f"{shape[0]}," if len(shape) == 1 else ", ".join(map(str, shape))


@record
class MatmulForm:
    """A two-input contraction as one batched matrix product ``left @ right``, for
    libraries whose matmul beats their einsum's bookkeeping (torch: ~10 µs against ~24 µs
    for small tensors). Each input's elementary axes are permuted to (batch, free,
    summed) / (batch, summed, free) and reshaped to 3 groups; the product's last two dims
    are reshaped back and permuted to the output's order. ``None``: that op changes
    nothing and is left out.

    Invariant: every letter is in both inputs or in the output (no axis summed within one
    input), once per term (no diagonal), never ``...``, and has the same length in both
    inputs (no size-1 broadcast), so each group is a product of equal lengths and the
    reshapes are exact.
    """

    batch: str                            # letters of both inputs and the output
    rows: str                             # of input 0 and the output
    inner: str                            # of both inputs only: summed
    columns: str                          # of input 1 and the output
    left_order: tuple[int, ...] | None    # input 0 to batch, rows, inner
    left_shape: tuple[int, ...] | None    # then (*batch, rows, inner) as 3 groups
    right_order: tuple[int, ...] | None   # input 1 to batch, inner, columns
    right_shape: tuple[int, ...] | None
    result_shape: tuple[int, ...] | None  # the product to (*batch, *rows, *columns)
    output_order: tuple[int, ...] | None  # then to the output's letter order

    def describe(self, names: Mapping[str, str], library: str = "torch") -> str:
        def axes(letters: str) -> str:
            return " ".join(names[c] for c in letters) or "none"
        return (f"{library}.matmul: batch {axes(self.batch)}, rows {axes(self.rows)}, summed "
                f"{axes(self.inner)}, columns {axes(self.columns)}")

    def source(self, left: str, right: str, library: str = "torch") -> str:
        """The torch (or numpy) expression, on the prepared inputs' expressions."""
        permute, module = ("permute", "torch") if library == "torch" else ("transpose", "np")

        def shaped(expr: str, order: tuple[int, ...] | None, shape: tuple[int, ...] | None) -> str:
            if order is not None:
                expr += f".{permute}({shape_arg(order)})"
            if shape is not None:
                expr += f".reshape({shape_arg(shape)})"
            return expr
        call = (f"{module}.matmul({shaped(left, self.left_order, self.left_shape)}, "
                f"{shaped(right, self.right_order, self.right_shape)})")
        call = shaped(call, None, self.result_shape)
        if self.output_order is not None:
            call += f".{permute}({shape_arg(self.output_order)})"
        return call


def product_letters(left: str, right: str, out: str, left_shape: tuple[int, ...],
                    right_shape: tuple[int, ...]
                    ) -> tuple[str, str, str, str, dict[str, int]] | None:
    """The contraction ``left,right->out`` of operands of these shapes as one batched
    matrix product's letters: ``(batch, rows, inner, columns, sizes)`` — batch, rows and
    columns in the output's order, the summed (inner) ones in the left operand's, every
    letter's length — or None where it is not one: a letter twice in one term, a letter
    whose lengths differ between the operands (a size-1 axis broadcast), or one summed
    within one operand (in it alone and not in the output)."""
    if len(set(left)) != len(left) or len(set(right)) != len(right):
        return None
    sizes: dict[str, int] = {}
    for term, shape in ((left, left_shape), (right, right_shape)):
        for letter, size in zip(term, shape):
            if sizes.setdefault(letter, size) != size:
                return None
    if any((c in left) != (c in right) and c not in out for c in sizes):
        return None
    batch = "".join(c for c in out if c in left and c in right)
    rows = "".join(c for c in out if c in left and c not in right)
    columns = "".join(c for c in out if c in right and c not in left)
    inner = "".join(c for c in left if c not in out)
    return batch, rows, inner, columns, sizes


def matmul_form(plan: Any) -> MatmulForm | None:
    """``plan``'s contraction as a batched matrix product, or None where it is not one
    (not two inputs, a diagonal, an axis summed within one input, ``...``, or a size-1
    axis broadcast against a longer one)."""
    if len(plan.inputs) != 2 or "." in plan.subscripts:
        return None
    terms, out = plan.subscripts.split("->")
    left, right = terms.split(",")
    shapes = [layout.shape if prep is None else prep.plan.output.shape
              for layout, prep in zip(plan.inputs, plan.preparations)]
    letters = product_letters(left, right, out, shapes[0], shapes[1])
    if letters is None:
        return None
    batch, rows, inner, columns, sizes = letters

    def order(term: str, letters: str) -> tuple[int, ...] | None:
        positions = tuple(term.index(c) for c in letters)
        return None if positions == tuple(range(len(term))) else positions

    def grouped(first: str, second: str) -> tuple[int, ...] | None:
        if len(first) == 1 and len(second) == 1:
            return None
        return (*(sizes[c] for c in batch), math.prod(sizes[c] for c in first),
                math.prod(sizes[c] for c in second))

    result = None if len(rows) == 1 and len(columns) == 1 else \
        tuple(sizes[c] for c in batch + rows + columns)
    return MatmulForm(batch, rows, inner, columns,
                      order(left, batch + rows + inner), grouped(rows, inner),
                      order(right, batch + inner + columns), grouped(inner, columns),
                      result, order(batch + rows + columns, out))
