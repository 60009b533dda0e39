r"""A fixed-window language model: the last k tokens, embedded side by side, through one hidden layer.

The model that came before recurrent ones, and the one of Karpathy's makemore MLP: it reads exactly the last
``context`` = k tokens and nothing before them,

.. math::

    e_t = [\,E_{x_{t-k+1}};\ \dots;\ E_{x_t}\,] \in \mathbb{R}^{kD}, \qquad
    h_t = \tanh(W e_t + b) \in \mathbb{R}^{H}, \qquad
    p(x_{t+1} \mid x_{\le t}) = \operatorname{softmax}(U h_t + c),

with :math:`E` the word vectors (D numbers each). Before the stream begins the window holds a token of its own,
id ``vocab_size`` (one more row of :math:`E`, which no word uses), so the first positions see fewer words.

**State.** Not a pair of tensors and nothing learned: the ids of the last k tokens read, a (k, B) LongTensor
(its batch dimension is dim 1, so the base class's ``reorder`` serves). Nothing flows back through it, so
``detach_state`` returns it as it is, and reading a stream in chunks gives the numbers of reading it whole.
:math:`h_t` is the vector a neural cache stores.

This module is all there is to the model: it keeps the contract of :mod:`lmcourse.lm` and registers its kind
at its end, and nothing else in the package names it.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import NamedTuple, Optional

import torch
import torch.nn as nn

from ..lm import register_model
from .base import NeuralLM

__all__ = ["WindowConfig", "WindowMLP", "WindowOutput"]


@dataclass
class WindowConfig:
    """Everything that defines a :class:`WindowMLP`; plain types only, so it saves as a dict. ``context``: the
    k tokens it reads; ``emb_size`` D, ``hidden_size`` H; ``dropout`` on :math:`h_t` while training."""

    vocab_size: int
    context: int = 4
    emb_size: int = 16
    hidden_size: int = 64
    dropout: float = 0.0
    init_range: float = 0.1

    def __post_init__(self):
        for name in ("vocab_size", "context", "emb_size", "hidden_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"WindowConfig.{name} must be a positive integer, got {value!r}.")
        p = self.dropout
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p < 1.0:
            raise ValueError(f"WindowConfig.dropout={p!r} is not a dropout probability: give a number in [0, 1).")
        r = self.init_range
        if isinstance(r, bool) or not isinstance(r, (int, float)) or not (math.isfinite(r) and r > 0):
            raise ValueError(f"WindowConfig.init_range must be a finite number > 0, got {r!r}.")

    def as_dict(self) -> dict:
        return asdict(self)


class WindowOutput(NamedTuple):
    """What :meth:`WindowMLP.forward` returns."""

    logits: torch.Tensor  # (T, B, V)
    h: torch.Tensor  # (T, B, H): the hidden layer, before dropout
    state: torch.Tensor  # (k, B): the ids of the last k tokens read


class WindowMLP(NeuralLM):
    """The fixed-window language model (see the module docstring); a :class:`~lmcourse.networks.base.NeuralLM`
    of kind ``"window-mlp"``."""

    kind = "window-mlp"

    def __init__(self, config: WindowConfig):
        super().__init__()
        if not isinstance(config, WindowConfig):
            raise TypeError(f"WindowMLP needs a WindowConfig, got {type(config).__name__}: "
                            "build one with WindowConfig(vocab_size=...).")
        self.config, self.vocab = config, None
        k, D, H, V = config.context, config.emb_size, config.hidden_size, config.vocab_size
        self.name = f"window MLP, {k} tokens x {D}, {H} hidden"
        self.embedding = nn.Embedding(V + 1, D)  # row V: the token before the stream
        self.hidden = nn.Linear(k * D, H)
        self.drop = nn.Dropout(config.dropout)
        self.decoder = nn.Linear(H, V)
        for weight in (self.embedding.weight, self.hidden.weight, self.decoder.weight):
            nn.init.uniform_(weight, -config.init_range, config.init_range)
        nn.init.zeros_(self.hidden.bias)
        nn.init.zeros_(self.decoder.bias)

    def forward(self, x: torch.Tensor, state: Optional[torch.Tensor] = None) -> WindowOutput:
        """Read ``x`` (T, B) after the window ``state`` (k, B) (the start of a stream when None)."""
        state = self.begin(x, state)
        k = self.config.context
        window = torch.cat([state, x])  # (k + T, B): the ids before x, then x
        contexts = window.unfold(0, k, 1)[1:]  # (T, B, k): row t ends with x_t
        e = self.embedding(contexts).flatten(2)  # (T, B, k D)
        h = torch.tanh(self.hidden(e))  # (T, B, H)
        return WindowOutput(self.decoder(self.drop(h)), h, window[-k:])

    def init_state(self, batch_size: int) -> torch.Tensor:
        """A window of the before-the-stream token in every row, on the model's device."""
        device = self.embedding.weight.device
        return torch.full((self.config.context, batch_size), self.config.vocab_size, dtype=torch.long, device=device)

    @staticmethod
    def detach_state(state: torch.Tensor) -> torch.Tensor:
        """Token ids carry no graph: the state as it is."""
        return state


register_model(WindowMLP.kind, lambda settings: WindowMLP(WindowConfig(**settings)), config=WindowConfig)
