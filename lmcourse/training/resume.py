"""Exact resume: what ``last.pt`` holds beyond the weights, and how a trainer is put back from it.

A run resumed from the end of epoch :math:`k` must take the very steps the uninterrupted run took
from there. So ``last.pt`` holds, besides the weights and the best weights, the optimizer's state
(with ASGD's averages) and which optimizer is active, the learning-rate history, the validation
losses NT-ASGD's trigger reads, the history rows, and every random state the next epoch draws
from: torch (CPU and CUDA), Python's ``random``, NumPy's, and the generator of the variable-BPTT
window lengths, one set per process (:func:`capture_rng`). :func:`snapshot` writes that dict from
a trainer, :func:`saved_run` reads and checks it, :func:`restore` puts a trainer back from it. The
file itself, its checksum and the run's folder are :mod:`lmcourse.training.rundir`'s.
"""
from __future__ import annotations

import random
import time
import warnings
from dataclasses import asdict
from typing import Optional

import numpy as np
import torch

from ..config import seed_everything
from ..errors import RunDirError
from .checkpoint import copy_state
from .optim import make_optimizer
from .rundir import RunDir
from .trainconfig import RESUMABLE_CHANGES, History

__all__ = ["capture_rng", "restore_rng", "state_to_cpu", "saved_run", "snapshot", "restore"]

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


# ------------------------------------------------------------------------------- the trainer's state

def saved_run(run: Optional[RunDir], resume, model, config, vocab) -> Optional[dict]:
    """The ``last.pt`` state to resume ``model`` from under ``config`` (checked against them), or None
    to start afresh (``resume`` False, or ``"auto"`` with no run in the folder)."""
    if not resume:
        return None
    if run is None:
        raise ValueError("fit(resume=True) needs TrainConfig.out_dir, the folder of the run to continue.")
    if not run.has_run():
        if resume == "auto":
            return None
        raise RunDirError(f"There is no run to resume in {run.path} (no last.pt): "
                          "train once without resume, or check out_dir.")
    saved = run.load_last()
    run.check_resumable(saved, model.config.as_dict(), asdict(config), vocab, RESUMABLE_CHANGES)
    return saved


def snapshot(trainer, rng: list) -> dict:
    """Everything :func:`restore` needs, as plain data; ``rng``: every rank's :func:`capture_rng`."""
    t = trainer
    return {"epoch": t.epoch, "model_config": t.model.config.as_dict(), "train_config": asdict(t.config),
            "vocab": list(t.vocab.itos) if t.vocab is not None else None,
            "state_dict": copy_state(t.model, "cpu"), "best_state_dict": state_to_cpu(t._best_state),
            "optimizer": {"name": t.optimizer_name, "state": t.optimizer.state_dict()},
            "lr": t.lr, "val_losses": list(t._val_losses), "best_loss": t._best_loss,
            "history": t.history.state(), "elapsed_s": t._elapsed + time.perf_counter() - t._start,
            "rng": rng, "bptt_generator": t.generator.get_state(), "world_size": t.world,
            "stop_reason": t._stop_reason if t.stop else None}


def restore(trainer, saved: dict) -> None:
    """Put back weights, optimizer, counters, history and random states from ``saved`` (a ``last.pt``)."""
    t, cfg = trainer, trainer.config
    t.model.load_state_dict(saved["state_dict"])
    t.optimizer = make_optimizer(saved["optimizer"]["name"], t.params, cfg.lr, cfg.weight_decay)
    t.optimizer.load_state_dict(saved["optimizer"]["state"])
    t._best_state = {k: v.to(t.device) for k, v in saved["best_state_dict"].items()}
    t._best_loss, t._val_losses = saved["best_loss"], list(saved["val_losses"])
    h = saved["history"]
    t.history = History(rows=list(h["rows"]), best=h["best"], start=h["start"])
    t.epoch, t._elapsed = saved["epoch"], saved["elapsed_s"]
    t._stop_reason = saved.get("stop_reason")  # a non-monotone stop stays a stop
    t.generator.set_state(saved["bptt_generator"])
    if len(saved["rng"]) == t.world:
        restore_rng(saved["rng"][t.rank])
    else:  # another number of processes: the split differs anyway, so reseed per rank and epoch
        warnings.warn(f"The run was saved by {len(saved['rng'])} processes and resumes with {t.world}: "
                      "it continues, but not bit for bit as it would have.", RuntimeWarning, stacklevel=4)
        seed_everything(cfg.seed + 1000 * t.epoch + t.rank)
