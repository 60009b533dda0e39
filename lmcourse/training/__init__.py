"""Training (floor 3: stands on the base modules, :mod:`lmcourse.corpora` and :mod:`lmcourse.networks`).

- :mod:`.trainer`: ``Trainer``, the loop; :mod:`.trainconfig`: ``TrainConfig`` and the run's history;
- :mod:`.losses`: the divergence check and the epoch's mean losses;
- :mod:`.settings`: a run's settings in the config classes' field names, and the one adapter to the configs and
  a fresh model of any kind; :mod:`.compat`: records that name no model kind hold the recurrent LM;
- :mod:`.compare`: many runs in one live figure;
- :mod:`.callbacks`: the trainer's hooks, its progress bar and its live perplexity plot;
- :mod:`.optim`: SGD, Adam and NT-ASGD; :mod:`.distributed`: several processes with torchrun;
- :mod:`.checkpoint`: saving and loading any registered model; :mod:`.rundir`: the run's folder;
  :mod:`.lock`: one run per folder; :mod:`.resume`: exact resume; :mod:`.presets`: the papers' settings,
  and any registered kind's defaults (uncited).
"""
from .trainconfig import TrainConfig
from .trainer import Trainer

__all__ = ["TrainConfig", "Trainer"]
