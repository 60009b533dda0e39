r"""The recurrent language model: embedding, a stack of LSTM layers, an output head.

For a token stream :math:`x_1 \dots x_T` the model computes

.. math::

    e_t = E[x_t], \qquad h^{(\ell)}_t = \mathrm{LSTM}_\ell(h^{(\ell-1)}_t, h^{(\ell)}_{t-1}),
    \qquad p(x_{t+1} \mid x_{\le t}) = \operatorname{softmax}(W g_t + b),

with :math:`h^{(0)}_t = e_t` and :math:`g_t` the last layer's output after output dropout. The
layers are separate single-layer LSTMs so that each can be wrapped by weight drop and every
intermediate output can be seen (the AWD-LSTM layout, Merity et al. 2018). Layer 0
maps the embedding size E to the hidden size H, middle layers H to H, and the last layer H to E when
the decoder is tied to the embedding (Press & Wolf 2016; Inan et al. 2016), else H to H.

The forward pass applies the regularisers in the AWD-LSTM order (awd-lstm-lm code, ``model.py``): embedding dropout
over word types (training only), dropout on the embeddings (``dropouti``), each layer with dropout
between layers (``dropouth``), dropout on the last output (``dropout``), then the head.

The head (:mod:`lmcourse.networks.heads`) is a small module ``forward(g (T, B, E_last)) -> logits (T, B, V)``:
``softmax``, a linear decoder, or ``mos``, the mixture of softmaxes (:mod:`lmcourse.networks.mos`), which returns
log-probabilities (``log_softmax`` leaves them unchanged).
"""
from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass
from typing import NamedTuple, Optional

import torch
import torch.nn as nn

from ..lm import register_model
from . import dropout as _dropout
from . import mos  # noqa: F401 (registers the "mos" head)
from .base import NeuralLM, inference, log_softmax  # noqa: F401 (the last two: re-exported for the lessons)
from .dropout import make_dropout
from .heads import HEADS, SoftmaxHead, build_head, head_names, known_head, register_head, up_map  # noqa: F401
from .lstm import LSTM as EquationsLSTM

CELLS = ("fast", "equations")
DROPOUT_KINDS = ("locked", "standard")
DROPOUT_FIELDS = ("dropout", "dropouth", "dropouti", "dropoute", "wdrop", "dropoutl", "dropoutr")
MOS_LATENTS = ("tanh", "linear")


