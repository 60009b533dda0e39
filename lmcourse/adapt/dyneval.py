r"""Dynamic evaluation: a trained model keeps learning from the text it is scoring.

The evaluation stream is cut into segments :math:`s_1, s_2, \dots` of ``bptt`` tokens, read in
order with the model's state carried across them (Krause et al. 2018, Section 3). For each segment:

1. the model, with its *current* weights :math:`\theta`, predicts every token of :math:`s_i`;
   these log-probabilities are recorded first, so every number is a genuine prediction;
2. :math:`g = \nabla_\theta L(s_i)`, the gradient of the segment's mean negative log-likelihood;
3. the weights move towards the text just read (:math:`\theta_0` are the trained weights):

   - ``rms`` (Krause et al. 2018, Section 5):
     :math:`\theta \leftarrow \theta - \eta\, g / (\mathrm{MS} + \epsilon) + \lambda\, r \odot (\theta_0 - \theta)`,
     with :math:`\mathrm{MS}` the root-mean-square gradient measured on the training text
     (:func:`gradient_stats`) and the decay rates :math:`r = \min(\mathrm{MS} / \overline{\mathrm{MS}}, 1/\lambda)`,
     :math:`\overline{\mathrm{MS}}` the mean over parameter tensors of each tensor's mean MS;
   - ``sgd`` (Mikolov et al. 2010): :math:`\theta \leftarrow \theta - \eta\, g + \lambda (\theta_0 - \theta)`;
     :math:`\lambda = 0` is plain SGD on the test stream.

Dropout is off throughout. cuDNN refuses the backward pass of an LSTM in evaluation mode (the
reason the reference code broke on later PyTorch versions), so the adapting copy runs with every
module in evaluation mode *except* the ``nn.LSTM`` layers, which are in training mode with their
own dropout set to 0. An ``nn.LSTM`` reads its mode for two things only, the dropout between
stacked layers (zero here) and cuDNN's permission to differentiate, so the numbers are those of
evaluation mode, cuDNN keeps its fast kernels, and no other module (embedding dropout, locked
dropout, weight drop, a mixture-of-softmaxes head) ever sees training mode.

The wrapped model is never changed: every :meth:`DynamicEval.score` (and every :meth:`DynamicEval.stream`)
adapts its own copy, starting from :math:`\theta_0`, so two calls give the same numbers.
"""
from __future__ import annotations

import copy
import math
import numbers
import warnings
from dataclasses import dataclass
from typing import Iterator, NamedTuple, Optional, Sequence

import torch
import torch.nn as nn
from torch.func import functional_call

from ..corpora.data import batchify, bptt_batches
from ..lm import LanguageModel, check_neural, check_tokens, mean_nll, perplexity_from_nll
from ..networks.base import log_softmax
from ..progress import bar, progress_enabled

__all__ = ["METHODS", "DEFAULTS", "PAPER_SETTINGS", "GradientStats", "gradient_stats", "adaptation_copy",
           "decay_rates", "Step", "make_step", "update_", "from_old_hyperparameters", "DynamicEval", "Grid",
           "grid_search", "paper_grid"]

METHODS = ("rms", "sgd")
MAX_LR = 100.0  # the largest learning rate accepted: far above any useful one (the papers' are below 1)
# The reference code's defaults for ``rms`` at bptt 5 (dynamic-evaluation code, dynamiceval.py).
DEFAULTS = dict(lr=5e-5, decay=2e-3, eps=2e-5)
# Settings published in the *old* scaling of the first version of the reference code; convert them
# with from_old_hyperparameters (Krause et al. 2018 for AWD-LSTM, dynamic-evaluation code README;
# Yang et al. 2018 for MoS, mos code README).
PAPER_SETTINGS = {
    "AWD-LSTM": dict(lr=0.002, decay=0.02, eps=0.001),
    "MoS, ptb": dict(lr=0.002, decay=0.075, eps=0.001),
    "MoS, wikitext-2": dict(lr=0.002, decay=0.02, eps=0.002),
}


# ----------------------------------------------------------------------------- checks

