"""Run-wide settings: the scale, the dataset, the device, seeds and folders.

Every notebook's parameter cell reads `SCALE` and `DATASET`:

- ``LMCOURSE_SCALE`` = ``ci`` | ``cpu`` | ``gpu``. ``ci`` is the smallest run that still walks every
  code path; ``cpu`` is a few minutes a lesson on a laptop; ``gpu`` is larger runs for a GPU
  (``docs/practitioners.md`` says what each lesson and preset costs). The default is ``cpu`` on every
  machine: a GPU makes it faster, and ``gpu`` is only used when asked for by name.
- ``LMCOURSE_DATASET``: a corpus name for :func:`lmcourse.corpora.data.load_corpus` (one of
  :data:`DATASETS`) or a corpus folder; the default is the embedded corpus, which needs no network.
- ``LMCOURSE_DATA``: where the real corpora live (default: the cache folder below).
- ``LMCOURSE_CACHE``: where generated corpora, downloads and stored runs are kept (default: in a clone of the
  repository, its ``data/``; installed from a wheel, the user's cache folder, :func:`user_cache_dir`; never
  anywhere under the installed package).
- ``LMCOURSE_DEVICE``: ``cpu``, ``cuda``, ``cuda:N`` or ``mps`` (an Apple GPU, where torch reports one)
  overrides the device (default: CUDA when present, else the CPU).
- ``LMCOURSE_DIST_BACKEND``: under ``torchrun``, ``nccl`` or ``gloo`` (default: NCCL with CUDA, else gloo).
- ``LMCOURSE_RETRAIN``, ``LMCOURSE_STORE_REFERENCE``: switches (:func:`switch`): 1, true, yes or on; 0, false, no,
  off or unset; any other value is refused, never read as on.
- ``LMCOURSE_DIST_TIMEOUT``: under ``torchrun``, the seconds a process waits for the others before it
  gives up and names the one that stopped answering (default 300).

A bad setting never stops ``import lmcourse``: an unknown ``LMCOURSE_SCALE`` leaves ``SCALE``
undefined, and reading it (``config.SCALE``, ``by_scale``, :func:`scale`) raises a
:class:`~lmcourse.errors.ConfigError` saying which values exist; an ``LMCOURSE_DATASET`` that names
no corpus does the same for ``DATASET`` (a lesson's first cell, which reads both, stops there), and so does
an ``LMCOURSE_CACHE`` that is a file or cannot be written (every corpus goes through it). Another unusable
folder is reported the same way when it is first needed. :func:`check_environment` checks everything at once.
"""
from __future__ import annotations

import importlib.resources
import ntpath
import os
import posixpath
import random
import re
import sys
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from .errors import ConfigError
from .memory import threshold_setting

SCALES = ("ci", "cpu", "gpu")
DEFAULT_SCALE = "cpu"  # paper-sized runs (gpu) take hours: asked for by name, never picked for a device
EMBEDDED = "embedded"
DATASETS = (EMBEDDED, "ptb", "wikitext-2", "tinyshakespeare")  # the corpora known by name
# the installed (or checked-out) package's own folder, as importlib.resources gives it
PACKAGE = Path(str(importlib.resources.files(__package__))).resolve()
COURSE_FILES = "_course"  # in a wheel: the lessons and the committed runs, under the package (see course_folder)


def checkout(package: Optional[Path] = None) -> Optional[Path]:
    """The clone of the repository the package runs from (an editable install, or the source tree on the path),
    or None when the package is installed (from a wheel, under ``site-packages``).

    A clone is recognised by its ``pyproject.toml`` naming the project ``lmcourse`` beside the package."""
    root = Path(package or PACKAGE).parent
    try:
        text = (root / "pyproject.toml").read_text(encoding="utf-8")
    except OSError:
        return None
    return root if re.search(r'^name\s*=\s*"lmcourse"\s*$', text, re.M) else None


def course_folder(name: str) -> Path:
    """The course's folder ``name`` (``"reference_runs"`` or ``"notebooks"``): the clone's own, where the package
    runs from one, else the copy the wheel installs under the package (``lmcourse/_course/<name>``).

    pyproject.toml maps the clone's top-level folders into the wheel there, so the lessons and their
    committed runs are found wherever the package is installed."""
    if name not in ("reference_runs", "notebooks"):
        raise ValueError(f"{name!r} is not a folder of the course: use 'reference_runs' or 'notebooks'.")
    root = checkout()
    if root is not None:
        return root / name
    return PACKAGE / COURSE_FILES / name


