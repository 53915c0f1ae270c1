"""Pictures of plans: storage, strides and every step, as SVG text.

The memory model drawn the way the documents this package grew from draw it: the input's
flat storage as a strip of cells, the input as a grid over it, then each step of the plan
as the logical array it produces, every cell showing the storage index it reads. A copy
starts a new storage (drawn as a new strip), a reduction a new array of computed values,
a stride-0 (broadcast) dim repeats one element (dashed cells), and where a merge fails
the two cells whose storage positions jump are outlined, with the planner's reason.

Pure functions from a plan's public data (layouts, step kinds and reasons) to text: no
dependency, nothing imported from the plan modules (they import this one lazily, from
``to_svg`` and ``_repr_html_``, and hand it what only they can plan: a concatenation's
or a split's part is drawn through the planner's own plan of it). Arrays larger than a
screen are abbreviated: the leading indexes of each dim, its last one, and an ellipsis
between; the number of cells drawn is bounded, so the picture's size is bounded
whatever the shape.

The notation's plans (concatenation, split, diagonal; along; elementwise; indexing) use
the same panels: each input over its own storage, each view over the storage it reads,
a new array as a new storage when its values are known (a concatenation, a roll, a
copy) or as computed cells when they depend on data (a softmax, an elementwise result,
a gather: there the picture shows the layout, not which element a cell holds).

Machine-readable for tests and tools: each array is a ``<g class="array">`` with
``data-step`` (``0`` the input, ``k`` the plan's step ``k``), ``data-op``, ``data-shape``,
``data-strides``, ``data-offset`` and ``data-storage``; each drawn cell a ``<rect>`` with
``data-index`` (the logical index, comma-separated), ``data-position`` (the storage index
it reads) and ``data-value`` (which element of the input storage it holds: its storage
index there, prefixed ``k:`` for input ``k`` of a plan with several inputs), or
``data-reduces`` (the input storage indexes a reduced cell combines) for computed cells.
"""

from __future__ import annotations

import dataclasses
import html
import math
from typing import Any, Callable, Sequence

from .errors import RearrangeError
from .layout import Layout, flipped
from .records import record

__all__ = ["plan_svg", "pack_svg", "einsum_svg", "notation_svg", "along_svg", "elementwise_svg",
           "indexing_svg", "html_fragment", "html_page"]

# --------------------------------------------------------------------------- model

#: Reductions listed cell by cell up to this many input elements (then only counted).
MAX_LISTED = 64


@record
class Content:
    """What one storage position holds, in terms of the inputs' own storages."""

    origin: int | None               # the input whose element it is; None: computed
    index: int | None                # that element's position in its input's storage
    reduces: tuple[int, ...] = ()    # computed by a reduction: the positions it combines
    count: int = 0                   # how many it combines (reduces is cut at MAX_LISTED)


@record
class Storage:
    """A flat block of elements read by one or more arrays of the picture.

    ``content(position)`` says what a position holds; None for values computed by a
    contraction (they stand for no single input element)."""

    name: str                                   # "input", "copy", "input 1", ...
    kind: str                                   # input | copy | computed
    content: Callable[[int], Content | None]
    extent: tuple[int, int] | None              # lowest, highest position; None: empty


@record
class Jump:
    """Two elements a merge needs adjacent in storage, and are not: ``after`` follows
    ``before`` in the merged dim's order, but reads ``position(after)`` instead of
    ``expected``."""

    before: tuple[int, ...]
    after: tuple[int, ...]
    expected: int


@record
class Panel:
    """One array of the picture: a layout over a storage, with what to say about it."""

    step: str                                   # data-step: "0" the input, "k" step k
    op: str                                     # input | split | permute | copy | ...
    heading: str
    notes: tuple[str, ...]
    layout: Layout
    storage: Storage
    kind: str                                   # input | view | copy | compute
    alerts: tuple[str, ...] = ()                # a failing merge: the planner's reason
    jumps: tuple[Jump, ...] = ()                # where that merge's strides jump
    strip: bool = False                         # draw the storage as a strip above the grid


@record
class Picture:
    """What :func:`render` draws: a title, summary lines, the arrays top to bottom."""

    title: str
    summary: tuple[str, ...]
    panels: tuple[Panel, ...]
    origins: int = 1                            # how many input storages (pack, einsum)


def input_storage(layout: Layout, origin: int = 0, name: str = "input") -> Storage:
    """The storage an input reads: each position holds its own index (an ``arange``)."""
    return Storage(name, "input", lambda position: Content(origin, position), layout.extent())


def unravel(position: int, shape: Sequence[int]) -> tuple[int, ...]:
    """The index of ``position`` in a C-contiguous array of ``shape``."""
    index = []
    for size in reversed(shape):
        position, rest = divmod(position, size) if size else (position, 0)
        index.append(rest)
    return tuple(reversed(index))


def element(panel: Panel, index: tuple[int, ...]) -> Content | None:
    return panel.storage.content(panel.layout.position(index))


def copied_storage(source: Panel, name: str = "copy") -> Storage:
    """A fresh C-contiguous storage filled from ``source`` in its row-major order."""
    shape = source.layout.shape

    def content(position: int) -> Content | None:
        return element(source, unravel(position, shape))
    numel = math.prod(shape)
    return Storage(name, "copy", content, (0, numel - 1) if numel else None)


def reduced_storage(source: Panel, reduced_dims: int) -> Storage:
    """A fresh array whose element ``i`` combines ``source[i, ...]`` over its trailing
    ``reduced_dims`` dims."""
    kept = source.layout.shape[:source.layout.ndim - reduced_dims]
    reduced = source.layout.shape[source.layout.ndim - reduced_dims:]
    count = math.prod(reduced)

    def content(position: int) -> Content:
        outer = unravel(position, kept)
        listed = []
        for k in range(min(count, MAX_LISTED)):
            held = element(source, outer + unravel(k, reduced))
            if held is not None and held.index is not None:
                listed.append(held.index)
        return Content(None, None, tuple(listed), count)
    numel = math.prod(kept)
    return Storage("reduction", "computed", content, (0, numel - 1) if numel else None)


def computed_storage(shape: Sequence[int], name: str) -> Storage:
    numel = math.prod(shape)
    return Storage(name, "computed", lambda position: None, (0, numel - 1) if numel else None)


# --------------------------------------------------------------------------- steps to panels


def merge_groups(shape: Sequence[int], target: Sequence[int]) -> list[tuple[int, int]] | None:
    """The runs of consecutive dims of ``shape`` that multiply to each size of ``target``
    (``(start, stop)`` each), or None when ``target`` is no merge of ``shape``. Size-1 dims
    join either neighbour: they never obstruct a merge."""
    groups = []
    dim = 0
    for size in target:
        start, product = dim, 1
        while dim < len(shape) and (product < size or (size == 0 and product != 0)):
            product *= shape[dim]
            dim += 1
        if product != size:
            return None
        groups.append((start, dim))
    if groups and dim < len(shape) and all(s == 1 for s in shape[dim:]):
        groups[-1] = (groups[-1][0], len(shape))
    elif dim != len(shape):
        return None
    return groups