@dataclass
class LMConfig:
    """Everything that defines an :class:`RNNLM`; plain types only, so it saves as a dict.

    Defaults are the AWD-LSTM sizes (emb 400, hidden 1150, 3 layers; Merity et al. 2018) with every
    regulariser off. ``last_size`` is the last layer's output size (default: E when tied, else H);
    ``n_experts`` and ``dropoutl`` are read only by the ``mos`` head (Yang et al. 2018).
    ``head_size`` is :math:`d`, the size of the vectors the head's softmaxes compare with the word
    vectors: the softmax head first maps the last layer's output linearly to ``head_size`` numbers (a
    softmax of rank :math:`d` after a wide network; None: no map, :math:`d` = ``last_size``), the
    ``mos`` head's latent contexts get ``head_size`` numbers each (None: E). ``mos_latent``: the
    latent contexts' activation, ``tanh`` as in Yang et al. (2018) or ``linear``. ``vector_size``: the
    size of an untied decoder's word vectors (None: :math:`d`); wider than :math:`d`, the head reads
    them through a learned map, as a tied head of :math:`d` < E reads the embedding's.
    ``dropoutr`` drops units of the recurrent connection :math:`h_{t-1}` inside every layer's loop, with one
    mask per sequence (``recurrent_kind="locked"``, Gal & Ghahramani 2016) or a fresh one per step
    (``"step"``); only the from-the-equations cell (``cell="equations"``) can, not cuDNN's.
    """

    vocab_size: int
    emb_size: int = 400
    hidden_size: int = 1150
    num_layers: int = 3
    cell: str = "fast"
    tie: bool = False
    dropout: float = 0.0
    dropouth: float = 0.0
    dropouti: float = 0.0
    dropoute: float = 0.0
    wdrop: float = 0.0
    dropout_kind: str = "locked"
    dropoutr: float = 0.0
    recurrent_kind: str = "locked"
    init_range: float = 0.1
    head: str = "softmax"
    last_size: Optional[int] = None
    n_experts: int = 1
    dropoutl: float = 0.0
    head_size: Optional[int] = None
    mos_latent: str = "tanh"
    vector_size: Optional[int] = None

    def __post_init__(self):
        for name in ("vocab_size", "emb_size", "hidden_size", "num_layers", "n_experts"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"LMConfig.{name} must be a positive integer, got {value!r}.")
        if self.cell not in CELLS:
            raise ValueError(f"LMConfig.cell={self.cell!r} is not a cell: use 'fast' (torch.nn.LSTM) "
                             "or 'equations' (lmcourse.networks.lstm.LSTM).")
        if self.dropout_kind not in DROPOUT_KINDS:
            raise ValueError(f"LMConfig.dropout_kind={self.dropout_kind!r} is unknown: use 'locked' or 'standard'.")
        for name in DROPOUT_FIELDS:
            p = getattr(self, name)
            if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p < 1.0:
                raise ValueError(f"LMConfig.{name}={p!r} is not a dropout probability: give a number in [0, 1).")
        if self.recurrent_kind not in _dropout.RECURRENT_KINDS:
            raise ValueError(f"LMConfig.recurrent_kind={self.recurrent_kind!r} is unknown: use 'locked' (one mask "
                             "on h_(t-1) per sequence) or 'step' (a fresh mask at every step).")
        if self.dropoutr > 0 and self.cell == "fast":
            raise ValueError(f"LMConfig.dropoutr={self.dropoutr} drops units of h_(t-1) inside the LSTM's loop, which "
                             "the fast (cuDNN) cell cannot do: set cell='equations' or dropoutr=0.")
        r = self.init_range
        if isinstance(r, bool) or not isinstance(r, (int, float)) or not (math.isfinite(r) and r > 0):
            raise ValueError(f"LMConfig.init_range must be a finite number > 0, got {r!r}.")
        if not isinstance(self.tie, bool):
            raise ValueError(f"LMConfig.tie must be True or False, got {self.tie!r}.")
        if self.last_size is not None and (isinstance(self.last_size, bool) or not isinstance(self.last_size, int)
                                           or self.last_size < 1):
            raise ValueError(f"LMConfig.last_size must be a positive integer or None, got {self.last_size!r}.")
        if not isinstance(self.head, str) or not known_head(self.head):
            raise ValueError(f"LMConfig.head={self.head!r} is unknown: use one of {', '.join(head_names())}.")
        if self.head_size is not None and (isinstance(self.head_size, bool) or not isinstance(self.head_size, int)
                                           or self.head_size < 1):
            raise ValueError(f"LMConfig.head_size must be a positive integer or None, got {self.head_size!r}.")
        if self.vector_size is not None and (isinstance(self.vector_size, bool) or not isinstance(self.vector_size, int)
                                             or self.vector_size < 1):
            raise ValueError(f"LMConfig.vector_size must be a positive integer or None, got {self.vector_size!r}.")
        if self.tie and self.vector_size not in (None, self.emb_size):
            raise ValueError(f"A tied decoder's word vectors are the embedding's {self.emb_size} numbers, but "
                             f"vector_size={self.vector_size}: leave vector_size unset or set tie=False.")
        if self.mos_latent not in MOS_LATENTS:
            raise ValueError(f"LMConfig.mos_latent={self.mos_latent!r} is unknown: use 'tanh' or 'linear'.")
        if self.last_size is None:
            self.last_size = self.emb_size if self.tie and self.head_size is None else self.hidden_size
        if self.tie and self.head == "softmax" and self.head_size is None and self.last_size != self.emb_size:
            raise ValueError(f"A tied softmax needs the decoder's input to have emb_size={self.emb_size} numbers, "
                             f"but last_size={self.last_size}: leave last_size unset or set tie=False.")

    def layer_sizes(self) -> list[tuple[int, int]]:
        """(input, output) size of each LSTM layer: E->H, H->H, ..., H->last."""
        inputs = [self.emb_size] + [self.hidden_size] * (self.num_layers - 1)
        outputs = [self.hidden_size] * (self.num_layers - 1) + [self.last_size]
        return list(zip(inputs, outputs))

    def as_dict(self) -> dict:
        return asdict(self)