def _repo_data() -> Optional[Path]:
    root = checkout()
    return None if root is None else root / "data"


# A clone keeps its cache in its own data/ (git-ignored, described by data/README.md); an installed package has
# none, and its cache goes to the user's cache folder: nothing is ever written under site-packages.
REPO_DATA = _repo_data()


def user_cache_dir(platform: Optional[str] = None, environ: Optional[dict] = None,
                   home: Optional[Path] = None) -> Path:
    """The platform's per-user cache folder for the course (``platform``, ``environ`` and ``home`` default to
    this machine's): Linux and other Unixes ``$XDG_CACHE_HOME/lmcourse`` (an absolute one), else
    ``~/.cache/lmcourse``; macOS ``~/Library/Caches/lmcourse``; Windows ``%LOCALAPPDATA%\\lmcourse\\Cache``,
    else ``~\\AppData\\Local\\lmcourse\\Cache``. ``home`` is read only when needed."""
    platform = sys.platform if platform is None else platform
    environ = os.environ if environ is None else environ
    if platform.startswith("win"):
        local = environ.get("LOCALAPPDATA", "")
        base = Path(local) if local and ntpath.isabs(local) else (home or Path.home()) / "AppData" / "Local"
        return base / "lmcourse" / "Cache"
    if platform == "darwin":
        return (home or Path.home()) / "Library" / "Caches" / "lmcourse"
    xdg = environ.get("XDG_CACHE_HOME", "")
    if xdg and posixpath.isabs(xdg):  # the XDG spec: a relative value is ignored
        return Path(xdg) / "lmcourse"
    return (home or Path.home()) / ".cache" / "lmcourse"


def scale() -> str:
    """The scale ``LMCOURSE_SCALE`` asks for now (default ``cpu``, with or without CUDA)."""
    value = os.environ.get("LMCOURSE_SCALE") or DEFAULT_SCALE
    if value not in SCALES:
        raise ConfigError(f"LMCOURSE_SCALE={value!r} is not a scale: set it to one of {', '.join(SCALES)}, "
                          "or unset it.")
    return value


def dataset() -> str:
    """The corpus ``LMCOURSE_DATASET`` names now (default: the embedded corpus): a name of :data:`DATASETS`
    or a folder holding the three splits, else a :class:`ConfigError`."""
    value = os.environ.get("LMCOURSE_DATASET") or EMBEDDED
    folder = Path(value).expanduser()
    if value not in DATASETS and not all((folder / f"{split}.txt").is_file() for split in ("train", "valid", "test")):
        raise ConfigError(f"LMCOURSE_DATASET={value!r} is not a corpus: set it to one of {', '.join(DATASETS)} or to a "
                          "folder holding train.txt, valid.txt and test.txt, or unset it.")
    if os.environ.get("LMCOURSE_CACHE"):  # every corpus is generated, downloaded or cached there: say so now
        cache_dir()
    return value


def device() -> torch.device:
    """The one device of the run: ``LMCOURSE_DEVICE`` when set, else CUDA when it is there, else the CPU.

    ``LMCOURSE_DEVICE`` = ``cpu`` | ``cuda`` | ``cuda:N`` | ``mps`` (a student on a GPU machine may still run on
    the CPU; ``mps`` is an Apple GPU, used only when named, and only where torch reports one). A value that is not
    a device, or names a GPU this machine lacks, raises a :class:`ConfigError`.
    """
    raw = os.environ.get("LMCOURSE_DEVICE", "").strip()
    if not raw:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return _named_device(raw)


def _named_device(raw: str) -> torch.device:
    """The device ``LMCOURSE_DEVICE=raw`` names, checked against this machine."""
    kind, colon, index = raw.partition(":")
    if kind not in ("cpu", "cuda", "mps") or (colon and not index.isdigit()) or (kind in ("cpu", "mps") and colon):
        raise ConfigError(f"LMCOURSE_DEVICE={raw!r} is not a device: set it to cpu, cuda or cuda:N (N a GPU number), "
                          "or mps (an Apple GPU), or unset it.")
    if kind == "cpu":
        return torch.device("cpu")
    if kind == "mps":
        if not _mps_available():
            raise ConfigError("LMCOURSE_DEVICE='mps' names an Apple GPU, and torch reports none on this machine "
                              "(torch.backends.mps.is_available() is False): set it to cpu, or unset it.")
        return torch.device("mps")
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if int(index or 0) >= count:
        have = f"GPUs 0 to {count - 1}" if count else "no CUDA GPU"
        raise ConfigError(f"LMCOURSE_DEVICE={raw!r} names a GPU this machine lacks (it has {have}): set it to cpu "
                          "or to one of its GPUs, or unset it.")
    return torch.device(raw)


