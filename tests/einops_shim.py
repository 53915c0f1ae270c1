"""Runs einops' own test suite (shipped in the einops wheel, ``einops/tests``) against
this package.

Each einops test module is read from the installed wheel and executed as a fresh module
whose ``from einops import ...`` / ``from einops.einops import ...`` lines import from
:data:`COMPAT` instead: our ``rearrange``, ``reduce``, ``repeat``, ``einsum``, ``pack``,
``unpack`` and ``parse_shape``, with our errors re-raised as a class that is both
einops' ``EinopsError`` and our own error class (so ``pytest.raises(EinopsError)`` and
``pytest.raises(ValueError)`` both see what they expect). Test utilities
(``einops.tests``) and einops' private helpers are einops' own. einops itself is left
untouched, so the other test files can keep using it as the oracle.

Tests that cannot apply are skipped with the reason, listed in :data:`NOT_APPLICABLE`
(and in docs/coming-from-einops.md).
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import sys
import types
from typing import Any, Callable

os.environ.setdefault("EINOPS_TEST_BACKENDS", "numpy,torch")

import einops  # noqa: E402
import pytest  # noqa: E402

import rearrange as ra  # noqa: E402

_mapped_classes: dict[type, type] = {}


def _einops_error_for(error: ra.RearrangeError) -> Exception:
    cls = type(error)
    mapped = _mapped_classes.get(cls)
    if mapped is None:
        mapped = _mapped_classes[cls] = type(f"Einops{cls.__name__}", (einops.EinopsError, cls), {})
    return mapped(str(error))


def _as_einops(function: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(function)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except ra.RearrangeError as error:
            raise _einops_error_for(error) from error
    return call


#: The names einops' tests import from einops, pointed at ours.
COMPAT = types.ModuleType("einops_compat")
COMPAT.__dict__.update(
    {name: getattr(einops, name) for name in dir(einops) if not name.startswith("__")})
COMPAT.__dict__.update(
    {name: getattr(einops.einops, name) for name in dir(einops.einops) if name.startswith("_")
     and not name.startswith("__")})
for _name in ("rearrange", "reduce", "repeat", "einsum", "pack", "unpack", "parse_shape"):
    # looked up at call time: pack, einsum, ... are imported on first use
    setattr(COMPAT, _name, _as_einops(functools.partial(
        lambda name, *args, **kwargs: getattr(ra, name)(*args, **kwargs), _name)))
sys.modules["einops_compat"] = COMPAT


def _torch_layers() -> types.ModuleType:
    """Our torch layers (Rearrange, Reduce, EinMix) where einops' tests ask for einops'."""
    import einops.layers.torch as theirs

    from rearrange.layers import torch as ours

    layers = types.ModuleType("einops_compat_torch_layers")
    layers.__dict__.update({k: v for k, v in vars(theirs).items() if not k.startswith("__")})
    layers.Rearrange, layers.Reduce, layers.EinMix = ours.Rearrange, ours.Reduce, ours.EinMix
    sys.modules["einops_compat_torch_layers"] = layers
    return layers


class _EinmixDebugger:
    """einops' ``_EinmixDebugger`` (its EinMix plan, no framework) over our plan."""

    def __init__(self, pattern: str, weight_shape: str, bias_shape: str | None = None,
                 **axes_lengths: Any) -> None:
        from rearrange.layers.mixing import plan_einmix

        plan = _as_einops(plan_einmix)(pattern, weight_shape, bias_shape, axes_lengths)
        self.pre_reshape_pattern = plan.pre_reshape_pattern
        self.pre_reshape_lengths = plan.pre_reshape_lengths
        self.post_reshape_pattern = plan.post_reshape_pattern
        self.post_reshape_lengths = {} if plan.post_reshape_pattern is not None else None
        self.einsum_pattern = plan.einsum_pattern
        self.saved_weight_shape = list(plan.weight_shape)
        self.saved_bias_shape = None if plan.bias_shape is None else list(plan.bias_shape)


EINMIX = types.ModuleType("einops_compat_einmix")
EINMIX._EinmixDebugger = _EinmixDebugger  # type: ignore[attr-defined]
sys.modules["einops_compat_einmix"] = EINMIX


def _use_our_torch_layers() -> None:
    from einops import _backends

    layers = _torch_layers()
    _backends.TorchBackend.layers = lambda self: layers

#: einops tests that cannot apply to this package, with the reason. Keyed by
#: (einops test module, test function name).
_INTERNAL = "tests einops' own internals, not its public operations"
_SYMBOLIC_ONLY = ("loops over symbolic backends only (tensorflow, keras); none is tested, so "
                     "it would pass without calling anything")
