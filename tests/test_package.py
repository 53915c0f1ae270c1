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