def _mps_available() -> bool:
    """Whether torch reports an Apple GPU it can use (``torch.backends.mps.is_available()``)."""
    mps = getattr(torch.backends, "mps", None)
    return bool(mps is not None and mps.is_available())


def host(t) -> np.ndarray:
    """A tensor as a NumPy array on the host, for NumPy and matplotlib: ``t.detach().cpu().numpy()``.

    The one place where a lesson's tensors leave the device; anything that is not a tensor is passed
    through ``np.asarray``.
    """
    if isinstance(t, torch.Tensor):
        return t.detach().cpu().numpy()
    return np.asarray(t)


def set_tf32(enabled: bool) -> None:
    """Let CUDA matrix products and cuDNN use TF32 (10-bit mantissa inputs, float32 accumulation) or not.

    An explicit setting: torch's default leaves matmul TF32 off and cuDNN's on. Harmless without CUDA.
    """
    if not isinstance(enabled, bool):
        raise TypeError(f"set_tf32 takes True or False, not {enabled!r}.")
    torch.backends.cuda.matmul.allow_tf32 = enabled
    torch.backends.cudnn.allow_tf32 = enabled


def cpu_kernels() -> str:
    """What this CPU's kernels can use, as torch reports it, in words: ATen's instruction set
    (``torch.backends.cpu.get_cpu_capability()``, after ``ATEN_CPU_CAPABILITY``) and whether oneDNN
    takes bfloat16 (after ``ONEDNN_MAX_CPU_ISA``), e.g. ``"AVX2, oneDNN without bfloat16"``."""
    return f"{torch.backends.cpu.get_cpu_capability()}, oneDNN {'with' if _onednn_bf16() else 'without'} bfloat16"


