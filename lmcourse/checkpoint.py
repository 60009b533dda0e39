"""Saving and loading a trained :class:`~lmcourse.models.RNNLM`.

A checkpoint is one ``torch.save`` file holding only plain data, so it loads with
``torch.load(..., weights_only=True)`` (no pickled code runs on load)::

    {"format": 1, "config": {...LMConfig...}, "state_dict": {...}, "vocab": [itos] or None,
     "history": [rows], "extra": {...}}

Writes are atomic: the file goes to a temporary name in the same folder and is then renamed over
the target, so an interrupted save never leaves a half-written checkpoint behind.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Optional

import torch

from .config import device as default_device
from .models import LMConfig, RNNLM
from .vocab import Vocab

FORMAT = 1


def _plain(value):
    """Paths become strings; containers are rebuilt so only plain types remain."""
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def copy_state(model: torch.nn.Module, device=None) -> dict:
    """A detached copy of ``model.state_dict()`` (on ``device`` if given); a tensor that several keys
    share, such as a tied embedding and decoder, is copied once and stays shared."""
    copies, state = {}, {}
    for key, value in model.state_dict().items():
        ident = (value.data_ptr(), value.dtype, tuple(value.shape), value.stride())
        if ident not in copies:
            copies[ident] = value.detach().to(device, copy=True) if device is not None else value.detach().clone()
        state[key] = copies[ident]
    return state


def atomic_save(obj, path) -> Path:
    """``torch.save(obj, path)`` through a temporary file and ``os.replace``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    return path


def save_checkpoint(path, model: RNNLM, vocab: Optional[Vocab] = None, history=None, extra=None) -> Path:
    """Write ``model`` (config and weights), its vocabulary, the history rows and ``extra`` to ``path``."""
    if not isinstance(model, RNNLM):
        raise TypeError(f"save_checkpoint saves an RNNLM, got {type(model).__name__}.")
    vocab = vocab if vocab is not None else getattr(model, "vocab", None)
    rows = getattr(history, "rows", history)
    payload = {
        "format": FORMAT,
        "config": model.config.as_dict(),
        "state_dict": copy_state(model, "cpu"),
        "vocab": list(vocab.itos) if vocab is not None else None,
        "history": _plain(list(rows or [])),
        "extra": _plain(extra or {}),
    }
    return atomic_save(payload, path)


def vocab_mismatch(stored: list, given: list) -> Optional[str]:
    """One sentence saying how two vocabularies differ, or None when they are equal."""
    if stored == given:
        return None
    first = next((i for i, (a, b) in enumerate(zip(stored, given)) if a != b), min(len(stored), len(given)))
    at = lambda itos: repr(itos[first]) if first < len(itos) else "nothing"  # noqa: E731
    return (f"The checkpoint's vocabulary ({len(stored)} tokens) differs from the one given ({len(given)} tokens), "
            f"first at id {first} ({at(stored)} vs {at(given)}): load with the corpus it was trained on.")


def load_checkpoint(path, vocab: Optional[Vocab] = None, map_location=None):
    """Rebuild the model saved at ``path``; return ``(model, info)``.

    ``info`` holds ``config``, ``vocab``, ``history`` (rows) and ``extra``. When ``vocab`` is given
    it must equal the stored one. The model goes to ``map_location`` (default: the run's device).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"No checkpoint at {path}: train a model with TrainConfig(checkpoint=...) first.")
    target = torch.device(map_location) if map_location is not None else default_device()
    payload = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise ValueError(f"{path} is not an lmcourse checkpoint: save one with lmcourse.checkpoint.save_checkpoint.")
    stored = payload["vocab"]
    if vocab is not None and stored is not None:
        message = vocab_mismatch(stored, list(vocab.itos))
        if message:
            raise ValueError(message)
    config = LMConfig(**payload["config"])
    model = RNNLM(config)
    model.load_state_dict(payload["state_dict"])
    model.to(target).eval()
    model.vocab = Vocab(stored) if stored is not None else vocab
    info = {"config": config, "vocab": model.vocab, "history": payload["history"], "extra": payload["extra"]}
    return model, info
