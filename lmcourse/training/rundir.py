"""The run directory: what a training run writes at every epoch end, and what it resumes from.

``TrainConfig(out_dir=DIR)`` makes the trainer keep, atomically (a temporary file renamed over
the old one, so an interruption never leaves half a file)::

    DIR/config.json    {"format": 1, "model": {LMConfig}, "train": {TrainConfig}, "world_size": W}
    DIR/history.json   {"rows": [one dict per epoch], "best": row | null, "start": {...}, "stop_reason": ...}
    DIR/best.pt        the best validation weights, a checkpoint for lmcourse.training.checkpoint.load_checkpoint
    DIR/last.pt        the state to resume from (below); written only when an epoch ran to its end
    DIR/curves.png     train and validation perplexity per epoch

``last.pt`` holds plain data only (it loads with ``torch.load(..., weights_only=True)``): the
current weights, the best weights, the optimizer's state (with ASGD's averages) and which
optimizer is active, the learning rate, the epoch, the validation losses so far, the best and the
starting validation loss, the history, and every random state the next epoch reads: torch's CPU
generator (and the CUDA ones), Python's ``random``, NumPy's, and the generator of the
variable-BPTT window lengths, one set per process. ``Trainer.fit(resume=True)`` restores all of
it, so the continued run takes exactly the steps the uninterrupted one would have taken.
"""
from __future__ import annotations

import json
import os
import random
import tempfile
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from .checkpoint import atomic_save, atomic_write, vocab_mismatch

FORMAT = 1
KIND = "lmcourse-run"
CONFIG, HISTORY, BEST, LAST, CURVES = "config.json", "history.json", "best.pt", "last.pt", "curves.png"
__all__ = ["RunDir", "check_writable_file", "check_writable_dir", "capture_rng", "restore_rng",
           "atomic_write_bytes", "FORMAT", "CONFIG", "HISTORY", "BEST", "LAST", "CURVES"]


# ------------------------------------------------------------------------------- writing safely

def atomic_write_bytes(path, data: bytes) -> Path:
    """Write ``data`` to ``path`` through a temporary file in the same folder and ``os.replace``."""
    return atomic_write(path, lambda f: f.write(data))


def _probe(folder: Path) -> Optional[str]:
    """None when a file can be created in ``folder`` (made if missing), else why not."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".write-test.", dir=folder)
        os.close(fd)
        os.remove(tmp)
    except OSError as error:
        return error.strerror or type(error).__name__
    return None


def check_writable_dir(path, what: str) -> Path:
    """Make sure files can be written in the folder ``path`` (created if missing), else one ValueError sentence."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ValueError(f"{what}={str(path)!r} is a file, not a folder: give a folder path.")
    why = _probe(path)
    if why:
        raise ValueError(f"{what}={str(path)!r} cannot be written ({why}): choose a folder you can write to.")
    return path