def _onednn_bf16() -> bool:
    """oneDNN's own answer: True when its effective instruction set (after ``ONEDNN_MAX_CPU_ISA``) has
    bfloat16 kernels, AVX-512 or newer. A torch build without oneDNN, or without this report, counts as no."""
    try:
        return bool(torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def cpu_bf16_kernels() -> bool:
    """Whether this CPU's kernels take bfloat16, decided by what torch reports (never by trying a kernel):
    oneDNN says its kernels take bfloat16 (``torch.ops.mkldnn._is_mkldnn_bf16_supported()``) and ATen's
    kernels were chosen for AVX-512 (``torch.backends.cpu.get_cpu_capability()``). False on a CPU with AVX2
    and no AVX-512 (most AMD laptops, many older Intel ones), or where ``ONEDNN_MAX_CPU_ISA`` or
    ``ATEN_CPU_CAPABILITY`` limits torch to AVX2. There, torch's fused LSTM has no bfloat16 kernel under
    autocast, and the trainer's ``bf16`` runs it in float32 (:mod:`lmcourse.training.precision`)."""
    return _onednn_bf16() and torch.backends.cpu.get_cpu_capability().startswith("AVX512")


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


def _not_a_folder(variable: str, path: Path) -> Optional[str]:
    """Why ``path`` (named by ``variable``) cannot hold files, or None when it can."""
    if path.exists() and not path.is_dir():
        return f"{variable}={path} is a file, not a folder: point it at a folder, or unset it."
    blocker = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
    if blocker is not None:
        return f"{variable}={path} lies under {blocker}, which is a file: point it at a folder, or unset it."
    if not writable(path):
        return (f"{variable}={path} is not a folder this program can write to: point it at a writable folder, "
                "or unset it.")
    return None


def cache_dir() -> Path:
    """A writable folder for generated corpora, downloads and stored runs: ``LMCOURSE_CACHE``, else a clone's
    ``data/``, else the user's cache folder (:func:`user_cache_dir`); a :class:`ConfigError` when none is usable.
    An installed package never writes under its own folder (``site-packages``)."""
    env = os.environ.get("LMCOURSE_CACHE")
    if env:
        why = _not_a_folder("LMCOURSE_CACHE", Path(env).expanduser())
        if why:
            raise ConfigError(why)
        return Path(env).expanduser()
    if REPO_DATA is not None and writable(REPO_DATA):
        return REPO_DATA
    try:
        folder = user_cache_dir()
    except (RuntimeError, KeyError, OSError):  # no HOME and no password entry
        why = f"{REPO_DATA} is read-only and the" if REPO_DATA is not None else "The"
        raise ConfigError(f"{why} home folder is unknown, so there is no cache folder: set LMCOURSE_CACHE to a "
                          "writable folder.") from None
    if not writable(folder):
        where = f"Neither {REPO_DATA} nor {folder} can" if REPO_DATA is not None else f"The cache folder {folder} cannot"
        raise ConfigError(f"{where} be written to: set LMCOURSE_CACHE to a writable folder.")
    return folder


def data_dir() -> Path:
    """Where the real corpora are looked for first (``LMCOURSE_DATA``, else the cache folder)."""
    env = os.environ.get("LMCOURSE_DATA")
    if not env:
        return cache_dir()
    path = Path(env).expanduser()
    if path.exists() and not path.is_dir():
        raise ConfigError(f"LMCOURSE_DATA={path} is a file, not a folder: point it at the folder that holds "
                          "ptb/, wikitext-2/ or tinyshakespeare/, or unset it.")
    return path


try:
    SCALE = scale()
except ConfigError:  # left undefined: __getattr__ below raises the sentence when it is read
    pass
try:
    DATASET = dataset()  # (reads cache_dir, defined above)
except ConfigError:  # the same
    pass


def __getattr__(name: str):
    if name == "SCALE":
        return scale()  # only reached when LMCOURSE_SCALE is unusable: raises ConfigError
    if name == "DATASET":
        return dataset()  # the same for LMCOURSE_DATASET
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


YES, NO = ("1", "true", "yes", "on"), ("", "0", "false", "no", "off")  # the values of a switch, any case


def switch(name: str) -> bool:
    """The on/off setting ``name`` (``LMCOURSE_RETRAIN``, ``LMCOURSE_STORE_REFERENCE``): on for 1, true, yes, on;
    off for 0, false, no, off or unset; anything else is a :class:`ConfigError`, never read as on."""
    raw = os.environ.get(name, "").strip()
    if raw.lower() in YES:
        return True
    if raw.lower() in NO:
        return False
    raise ConfigError(f"{name}={raw!r} is not a switch: set it to 1 (or true, yes, on), 0 (or false, no, off), or "
                      "unset it.")


SWITCHES = ("LMCOURSE_RETRAIN", "LMCOURSE_STORE_REFERENCE")


DIST_TIMEOUT_S = 300.0  # default of LMCOURSE_DIST_TIMEOUT


def dist_timeout() -> float:
    """Seconds a process of a ``torchrun`` job waits for the others (``LMCOURSE_DIST_TIMEOUT``, default 300)."""
    raw = os.environ.get("LMCOURSE_DIST_TIMEOUT", "").strip()
    if not raw:
        return DIST_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not (value > 0 and value < float("inf")):
        raise ConfigError(f"LMCOURSE_DIST_TIMEOUT={raw!r} is not a number of seconds > 0: set it to, say, 600, or "
                          f"unset it for {DIST_TIMEOUT_S:g}.")
    return value


DIST_BACKENDS = ("nccl", "gloo")


def dist_backend() -> Optional[str]:
    """The process-group backend ``LMCOURSE_DIST_BACKEND`` names (``nccl`` or ``gloo``), or None for the default
    (NCCL with CUDA, else gloo). gloo also carries CUDA tensors: two processes on one GPU, which NCCL refuses."""
    raw = os.environ.get("LMCOURSE_DIST_BACKEND", "").strip().lower()
    if not raw:
        return None
    if raw not in DIST_BACKENDS:
        raise ConfigError(f"LMCOURSE_DIST_BACKEND={raw!r} is not a backend: set it to nccl or gloo, or unset it.")
    return raw


def check_environment() -> None:
    """Raise a :class:`ConfigError` for the first unusable ``LMCOURSE_*`` setting, if any."""
    scale()
    dataset()
    device()
    dist_timeout()
    dist_backend()
    threshold_setting()
    for name in SWITCHES:
        switch(name)
    if os.environ.get("LMCOURSE_CACHE"):
        cache_dir()
    if os.environ.get("LMCOURSE_DATA"):
        data_dir()


def by_scale(ci, cpu, gpu, scale: Optional[str] = None):
    """The value for ``scale`` (default: the current one): ``by_scale(ci=1, cpu=5, gpu=40)``.

    The course's one way to write a value per scale, in the lessons and in the package alike."""
    if scale is None:
        scale = globals()["SCALE"] if "SCALE" in globals() else globals()["scale"]()
    if scale not in SCALES:
        raise ValueError(f"scale={scale!r} is not a scale: use one of {', '.join(SCALES)}.")
    return {"ci": ci, "cpu": cpu, "gpu": gpu}[scale]