def _number(value, name: str, low: float, high: float = math.inf, low_open: bool = False,
            high_closed: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}.")
    value = float(value)
    if value < low or (low_open and value == low) or value > high or (value == high and not high_closed):
        interval = f"{'(' if low_open else '['}{low:g}, {high:g}{']' if high_closed else ')'}"
        raise ValueError(f"{name}={value:g} is outside {interval}: " + {
            "lr": ("a step moves each weight by about lr times its (scaled) gradient, so 0 leaves the weights as "
                   f"trained and a rate above {MAX_LR:g} only wrecks them; the papers' rates are below 1."),
            "decay": "a decay of 1 or more would overshoot theta_0; use 0 <= decay < 1.",
            "eps": "eps keeps g / (MS + eps) finite where MS is 0; give a small positive number.",
        }[name])
    return value


def _positive_int(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}.")
    return value


def _check_model(model) -> None:
    check_neural(model, "dyneval")


# ----------------------------------------------------------------- the adapting copy

def adaptation_copy(model: nn.Module) -> nn.Module:
    """A private copy of ``model`` that can be differentiated with every dropout off, on CPU and cuDNN.

    Evaluation mode everywhere except torch's recurrent layers (``nn.RNNBase``: LSTM, GRU, RNN),
    which get training mode and dropout 0 (see the module docstring for why that leaves the numbers
    unchanged). Any submodule with ``flatten_parameters`` gets its copied weights made one cuDNN
    block again (a no-op on the CPU).
    """
    vocab = getattr(model, "vocab", None)
    net = copy.deepcopy(model, memo={} if vocab is None else {id(vocab): vocab})
    net.eval()
    for module in net.modules():
        if isinstance(module, nn.RNNBase):
            module.dropout = 0.0
            module.train()
        if callable(getattr(module, "flatten_parameters", None)):
            module.flatten_parameters()
    for p in net.parameters():
        p.requires_grad_(True)
    return net


