"""Layers wrapping the operations for deep-learning frameworks: ``rearrange.layers.torch``
(importable when torch is installed)."""
