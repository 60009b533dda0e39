r"""The heads of the recurrent language model: what turns the last layer's output into scores over the words.

A head is a small module ``forward(g (T, B, E_last)) -> logits (T, B, V)``. ``softmax`` (here) is a linear
decoder; other heads register themselves with :func:`register_head` (the mixture of softmaxes,
:mod:`lmcourse.networks.mos`) and may return log-probabilities, which ``log_softmax`` leaves unchanged.
:class:`~lmcourse.networks.models.LMConfig` names a head by its registered name.
"""
from __future__ import annotations

from typing import Callable, Optional

import torch
import torch.nn as nn

__all__ = ["SoftmaxHead", "up_map", "HEADS", "register_head", "known_head", "head_names", "build_head"]


class SoftmaxHead(nn.Module):
    r"""The linear decoder :math:`z_t = W g_t + b`, with :math:`W` optionally the embedding matrix.

    With ``head_size`` :math:`d`, the output first goes through a linear map without bias,
    :math:`z_t = W (P g_t) + b` with :math:`P` (d, in_size): logits of rank at most :math:`d` whatever
    the width of the network before it. When the word vectors are wider than :math:`d` (tied to an
    embedding of E > d numbers, or ``vector_size`` > d), they are read through a learned map
    :math:`U` (E, d): :math:`z_t = W (U P g_t) + b`, still of rank at most :math:`d`."""

    def __init__(self, in_size: int, vocab_size: int, init_range: float, tied_weight: Optional[nn.Parameter] = None,
                 head_size: Optional[int] = None, vector_size: Optional[int] = None):
        super().__init__()
        d = in_size if head_size is None else head_size
        width = tied_weight.shape[1] if tied_weight is not None else (vector_size or d)  # the word vectors' size
        self.project = nn.Identity() if head_size is None else nn.Linear(in_size, head_size, bias=False)
        self.up = up_map(d, width)
        self.decoder = nn.Linear(width, vocab_size)
        nn.init.uniform_(self.decoder.weight, -init_range, init_range)
        nn.init.zeros_(self.decoder.bias)
        if tied_weight is not None:
            self.decoder.weight = tied_weight  # (V, E): one matrix for input and output

    def forward(self, g: torch.Tensor) -> torch.Tensor:  # (T, B, L) -> (T, B, V)
        return self.decoder(self.up(self.project(g)))


def up_map(d: int, width: int) -> nn.Module:
    r"""The map :math:`U` (width, d) through which a head of dimension :math:`d` reads wider word vectors
    (logits :math:`W U h`, still of rank at most :math:`d`); the identity when width = d."""
    return nn.Identity() if width == d else nn.Linear(d, width, bias=False)


HeadFactory = Callable[[object, nn.Embedding, int], nn.Module]  # (config, embedding, in_size) -> head
HEADS: dict[str, HeadFactory] = {}


def register_head(name: str, factory: HeadFactory) -> None:
    """Make ``LMConfig(head=name)`` build ``factory(config, embedding, in_size)``."""
    HEADS[name] = factory


def _softmax_head(config, embedding: nn.Embedding, in_size: int) -> nn.Module:
    tied = embedding.weight if config.tie else None
    return SoftmaxHead(in_size, config.vocab_size, config.init_range, tied, config.head_size, config.vector_size)


register_head("softmax", _softmax_head)


def known_head(name: str) -> bool:
    """True when ``name`` is a registered head."""
    return name in HEADS


def head_names() -> list:
    """Every head ``LMConfig.head`` may name."""
    return sorted(HEADS)


def build_head(config, embedding: nn.Embedding, in_size: int) -> nn.Module:
    """The head named by ``config.head`` (an :class:`~lmcourse.networks.models.LMConfig`)."""
    if not known_head(config.head):
        raise ValueError(f"LMConfig.head={config.head!r} is unknown: use one of {', '.join(head_names())}.")
    return HEADS[config.head](config, embedding, in_size)
