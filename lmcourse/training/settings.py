"""One vocabulary for a run's settings: the field names of the config classes.

A stored run's settings are a flat dict whose model keys are :class:`~lmcourse.networks.models.LMConfig`'s
field names (``emb_size``, ``hidden_size``, ``num_layers``, ``tie``, ...) and whose training keys are
:class:`~lmcourse.training.trainconfig.TrainConfig`'s (``epochs``, ``batch_size``, ``bptt``, ``lr``, ``seed``,
...); a variant of the embedded corpus goes under ``corpus`` as the fields of its
:class:`~lmcourse.corpora.grammar.Params`. Anything else (``train_tokens``, ``watch``, ...) is the lesson's own.
:func:`split` is the one adapter from such a dict to the configs.
"""
from __future__ import annotations

from dataclasses import fields

from ..networks.models import LMConfig
from .trainconfig import TrainConfig

__all__ = ["MODEL_FIELDS", "TRAIN_FIELDS", "split", "configs"]

MODEL_FIELDS = frozenset(f.name for f in fields(LMConfig)) - {"vocab_size"}
TRAIN_FIELDS = frozenset(f.name for f in fields(TrainConfig))


def split(settings: dict) -> tuple[dict, dict, dict]:
    """``(model, training, rest)``: the settings that are :class:`LMConfig` fields, those that are
    :class:`TrainConfig` fields, and the others."""
    model = {k: v for k, v in settings.items() if k in MODEL_FIELDS}
    train = {k: v for k, v in settings.items() if k in TRAIN_FIELDS}
    rest = {k: v for k, v in settings.items() if k not in MODEL_FIELDS | TRAIN_FIELDS}
    return model, train, rest


def configs(settings: dict, vocab_size: int, model: dict | None = None, **train) -> tuple[LMConfig, TrainConfig]:
    """The :class:`LMConfig` (for ``vocab_size`` words) and :class:`TrainConfig` of ``settings``; ``model`` and
    ``train`` add what the recipe sets beyond them (e.g. ``optimizer="adam"``, or how training is shown)."""
    m, t, _ = split(settings)
    return LMConfig(vocab_size=vocab_size, **m, **(model or {})), TrainConfig(**t, **train)
