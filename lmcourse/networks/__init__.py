"""Neural networks (floor 2: stands on the base modules and :mod:`lmcourse.corpora`).

Named ``networks`` rather than ``nn`` so that ``from lmcourse import networks`` never shadows ``torch.nn``.

- :mod:`.lstm`: the LSTM (and plain RNN) written from its equations;
- :mod:`.dropout`, :mod:`.regularize`: the dropout variants, AR and TAR;
- :mod:`.models`: ``RNNLM`` and ``LMConfig``, the recurrent language model; :mod:`.mos`: the mixture of softmaxes head;
- :mod:`.loss`: the training loss and evaluation; :mod:`.generate`: sampling and beam search;
- :mod:`.gradflow`: gradients through time; :mod:`.bottleneck`: the rank of a softmax's log-probability matrix.
"""
from .models import RNNLM, LMConfig

__all__ = ["LMConfig", "RNNLM"]
