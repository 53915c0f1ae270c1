"""Plan pictures (``to_svg``, ``_repr_html_``, ``rearrange explain --svg/--html``) checked
against oracles: the storage index every drawn cell says it reads, and the input element
it holds, are read back out of the SVG and compared with numpy's strided view of an
``arange`` (an input whose every element is its own storage index) carried through the
same ops, and the last array with einops' result on that input."""

from __future__ import annotations

import html as html_module
import importlib.util
import math
import os
import pathlib
import subprocess
import sys
import xml.etree.ElementTree as ET

import einops
import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given

import rearrange as ra
from rearrange.contraction import explain_einsum
from rearrange.packing import explain_pack, explain_unpack
from rearrange.symbolic import plan_symbolic

from svg_reading import arrays_of

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent


# --------------------------------------------------------------------------- the oracle


def storage_view(shape, strides, offset=0) -> np.ndarray:
    """numpy's view of an ``arange`` storage through a layout: every element is the
    storage index it reads (positions may be negative: numpy arrays' are relative to
    their first element)."""
    shape, strides = tuple(shape), tuple(strides)
    if math.prod(shape) == 0:
        return np.zeros(shape, dtype=np.int64)
    reach = [(size - 1) * stride for size, stride in zip(shape, strides)]
    low = offset + sum(r for r in reach if r < 0)
    high = offset + sum(r for r in reach if r > 0)
    base = np.arange(low, high + 1, dtype=np.int64)
    item = base.itemsize
    return np.lib.stride_tricks.as_strided(
        base[offset - low:], shape, tuple(s * item for s in strides), writeable=False)


def mirror(plan: ra.Plan) -> list[dict]:
    """Per array of the plan (the input, then each step): what numpy says each element
    holds (``values``; for reduced elements the min, max, sum and count of the input
    elements they combine) and which position of its storage it reads (``positions``),
    carrying the input's ``arange`` view through numpy's own reshape, transpose,
    broadcast_to and reductions."""
    values = storage_view(plan.input.shape, plan.input.strides, plan.input.offset)
    positions = values
    reduced = None                 # (min, max, sum, count) arrays once reduced
    out = [{"values": values, "positions": positions, "reduced": None}]
    for step in plan.steps:
        def apply(array: np.ndarray) -> np.ndarray:
            if step.op == "permute":
                return array.transpose(step.args)
            if step.op == "expand":
                return np.broadcast_to(array, step.args)
            if step.op == "copy":
                return np.ascontiguousarray(array)
            return array.reshape(step.args)        # split, unsqueeze, merge
        if step.op == "reduce":
            axes = step.args
            reduced = (values.min(axis=axes), values.max(axis=axes), values.sum(axis=axes),
                       np.full(values.min(axis=axes).shape, math.prod(values.shape[a] for a in axes)))
            values = None
            positions = np.arange(math.prod(step.layout.shape)).reshape(step.layout.shape)
        elif reduced is not None:
            reduced = tuple(apply(r) for r in reduced)
            positions = apply(positions)
        else:
            values = apply(values)
            positions = (np.arange(values.size).reshape(values.shape) if step.op == "copy"
                         else apply(positions))
        out.append({"values": values, "positions": positions, "reduced": reduced})
    return out


def check_against_oracle(plan: ra.Plan, final: np.ndarray | None = None,
                         final_reduced: tuple | None = None) -> list[dict]:
    """The picture of ``plan`` draws, for every cell, what numpy says; ``final`` is the
    einops result on the input's ``arange`` view (``final_reduced``: min, max and sum)."""
    arrays = arrays_of(plan.to_svg())
    expected = mirror(plan)
    assert [a["step"] for a in arrays] == [str(k) for k in range(len(plan.steps) + 1)]
    layouts = [plan.input, *(step.layout for step in plan.steps)]
    for k, (array, layout, oracle) in enumerate(zip(arrays, layouts, expected)):
        assert (array["shape"], array["strides"], array["offset"]) == \
            (layout.shape, layout.strides, layout.offset)
        cells = array["cells"]
        if layout.numel == 0:
            assert not cells
            continue
        assert (0,) * layout.ndim in cells        # abbreviated or not, the first element
        if layout.numel <= 24:                    # small arrays: every element
            assert len(cells) == layout.numel
        for index, cell in cells.items():
            assert int(cell["data-position"]) == oracle["positions"][index], (array["step"], index)
            if oracle["reduced"] is None:
                assert int(cell["data-value"]) == oracle["values"][index], (array["step"], index)
            else:
                listed = [int(v) for v in cell["data-reduces"].split()]
                low, high, total, count = (r[index] for r in oracle["reduced"])
                assert int(cell["data-count"]) == count
                if count <= len(listed):
                    assert (min(listed), max(listed), sum(listed)) == (low, high, total)
        for position, cell in array["strip"].items():
            if array["kind"] == "input":
                assert int(cell["data-value"]) == position
            else:   # a copy's new storage holds the array before it in row-major order
                assert int(cell["data-value"]) == expected[k - 1]["values"].ravel()[position]
    last = expected[-1]
    if final is not None:
        assert last["values"].shape == final.shape
        assert np.array_equal(last["values"], final)
    if final_reduced is not None:
        for mine, theirs in zip(last["reduced"][:3], final_reduced):
            assert np.array_equal(mine, theirs)
    return arrays


