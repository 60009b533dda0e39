r"""Dynamic evaluation one token at a time (the step interface: sampling, beam search), along a stream (the weights'
drift from :math:`\varphi_0`), and what the wrapper passes through from its model.

In the step interface every row holds its own weights. Once a row has been given the ``bptt`` targets of a
segment, that segment is differentiated from its start state and the row's weights updated, exactly as
:meth:`~lmcourse.adapt.dyneval.DynamicEval.score` does, so ``start(1)`` + ``advance`` reproduces ``score`` token by
token. Rows are independent (samples, beams); each costs one forward per token and one weight copy per finished
segment.
"""
from __future__ import annotations

import warnings
from typing import NamedTuple

import torch
from torch.func import functional_call

from ..lm import check_tokens
from ..networks.base import log_softmax
from ..progress import bar
from .dyneval_support import adaptation_copy, positive_int, segment_nll

__all__ = ["DynamicState", "DynamicSteps"]


class _RowState(NamedTuple):
    """One row of the step interface: its own weights and the segment it is reading."""

    theta: tuple  # this row's weights, never written in place
    start: object  # the model's state before the segment's first input (batch 1)
    inputs: tuple  # token ids read in the current segment
    hidden: object  # its state after reading them


class DynamicState(NamedTuple):
    rows: tuple  # one _RowState per row
    log_probs: torch.Tensor  # (B, V)
    logits: torch.Tensor  # (B, V): the head's output before the softmax
    h: torch.Tensor  # (B, E_last): the last layer's output that produced them


