r"""A small decoder-only Transformer language model, read through a window.

For a token stream the model computes (Vaswani et al. 2017, Section 3, with the layer norm moved in
front of each sublayer, "pre-norm", as in Xiong et al. 2020)

.. math::

    x^{(0)}_t = \sqrt{E}\, e_{x_t} + P_t, \qquad
    u_t = x^{(\ell-1)}_t + \mathrm{Attn}_\ell\big(\mathrm{LN}(x^{(\ell-1)})\big)_t, \qquad
    x^{(\ell)}_t = u_t + W_2\,\mathrm{GELU}(W_1\,\mathrm{LN}(u_t) + c_1) + c_2,

    p(x_{t+1} \mid x_{\le t}) = \operatorname{softmax}(W\, \mathrm{LN}(x^{(L)}_t) + b),

with :math:`e_w` the word vectors (E numbers each, the rows of the embedding), :math:`W` those same
rows when tied (Press & Wolf 2017; Inan et al. 2017; with ``head_size`` d, read through a map to d
numbers as in :class:`~lmcourse.networks.heads.SoftmaxHead`), and dropout on the embeddings and on
each sublayer's output before it is added. Each position attends to itself
and the ``window`` positions before it (:mod:`lmcourse.networks.attention`). Positions are either
``sinusoidal`` (the word vectors scaled by :math:`\sqrt{E}` so that the positions do not drown them),
:math:`P_{t,2i} = \sin(t / 10000^{2i/E})`, :math:`P_{t,2i+1} = \cos(t / 10000^{2i/E})`
of the position :math:`t` in the stream (Vaswani et al. 2017, Section 3.5), or ``learned``: no
:math:`P` and no scaling, and instead a learned bias per head and distance :math:`b_{t-i}` added to
the attention scores (relative positions, in the spirit of Dai et al. 2019), which a stream of any
length can use.

**State.** An LSTM carries (h, c); this model carries what it may still attend to: for each layer the
normalised inputs of the last ``window`` positions (keys and values are computed from them), and the
stream position of the next token. So reading a stream in chunks gives the same numbers as reading
it whole, and truncated backpropagation through time works as for the LSTM (the remembered inputs
are detached between windows).

**Stream position.** The position :math:`t` a token gets is its place in its column of the stream since
the state began: ``init_state`` starts every column at 0, and each chunk read moves it on by the
chunk's length (the trainer starts a fresh state every epoch; ``score`` one per call). It is not
bounded: the Penn Treebank's test text scored as one stream reaches 82,430. The sinusoid's angles
stay accurate at any position (:func:`sinusoidal_positions` reduces whole blocks of :data:`PHASE_BLOCK`
positions modulo :math:`2\pi` in float64) and are computed in the model's dtype (float64 for a
float64 model; float32 for a float32, bfloat16 or float16 one).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import NamedTuple, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..lm import register_model
from .attention import ATTENTIONS, CausalSelfAttention, allowed_positions
from .base import NeuralLM
from .heads import SoftmaxHead

__all__ = ["TransformerConfig", "TransformerLM", "TransformerState", "TransformerOutput", "sinusoidal_positions",
           "POSITIONS", "PHASE_BLOCK"]

POSITIONS = ("sinusoidal", "learned")
# Positions per block of sinusoidal_positions: below it the angle t * omega is computed directly in the model's
# dtype, above it the whole blocks' phase is reduced modulo 2 pi first. 4,096 covers the positions a lesson-sized
# stream reaches in training (the course model's 40,011 training tokens in 10 columns: 4,001 per column).
PHASE_BLOCK = 4096


@dataclass
class TransformerConfig:
    """Everything that defines a :class:`TransformerLM`; plain types only, so it saves as a dict.

    ``emb_size`` E is the model's width (embedding, attention, residual stream); ``ffn_size`` the
    feed-forward layer's inner width; ``window`` the positions before each token that it may attend
    to; ``head_size`` and ``vector_size`` as for the recurrent model's softmax head
    (:class:`lmcourse.networks.models.LMConfig`). ``attention``: ``fused`` or ``equations``.
    """

    vocab_size: int
    emb_size: int = 64
    num_layers: int = 1
    n_heads: int = 4
    ffn_size: int = 128
    window: int = 35
    positions: str = "sinusoidal"
    dropout: float = 0.1
    attn_dropout: float = 0.0
    tie: bool = True
    head_size: Optional[int] = None
    vector_size: Optional[int] = None
    init_range: float = 0.1
    attention: str = "fused"

    def __post_init__(self):
        for name in ("vocab_size", "emb_size", "num_layers", "n_heads", "ffn_size", "window"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"TransformerConfig.{name} must be a positive integer, got {value!r}.")
        for name in ("head_size", "vector_size"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ValueError(f"TransformerConfig.{name} must be a positive integer or None, got {value!r}.")
        if self.emb_size % self.n_heads:
            raise ValueError(f"TransformerConfig.emb_size={self.emb_size} does not split into n_heads={self.n_heads} "
                             "heads: pick n_heads dividing emb_size.")
        for name in ("dropout", "attn_dropout"):
            p = getattr(self, name)
            if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p < 1.0:
                raise ValueError(f"TransformerConfig.{name}={p!r} is not a dropout probability: "
                                 "give a number in [0, 1).")
        if self.positions not in POSITIONS:
            raise ValueError(f"TransformerConfig.positions={self.positions!r} is unknown: "
                             "use 'sinusoidal' or 'learned'.")
        if self.attention not in ATTENTIONS:
            raise ValueError(f"TransformerConfig.attention={self.attention!r} is unknown: use 'fused' or 'equations'.")
        if not isinstance(self.tie, bool):
            raise ValueError(f"TransformerConfig.tie must be True or False, got {self.tie!r}.")
        r = self.init_range
        if isinstance(r, bool) or not isinstance(r, (int, float)) or not (math.isfinite(r) and r > 0):
            raise ValueError(f"TransformerConfig.init_range must be a finite number > 0, got {r!r}.")
        if self.tie and self.vector_size not in (None, self.emb_size):
            raise ValueError(f"A tied decoder's word vectors are the embedding's {self.emb_size} numbers, but "
                             f"vector_size={self.vector_size}: leave vector_size unset or set tie=False.")

    def as_dict(self) -> dict:
        return asdict(self)


class TransformerState(NamedTuple):
    """What the model may still attend to: per layer the normalised inputs of the last ``window``
    positions, each (M, B, E) with M <= window, and ``position`` (1, B), the next token's place in the stream."""

    past: list
    position: torch.Tensor