def check_writable_file(path, what: str) -> Path:
    """Make sure the file ``path`` can be written (its folder is created if missing), else one ValueError sentence."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{what}={str(path)!r} is a folder: give a file path such as {str(path / 'best.pt')!r}.")
    why = _probe(path.parent)
    if why:
        raise ValueError(f"{what}={str(path)!r} cannot be written, its folder is not writable ({why}): "
                         "choose a path in a folder you can write to.")
    return path


# ------------------------------------------------------------------------------- random states

def capture_rng() -> dict:
    """Every global random state this process draws from: torch (CPU and CUDA), Python, NumPy."""
    version, internal, gauss = random.getstate()
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state = {"torch": torch.get_rng_state(),
             "python": {"version": version, "internal": torch.tensor(internal, dtype=torch.int64), "gauss": gauss},
             "numpy": {"kind": kind, "keys": torch.from_numpy(keys.astype(np.int64)), "pos": int(pos),
                       "has_gauss": int(has_gauss), "cached": float(cached)}}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng(state: dict) -> None:
    """Put back the states :func:`capture_rng` returned."""
    torch.set_rng_state(state["torch"])
    py = state["python"]
    random.setstate((py["version"], tuple(int(v) for v in py["internal"].tolist()), py["gauss"]))
    npy = state["numpy"]
    np.random.set_state((npy["kind"], npy["keys"].numpy().astype(np.uint32), npy["pos"], npy["has_gauss"],
                         npy["cached"]))
    if "cuda" in state and torch.cuda.is_available() and len(state["cuda"]) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(state["cuda"])


def state_to_cpu(state: dict) -> dict:
    """A CPU copy of a state dict; tensors that several keys share (tied weights) stay shared."""
    copies, out = {}, {}
    for key, value in state.items():
        ident = (value.data_ptr(), value.dtype, tuple(value.shape), value.stride())
        if ident not in copies:
            copies[ident] = value.detach().to("cpu", copy=True)
        out[key] = copies[ident]
    return out


# ------------------------------------------------------------------------------- the folder

def _first_difference(stored: dict, given: dict, skip=()) -> Optional[tuple]:
    for key in sorted(set(stored) | set(given)):
        if key not in skip and stored.get(key) != given.get(key):
            return key, stored.get(key), given.get(key)
    return None


def _listed(names) -> str:
    names = list(names)
    return ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else "".join(names)


class RunDir:
    """The files of one training run in the folder ``path`` (see the module docstring)."""

    def __init__(self, path):
        self.path = Path(path)

    def file(self, name: str) -> Path:
        return self.path / name

    def check_writable(self) -> None:
        check_writable_dir(self.path, "TrainConfig.out_dir")

    def has_run(self) -> bool:
        """True when the folder holds a resumable run (``last.pt``)."""
        return self.file(LAST).is_file()

    # ---------------------------------------------------------------- writing

    def _write_json(self, name: str, obj) -> Path:
        return atomic_write_bytes(self.file(name), json.dumps(obj, indent=1, default=str).encode())

    def write_config(self, model_config: dict, train_config: dict, world_size: int) -> Path:
        return self._write_json(CONFIG, {"format": FORMAT, "model": model_config, "train": train_config,
                                         "world_size": world_size})

    def write_history(self, history: dict) -> Path:
        return self._write_json(HISTORY, history)

    def write_curves(self, png: bytes) -> Path:
        return atomic_write_bytes(self.file(CURVES), png)

    def save_last(self, payload: dict) -> Path:
        return atomic_save(dict(payload, format=FORMAT, kind=KIND), self.file(LAST))

    # ---------------------------------------------------------------- reading

    def read_config(self) -> dict:
        """``{"model": {...}, "train": {...}, "world_size": W}`` from ``config.json``."""
        path = self.file(CONFIG)
        try:
            config = json.loads(path.read_text())
        except (OSError, ValueError) as error:
            raise ValueError(f"{path} cannot be read as a run's config.json ({type(error).__name__}): "
                             "give the out_dir of a training run.") from None
        if not isinstance(config, dict) or config.get("format") != FORMAT or "model" not in config:
            raise ValueError(f"{path} is not the config.json of an lmcourse run: give the out_dir of a training run.")
        return config

    def load_last(self) -> dict:
        """The resume state in ``last.pt``, read with ``weights_only=True``."""
        path = self.file(LAST)
        try:
            payload = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as error:  # a damaged or foreign file: say so in one sentence
            raise ValueError(f"{path} is damaged or not an lmcourse run ({type(error).__name__}): "
                             "resume from an intact copy, or start the run again in a new out_dir.") from None
        if not isinstance(payload, dict) or payload.get("kind") != KIND or payload.get("format") != FORMAT:
            raise ValueError(f"{path} is not an lmcourse run's last.pt: give the out_dir of a training run.")
        return payload

    def check_resumable(self, saved: dict, model_config: dict, train_config: dict, vocab, may_change) -> None:
        """One ValueError sentence when the model, vocabulary or settings differ from the saved run's."""
        diff = _first_difference(saved["model_config"], model_config)
        if diff:
            key, then, now = diff
            raise ValueError(f"The run in {self.path} has a model with {key}={then!r} but this model has "
                             f"{key}={now!r}: build the model from {self.file(CONFIG)} to resume, or use a new out_dir.")
        if vocab is not None and saved.get("vocab") is not None:
            message = vocab_mismatch(saved["vocab"], list(vocab.itos))
            if message:
                raise ValueError(message)
        diff = _first_difference(saved["train_config"], train_config, skip=may_change)
        if diff:
            key, then, now = diff
            raise ValueError(f"The run in {self.path} was trained with {key}={then!r} but this TrainConfig has "
                             f"{key}={now!r}: resume with the same settings (only {_listed(may_change)} may change).")
