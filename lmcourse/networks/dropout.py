r"""The dropouts of the AWD-LSTM recipe, side by side with standard dropout.

Every variant multiplies something by a random mask :math:`m \sim \text{Bernoulli}(1-p)` scaled by
:math:`1/(1-p)`, so that :math:`\mathbb{E}[m] = 1` and activations keep their expected value. They
differ in *what* one draw of the mask covers (Merity, Keskar & Socher 2017, arXiv 1708.02182, §4;
Gal & Ghahramani 2016; Merity et al. 2018):

==========================  ==============================  =====================================
variant                     mask shape (per forward call)   what a zero removes
==========================  ==============================  =====================================
:class:`StandardDropout`    ``(T, B, H)``                   one unit at one time step
:func:`embedding_dropout`   ``(V, 1)``                      one word *type*, at all occurrences
:class:`LockedDropout`      ``(1, B, H)``                   one unit of one sequence, all steps
:class:`WeightDrop`         ``(4H, H)`` on ``W_hh``         one recurrent connection, all steps
:func:`recurrent_mask`      ``(B, H)`` or ``(T, B, H)``     one unit of :math:`h_{t-1}`, locked or
                            on :math:`h_{t-1}`              at one step (inside the LSTM's loop)
==========================  ==============================  =====================================

All are the identity in evaluation mode and when ``p == 0``. The activation penalties AR and TAR
that go with them live in :mod:`lmcourse.networks.regularize` and are re-exported here.
"""
from __future__ import annotations

import math
import numbers
import warnings

import torch
from torch import nn
from torch.func import functional_call

from .regularize import activation_regularization, temporal_activation_regularization

__all__ = [
    "embedding_dropout", "LockedDropout", "StandardDropout", "WeightDrop", "recurrent_mask", "RECURRENT_KINDS",
    "activation_regularization", "temporal_activation_regularization", "check_probability", "check_recurrent_kind",
    "make_dropout",
]

RECURRENT_KINDS = ("locked", "step")  # one mask on h_(t-1) per sequence, or a fresh one per step


def check_probability(p) -> float:
    """Return ``p`` as a float, or say in one sentence why it is not a dropout probability."""
    if isinstance(p, bool) or not isinstance(p, numbers.Real):
        raise TypeError(f"Dropout probability p must be a number, got {type(p).__name__}: pass a float such as 0.5.")
    p = float(p)
    if not (math.isfinite(p) and 0.0 <= p < 1.0):
        raise ValueError(f"Dropout probability p={p} is outside [0, 1): use 0 <= p < 1.")
    return p


def _bernoulli_mask(like: torch.Tensor, shape, p: float) -> torch.Tensor:
    r"""A mask of ``shape`` with entries :math:`m / (1-p)`, :math:`m = 1\{u \ge p\} \sim \text{Bernoulli}(1-p)`.

    Thresholding a uniform :math:`u \sim U[0, 1)` draws the same distribution as ``bernoulli_`` and
    is cheaper on the CPU, where the mask of a large ``W_hh`` is a visible cost. ``u`` is drawn in
    float32 whatever the dtype of ``like``, so half-precision models keep a fine-grained ``p`` and a
    seed gives the same mask in float32 and float64.
    """
    u = torch.rand(shape, dtype=torch.float32, device=like.device)
    return (u >= p).to(like.dtype).div_(1.0 - p)


def check_recurrent_kind(kind) -> str:
    """Return ``kind`` when it names a mask on the recurrent connection, or say in one sentence why not."""
    if kind not in RECURRENT_KINDS:
        raise ValueError(f"recurrent_kind={kind!r} is unknown: use 'locked' (one mask on h_(t-1) per sequence) "
                         "or 'step' (a fresh mask at every step).")
    return kind


def recurrent_mask(like: torch.Tensor, T: int, B: int, H: int, p: float, kind: str = "locked") -> torch.Tensor:
    r"""The dropout mask on the recurrent connection :math:`h_{t-1}` of an LSTM layer,
    :math:`z_t = W_{ih} x_t + b + W_{hh} (m_t \odot h_{t-1})`, entries :math:`\{0, 1/(1-p)\}`:

    - ``"locked"``: one mask per sequence, :math:`m_t = m` for every t, shape (B, H) (Gal & Ghahramani 2016);
    - ``"step"``: a fresh mask at every step, shape (T, B, H).

    Drawn on ``like``'s device and dtype; the LSTM of :mod:`lmcourse.networks.lstm` applies it in its loop."""
    p = check_probability(p)
    shape = (B, H) if check_recurrent_kind(kind) == "locked" else (T, B, H)
    return _bernoulli_mask(like, shape, p)  # (B, H) or (T, B, H)