NOT_APPLICABLE: dict[tuple[str, str], str] = {
    ("test_parsing", "test_anonymous_axes"): _INTERNAL + " (einops.parsing.ParsedExpression)",
    ("test_parsing", "test_elementary_axis_name"): _INTERNAL + " (einops.parsing)",
    ("test_parsing", "test_invalid_expressions"): _INTERNAL + " (einops.parsing.ParsedExpression)",
    ("test_parsing", "test_parse_expression"): _INTERNAL + " (einops.parsing.ParsedExpression)",
    ("test_ops", "test_enumerating_directions"): _INTERNAL + " (_enumerate_directions)",
    ("test_other", "test_optimize_transformations_numpy"): _INTERNAL + " (_optimize_transformation)",
    ("test_other", "test_doctests_examples"): "runs einops' docstrings against einops itself; "
    "this package's docs are doctested instead",
    ("test_other", "test_backends_installed"): _INTERNAL + " (its backend registry)",
    ("test_other", "test_is_float_type"): _INTERNAL + " (backend.is_float_type)",
    ("test_einsum", "test_functional_errors"): "expects NotImplementedError for compositions "
    "and unit axes in einsum patterns, which this package supports; its other checks are "
    "in tests/test_einsum.py",
    ("test_layers", "test_torch_layers_scripting"): "TorchScript (torch.jit.script) compiles "
    "the layer's forward from source and cannot call the planner; torch.compile, PyTorch's "
    "replacement for it, works (tests/test_torch_backend.py)",
    ("test_other", "test_einops_threading"): "runs einops itself in a subprocess; our "
    "thread-safety test is tests/test_api.py::test_threads_share_the_caches_safely",
    ("test_ops", "test_reduction_symbolic"): _SYMBOLIC_ONLY,
    ("test_ops", "test_tiling_symbolic"): _SYMBOLIC_ONLY,
    ("test_ops", "test_repeat_symbolic"): _SYMBOLIC_ONLY,
    ("test_layers", "test_rearrange_symbolic"): _SYMBOLIC_ONLY,
    ("test_layers", "test_reduce_symbolic"): _SYMBOLIC_ONLY,
}

#: Tests that fail for a known, open reason (strict: they must start passing when fixed).
PENDING: dict[tuple[str, str], str] = {}

#: Tests marked ``slow`` (left out of the quick tier, ``pytest -m "not slow"``): each
#: compiles with torch.compile for tens of seconds. tests/test_torch_compile.py keeps a
#: quick representative.
SLOW = {("test_other", "test_torch_compile_for_functions"),
        ("test_other", "test_torch_compile_for_layers"),
        ("test_ops", "test_torch_compile_with_dynamic_shape")}

_IMPORT = re.compile(r"^from einops(?:\.einops|\.packing)? import ", re.MULTILINE)
_TORCH_LAYERS_IMPORT = re.compile(r"^(\s*)from einops\.layers\.torch import ", re.MULTILINE)
_EINMIX_IMPORT = re.compile(r"^(\s*)from einops\.layers\._einmix import ", re.MULTILINE)


def load(module: str) -> dict[str, Any]:
    """The test functions of ``einops.tests.<module>``, importing our operations."""
    spec = importlib.util.find_spec(f"einops.tests.{module}")
    assert spec is not None and spec.origin is not None
    with open(spec.origin, encoding="utf-8") as file:
        source = _IMPORT.sub("from einops_compat import ", file.read())
    source = _TORCH_LAYERS_IMPORT.sub(r"\1from einops_compat_torch_layers import ", source)
    source = _EINMIX_IMPORT.sub(r"\1from einops_compat_einmix import ", source)
    _use_our_torch_layers()
    copy = types.ModuleType(f"einops_suite_{module}")
    copy.__file__ = spec.origin
    copy.__package__ = "einops.tests"  # its relative imports are einops' own
    sys.modules[copy.__name__] = copy  # dataclasses look their module up there
    exec(compile(source, spec.origin, "exec"), copy.__dict__)  # noqa: S102 - einops' own tests
    namespace = copy.__dict__
    tests = {}
    for name, value in namespace.items():
        if name.startswith("test") and getattr(value, "__module__", None) == copy.__name__:
            reason = NOT_APPLICABLE.get((module, name))
            pending = PENDING.get((module, name))
            if reason:
                value = pytest.mark.skip(reason=reason)(value)
            elif pending:
                value = pytest.mark.xfail(reason=pending, strict=True)(value)
            if (module, name) in SLOW:
                value = pytest.mark.slow(value)
            tests[name] = value
    return tests
