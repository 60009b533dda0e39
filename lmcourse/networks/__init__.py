"""Neural networks (floor 2: stands on the base modules and :mod:`lmcourse.corpora`).

Named ``networks`` rather than ``nn`` so that ``from lmcourse import networks`` never shadows ``torch.nn``.

- :mod:`.lstm`: the LSTM (and plain RNN) written from its equations;
- :mod:`.dropout`, :mod:`.regularize`: the dropout variants, AR and TAR;
- :mod:`.base`: ``NeuralLM``, the base of every neural LM (the contract of :mod:`lmcourse.lm`);
- :mod:`.models`: ``RNNLM`` and ``LMConfig``, the recurrent language model; :mod:`.mos`: the mixture of softmaxes head;
- :mod:`.attention`: causal self-attention, from its equations and fused; :mod:`.transformer`: ``TransformerLM``;
- :mod:`.loss`: the training loss and evaluation; :mod:`.generate`: sampling and beam search;
- :mod:`.gradflow`: gradients through time; :mod:`.bottleneck`: the rank of a softmax's log-probability matrix.
"""
from .base import NeuralLM
from .models import RNNLM, LMConfig  # importing a model's module registers its kind (lmcourse.lm.register_model)
from .transformer import TransformerConfig, TransformerLM

__all__ = ["LMConfig", "NeuralLM", "RNNLM", "TransformerConfig", "TransformerLM"]
