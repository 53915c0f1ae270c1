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
import rearrange as ra

x = np.zeros((2, 3))
threads: int = ra.get_num_threads()
wrong: str = ra.get_num_threads()
reveal_type(ra.rearrange)
reveal_type(ra.cache_info().plans.misses)
'''


@pytest.mark.skipif(shutil.which("mypy") is None and not (
    pathlib.Path(sys.executable).parent / "mypy").exists(), reason="mypy is not installed")
def test_a_type_checker_sees_the_annotations(tmp_path: pathlib.Path) -> None:
    """Without py.typed, mypy treats the package as untyped (every name Any) and would
    report neither the wrong assignment nor the signature."""
    script = tmp_path / "user.py"
    script.write_text(USER_SCRIPT)
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental", "--follow-imports=silent",
         "--cache-dir", str(tmp_path / ".mypy_cache"), str(script)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path)
    out = result.stdout
    assert 'Incompatible types in assignment (expression has type "int", variable has type "str")' in out, out
    assert 'Revealed type is "def (tensor: Any, pattern: builtins.str' in out or \
        'Revealed type is "def (tensor: Any, pattern: str' in out, out
    assert 'Revealed type is "int"' in out or 'Revealed type is "builtins.int"' in out, out
    assert "missing library stubs or py.typed marker" not in out, out


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