class TransformerOutput(NamedTuple):
    """What :meth:`TransformerLM.forward` returns (the fields the recurrent model's output has)."""

    logits: torch.Tensor  # (T, B, V)
    h: torch.Tensor  # (T, B, E): the last layer's normalised output, the vector a neural cache stores
    state: TransformerState
    raw_outputs: list  # each block's output, (T, B, E)
    outputs: list  # the same (the residual stream is not dropped out as a whole)


def sinusoidal_positions(t: torch.Tensor, size: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    r""":math:`P_{t,2i} = \sin(t\,\omega_i)`, :math:`P_{t,2i+1} = \cos(t\,\omega_i)`,
    :math:`\omega_i = 10000^{-2i/E}`, for the integer stream positions ``t`` (T, B): (T, B, ``size``) in ``dtype``.

    The angles are computed in ``dtype`` (float64 for a float64 model), with the position split as
    :math:`t = qP + r`, :math:`0 \le r < P` (:data:`PHASE_BLOCK`): :math:`r\,\omega_i` in ``dtype``, plus the
    phase :math:`qP\,\omega_i` reduced modulo :math:`2\pi` (the sine's own period) in float64. That is the
    angle :math:`t\,\omega_i` less whole turns, so the sines are the same, but ``dtype`` never multiplies a
    position of :math:`P` or more, and a long stream keeps accurate angles: in float32 at most about 1.5e-4
    radians off at any position (measured against 40-digit arithmetic; the direct float32 product is about
    3e-3 off near position 82,430, where the Penn Treebank test text read as one stream ends, and 0.03 at a
    million), in float64 about :math:`t \cdot 10^{-16}`. Below :math:`P` the angle is the direct product
    :math:`t\,\omega_i` bit for bit."""
    omega = torch.exp(torch.arange(0, size, 2, device=t.device, dtype=dtype) * (-math.log(10000.0) / size))
    omega64 = torch.exp(torch.arange(0, size, 2, device=t.device, dtype=torch.float64) * (-math.log(10000.0) / size))
    q, r = t.div(PHASE_BLOCK, rounding_mode="floor"), t.remainder(PHASE_BLOCK)  # (T, B) each
    phase = ((q * PHASE_BLOCK).unsqueeze(-1).to(torch.float64) * omega64).remainder(2 * math.pi)  # (T, B, ceil(E/2))
    angle = r.unsqueeze(-1).to(dtype) * omega + phase.to(dtype)  # + 0 below P: the direct product, unchanged
    return torch.stack([angle.sin(), angle.cos()], dim=-1).flatten(-2)[..., :size]  # (T, B, E)


class DistanceBias(nn.Module):
    r"""The learned relative positions: a bias :math:`b_{h, t-i}` per head and distance 0 .. window."""

    def __init__(self, n_heads: int, window: int):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(n_heads, window + 1))  # (n, window + 1)

    def forward(self, T: int, M: int) -> torch.Tensor:  # -> (n, T, M + T)
        query = torch.arange(T, device=self.bias.device).view(-1, 1) + M  # (T, 1)
        distance = (query - torch.arange(M + T, device=self.bias.device)).clamp(0, self.bias.size(1) - 1)  # (T, S)
        return self.bias[:, distance]  # masked positions are set to -inf by the mask


