"""Counting models (floor 2: stands on the base modules and :mod:`lmcourse.corpora`).

- :mod:`.counts`: vectorised n-gram counting, continuation counts and discounts;
- :mod:`.model`: ``NGramLM``, from maximum likelihood to modified Kneser-Ney, behind the one interface.
"""
from .model import NGramLM

__all__ = ["NGramLM"]
