"""einops' own tests of einops/tests/test_other.py, run against this package (see einops_shim)."""

from einops_shim import load

globals().update(load("test_other"))