class LMOutput(NamedTuple):
    """What :meth:`RNNLM.forward` returns."""

    logits: torch.Tensor  # (T, B, V)
    h: torch.Tensor  # (T, B, E_last): last layer's output before output dropout
    state: list  # [(h, c)] per layer, each (1, B, H_l)
    raw_outputs: list  # per-layer outputs before dropout, each (T, B, H_l)
    outputs: list  # per-layer outputs after dropout, each (T, B, H_l)


# ----------------------------------------------------------------------------- building blocks

def make_lstm(input_size: int, hidden_size: int, cell: str, wdrop: float, dropoutr: float = 0.0,
              recurrent_kind: str = "locked") -> nn.Module:
    """One single-layer LSTM, wrapped by weight drop on :math:`W_{hh}` when ``wdrop > 0``; ``dropoutr``: dropout
    on :math:`h_{t-1}` inside the from-the-equations cell (``recurrent_kind`` 'locked' or 'step')."""
    if cell == "fast":
        rnn = nn.LSTM(input_size, hidden_size, 1)
    else:
        rnn = EquationsLSTM(input_size, hidden_size, 1, dropoutr=dropoutr, recurrent_kind=recurrent_kind)
    return _dropout.WeightDrop(rnn, wdrop) if wdrop > 0 else rnn


# ----------------------------------------------------------------------------------- the model

def count_parameters(config: LMConfig) -> int:
    r"""The parameters of ``RNNLM(config)`` with a softmax head, from the sizes alone (no tensor made):
    :math:`VE + \sum_\ell 4(H_\ell(I_\ell + H_\ell) + 2H_\ell) + V\,H_{last} + V`, less :math:`VE` when tied."""
    lstm = sum(4 * (o * (i + o) + 2 * o) for i, o in config.layer_sizes())
    decoder = config.vocab_size * config.last_size + config.vocab_size
    tied = config.vocab_size * config.emb_size if config.tie and config.head == "softmax" else 0
    return config.vocab_size * config.emb_size + lstm + decoder - tied


