r"""The neural cache: a trained language model made better with no training (Grave et al. 2017).

The model's last-layer output :math:`h_t` (the vector that feeds its softmax) has read
:math:`x_1, \dots, x_t` and predicts :math:`x_{t+1}` (lesson 02's convention, the course's one). The
cache remembers the pairs :math:`(h_i, x_{i+1})` of the last ``window`` positions — a state, and the
word that actually came after it — and, predicting :math:`x_{t+1}`, points back at the positions whose
state looks like :math:`h_t`:

.. math::

    a_i = \frac{\exp(\theta\, h_t \cdot h_i)}{\sum_{j} \exp(\theta\, h_t \cdot h_j)}, \qquad
    p_{\text{cache}}(w) = \sum_{i:\ x_{i+1} = w} a_i, \qquad t - \text{window} \le i < t.

Two ways to combine it with the model's own distribution :math:`p_{\text{vocab}} = \operatorname{softmax}(z_t)`
over :math:`x_{t+1}`:

- **linear interpolation**: :math:`p(w) = (1 - \lambda)\, p_{\text{vocab}}(w) + \lambda\, p_{\text{cache}}(w)`;
- **global normalisation**: :math:`p(w) \propto e^{z_{t,w}} + \sum_{i:\ x_{i+1} = w} e^{\theta\, h_t \cdot h_i + \alpha}`.

In code a stream's row :math:`t` holds :math:`h_t` and its target :math:`x_{t+1}` (``targets[t]``), so
the value stored with :math:`h_i` is ``targets[i]``. With an empty cache (the first row) both give
:math:`p_{\text{vocab}}`. Grave et al. use whatever
history exists; awd-lstm-lm's ``pointer.py`` (Merity et al. 2018) applies the cache only once more
than ``window`` tokens have been read, so its first ``window + 1`` positions are scored by the model
alone (``pointer_compat=True`` does the same; its other quirk, also skipping the first token of each
later ``bptt`` chunk, moves the perplexity by a few tokens in tens of thousands and is not copied).

Everything is vectorised: a chunk of ``c`` queries is scored against the ``window`` stored keys and
the chunk itself with one matrix product, so memory is ``c x (c + window)``, never ``T x T``.
Only the target's probability is needed to score text, so nothing of size ``V`` is built except
in the step interface (sampling, beam search), which returns whole distributions.

Tuning (:func:`collect`, :func:`grid_search`, :func:`window_sweep`) runs the model once and reuses
its hidden states for every setting.
"""
from __future__ import annotations

import math
import operator
from functools import lru_cache
from typing import NamedTuple, Optional

import torch

from ..lm import LanguageModel, check_neural, check_tokens
from ..networks.base import log_softmax

MODES = ("linear", "global")
CHUNK = 128  # queries scored together: memory CHUNK x (CHUNK + window), small enough to stay in cache


# ------------------------------------------------------------------------------- checks

def _number(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}.")
    return float(value)


def check_theta(theta) -> float:
    theta = _number(theta, "theta")
    if theta < 0:
        raise ValueError(f"theta={theta!r} is negative: the cache's inverse temperature must be >= 0 "
                         "(0 gives every stored position the same weight).")
    return theta


def check_lam(lam) -> float:
    lam = _number(lam, "lam")
    if not 0.0 <= lam <= 1.0:
        raise ValueError(f"lam={lam!r} is not a mixing weight: give a number in [0, 1] (0 = the model alone).")
    return lam


def check_window(window, name: str = "window") -> int:
    try:
        value = None if isinstance(window, bool) else operator.index(window)
    except TypeError:
        value = None
    if value is None or value < 1:
        raise ValueError(f"{name}={window!r} is not a size: give a positive integer number of positions.")
    return value


def check_mode(mode) -> str:
    if mode not in MODES:
        raise ValueError(f"mode={mode!r} is unknown: use 'linear' (interpolation with lam) "
                         "or 'global' (one softmax with alpha).")
    return mode


