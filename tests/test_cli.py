"""``rearrange explain`` for every op the Python API explains, and every dtype the
library handles: the command prints what ``rearrange.explain`` returns for the same
arguments, and the dtypes numpy does not name (bfloat16, ...) are planned as torch plans
its own tensors of them."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import rearrange as ra
from rearrange.__main__ import main


def _command() -> list[str]:
    """The installed console script (CI: from the wheel), else ``python -m rearrange``."""
    script = pathlib.Path(sys.executable).with_name("rearrange")
    return [str(script)] if script.exists() else [sys.executable, "-m", "rearrange"]


def _run(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run([*_command(), "explain", *arguments], capture_output=True,
                          text=True, timeout=120)


# command-line arguments, then what rearrange.explain gets for them
SAME_AS_THE_API = [
    (["i j * k", "--op", "pack", "--shape", "2,3,5", "--shape", "2,3,7,5"],
     ([(2, 3, 5), (2, 3, 7, 5)], "i j * k"), {"op": "pack", "dtype": "float32"}),
    (["b *", "--op", "unpack", "--shape", "2,8", "--packed-shape", "3", "--packed-shape", "2,2",
      "--packed-shape", ""],
     ((2, 8), "b *"), {"op": "unpack", "packed_shapes": [(3,), (2, 2), ()], "dtype": "float32"}),
    (["b (h d), (h d) e -> b h e", "h=3", "--op", "einsum", "--shape", "2,12", "--shape", "12,5",
      "--strides", "1,2", "--strides", "5,1"],
     ([(2, 12), (12, 5)], "b (h d), (h d) e -> b h e"),
     {"op": "einsum", "h": 3, "strides": [(1, 2), (5, 1)], "dtype": "float32"}),
    (["a b, b c -> a c", "--op", "einsum", "--shape", "2,3", "--shape", "3,4",
      "--dtype", "int8", "--dtype", "float16"],
     ([(2, 3), (3, 4)], "a b, b c -> a c"), {"op": "einsum", "dtype": ["int8", "float16"]}),
    (["b (h w) c", "h=4", "--op", "check_shape", "--shape", "2,12,3"],
     ((2, 12, 3), "b (h w) c"), {"op": "check_shape", "h": 4}),
    (["b _ w", "--op", "parse_shape", "--shape", "2,12,3"],
     ((2, 12, 3), "b _ w"), {"op": "parse_shape"}),
    (["b c (h 2) (w 2) -> b c h w", "--op", "reduce", "--reduction", "max", "--shape",
      "8,3,64,64", "--dtype", "bfloat16"],
     ((8, 3, 64, 64), "b c (h 2) (w 2) -> b c h w"),
     {"op": "reduce", "reduction": "max", "dtype": "bfloat16"}),
]


@pytest.mark.parametrize(("arguments", "call", "options"), SAME_AS_THE_API,
                         ids=["pack", "unpack", "einsum", "einsum-dtypes", "check_shape",
                              "parse_shape", "reduce-bfloat16"])
def test_the_command_explains_what_the_api_explains(arguments, call, options, capsys) -> None:
    assert main(["explain", *arguments, "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == ra.explain(*call, **options).to_dict()
    assert main(["explain", *arguments]) == 0
    assert capsys.readouterr().out == str(ra.explain(*call, **options)) + "\n"


def test_emitted_code_of_pack_unpack_and_einsum(capsys) -> None:
    assert main(["explain", "b *", "--op", "unpack", "--shape", "2,8", "--packed-shape", "3",
                 "--packed-shape", "5", "--emit", "torch"]) == 0
    assert capsys.readouterr().out == "[x[:, 0:3], x[:, 3:8]]\n"
    assert main(["explain", "a *", "--op", "pack", "--shape", "2", "--shape", "2,3",
                 "--emit", "numpy"]) == 0
    assert capsys.readouterr().out == "np.concatenate([xs[0].reshape(2, 1), xs[1]], axis=1)\n"


@pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")
@pytest.mark.parametrize("dtype", ["bfloat16", "float8_e4m3fn", "float8_e5m2", "complex32"])
def test_dtypes_numpy_does_not_name_are_planned_as_for_torch_tensors(dtype, capsys) -> None:
    """The oracle: the plan of a torch tensor of that dtype (its name and element size
    are torch's), up to the copy kernel that only a real tensor has."""
    torch = pytest.importorskip("torch")
    tensor = torch.zeros(2, 3, 4, dtype=getattr(torch, dtype)).permute(2, 0, 1)
    theirs = ra.explain(tensor, "c a b -> (c a) b")
    assert main(["explain", "c a b -> (c a) b", "--shape", "4,2,3", "--strides", "1,12,4",
                 "--dtype", dtype, "--json"]) == 0
    mine = json.loads(capsys.readouterr().out)
    assert (mine["dtype"], mine["itemsize"]) == (theirs.dtype, theirs.itemsize)
    assert mine["bytes_moved"] == theirs.bytes_moved
    assert [(s["op"], s["shape"], s["strides"]) for s in mine["steps"]] == \
        [(s.op, list(s.layout.shape), list(s.layout.strides)) for s in theirs.steps]
    # the API takes torch's dtype objects too, without importing torch itself
    assert ra.explain((4, 2, 3), "c a b -> (c a) b", strides=(1, 12, 4),
                      dtype=getattr(torch, dtype)).itemsize == theirs.itemsize


def test_numpy_dtypes_of_every_kind_are_explained(capsys) -> None:
    for dtype in ["U3", "object", "datetime64[s]", "S2", "bool", "complex128"]:
        assert main(["explain", "a b -> (b a)", "--shape", "2,3", "--dtype", dtype, "--json"]) == 0
        printed = json.loads(capsys.readouterr().out)
        assert (printed["dtype"], printed["itemsize"]) == (np.dtype(dtype).name,
                                                            np.dtype(dtype).itemsize)


def test_pack_and_einsum_of_bfloat16_shapes(capsys) -> None:
    assert main(["explain", "b *", "--op", "pack", "--shape", "2,3", "--shape", "2",
                 "--dtype", "bfloat16", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["bytes_moved"] == 2 * (6 + 2) * 2
    assert main(["explain", "a b, b c -> a c", "--op", "einsum", "--shape", "2,3",
                 "--shape", "3,4", "--dtype", "bfloat16", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["dtype"] == "bfloat16"


BAD = [
    (["a b -> b a", "--shape", "2,3", "--shape", "3,4"],
     "--op rearrange takes one --shape, got 2"),
    (["a b -> b a", "--shape", "2,3", "--strides", "3,1", "--strides", "1,2"],
     "--op rearrange takes one --strides, got 2"),
    (["b *", "--op", "unpack", "--shape", "2,8"], "--op unpack needs --packed-shape"),
    (["a b -> b a", "--shape", "2,3", "--packed-shape", "3"], "--packed-shape is for --op unpack"),
    (["a b", "--op", "check_shape", "--shape", "2,3", "--dtype", "int8"],
     "--dtype does not apply to --op check_shape"),
    (["a b", "--op", "check_shape", "--shape", "2,3", "--svg", "x.svg"],
     "--svg: a check_shape plan has no picture"),
    (["a b", "--op", "check_shape", "--shape", "2,3", "--emit", "numpy"],
     "--emit: a check_shape plan has no code"),
    (["a b -> b a", "--shape", "2,3", "--dtype", "bfloat17"],
     "dtype must be a numpy-compatible dtype, got 'bfloat17'"),
    (["a b, b c -> a c", "--op", "einsum", "--shape", "2,3", "--shape", "3,4",
      "--dtype", "bfloat16", "--dtype", "float32"],
     "the inputs' dtypes (bfloat16, float32) have no common dtype that numpy knows"),
    (["a b -> b a", "--shape", "2,3", "--svg", "/nonexistent/dir/x.svg"],
     "cannot write /nonexistent/dir/x.svg"),
]


@pytest.mark.parametrize(("arguments", "message"), BAD, ids=[m[:30] for _, m in BAD])
def test_bad_arguments_say_what_was_expected(arguments, message, capsys) -> None:
    assert main(["explain", *arguments]) == 2
    error = capsys.readouterr().err
    assert message in error and "Traceback" not in error


def test_the_installed_command_writes_pictures_of_every_op_with_one(tmp_path) -> None:
    cases = {
        "rearrange": ["b h t d -> b t (h d)", "--shape", "2,3,4,5", "--dtype", "bfloat16"],
        "pack": ["b *", "--op", "pack", "--shape", "2,3", "--shape", "2"],
        "einsum": ["a b, b c -> a c", "--op", "einsum", "--shape", "2,3", "--shape", "3,4"],
    }
    for name, arguments in cases.items():
        svg, page = tmp_path / f"{name}.svg", tmp_path / f"{name}.html"
        result = _run(*arguments, "--svg", str(svg), "--html", str(page))
        assert result.returncode == 0, result.stderr
        assert svg.read_text(encoding="utf-8").startswith("<svg")
        assert svg.read_text(encoding="utf-8") in page.read_text(encoding="utf-8")
    page = tmp_path / "check.html"
    result = _run("b (h w)", "h=2", "--op", "check_shape", "--shape", "2,6", "--html", str(page))
    assert result.returncode == 0, result.stderr
    text = page.read_text(encoding="utf-8")
    assert "<pre>check_shape &#x27;b (h w)&#x27;" in text and "<svg" not in text


def test_output_into_a_closed_pipe_ends_quietly():
    # `rearrange explain ... | head -1`: the reader leaves early; no traceback
    import subprocess
    import sys
    proc = subprocess.Popen([sys.executable, "-m", "rearrange", "explain", "a b c d e f -> f e d c b a",
                             "--shape", "2,3,4,5,6,7", "--svg", "/dev/null", "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()               # the reader goes away before the first line
    stderr = proc.stderr.read().decode()
    proc.wait(timeout=60)
    assert "Traceback" not in stderr, stderr