def memory_bytes(device: torch.device) -> Optional[int]:
    """The memory of ``device`` (a GPU's, else the machine's); None when it cannot be told."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).total_memory
    if device.type != "cpu":
        return None
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # no sysconf (Windows)
        return None


def _too_big(config: LMConfig, have: Optional[int]) -> str:
    n = count_parameters(config)
    where = "the memory left" if have is None else f"the {have / 1e9:,.1f} GB of memory of this machine"
    return (f"The model has about {n:,} parameters, {4 * n / 1e9:,.1f} GB of weights before any gradient, more than "
            f"{where}: lower hidden_size, emb_size or num_layers.")


class RNNLM(NeuralLM):
    """The LSTM language model of the course (see the module docstring for the equations); a
    :class:`~lmcourse.networks.base.NeuralLM` of kind ``"rnnlm"``.

    A configuration whose weights alone exceed the memory of the device they would be made on is
    refused with one sentence before anything is allocated.
    """

    kind = "rnnlm"

    def __init__(self, config: LMConfig):
        super().__init__()
        if not isinstance(config, LMConfig):
            raise TypeError(f"RNNLM needs an LMConfig, got {type(config).__name__}: "
                            "build one with LMConfig(vocab_size=...).")
        have = memory_bytes(torch.empty(0).device)  # where tensors are made now (meta: no check)
        if have is not None and 4 * count_parameters(config) > have:
            raise ValueError(_too_big(config, have))
        try:
            self._build(config)
        except (RuntimeError, MemoryError) as error:  # torch.OutOfMemoryError is a RuntimeError
            text = str(error).lower()
            if isinstance(error, MemoryError) or "can't allocate" in text or "out of memory" in text:
                raise ValueError(_too_big(config, None)) from None
            raise

    def _build(self, config: LMConfig) -> None:
        self.config = config
        self.name = f"LSTM {config.num_layers}x{config.hidden_size}" + (" tied" if config.tie else "")
        self.vocab = None
        self.embedding = nn.Embedding(config.vocab_size, config.emb_size)
        nn.init.uniform_(self.embedding.weight, -config.init_range, config.init_range)
        self.rnns = nn.ModuleList(make_lstm(i, o, config.cell, config.wdrop, config.dropoutr, config.recurrent_kind)
                                  for i, o in config.layer_sizes())
        kind = config.dropout_kind
        self.drop_i = make_dropout(config.dropouti, kind)
        self.drop_h = make_dropout(config.dropouth, kind)
        self.drop_o = make_dropout(config.dropout, kind)
        self.head = build_head(config, self.embedding, config.last_size)

    # ------------------------------------------------------------------ forward and state

    def embed(self, x: torch.Tensor) -> torch.Tensor:  # (T, B) -> (T, B, E)
        """Embedding lookup, with whole word types dropped in training (``dropoute``, Merity et al. 2018)."""
        if self.training and self.config.dropoute > 0:
            return _dropout.embedding_dropout(self.embedding, x, self.config.dropoute, training=True)
        return self.embedding(x)

    def forward(self, x: torch.Tensor, state: Optional[list] = None) -> LMOutput:
        """Read ``x`` (T, B) from ``state`` (zeros when None); see :class:`LMOutput`."""
        state = self.begin(x, state)
        inp = self.drop_i(self.embed(x))  # (T, B, E)
        raw_outputs, outputs, new_state = [], [], []
        last = len(self.rnns) - 1
        for layer, rnn in enumerate(self.rnns):
            out, s = rnn(inp, state[layer])  # (T, B, H_l)
            raw_outputs.append(out)
            new_state.append(s)
            inp = self.drop_h(out) if layer < last else self.drop_o(out)
            outputs.append(inp)
        logits = self.head(inp)  # (T, B, V)
        return LMOutput(logits, raw_outputs[-1], new_state, raw_outputs, outputs)

    def init_state(self, batch_size: int) -> list:
        """Zero (h, c) for every layer, on the model's device and dtype."""
        w = self.embedding.weight
        return [(w.new_zeros(1, batch_size, o), w.new_zeros(1, batch_size, o)) for _, o in self.config.layer_sizes()]

    @staticmethod
    def detach_state(state: list) -> list:
        """Cut the graph behind the state (truncated backpropagation through time)."""
        return [(h.detach(), c.detach()) for h, c in state]

    @property
    def returns_log_probs(self) -> bool:
        """True when the head returns log-probabilities (the mixture of softmaxes), not logits."""
        return bool(getattr(self.head, "returns_log_probs", False))

    def num_parameters(self) -> int:
        r"""Trainable numbers, tied weights counted once.

        Per layer :math:`4(H(I+H) + 2H)`; embedding :math:`VE`; decoder :math:`V H_{last} + V`, less
        :math:`VE` when tied (PyTorch's LSTM has two bias vectors, ``b_ih`` and ``b_hh``).
        """
        return sum(p.numel() for p in self.parameters())


register_model(RNNLM.kind, lambda settings: RNNLM(LMConfig(**settings)), config=LMConfig)
