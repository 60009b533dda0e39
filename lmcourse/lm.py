r"""One interface for every language model, and the measures that take any of them.

A language model here answers one question about a token stream ``x_0 ... x_{N-1}``:

.. math::  \ell_t = \log p(x_t \mid x_{<t}), \qquad t = 0 \dots N-1,

where the stream is read as if an ``<eos>`` came just before ``x_0`` (every split starts at a
line boundary). So every model scores the same ``N`` tokens and perplexities compare directly.

Two ways in:

- ``score(tokens) -> (N,)`` float64 natural-log probabilities of a whole stream, vectorised;
- step by step, for sampling and beam search::

      state = model.start(batch_size)          # has read the implicit leading <eos>
      logp  = model.next_log_probs(state)      # (B, V): log p(. | what was read)
      state = model.advance(state, x)          # read one token per row, x: (B,)
      state = model.reorder(state, index)      # keep rows `index` (beam search)

The n-gram models, the oracle, the recurrent LM and its cache and dynamic-evaluation wrappers
all implement these. Perplexity and bits per character are defined once, below.
"""
from __future__ import annotations

import math

import torch

from .vocab import Vocab


class LanguageModel:
    """The common interface. Subclasses set ``vocab`` and implement the five methods."""

    vocab: Vocab
    name: str = "model"

    def score(self, tokens: torch.Tensor) -> torch.Tensor:  # (N,) -> (N,)
        raise NotImplementedError

    def start(self, batch_size: int = 1):
        raise NotImplementedError

    def next_log_probs(self, state) -> torch.Tensor:  # (B, V)
        raise NotImplementedError

    def advance(self, state, tokens: torch.Tensor):
        raise NotImplementedError

    def reorder(self, state, index: torch.Tensor):
        raise NotImplementedError


STRINGS = ("Token ids must be integers, got strings: encode the words first with the model's vocabulary, "
           "e.g. model.vocab.encode('the cat sat'.split()).")


def _holds_strings(tokens) -> bool:
    if isinstance(tokens, (str, bytes)):
        return True
    if getattr(tokens, "dtype", None) is not None and getattr(tokens.dtype, "kind", "") in "USO":
        return True  # a NumPy array of strings or objects
    try:
        return any(isinstance(t, (str, bytes)) for t in list(tokens)[:1000])  # only reached on failure
    except TypeError:
        return False


def check_tokens(tokens, vocab_size: int) -> torch.Tensor:
    """Return ``tokens`` as a 1-D LongTensor, or say clearly why it cannot be scored."""
    if isinstance(tokens, (str, bytes)):
        raise TypeError(STRINGS)
    try:
        tokens = torch.as_tensor(tokens)
    except (TypeError, ValueError, RuntimeError, OverflowError):
        if _holds_strings(tokens):
            raise TypeError(STRINGS) from None
        raise TypeError(f"Expected a 1-D tensor or list of integer token ids, got {type(tokens).__name__}: "
                        "encode the text with the model's own vocabulary.") from None
    if tokens.dim() != 1:
        raise ValueError(f"Expected a 1-D stream of token ids, got shape {tuple(tokens.shape)}: flatten it first.")
    if tokens.numel() == 0:
        raise ValueError("The token stream is empty: give at least one token to score.")
    if tokens.dtype.is_floating_point or tokens.dtype.is_complex or tokens.dtype == torch.bool:
        raise TypeError(f"Token ids must be integers, got {tokens.dtype}: pass a LongTensor of ids from vocab.encode.")
    lo, hi = int(tokens.min()), int(tokens.max())
    if lo < 0 or hi >= vocab_size:
        raise ValueError(f"Token id {hi if hi >= vocab_size else lo} is outside the vocabulary of {vocab_size}: "
                         "encode the text with the model's own vocabulary.")
    return tokens.long()


def mean_nll(model: LanguageModel, tokens) -> float:
    """Average negative log-likelihood in nats per token."""
    if not callable(getattr(model, "score", None)):
        raise TypeError(f"Expected a language model with a score(tokens) method, got {type(model).__name__}.")
    logp = model.score(tokens)
    if not torch.isfinite(logp).all():
        return math.inf
    return float(-logp.double().mean())


def perplexity(model: LanguageModel, tokens) -> float:
    r"""Perplexity :math:`\exp(-\frac{1}{N}\sum_t \log p(x_t \mid x_{<t}))`; ``inf`` past the largest float."""
    nll = mean_nll(model, tokens)
    return math.exp(nll) if nll < 709.0 else math.inf


def bits_per_char(model: LanguageModel, tokens) -> float:
    r"""Bits per character :math:`-\frac{1}{N}\sum_t \log_2 p(x_t \mid x_{<t})` for a character model."""
    return mean_nll(model, tokens) / math.log(2)