class DynamicSteps:
    """The step interface, :meth:`drift` and the model's ``config``, ``device`` and ``eos`` for a wrapper with
    ``model``, ``method``, ``lr``, ``bptt``, ``steps(names, params)``, ``_update(params, grads, steps)``,
    ``_segments(tokens)`` and ``_theta_0(names)`` (those of :class:`~lmcourse.adapt.dyneval.DynamicEval`)."""

    _stepper = None

    @property
    def config(self):
        return self.model.config

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def eos(self) -> int:
        return self.model.eos

    def drift(self, tokens, every: int = 20, progress=None) -> tuple[torch.Tensor, torch.Tensor]:
        r"""``(log p (N,), d (S,))``: the scores of ``score``, and the distance of the weights from
        :math:`\varphi_0`, :math:`d = \lVert \varphi - \varphi_0 \rVert_2` over every weight, after
        every ``every``-th segment (``d[k]`` after segment ``(k + 1) * every``)."""
        every = positive_int(every, "every")
        tokens = check_tokens(tokens, self.config.vocab_size).to(self.device)
        log_p, d, i = torch.empty(tokens.numel(), dtype=torch.float64), [], 0  # (N,)
        theta_0 = None
        progress_bar = bar(total=tokens.numel(), desc=f"dynamic ({self.method})", unit="tok", unit_scale=True,
                           enabled=progress)
        for k, (logits, _, names, params) in enumerate(self._segments(tokens), start=1):
            t = logits.size(0)
            progress_bar.update(t)
            log_p[i:i + t] = log_softmax(logits).gather(1, tokens[i:i + t].view(-1, 1)).squeeze(1).cpu()  # (t,)
            i += t
            if k % every == 0:
                theta_0 = theta_0 or self._theta_0(names)
                with torch.no_grad():
                    d.append(float(sum(((p - p0) ** 2).sum() for p, p0 in zip(params, theta_0)).sqrt()))
        progress_bar.close()
        return log_p, torch.tensor(d, dtype=torch.float64)

    # ------------------------------------------------------------ step interface

    def _step_net(self):
        if self._stepper is None:
            net = adaptation_copy(self.model)
            names, params = zip(*net.named_parameters())
            theta_0 = tuple(p.detach().clone() for p in params)  # owned tensors, never views (see _read)
            self._stepper = (net, list(names), self.steps(names, params), theta_0)
        return self._stepper

    def _read(self, theta: tuple, hidden: list, x: torch.Tensor):
        """Run the model with weights ``theta`` on ids ``x`` (t, 1) from ``hidden`` -> its output.

        On CUDA, ``nn.LSTM`` moves substituted weights into one cuDNN block with ``set_``, which torch
        refuses on a ``.detach()`` view: every ``theta`` handed here is a tensor of its own.
        """
        net, names, _, _ = self._step_net()
        with warnings.catch_warnings():  # cuDNN: substituted weights are not one flat block
            warnings.filterwarnings("ignore", message=".*contiguous chunk of memory.*")
            return functional_call(net, dict(zip(names, theta)), (x, hidden))

    def _adapt(self, row: _RowState, target: int) -> tuple:
        """The weights after the segment ``row.inputs`` whose last target is ``target``."""
        _, _, steps, _ = self._step_net()
        x = torch.tensor(row.inputs, device=self.device).view(-1, 1)  # (t, 1)
        y = torch.tensor(row.inputs[1:] + (target,), device=self.device).view(-1, 1)  # (t, 1)
        new = tuple(w.clone().requires_grad_(True) for w in row.theta)  # copies, not views: row.theta is kept
        with torch.enable_grad():
            grads = torch.autograd.grad(segment_nll(self._read(new, row.start, x).logits, y), new)
        with torch.no_grad():
            self._update(new, grads, steps)
        return tuple(theta.requires_grad_(False) for theta in new)

    def start(self, batch_size: int = 1) -> DynamicState:
        """Every row at phi_0, having read the implicit leading ``<eos>``."""
        positive_int(batch_size, "batch_size")
        net, _, _, theta = self._step_net()
        zeros = net.init_state(1)
        x = torch.full((1, 1), self.eos, dtype=torch.long, device=self.device)
        with torch.no_grad():
            out = self._read(theta, zeros, x)
        row = _RowState(theta, zeros, (self.eos,), out.state)
        logits, h = out.logits[0].expand(batch_size, -1), out.h[0].expand(batch_size, -1)  # (B, V), (B, E)
        return DynamicState((row,) * batch_size, log_softmax(logits), logits.clone(), h.clone())

    def next_log_probs(self, state: DynamicState) -> torch.Tensor:  # (B, V)
        return state.log_probs

    def step_outputs(self, state: DynamicState) -> tuple[torch.Tensor, torch.Tensor]:
        """``(logits (B, V), h (B, E_last))`` behind ``next_log_probs``: what a neural cache reads at a step."""
        return state.logits, state.h

    def advance(self, state: DynamicState, x) -> DynamicState:
        """Read one token per row, ``x`` (B,); a row that completes a segment adapts first."""
        x = torch.as_tensor(x).long().view(-1).tolist()
        if len(x) != len(state.rows):
            raise ValueError(f"advance got {len(x)} tokens for {len(state.rows)} rows: give one token per row.")
        rows, logits, h = [], [], []
        for row, token in zip(state.rows, x):  # rows have their own weights: one at a time
            if len(row.inputs) == self.bptt:
                row = _RowState(self._adapt(row, token), row.hidden, (), row.hidden)
            with torch.no_grad():
                out = self._read(row.theta, row.hidden, torch.tensor([[token]], device=self.device))
            rows.append(_RowState(row.theta, row.start, row.inputs + (token,), out.state))
            logits.append(out.logits[0, 0])
            h.append(out.h[0, 0])
        logits = torch.stack(logits)  # (B, V)
        return DynamicState(tuple(rows), log_softmax(logits), logits, torch.stack(h))

    def reorder(self, state: DynamicState, index) -> DynamicState:
        """Keep rows ``index`` (B',); rows share weights safely, since they are never written in place."""
        index = torch.as_tensor(index).long().view(-1)
        rows = tuple(state.rows[i] for i in index.tolist())
        pick = index.to(state.log_probs.device)
        return DynamicState(rows, *(t.index_select(0, pick) for t in (state.log_probs, state.logits, state.h)))
