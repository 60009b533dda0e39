r"""One interface for every language model, the contract a neural one adds, and the measures that take any of them.

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

The neural-model contract
-------------------------
A *neural* language model is a ``torch.nn.Module`` that is also a :class:`LanguageModel` and can
be trained (:class:`~lmcourse.training.trainer.Trainer`), stored
(:func:`~lmcourse.training.checkpoint.save_checkpoint`), wrapped by a neural cache
(:class:`~lmcourse.adapt.cache.NeuralCache`) and adapted by dynamic evaluation
(:class:`~lmcourse.adapt.dyneval.DynamicEval`). Those four ask :func:`check_neural`, never for a
class. The model provides:

- ``kind`` (a class attribute, a short name such as ``"rnnlm"``), registered with
  ``register_model(kind, build, config=ConfigClass)``, where ``build(settings: dict) -> model`` makes a fresh
  model from ``config.as_dict()`` and ``ConfigClass`` is the config's dataclass. A checkpoint, a run directory's
  ``config.json`` and a command-line run's ``preset.json`` store ``kind`` and the settings, and everything that
  reads them rebuilds through this registry (a record without ``kind`` holds an ``"rnnlm"``).
- ``config``: its settings, with ``vocab_size`` and ``as_dict()`` (plain, JSON-serialisable data).
- ``vocab`` (a :class:`~lmcourse.vocab.Vocab` or None), ``eos`` (the id of ``<eos>``), ``device``.
- ``forward(x, state)``: ``x`` (T, B) token ids, ``state`` from ``init_state``, a previous
  forward or None (fresh); returns an object with ``.logits`` (T, B, V) (log-probabilities when
  ``returns_log_probs`` is True), ``.h`` (T, B, E), the vector a neural cache stores for each
  position, and ``.state``, the state after reading ``x``. Optional ``.outputs`` and
  ``.raw_outputs`` (lists of (T, B, H)) are what AR and TAR read; without them the model trains
  only with ``alpha = beta = 0``.
- ``init_state(batch_size)``: the state before anything is read; ``detach_state(state)``: the same
  state with the autograd graph behind it cut (truncated BPTT). A state is any nesting of
  tuples and lists of tensors whose batch dimension is dim 1 (an LSTM's (h, c) per layer; a
  Transformer's last keys and values).
- ``returns_log_probs``: True when ``.logits`` already are log-probabilities (a mixture of softmaxes).
- the :class:`LanguageModel` calls and ``stream(tokens, bptt) -> iterator of (logits (t, V), h (t, E))``,
  covering the stream in order after the implicit leading ``<eos>``, state carried across chunks.

Training calls ``forward`` in training mode (dropout on); everything else in evaluation mode.
Dynamic evaluation differentiates a copy of the model in evaluation mode through
``torch.func.functional_call``, so ``forward`` must read its weights from its parameters (a cached
copy would not adapt); torch's recurrent layers in it are handled (cuDNN's blocks re-flattened).

:class:`lmcourse.networks.base.NeuralLM` implements ``device``, ``eos``, ``stream``, ``score``, the
step calls (with ``step_outputs``, what the cache reads at a step), ``reorder`` and
``num_parameters`` from ``forward`` and ``init_state``.

How to add a model: write one module under ``lmcourse/networks/``, and nothing else.

1. In it, a config dataclass with ``vocab_size``, ``as_dict()`` and a default for every other field (those
   defaults are what ``python -m lmcourse train --kind KIND`` trains), and a subclass of ``NeuralLM`` with a
   class attribute ``kind``;
2. ``forward(x, state)`` returning ``.logits``, ``.h`` and ``.state``, ``init_state`` and ``detach_state``
   (override ``reorder`` if the state's batch dimension is not dim 1);
3. at the module's end, ``register_model(YourLM.kind, lambda settings: YourLM(YourConfig(**settings)),
   config=YourConfig)``.

No import line is needed anywhere: importing :mod:`lmcourse.networks` imports every module in its folder (as
the run registry walks its runs), so the kind is registered wherever a model is trained, stored or loaded. The
model then trains (:class:`~lmcourse.training.trainer.Trainer`; ``python -m lmcourse train --kind KIND --set
epochs=N``), is stored and rebuilt from a checkpoint, a run directory or a lesson's stored run
(:func:`~lmcourse.store.stored_runs.train_or_load`), resumes exactly, generates text, and is scored under the
cache and dynamic evaluation (``python -m lmcourse evaluate RUN_DIR --cache --dyneval``). ``check_neural(model,
purpose)`` names what it lacks for each purpose; ``tests/test_contract.py`` takes a GRU written in the test and
the fixed-window MLP of :mod:`lmcourse.networks.window` (whose state is token ids) through all of it.
"""
from __future__ import annotations

import math
import sys
from typing import Callable, Optional

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


MAX_LOG = math.log(sys.float_info.max)  # about 709.78: exp of more is past the largest float


def perplexity_from_nll(nll: float) -> float:
    r"""Perplexity from a mean negative log-likelihood in nats, :math:`e^{\mathrm{nll}}`; ``inf`` past the
    largest float (``nll`` above about 709.78) and for an infinite ``nll``; NaN stays NaN."""
    nll = float(nll)
    return math.exp(nll) if nll < MAX_LOG else (math.inf if nll >= MAX_LOG else math.nan)


