"""The run directory: what a training run writes at every epoch end, and what it resumes from.

``TrainConfig(out_dir=DIR)`` makes the trainer keep, atomically (a temporary file renamed over
the old one, so an interruption never leaves half a file)::

    DIR/config.json    {"format": 2, "kind": K, "model": {its config}, "train": {TrainConfig}, "world_size": W}
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
it (:mod:`lmcourse.training.resume`), so the continued run takes exactly the steps the
uninterrupted one would have taken.

Three guards keep a folder holding one run, whole:

- a lock (:class:`~lmcourse.training.lock.RunLock`, in :mod:`lmcourse.training.lock`): a second run
  in the same folder stops at once. While it holds the lock, a run removes the temporary files an
  interrupted write left behind (:meth:`RunDir.clean`);
- a fresh run never starts in a folder that holds any run file (:data:`RUN_FILES`): resume it, or
  clear it explicitly (:meth:`RunDir.clear`, ``overwrite=True``);
- ``last.pt`` carries the checksum of its contents (:mod:`lmcourse.checksum`), checked when a run
  resumes, so a damaged file is refused instead of resuming with changed weights.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, Optional

import torch

from ..checksum import atomic_write, seal, verify
from ..errors import RunDirError
from .checkpoint import atomic_save, check_writable_dir, check_writable_file, vocab_mismatch
from .lock import LOCK, RunLock, claim_on_every_rank

FORMAT = 2  # 2: last.pt carries its checksum
KIND = "lmcourse-run"
CONFIG, HISTORY, BEST, LAST, CURVES = "config.json", "history.json", "best.pt", "last.pt", "curves.png"
RUN_FILES = (CONFIG, HISTORY, BEST, LAST, CURVES)
# The lock and the writability checks live in .lock and .checkpoint; they are named here too, where
# the run directory's users look for them.
__all__ = ["RunDir", "RunLock", "claim_on_every_rank", "check_writable_file", "check_writable_dir",
           "atomic_write_bytes", "FORMAT", "CONFIG", "HISTORY", "BEST", "LAST", "CURVES", "RUN_FILES", "LOCK"]


# ------------------------------------------------------------------------------- writing safely

def atomic_write_bytes(path, data: bytes) -> Path:
    """Write ``data`` to ``path`` through the package's one atomic write (:func:`lmcourse.checksum.atomic_write`)."""
    return atomic_write(path, lambda f: f.write(data), needed=len(data))


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

    def run_files(self, names: Iterable[str] = RUN_FILES) -> list:
        """The files among ``names`` that the folder holds."""
        return [name for name in names if self.file(name).exists()]

    def lock(self, what: str = "TrainConfig.out_dir") -> RunLock:
        return RunLock(self.path, what)

    def clean(self, names: Iterable[str] = RUN_FILES) -> list:
        """Remove the temporary files (``.<name>.*.tmp``) that writes of ``names`` killed mid-way left;
        return their names. Call it only while holding the lock, so no write of this run is under way."""
        removed = []
        for name in names:
            for tmp in self.path.glob(f".{name}.*.tmp"):
                try:
                    tmp.unlink()
                    removed.append(tmp.name)
                except OSError:
                    pass
        return removed

    def clear(self, names: Iterable[str] = RUN_FILES) -> None:
        """Delete the run files among ``names`` (for a run started over with ``overwrite``)."""
        for name in self.run_files(names):
            self.file(name).unlink()

    def refuse_fresh_start(self, names: Iterable[str] = RUN_FILES, resume_hint: str = "fit(resume=True)",
                           overwrite_hint: str = "fit(overwrite=True)") -> None:
        """A :class:`RunDirError` when the folder holds any of ``names``: a new run would mix with them."""
        present = self.run_files(names)
        if LAST in present:
            raise RunDirError(f"{self.path} already holds a run that can be continued: continue it with {resume_hint}, "
                              f"start over with {overwrite_hint}, or choose another folder.")
        if present:
            raise RunDirError(f"{self.path} already holds files of an earlier run ({_listed(present)}), which a new "
                              f"run would replace: start over with {overwrite_hint}, or choose another folder.")

    # ---------------------------------------------------------------- writing

    def _write_json(self, name: str, obj) -> Path:
        return atomic_write_bytes(self.file(name), json.dumps(obj, indent=1, default=str).encode())

    def write_config(self, kind: str, model_config: dict, train_config: dict, world_size: int) -> Path:
        """``config.json``: the model's ``kind`` (registered with :func:`lmcourse.lm.register_model`) and its
        config's fields, the training's, and the number of processes."""
        return self._write_json(CONFIG, {"format": FORMAT, "kind": kind, "model": model_config, "train": train_config,
                                         "world_size": world_size})

    def write_history(self, history: dict) -> Path:
        return self._write_json(HISTORY, history)

    def write_curves(self, png: bytes) -> Path:
        return atomic_write_bytes(self.file(CURVES), png)

    def save_last(self, payload: dict) -> Path:
        return atomic_save(seal(dict(payload, format=FORMAT, kind=KIND)), self.file(LAST))

    # ---------------------------------------------------------------- reading

    def read_config(self) -> dict:
        """``{"kind": K, "model": {...}, "train": {...}, "world_size": W}`` from ``config.json`` (a file written
        before runs named their kind has none: it holds an ``rnnlm``, :mod:`lmcourse.training.compat`)."""
        path = self.file(CONFIG)
        try:
            config = json.loads(path.read_text())
        except (OSError, ValueError) as error:
            raise RunDirError(f"{path} cannot be read as a run's config.json ({type(error).__name__}): "
                              "give the out_dir of a training run.") from None
        if not isinstance(config, dict) or config.get("format") not in (1, FORMAT) or "model" not in config:
            raise RunDirError(f"{path} is not the config.json of an lmcourse run: give the out_dir of a training run.")
        for key, kind in (("model", dict), ("train", dict), ("world_size", int), ("kind", str)):
            if key == "kind" and key not in config:
                continue  # written before runs named their kind
            if not isinstance(config.get(key), kind) or isinstance(config.get(key), bool):
                raise RunDirError(f"{path} has a malformed {key!r} entry (edited by hand?): restore the file the run "
                                  "wrote, or start the run again in a new folder.")
        return config

    def load_last(self) -> dict:
        """The resume state in ``last.pt``, read with ``weights_only=True``."""
        path = self.file(LAST)
        try:
            payload = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as error:  # a damaged or foreign file: say so in one sentence
            raise RunDirError(f"{path} is damaged or not an lmcourse run ({type(error).__name__}): "
                              "resume from an intact copy, or start the run again in a new out_dir.") from None
        if not isinstance(payload, dict) or payload.get("kind") != KIND:
            raise RunDirError(f"{path} is not an lmcourse run's last.pt: give the out_dir of a training run.")
        if payload.get("format") == 1:
            raise RunDirError(f"{path} was written by an earlier lmcourse without a checksum, so it cannot be told "
                              "from a damaged file: start the run again in a new out_dir.")
        if payload.get("format") != FORMAT or not verify(payload):
            raise RunDirError(f"{path} is damaged (its contents do not match the checksum saved with them): resume "
                              "from an intact copy, or start the run again in a new out_dir.")
        return payload

    def check_resumable(self, saved: dict, model_config: dict, train_config: dict, vocab, may_change) -> None:
        """One ValueError sentence when the model, vocabulary or settings differ from the saved run's."""
        diff = _first_difference(saved["model_config"], model_config)
        if diff:
            key, then, now = diff
            raise RunDirError(f"The run in {self.path} has a model with {key}={then!r} but this model has "
                             f"{key}={now!r}: build the model from {self.file(CONFIG)} to resume, or use a new out_dir.")
        if vocab is not None and saved.get("vocab") is not None:
            message = vocab_mismatch(saved["vocab"], list(vocab.itos))
            if message:
                raise RunDirError(message)
        diff = _first_difference(saved["train_config"], train_config, skip=may_change)
        if diff:
            key, then, now = diff
            raise RunDirError(f"The run in {self.path} was trained with {key}={then!r} but this TrainConfig has "
                             f"{key}={now!r}: resume with the same settings (only {_listed(may_change)} may change).")
