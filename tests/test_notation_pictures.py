"""#38 item 7: pictures (``to_svg``, ``_repr_html_``, ``rearrange explain --svg/--html``)
of every plan of einx's notation. Read back out of the SVG, each drawn cell's storage
index (``data-position``) and the input element it holds (``data-value``) are checked
against numpy carrying an ``arange`` storage (every element its own index) through the
same diagonal, slices, flip, roll, broadcast and concatenation."""

from __future__ import annotations

import math
import pathlib
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import rearrange as ra
from rearrange.__main__ import main

from golden_check import assert_matches_golden
from notation_cli import EVERY_OP, IDS, explain_argv
from svg_reading import arrays_of

def value(cell: dict) -> tuple[int, int]:
    """``(input, element)`` a cell holds: ``k:i``, or ``i`` of the only input."""
    text = cell["data-value"]
    origin, _, element = text.rpartition(":")
    return int(origin or 0), int(element)


def storage_of(array: np.ndarray) -> np.ndarray:
    """numpy's view of an ``arange`` storage with ``array``'s layout: every element the
    storage index (in elements, from the first element) it reads."""
    item = array.itemsize
    strides = tuple(s // item for s in array.strides)
    low = sum((n - 1) * s for n, s in zip(array.shape, strides) if s < 0)
    high = sum((n - 1) * s for n, s in zip(array.shape, strides) if s > 0)
    base = np.arange(low, high + 1, dtype=np.int64)
    return np.lib.stride_tricks.as_strided(base[-low:], array.shape,
                                           tuple(s * 8 for s in strides), writeable=False)


def assert_cells(array: dict, expected: np.ndarray, field: str = "data-position") -> None:
    assert array["shape"] == expected.shape
    assert array["cells"], "no cell drawn"
    for index, cell in array["cells"].items():
        got = value(cell)[1] if field == "data-value" else int(cell[field])
        assert got == expected[index], (array["step"], index)


# --------------------------------------------------------------------------- diagonals, splits


@pytest.mark.parametrize("make", [
    lambda: np.arange(25.0).reshape(5, 5),
    lambda: np.arange(25.0).reshape(5, 5).T,               # column-major
    lambda: np.arange(50.0).reshape(5, 10)[:, 2:7],         # rows with gaps
    lambda: np.arange(25.0).reshape(5, 5)[::-1],            # a negative stride
], ids=["c-order", "transposed", "sliced", "reversed"])
def test_the_diagonal_reads_the_inputs_diagonal(make) -> None:
    x = make()
    arrays = arrays_of(ra.explain(x, "a a -> a").to_svg())
    assert [(a["step"], a["kind"]) for a in arrays] == [("0", "input"), ("output 0", "view")]
    positions = storage_of(x)
    assert_cells(arrays[0], positions)
    assert_cells(arrays[1], np.diagonal(positions))
    assert_cells(arrays[1], np.diagonal(positions), "data-value")   # the input's elements
    assert arrays[1]["storage"] == "input"                           # no new storage


def test_a_batched_diagonal_reads_what_einsum_takes() -> None:
    positions = np.arange(18).reshape(2, 3, 3)
    arrays = arrays_of(ra.explain((2, 3, 3), "b i i -> b i").to_svg())
    assert arrays[-1]["strides"] == (9, 4)
    assert_cells(arrays[-1], np.einsum("bii->bi", positions))


def test_a_split_draws_each_output_as_a_view_of_the_input() -> None:
    arrays = arrays_of(ra.explain((2, 7), "a (b + c) -> a b, a c", b=3).to_svg())
    assert [(a["step"], a["kind"], a["storage"]) for a in arrays] == [
        ("0", "input", "input"), ("output 0", "view", "input"), ("output 1", "view", "input")]
    positions = np.arange(14).reshape(2, 7)
    assert_cells(arrays[1], positions[:, :3])
    assert_cells(arrays[2], positions[:, 3:])


def test_a_split_output_that_needs_a_copy_is_drawn_as_one() -> None:
    plan = ra.explain((2, 7), "a (b + c) -> (a b), a c", b=3)
    arrays = arrays_of(plan.to_svg())
    merged = next(a for a in arrays if a["step"] == "output 0")
    assert merged["kind"] in ("copy", "view") and merged["shape"] == (6,)
    assert_cells(merged, np.arange(14).reshape(2, 7)[:, :3].reshape(6), "data-value")


# --------------------------------------------------------------------------- concatenations


@pytest.mark.parametrize("pattern, shapes, oracle", [
    ("a b, a c -> (b + c) a", [(2, 3), (2, 4)], lambda x, y: np.concatenate([x.T, y.T])),
    ("a b, a c -> a (b + c)", [(2, 3), (2, 4)], lambda x, y: np.concatenate([x, y], 1)),
    ("a b, c -> a (b + c)", [(2, 3), (4,)],
     lambda x, y: np.concatenate([x, np.broadcast_to(y, (2, 4))], 1)),
])
def test_a_concatenation_places_each_input_element_where_numpy_puts_it(pattern, shapes,
                                                                          oracle) -> None:
    plan = ra.explain(shapes, pattern)
    arrays = arrays_of(plan.to_svg())
    tagged = [1000 * k + np.arange(math.prod(s)).reshape(s) for k, s in enumerate(shapes)]
    expected = oracle(*tagged)
    inputs = [a for a in arrays if a["kind"] == "input"]
    places = [a for a in arrays if a["step"].startswith("place")]
    assert len(inputs) == 2 and len(places) == 2
    output = arrays[-1]
    assert (output["step"], output["kind"], output["shape"]) == ("output 0", "copy",
                                                                  expected.shape)
    # laid out as numpy's concatenate lays it out (order 'K': as its inputs are)
    for index, cell in output["cells"].items():
        origin, element = value(cell)
        assert 1000 * origin + element == expected[index]
        assert int(cell["data-position"]) == sum(
            i * s for i, s in zip(index, expected.strides)) // expected.itemsize
    for position, cell in output["strip"].items():
        origin, element = value(cell)
        assert 1000 * origin + element == expected.ravel(order="K")[position]
    for place in places:                   # each place: a view of the output's storage
        assert place["storage"] == "output 0"
        for cell in place["cells"].values():
            assert value(cell)[0] == int(place["step"].split()[1])


# --------------------------------------------------------------------------- along


def test_the_flip_is_drawn_as_a_view_with_a_negative_stride() -> None:
    arrays = arrays_of(ra.explain((4, 6), "a [b]", op="flip").to_svg())
    assert [(a["step"], a["kind"], a["storage"]) for a in arrays] == [
        ("0", "input", "input"), ("op", "view", "input")]
    assert arrays[1]["strides"] == (6, -1)
    assert_cells(arrays[1], np.flip(np.arange(24).reshape(4, 6), 1))


def test_a_flip_inside_a_group_is_split_flipped_and_merged() -> None:
    arrays = arrays_of(ra.explain((2, 12), "a ([b] c)", op="flip", c=3).to_svg())
    expected = np.flip(np.arange(24).reshape(2, 4, 3), 1)
    assert_cells(next(a for a in arrays if a["step"] == "op"), expected)
    assert_cells(arrays[-1], expected.reshape(2, 12), "data-value")


def test_a_roll_moves_the_inputs_elements_where_numpy_does() -> None:
    arrays = arrays_of(ra.explain((4, 6), "a [b]", op="roll", shift=2).to_svg())
    assert arrays[-1]["kind"] == "copy"
    assert_cells(arrays[-1], np.roll(np.arange(24).reshape(4, 6), 2, axis=1), "data-value")


@pytest.mark.parametrize("op", ["softmax", "log_softmax", "sort", "argsort", "argmax"])
def test_an_op_that_computes_draws_a_new_array_of_computed_cells(op) -> None:
    arrays = arrays_of(ra.explain((4, 6), "a [b]", op=op).to_svg())
    computed = next(a for a in arrays if a["step"] == "op")
    assert computed["kind"] == "new"
    assert all("computed" in cell["class"] and "data-value" not in cell
               for cell in computed["cells"].values())


# --------------------------------------------------------------------------- elementwise


def test_each_elementwise_input_is_drawn_as_its_broadcast_view() -> None:
    plan = ra.explain([(2, 3, 4), (4,), (3, 1)], "a b c, c, b 1 -> a b c", op="add")
    arrays = arrays_of(plan.to_svg())
    assert [a["step"] for a in arrays] == ["x0", "x1", "view 1", "x2", "view 2", "result"]
    views = {a["step"]: a for a in arrays}
    for k, shape in [(1, (4,)), (2, (3, 1))]:
        positions = np.arange(math.prod(shape)).reshape(shape)
        expected = np.broadcast_to(positions, (2, 3, 4))
        assert_cells(views[f"view {k}"], expected)
        assert views[f"view {k}"]["storage"] == f"input {k}"
        cells = views[f"view {k}"]["cells"]
        assert any("repeat" in cell["class"] for cell in cells.values())   # stride 0
    assert views["view 1"]["strides"] == (0, 0, 1)
    assert arrays[-1]["kind"] == "new"


def test_an_elementwise_inputs_diagonal_and_strides_are_what_numpy_reads() -> None:
    x = np.zeros((4, 3, 6))[::-1, :, ::2]                  # negative and gapped strides
    y = np.zeros((3, 2))
    arrays = arrays_of(ra.explain([x, y], "a b b, b c -> a c b", op="multiply").to_svg())
    views = {a["step"]: a for a in arrays}
    positions = storage_of(x)
    assert_cells(views["x0"], positions)
    assert_cells(views["view 0"], np.einsum("abb->ab", positions)[:, None, :]
                 .repeat(2, axis=1))
    assert_cells(views["view 1"], np.broadcast_to(np.arange(6).reshape(3, 2).T, (4, 2, 3)))


def test_an_elementwise_input_read_as_it_is_has_no_second_panel() -> None:
    arrays = arrays_of(ra.explain([(2, 3), (2, 3)], "a b, a b", op="multiply").to_svg())
    assert [a["step"] for a in arrays] == ["x0", "x1", "result"]


# --------------------------------------------------------------------------- indexing


def test_a_gather_draws_the_rows_view_and_the_blocks_layout() -> None:
    arrays = arrays_of(ra.explain([(50, 8), (2, 5)], "[v] d, b t -> b t d",
                                  op="get_at").to_svg())
    assert [(a["step"], a["kind"]) for a in arrays] == [
        ("0", "input"), ("rows", "view"), ("gathered", "new")]
    assert_cells(arrays[1], np.arange(400).reshape(50, 8))
    assert arrays[2]["shape"] == (2, 5, 8)
    # which row a gathered element holds depends on the index data: no value is claimed
    assert all("data-value" not in cell for cell in arrays[2]["cells"].values())


def test_a_gather_with_a_permuted_output_draws_its_rows_and_output_order() -> None:
    plan = ra.explain([(3, 4, 5), (2,)], "b [v] d, t -> d b t", op="get_at")
    arrays = arrays_of(plan.to_svg())
    steps = [a["step"] for a in arrays]
    assert steps[:2] == ["0", "view"] and "rows" in steps and "gathered" in steps
    x = np.arange(60).reshape(3, 4, 5)
    view = next(a for a in arrays if a["step"] == "view")
    order = plan.x_order
    assert_cells(view, x.transpose(order))
    assert arrays[-1]["shape"] == (5, 3, 2)


def test_an_update_draws_the_copy_of_x_it_writes_into() -> None:
    arrays = arrays_of(ra.explain([(50, 8), (2, 5), (2, 5, 8)], "[v] d, b t, b t d",
                                  op="add_at").to_svg())
    assert [(a["step"], a["kind"]) for a in arrays][:2] == [("0", "input"), ("copy", "copy")]
    rows = next(a for a in arrays if a["step"] == "rows")
    assert rows["storage"] == "result"          # the scatter writes the copy, never x
    assert_cells(rows, np.arange(400).reshape(50, 8), "data-value")


# --------------------------------------------------------------------------- every plan, the CLI

@pytest.mark.parametrize("op, pattern, shapes, extra", EVERY_OP, ids=IDS)
def test_the_command_line_draws_every_notation_plan(op, pattern, shapes, extra, tmp_path,
                                                    capsys) -> None:
    svg, page = tmp_path / "plan.svg", tmp_path / "plan.html"
    assert main(explain_argv(op, pattern, shapes, extra, "--svg", str(svg),
                             "--html", str(page))) == 0
    table = capsys.readouterr().out
    drawn = svg.read_text(encoding="utf-8")
    arrays = arrays_of(drawn)
    assert len(arrays) >= 2 and arrays[0]["kind"] == "input"
    assert drawn in page.read_text(encoding="utf-8") and table.strip()


def test_notebooks_show_the_table_and_the_picture() -> None:
    plans = [ra.explain((5, 5), "a a -> a"), ra.explain((4, 6), "a [b]", op="flip"),
             ra.explain([(2, 3), (3,)], "a b, b", op="add"),
             ra.explain([(50, 8), (2, 5)], "[v] d, b t -> b t d", op="get_at")]
    for plan in plans:
        page = plan._repr_html_()
        assert page.count("<svg") == 1 and "&#x27;" in page       # the table, escaped
        ET.fromstring(page)


@pytest.mark.parametrize("op", ["check_shape", "parse_shape"])
def test_only_shape_plans_are_said_to_have_no_picture(op, tmp_path, capsys) -> None:
    assert main(["explain", "a b", "--op", op, "--shape", "2,3", "--svg",
                 str(tmp_path / "x.svg")]) != 0
    assert f"--svg: a {op} plan has no picture (it reads a shape" in capsys.readouterr().err
    assert not (tmp_path / "x.svg").exists()


def test_pictures_of_large_notation_plans_stay_small() -> None:
    plans = [ra.explain([(64, 3, 224, 224), (64, 5, 224, 224)],
                        "b c1 h w, b c2 h w -> b (c1 + c2) h w"),
             ra.explain([(64, 3, 32, 32)] * 40,
                        ", ".join(f"b c{k} h w" for k in range(40)) + " -> b ("
                        + " + ".join(f"c{k}" for k in range(40)) + ") h w"),
             ra.explain((512, 512), "a a -> a"),
             ra.explain((64, 1000), "b [c]", op="softmax"),
             ra.explain([(64, 3, 224, 224), (3, 1, 1)], "b c h w, c 1 1", op="subtract"),
             ra.explain([(50000, 512), (32, 128)], "[v] d, b t -> b t d", op="get_at")]
    for plan in plans:
        svg = plan.to_svg()
        ET.fromstring(svg)
        assert len(svg.encode()) < 500_000, (str(plan).splitlines()[0], len(svg))


# --------------------------------------------------------------------------- golden pictures

GOLDEN = pathlib.Path(__file__).parent / "golden" / "pictures"


@pytest.mark.parametrize("name, make", [
    ("diagonal", lambda: ra.explain((5, 5), "a a -> a")),
    ("concatenation", lambda: ra.explain([(2, 3), (2, 4)], "a b, a c -> (b + c) a")),
], ids=["diagonal", "concatenation"])
def test_the_pictures_are_the_reviewed_ones(name, make) -> None:
    """After an intended change to the drawing: REARRANGE_UPDATE_GOLDEN=1, then review."""
    assert_matches_golden(make().to_svg(), GOLDEN / f"{name}.svg")


def test_pictures_draw_the_strides_the_plans_were_made_for() -> None:
    x = np.zeros((8, 50)).T                                 # column-major rows
    arrays = arrays_of(ra.explain([x, np.zeros((2, 5), int)], "[v] d, b t -> b t d",
                                  op="get_at").to_svg())
    assert_cells(arrays[0], storage_of(x))
    assert_cells(next(a for a in arrays if a["step"] == "rows"), storage_of(x))
    y = np.zeros((4, 12))[:, ::2]
    arrays = arrays_of(ra.explain(y, "a [b]", op="flip").to_svg())
    assert_cells(arrays[0], storage_of(y))
    assert_cells(arrays[-1], storage_of(np.flip(y, 1)) + 10)   # from y's first element
