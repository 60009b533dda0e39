r"""``NeuralLM``: what every neural language model gets for free from ``forward`` and ``init_state``.

A model keeping the contract of :mod:`lmcourse.lm` writes ``forward(x, state)``, ``init_state``,
``detach_state``, ``config`` and ``kind``; this base class turns them into the whole
:class:`~lmcourse.lm.LanguageModel` interface:

.. math::  \log p(x_t \mid x_{<t}) = \operatorname{log\,softmax}(z_t)_{x_t}, \qquad
           z_{0..T-1} = \mathrm{forward}(\langle eos \rangle, x_0, \dots, x_{T-2}),

read in chunks of ``bptt`` tokens with the state carried across them (:meth:`NeuralLM.stream`).
The step interface keeps, per row, the model's own state, the scores of the next token and the
last ``h``, so a neural cache reads its keys from the state without knowing the model.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, NamedTuple

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..lm import LanguageModel, check_tokens

__all__ = ["NeuralLM", "NeuralState", "inference", "log_softmax", "map_state"]


def log_softmax(logits: torch.Tensor) -> torch.Tensor:  # (..., V) -> (..., V)
    r""":math:`z_v - \log\sum_u e^{z_u}`, computed in at least float32 precision."""
    return F.log_softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), dim=-1)


@contextmanager
def inference(model: nn.Module):
    """Evaluation mode without gradients; the module's previous train/eval mode comes back on exit."""
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            yield model
    finally:
        model.train(was_training)


def map_state(fn, state):
    """``state`` with ``fn`` applied to every tensor in it (tuples, lists and NamedTuples kept)."""
    if isinstance(state, torch.Tensor):
        return fn(state)
    if isinstance(state, tuple) and hasattr(state, "_fields"):  # a NamedTuple
        return type(state)(*(map_state(fn, s) for s in state))
    if isinstance(state, (list, tuple)):
        return type(state)(map_state(fn, s) for s in state)
    if isinstance(state, dict):
        return {k: map_state(fn, v) for k, v in state.items()}
    return state


class NeuralState(NamedTuple):
    """The step-interface state of a :class:`NeuralLM`, one row per sequence."""

    inner: object  # the model's own state after what was read (init_state's kind)
    log_probs: torch.Tensor  # (B, V): log p(. | what was read)
    logits: torch.Tensor  # (B, V): the forward's scores behind them (log-probabilities for some heads)
    h: torch.Tensor  # (B, E): the vector a neural cache stores for the last position read


class NeuralLM(nn.Module, LanguageModel):
    """Base of the neural language models: subclasses write ``forward``, ``init_state``,
    ``detach_state``, ``config`` and ``kind`` (the contract in :mod:`lmcourse.lm`)."""

    kind: str = ""
    returns_log_probs: bool = False

    def init_state(self, batch_size: int):
        raise NotImplementedError

    def begin(self, x: torch.Tensor, state):
        """``state`` for reading ``x`` (T, B): a fresh one when None; token ids of another shape get one sentence."""
        if x.dim() != 2:
            raise ValueError(f"{type(self).__name__} reads token ids of shape (T, B), got shape {tuple(x.shape)}: "
                             "use x.view(-1, 1) for a single stream.")
        return self.init_state(x.shape[1]) if state is None else state

    def detach_state(self, state):
        raise NotImplementedError

    def num_parameters(self) -> int:
        """Trainable numbers, tied weights counted once."""
        return sum(p.numel() for p in self.parameters())

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    @property
    def eos(self) -> int:
        """The id of ``<eos>`` in ``self.vocab``; every scored stream reads as if preceded by it."""
        if getattr(self, "vocab", None) is None:
            raise ValueError("This model has no vocabulary: "
                             "set model.vocab = corpus.vocab so it knows the id of <eos>.")
        return self.vocab.eos

    # ------------------------------------------------------------------ whole streams

    def stream(self, tokens, bptt: int = 2000) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        r"""Read a stream as :meth:`score` does and yield, chunk by chunk, ``(logits, h)``.

        ``logits`` (t, V) score :math:`x_s` given :math:`x_{<s}` for the chunk's ``t`` positions
        (log-probabilities already when ``returns_log_probs``); ``h`` (t, E) is the vector that
        produced them, the one a neural cache stores. The chunks cover the stream in order; the
        state is carried across them. The cache and dynamic evaluation build on this protocol.
        """
        tokens = check_tokens(tokens, self.config.vocab_size)
        if isinstance(bptt, bool) or not isinstance(bptt, int) or bptt < 1:
            raise ValueError(f"bptt must be a positive integer (the chunk length), got {bptt!r}.")
        tokens = tokens.to(self.device)
        inputs = torch.cat([tokens.new_full((1,), self.eos), tokens[:-1]])  # (N,)
        state = None
        for i in range(0, tokens.numel(), bptt):
            with inference(self):  # entered per chunk, so no mode leaks to the caller between yields
                out = self(inputs[i:i + bptt].view(-1, 1), state)
            state = out.state
            yield out.logits[:, 0], out.h[:, 0]  # (t, V), (t, E)

    def score(self, tokens, bptt: int = 2000) -> torch.Tensor:  # (N,) -> (N,) float64
        r""":math:`\log p(x_t \mid x_{<t})` for every token, state carried across chunks of ``bptt``."""
        tokens = check_tokens(tokens, self.config.vocab_size).to(self.device)
        out = torch.empty(tokens.numel(), dtype=torch.float64, device=self.device)  # (N,): filled in place
        i = 0
        for logits, _ in self.stream(tokens, bptt):
            t = logits.size(0)
            out[i:i + t] = log_softmax(logits).gather(1, tokens[i:i + t].view(-1, 1)).squeeze(1)  # (t,)
            i += t
        return out.cpu()

    # ------------------------------------------------------------------ step by step

    def start(self, batch_size: int = 1) -> NeuralState:
        """A state that has read the implicit leading ``<eos>`` in each of ``batch_size`` rows."""
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}.")
        empty = NeuralState(self.init_state(batch_size), None, None, None)
        return self.advance(empty, torch.full((batch_size,), self.eos, dtype=torch.long))

    def next_log_probs(self, state: NeuralState) -> torch.Tensor:  # (B, V)
        return state.log_probs

    def step_outputs(self, state: NeuralState) -> tuple[torch.Tensor, torch.Tensor]:
        """``(logits (B, V), h (B, E))`` behind ``next_log_probs``: what a neural cache reads at a step."""
        return state.logits, state.h

    def advance(self, state: NeuralState, x: torch.Tensor) -> NeuralState:
        """Read one token per row, ``x`` (B,)."""
        x = torch.as_tensor(x, device=self.device).long().view(1, -1)  # (1, B)
        with inference(self):
            out = self(x, state.inner)
        logits = out.logits[0]  # (B, V)
        return NeuralState(out.state, log_softmax(logits), logits, out.h[0])

    def reorder(self, state: NeuralState, index: torch.Tensor) -> NeuralState:
        """Keep rows ``index`` (B',): dim 1 of every tensor of the model's state, dim 0 of the rest."""
        index = torch.as_tensor(index, device=self.device).long()
        inner = map_state(lambda s: s.index_select(1, index), state.inner)
        rows = (t.index_select(0, index) for t in state[1:])
        return NeuralState(inner, *rows)
