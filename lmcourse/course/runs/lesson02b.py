"""Lesson 02b's stored run: the character LSTM. Its word model is the course model's "LSTM" rung, stored with the
course model (:mod:`.course_model`)."""
from __future__ import annotations

from ...config import by_scale


def _char_lstm(scale: str) -> list:
    """At ``cpu``, three epochs of Adam over Tiny Shakespeare's first million characters (settings: the config
    classes' field names, :mod:`lmcourse.training.settings`, plus the lesson's own)."""
    common = dict(lr=3e-3, clip=0.25, seed=0, temperature=0.8)
    return [dict(by_scale(
        ci=dict(corpus="embedded", chars=40_000, emb_size=16, hidden_size=32, num_layers=1, epochs=1, batch_size=16,
                bptt=50, watch=8, sample_len=60),
        cpu=dict(corpus="tinyshakespeare", chars=1_000_000, emb_size=64, hidden_size=256, num_layers=1, epochs=3,
                 batch_size=16, bptt=64, watch=100, sample_len=300),
        gpu=dict(corpus="tinyshakespeare", chars=None, emb_size=128, hidden_size=512, num_layers=2, epochs=20,
                 batch_size=64, bptt=150, watch=200, sample_len=500),
        scale=scale), **common)]


RUNS = {"02b-char-lstm": _char_lstm}
LEVELS = {"02b-char-lstm": "char"}  # its corpus fingerprint is checked at the character level