# --------------------------------------------------------------------------- corpus

# name, input (a shape, or an array whose strides the plan takes), pattern, op, keywords
CASES = [
    ("transpose", (3, 4), "h w -> w h", "rearrange", {}),
    ("heads_merge_copies", (2, 3, 4, 5), "b h t d -> b t (h d)", "rearrange", {}),
    ("split", (2, 12, 3), "b (h w) c -> b h w c", "rearrange", {"h": 3}),
    ("pixel_shuffle", (1, 8, 2, 3), "b (c r1 r2) h w -> b c (h r1) (w r2)", "rearrange",
     {"r1": 2, "r2": 2}),
    ("units", (2, 1, 3), "b 1 c -> b () c 1", "rearrange", {}),
    ("ellipsis", (2, 3, 4, 5), "b ... c -> b c (...)", "rearrange", {}),
    ("transposed_input_view", ("strides", (4, 6), (1, 4)), "h w -> (h w)", "rearrange", {}),
    ("broadcast_input", ("strides", (3, 4), (0, 1)), "a b -> (a b)", "rearrange", {}),
    ("sliced_input", ("array", lambda: np.arange(48).reshape(6, 8)[::2, 1::3]),
     "a b -> (b a)", "rearrange", {}),
    ("negative_strides", ("array", lambda: np.arange(24).reshape(4, 6)[::-1, ::-2]),
     "a b -> (a b)", "rearrange", {}),
    ("negative_strides_permute", ("array", lambda: np.arange(60).reshape(3, 4, 5)[:, ::-1]),
     "a b c -> c (a b)", "rearrange", {}),
    ("tensor_offset", ("tensor", lambda: ra.arange(40).view(5, 8)[1:, 2::2]),
     "a b -> b a", "rearrange", {}),
    ("copy_true", (4, 6), "h w -> (h w)", "rearrange", {"copy": True}),
    ("zero_size", (0, 3), "a b -> (b a)", "rearrange", {}),
    ("zero_d", (), " -> 1", "rearrange", {}),
    ("large_abbreviated", (2, 8, 128, 64), "b h t d -> b t (h d)", "rearrange", {}),
    ("repeat_view", (2, 3), "h w -> h r w", "repeat", {"r": 4}),
    ("repeat_copies", (3,), "w -> (w r)", "repeat", {"r": 2}),
    ("repeat_interleave", (2, 2, 3), "h w c -> (h 2) (w 2) c", "repeat", {}),
    ("repeat_new_leading", (2, 3), "h w -> b h w", "repeat", {"b": 3}),
    ("reduce_pool", (2, 4, 4, 3), "b (h 2) (w 2) c -> b h w c", "reduce", {}),
    ("reduce_to_scalar", (4, 6), "h w -> ", "reduce", {}),
    ("reduce_permuted", (2, 3, 4, 5), "b c h w -> w b", "reduce", {}),
    ("reduce_large", (3, 100, 7), "a b c -> c a", "reduce", {}),
]


def _input(spec):
    """The input and the keywords explain needs for it."""
    if isinstance(spec, tuple) and spec and spec[0] == "strides":
        return spec[1], {"strides": spec[2]}
    if isinstance(spec, tuple) and spec and spec[0] in ("array", "tensor"):
        return spec[1](), {}
    return spec, {}


