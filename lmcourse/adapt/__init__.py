"""Test-time adaptation of a trained model (floor 3: stands on the base modules, corpora and networks).

- :mod:`.cache`: the neural cache; :mod:`.cache_tuning`: its theta, lambda and window, tuned on one pass of hidden states;
- :mod:`.dyneval`: dynamic evaluation, SGD and RMS with decay towards the trained weights.
"""
from .cache import NeuralCache
from .dyneval import DynamicEval

__all__ = ["NeuralCache", "DynamicEval"]
