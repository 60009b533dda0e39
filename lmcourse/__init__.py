"""lmcourse: the implementations behind the course's lessons.

Importing the package first sets a passive OpenMP wait policy. On a small machine, torch's
default spinning worker threads slow down many-fold whenever another process (a Jupyter
server, a second test) holds a core; waiting passively avoids that. It only takes effect when
lmcourse is imported before torch, which is what every notebook does.

It also fixes glibc's mmap threshold (:mod:`lmcourse.memory`), so that training on the CPU does not
grow the heap by one logits buffer per batch. In a Jupyter kernel (a lesson) it shows warnings as one
sentence, without the source file Python names before them (:func:`lmcourse.errors.one_line_warning`), so
that a saved lesson's outputs carry no folder of the machine that ran it.
"""
import os as _os
import sys as _sys

_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from .memory import limit_heap_growth as _limit_heap_growth  # noqa: E402

_limit_heap_growth()

if "ipykernel" in _sys.modules:  # a lesson: its warnings are saved with its outputs
    import warnings as _warnings

    from .errors import one_line_warning as _one_line_warning  # noqa: E402

    _warnings.showwarning = _one_line_warning

from . import config as _config  # noqa: E402
from .config import device, seed_everything  # noqa: E402
from .lm import LanguageModel, bits_per_char, perplexity  # noqa: E402
from .vocab import Vocab  # noqa: E402

__all__ = [
    "DATASET", "SCALE", "device", "seed_everything",
    "Vocab", "LanguageModel", "perplexity", "bits_per_char",
]
__version__ = "1.0.0"  # the one place the version is written: pyproject.toml reads it


def __getattr__(name: str):
    """``lmcourse.SCALE`` and ``lmcourse.DATASET`` are read from the config on use, so a bad
    LMCOURSE_SCALE or LMCOURSE_DATASET never stops the import."""
    if name in ("SCALE", "DATASET"):
        return getattr(_config, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