def _input_values(x, options) -> np.ndarray:
    if isinstance(x, tuple):
        layout = ra.Layout(x, options["strides"]) if "strides" in options else ra.Layout.contiguous(x)
    elif isinstance(x, ra.Tensor):
        layout = x.layout
    else:
        layout = ra.Layout(x.shape, tuple(s // x.itemsize for s in x.strides))
    return storage_view(layout.shape, layout.strides, layout.offset)


@pytest.mark.parametrize(("name", "spec", "pattern", "op", "options"), CASES,
                         ids=[case[0] for case in CASES])
def test_every_drawn_cell_reads_what_numpy_says(name, spec, pattern, op, options) -> None:
    x, extra = _input(spec)
    values = _input_values(x, extra)
    if op == "reduce":
        plan = ra.explain(x, pattern, op="reduce", reduction="max", **extra, **options)
        theirs = tuple(einops.reduce(values, pattern, r, **options) for r in ("min", "max", "sum"))
        check_against_oracle(plan, final_reduced=theirs)
        return
    plan = ra.explain(x, pattern, op=op, **extra, **options)
    function = einops.repeat if op == "repeat" else einops.rearrange
    lengths = {k: v for k, v in options.items() if k != "copy"}
    check_against_oracle(plan, final=function(values, pattern, **lengths))


@st.composite
def layouts_and_patterns(draw):
    """A strided numpy input (sliced with steps of either sign, then permuted) and a
    pattern that permutes its axes and merges runs of them."""
    ndim = draw(st.integers(1, 4))
    shape = draw(st.lists(st.integers(1, 4), min_size=ndim, max_size=ndim))
    steps = draw(st.lists(st.sampled_from([1, 2, -1, -2]), min_size=ndim, max_size=ndim))
    parent = np.arange(math.prod(s * abs(k) for s, k in zip(shape, steps))).reshape(
        [s * abs(k) for s, k in zip(shape, steps)])
    x = parent[tuple(slice(None, None, k) for k in steps)]
    x = x.transpose(draw(st.permutations(range(ndim))))
    names = "abcd"[:ndim]
    order = draw(st.permutations(names))
    cuts = sorted(draw(st.sets(st.integers(1, max(1, ndim - 1)), max_size=ndim - 1))) if ndim > 1 else []
    groups, start = [], 0
    for cut in [*cuts, ndim]:
        part = order[start:cut]
        groups.append(part[0] if len(part) == 1 else "(" + " ".join(part) + ")")
        start = cut
    return x, f"{' '.join(names)} -> {' '.join(groups)}"


@given(layouts_and_patterns())
def test_pictures_of_random_layouts_and_merges_match_numpy(case) -> None:
    x, pattern = case
    values = storage_view(x.shape, tuple(s // x.itemsize for s in x.strides))
    check_against_oracle(ra.explain(x, pattern), final=einops.rearrange(values, pattern))


def test_a_failing_merge_outlines_its_stride_jump_and_says_why() -> None:
    plan = ra.explain((2, 3, 2), "a b c -> (a c b)")     # x.permute(0, 2, 1).view(-1)
    svg = plan.to_svg()
    permuted = arrays_of(svg)[1]
    jumps = {index for index, cell in permuted["cells"].items() if "jump" in cell["class"]}
    assert jumps == {(0, 1, 0), (1, 0, 0)}   # reads 1, then 6 where a view needs 2
    assert "cannot merge (a c b): stride(a)=6 != stride(c)*size(c)=2" in svg
    assert "reads 6 where a view needs 2" in svg
    assert not any("jump" in cell["class"] for a in arrays_of(ra.explain(
        (2, 3, 2), "a b c -> (a b c)").to_svg()) for cell in a["cells"].values())


def test_stride_zero_cells_are_drawn_as_repeats() -> None:
    expanded = arrays_of(ra.explain((2, 3), "h w -> b h w", op="repeat", b=3).to_svg())[-1]
    assert expanded["strides"] == (0, 3, 1)
    repeats = {index for index, cell in expanded["cells"].items() if "repeat" in cell["class"]}
    assert repeats == {index for index in expanded["cells"] if index[0] > 0}
    assert repeats


def test_a_copy_starts_a_new_storage() -> None:
    arrays = arrays_of(ra.explain((2, 3, 4, 5), "b h t d -> b t (h d)").to_svg())
    assert [(a["op"], a["storage"]) for a in arrays] == [
        ("input", "input"), ("permute", "input"), ("copy", "copy"), ("merge", "copy")]
    assert arrays[0]["strip"] and arrays[2]["strip"]       # both storages drawn as strips


# --------------------------------------------------------------------------- other plan classes


def test_unpack_views_read_the_packed_storage_as_numpy_slices_do() -> None:
    plan = explain_unpack((2, 8), [(3,), (2, 2), ()], "b *")
    arrays = arrays_of(plan.to_svg())
    packed = np.arange(16).reshape(2, 8)
    expected = [packed, packed[:, 0:3], packed[:, 3:7].reshape(2, 2, 2), packed[:, 7]]
    assert [a["step"] for a in arrays] == ["0", "output 0", "output 1", "output 2"]
    for array, oracle in zip(arrays, expected):
        assert array["shape"] == oracle.shape
        for index, cell in array["cells"].items():
            assert int(cell["data-position"]) == int(cell["data-value"]) == oracle[index]


def test_pack_places_each_input_element_where_numpy_concatenates_it() -> None:
    shapes = [(2, 3, 5), (2, 3, 7, 5), (2, 3, 2, 2, 5)]
    plan = explain_pack(shapes, "i j * k", dtype="float32")
    arrays = arrays_of(plan.to_svg())
    tagged = [1000 * k + np.arange(math.prod(s)).reshape(s) for k, s in enumerate(shapes)]
    packed = np.concatenate([t.reshape(2, 3, -1, 5) for t in tagged], axis=2)
    final = arrays[-1]
    assert final["step"] == "packed" and final["shape"] == packed.shape
    for index, cell in final["cells"].items():
        origin, element = (int(v) for v in cell["data-value"].split(":"))
        assert 1000 * origin + element == packed[index]
        assert int(cell["data-position"]) == np.ravel_multi_index(index, packed.shape)
    for position, cell in final["strip"].items():
        origin, element = (int(v) for v in cell["data-value"].split(":"))
        assert 1000 * origin + element == packed.ravel()[position]


def test_einsum_inputs_are_drawn_through_their_rearranges() -> None:
    plan = explain_einsum([(2, 12), (12, 5)], "b (h d), (h d) e -> b h e", h=3)
    arrays = arrays_of(plan.to_svg())
    assert [(a["step"], a["kind"]) for a in arrays] == [
        ("x0", "input"), ("1", "view"), ("x1", "input"), ("2", "view"), ("3", "new")]
    x1_split = np.arange(60).reshape(12, 5).reshape(3, 4, 5)
    for index, cell in arrays[3]["cells"].items():
        assert cell["data-value"] == f"1:{x1_split[index]}"
    assert all("computed" in cell["class"] for cell in arrays[4]["cells"].values())


def test_every_plan_class_shows_its_table_and_a_picture_where_it_has_one() -> None:
    from rearrange.shapes import explain_shape

    plans = [ra.explain((2, 3), "a b -> b a"),
             explain_pack([(2, 3), (2, 4)], "b *"),
             explain_unpack((2, 7), [(3,), (4,)], "b *"),
             explain_einsum([(2, 3), (3, 4)], "a b, b c -> a c")]
    for plan in plans:
        page = plan._repr_html_()
        assert page.count("<svg") == 1 and "&#x27;" in page      # the table, escaped
        ET.fromstring(page)                                         # well-formed XHTML
    shape_plan = explain_shape((2, 12, 3), "b (h w) c", h=4)
    page = shape_plan._repr_html_()
    assert "<svg" not in page and "<pre>check_shape &#x27;b (h w) c&#x27;" in page
    assert not hasattr(shape_plan, "to_svg")
    symbolic = plan_symbolic("rearrange", "b (h w) -> b h w", (2, 12), {"h": 3})
    assert symbolic._repr_html_() == (
        f'<div class="ra-explain"><pre>{html_module.escape(str(symbolic))}</pre></div>')


def test_drawing_is_imported_only_when_a_picture_is_asked_for() -> None:
    code = ("import sys, rearrange as ra; plan = ra.explain((2, 3), 'a b -> (b a)');"
            "print('rearrange.picture' in sys.modules);"
            "plan.to_svg(); plan._repr_html_();"
            "print('rearrange.picture' in sys.modules,"
            " sorted(m for m in ('numba', 'torch', 'dask', 'jax', 'einops') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=pathlib.Path(ra.__file__).parent.parent)
    assert result.stdout.split("\n")[:2] == ["False", "True []"], result.stderr


# --------------------------------------------------------------------------- bounded size

BIG = [
    ((64, 3, 224, 224), "b c h w -> b h w c", {}),
    ((64, 3, 224, 224), "b c (h p1) (w p2) -> b (h w) (p1 p2 c)", {"p1": 16, "p2": 16}),
    ((64, 3, 224, 224), "b c (h 2) (w 2) -> b c h w", {"op": "reduce", "reduction": "mean"}),
    ((3, 224, 224), "c h w -> b (h 2) (w 2) c", {"op": "repeat", "b": 64}),
    ((2,) * 10, "a b c d e f g h i j -> (j i) h g f e d c b a", {}),
    ((3, 1, 4, 1, 5, 2, 6, 5, 3, 5), "a b c d e f g h i j -> (j a) (i b c) d (e h g) f", {}),
    ((7,) * 10, "a b c d e f g h i j -> j i h g f e d c b a", {}),
]


@pytest.mark.parametrize(("shape", "pattern", "options"), BIG, ids=[b[1] for b in BIG])
def test_any_picture_stays_small(shape, pattern, options) -> None:
    svg = ra.explain(shape, pattern, dtype="uint8", **options).to_svg()
    ET.fromstring(svg)
    assert len(svg.encode()) < 500_000


def test_pictures_of_many_inputs_stay_small() -> None:
    pack = explain_pack([(64, 3, 32, 32)] * 40, "b * h w", dtype="uint8")
    einsum = explain_einsum([(64, 128), (128, 256), (256, 512), (512, 64)] * 3,
                            "a b, b c, c d, d e, e f, f g, g h, h i, i j, j k, k l, l m -> a m")
    for plan in (pack, einsum):
        svg = plan.to_svg()
        ET.fromstring(svg)
        assert len(svg.encode()) < 500_000, len(svg)


# --------------------------------------------------------------------------- the command and a browser


def _render_pictures():
    spec = importlib.util.spec_from_file_location("render_pictures",
                                                  REPO_ROOT / "docs" / "render_pictures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_command_writes_the_picture_and_the_page(tmp_path) -> None:
    render = _render_pictures()
    svg, page = tmp_path / "plan.svg", tmp_path / "plan.html"
    table = render.explain(["b h t d -> b t (h d)", "--shape", "2,3,4,5"], svg, page)
    plan = ra.explain((2, 3, 4, 5), "b h t d -> b t (h d)", dtype="float32")
    assert svg.read_text(encoding="utf-8") == plan.to_svg()
    html = page.read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>") and plan.to_svg() in html
    assert table.splitlines()[0] in html_module.unescape(html)


@pytest.mark.slow
def test_a_browser_renders_the_page_in_light_and_dark_themes(tmp_path) -> None:
    render = _render_pictures()
    if render.chromium() is None:
        if os.environ.get("CI"):
            pytest.fail("CI installs chromium (.ci/run); it is missing")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    svg, page = tmp_path / "plan.svg", tmp_path / "plan.html"
    table = render.explain(["b h t d -> b t (h d)", "--shape", "2,3,4,5"], svg, page)
    size = render.page_size(table, svg.read_text(encoding="utf-8"))
    import matplotlib.image

    for dark in (False, True):
        png = tmp_path / f"plan-{'dark' if dark else 'light'}.png"
        render.screenshot(page, png, size, dark=dark)
        pixels = (matplotlib.image.imread(png)[..., :3] * 255).round().astype(np.int64)
        assert pixels.shape[:2] == (size[1], size[0])
        background = pixels[0, 0]
        assert (background.mean() < 40) if dark else (background.mean() > 220)
        drawn = np.any(np.abs(pixels - background) > 24, axis=-1)
        red, green, blue = pixels[..., 0], pixels[..., 1], pixels[..., 2]
        colours = np.unique(red * 65536 + green * 256 + blue)
        saturated = (np.max(pixels, axis=-1) - np.min(pixels, axis=-1)) > 60
        alert = (red > 150) & (red - green > 80) & (red - blue > 80)   # the jump's outline
        assert drawn.mean() > 0.05, "the page rendered (nearly) blank"
        assert len(colours) > 50, "the picture's cells are not coloured"
        assert saturated.sum() > 2000 and alert.sum() > 50
        # text stands out from the background in both themes: the brightest and the
        # darkest drawn pixels are far apart
        brightness = pixels[drawn].mean(axis=-1)
        assert brightness.max() - brightness.min() > 150


def test_the_docs_pictures_are_what_the_code_draws(tmp_path, capsys) -> None:
    """docs/img/*.svg are rendered by docs/render_pictures.py; after a change to the
    pictures, run it again (it needs chromium for the PNGs) and review the images."""
    from rearrange.__main__ import main

    render = _render_pictures()
    for name, arguments in render.CASES.items():
        drawn = tmp_path / f"{name}.svg"
        assert main(["explain", *arguments, "--svg", str(drawn)]) == 0
        committed = REPO_ROOT / "docs" / "img" / f"{name}.svg"
        assert committed.read_text(encoding="utf-8") == drawn.read_text(encoding="utf-8"), \
            f"{committed} is stale: python docs/render_pictures.py"
        assert (REPO_ROOT / "docs" / "img" / f"{name}.png").stat().st_size > 10_000
    capsys.readouterr()
