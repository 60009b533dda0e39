"""Neural networks (floor 2: stands on the base modules and :mod:`lmcourse.corpora`).

Named ``networks`` rather than ``nn`` so that ``from lmcourse import networks`` never shadows ``torch.nn``.

- :mod:`.lstm`: the LSTM (and plain RNN) written from its equations;
- :mod:`.dropout`, :mod:`.regularize`: the dropout variants, AR and TAR;
- :mod:`.base`: ``NeuralLM``, the base of every neural LM (the contract of :mod:`lmcourse.lm`);
- :mod:`.models`: ``RNNLM`` and ``LMConfig``, the recurrent language model; :mod:`.heads`: its softmax head and the
  registry of heads; :mod:`.mos`: the mixture of softmaxes head;
- :mod:`.attention`: causal self-attention, from its equations and fused; :mod:`.transformer`: ``TransformerLM``;
- :mod:`.loss`: the training loss and evaluation; :mod:`.generate`: sampling and beam search;
- :mod:`.gradflow`: gradients through time; :mod:`.bottleneck`: the rank of a softmax's log-probability matrix.

Importing the package imports every module in it (:data:`MODULES`, found by walking the folder), so a model's
module registers its kind (:func:`lmcourse.lm.register_model`) without a line here: adding a model is adding
its module.
"""
import importlib
import pkgutil

from .base import NeuralLM
from .models import RNNLM, LMConfig
from .transformer import TransformerConfig, TransformerLM

MODULES = tuple(importlib.import_module(f"{__name__}.{m.name}")
                for m in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name))

__all__ = ["LMConfig", "NeuralLM", "RNNLM", "TransformerConfig", "TransformerLM", "MODULES"]
