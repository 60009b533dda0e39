"""Run-wide settings: the scale, the dataset, the device, seeds and folders.

Every notebook's parameter cell reads `SCALE` and `DATASET`:

- ``LMCOURSE_SCALE`` = ``ci`` | ``cpu`` | ``gpu``. ``ci`` is the smallest run that still walks every
  code path; ``cpu`` is a few minutes a lesson on a laptop; ``gpu`` is paper-sized. The default is
  ``gpu`` when CUDA is present, else ``cpu``.
- ``LMCOURSE_DATASET``: a corpus name for :func:`lmcourse.data.load_corpus`; the default is the
  embedded corpus, which needs no network.
- ``LMCOURSE_DATA``: where the real corpora live (default: the repository's ``data/``).
- ``LMCOURSE_CACHE``: where generated corpora and downloads are cached when ``LMCOURSE_DATA`` is
  read-only (default: the repository's ``data/``, else ``~/.cache/lmcourse``).
"""
from __future__ import annotations

import os
import random
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

SCALES = ("ci", "cpu", "gpu")
EMBEDDED = "embedded"
REPO_DATA = Path(__file__).resolve().parents[1] / "data"


def _scale() -> str:
    value = os.environ.get("LMCOURSE_SCALE") or ("gpu" if torch.cuda.is_available() else "cpu")
    if value not in SCALES:
        raise ValueError(f"LMCOURSE_SCALE={value!r} is not a scale: use one of {', '.join(SCALES)}.")
    return value


SCALE = _scale()
DATASET = os.environ.get("LMCOURSE_DATASET") or EMBEDDED


@lru_cache(maxsize=1)
def device() -> torch.device:
    """The one device of the run, chosen once: CUDA when it is there, else the CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch (all devices) so a CPU run repeats exactly."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def writable(path: Path) -> bool:
    """True when ``path`` exists (or can be made) and this process may write in it."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(path, os.W_OK)


def cache_dir() -> Path:
    """A writable folder for generated corpora and downloads."""
    env = os.environ.get("LMCOURSE_CACHE")
    if env:
        return Path(env)
    if writable(REPO_DATA):
        return REPO_DATA
    return Path.home() / ".cache" / "lmcourse"


def data_dir() -> Path:
    """Where the real corpora are looked for first (``LMCOURSE_DATA``, else the cache folder)."""
    env = os.environ.get("LMCOURSE_DATA")
    return Path(env) if env else cache_dir()


def by_scale(ci, cpu, gpu):
    """Pick the value for the current scale: ``by_scale(ci=1, cpu=5, gpu=40)``."""
    return {"ci": ci, "cpu": cpu, "gpu": gpu}[SCALE]
