"""A run's settings, and the one adapter from them to a model and its training, for every model kind.

A run's settings are a flat dict in the config classes' field names:

- ``kind``, the model (registered with :func:`lmcourse.lm.register_model`; a dict that names none holds an
  ``rnnlm``, :mod:`.compat`), and the fields of the config class registered with it (for ``rnnlm``
  :class:`~lmcourse.networks.models.LMConfig`'s ``emb_size``, ``hidden_size``, ``num_layers``, ``tie``, ...);
- the fields of :class:`~lmcourse.training.trainconfig.TrainConfig` (``epochs``, ``batch_size``, ``bptt``,
  ``lr``, ``seed``, ...);
- :data:`RECIPE_FIELDS`, what neither holds: how to initialise, how a paper normalised its loss, how much
  data to read.

Anything else (a lesson's own knobs, its corpus variant under ``corpus`` as the fields of its
:class:`~lmcourse.corpora.grammar.Params`) is the caller's, and the adapter leaves it alone. :func:`configs`
turns such a dict into the model's config and the :class:`TrainConfig`, :func:`build` into a fresh model of
its kind. Every path that trains goes through them: the command line's presets and kinds
(:mod:`.presets`) and the lessons' runs. A lesson whose settings are laid out its own way (nested ``model``
and ``train`` additions, its own knobs) says once how they read as the flat dict, ``Adapter(fields)``.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable, Optional

import torch

from .. import networks  # noqa: F401 (the package imports each of its modules, so every model kind is registered)
from ..lm import model_builder, model_config_class
from .compat import kind_of
from .trainconfig import TrainConfig

__all__ = ["RECIPE_FIELDS", "NOT_SETTINGS", "kind_of", "field_names", "split", "model_config", "train_config",
           "configs", "build", "check", "Adapter"]

# name -> (type, default, meaning): the recipe fields that are neither a model config's nor TrainConfig's
RECIPE_FIELDS = {
    "kind": (str, "rnnlm", "the model kind the recipe trains (registered with lmcourse.lm.register_model)"),
    "init_all": (bool, False, "initialise every parameter uniformly in [-init_range, init_range], "
                              "the LSTM's included (else only the embedding and decoder)"),
    "loss_sum_over_time": (bool, False, "the paper's loss sums over the window's steps: lr and clip are "
                                        "converted for the trainer's per-token mean"),
    "train_tokens": (Optional[int], None, "read only the first N training tokens (None: all)"),
    "valid_tokens": (Optional[int], None, "validate on the first N validation tokens (None: all)"),
    "test_tokens": (Optional[int], None, "test on the first N test tokens (None: all)"),
}
# TrainConfig fields that are about where a run writes and what it shows, not about the recipe
NOT_SETTINGS = frozenset({"checkpoint", "out_dir", "progress", "live_plot", "checkpoint_every", "bf16", "tf32"})


def _groups(kind: str) -> dict:
    """``{field: "model" | "train" | "recipe"}`` for every field of ``kind``'s config class (less ``vocab_size``),
    of TrainConfig and of the recipe; an unregistered kind is one ValueError sentence naming the known ones."""
    out = {f.name: "model" for f in dataclasses.fields(model_config_class(kind)) if f.name != "vocab_size"}
    out.update({f.name: "train" for f in dataclasses.fields(TrainConfig)})
    out.update(dict.fromkeys(RECIPE_FIELDS, "recipe"))
    return out


def field_names(kind: str = "rnnlm") -> dict:
    """``{field: "model" | "train" | "recipe"}`` for every setting a run of model ``kind`` has (a preset sets
    every one of them; ``--set`` may change any): the fields of :func:`_groups` less :data:`NOT_SETTINGS`."""
    return {k: v for k, v in _groups(kind).items() if k not in NOT_SETTINGS}


def split(settings: dict) -> tuple[dict, dict, dict]:
    """``(model, training, rest)``: the settings that are fields of their kind's config class, those that are
    :class:`TrainConfig` fields, and the others (the recipe's and the caller's own)."""
    groups = _groups(kind_of(settings))
    model = {k: v for k, v in settings.items() if groups.get(k) == "model"}
    train = {k: v for k, v in settings.items() if groups.get(k) == "train"}
    rest = {k: v for k, v in settings.items() if groups.get(k) not in ("model", "train")}
    return model, train, rest


def model_config(settings: dict, vocab_size: int, **model):
    """The model config of ``settings`` (the config class registered for their kind: an :class:`LMConfig` for
    ``rnnlm``) for ``vocab_size`` words; ``model``: fields set beyond them (they win)."""
    fields, _, _ = split(settings)
    return model_config_class(kind_of(settings))(vocab_size=vocab_size, **{**fields, **model})


def train_config(settings: dict, **train) -> TrainConfig:
    r"""The :class:`TrainConfig` of ``settings``; ``train``: fields set beyond them (they win), such as how
    training is shown (``progress``) or where it writes (``out_dir``).

    With the recipe field ``loss_sum_over_time`` a paper's rate and clip are converted for the trainer's
    per-token mean loss: ``lr * bptt`` and ``clip / bptt`` (:mod:`.presets` says why).
    """
    _, values, _ = split(settings)
    values.update(train)
    numbers = all(isinstance(values.get(k), (int, float)) and not isinstance(values.get(k), bool)
                  for k in ("lr", "clip", "bptt"))
    if settings.get("loss_sum_over_time") and numbers and values["bptt"]:
        TrainConfig(**values)  # a value out of range is named as it was given, not as converted
        values["lr"] = values["lr"] * values["bptt"]
        values["clip"] = values["clip"] / values["bptt"]
    return TrainConfig(**values)


def configs(settings: dict, vocab_size: int, model: Optional[dict] = None, **train) -> tuple:
    """``(model config, TrainConfig)`` of ``settings`` for ``vocab_size`` words; ``model`` and ``train`` add what
    the recipe sets beyond them (e.g. ``optimizer="adam"``, or how training is shown)."""
    return model_config(settings, vocab_size, **(model or {})), train_config(settings, **train)


def build(settings: dict, vocab_size: int, **model) -> torch.nn.Module:
    """A fresh model of the settings' kind for ``vocab_size`` words, made by the ``build`` its module registered
    (:func:`lmcourse.lm.model_builder`; its config is made once, inside). With the recipe field ``init_all``,
    every parameter is then drawn uniformly from ``[-init_range, init_range]``. Seed the generators first."""
    fields, _, _ = split(settings)
    net = model_builder(kind_of(settings))({"vocab_size": vocab_size, **fields, **model})
    if settings.get("init_all"):
        r = net.config.init_range
        with torch.no_grad():
            for p in net.parameters():
                p.uniform_(-r, r)
    return net


def check(settings: dict) -> None:
    """One ValueError sentence for the first setting that is unknown or out of range.

    The model and training fields are checked by building the kind's config class and :class:`TrainConfig`
    (every number finite, in range, whole where it must be); the recipe fields here: flags are booleans,
    token counts positive integers or None.
    """
    if not isinstance(settings, dict):
        raise ValueError(f"The settings must be a dict of field values, got {type(settings).__name__}.")
    kind = kind_of(settings)
    if not isinstance(kind, str):
        raise ValueError(f"kind must name a registered model kind such as 'rnnlm', got {kind!r}.")
    known = field_names(kind)  # a kind nobody registered: one sentence naming the known ones
    unknown = sorted(k for k in settings if k not in known)
    if unknown:
        raise ValueError(f"There is no setting {unknown[0]!r}: the settings are {', '.join(sorted(known))}.")
    for name, (type_, _, _) in RECIPE_FIELDS.items():
        value = settings.get(name)
        if type_ is str:
            continue  # the kind, checked above
        if type_ is bool and not isinstance(value, bool):
            raise ValueError(f"{name} must be true or false, got {value!r}.")
        if type_ is not bool and value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                                       or value < 1):
            raise ValueError(f"{name} must be a positive whole number of tokens, or none for the whole split, "
                             f"got {value!r}.")
    model_config(settings, 2)
    train_config(settings)
    if settings.get("lr") == 0:
        raise ValueError("lr=0 never changes the weights, so the run would only score the weights it started from: "
                         "give a rate > 0, e.g. --set lr=1.")


@dataclass(frozen=True)
class Adapter:
    """The adapter for settings laid out a lesson's way: ``fields(settings)`` reads them as the flat dict of the
    module docstring (adding, say, the sizes a lesson's knob decides), then :func:`model_config`,
    :func:`train_config` and :func:`build` do the rest. ``shown``: how training is shown (``progress``, ...)."""

    fields: Callable[[dict], dict]

    def model_config(self, settings: dict, vocab_size: int):
        """The network of ``settings`` for ``vocab_size`` words."""
        return model_config(self.fields(settings), vocab_size)

    def train_config(self, settings: dict, **shown) -> TrainConfig:
        """How ``settings`` train (``shown``: how training is shown, e.g. ``progress=False``)."""
        return train_config(self.fields(settings), **shown)

    def configs(self, settings: dict, vocab_size: int, **shown) -> tuple:
        """``(model config, TrainConfig)`` of ``settings``."""
        return self.model_config(settings, vocab_size), self.train_config(settings, **shown)

    def build(self, settings: dict, vocab_size: int) -> torch.nn.Module:
        """A fresh model of ``settings`` for ``vocab_size`` words (seed the generators first)."""
        return build(self.fields(settings), vocab_size)

