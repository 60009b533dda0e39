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

Three guards keep a folder holding one run, whole:

- a lock (:class:`RunLock`): ``DIR/.lock``, an OS file lock held for the run's life and released
  on any exit (the system drops it when the process dies, however it dies). A second run in the
  same folder stops at once, naming the process that holds it; a lock file left by a process
  that was killed is taken over with a note. While it holds the lock, a run removes the
  temporary files an interrupted write left behind (:meth:`RunDir.clean`);
- a fresh run never starts in a folder that holds any run file (:data:`RUN_FILES`): resume it, or
  clear it explicitly (:meth:`RunDir.clear`, ``overwrite=True``);
- ``last.pt`` carries the checksum of its contents (:mod:`lmcourse.checksum`), checked when a run
  resumes, so a damaged file is refused instead of resuming with changed weights.
"""
from __future__ import annotations

import errno
import json
import os
import random
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterable, Optional

import numpy as np
import torch

from ..checksum import seal, verify
from ..errors import RunDirError
from .checkpoint import atomic_save, atomic_write, vocab_mismatch

FORMAT = 2  # 2: last.pt carries its checksum
KIND = "lmcourse-run"
CONFIG, HISTORY, BEST, LAST, CURVES = "config.json", "history.json", "best.pt", "last.pt", "curves.png"
RUN_FILES = (CONFIG, HISTORY, BEST, LAST, CURVES)
LOCK = ".lock"
__all__ = ["RunDir", "RunLock", "check_writable_file", "check_writable_dir", "capture_rng", "restore_rng",
           "atomic_write_bytes", "FORMAT", "CONFIG", "HISTORY", "BEST", "LAST", "CURVES", "RUN_FILES", "LOCK"]


# ------------------------------------------------------------------------------- writing safely

def atomic_write_bytes(path, data: bytes) -> Path:
    """Write ``data`` to ``path`` through a temporary file in the same folder and ``os.replace``."""
    return atomic_write(path, lambda f: f.write(data), needed=len(data))


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


# ------------------------------------------------------------------------------- the lock

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None
    import msvcrt

_HELD: dict = {}  # resolved folder -> [file descriptor, depth, folders made]: the locks this process holds


def _try_lock(fd: int) -> Optional[bool]:
    """Take the OS lock on the open file ``fd`` without waiting: True when taken, False when another
    process holds it, None when the file system has no locks."""
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        else:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
    except OSError as error:
        return False if error.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES, errno.EDEADLK) else None
    return True


def _holder(fd: int) -> dict:
    """What the lock file says about the process that wrote it (empty when nothing readable)."""
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        info = json.loads(os.read(fd, 4096).decode() or "{}")
    except (OSError, ValueError):
        return {}
    return info if isinstance(info, dict) else {}


def _describe(info: dict) -> str:
    if not info.get("pid"):
        return "a process that left no details"
    started = info.get("started")
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started)) if isinstance(started, (int, float)) else "?"
    return f"process {info['pid']} on {info.get('host', '?')}, started {since}"


class RunLock:
    """The lock of the run directory ``folder``: ``with RunLock(folder): ...`` (see the module docstring).

    Re-entrant within a process: an inner ``with`` on a folder this process already holds passes.
    A folder held by another process raises a :class:`~lmcourse.errors.RunDirError` at once.
    """

    def __init__(self, folder, what: str = "TrainConfig.out_dir"):
        self.folder, self.what = Path(folder), what
        self.path = self.folder / LOCK
        self.note: Optional[str] = None  # set when a lock left by a killed process was taken over

    def _key(self) -> str:
        return str(self.folder.resolve())

    def acquire(self) -> "RunLock":
        key = self._key()
        if key in _HELD:
            _HELD[key][1] += 1
            return self
        missing = [p for p in (self.folder, *self.folder.parents) if not p.exists()]  # made here; removed if empty
        check_writable_dir(self.folder, self.what)
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            taken = _try_lock(fd)
            if taken is None:
                print(f"note: the file system of {self.folder} offers no file locks, so a second run started in it "
                      "would not be stopped; give each run its own folder.", file=sys.stderr, flush=True)
                break
            if not taken:
                info = _holder(fd)
                os.close(fd)
                raise RunDirError(f"{self.folder} is in use by another run ({_describe(info)}): wait for it to end, "
                                  f"or give this run another {self.what}.")
            try:  # the holder removes the file as it lets go: lock the file that is there now
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except OSError:
                same = False
            if same:
                break
            os.close(fd)
        left = _holder(fd)
        if left.get("pid") and (left.get("pid"), left.get("host")) != (os.getpid(), socket.gethostname()):
            self.note = (f"note: took over the lock of {self.folder}, left by {_describe(left)}, which ended "
                         "without releasing it.")
            print(self.note, file=sys.stderr, flush=True)
        mine = json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "started": time.time()}).encode()
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, mine)
        _HELD[key] = [fd, 1, missing]
        return self

    def release(self) -> None:
        key = self._key()
        entry = _HELD.get(key)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] > 0:
            return
        del _HELD[key]
        try:
            os.unlink(self.path)  # removed while still held, so no other process locks a file about to vanish
        except OSError:
            pass
        os.close(entry[0])  # closing the descriptor releases the OS lock
        for folder in entry[2]:  # folders the lock made, when nothing was written in them
            try:
                folder.rmdir()
            except OSError:
                break

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


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

    def write_config(self, model_config: dict, train_config: dict, world_size: int) -> Path:
        return self._write_json(CONFIG, {"format": FORMAT, "model": model_config, "train": train_config,
                                         "world_size": world_size})

    def write_history(self, history: dict) -> Path:
        return self._write_json(HISTORY, history)

    def write_curves(self, png: bytes) -> Path:
        return atomic_write_bytes(self.file(CURVES), png)

    def save_last(self, payload: dict) -> Path:
        return atomic_save(seal(dict(payload, format=FORMAT, kind=KIND)), self.file(LAST))

    # ---------------------------------------------------------------- reading

    def read_config(self) -> dict:
        """``{"model": {...}, "train": {...}, "world_size": W}`` from ``config.json``."""
        path = self.file(CONFIG)
        try:
            config = json.loads(path.read_text())
        except (OSError, ValueError) as error:
            raise RunDirError(f"{path} cannot be read as a run's config.json ({type(error).__name__}): "
                              "give the out_dir of a training run.") from None
        if not isinstance(config, dict) or config.get("format") not in (1, FORMAT) or "model" not in config:
            raise RunDirError(f"{path} is not the config.json of an lmcourse run: give the out_dir of a training run.")
        for key, kind in (("model", dict), ("train", dict), ("world_size", int)):
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
