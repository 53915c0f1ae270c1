"""einops' own tests of einops/tests/test_packing.py, run against this package (see einops_shim)."""

from einops_shim import load

globals().update(load("test_packing"))