def merge_jumps(layout: Layout, target: Sequence[int]) -> tuple[Jump, ...]:
    """For each group of ``layout``'s dims that cannot merge into its dim of ``target``
    (:meth:`Layout.merge_obstacle`), the stride jump: the last element along the inner
    dim at outer index 0, and the first at outer index 1."""
    groups = merge_groups(layout.shape, target) if layout.numel else None
    jumps = []
    for start, stop in groups or ():
        obstacle = layout.merge_obstacle(start, stop)
        if obstacle is None:
            continue
        outer, inner = obstacle
        before = [0] * layout.ndim
        before[inner] = layout.shape[inner] - 1
        after = [0] * layout.ndim
        after[outer] = 1
        expected = layout.position(before) + layout.strides[inner]
        jumps.append(Jump(tuple(before), tuple(after), expected))
    return tuple(jumps)


def jump_notes(layout: Layout, jumps: Sequence[Jump]) -> tuple[str, ...]:
    return tuple(
        f"stride jump: {_index_text(jump.before)} reads {layout.position(jump.before)}, the "
        f"next element {_index_text(jump.after)} reads {layout.position(jump.after)} where a "
        f"view needs {jump.expected} (outlined)" for jump in jumps)


@record
class StepView:
    """What the picture needs of one step of any plan class."""

    number: str
    op: str
    layout: Layout
    kind: str                 # view | copy | compute | new (a contraction's fresh array)
    reason: str
    reduced_dims: int = 0     # a reduction: how many trailing dims it combines


def trace(first: Panel, steps: Sequence[StepView], name: str = "copy") -> list[Panel]:
    """Panels for ``steps`` applied one after another to ``first``: a view reads the
    storage of the array before it; a copy fills a new one; a reduction or a
    contraction computes a new array. The array before a copy shows where its merge
    fails (the copy's target: the next merge's shape)."""
    panels = [first]
    for k, step in enumerate(steps):
        previous = panels[-1]
        if step.kind == "copy":
            target = next((s.layout.shape for s in steps[k + 1:] if s.op == "merge"), None)
            jumps = () if target is None else merge_jumps(previous.layout, target)
            if jumps:
                previous = panels[-1] = dataclasses.replace(
                    previous, alerts=(step.reason,), jumps=jumps,
                    notes=previous.notes + jump_notes(previous.layout, jumps))
            storage = copied_storage(previous, name)
            heading = f"{step.number}  copy → a new storage, C-contiguous"
        elif step.kind == "compute":
            storage = reduced_storage(previous, step.reduced_dims)
            heading = f"{step.number}  {step.op} → a new array of computed values"
        elif step.kind == "new":
            storage = computed_storage(step.layout.shape, step.op)
            heading = f"{step.number}  {step.op} → a new array of computed values"
        else:
            storage = previous.storage
            heading = f"{step.number}  {step.op} (view)"
        panels.append(Panel(step.number, step.op, heading, (step.reason,), step.layout, storage,
                            step.kind, strip=step.kind == "copy"))
    return panels


def _shape_text(values: Sequence[int]) -> str:
    return "(" + ", ".join(str(v) for v in values) + ("," if len(values) == 1 else "") + ")"


def _index_text(index: Sequence[int]) -> str:
    return "[" + ", ".join(str(i) for i in index) + "]"


def _plan_header(plan: Any) -> tuple[str, tuple[str, ...]]:
    dtype = "dtype unknown" if plan.dtype is None else f"{plan.dtype} ({plan.itemsize} B)"
    unit = getattr(plan, "stride_unit", "elements")
    summary = [dtype + ("" if unit == "elements" else "; strides and positions in bytes")]
    axes = " ".join(f"{name}={length}" for name, length in plan.axis_lengths)
    if axes:
        summary.append("axes " + axes)
    return f"{plan.op} '{plan.pattern}'", tuple(summary)


def _result_line(plan: Any) -> str:
    """The explain table's verdict: view or copy, what it costs, or why it is refused."""
    return next(line.strip() for line in str(plan).splitlines()
                if line.lstrip().startswith("result"))


def plan_svg(plan: Any) -> str:
    """The picture of a ``rearrange``/``reduce``/``repeat`` plan (:class:`rearrange.Plan`)."""
    title, summary = _plan_header(plan)
    summary = (*summary, _result_line(plan))
    first = Panel("0", "input", "input", (), plan.input, input_storage(plan.input), "input",
                  strip=True)
    steps = [StepView(str(k), step.op, step.layout, step.kind, step.reason,
                      len(step.args) if step.op == "reduce" else 0)
             for k, step in enumerate(plan.steps, 1)]
    panels = trace(first, steps)
    return render(Picture(title, summary, tuple(panels)))


