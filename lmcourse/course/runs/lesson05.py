"""Lesson 05's stored run: the course's usual softmax LSTM, tied at d = 32."""
from __future__ import annotations

from ...config import by_scale


def _softmax_d32(scale: str) -> list:
    """One epoch of SGD at rate 20 on the embedded corpus (all of its training text from ``cpu`` on)."""
    common = dict(num_layers=2, tie=True, epochs=1, lr=20.0, clip=0.25, seed=0)
    return [dict(common, **by_scale(
        ci=dict(emb_size=8, hidden_size=32, batch_size=16, bptt=20, train_tokens=30_000, valid_tokens=5_000),
        cpu=dict(emb_size=32, hidden_size=256, batch_size=64, bptt=35, train_tokens=None, valid_tokens=None),
        gpu=dict(emb_size=32, hidden_size=256, batch_size=64, bptt=35, train_tokens=None, valid_tokens=None),
        scale=scale))]


RUNS = {"05-softmax-d32": _softmax_d32}