def _check_stream(hidden: torch.Tensor, targets: torch.Tensor, scores: torch.Tensor, what: str):
    """Shapes (T, V), (T, H), (T,) that agree; one sentence when they do not."""
    if scores.dim() != 2:
        raise ValueError(f"{what} must be (T, V), one row per position; got shape {tuple(scores.shape)}.")
    if hidden.dim() != 2:
        raise ValueError(f"hidden must be (T, H), one state per position; got shape {tuple(hidden.shape)}.")
    if targets.dim() != 1:
        raise ValueError(f"targets must be (T,), one token id per position; got shape {tuple(targets.shape)}.")
    T = scores.shape[0]
    if hidden.shape[0] != T or targets.shape[0] != T:
        raise ValueError(f"{what}, hidden and targets must have one row per position, but have "
                         f"{T}, {hidden.shape[0]} and {targets.shape[0]} rows.")
    if targets.numel() and (int(targets.min()) < 0 or int(targets.max()) >= scores.shape[1]):
        raise ValueError(f"targets hold an id outside 0..{scores.shape[1] - 1}: they must index the "
                         f"columns of {what}.")
    return targets.long().to(hidden.device)


# ------------------------------------------------------------------------- the attention sums

@lru_cache(maxsize=8)
def _window_bias(c: int, m: int, window: int, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """(c, m + c): 0 where query ``j`` (row ``m + j``) may attend to row ``i``, ``-inf`` elsewhere."""
    lag = m + torch.arange(c, device=device).unsqueeze(1) - torch.arange(m + c, device=device).unsqueeze(0)
    valid = (lag >= 1) & (lag <= window)                                    # t - window <= i < t
    return torch.zeros(c, m + c, device=device, dtype=dtype).masked_fill_(~valid, -math.inf)


def logsums(h_q: torch.Tensor, y_q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
            window: int, thetas: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    r"""For each query, the log of the cache's total and target mass, for each theta.

    The queries are the last ``c`` rows of ``keys``: query ``j`` sits at row ``m + j`` (``m`` =
    ``len(keys) - c``) and sees rows ``i`` with ``m + j - window <= i < m + j``. Returns

    .. math:: L^{\text{all}}_t = \log \sum_i e^{\theta h_t\cdot h_i}, \qquad
              L^{\text{match}}_t = \log \sum_{i:\ x_{i+1} = x_{t+1}} e^{\theta h_t\cdot h_i},

    with ``y_q`` the queries' targets :math:`x_{t+1}` and ``values`` the stored ones :math:`x_{i+1}`;
    each (n_theta, c); both are :math:`-\infty` where the cache is empty or misses the target.
    The dot products are computed once for all thetas; each theta then makes a few passes over
    the (c, c + m) block, which stays in the processor's cache for small ``c``.
    """
    c, k = h_q.shape[0], keys.shape[0]
    bias = _window_bias(c, k - c, window, keys.device, keys.dtype)          # (c, k)
    dots = h_q @ keys.T                                                     # (c, k)
    match = values.unsqueeze(0) == y_q.unsqueeze(1)                         # (c, k), masked by the bias below
    l_all, l_match = [], []
    for theta in thetas.tolist():                                           # a loop over settings, not tokens
        s = torch.add(bias, dots, alpha=theta)                              # (c, k): -inf off the window
        top = s.amax(1, keepdim=True)                                       # (c, 1)
        top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))  # empty cache: any finite shift
        e = s.sub_(top).exp_()                                              # (c, k), 0 off the window
        top = top.squeeze(1)
        l_all.append(top + e.sum(1).log())
        l_match.append(top + torch.where(match, e, torch.zeros((), dtype=e.dtype, device=e.device)).sum(1).log())
    return torch.stack(l_all), torch.stack(l_match)                         # (n, c), (n, c)


