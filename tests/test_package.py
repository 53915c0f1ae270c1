"""What a Python package is expected to keep: typed (``py.typed``), licensed, versioned,
and its public names documented in docs/api.md."""

from __future__ import annotations

import pathlib
import re
import shutil
import subprocess
import sys

import pytest

import rearrange

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_every_public_name_has_its_place_in_the_api_reference() -> None:
    reference = (REPO_ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)[`(]", reference))
    missing = sorted(set(rearrange.__all__) - documented)
    assert not missing, f"docs/api.md does not document {missing}"


def test_the_installed_package_is_marked_typed() -> None:
    assert (pathlib.Path(rearrange.__file__).parent / "py.typed").is_file()


def test_license_and_changelog_are_in_the_repository() -> None:
    assert "MIT License" in (REPO_ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "## Unreleased" in (REPO_ROOT / "CHANGELOG.md").read_text(encoding="utf-8")


def test_the_command_line_tells_its_version() -> None:
    result = subprocess.run([sys.executable, "-m", "rearrange", "--version"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"rearrange {rearrange.__version__}"


USER_SCRIPT = '''
import numpy as np
import torch
import rearrange as ra

x = np.zeros((2, 3))
t = torch.zeros(2, 3)
threads: int = ra.get_num_threads()
wrong: str = ra.get_num_threads()
reveal_type(ra.cache_info().plans.misses)
reveal_type(ra.rearrange(x, "a b -> b a"))  # numpy: rearrange
reveal_type(ra.rearrange(t, "a b -> b a"))  # torch: rearrange
reveal_type(ra.rearrange([x, x], "n a b -> b a n"))  # numpy: rearrange of a list
reveal_type(ra.reduce(x, "a b -> a", "sum"))  # numpy: reduce
reveal_type(ra.reduce(t, "a b -> a", "sum"))  # torch: reduce
reveal_type(ra.repeat(x, "a b -> a b c", c=2))  # numpy: repeat
reveal_type(ra.repeat(t, "a b -> a b c", c=2))  # torch: repeat
reveal_type(ra.einsum(x, x, "a b, a c -> b c"))  # numpy: einsum
reveal_type(ra.einsum(t, t, "a b, a c -> b c"))  # torch: einsum
reveal_type(ra.pack([x, x], "a *")[0])  # numpy: pack
reveal_type(ra.pack([t, t], "a *")[0])  # torch: pack
reveal_type(ra.unpack(x, [(1,), (2,)], "a *")[0])  # numpy: unpack
reveal_type(ra.unpack(t, [(1,), (2,)], "a *")[0])  # torch: unpack
reveal_type(ra.rearrange(ra.zeros(2, 3), "a b -> b a"))  # Tensor: rearrange
reveal_type(ra.parse_shape(x, "a b"))  # parse_shape
'''


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("mypy") is None and not (
    pathlib.Path(sys.executable).parent / "mypy").exists(), reason="mypy is not installed")
def test_a_type_checker_sees_the_annotations(tmp_path: pathlib.Path) -> None:
    """mypy on a user's script sees the package's annotations (py.typed), and each
    operation gives back the caller's own array type: ``ndarray`` for numpy inputs,
    ``torch.Tensor`` for torch, ``rearrange.Tensor`` for ours, ``dict[str, int]`` from
    parse_shape."""
    pytest.importorskip("torch")
    script = tmp_path / "user.py"
    script.write_text(USER_SCRIPT)
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental", "--follow-imports=silent",
         "--cache-dir", str(tmp_path / ".mypy_cache"), str(script)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path)
    out = result.stdout
    assert 'Incompatible types in assignment (expression has type "int", variable has type "str")' in out, out
    assert "missing library stubs or py.typed marker" not in out, out
    revealed = dict(re.findall(r'user\.py:(\d+): note: Revealed type is "(.*)"', out))
    lines = USER_SCRIPT.splitlines()
    expected_prefix = {"numpy": "numpy.ndarray[", "torch": "torch._tensor.Tensor",
                       "Tensor": "rearrange.tensor.Tensor", "parse_shape": "dict[str, int]"}
    checked = 0
    for number, line in enumerate(lines, start=1):
        if "# " not in line or not line.startswith("reveal_type"):
            continue
        kind = line.split("# ")[1].split(":")[0]
        got = revealed.get(str(number))
        assert got is not None and got.startswith(expected_prefix[kind]), (line, got, out)
        checked += 1
    assert checked == 15
    misses = next(n for n, line in enumerate(lines, start=1) if "cache_info" in line)
    assert revealed.get(str(misses)) in ("int", "builtins.int"), out


def _package_imports() -> tuple[dict[str, set[str]], list[tuple[str, str, str]]]:
    """Every ``from . import`` / ``from .x import y`` in the package (module- and
    function-level), as edges between modules, and the imported names that are another
    module's private ones."""
    import ast

    root = pathlib.Path(rearrange.__file__).parent
    modules = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        modules[name] = path
    edges: dict[str, set[str]] = {}
    private = []
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom) or not node.level:
                continue
            base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
            target = ".".join(base + ([node.module] if node.module else []))
            for alias in node.names:
                imported = f"{target}.{alias.name}"
                module = imported if imported in modules else target
                edges.setdefault(name, set()).add(module)
                if alias.name.startswith("_") and not alias.name.startswith("__") and module != name:
                    private.append((name, module, alias.name))
    return edges, private


def test_modules_import_each_other_in_one_direction() -> None:
    edges, _ = _package_imports()
    seen: dict[str, int] = {}     # 1: on the current path, 2: done

    def visit(module: str, path: list[str]) -> None:
        seen[module] = 1
        for target in sorted(edges.get(module, ())):
            if seen.get(target) == 1:
                raise AssertionError(f"import cycle: {' -> '.join(path + [module, target])}")
            if target not in seen:
                visit(target, path + [module])
        seen[module] = 2

    for module in sorted(edges):
        if module not in seen:
            visit(module, [])


def test_modules_do_not_import_each_others_private_names() -> None:
    _, private = _package_imports()
    assert len(private) <= 5, private


def test_no_module_binds_a_builtin_name() -> None:
    """No module of the package rebinds a builtin at module scope (an assignment, a def,
    a class or an import): inside the package ``int`` is always int. Public names that
    are builtins (``rearrange.compile``, torch's ``rearrange.float``) are served by a
    module ``__getattr__`` instead."""
    import ast
    import builtins

    names = set(dir(builtins)) - {"__doc__", "__name__", "__spec__", "__loader__",
                                   "__package__", "__build_class__", "__import__"}
    package = pathlib.Path(rearrange.__file__).parent
    found = []
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in tree.body:
            bound: list[str] = []
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                bound = [node.name]
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                bound = [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                bound = [(a.asname or a.name).split(".")[0] for a in node.names]
            found += [f"{path.relative_to(package)}:{node.lineno} {name}"
                      for name in bound if name in names]
    assert not found, found
