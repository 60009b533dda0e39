"""Records written before a run said which model it holds: they hold the recurrent LM.

A checkpoint, a run's ``config.json`` and the command line's ``preset.json`` name their model's kind
(:func:`lmcourse.lm.register_model`). Those written before they did, and a settings dict that names no kind (a
lesson's recurrent runs), all hold an ``rnnlm``; every reader asks :func:`kind_of`, so that this rule lives here
and nowhere else.
"""
from __future__ import annotations

__all__ = ["KIND", "kind_of"]

KIND = "rnnlm"  # the model of every record that names none


def kind_of(record) -> str:
    """The model kind ``record`` (a dict) names, or :data:`KIND` when it names none."""
    return record.get("kind", KIND) if isinstance(record, dict) else KIND