class FeedForward(nn.Module):
    r""":math:`W_2\,\mathrm{GELU}(W_1 x + c_1) + c_2`, applied at each position alone."""

    def __init__(self, size: int, inner: int):
        super().__init__()
        self.w1, self.w2 = nn.Linear(size, inner), nn.Linear(inner, size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (T, B, E) -> (T, B, E)
        return self.w2(F.gelu(self.w1(x)))


class Block(nn.Module):
    r"""One pre-norm block: :math:`u = x + \mathrm{Attn}(\mathrm{LN}(x))`,
    :math:`x' = u + \mathrm{FFN}(\mathrm{LN}(u))`."""

    def __init__(self, config: TransformerConfig):
        super().__init__()
        E = config.emb_size
        self.ln_attn, self.ln_ffn = nn.LayerNorm(E), nn.LayerNorm(E)
        self.attn = CausalSelfAttention(E, config.n_heads, config.attn_dropout, config.attention)
        self.ffn = FeedForward(E, config.ffn_size)
        self.drop = nn.Dropout(config.dropout)
        self.distance = DistanceBias(config.n_heads, config.window) if config.positions == "learned" else None

    def forward(self, x: torch.Tensor, past: torch.Tensor, allowed: torch.Tensor):  # (T, B, E) -> (T, B, E), (T, B, E)
        """The block's output and its normalised input (what later positions attend to)."""
        a = self.ln_attn(x)  # (T, B, E)
        bias = None if self.distance is None else self.distance(x.size(0), past.size(0))
        u = x + self.drop(self.attn(a, past, allowed, bias))
        return u + self.drop(self.ffn(self.ln_ffn(u))), a


class TransformerLM(NeuralLM):
    """The decoder-only Transformer of lesson 10 (see the module docstring for the equations); the
    :class:`~lmcourse.networks.base.NeuralLM` base turns ``forward`` and ``init_state`` into the whole
    language-model interface (its state's batch dimension is dim 1 of every tensor, as ``reorder`` expects)."""

    kind = "transformer"

    def __init__(self, config: TransformerConfig):
        super().__init__()
        if not isinstance(config, TransformerConfig):
            raise TypeError(f"TransformerLM needs a TransformerConfig, got {type(config).__name__}: "
                            "build one with TransformerConfig(vocab_size=...).")
        self.config = config
        self.name = f"Transformer {config.num_layers}x{config.emb_size}, {config.n_heads} heads"
        self.vocab = None
        self.embedding = nn.Embedding(config.vocab_size, config.emb_size)
        nn.init.uniform_(self.embedding.weight, -config.init_range, config.init_range)
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.num_layers))
        self.ln_out = nn.LayerNorm(config.emb_size)
        tied = self.embedding.weight if config.tie else None
        self.head = SoftmaxHead(config.emb_size, config.vocab_size, config.init_range, tied, config.head_size,
                                config.vector_size)

    # ------------------------------------------------------------------ forward and state

    def embed(self, x: torch.Tensor, position: torch.Tensor) -> torch.Tensor:  # (T, B), (1, B) -> (T, B, E)
        """Word vectors, plus the sinusoidal positions of their places in the stream when the model uses them."""
        e = self.embedding(x)  # (T, B, E)
        if self.config.positions == "sinusoidal":  # word vectors scaled by sqrt(E), as in Vaswani et al. 2017, 3.4
            t = position + torch.arange(x.size(0), device=x.device).view(-1, 1)  # (T, B)
            angles = torch.promote_types(e.dtype, torch.float32)  # the model's dtype; float32 at least for half ones
            e = e * math.sqrt(self.config.emb_size) + sinusoidal_positions(t, self.config.emb_size, angles).to(e.dtype)
        return self.drop(e)

    def forward(self, x: torch.Tensor, state: Optional[TransformerState] = None) -> TransformerOutput:
        """Read ``x`` (T, B) after ``state`` (a fresh stream when None); see :class:`TransformerOutput`."""
        state = self.begin(x, state)
        T, M = x.size(0), state.past[0].size(0)
        allowed = allowed_positions(T, M, self.config.window, x.device)  # (T, M + T)
        h = self.embed(x, state.position)  # (T, B, E)
        outputs, past = [], []
        for block, remembered in zip(self.blocks, state.past):
            h, normed = block(h, remembered, allowed)
            outputs.append(h)
            past.append(torch.cat([remembered, normed])[-self.config.window:])  # (<= window, B, E)
        g = self.ln_out(h)  # (T, B, E)
        new_state = TransformerState(past, state.position + T)
        return TransformerOutput(self.head(g), g, new_state, outputs, outputs)

    def init_state(self, batch_size: int) -> TransformerState:
        """Nothing remembered, at position 0 of every row; on the model's device and dtype."""
        w = self.embedding.weight
        past = [w.new_zeros(0, batch_size, self.config.emb_size) for _ in self.blocks]
        return TransformerState(past, torch.zeros(1, batch_size, dtype=torch.long, device=w.device))

    @staticmethod
    def detach_state(state: TransformerState) -> TransformerState:
        """Cut the graph behind the remembered inputs (truncated backpropagation through time)."""
        return TransformerState([p.detach() for p in state.past], state.position)

    def attention_weights(self, keep: bool = True) -> None:
        """Make every head keep its last attention weights (``block.attn.weights``), read on the equations path."""
        for block in self.blocks:
            block.attn.keep_weights = keep
            block.attn.weights = None


def count_parameters(config: TransformerConfig) -> int:
    """The parameters of ``TransformerLM(config)``, counted on the meta device (no memory used)."""
    with torch.device("meta"):
        return TransformerLM(config).num_parameters()


register_model(TransformerLM.kind, lambda settings: TransformerLM(TransformerConfig(**settings)),
               config=TransformerConfig)