def pack_svg(plan: Any) -> str:
    """The picture of a pack or unpack plan (:class:`rearrange.packing.PackPlan`): each
    input, the place each part takes in the packed array, and the packed array."""
    title, summary = _plan_header(plan)
    summary = (*summary, _result_line(plan))
    places = _final_layouts(plan)
    if plan.op == "unpack":
        packed = plan.inputs[0]
        storage = input_storage(packed)
        panels = [Panel("0", "input", "input: the packed array", (), packed, storage, "input",
                        strip=True)]
        for k, layout in enumerate(places[:MAX_PARTS]):
            panels.append(Panel(f"output {k}", "view", f"output {k}: a view of the input",
                                (_step_reasons(plan, k),), layout, storage, "view"))
        summary = (*summary, *_parts_left_out("output", len(places)))
        return render(Picture(title, summary, tuple(panels)))
    inputs = [Panel(f"input {k}", "input", f"input {k}: its own storage", (), layout,
                    input_storage(layout, k, f"input {k}"), "input")
              for k, layout in enumerate(plan.inputs)]
    packed = plan.outputs[0]
    axis = plan.axis
    starts = [0]
    for shape in plan.packed_shapes:
        starts.append(starts[-1] + math.prod(shape))

    # the packed array is C-contiguous: in elements, or in bytes with byte-strided inputs
    scale = plan.itemsize if plan.stride_unit == "bytes" else 1

    def content(position: int) -> Content | None:
        index = unravel(position // scale, packed.shape)
        k = next(k for k in range(len(inputs)) if starts[k] <= index[axis] < starts[k + 1])
        inner = unravel(index[axis] - starts[k], plan.packed_shapes[k])
        return element(inputs[k], index[:axis] + inner + index[axis + 1:])
    storage = Storage("packed", "copy", content, packed.extent())
    drawn = min(len(inputs), MAX_PARTS)
    summary = (*summary, *_parts_left_out("input", len(inputs)))
    panels = inputs[:drawn]
    for k, layout in enumerate(places[:drawn]):
        panels.append(Panel(f"place {k}", "view", f"input {k}'s place: a view of the packed array",
                            (_step_reasons(plan, k),), layout, storage, "view"))
    panels.append(Panel("packed", "copy", "the packed array: a new storage, each input "
                        "copied into its place", (), packed, storage, "copy", strip=True))
    return render(Picture(title, summary, tuple(panels), origins=len(inputs)))


#: Plans of many inputs or outputs draw this many of them (the table lists them all).
MAX_PARTS = 6


def _parts_left_out(what: str, count: int) -> tuple[str, ...]:
    if count <= MAX_PARTS:
        return ()
    return (f"{what}s {MAX_PARTS} to {count - 1} are not drawn (the table lists them)",)


def _final_layouts(plan: Any) -> list[Layout]:
    """Per part of a pack/unpack plan: the layout its last view step produces (the whole
    packed array when it has none)."""
    layouts = [plan.packed] * len(plan.packed_shapes)
    for step in plan.steps:
        if not step.is_copy:
            layouts[step.index] = step.layout
    return layouts


def _step_reasons(plan: Any, index: int) -> str:
    return "; ".join(step.reason for step in plan.steps if step.index == index
                     and not step.is_copy) or "the whole packed array"


def einsum_svg(plan: Any) -> str:
    """The picture of an einsum plan (:class:`rearrange.contraction.EinsumPlan`): each
    input and its rearrange into elementary axes, the contraction's fresh array and the
    output's merge of it."""
    title, summary = _plan_header(plan)
    summary = (*summary, _result_line(plan), f"{plan.engine}: {plan.subscripts}")
    panels: list[Panel] = []
    numbered = list(enumerate(plan.steps, 1))
    summary = (*summary, *_parts_left_out("input", len(plan.inputs)))
    for k, layout in enumerate(plan.inputs[:MAX_PARTS]):
        on = f"x{k}"
        first = Panel(on, "input", f"{on}: input {k}", (), layout,
                      input_storage(layout, k, f"input {k}"), "input")
        steps = [StepView(str(n), s.op, s.layout, s.kind, s.reason)
                 for n, s in numbered if s.on == on]
        panels += trace(first, steps, f"copy of {on}")
    out_steps = [StepView(str(n), s.op, s.layout, s.kind, s.reason)
                 for n, s in numbered if s.on == "out"]
    if out_steps:
        contraction = out_steps[0]
        first = Panel(contraction.number, contraction.op,
                      f"{contraction.number}  {contraction.op} → a new array of computed values",
                      (contraction.reason,), contraction.layout,
                      computed_storage(contraction.layout.shape, "contraction"), contraction.kind)
        panels += trace(first, out_steps[1:])
    return render(Picture(title, summary, tuple(panels), origins=len(plan.inputs)))


# --------------------------------------------------------------------------- abbreviation

CELL_HEIGHT = 20
CHAR_WIDTH = 6.6          # monospace at 11px
MAX_GRID_WIDTH = 1100
MAX_CELLS_PER_PANEL = 160
MAX_CELLS = 1400          # in all the panels of a picture
SMALL = 64                # arrays of at most this many elements are drawn whole if they fit
STRIP_CELLS = 24


def _cap(level: int, ndim: int, cell_width: float) -> int:
    """How many indexes a dim shows before any budget: more for columns and rows, most
    for a 1-D array's one row."""
    if level == 0:
        return max(3, min(16 if ndim == 1 else 8, int((900 if ndim == 1 else 520) // cell_width)))
    return 6 if level == 1 else 3


def shown_indexes(size: int, count: int, required: frozenset[int] = frozenset()) -> list[int]:
    """``count`` leading indexes of a dim of ``size`` (the last of them the dim's last),
    plus the ``required`` ones."""
    if size <= count:
        return list(range(size))
    chosen = set(range(max(count - 1, 1))) | ({size - 1} if count >= 2 else set())
    return sorted(chosen | {i for i in required if 0 <= i < size})


@record
class Axis:
    """How one dim is drawn: the indexes shown (None for an ellipsis), their offsets
    along the dim's direction, and the size of what each slot holds."""

    dim: int
    level: int                 # 0: columns, 1: rows, 2, 3, ...: blocks across, down, ...
    slots: tuple[int | None, ...]
    offsets: tuple[float, ...]
    extent: float              # the whole dim's length along its direction
    inner: tuple[float, float]  # one slot's contents: width, height

    @property
    def across(self) -> bool:
        return self.level % 2 == 0

    def offset(self, index: int) -> float:
        return self.offsets[self.slots.index(index)]


def _slots(indexes: Sequence[int], size: int) -> tuple[int | None, ...]:
    """The sorted ``indexes`` of a dim of ``size`` with None (an ellipsis) wherever some
    are left out, at the end too."""
    slots: list[int | None] = []
    for k, index in enumerate(indexes):
        if k and index != indexes[k - 1] + 1:
            slots.append(None)
        slots.append(index)
    if indexes and indexes[-1] != size - 1:
        slots.append(None)
    return tuple(slots)


LABEL_HEIGHT = 14         # above each 2-D grid of an array of more than two dims


def _gap(level: int) -> float:
    return 0.0 if level < 2 else 8.0 + 4 * (level - 2)


def _ellipsis_size(level: int) -> float:
    return (18.0, 14.0)[level] if level < 2 else 22.0


def grid_axes(shape: Sequence[int], counts: Sequence[int], cell_width: float,
              required: Sequence[frozenset[int]]) -> list[Axis]:
    """The drawn dims, innermost first, with their offsets: the last dim across as
    columns, the one before down as rows, then blocks across and down by turns."""
    ndim = len(shape)
    unit = [cell_width, float(CELL_HEIGHT)]     # the size of one slot's contents
    axes = []
    for level in range(ndim):
        dim = ndim - 1 - level
        direction = level % 2
        if level == 2:
            unit[1] += LABEL_HEIGHT
        slots = _slots(shown_indexes(shape[dim], counts[dim], required[dim]), shape[dim])
        offsets, position = [], 0.0
        for k, slot in enumerate(slots):
            if k:
                position += _gap(level)
            offsets.append(position)
            position += unit[direction] if slot is not None else _ellipsis_size(level)
        axes.append(Axis(dim, level, slots, tuple(offsets), position, (unit[0], unit[1])))
        unit[direction] = position
    return axes


def fit_counts(shape: Sequence[int], cell_width: float, budget: int,
               required: Sequence[frozenset[int]]) -> list[int]:
    """How many indexes each dim shows so that at most ``budget`` cells are drawn in at
    most :data:`MAX_GRID_WIDTH` pixels: outer dims give way first, down to one index
    (then an ellipsis); columns and rows keep at least two."""
    ndim = len(shape)
    if math.prod(shape) <= SMALL:
        counts = list(shape)
    else:
        counts = [min(size, _cap(ndim - 1 - dim, ndim, cell_width))
                  for dim, size in enumerate(shape)]
    while True:
        axes = grid_axes(shape, counts, cell_width, required)
        cells = math.prod(sum(slot is not None for slot in axis.slots) for axis in axes)
        width = max((axis.extent for axis in axes if axis.across), default=cell_width)
        if cells <= budget and width <= MAX_GRID_WIDTH:
            return counts
        for dim in range(ndim):                 # outermost first
            floor = 1 if ndim - 1 - dim >= 2 else 2
            if counts[dim] > floor and counts[dim] > len(required[dim]):
                counts[dim] -= 1
                break
        else:
            return counts


# --------------------------------------------------------------------------- rendering

STYLE = """
.ra-plan{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,"DejaVu Sans Mono",monospace}
.ra-plan .bg{fill:#ffffff}
.ra-plan text{fill:#1f2328;font-size:11px}
.ra-plan .title{font-size:14px;font-weight:bold}
.ra-plan .heading{font-size:12px;font-weight:bold}
.ra-plan .note,.ra-plan .small{fill:#57606a}
.ra-plan .small{font-size:8px}
.ra-plan .alert{fill:#cf222e}
.ra-plan .c{fill-opacity:.32;stroke:#6e7781;stroke-width:1}
.ra-plan .computed{fill:#8c959f;fill-opacity:.18}
.ra-plan .repeat{stroke-dasharray:3 2;fill-opacity:.14}
.ra-plan .gap{fill:none;stroke-dasharray:2 2}
.ra-plan .jump{fill-opacity:.32;stroke:#cf222e;stroke-width:3}
.ra-plan .badge-copy{fill:#bc4c00}
.ra-plan .badge-compute{fill:#1a7f37}
.ra-plan .rule{stroke:#d0d7de;stroke-width:1}
@media (prefers-color-scheme: dark){
.ra-plan .bg{fill:#0d1117}
.ra-plan text{fill:#e6edf3}
.ra-plan .note,.ra-plan .small{fill:#9198a1}
.ra-plan .alert{fill:#ff7b72}
.ra-plan .c{fill-opacity:.42;stroke:#8b949e}
.ra-plan .computed{fill:#6e7681;fill-opacity:.3}
.ra-plan .repeat{fill-opacity:.18}
.ra-plan .jump{stroke:#ff7b72}
.ra-plan .badge-copy{fill:#f0883e}
.ra-plan .badge-compute{fill:#56d364}
.ra-plan .rule{stroke:#30363d}
}
"""

MARGIN = 16
WRAP = 130                # characters per line of notes


def _escape(text: str) -> str:
    return html.escape(text, quote=True)


def _wrap(text: str, width: int = WRAP) -> list[str]:
    lines: list[str] = []
    for part in text.split("; "):
        part = part.strip()
        while len(part) > width:
            cut = part.rfind(" ", 0, width)
            cut = cut if cut > 0 else width
            lines.append(part[:cut])
            part = "  " + part[cut:].lstrip()
        if part:
            lines.append(part)
    return lines


def _number(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


class Canvas:
    """SVG elements appended in drawing order, and the extent they cover."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.width = 0.0

    def text(self, x: float, y: float, content: str, css: str = "", anchor: str = "") -> None:
        attributes = f' class="{css}"' if css else ""
        if anchor:
            attributes += f' text-anchor="{anchor}"'
        self.parts.append(f'<text x="{_number(x)}" y="{_number(y)}"{attributes}>'
                          f"{_escape(content)}</text>")
        if not anchor:
            size = {"title": 8.4, "heading": 7.2, "small": 4.8}.get(css.split(" ")[0], CHAR_WIDTH)
            self.width = max(self.width, x + size * len(content))


def _hue(content: Content | None, extents: Sequence[tuple[int, int] | None], origins: int) -> int | None:
    """The colour of an element: its place in its input's storage (a gradient), or its
    input when there are several (one hue each)."""
    if content is None or content.index is None or content.origin is None:
        return None
    if origins > 1:
        return (content.origin * 137 + 210) % 360
    extent = extents[content.origin] if content.origin < len(extents) else None
    if extent is None:
        return 210
    low, high = extent
    return int(210 - 250 * (content.index - low) / max(1, high - low)) % 360


def _value_text(content: Content | None, origins: int) -> str:
    if content is None or content.index is None:
        return ""
    return f"{content.origin}:{content.index}" if origins > 1 else str(content.index)


def _cell(canvas: Canvas, x: float, y: float, width: float, label: str, css: str,
          hue: int | None, attributes: str, tooltip: str) -> None:
    fill = f' fill="hsl({hue},70%,50%)"' if hue is not None else ""
    canvas.parts.append(
        f'<rect class="{css}" x="{_number(x + .5)}" y="{_number(y + .5)}" width="{_number(width)}" '
        f'height="{CELL_HEIGHT}"{fill}{attributes}><title>{_escape(tooltip)}</title></rect>')
    canvas.parts.append(f'<text x="{_number(x + width / 2 + .5)}" y="{_number(y + 14.5)}" '
                        f'text-anchor="middle">{_escape(label)}</text>')


def _strip(canvas: Canvas, y: float, storage: Storage, panel: Panel, extents: Sequence[Any],
           origins: int) -> float:
    """The storage as a strip: index above each cell, what it holds inside; positions the
    array does not read are dashed. Returns the height used."""
    canvas.text(MARGIN, y + 11, f"storage '{storage.name}'" + (
        "" if storage.extent is None else
        f": positions {storage.extent[0]} … {storage.extent[1]}"), "note")
    y += 16
    if storage.extent is None:
        canvas.text(MARGIN, y + 11, "(no elements)", "note")
        return 32
    low, high = storage.extent
    layout = panel.layout
    row = layout.shape[-1] if layout.ndim and layout.strides[-1] == 1 else 1
    positions = strip_positions(low, high, row, STRIP_CELLS)
    for _ in range(2):                          # the cells' width, then how many fit
        labels = [_value_text(storage.content(p), origins) for p in positions if p is not None]
        width = max(24.0, CHAR_WIDTH * max(len(str(high)), len(str(low)), *map(len, labels)) + 10)
        positions = strip_positions(low, high, row, min(STRIP_CELLS, int(MAX_GRID_WIDTH // width)))
    read = _read_positions(panel.layout)
    x = float(MARGIN)
    for position in positions:
        if position is None:
            canvas.text(x + 9, y + 11 + 14, "…", anchor="middle")
            x += 18
            continue
        held = storage.content(position)
        css = "c" if read is None or position in read else "c gap"
        if held is None:
            css += " computed"
        canvas.text(x + width / 2, y + 8, str(position), "small", "middle")
        value = _value_text(held, origins)
        attributes = f' data-position="{position}"' + (f' data-value="{value}"' if value else "")
        _cell(canvas, x, y + 11, width, value or "·", css, _hue(held, extents, origins),
              attributes, f"storage '{storage.name}'[{position}]"
              + (f" holds input element {value}" if value else ""))
        x += width
    canvas.width = max(canvas.width, x)
    return 16 + 11 + CELL_HEIGHT + 10


def strip_positions(low: int, high: int, row: int, room: int) -> list[int | None]:
    """The storage positions ``low .. high`` a strip of ``room`` cells shows, None for an
    ellipsis: all of them when they fit; else the first few of each of the first rows of
    ``row`` positions (the array's last dim: where a copy's order shows), and the last."""
    if high - low + 1 <= room:
        return list(range(low, high + 1))
    if 1 < row < high - low + 1:
        per_row = row if row <= 4 else 4
        chosen = []
        for start in range(low, high + 1, row)[:max(1, (room - 1) // per_row)]:
            chosen += (range(start, start + row) if row <= 4
                       else [start, start + 1, start + 2, start + row - 1])
    else:
        chosen = list(range(low, low + room - 1))
    return list(_slots(sorted({p for p in chosen if p <= high} | {high}), high + 1))


def _block_label(outer: Sequence[int], width: float) -> str:
    """``[1, 0, :, :]``, or as many trailing indexes as fit ``width``: ``[…,0,1,:,:]``."""
    for label in (_index_text([*outer, ":", ":"]), "[" + ",".join(map(str, outer)) + ",:,:]"):
        if len(label) * 4.8 <= width + 6:
            return label
    for keep in range(len(outer) - 1, 0, -1):
        label = "[…," + ",".join(map(str, outer[len(outer) - keep:])) + ",:,:]"
        if len(label) * 4.8 <= width + 6:
            return label
    return "[…]"


def _read_positions(layout: Layout) -> set[int] | None:
    """Every storage position ``layout`` reads, when that is few enough to list; None
    when it reads every position of its extent or is too large to list."""
    if layout.is_non_overlapping_and_dense() or layout.numel > 65536:
        return None
    positions = {layout.offset}
    for size, stride in zip(layout.shape, layout.strides):
        positions = {p + i * stride for p in positions for i in range(size)}
    return positions


def _grid(canvas: Canvas, y: float, panel: Panel, budget: int, extents: Sequence[Any],
          origins: int) -> float:
    """The array as nested grids, each cell labelled with the storage index it reads.
    Returns the height used."""
    layout = panel.layout
    shape, ndim = layout.shape, layout.ndim
    if layout.numel == 0:
        canvas.text(MARGIN, y + 12, "(no elements: a size-0 dim)", "note")
        return 22
    jumps = {cell for jump in panel.jumps for cell in (jump.before, jump.after)}
    required = [frozenset(cell[d] for cell in jumps) for d in range(ndim)]
    corners = [layout.position(tuple(s - 1 for s in shape)), layout.position((0,) * ndim)]
    cell_width = max(24.0, CHAR_WIDTH * max(len(str(v)) for v in corners) + 10)
    axes = grid_axes(shape, fit_counts(shape, cell_width, budget, required), cell_width,
                     required)
    by_dim = {axis.dim: axis for axis in axes}
    top = y + (LABEL_HEIGHT if ndim > 2 else 0)

    def corner(index: Sequence[int]) -> tuple[float, float]:
        """Where the slot of ``index`` (a prefix of an index: its outer dims) starts."""
        x = sum(by_dim[d].offset(i) for d, i in enumerate(index) if by_dim[d].across)
        down = sum(by_dim[d].offset(i) for d, i in enumerate(index) if not by_dim[d].across)
        return MARGIN + x, down

    shown = [[i for i in by_dim[d].slots if i is not None] for d in range(ndim)]
    for dim in range(ndim):                     # one mark per ellipsis slot
        axis = by_dim[dim]
        for prefix in _product(shown[:dim]):
            x, down = corner(prefix)
            for slot, offset in zip(axis.slots, axis.offsets):
                if slot is not None:
                    continue
                # a block's slot starts with its label, above where its cells start
                label = LABEL_HEIGHT if axis.level >= 2 else 0
                width, height = axis.inner
                if axis.across:
                    canvas.text(x + offset + _ellipsis_size(axis.level) / 2,
                                top + down - label + height / 2 + 4, "…", anchor="middle")
                else:
                    canvas.text(x + width / 2, top + down - label + offset + 11, "⋮",
                                anchor="middle")
    broadcast = {d for d in range(ndim) if layout.strides[d] == 0 and shape[d] > 1}
    for index in _product(shown):
        x, down = corner(index)
        if ndim > 2 and all(i == shown[d][0] for d, i in enumerate(index[-2:], ndim - 2)):
            block_x, block_down = corner(index[:-2])
            label = _block_label(index[:-2], axes[1].inner[0])
            canvas.text(block_x, top + block_down - 4, label, "small")
        position = layout.position(index)
        held = panel.storage.content(position)
        css = "c"
        if held is None or held.index is None:
            css += " computed"
        if any(index[d] > 0 for d in broadcast):
            css += " repeat"
        if index in jumps:
            css += " jump"
        attributes = f' data-index="{",".join(map(str, index))}" data-position="{position}"'
        value = _value_text(held, origins)
        tooltip = f"{_index_text(index)} reads storage '{panel.storage.name}'[{position}]"
        if value:
            attributes += f' data-value="{value}"'
            if panel.storage.kind != "input":
                tooltip += f", which holds input element {value}"
        elif held is not None and held.count:
            attributes += (f' data-reduces="{" ".join(map(str, held.reduces))}"'
                           f' data-count="{held.count}"')
            tooltip += f": combines {held.count} input element{'s' if held.count != 1 else ''}"
        _cell(canvas, x, top + down, cell_width, str(position), css,
              _hue(held, extents, origins), attributes, tooltip)
    across = max((a.extent for a in axes if a.across), default=cell_width)
    down_extent = max((a.extent for a in axes if not a.across), default=0.0)
    height = max(down_extent, float(CELL_HEIGHT)) + (LABEL_HEIGHT if ndim > 2 else 0)
    canvas.width = max(canvas.width, MARGIN + across)
    return height + 12


def _product(dims: Sequence[Sequence[int]]) -> list[tuple[int, ...]]:
    combos: list[tuple[int, ...]] = [()]
    for values in dims:
        combos = [combo + (value,) for combo in combos for value in values]
    return combos


def _axes_note(layout: Layout) -> str | None:
    ndim = layout.ndim
    if ndim < 2:
        return None
    parts = [f"dim {ndim - 1} across", f"dim {ndim - 2} down"]
    if ndim > 2:
        blocks = [f"dim {ndim - 1 - level} {'across' if level % 2 == 0 else 'down'}"
                  for level in range(2, ndim)]
        parts.append("blocks: " + ", ".join(blocks))
    return "cells: " + ", ".join(parts)


def _legend(panels: Sequence[Panel]) -> list[str]:
    lines = ["each cell: the storage index it reads; its colour: which element of the input's "
             "storage it holds"]
    extras = []
    if any(0 in p.layout.strides and p.layout.numel > 1 for p in panels):
        extras.append("dashed: a stride-0 repeat of the element before it")
    if any(p.jumps for p in panels):
        extras.append("red outline: where a merge's strides jump")
    if any(p.kind in ("compute", "new") for p in panels):
        extras.append("grey: computed values, no single input element")
    if extras:
        lines.append("; ".join(extras))
    return lines


def render(picture: Picture) -> str:
    """The picture as a self-contained SVG document."""
    canvas = Canvas()
    extents = []
    for panel in picture.panels:
        if panel.kind == "input":
            extents.append(panel.storage.extent)
    y = float(MARGIN)
    canvas.text(MARGIN, y + 12, picture.title, "title")
    y += 20
    for line in picture.summary:
        for part in _wrap(line):
            canvas.text(MARGIN, y + 11, part, "note")
            y += 15
    for line in _legend(picture.panels):
        canvas.text(MARGIN, y + 11, line, "note")
        y += 15
    y += 7
    budget = max(24, min(MAX_CELLS_PER_PANEL, MAX_CELLS // max(1, len(picture.panels))))
    for panel in picture.panels:
        start = len(canvas.parts)
        canvas.parts.append("")                 # the group's opening tag, once known
        canvas.parts.append(f'<line class="rule" x1="{MARGIN}" x2="{{width}}" '
                            f'y1="{_number(y)}" y2="{_number(y)}"/>')
        y += 8
        badge = {"copy": "badge-copy", "compute": "badge-compute",
                 "new": "badge-compute"}.get(panel.kind, "")
        canvas.text(MARGIN, y + 12, panel.heading, f"heading {badge}".strip())
        y += 18
        lines = [f"shape {_shape_text(panel.layout.shape)}  strides "
                 f"{_shape_text(panel.layout.strides)}  offset {panel.layout.offset}"]
        broadcast = [d for d, (size, stride) in enumerate(zip(panel.layout.shape,
                                                              panel.layout.strides))
                     if stride == 0 and size > 1]
        if broadcast:
            lines.append("stride 0 at dim " + ", ".join(map(str, broadcast))
                         + ": one element repeated along it (dashed cells)")
        axes_note = _axes_note(panel.layout)
        if axes_note:
            lines.append(axes_note)
        for line in lines + list(panel.notes):
            for part in _wrap(line):
                css = "alert" if part.lstrip().startswith(("stride jump", "cannot merge")) else "note"
                canvas.text(MARGIN, y + 11, part, css)
                y += 15
        for alert in panel.alerts:
            if alert not in panel.notes:
                for part in _wrap(alert):
                    canvas.text(MARGIN, y + 11, part, "alert")
                    y += 15
        y += 4
        if panel.strip:
            y += _strip(canvas, y, panel.storage, panel, extents, picture.origins)
        y += _grid(canvas, y, panel, budget, extents, picture.origins)
        canvas.parts[start] = (
            f'<g class="array" data-step="{_escape(panel.step)}" data-op="{_escape(panel.op)}" '
            f'data-kind="{panel.kind}" data-storage="{_escape(panel.storage.name)}" '
            f'data-shape="{",".join(map(str, panel.layout.shape))}" '
            f'data-strides="{",".join(map(str, panel.layout.strides))}" '
            f'data-offset="{panel.layout.offset}">')
        canvas.parts.append("</g>")
    width = math.ceil(canvas.width + MARGIN)
    height = math.ceil(y + MARGIN)
    body = "".join(canvas.parts).replace("{width}", str(width - MARGIN))
    label = _escape(picture.title)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="ra-plan" width="{width}" '
            f'height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="{label}">'
            f"<title>{label}</title><style>{STYLE}</style>"
            f'<rect class="bg" width="{width}" height="{height}" fill="#ffffff"/>{body}</svg>')


# --------------------------------------------------------------------------- HTML


def html_fragment(table: str, svg: str | None) -> str:
    """The explain table (escaped, in ``<pre>``) and the picture when there is one: what
    notebooks show for a plan."""
    picture = "" if svg is None else f"<div>{svg}</div>"
    return f'<div class="ra-explain"><pre>{_escape(table)}</pre>{picture}</div>'


def html_page(table: str, svg: str | None, title: str) -> str:
    """A standalone page: the table and the picture, light or dark as the reader's
    system prefers."""
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{_escape(title)}</title><style>"
        "body{margin:16px;background:#fff;color:#1f2328;font-family:ui-monospace,SFMono-Regular,"
        "Menlo,Consolas,'DejaVu Sans Mono',monospace}pre{font-size:12px;line-height:1.35}"
        "@media (prefers-color-scheme: dark){body{background:#0d1117;color:#e6edf3}}"
        "</style></head><body>\n"
        f"{html_fragment(table, svg)}\n</body></html>\n")


# --------------------------------------------------------------------------- einx's notation
# Plans of the notation ops (concatenation.py, along.py, elementwise.py, indexing.py),
# drawn with the same panels: each input over its own storage, each view over the
# storage it reads, a new array as a new storage (its values known: a copy, a
# concatenation, a roll) or computed cells (a softmax, an elementwise result, a gather,
# whose values depend on data).


def _layout_note(names: Sequence[str]) -> str:
    return f"{', '.join(names)}: strides unknown to the plan, drawn C-contiguous"


def _notation_input_strides(plan: Any, k: int) -> tuple[tuple[int, ...], bool]:
    """Input ``k``'s strides as the plan was made for them: ``(strides, known)``;
    unknown ones (dask, traced torch sizes) are drawn C-contiguous."""
    from .layout import row_major_strides

    given = plan.input_strides[k] if k < len(plan.input_strides) else None
    if given is None:
        return row_major_strides(plan.input_shapes[k]), False
    return tuple(given), True


def _piece_layout(piece: Any, input_layout: Layout) -> Layout:
    """A piece as a view of its input: its slice's offset, its names' strides (a
    repeated name's the sum of its axes': the diagonal)."""
    offset = input_layout.offset + sum(
        r[0] * stride for r, stride in zip(piece.region, input_layout.strides) if r is not None)
    if piece.strides is not None:
        return Layout(piece.shape, piece.strides, offset)
    # strides unknown: the C-contiguous input's, split and summed like the plan does
    leaf_strides = []
    groups = merge_groups(piece.leaf_shape, [
        size if r is None else r[1] - r[0] for size, r in zip(input_layout.shape, piece.region)])
    for (start, stop), stride in zip(groups or [], input_layout.strides):
        for leaf in range(start, stop):
            leaf_strides.append(stride * math.prod(piece.leaf_shape[leaf + 1:stop]))
    strides = [0] * len(piece.names)
    for name, stride in zip(piece.leaf_names, leaf_strides):
        if name is not None:
            strides[piece.names.index(name)] += stride
    return Layout(piece.shape, tuple(strides), offset)


def _part_panel(part: Any, piece_panel: Panel, name: str,
                plan_part: Callable[[Any, Layout], Any]) -> Panel:
    """A piece rearranged into its part (our own rearrange, ``repeat`` where the part
    adds axes: ``plan_part(part, piece layout)``, the planner's plan of it): the last
    array of that plan, over the storage it reads."""
    transform = plan_part(part, piece_panel.layout)
    steps = [StepView(str(n), s.op, s.layout, s.kind, s.reason)
             for n, s in enumerate(transform.steps, 1)]
    return trace(piece_panel, steps, name)[-1]


def notation_svg(plan: Any, plan_part: Callable[[Any, Layout], Any]) -> str:
    """The picture of a concatenation, split or diagonal
    (:class:`rearrange.concatenation.NotationPlan`): each input over its storage, each
    piece that is not the whole input as it is (a slice of a split, a diagonal) as the
    view it is, then each output: a piece's view (or copy) of its input, or for a
    concatenation one new array with each part's place in it, like a pack.
    ``plan_part(part, layout)``: the rearrange plan of a piece of that layout into its
    part (what the lowering runs)."""
    title = f"rearrange '{plan.pattern}'"
    summary = [f"{plan.dtype or 'dtype unknown'}; {plan.backend}",
               "result: " + ("every output a view of an input" if plan.is_view else
                             "a new array per concatenated output, one copy per part")]
    origins = len(plan.input_shapes)
    inputs, unknown = [], []
    for k, shape in enumerate(plan.input_shapes):
        strides, known = _notation_input_strides(plan, k)
        if not known:
            unknown.append(k)
        layout = Layout(tuple(shape), strides)
        name = "input" if origins == 1 else f"input {k}"
        inputs.append(Panel("0" if origins == 1 else f"input {k}", "input",
                            f"{name}: its own storage", (), layout,
                            input_storage(layout, k, name), "input", strip=origins == 1))
    if unknown:
        summary.append(_layout_note([f"input {k}" for k in unknown]))
    summary += _parts_left_out("input", origins)
    panels: list[Panel] = list(inputs[:MAX_PARTS])
    pieces = []
    for p, piece in enumerate(plan.pieces):
        source = inputs[piece.input]
        layout = _piece_layout(piece, source.layout)
        how = ("the diagonal: a repeated name's stride is the sum of its axes' strides"
               if piece.is_diagonal else "a slice of the input" if any(
                   r is not None for r in piece.region) else "its axes split")
        pieces.append(Panel(f"piece {p}", "diagonal" if piece.is_diagonal else "piece",
                            f"piece {p}: input {piece.input} as '{piece.text}', a view",
                            (how,), layout, source.storage, "view"))
    for out, shape in enumerate(plan.output_shapes[:MAX_PARTS]):
        parts = [part for part in plan.parts if part.output == out]
        if not plan.concatenated[out]:
            part = parts[0]
            piece = pieces[part.piece]
            final = _part_panel(part, piece, f"output {out}", plan_part)
            if final is piece:                  # the part is the piece as it is
                panels.append(dataclasses.replace(
                    piece, step=f"output {out}", heading=f"output {out}: piece {part.piece}, "
                    f"input {plan.pieces[part.piece].input} as '{plan.pieces[part.piece].text}'"
                    f" (a view)"))
                continue
            if piece.layout != inputs[plan.pieces[part.piece].input].layout:
                panels.append(piece)
            view = final.storage is piece.storage
            panels.append(dataclasses.replace(
                final, step=f"output {out}", op="view" if view else final.op,
                heading=f"output {out}: piece {part.piece} as '{part.text}'"
                        + (" (a view)" if view else f": {part.copy}"),
                notes=(part.copy,) if view else final.notes))
            continue
        panels.extend(_concatenated_output(plan, out, shape, parts, pieces, inputs, plan_part))
    summary += _parts_left_out("output", len(plan.output_shapes))
    return render(Picture(title, tuple(summary), tuple(panels), origins=origins))


def _concatenated_output(plan: Any, out: int, shape: Sequence[int], parts: Sequence[Any],
                         pieces: Sequence[Panel], inputs: Sequence[Panel],
                         plan_part: Callable[[Any, Layout], Any]) -> list[Panel]:
    """A concatenated output: each part's place (a view of the new array) and the array,
    every element the one its part's piece rearranged puts there."""
    # the new array in the plan's layout: its axes in memory order (C order, or the
    # inputs' order), the output a view of it
    order = plan.layout_of(out).order
    layout = Layout(tuple(shape), plan.output_strides(out))
    sources = []
    for part in parts:
        piece = pieces[part.piece]
        sources.append((part, _part_panel(part, piece, f"part {part.piece}", plan_part)))

    def content(position: int) -> Content | None:
        in_memory = unravel(position, [shape[k] for k in order])
        index = tuple(in_memory[order.index(k)] for k in range(len(shape)))
        for part, source in sources:
            if all(r is None or r[0] <= i < r[1] for i, r in zip(index, part.region)):
                local = tuple(i if r is None else i - r[0] for i, r in zip(index, part.region))
                return element(source, local)
        return None
    storage = Storage(f"output {out}", "copy", content, layout.extent())
    panels = []
    for part, _ in sources[:MAX_PARTS]:
        piece = plan.pieces[part.piece]
        if pieces[part.piece].layout != inputs[piece.input].layout:
            panels.append(pieces[part.piece])
        offset = sum(r[0] * stride for r, stride in zip(part.region, layout.strides)
                     if r is not None)
        place = Layout(tuple(s if r is None else r[1] - r[0]
                             for s, r in zip(shape, part.region)), layout.strides, offset)
        panels.append(Panel(f"place {part.piece}", "view",
                            f"piece {part.piece}'s place in output {out}: "
                            f"{_region_text(part.region)}, a view of the new array",
                            (f"piece {part.piece} (input {piece.input} as '{piece.text}') as "
                             f"'{part.text}': {part.copy}",), place, storage, "view"))
    panels.append(Panel(f"output {out}", "copy", f"output {out}: a new storage, each piece "
                        "copied into its place", (), layout, storage, "copy", strip=True))
    return panels


def _region_text(region: Sequence[Any]) -> str:
    return "[" + ", ".join(":" if r is None else f"{r[0]}:{r[1]}" for r in region) + "]"


def along_svg(explanation: Any) -> str:
    """The picture of an operation along bracketed axes
    (:class:`rearrange.along.AlongExplanation`): the input, its split (a view), the op —
    numpy's flip a view with negated strides, a roll a new array of the input's elements
    moved, the others new arrays of computed values — and the merge into the output."""
    plan = explanation.plan
    split, merge = explanation.split, explanation.merge
    summary = []
    first_layout = getattr(explanation, "input", None)
    if first_layout is None:
        first_layout = Layout.contiguous(explanation.input_shape)
        summary.append(_layout_note(["the input"]))
    first = Panel("0", "input", "input", (), first_layout, input_storage(first_layout),
                  "input", strip=True)
    steps = [] if split is None else [
        StepView(f"split {n}", s.op, s.layout, s.kind, s.reason)
        for n, s in enumerate(split.steps, 1)]
    panels = trace(first, steps)
    elementary = panels[-1]
    layout = elementary.layout
    op_panel: Panel
    if plan.op == "flip":
        op_panel = Panel("op", "flip", "flip (a view on numpy: each stride negated, the offset "
                         "moved to the last element)", (plan.describe_op(),),
                         flipped(layout, plan.axes), elementary.storage, "view")
    elif plan.op == "roll":
        result = Layout.contiguous(layout.shape)

        def content(position: int) -> Content | None:
            index = list(unravel(position, layout.shape))
            for a, shift in zip(plan.axes, plan.shift):
                if layout.shape[a]:
                    index[a] = (index[a] - shift) % layout.shape[a]
            return element(elementary, tuple(index))
        op_panel = Panel("op", "roll", "roll → a new array: each element moved along the "
                         "bracketed axes", (plan.describe_op(),), result,
                         Storage("roll", "copy", content, result.extent()), "copy", strip=True)
    else:
        shape = (merge.input.shape if merge is not None else
                 _along_result_shape(plan, layout.shape))
        result = Layout.contiguous(shape)
        op_panel = Panel("op", plan.op, f"{plan.op} → a new array of computed values",
                         (plan.describe_op(),), result, computed_storage(shape, plan.op), "new")
    panels.append(op_panel)
    if merge is not None:
        steps = [StepView(f"merge {n}", s.op, s.layout, s.kind, s.reason)
                 for n, s in enumerate(merge.steps, 1)]
        panels = panels[:-1] + trace(op_panel, steps)
    title = f"{plan.op} '{plan.pattern}'"
    return render(Picture(title, tuple(summary), tuple(panels)))


def _along_result_shape(plan: Any, shape: Sequence[int]) -> tuple[int, ...]:
    if plan.op not in ("argmax", "argmin"):
        return tuple(shape)
    kept = tuple(n for k, n in enumerate(shape) if k not in plan.axes)
    return kept + ((len(plan.axes),) if len(plan.axes) > 1 else ())


def _int_shape(values: Sequence[Any]) -> bool:
    return all(type(v) is int for v in values)


def elementwise_svg(plan: Any) -> str:
    """The picture of an elementwise operation
    (:class:`rearrange.elementwise.ElementwisePlan`): each input over its storage, the
    view the operation reads of it over the output's axes (stride 0 where it lacks an
    axis: one element repeated, dashed cells), and the one new array it computes."""
    axes = " ".join(name for name, _ in plan.axes)
    title = f"{plan.op} '{plan.pattern}'"
    summary = [f"over axes ({axes}) {_shape_text(plan.elementary_shape)}: every input a view, "
               "one computation, no copy", f"run: {plan.computation('numpy')}"]
    if not _int_shape(plan.elementary_shape):
        raise RearrangeError("a picture needs concrete axis lengths; this plan's are "
                             f"symbolic: {_shape_text(plan.elementary_shape)}")
    arrays = [(k, view) for k, view in enumerate(plan.inputs) if not view.scalar]
    scalars = [k for k, view in enumerate(plan.inputs) if view.scalar]
    if scalars:
        summary.append(", ".join(f"x{k}" for k in scalars) + ": a Python number, broadcast "
                       "by the operation (not drawn)")
    origins = len(plan.inputs)
    panels: list[Panel] = []
    unknown = []
    for k, view in arrays[:MAX_PARTS]:
        strides = view.strides
        if strides is None:
            unknown.append(k)
            strides = Layout.contiguous(view.shape).strides
        # positions relative to the first element, as numpy's strides are (a negative
        # stride reaches below it)
        layout = Layout(tuple(view.shape), tuple(strides))
        name = f"input {k}"
        storage = input_storage(layout, k, name)
        panels.append(Panel(f"x{k}", "input", f"x{k}: '{view.expression}', its own storage", (),
                            layout, storage, "input"))
        view_strides = view.view_strides
        if view_strides is None:
            view_strides = _broadcast_strides(plan, view, layout.strides)
        read = Layout(plan.elementary_shape, tuple(view_strides), layout.offset)
        if read != layout:
            lacks = [name for (name, length), size in zip(plan.axes, view.view_shape)
                     if size == 1 and length != 1]
            notes = ((f"stride 0 on {' '.join(lacks)}: the axes x{k} lacks",) if lacks else ())
            panels.append(Panel(f"view {k}", "view", f"x{k} as the operation reads it: a view "
                                f"over ({axes})", notes, read, storage, "view"))
    if unknown:
        summary.append(_layout_note([f"x{k}" for k in unknown]))
    summary += _parts_left_out("input", len(arrays))
    computed = Layout.contiguous(plan.elementary_shape)
    result = Panel("result", plan.op, f"{plan.op} → a new array of computed values, "
                   "C-contiguous", (), computed, computed_storage(computed.shape, plan.op), "new")
    panels.append(result)
    if plan.grouped:
        output = computed.try_view(tuple(plan.output_shape))
        if output is not None:
            panels.append(Panel("output", "merge", f"output '{plan.output_expression}': a view "
                                "of the new array", (), output, result.storage, "view"))
    return render(Picture(title, tuple(summary), tuple(panels), origins=origins))


def _broadcast_strides(plan: Any, view: Any, strides: Sequence[int]) -> tuple[int, ...]:
    """Strides unknown to the plan: the view's, from the C-contiguous input's (the view
    is of every output axis, stride 0 where it has length 1)."""
    layout = Layout.contiguous(tuple(view.shape))
    steps = Layout(tuple(view.shape), tuple(strides))
    if view.split is not None:
        steps = steps.try_view(tuple(view.split)) or layout.try_view(tuple(view.split))
    for first, second in view.diagonals:
        keep = [d for d in range(steps.ndim) if d not in (first, second)]
        steps = Layout(tuple(steps.shape[d] for d in keep) + (steps.shape[first],),
                       tuple(steps.strides[d] for d in keep)
                       + (steps.strides[first] + steps.strides[second],))
    if view.permutation is not None:
        steps = steps.permute(view.permutation)
    if view.unit_shape is not None:
        steps = steps.try_view(tuple(view.unit_shape))
    lead = len(view.view_shape) - steps.ndim
    strides = (0,) * lead + steps.strides
    return tuple(0 if size == 1 else stride for size, stride in zip(view.view_shape, strides))


def indexing_svg(plan: Any) -> str:
    """The picture of ``get_at``/``set_at``/``add_at``/``subtract_at``
    (:class:`rearrange.indexing.IndexPlan`): ``x`` over its storage, its (batch,
    indexed, value) view and its rows view, and the result. Which row each result
    element reads (or each update writes) depends on the index arrays' values: the
    picture shows the layouts and places, the gathered cells as computed."""
    title = f"{plan.op} '{plan.pattern}'"
    batch = " ".join(plan.batch) or "-"
    indexed = " ".join(f"{n}={k}" for n, k in plan.indexed)
    summary = [f"axes: batch {batch}; indexed {indexed}; value "
               f"{' '.join(plan.values_axes) or '-'}",
               "which row each element reads or writes depends on the index arrays' values"]
    if plan.x_strides is None:
        x = Layout.contiguous(tuple(plan.x_shape))
        summary.append("x: strides unknown to the plan (the \"axes\" route), drawn "
                       "C-contiguous")
    else:
        x = Layout(tuple(plan.x_shape), plan.x_strides)
        if plan.op != "get_at":
            summary.append("x drawn C-contiguous: an update is planned for its copy of x, "
                           "which is")
    panels = [Panel("0", "input", "x: the indexed array", (), x, input_storage(x), "input",
                    strip=True)]
    if plan.op != "get_at":
        result = Layout.contiguous(x.shape)
        panels.append(Panel("copy", "copy", "the result: x copied once, C-contiguous (the "
                            "caller's x is never written), then updated in place", (),
                            result, copied_storage(panels[0], "result"), "copy", strip=True))
    source = panels[-1]
    split = source.layout if plan.x_split is None else source.layout.try_view(plan.x_split)
    ordered = split.permute(plan.x_order)
    if plan.x_split is not None or plan.x_order != tuple(range(len(plan.x_order))):
        panels.append(Panel("view", "permute", "x as (batch, indexed, value): a view", (),
                            ordered, source.storage, "view"))
    kind = "gather" if plan.op == "get_at" else "scatter"
    if plan.route == "rows":
        merged = len(plan.rows_order)
        inner = plan.rows_order + tuple(range(merged, ordered.ndim))
        rows = ordered.permute(inner).try_view(plan.rows_view)
        if rows is not None:
            panels.append(Panel("rows", "rows", f"rows: batch and indexed axes merged, a view "
                                f"(the {kind} reads or writes whole rows)",
                                (f"row = sum(coordinate * {plan.multipliers})",), rows,
                                source.storage, "view"))
    block_shape = tuple(plan.space_shape) + tuple(plan.value_shape)
    if plan.op == "get_at":
        block = Layout.contiguous(block_shape)
        gathered = Panel("gathered", "gather", "the gathered block (space..., value...): a "
                         "new array; each element a row chosen by the index data",
                         (f"space {' '.join(plan.space) or '-'} {_shape_text(plan.space_shape)}"
                          f", value {_shape_text(plan.value_shape)}",),
                         block, computed_storage(block_shape, "gathered"), "new")
        panels.append(gathered)
        last = gathered
    else:
        last = Panel("updated", "view", "the updated result in x's (batch, indexed, value) "
                     "order, a view", (), ordered, source.storage, "view")
    steps = []
    layout = last.layout
    if plan.out_order is not None:
        layout = layout.permute(plan.out_order)
        steps.append(StepView("out 1", "permute", layout, "view", "into the output's order"))
    if plan.out_shape is not None:
        view = layout.try_view(plan.out_shape)
        if view is None:
            layout = Layout.contiguous(layout.shape)
            steps.append(StepView(f"out {len(steps) + 1}", "copy", layout, "copy",
                                  "the output's groups need a copy"))
            view = layout.try_view(plan.out_shape)
        steps.append(StepView(f"out {len(steps) + 1}", "merge", view, "view",
                              "the output's groups"))
    if steps:
        panels = panels + trace(last, steps, "output")[1:]
    return render(Picture(title, tuple(summary), tuple(panels)))
