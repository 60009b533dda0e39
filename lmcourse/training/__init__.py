"""Training (floor 3: stands on the base modules, :mod:`lmcourse.corpora` and :mod:`lmcourse.networks`).

- :mod:`.trainer`: ``Trainer``, the loop; :mod:`.trainconfig`: ``TrainConfig`` and the run's history;
- :mod:`.callbacks`: the trainer's hooks, its progress bar and its live perplexity plot;
- :mod:`.optim`: SGD, Adam and NT-ASGD; :mod:`.distributed`: several processes with torchrun;
- :mod:`.checkpoint`, :mod:`.rundir`: saving and resuming a run; :mod:`.presets`: the papers' settings.
"""
from .trainconfig import TrainConfig
from .trainer import Trainer

__all__ = ["TrainConfig", "Trainer"]