class CacheMemory:
    """The last ``window`` pairs ``(h_i, x_{i+1})`` of one stream (a state and the word after it), carried from
    chunk to chunk.

    ``read(h, y, thetas)`` scores a chunk of any length against what is stored and against its own
    earlier rows, then stores the chunk, keeping only the last ``window`` pairs.
    """

    def __init__(self, window: int, chunk: int = CHUNK):
        self.window, self.chunk = check_window(window), check_window(chunk, "chunk")
        self.keys: Optional[torch.Tensor] = None  # (<= window, H)
        self.values: Optional[torch.Tensor] = None  # (<= window,)
        self.seen = 0  # positions read so far

    def store(self, h: torch.Tensor, y: torch.Tensor) -> None:
        """Remember ``(h, y)`` (c, H), (c,) without scoring them (e.g. a warm start from earlier text)."""
        keys = h if self.keys is None else torch.cat([self.keys, h.to(self.keys.dtype)])
        values = y if self.values is None else torch.cat([self.values, y])
        self.keys, self.values = keys[-self.window:], values[-self.window:]
        self.seen += h.shape[0]

    def read(self, h: torch.Tensor, y: torch.Tensor, thetas: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """:func:`logsums` for the chunk ``h`` (c, H), ``y`` (c,): two (n_theta, c) tensors."""
        m = 0 if self.keys is None else self.keys.shape[0]
        keys = h if self.keys is None else torch.cat([self.keys, h.to(self.keys.dtype)])  # (m + c, H)
        values = y if self.values is None else torch.cat([self.values, y])                # (m + c,)
        thetas = thetas.to(keys)
        all_, match = [], []
        for a in range(m, keys.shape[0], self.chunk):  # pieces of `chunk` queries keep memory bounded
            b, lo = min(a + self.chunk, keys.shape[0]), max(0, a - self.window)
            la, lm = logsums(keys[a:b], values[a:b], keys[lo:b], values[lo:b], self.window, thetas)
            all_.append(la)
            match.append(lm)
        self.keys, self.values = keys[-self.window:].clone(), values[-self.window:].clone()
        self.seen += h.shape[0]
        return torch.cat(all_, 1), torch.cat(match, 1)


# ------------------------------------------------------------------------------- the two mixtures

def mix_linear(log_p_vocab: torch.Tensor, l_all: torch.Tensor, l_match: torch.Tensor, lam) -> torch.Tensor:
    r""":math:`\log((1-\lambda) p_{\text{vocab}} + \lambda\, e^{L^{\text{match}} - L^{\text{all}}})`, and
    :math:`\log p_{\text{vocab}}` where the cache is empty. ``lam`` may be a tensor that broadcasts."""
    lam = torch.as_tensor(lam, dtype=log_p_vocab.dtype, device=log_p_vocab.device)
    p_cache_log = l_match - torch.where(torch.isfinite(l_all), l_all, torch.zeros_like(l_all))
    mixed = torch.logaddexp(torch.log1p(-lam) + log_p_vocab, torch.log(lam) + p_cache_log)
    return torch.where(torch.isfinite(l_all), mixed, log_p_vocab.expand_as(mixed))


def mix_global(z_target: torch.Tensor, log_z: torch.Tensor, l_all: torch.Tensor, l_match: torch.Tensor,
               alpha) -> torch.Tensor:
    r""":math:`\log(e^{z_{t,x_{t+1}}} + e^{\alpha + L^{\text{match}}}) - \log(\sum_w e^{z_{t,w}} + e^{\alpha + L^{\text{all}}})`.

    ``log_z`` is :math:`\log\sum_w e^{z_{t,w}}`; ``alpha`` may be a tensor that broadcasts."""
    alpha = torch.as_tensor(alpha, dtype=z_target.dtype, device=z_target.device)
    return torch.logaddexp(z_target, alpha + l_match) - torch.logaddexp(log_z, alpha + l_all)


def _skip_first(scores: torch.Tensor, log_p_vocab: torch.Tensor, start: int, window: int) -> torch.Tensor:
    """pointer.py's rule: the model alone at positions ``t <= window``."""
    t = start + torch.arange(scores.shape[-1], device=scores.device)
    return torch.where(t > window, scores, log_p_vocab.expand_as(scores))


def linear_cache(log_p_vocab, hidden, targets, theta, lam, window) -> torch.Tensor:  # -> (T,)
    r""":math:`\log p(x_{t+1})` under :math:`(1-\lambda) p_{\text{vocab}} + \lambda p_{\text{cache}}` (module docstring).

    ``log_p_vocab`` (T, V) the model's log-probabilities, ``hidden`` (T, H) its last-layer outputs
    :math:`h_t`, ``targets`` (T,) the tokens scored (row t: :math:`x_{t+1}`, the word :math:`h_t` predicts);
    the cache holds the previous ``window`` positions."""
    targets = _check_stream(hidden, torch.as_tensor(targets), log_p_vocab, "log_p_vocab")
    theta, lam, window = check_theta(theta), check_lam(lam), check_window(window)
    lp = log_p_vocab.gather(1, targets.view(-1, 1).to(log_p_vocab.device)).squeeze(1)  # (T,)
    l_all, l_match = CacheMemory(window).read(hidden, targets, torch.tensor([theta]))
    return mix_linear(lp, l_all[0].to(lp.device), l_match[0].to(lp.device), lam)


def global_cache(logits, hidden, targets, theta, alpha, window) -> torch.Tensor:  # -> (T,)
    r""":math:`\log p(x_{t+1})` with :math:`p(w) \propto e^{z_{t,w}} + \sum_{i: x_{i+1} = w} e^{\theta h_t\cdot h_i + \alpha}`.

    ``logits`` (T, V) the model's scores :math:`z_t` before the softmax, ``hidden`` (T, H),
    ``targets`` (T,) (row t: :math:`x_{t+1}`); the cache holds the previous ``window`` positions."""
    targets = _check_stream(hidden, torch.as_tensor(targets), logits, "logits")
    theta, alpha, window = check_theta(theta), _number(alpha, "alpha"), check_window(window)
    logits = logits.to(torch.promote_types(logits.dtype, torch.float32))
    z = logits.gather(1, targets.view(-1, 1).to(logits.device)).squeeze(1)  # (T,)
    l_all, l_match = CacheMemory(window).read(hidden, targets, torch.tensor([theta]))
    return mix_global(z, torch.logsumexp(logits, 1), l_all[0].to(z.device), l_match[0].to(z.device), alpha)


def attention(hidden: torch.Tensor, t: int, theta: float, window: int) -> tuple[torch.Tensor, torch.Tensor]:
    r"""The cache's weights :math:`a_i` at position ``t``: positions ``i`` (n,) and weights (n,), n <= window."""
    theta, window = check_theta(theta), check_window(window)
    if not 0 <= t < hidden.shape[0]:
        raise ValueError(f"t={t} is outside the stream of {hidden.shape[0]} positions.")
    i = torch.arange(max(0, t - window), t, device=hidden.device)           # (n,)
    return i, torch.softmax(theta * (hidden[i] @ hidden[t]), 0)             # (n,), (n,)


# ----------------------------------------------------------------------- the wrapper model

class CacheState(NamedTuple):
    """The step-interface state of :class:`NeuralCache`, one row per sequence."""

    inner: object  # the wrapped model's own state
    keys: torch.Tensor  # (B, n, H): h_i of the last n <= window positions
    values: torch.Tensor  # (B, n): x_{i+1}, the token read after each of them
    query: torch.Tensor  # (B, H): h_t, the state predicting the next token x_{t+1}
    t: int  # tokens read so far (the position now predicted)
    log_probs: torch.Tensor  # (B, V): log p(. | what was read), cache included


class NeuralCache(LanguageModel):
    r"""A trained model with a neural cache on top (Grave et al. 2017); a :class:`LanguageModel`.

    ``model`` is anything with ``vocab`` and ``stream(tokens)`` yielding ``(logits (t, V), h (t, H))``
    chunks in order (:meth:`lmcourse.networks.base.NeuralLM.stream`, or dynamic evaluation's): the keys are
    its ``h``, the last layer's output, and the history runs across chunks of any length.
    ``mode="linear"`` mixes with ``lam``; ``mode="global"`` adds the cache to the softmax with
    ``alpha``. ``lam = 0`` gives exactly the model's own scores. ``pointer_compat=True`` scores the
    first ``window + 1`` positions with the model alone, as awd-lstm-lm's ``pointer.py`` does, to
    reproduce its numbers. Defaults: :math:`\theta = 1`, :math:`\lambda = 0.1` (the awd-lstm-lm
    code's PTB settings) and 2,000 positions (Grave et al. 2017, Table 2).

    The step interface (sampling, beam search) needs :math:`h_t` and, for ``global``, the raw
    logits at each step: ``model.step_outputs(state) -> (logits (B, V), h (B, H))``, which every
    :class:`~lmcourse.networks.base.NeuralLM` and :class:`~lmcourse.adapt.dyneval.DynamicEval` has.
    """

    def __init__(self, model, theta: float = 1.0, lam: float = 0.1, window: int = 2000, mode: str = "linear",
                 alpha: float = 0.0, pointer_compat: bool = False, chunk: int = CHUNK):
        check_neural(model, "cache")
        if getattr(model, "vocab", None) is None:
            raise ValueError("The wrapped model has no vocabulary: set model.vocab = corpus.vocab first.")
        self.model, self.vocab = model, model.vocab
        self.mode = check_mode(mode)
        self.theta, self.lam, self.window = check_theta(theta), check_lam(lam), check_window(window)
        self.alpha = _number(alpha, "alpha")
        self.pointer_compat, self.chunk = bool(pointer_compat), check_window(chunk, "chunk")
        kind = "cache" if mode == "linear" else "global cache"
        self.name = f"{getattr(model, 'name', 'model')} + {kind}"

    def __repr__(self) -> str:
        knob = f"lam={self.lam:g}" if self.mode == "linear" else f"alpha={self.alpha:g}"
        return f"NeuralCache({self.name!r}, theta={self.theta:g}, {knob}, window={self.window}, mode={self.mode!r})"

    # ------------------------------------------------------------------------- scoring

    def _mix(self, logits: torch.Tensor, l_all, l_match, y: torch.Tensor, start: int) -> torch.Tensor:
        """Log-probabilities of ``y`` (t,) from the model's logits (t, V) and the cache sums (t,)."""
        logits = logits.to(torch.promote_types(logits.dtype, torch.float32))
        lp = log_softmax(logits).gather(1, y.view(-1, 1)).squeeze(1)  # (t,)
        l_all, l_match = l_all.to(lp), l_match.to(lp)
        if self.mode == "linear":
            out = mix_linear(lp, l_all, l_match, self.lam)
        else:
            z = logits.gather(1, y.view(-1, 1)).squeeze(1)
            out = mix_global(z, torch.logsumexp(logits, 1), l_all, l_match, self.alpha)
        return _skip_first(out, lp, start, self.window) if self.pointer_compat else out

    def score(self, tokens) -> torch.Tensor:  # (N,) -> (N,) float64
        r""":math:`\log p(x_{t+1} \mid x_{\le t})` for every token, model state and cache carried over the whole stream."""
        tokens = check_tokens(tokens, len(self.vocab))
        memory, start = CacheMemory(self.window, self.chunk), 0
        out = None  # (N,) float64, one buffer on the model's device, filled chunk by chunk
        for logits, h in self.model.stream(tokens):
            with torch.no_grad():  # per chunk: nothing is left switched off between yields
                h = h.detach()
                if out is None:
                    out = torch.empty(tokens.numel(), dtype=torch.float64, device=logits.device)
                y = tokens[start:start + h.shape[0]].to(h.device)
                theta = torch.tensor([self.theta], dtype=h.dtype, device=h.device)
                l_all, l_match = memory.read(h, y, theta)
                out[start:start + h.shape[0]] = self._mix(logits.detach(), l_all[0], l_match[0],
                                                          y.to(logits.device), start)
            start += h.shape[0]
        return out.cpu()

    # ------------------------------------------------------------------- step interface

    def _step_outputs(self, inner) -> tuple[torch.Tensor, torch.Tensor]:
        """(log-probabilities for linear, raw logits for global) (B, V) and h_t (B, H) at a step."""
        step_outputs = getattr(self.model, "step_outputs", None)
        if not callable(step_outputs):
            raise TypeError(f"NeuralCache's step interface needs h_t at each step: give "
                            f"{type(self.model).__name__} a step_outputs(state) -> (logits, h) method.")
        z, h = step_outputs(inner)
        return (log_softmax(z) if self.mode == "linear" else z), h

    def _mix_step(self, z: torch.Tensor, h: torch.Tensor, keys, values, t: int) -> torch.Tensor:  # (B, V)
        z = z.to(torch.promote_types(z.dtype, torch.float32))
        lp = z if self.mode == "linear" else log_softmax(z)
        if keys.shape[1] == 0 or (self.pointer_compat and t <= self.window):
            return lp
        s = self.theta * torch.bmm(keys.to(z.dtype), h.to(z.dtype).unsqueeze(2)).squeeze(2)  # (B, n)
        if self.mode == "linear":
            p_cache = torch.zeros_like(z).scatter_add_(1, values, torch.softmax(s, 1))  # (B, V)
            lam = torch.tensor(self.lam, dtype=z.dtype, device=z.device)
            return torch.logaddexp(torch.log1p(-lam) + lp, torch.log(lam) + p_cache.log())
        top = s.amax(1, keepdim=True)                                                  # (B, 1)
        mass = torch.zeros_like(z).scatter_add_(1, values, torch.exp(s - top))        # (B, V)
        return log_softmax(torch.logaddexp(z, self.alpha + top + mass.log()))

    def _state(self, inner, keys, values, t: int) -> CacheState:
        with torch.no_grad():
            z, h = self._step_outputs(inner)
            return CacheState(inner, keys, values, h.detach(), t, self._mix_step(z, h.detach(), keys, values, t))

    def start(self, batch_size: int = 1) -> CacheState:
        """The wrapped model's start state and an empty cache per row."""
        inner = self.model.start(batch_size)
        _, h = self._step_outputs(inner)
        keys = h.new_zeros(h.shape[0], 0, h.shape[1])                      # (B, 0, H)
        values = torch.zeros(h.shape[0], 0, dtype=torch.long, device=h.device)
        return self._state(inner, keys, values, 0)

    def next_log_probs(self, state: CacheState) -> torch.Tensor:  # (B, V)
        return state.log_probs

    def advance(self, state: CacheState, x) -> CacheState:
        """Store ``(h_t, x)`` for each row (``x`` is :math:`x_{t+1}`, the word after :math:`h_t`), then let the
        model read ``x`` (B,)."""
        x = torch.as_tensor(x, device=state.values.device).long().view(-1)
        keys = torch.cat([state.keys, state.query.unsqueeze(1)], 1)[:, -self.window:]  # (B, n + 1, H)
        values = torch.cat([state.values, x.unsqueeze(1)], 1)[:, -self.window:]       # (B, n + 1)
        return self._state(self.model.advance(state.inner, x), keys, values, state.t + 1)

    def reorder(self, state: CacheState, index) -> CacheState:
        """Keep rows ``index`` (B',): the model's state and each row's cache."""
        index = torch.as_tensor(index, device=state.values.device).long()
        pick = lambda a: a.index_select(0, index)  # noqa: E731
        return CacheState(self.model.reorder(state.inner, index), pick(state.keys), pick(state.values),
                          pick(state.query), state.t, pick(state.log_probs))