def perplexity(model: LanguageModel, tokens) -> float:
    r"""Perplexity :math:`\exp(-\frac{1}{N}\sum_t \log p(x_t \mid x_{<t}))`; ``inf`` past the largest float."""
    return perplexity_from_nll(mean_nll(model, tokens))


def bits_per_char(model: LanguageModel, tokens) -> float:
    r"""Bits per character :math:`-\frac{1}{N}\sum_t \log_2 p(x_t \mid x_{<t})` for a character model."""
    return mean_nll(model, tokens) / math.log(2)


# ------------------------------------------------------------------ the neural-model contract

MODELS: dict[str, Callable[[dict], object]] = {}  # kind -> build(settings) -> a fresh model
CONFIGS: dict[str, type] = {}  # kind -> its config dataclass, for those registered with one (the presets read it)


def register_model(kind: str, build: Callable[[dict], object], config: Optional[type] = None) -> None:
    """Make records of ``kind`` rebuild through ``build(settings) -> model`` (see the module docstring);
    ``config``: the dataclass whose fields ``settings`` holds, which a run's settings, its ``config.json`` and
    the command line read (without it the kind trains and checkpoints, but has no settings of its own)."""
    if not isinstance(kind, str) or not kind:
        raise ValueError(f"A model kind is a non-empty string such as 'rnnlm', got {kind!r}.")
    if not callable(build):
        raise TypeError(f"register_model({kind!r}, build) needs a callable build(settings) -> model, "
                        f"got {type(build).__name__}.")
    MODELS[kind] = build
    if config is not None:
        CONFIGS[kind] = config


def model_config_class(kind: str) -> type:
    """The config dataclass registered for ``kind``; one ValueError sentence if there is none."""
    model_builder(kind)
    if kind not in CONFIGS:
        raise ValueError(f"The model kind {kind!r} was registered without its config class: pass config= to "
                         "lmcourse.lm.register_model so that presets can name its fields.")
    return CONFIGS[kind]


def model_builder(kind: str) -> Callable[[dict], object]:
    """The ``build`` registered for ``kind``; one ValueError sentence naming the known kinds if none."""
    if kind not in MODELS:
        known = ", ".join(sorted(MODELS)) or "none"
        raise ValueError(f"No model of kind {kind!r} is registered (known: {known}): put the module that defines it "
                         "in lmcourse/networks/ (or import it first); it calls lmcourse.lm.register_model.")
    return MODELS[kind]


# What each purpose reads of a model: attribute -> what it is, for the one sentence of check_neural.
_CORE = {"config": "config (settings with vocab_size and as_dict())", "forward": "forward(x, state)",
         "init_state": "init_state(batch_size)", "detach_state": "detach_state(state)"}
NEEDS = {
    "train": {**_CORE, "returns_log_probs": "returns_log_probs", "vocab": "vocab"},
    "checkpoint": {"kind": "kind (a registered model kind)", **_CORE, "vocab": "vocab"},
    "cache": {"vocab": "vocab", "stream": "stream(tokens) yielding (logits, h) chunks"},
    "dyneval": {**_CORE, "vocab": "vocab", "eos": "eos", "stream": "stream(tokens)"},
}
WHO = {"train": "Trainer trains a neural language model", "checkpoint": "A checkpoint stores a neural language model",
       "cache": "NeuralCache wraps a model with a stream(tokens) method yielding (logits, h) chunks and a vocab",
       "dyneval": "DynamicEval adapts a neural language model"}
MODULE_PURPOSES = ("train", "checkpoint", "dyneval")  # those that need a torch.nn.Module


def _missing(model, purpose: str) -> list:
    missing = []
    for name, what in NEEDS[purpose].items():
        try:
            present = hasattr(model, name)
        except Exception:  # a property that cannot answer yet (eos without a vocab) is there
            present = True
        if not present:
            missing.append(what)
    config = getattr(model, "config", None)
    if "config" in NEEDS[purpose] and config is not None and not (
            hasattr(config, "vocab_size") and callable(getattr(config, "as_dict", None))):
        missing.append(_CORE["config"])
    return missing


def check_neural(model, purpose: str) -> None:
    """Raise one TypeError sentence naming what ``model`` lacks of the contract for ``purpose``
    (``"train"``, ``"checkpoint"``, ``"cache"`` or ``"dyneval"``); return None when it has it all."""
    if purpose not in NEEDS:
        raise ValueError(f"check_neural(purpose={purpose!r}) is unknown: use one of {', '.join(NEEDS)}.")
    name = type(model).__name__
    how = "wrap a neural LM or a DynamicEval" if purpose == "cache" else "subclass lmcourse.networks.base.NeuralLM"
    if purpose in MODULE_PURPOSES and not isinstance(model, torch.nn.Module):
        raise TypeError(f"{WHO[purpose]} (a torch.nn.Module keeping the contract of lmcourse.lm), got {name}: {how}.")
    missing = _missing(model, purpose)
    if purpose == "checkpoint" and not missing and getattr(model, "kind", None) not in MODELS:
        missing.append(f"a registered kind ({getattr(model, 'kind', None)!r} is not; call lmcourse.lm.register_model)")
    if missing:
        raise TypeError(f"{WHO[purpose]}, but {name} lacks {', '.join(missing)}: see the contract in lmcourse.lm, "
                        f"or {how}.")