def _segment_nll(out_logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean negative log-likelihood of the targets: logits (t, B, V), targets (t, B) -> ()."""
    logp = log_softmax(out_logits)  # (t, B, V)
    return -logp.gather(-1, targets.unsqueeze(-1)).mean()


# ------------------------------------------------------------------- gradient statistics

class GradientStats(dict):
    """``{parameter name: MS}``, plus ``n_segments``, the number of segments it averages over."""

    n_segments: int = 0


def gradient_stats(model: nn.Module, tokens, batch_size: int = 100, bptt: int = 5,
                   progress: Optional[bool] = None) -> GradientStats:
    r"""Root-mean-square gradients on the training text (Krause et al. 2018, Section 5).

    ``tokens`` is batchified into ``batch_size`` columns as training does, walked in segments of
    ``bptt`` with the state carried and dropout off, and for each segment :math:`k` the gradient
    :math:`g_k` of its mean cross-entropy is taken. Returns, per parameter (``named_parameters()``
    names), :math:`\mathrm{MS} = \sqrt{\frac{1}{K}\sum_k g_k^2}`. The model is not changed.
    """
    _check_model(model)
    batch_size, bptt = _positive_int(batch_size, "batch_size"), _positive_int(bptt, "bptt")
    tokens = check_tokens(tokens, model.config.vocab_size)
    net = adaptation_copy(model)
    names, params = zip(*net.named_parameters())
    source = batchify(tokens.to(params[0].device), batch_size)  # (n, B)
    squares = [torch.zeros_like(p) for p in params]
    batches = bptt_batches(source, bptt)
    if progress_enabled(progress):
        from ..progress import tqdm
        batches = tqdm(batches, total=math.ceil((source.size(0) - 1) / bptt), desc="gradient statistics",
                       unit="segment", dynamic_ncols=True)
    state, count = None, 0
    for x, y in batches:  # x, y: (t, B)
        with torch.enable_grad():
            out = net(x, state)
            grads = torch.autograd.grad(_segment_nll(out.logits, y), params)
        with torch.no_grad():
            for s, g in zip(squares, grads):
                s.addcmul_(g, g)
        state, count = net.detach_state(out.state), count + 1
    stats = GradientStats({name: (s / count).sqrt_() for name, s in zip(names, squares)})
    stats.n_segments = count
    return stats


def decay_rates(stats: dict, decay: float) -> dict:
    r""":math:`r = \min(\mathrm{MS} / \overline{\mathrm{MS}},\ 1/\lambda)` per parameter, with
    :math:`\overline{\mathrm{MS}} = \frac{1}{P}\sum_p \mathrm{mean}(\mathrm{MS}_p)` over the P tensors.

    Rates average about 1; the clip keeps :math:`\lambda r \le 1`, so the decay never overshoots.
    """
    mean_ms = sum(float(ms.double().mean()) for ms in stats.values()) / len(stats)
    rates = {name: ms / mean_ms for name, ms in stats.items()}
    if decay > 0:
        rates = {name: r.clamp(max=1.0 / decay) for name, r in rates.items()}
    return rates


def from_old_hyperparameters(lr: float, decay: float, eps: float, n_segments: int, n_tensors: int) -> dict:
    r"""Convert settings of the reference code's first version into this module's scaling.

    That version summed instead of averaging: :math:`\mathrm{MS}_{old} = \sqrt{\sum_k g_k^2} = \sqrt{K}\,\mathrm{MS}`
    over the K statistics segments, and it normalised the decay rates by the *sum* over the P
    parameter tensors, so :math:`r_{old} = r / P`. The same update therefore follows from
    :math:`\eta = \eta_{old}/\sqrt{K}`, :math:`\epsilon = \epsilon_{old}/\sqrt{K}`,
    :math:`\lambda = \lambda_{old}/P` (the ``--oldhyper`` switch of the dynamic-evaluation code).
    The papers' settings (:data:`PAPER_SETTINGS`) are in the old scaling; ``K`` is
    ``stats.n_segments`` and ``P`` is ``len(stats)``.
    """
    n_segments, n_tensors = _positive_int(n_segments, "n_segments"), _positive_int(n_tensors, "n_tensors")
    root = math.sqrt(n_segments)
    return dict(lr=lr / root, decay=decay / n_tensors, eps=eps / root)


# ------------------------------------------------------------------------ the update

class Step(NamedTuple):
    r"""The constants of one parameter's update, fixed for a whole stream (see :func:`update_`).

    ``rms``: :math:`s = \eta / (\mathrm{MS} + \epsilon)`, :math:`\rho = \lambda r` (tensors);
    ``sgd``: :math:`s = \eta`, :math:`\rho = \lambda` (numbers).
    """

    scale: object  # s, a tensor or a number
    rho: object  # the decay, a tensor or a number; None when it is 0
    theta_0: torch.Tensor  # the trained value, read only


def make_step(theta_0: torch.Tensor, scale, rho) -> Step:
    """The :class:`Step` of a parameter with trained value ``theta_0``, step scale ``s`` and decay ``rho``."""
    if not isinstance(rho, torch.Tensor) and rho == 0:
        rho = None
    return Step(scale, rho, theta_0)


def update_(theta: torch.Tensor, g: torch.Tensor, step: Step) -> None:
    r"""In place: :math:`\theta \leftarrow \theta - s \odot g + \rho \odot (\theta_0 - \theta)`.

    Two passes over :math:`\theta` and no temporary tensor: first the pull
    :math:`\theta + \rho \odot (\theta_0 - \theta)` (``lerp_``), which reads :math:`\theta` before
    the step as the formula says, then :math:`- s \odot g`.
    """
    if step.rho is not None:
        theta.lerp_(step.theta_0, step.rho)
    if isinstance(step.scale, torch.Tensor):
        theta.addcmul_(g, step.scale, value=-1.0)
    elif step.scale != 0:
        theta.add_(g, alpha=-step.scale)


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


# ----------------------------------------------------------------------- the wrapper

class DynamicEval(LanguageModel):
    r"""A trained neural LM under dynamic evaluation (see the module docstring); a LanguageModel.

    ``method``: ``"rms"`` (needs ``stats`` from :func:`gradient_stats`) or ``"sgd"``. ``lr`` is
    :math:`\eta`, ``decay`` is :math:`\lambda \in [0, 1)`, ``eps`` is :math:`\epsilon` (``rms`` only),
    ``bptt`` the segment length. The defaults are the reference code's for ``rms`` at bptt 5; ``sgd``
    needs a far larger ``lr`` (its gradient is not divided by MS).

    The step interface adapts too: every row holds its own weights, and once a row has been given
    the ``bptt`` targets of a segment, that segment is differentiated from its start state and the
    row's weights updated, exactly as :meth:`score` does, so ``start(1)`` + ``advance`` reproduces
    :meth:`score` token by token. Rows are independent (samples, beams); each costs one forward per
    token and one weight copy per finished segment.
    """

    def __init__(self, model: nn.Module, method: str = "rms", lr: float = DEFAULTS["lr"],
                 decay: float = DEFAULTS["decay"], eps: float = DEFAULTS["eps"], bptt: int = 5,
                 stats: Optional[dict] = None):
        _check_model(model)
        if method not in METHODS:
            raise ValueError(f"Unknown method {method!r}: use 'rms' (steps scaled by training-set RMS gradients) "
                             "or 'sgd' (plain gradient steps).")
        self.model, self.method = model, method
        self.lr, self.decay = _number(lr, "lr", 0.0, MAX_LR, high_closed=True), _number(decay, "decay", 0.0, 1.0)
        self.eps = _number(eps, "eps", 0.0, low_open=True)  # read by "rms" only, checked for both
        self.bptt = _positive_int(bptt, "bptt")
        self.stats = self._check_stats(stats) if method == "rms" else None
        self.vocab = model.vocab
        self.name = f"{getattr(model, 'name', 'model')} + dynamic evaluation ({method})"
        self._stepper = None

    def _check_stats(self, stats) -> dict:
        if stats is None:
            raise ValueError("method='rms' divides each step by the training-set RMS gradient: pass "
                             "stats=gradient_stats(model, corpus.train), or use method='sgd'.")
        for name, p in self.model.named_parameters():
            if name not in stats:
                raise ValueError(f"stats has no entry for parameter {name!r}: compute them with "
                                 "gradient_stats(...) on this very model.")
            if tuple(stats[name].shape) != tuple(p.shape):
                raise ValueError(f"stats[{name!r}] has shape {tuple(stats[name].shape)} but the parameter has "
                                 f"{tuple(p.shape)}: compute the stats on this very model.")
        return stats

    # ----------------------------------------------------------------- plumbing

    @property
    def config(self):
        return self.model.config

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def eos(self) -> int:
        return self.model.eos

    def steps(self, names: Sequence[str], params: Sequence[torch.Tensor]) -> list:
        """Per parameter, the :class:`Step` of :func:`update_` (computed once per stream)."""
        theta_0 = self._theta_0(names)
        if self.method == "sgd":
            return [make_step(t0, self.lr, self.decay) for t0 in theta_0]
        rates = decay_rates(self.stats, self.decay)
        out = []
        for name, p, t0 in zip(names, params, theta_0):
            ms, r = (x.to(device=p.device, dtype=p.dtype) for x in (self.stats[name], rates[name]))
            out.append(make_step(t0, self.lr / (ms + self.eps), self.decay * r if self.decay > 0 else 0.0))
        return out

    def _theta_0(self, names: Sequence[str]) -> list:
        own = dict(self.model.named_parameters())
        return [own[n].detach() for n in names]  # read only: the wrapped model is never written

    # ---------------------------------------------------------------- streaming

    def _segments(self, tokens) -> Iterator[tuple]:
        """Per segment: (logits (t, V), h (t, E_last)) before the update, the names, the updated weights."""
        tokens = check_tokens(tokens, self.config.vocab_size).to(self.device)
        net = adaptation_copy(self.model)
        names, params = zip(*net.named_parameters())  # computed once per stream
        steps = self.steps(names, params)
        inputs = torch.cat([tokens.new_full((1,), self.eos), tokens[:-1]])  # (N,)
        state = None
        for i in range(0, tokens.numel(), self.bptt):
            x, y = inputs[i:i + self.bptt].view(-1, 1), tokens[i:i + self.bptt].view(-1, 1)  # (t, 1)
            with torch.enable_grad():
                out = net(x, state)
                grads = torch.autograd.grad(_segment_nll(out.logits, y), params)
            with torch.no_grad():
                for theta, g, step in zip(params, grads, steps):
                    update_(theta, g, step)
            state = net.detach_state(out.state)
            yield out.logits[:, 0].detach(), out.h[:, 0].detach(), names, params

    def drift(self, tokens, every: int = 20, progress: Optional[bool] = None) -> tuple[torch.Tensor, torch.Tensor]:
        r"""``(log p (N,), d (S,))``: the scores of :meth:`score`, and the distance of the weights from
        :math:`\theta_0`, :math:`d = \lVert \theta - \theta_0 \rVert_2` over every weight, after
        every ``every``-th segment (``d[k]`` after segment ``(k + 1) * every``)."""
        every = _positive_int(every, "every")
        tokens = check_tokens(tokens, self.config.vocab_size).to(self.device)
        log_p, d, i = torch.empty(tokens.numel(), dtype=torch.float64), [], 0  # (N,)
        theta_0 = None
        shown = bar(total=tokens.numel(), desc=f"dynamic ({self.method})", unit="tok", unit_scale=True,
                    enabled=progress)
        for k, (logits, _, names, params) in enumerate(self._segments(tokens), start=1):
            t = logits.size(0)
            shown.update(t)
            log_p[i:i + t] = log_softmax(logits).gather(1, tokens[i:i + t].view(-1, 1)).squeeze(1).cpu()  # (t,)
            i += t
            if k % every == 0:
                theta_0 = theta_0 or self._theta_0(names)
                with torch.no_grad():
                    d.append(float(sum(((p - p0) ** 2).sum() for p, p0 in zip(params, theta_0)).sqrt()))
        shown.close()
        return log_p, torch.tensor(d, dtype=torch.float64)

    def stream(self, tokens) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        r"""Yield ``(logits (t, V), h (t, E_last))`` per segment, computed *before* that segment's update.

        The stream reads as if preceded by ``<eos>``; the state and the adapted weights are carried
        from segment to segment. The same protocol as :meth:`lmcourse.networks.base.NeuralLM.stream`, so a
        neural cache can wrap this model (its keys are then the adapting model's states).
        """
        for logits, h, _, _ in self._segments(tokens):
            yield logits, h

    def adapt(self, tokens) -> dict:
        """The weights ``{name: theta}`` after reading ``tokens`` (the wrapped model keeps theta_0)."""
        names, params = (), ()
        for _, _, names, params in self._segments(tokens):
            pass
        return {n: p.detach().clone() for n, p in zip(names, params)}

    def score(self, tokens) -> torch.Tensor:  # (N,) -> (N,) float64
        r""":math:`\log p(x_t \mid x_{<t})` for every token, each predicted before the weights saw it."""
        tokens = check_tokens(tokens, self.config.vocab_size).to(self.device)
        out = torch.empty(tokens.numel(), dtype=torch.float64, device=self.device)  # (N,): one buffer, filled in place
        i = 0
        for logits, _ in self.stream(tokens):  # nothing of a segment is kept past its turn
            t = logits.size(0)
            out[i:i + t] = log_softmax(logits).gather(1, tokens[i:i + t].view(-1, 1)).squeeze(1)  # (t,)
            i += t
        if not bool(torch.isfinite(out).all()):  # a softmax of finite logits never gives NaN or -inf
            first = int((~torch.isfinite(out)).nonzero()[0])
            warnings.warn(f"Dynamic evaluation diverged: from token {first} on the adapted weights give no finite "
                          f"log-probabilities; lower the learning rate (lr={self.lr:g}).", RuntimeWarning, stacklevel=2)
        return out.cpu()

    # ------------------------------------------------------------ step interface

    def _step_net(self):
        if self._stepper is None:
            net = adaptation_copy(self.model)
            names, params = zip(*net.named_parameters())
            self._stepper = (net, list(names), self.steps(names, params))
        return self._stepper

    def _read(self, theta: tuple, hidden: list, x: torch.Tensor):
        """Run the model with weights ``theta`` on ids ``x`` (t, 1) from ``hidden`` -> LMOutput."""
        net, names, _ = self._step_net()
        with warnings.catch_warnings():  # cuDNN: substituted weights are not one flat block
            warnings.filterwarnings("ignore", message=".*contiguous chunk of memory.*")
            return functional_call(net, dict(zip(names, theta)), (x, hidden))

    def _adapt(self, row: _RowState, target: int) -> tuple:
        """The weights after the segment ``row.inputs`` whose last target is ``target``."""
        _, _, steps = self._step_net()
        x = torch.tensor(row.inputs, device=self.device).view(-1, 1)  # (t, 1)
        y = torch.tensor(row.inputs[1:] + (target,), device=self.device).view(-1, 1)  # (t, 1)
        leaves = tuple(w.detach().requires_grad_(True) for w in row.theta)
        with torch.enable_grad():
            grads = torch.autograd.grad(_segment_nll(self._read(leaves, row.start, x).logits, y), leaves)
        new = tuple(w.detach().clone() for w in row.theta)
        with torch.no_grad():
            for theta, g, step in zip(new, grads, steps):
                update_(theta, g, step)
        return new

    def start(self, batch_size: int = 1) -> DynamicState:
        """Every row at theta_0, having read the implicit leading ``<eos>``."""
        _positive_int(batch_size, "batch_size")
        net, names, _ = self._step_net()
        theta = tuple(self._theta_0(names))
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


# ---------------------------------------------------------------------- grid search

@dataclass
class Grid:
    """Perplexities of a grid search: ``ppl[i, j]`` for ``lrs[i]`` and ``decays[j]``."""

    lrs: list
    decays: list
    ppl: torch.Tensor  # (len(lrs), len(decays))
    method: str
    bptt: int

    @property
    def best(self) -> dict:
        """``{"lr", "decay", "ppl"}`` of the lowest perplexity."""
        k = int(torch.argmin(self.ppl))
        i, j = divmod(k, len(self.decays))
        return dict(lr=self.lrs[i], decay=self.decays[j], ppl=float(self.ppl[i, j]))


def paper_grid(bptt: int = 5) -> tuple[list, list]:
    """The reference code's search grid, scaled by ``bptt / 5`` (dynamic-evaluation code, ``--grid``)."""
    f = _positive_int(bptt, "bptt") / 5.0
    return [v * 1e-5 * f for v in (3, 4, 5, 6, 7, 10)], [v * 1e-3 * f for v in (1, 2, 3, 5)]


def grid_search(model: nn.Module, tokens, lrs: Sequence[float], decays: Sequence[float], method: str = "rms",
                stats: Optional[dict] = None, eps: float = DEFAULTS["eps"], bptt: int = 5,
                progress: Optional[bool] = None) -> Grid:
    """Dynamic-evaluation perplexity of ``tokens`` (a validation slice) for every ``lr`` x ``decay``."""
    lrs, decays = [float(v) for v in lrs], [float(v) for v in decays]
    if not lrs or not decays:
        raise ValueError("grid_search needs at least one lr and one decay to try.")
    runs = [DynamicEval(model, method, lr, decay, eps, bptt, stats) for lr in lrs for decay in decays]
    ppl = torch.full((len(lrs), len(decays)), math.nan, dtype=torch.float64)
    bar = None
    if progress_enabled(progress):
        from ..progress import tqdm
        bar = tqdm(total=len(runs), desc=f"grid {len(lrs)} lr x {len(decays)} decay", unit="run", dynamic_ncols=True)
    for k, run in enumerate(runs):
        with warnings.catch_warnings():  # a diverged setting is marked below, by its infinite perplexity
            warnings.simplefilter("ignore", RuntimeWarning)
            nll = mean_nll(run, tokens)
        ppl.view(-1)[k] = perplexity_from_nll(nll)  # a diverged setting: infinite perplexity
        if bar is not None:
            bar.update(1)
            bar.set_postfix(lr=f"{run.lr:.3g}", decay=f"{run.decay:.3g}", ppl=f"{float(ppl.view(-1)[k]):.2f}")
    if bar is not None:
        bar.close()
    return Grid(lrs, decays, ppl, method, bptt)