def embedding_dropout(embedding: nn.Embedding, words: torch.Tensor, p: float,
                      training: bool = True) -> torch.Tensor:
    r"""Look ``words`` up in ``embedding`` after dropping whole word types.

    One mask over the vocabulary is drawn per call, :math:`m_v \sim \text{Bernoulli}(1-p)` for
    :math:`v = 1 \dots V`, and the looked-up vector of word :math:`x` is

    .. math::  e(x) = \frac{m_x}{1-p} \, W_x ,

    which is the row :math:`x` of the masked matrix :math:`\mathrm{diag}(m) W / (1-p)` used by
    AWD-LSTM (``embed_regularize.py``; Gal & Ghahramani 2016, "word dropout"). A dropped type is
    zero at every one of its occurrences in the batch. Gathering ``m_x`` for the looked-up words
    gives the same numbers and gradients as masking the whole ``(V, D)`` matrix, at the cost of the
    batch instead of the vocabulary. The lookup is the module's own, so ``padding_idx`` and the
    other options of ``nn.Embedding`` are honoured.

    Args:
        embedding: the ``nn.Embedding`` with weight ``W`` of shape ``(V, D)``.
        words: integer ids of any shape ``S``.
        p: probability of dropping a word type, ``0 <= p < 1``.
        training: when False (or ``p == 0``) this is the plain lookup.

    Returns:
        ``(*S, D)`` embeddings; gradients flow to ``embedding.weight``.
    """
    if not isinstance(embedding, nn.Embedding):
        raise TypeError(f"embedding_dropout needs an nn.Embedding, got {type(embedding).__name__}: "
                        "pass the model's embedding module.")
    if not isinstance(words, torch.Tensor) or words.dtype not in (torch.int64, torch.int32):
        raise TypeError("words must be a LongTensor of token ids: convert it with torch.as_tensor(ids).long().")
    p = check_probability(p)
    e = embedding(words)  # (*S, D)
    if not training or p == 0.0:
        return e
    m = _bernoulli_mask(embedding.weight, (embedding.num_embeddings, 1), p)  # (V, 1)
    return e * m[words]  # (*S, D)


class LockedDropout(nn.Module):
    r"""Variational ("locked") dropout: one mask per sequence, the same at every time step.

    For an input :math:`x \in \mathbb{R}^{T \times B \times H}` one mask
    :math:`m \in \{0, 1\}^{1 \times B \times H}`, :math:`m \sim \text{Bernoulli}(1-p)`, is drawn per
    forward call and broadcast over time:

    .. math::  y_{t,b,h} = \frac{m_{b,h}}{1-p} \, x_{t,b,h} .

    Each sequence (batch column) gets its own mask. Gal & Ghahramani 2016; AWD-LSTM's
    ``locked_dropout.py`` (awd-lstm-lm code). Identity in eval mode and when ``p == 0``.
    """

    def __init__(self, p: float = 0.5):
        super().__init__()
        self.p = check_probability(p)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (T, B, H) -> (T, B, H)
        if not self.training or self.p == 0.0:
            return x
        if x.dim() < 2:
            raise ValueError(f"LockedDropout expects (T, B, H) with time first, got shape {tuple(x.shape)}: "
                             "add the time and batch dimensions.")
        m = _bernoulli_mask(x, (1,) + tuple(x.shape[1:]), self.p)  # (1, B, H)
        return x * m  # (T, B, H)

    def extra_repr(self) -> str:
        return f"p={self.p}"


class StandardDropout(nn.Dropout):
    r"""Standard dropout, the baseline of the lesson: a fresh mask for every element.

    .. math::  y_{t,b,h} = \frac{m_{t,b,h}}{1-p} \, x_{t,b,h}, \qquad
               m_{t,b,h} \sim \text{Bernoulli}(1-p) \text{ independently,}

    so on a ``(T, B, H)`` sequence every time step sees a new mask (the dropout of Zaremba et al.
    2014, applied between layers only). This is ``nn.Dropout`` itself; the class only
    gives it the course's name and its check that ``0 <= p < 1``.
    """

    def __init__(self, p: float = 0.5):
        super().__init__(p=check_probability(p))


