"""The course itself (floor 5: stands on everything but the command line).

- :mod:`.cmp`: the verdict of an on-screen derivation against the package;
- :mod:`.results`: the results table that every lesson adds its rows to;
- :mod:`.exercises`: the exercises' checks.
"""
from .cmp import cmp

__all__ = ["cmp"]
