"""Test-time adaptation of a trained model (floor 3: stands on the base modules, corpora and networks).

Each idea reads in one module, what it needs beside it in its siblings:

- :mod:`.cache`: the neural cache; :mod:`.cache_support`: its checks and ``pointer.py``'s rule; :mod:`.cache_steps`:
  its step interface; :mod:`.cache_tuning`: its theta, lambda and window, tuned on one pass of hidden states;
- :mod:`.dyneval`: dynamic evaluation, SGD and RMS with decay towards the trained weights; :mod:`.dyneval_support`:
  its checks, the papers' settings and the adapting copy; :mod:`.dyneval_steps`: its step interface and drift;
  :mod:`.dyneval_tuning`: its grid search;
- :mod:`.evaluate`: a model alone and with both on top.
"""
from .cache import NeuralCache
from .dyneval import DynamicEval

__all__ = ["NeuralCache", "DynamicEval"]