def make_dropout(p: float, kind: str) -> nn.Module:
    """Locked dropout (one mask per sequence, Gal & Ghahramani 2016) or standard (a fresh mask per element)."""
    if p == 0:
        return nn.Identity()
    return LockedDropout(p) if kind == "locked" else StandardDropout(p)


class WeightDrop(nn.Module):
    r"""DropConnect on the recurrent weights of an LSTM (the "weight-dropped LSTM").

    One mask over the whole hidden-to-hidden matrix is drawn per forward call and shared by every
    time step and every sequence of the batch (Merity et al. 2018, Section 2; Wan et al. 2013 for
    DropConnect, Wan et al. 2013; Merity et al. 2018):

    .. math::  \tilde W_{hh} = \frac{M \odot W_{hh}}{1-p}, \quad
               M_{ij} \sim \text{Bernoulli}(1-p), \qquad
               (h_t, c_t) = \text{LSTM}(x_t, h_{t-1}, c_{t-1};\ W_{ih}, \tilde W_{hh}, b).

    Because the mask is fixed for the whole sequence, the wrapped module still runs its fast path
    (cuDNN or the fused CPU kernel) with an ordinary weight list.

    How: the raw weight stays registered in the wrapped module under its own name, so the module
    stays a complete, working LSTM (``_flat_weights``, ``.to()``, ``.double()``, ``state_dict`` and
    ``flatten_parameters`` are never disturbed). Each training forward draws
    :math:`\tilde W_{hh}` from it and runs the module with that tensor substituted for the call only
    (``torch.func.functional_call``), so the stored weight is never written and the gradient
    reaches it through the mask. In eval mode, and when ``p == 0``, the module runs unchanged.

    The raw weights can be read as ``wrapper.raw_weights`` or, as in AWD-LSTM,
    ``wrapper.weight_hh_l0_raw``; in ``state_dict`` they keep the module's key
    (``module.weight_hh_l0``).

    Args:
        module: an ``nn.LSTM`` (or any module with the named parameters), called as
            ``module(input, hx)``.
        p: probability of dropping a connection, ``0 <= p < 1`` (AWD-LSTM's ``wdrop=0.5``).
        weights: names of the parameters to drop; ``("weight_hh_l0",)`` by default.
    """

    def __init__(self, module: nn.Module, p: float, weights=("weight_hh_l0",)):
        super().__init__()
        if not isinstance(module, nn.Module):
            raise TypeError(f"WeightDrop wraps an nn.Module, got {type(module).__name__}: "
                            "pass e.g. nn.LSTM(400, 1150).")
        names = (weights,) if isinstance(weights, str) else tuple(weights)
        own = dict(module.named_parameters())
        if not names:
            raise ValueError("WeightDrop got no weight names: pass e.g. weights=('weight_hh_l0',).")
        for name in names:
            if name not in own:
                raise ValueError(f"{type(module).__name__} has no parameter {name!r} to drop: "
                                 f"choose among {sorted(own)}.")
        self.module = module
        self.p = check_probability(p)
        self.weights = names

    @property
    def raw_weights(self) -> dict:
        """The stored (never dropped) weights, by name."""
        return {name: self.module.get_parameter(name) for name in self.weights}

    def __getattr__(self, name: str):
        try:
            return super().__getattr__(name)
        except AttributeError:
            base = name[: -len("_raw")]
            if name.endswith("_raw") and base in self.__dict__.get("weights", ()):
                return self.module.get_parameter(base)
            raise

    def sample_weights(self) -> dict:
        r"""Draw :math:`\tilde W = M \odot W / (1-p)` for every dropped weight (one mask each)."""
        return {name: w * _bernoulli_mask(w, w.shape, self.p) for name, w in self.raw_weights.items()}

    def forward(self, input, hx=None):
        """``(output, (h_n, c_n))`` of the wrapped module, run with freshly dropped weights."""
        if not self.training or self.p == 0.0:
            return self.module(input, hx)
        with warnings.catch_warnings():  # cuDNN: a dropped weight is a fresh tensor, never in the module's flat block
            warnings.filterwarnings("ignore", message=".*contiguous chunk of memory.*")
            return functional_call(self.module, self.sample_weights(), (input, hx))

    def extra_repr(self) -> str:
        return f"p={self.p}, weights={self.weights}"
